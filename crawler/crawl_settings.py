"""The Scrapy settings a crawl runs with, built from the configuration in force, and what
only Scrapy knows about settings (the names it defines). Core's schema
(gpuradar.core.config) checks the file without loading Scrapy; this is the crawler's side."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any

from gpuradar.core import providers
from gpuradar.core.config import (
    SCRAPY_SETTINGS_MODULE,
    Config,
    SourceOptions,
    source_model,
    validate_section,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings, Settings

# Scrapy is imported inside the functions: every command imports this module, and most of
# them (prices, history, --help) never build Scrapy settings.


@cache
def scrapy_defaults() -> dict[str, Any]:
    """Every setting Scrapy and the project's settings module define, with its value."""
    from scrapy.settings import Settings

    settings = Settings()
    settings.setmodule(SCRAPY_SETTINGS_MODULE, priority="project")
    return {name: settings[name] for name in settings.attributes}


def scrapy_setting_names() -> set[str]:
    """The names of scrapy_defaults(): what load_config asks to word a refused setting."""
    return set(scrapy_defaults())


def scrapy_settings(config: Config, **overrides: Any) -> Settings:
    """Scrapy settings for crawling with this configuration."""
    from scrapy.utils.project import get_project_settings

    from gpuradar.storage.index import params_from

    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", SCRAPY_SETTINGS_MODULE)
    settings = get_project_settings()
    settings.set("GPURADAR_DATABASE_URL", config.database_url, priority="cmdline")
    # every source's options as the schema checked them at load, defaults included (read
    # with source_options): no crawl checks them again
    settings.set("GPURADAR_SOURCES", dict(config.options), priority="cmdline")
    settings.set("GPURADAR_ENDPOINTS", config.endpoints, priority="cmdline")
    # the market index's parameters: its staleness is the alerts' (as for rules, `sources`)
    settings.set("GPURADAR_INDEX_PARAMS", params_from(config.alerts).as_dict(),
                 priority="cmdline")
    for key, value in config.scrapy.written().items():
        settings.set(key, value, priority="cmdline")
    for key, value in overrides.items():
        if value is not None:
            settings.set(key, value, priority="cmdline")
    return settings


def source_options(settings: BaseSettings, name: str) -> SourceOptions:
    """Source `name`'s options from the GPURADAR_SOURCES setting: the checked model that
    scrapy_settings put there, or its defaults. A plain mapping (`scrapy crawl -s`, a test)
    is checked by the same schema here; ConfigError names the bad key."""
    value = (settings.getdict("GPURADAR_SOURCES") or {}).get(name)
    if isinstance(value, SourceOptions):
        return value
    return validate_section(source_model(name), value or {}, ("sources", name))


def source_status(settings: BaseSettings, name: str) -> tuple[bool, str]:
    """Whether source `name` runs with these Scrapy settings, and why: its declaration's
    status (gpuradar.core.providers) with the options and the recording
    (GPURADAR_REPLAY_DIR) the settings hold."""
    replay = settings.get("GPURADAR_REPLAY_DIR")
    return providers.get(name).status(source_options(settings, name), replay)
