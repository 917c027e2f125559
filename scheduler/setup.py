"""The configuration in force, loaded and checked as a whole: the file (through the schema
of gpuradar.core.config), the `alerts:` settings, the targets (apprise parses every URL),
the rules, the Scrapy settings and every source's schedule.

`gpuradar run` loads it at start and on every reload (a configuration that does not load
is rejected as a whole); `gpuradar config check`, `crawl`, `sources` and `rules check` load
the same, so a file one of them accepts is accepted by all, and one `run` would refuse is
refused by all of them. `check_setup` is the part that can refuse a file, without Scrapy:
`rules check` and `crawl` check with it (Scrapy's settings and spiders, built from a checked
file by `load_setup`, refuse nothing), so `rules check` starts without loading Scrapy. Each
source's status comes from its Scrapy-free declaration (gpuradar.core.providers), so
`sources` reads it with `sources_in_force`, without loading Scrapy either.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuradar.core import defaults, providers
from gpuradar.core.config import Config, load_config
from gpuradar.core.logs import config_secrets, credential_env_values
from gpuradar.core.sources import default_interval

if TYPE_CHECKING:  # imported where used: `rules check` loads no Scrapy
    from scrapy.settings import Settings

    from gpuradar.alerts.alert_settings import AlertSettings
    from gpuradar.alerts.loader import Targets
    from gpuradar.alerts.rules import Rule
    from gpuradar.crawler.spiders.base import GpuRadarSpider
from gpuradar.scheduler.jobs import (
    DaemonOptions,
    MetricsOptions,
    SourcePlan,
    daemon_options,
    metrics_options,
    plan_source,
)

log = logging.getLogger("gpuradar.daemon")


@dataclass
class RunOptions:
    """The command line of `gpuradar run` (the other commands use config and database_url)."""

    config: Path | None = None
    database_url: str | None = None
    replay: Path | None = None
    log_format: str = "text"
    log_level: str = "INFO"
    metrics_address: str | None = None
    metrics_port: int | None = None
    interval: float | None = None


@dataclass
class DaemonSetup:
    """Everything derived from one configuration; swapped as a whole on reload."""

    cfg: Config
    opts: DaemonOptions
    metrics: MetricsOptions
    rules: list[Rule]
    targets: Targets
    settings: Settings
    classes: dict[str, type[GpuRadarSpider]]
    plans: dict[str, SourcePlan]      # the sources that are scheduled
    skipped: dict[str, str]           # the others, and why
    secrets: set[str]
    schedule: dict[str, SourcePlan] | None = None   # every source, scheduled or not
    status: dict[str, tuple[bool, str]] | None = None  # enabled or not, and why
    alert_settings: AlertSettings | None = None  # the `alerts:` section's meaning, read once


@dataclass
class CheckedConfig:
    """The part of a configuration that can be refused, read and checked: what load_setup
    builds the crawler's side from (nothing of that can refuse a checked file)."""

    cfg: Config
    opts: DaemonOptions
    metrics: MetricsOptions
    rules: list[Rule]
    targets: Targets
    alert_settings: AlertSettings  # the `alerts:` section's meaning, read once


def check_setup(options: RunOptions, previous: DaemonSetup | None = None, *,
                rules: bool = True) -> CheckedConfig:
    """Read and check the whole configuration as load_setup does, without loading Scrapy
    (unless the file has a `scrapy:` section, whose keys only Scrapy can name): what
    `rules check` and `crawl` refuse a file with. Raises ConfigError/RuleError."""
    from gpuradar.alerts.loader import load_rules, load_settings, load_targets
    from gpuradar.crawler.crawl_settings import scrapy_setting_names  # calls Scrapy only when asked

    o = options
    cfg = load_config(o.config, database_url=o.database_url, scrapy_names=scrapy_setting_names)
    if previous is not None and cfg.database_url != previous.cfg.database_url:
        log.warning("database_url changed; the daemon keeps using the old database "
                    "until it is restarted")
        cfg.database_url = previous.cfg.database_url
    opts = daemon_options(cfg)
    mopts = metrics_options(cfg, o.metrics_address, o.metrics_port)
    if previous is not None and mopts != previous.metrics:
        log.warning("metrics settings changed; they take effect after a restart")
        mopts = previous.metrics
    alert_settings = load_settings(cfg)  # once per load: every evaluation uses it as it is
    targets = load_targets(cfg)
    loaded_rules = load_rules(cfg, targets, alert_settings) if rules else []
    return CheckedConfig(cfg, opts, mopts, loaded_rules, targets, alert_settings)


