"""Where gpuradar keeps its data and finds its configuration, and the environment variables
that stand for keys of the file."""

from __future__ import annotations

import os
from pathlib import Path

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
