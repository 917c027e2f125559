"""The configuration in force: the file (if any) read with its locations, the environment
variables that set keys of it and the command line's database URL, checked by the schema
once."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuradar.core.config.errors import (
    ConfigError,
    Key,
    Marks,
    SettingNames,
    shown,
    validate_section,
)
from gpuradar.core.config.paths import (
    ENV_KEYS,
    SCRAPY_SETTINGS_MODULE,
    default_config_path,
    default_database_url,
)
from gpuradar.core.config.sections import KNOWN_KEYS, ScrapySection, schema
from gpuradar.core.config.yamlfile import read_yaml


@dataclass
class Config:
    """The configuration in force: each section as the file wrote it (expanded, checked)."""

    database_url: str
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    endpoints: dict[str, str] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    rules: list[Any] = field(default_factory=list)
    rules_file: Path | None = None
    alerts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    daemon: dict[str, Any] = field(default_factory=dict)
    scrapy: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    marks: Marks | None = None

    def source_options(self, name: str) -> dict[str, Any]:
        return dict(self.sources.get(name) or {})

    def located(self) -> Marks:
        return self.marks or Marks(path=self.path)

    def where(self, *keys: str | int) -> str:
        """'file:line' of a key (or the environment variable that set it)."""
        return self.located().where(keys)

    def error(self, keys: Key, message: str) -> ConfigError:
        """A ConfigError about the key at `keys`, located."""
        return ConfigError(self.located().problem(keys, message))


def _env_value(keys: Key, text: str) -> Any:
    if keys == ("metrics", "port"):
        try:
            return int(text)
        except ValueError:
            return text
    return text


def load_config(path: Path | str | None = None, *, database_url: str | None = None,
                scrapy_names: SettingNames | None = None) -> Config:
    """Read the config file (if any) and the environment, and check them against the schema.

    `database_url` is the command line's (it wins over GPURADAR_DATABASE_URL and the file).
    `scrapy_names` tells a Scrapy setting gpuradar refuses from a misspelt one in `scrapy:`
    (gpuradar.crawler.config.scrapy_setting_names; core itself never loads Scrapy)."""
    check_settings_module()
    path = Path(path) if path else default_config_path()
    marks = Marks(path=path)
    raw: Any = {}
    if path is not None:
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        raw = read_yaml(path, marks)
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of keys "
                              f"({', '.join(KNOWN_KEYS)})")
    for env, keys in ENV_KEYS.items():
        value = os.environ.get(env)
        if value:
            section = raw
            for k in keys[:-1]:
                section = section.setdefault(k, {}) if isinstance(section, dict) else None
            if isinstance(section, dict):
                section[keys[-1]] = _env_value(keys, value)
                marks.origins[keys] = f"environment variable {env}"
    if database_url:
        raw["database_url"] = database_url
        marks.origins[("database_url",)] = "--database-url"
    model = validate_section(schema(), raw, (), marks, scrapy_names=scrapy_names)
    rules_file = Path(model.rules_file) if model.rules_file else None
    if rules_file is not None and not rules_file.is_absolute() and path is not None:
        rules_file = path.parent / rules_file

    def section(name: str) -> Any:
        value = raw.get(name)
        return value if value is not None else ({} if name != "rules" else [])

    return Config(
        database_url=str(model.database_url or default_database_url()),
        sources={k: dict(v or {}) for k, v in section("sources").items()},
        endpoints={str(k): str(v) for k, v in section("endpoints").items()},
        targets=section("targets"), rules=list(section("rules")), rules_file=rules_file,
        alerts=section("alerts"), metrics=section("metrics"), daemon=section("daemon"),
        scrapy=section("scrapy"), path=path, marks=marks,
    )


def check_settings_module() -> None:
    """A SCRAPY_SETTINGS_MODULE other than gpuradar's must import, and the settings of it that
    the `scrapy:` section could set must pass the same checks; ConfigError in one line."""
    name = os.environ.get("SCRAPY_SETTINGS_MODULE")
    if not name or name == SCRAPY_SETTINGS_MODULE:
        return
    where = f"environment variable SCRAPY_SETTINGS_MODULE={shown((), name)}"
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - whatever the module raises, one line
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ConfigError(f"{where}: cannot be imported ({type(exc).__name__}: {detail}); "
                          f"unset it to use gpuradar's settings ({SCRAPY_SETTINGS_MODULE})"
                          ) from None
    values = {k: list(v) if isinstance(v, tuple) else v for k in ScrapySection.model_fields
              if (v := getattr(module, k, None)) is not None}
    marks = Marks(origins={(k,): f"{where} (module {module.__name__})" for k in values})
    validate_section(ScrapySection, values, (), marks)
