"""Where gpuradar keeps its data and finds its configuration, and the environment variables
that stand for keys of the file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

ENV_DATABASE_URL = "GPURADAR_DATABASE_URL"
ENV_CONFIG = "GPURADAR_CONFIG"
# Environment variables that set a key of the file (they win over it; the command line wins
# over them). Credentials have their own variables, declared by each provider.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    ENV_DATABASE_URL: ("database_url",),
    "GPURADAR_READ_DATABASE_URL": ("read_database_url",),
    "GPURADAR_METRICS_ADDRESS": ("metrics", "address"),
    "GPURADAR_METRICS_PORT": ("metrics", "port"),
    "GPURADAR_WEB_ADDRESS": ("web", "address"),
    "GPURADAR_WEB_PORT": ("web", "port"),
    "GPURADAR_WEB_ENABLED": ("web", "enabled"),
}
SCRAPY_SETTINGS_MODULE = "gpuradar.crawler.settings"


def data_dir() -> Path:
    return Path(os.environ.get("GPURADAR_DATA_DIR") or platformdirs.user_data_dir("gpuradar"))


def default_database_url() -> str:
    return os.environ.get(ENV_DATABASE_URL) or f"sqlite:///{data_dir() / 'gpuradar.db'}"


def default_config_path() -> Path | None:
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env)
    path = Path(platformdirs.user_config_dir("gpuradar")) / "config.yaml"
    return path if path.exists() else None


@dataclass(frozen=True)
class DatabaseOnly:
    """The configuration in force when nothing but the database is configured: no file, no
    variable of a key but GPURADAR_DATABASE_URL, gpuradar's own Scrapy settings. The schema
    would give every section its defaults, which hold no target, source option or secret:
    a command that only uses the database needs neither pydantic nor the schema for it
    (issue #54). Read as a Config is where it stands for one (its database, its secrets)."""

    database_url: str
    targets: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Any] = field(default_factory=dict)
    scrapy: None = None


def database_only(path: Path | str | None, database_url: str | None) -> DatabaseOnly | None:
    """The configuration when only the database is configured (`path`: the --config file,
    `database_url`: --database-url, as load_config takes them), else None: load_config."""
    if path or default_config_path() is not None:
        return None
    if any(os.environ.get(env) for env in ENV_KEYS if env != ENV_DATABASE_URL):
        return None
    if os.environ.get("SCRAPY_SETTINGS_MODULE") not in (None, "", SCRAPY_SETTINGS_MODULE):
        return None
    return DatabaseOnly(database_url or default_database_url())
