"""Configuration: one optional YAML file plus environment variables, checked by one schema.

Without any configuration gpuradar works: SQLite in the user data directory and every
source with a public endpoint enabled. Precedence: command-line option > environment
variable > config file > default.

Every command reads the file through `load_config`: YAML with the line of every key,
`${VAR}` / `${VAR:-default}` expanded in every value (`yamlfile`), then the pydantic schema
(`sections`, `values`: unknown keys at any depth with a suggestion, strict types, durations,
ports, URLs), so an error names the file, the line and the key (`errors`). What needs a
higher layer (apprise for target URLs, the rule grammar, the daemon's plans) is checked on
top of this by gpuradar.scheduler.setup, which every command that acts on the configuration
runs; the Scrapy settings a crawl runs with are built by gpuradar.crawler.crawl_settings.

The names below are imported from their module when first used (issue #54): a command
that only reads the database, with nothing configured but it, asks `paths` for its URL and
loads neither pydantic nor the schema.
"""

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuradar.core.config.errors import (
        ConfigError,
        Key,
        Marks,
        SettingNames,
        dotted,
        validate_section,
    )
    from gpuradar.core.config.load import Config, check_settings_module, load_config
    from gpuradar.core.config.paths import (
        ENV_CONFIG,
        ENV_DATABASE_URL,
        ENV_KEYS,
        SCRAPY_SETTINGS_MODULE,
        data_dir,
        default_config_path,
        default_database_url,
    )
    from gpuradar.core.config.sections import (
        KINDS,
        KNOWN_KEYS,
        AlertsSection,
        DaemonSection,
        MetricsSection,
        PlaywrightLaunch,
        ScrapySection,
        SourceOptions,
        TargetSpec,
        WebSection,
        known_endpoints,
        schema,
        source_model,
        source_option_types,
    )
    from gpuradar.core.config.values import MAX_REQUEST_INTERVAL, Section, one_of
    from gpuradar.core.config.yamlfile import (
        MAX_EXPANDED_CHARS,
        MAX_INT_DIGITS,
        MAX_SCALAR_CHARS,
        MAX_YAML_BYTES,
        MAX_YAML_DEPTH,
        MAX_YAML_NODES,
        expand_env,
        read_yaml,
    )

__all__ = [
    "ENV_CONFIG", "ENV_DATABASE_URL", "ENV_KEYS", "KINDS", "KNOWN_KEYS", "MAX_EXPANDED_CHARS",
    "MAX_INT_DIGITS", "MAX_REQUEST_INTERVAL",
    "MAX_SCALAR_CHARS", "MAX_YAML_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_NODES",
    "SCRAPY_SETTINGS_MODULE", "AlertsSection", "Config", "ConfigError", "DaemonSection", "Key",
    "Marks", "MetricsSection", "PlaywrightLaunch", "ScrapySection", "Section", "SettingNames",
    "WebSection",
    "SourceOptions", "TargetSpec", "check_settings_module", "data_dir", "default_config_path",
    "default_database_url", "dotted", "expand_env", "known_endpoints", "load_config",
    "one_of", "read_yaml", "schema", "source_model", "source_option_types", "validate_section",
]

#: The modules of the package, cheapest first: `paths` loads neither pydantic nor YAML.
_MODULES = ("paths", "errors", "values", "yamlfile", "sections", "load")


def __getattr__(name: str) -> Any:
    """`gpuradar.core.config.NAME`: imported from its module on first use."""
    if name in __all__:
        for module in _MODULES:
            __import__(f"{__name__}.{module}")  # not importlib's: -X importtime lists it
            found = sys.modules[f"{__name__}.{module}"].__dict__
            if name in found:
                globals()[name] = found[name]
                return found[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
