"""What the daemon schedules, derived from the configuration: per-source intervals, jitter,
timeouts and backoff, plus the `daemon:` and `metrics:` options with their defaults.

Pure functions with no reactor or scheduler, so they are checked in-process and a reload
can validate a new configuration completely before anything is changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpuradar.core import defaults, units
from gpuradar.core.config import (
    KINDS,  # noqa: F401  (the daemon's interval groups)
    Config,
    ConfigError,
    DaemonSection,
    MetricsSection,
    validate_section,
)
from gpuradar.core.sources import source_kind
from gpuradar.core.units import format_duration

# The sections as the schema (gpuradar.core.config) defines them, durations in seconds.
DaemonOptions = DaemonSection
MetricsOptions = MetricsSection
DAEMON_DEFAULTS: dict[str, Any] = DaemonSection().model_dump()
METRICS_DEFAULTS: dict[str, Any] = MetricsSection().model_dump()
DEFAULT_CRAWL_TIMEOUT = defaults.CRAWL_TIMEOUT


def parse_duration(value: Any, where: str) -> float:
    """Seconds from 300, "90s", "5m", "1h30m", "1d"; ConfigError naming `where`."""
    try:
        return units.parse_duration(value).total_seconds()
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def daemon_options(cfg: Config) -> DaemonOptions:
    """The `daemon:` section, as the schema checked it when the configuration loaded."""
    return cfg.daemon


def metrics_options(cfg: Config, address: str | None = None,
                    port: int | None = None) -> MetricsOptions:
    """The `metrics:` section; command-line values win (checked like the file's, an error
    naming the option)."""
    if address is None and port is None:
        return cfg.metrics
    marks = cfg.located()
    data = cfg.metrics.written()
    if address is not None:
        data["address"] = address
        marks.origins[("metrics", "address")] = "--metrics-address"
    if port is not None:
        data["port"] = port
        marks.origins[("metrics", "port")] = "--metrics-port"
    return validate_section(MetricsSection, data, ("metrics",), marks)


@dataclass(frozen=True)
class SourcePlan:
    """How one source is scheduled."""

    name: str
    interval: float
    jitter: float
    timeout: float
    misfire_grace: int

    def describe(self) -> str:
        return (f"every {format_duration(self.interval)}"
                + (f" (+ up to {format_duration(self.jitter)} jitter)"
                   if self.jitter else "")
                + f", timeout {format_duration(self.timeout)}")


def plan_source(cfg: Config, name: str, default_interval: float, opts: DaemonOptions,
                interval_override: float | None = None,
                default_timeout: float = DEFAULT_CRAWL_TIMEOUT) -> SourcePlan:
    """Interval: `sources.<name>.interval` > `daemon.intervals.<kind>` > the spider's
    default_interval (--interval overrides all). Jitter: `sources.<name>.jitter` >
    `daemon.jitter` > 10 % of the interval (at most 5 min). Timeout:
    `sources.<name>.timeout` > `daemon.crawl_timeout` > Scrapy's CLOSESPIDER_TIMEOUT."""
    opts_here = cfg.source_options(name)
    if interval_override is not None:
        interval = interval_override
    elif opts_here.interval is not None:
        interval = opts_here.interval
    elif source_kind(name) in opts.intervals:
        interval = opts.intervals[source_kind(name)]
    else:
        interval = float(default_interval)
    if opts_here.jitter is not None:
        jitter = opts_here.jitter
    elif opts.jitter is not None:
        jitter = opts.jitter
    else:
        jitter = min(interval * 0.1, 300.0)
    if opts_here.timeout is not None:
        timeout = opts_here.timeout
    else:
        timeout = opts.crawl_timeout or default_timeout
    grace = opts.misfire_grace if opts.misfire_grace is not None else interval / 2
    return SourcePlan(name, interval, jitter, timeout, max(1, math.ceil(grace)))


def backoff_delay(interval: float, failures: int, cap: float) -> float:
    """Seconds until the next crawl of a source after `failures` consecutive failed crawls:
    its interval after the first, then doubling, at most max(cap, interval)."""
    if failures <= 1:
        return interval
    return min(interval * 2 ** min(failures - 1, 30), max(cap, interval))


def first_run(last_success: datetime | None, interval: float, now: datetime) -> datetime:
    """When a source runs first after start: at once when its last success is older than
    its interval (or there is none), else when the interval since it has passed."""
    if last_success is None:
        return now
    due = last_success + timedelta(seconds=interval)
    return now if due <= now else due
