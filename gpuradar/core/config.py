"""Configuration: one optional YAML file plus environment variables.

Without any configuration gpuradar works: SQLite in the user data directory and every
source with a public endpoint enabled. Precedence: command-line option > environment
variable > config file > default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

ENV_DATABASE_URL = "GPURADAR_DATABASE_URL"
ENV_CONFIG = "GPURADAR_CONFIG"

KNOWN_KEYS = {
    "database_url": "SQLAlchemy URL: sqlite:///path.db or postgresql://user:pw@host/db",
    "sources": "per-source options: enabled, interval, jitter, credentials, ...",
    "endpoints": "URL overrides, 'source.endpoint': URL (mirrors, tests)",
    "targets": "notification targets, name: apprise URL",
    "rules": "alert rules (readable strings or structured mappings)",
    "rules_file": "a YAML file with a `rules:` list, reloaded on SIGHUP",
    "alerts": "alert defaults: repeat, min_drop, send_resolved, stale_after, ...",
    "metrics": "daemon metrics endpoint: address, port",
    "daemon": "daemon options: grace_period, crawl_timeout, outbox_interval, ...",
    "scrapy": "extra Scrapy settings (advanced)",
}


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and the key."""


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


@dataclass
class Config:
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

    def source_options(self, name: str) -> dict[str, Any]:
        return dict(self.sources.get(name) or {})


def _mapping(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: `{key}` must be a mapping, got {type(value).__name__}")
    return value


def load_config(path: Path | str | None = None, *, database_url: str | None = None) -> Config:
    """Read the config file (if any) and the environment."""
    path = Path(path) if path else default_config_path()
    raw: dict[str, Any] = {}
    where = str(path) if path else "<defaults>"
    if path is not None:
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or exc
            raise ConfigError(f"{path}:{at}: not valid YAML: {problem}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of keys")
        unknown = sorted(set(raw) - set(KNOWN_KEYS))
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; "
                              f"known keys: {', '.join(sorted(KNOWN_KEYS))}")
    sources = _mapping(raw, "sources", where)
    for name, opts in sources.items():
        if opts is not None and not isinstance(opts, dict):
            raise ConfigError(f"{where}: sources.{name} must be a mapping")
    rules = raw.get("rules") or []
    if not isinstance(rules, list):
        raise ConfigError(f"{where}: `rules` must be a list")
    rules_file = raw.get("rules_file")
    if rules_file:
        rules_file = Path(rules_file)
        if not rules_file.is_absolute() and path is not None:
            rules_file = path.parent / rules_file
    url = (database_url or os.environ.get(ENV_DATABASE_URL) or raw.get("database_url")
           or default_database_url())
    return Config(
        database_url=str(url), sources={k: dict(v or {}) for k, v in sources.items()},
        endpoints={str(k): str(v) for k, v in _mapping(raw, "endpoints", where).items()},
        targets=_mapping(raw, "targets", where), rules=rules, rules_file=rules_file,
        alerts=_mapping(raw, "alerts", where), metrics=_mapping(raw, "metrics", where),
        daemon=_mapping(raw, "daemon", where), scrapy=_mapping(raw, "scrapy", where), path=path,
    )


def scrapy_settings(config: Config, **overrides: Any):
    """Scrapy settings for crawling with this configuration."""
    from scrapy.utils.project import get_project_settings

    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", "gpuradar.crawler.settings")
    settings = get_project_settings()
    settings.set("GPURADAR_DATABASE_URL", config.database_url, priority="cmdline")
    settings.set("GPURADAR_SOURCES", config.sources, priority="cmdline")
    settings.set("GPURADAR_ENDPOINTS", config.endpoints, priority="cmdline")
    for key, value in config.scrapy.items():
        settings.set(key, value, priority="cmdline")
    for key, value in overrides.items():
        if value is not None:
            settings.set(key, value, priority="cmdline")
    return settings