@dataclass
class SourcesInForce:
    """Every source's schedule and status under one configuration: what `gpuradar sources`
    shows, read from the providers' declarations without Scrapy (sources_in_force), and
    the part of a DaemonSetup that says what the daemon runs."""

    cfg: Config
    schedule: dict[str, SourcePlan]          # every source, scheduled or not
    status: dict[str, tuple[bool, str]]      # enabled or not, and why
    plans: dict[str, SourcePlan]             # the sources that are scheduled
    skipped: dict[str, str]                  # the others, and why


def plan_sources(checked: CheckedConfig, options: RunOptions, default_timeout: float
                 ) -> SourcesInForce:
    """Each source's schedule and status (its declaration's, gpuradar.core.providers), in
    name order, and which of them run: an enabled source with a recording when replaying."""
    o, cfg = options, checked.cfg
    replay = str(o.replay) if o.replay else None  # GPURADAR_REPLAY_DIR of the crawls
    found = SourcesInForce(cfg, {}, {}, {}, {})
    for name in sorted(providers.names()):
        found.schedule[name] = plan_source(cfg, name, default_interval(name), checked.opts,
                                           o.interval, default_timeout)
        enabled, why = found.status[name] = providers.get(name).status(
            cfg.source_options(name), replay)
        if not enabled:
            found.skipped[name] = why
            continue
        if o.replay and not (o.replay / name / "index.json").exists():
            found.skipped[name] = f"no recording in {o.replay}"
            continue
        found.plans[name] = found.schedule[name]
    return found


def sources_in_force(options: RunOptions, *, rules: bool = True) -> SourcesInForce:
    """The configuration checked as load_setup checks it (check_setup) and each source's
    schedule and status, without loading Scrapy: `gpuradar sources`. The crawl timeout's
    default is the `scrapy:` section's CLOSESPIDER_TIMEOUT, else the project's
    (defaults.CRAWL_TIMEOUT), as in the Scrapy settings load_setup builds."""
    checked = check_setup(options, rules=rules)
    timeout = checked.cfg.scrapy.CLOSESPIDER_TIMEOUT or defaults.CRAWL_TIMEOUT
    return plan_sources(checked, options, timeout)


def load_setup(options: RunOptions, previous: DaemonSetup | None = None, *,
               rules: bool = True) -> DaemonSetup:
    """Read and check the whole configuration (check_setup), then build the Scrapy settings
    and every source's schedule and status (plan_sources); raises ConfigError/RuleError and
    changes nothing, so a reload can reject a broken file and keep the running one.
    `rules=False` leaves the rules unparsed (`rules check` reports every bad rule itself)."""
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes

    o = options
    checked = check_setup(o, previous, rules=rules)
    cfg, opts, mopts = checked.cfg, checked.opts, checked.metrics
    overrides: dict[str, Any] = {"LOG_LEVEL": "DEBUG" if o.log_level.upper() == "DEBUG"
                                 else "INFO"}
    if o.replay:
        cfg.endpoints = {}
        # a recording answers at once: no politeness delay needed
        overrides |= {"GPURADAR_REPLAY_DIR": str(o.replay), "DOWNLOAD_DELAY": 0,
                      "AUTOTHROTTLE_ENABLED": False}
    # Crawls overlap in the daemon: their outcome must come from their own errors only,
    # which is what the StoragePipeline counts (not Scrapy's process-wide log_count).
    settings = scrapy_settings(cfg, **overrides)
    classes = spider_classes(settings)
    default_timeout = settings.getfloat("CLOSESPIDER_TIMEOUT") or defaults.CRAWL_TIMEOUT
    found = plan_sources(checked, o, default_timeout)
    secrets = config_secrets(cfg, credential_env_values())
    return DaemonSetup(cfg, opts, mopts, checked.rules, checked.targets, settings, classes,
                  found.plans, found.skipped, secrets, found.schedule, found.status,
                  checked.alert_settings)


def crawl_settings(loaded: DaemonSetup, plan: SourcePlan) -> Settings:
    """Settings of one crawl: the source's timeout closes a hung crawl. Scrapy waits for
    requests in flight when it closes a spider, so the download timeout is bounded too:
    a hung crawl ends at most 1.5 x its timeout after it started."""
    s = loaded.settings.copy()
    s.set("CLOSESPIDER_TIMEOUT", plan.timeout, priority="cmdline")
    s.set("DOWNLOAD_TIMEOUT", min(s.getfloat("DOWNLOAD_TIMEOUT") or defaults.DOWNLOAD_TIMEOUT,
                                  max(1.0, plan.timeout / 2)), priority="cmdline")
    return s
