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

from gpuradar.core import units
from gpuradar.core.config import Config, ConfigError
from gpuradar.core.sources import source_kind

# Interval groups for `daemon.intervals.<kind>`; each spider names its own `kind`.
KINDS = ("marketplace", "lambda", "aws", "cloud", "fx")

DAEMON_DEFAULTS: dict[str, Any] = {
    "grace_period": 30.0,       # SIGTERM: how long running crawls may take to finish
    "crawl_timeout": None,      # None: Scrapy's CLOSESPIDER_TIMEOUT (900 s)
    "outbox_interval": 60.0,    # periodic retry of pending notifications
    "backoff_max": 6 * 3600.0,  # longest pause of a failing source
    "jitter": None,             # None: 10 % of the interval, at most 5 min
    "misfire_grace": None,      # None: half the interval
    "watch_interval": 10.0,     # poll the config/rules files for changes; 0: only SIGHUP
    "intervals": {},            # per kind: {marketplace: 5m, cloud: 1h, ...}
}
METRICS_DEFAULTS: dict[str, Any] = {"enabled": True, "address": "127.0.0.1", "port": 9108}
DEFAULT_CRAWL_TIMEOUT = 900.0
def parse_duration(value: Any, where: str) -> float:
    """Seconds from 300, "90s", "5m", "1h30m", "1d"; ConfigError naming `where`."""
    try:
        return units.parse_duration(value).total_seconds()
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _positive(value: Any, where: str) -> float:
    seconds = parse_duration(value, where)
    if seconds <= 0:
        raise ConfigError(f"{where}: must be more than 0 seconds, got {value!r}")
    return seconds


@dataclass(frozen=True)
class DaemonOptions:
    """The `daemon:` section, validated, durations in seconds."""

    grace_period: float
    crawl_timeout: float | None
    outbox_interval: float
    backoff_max: float
    jitter: float | None
    misfire_grace: float | None
    watch_interval: float
    intervals: dict[str, float]


def _with_defaults(section: dict | None, defaults: dict[str, Any], where: str
                   ) -> dict[str, Any]:
    """A config section over its defaults; an unknown key is an error naming it."""
    raw = dict(section or {})
    unknown = sorted(set(raw) - set(defaults))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: "
                          f"{', '.join(sorted(defaults))}")
    return {**defaults, **raw}


def daemon_options(cfg: Config) -> DaemonOptions:
    where = f"{cfg.path or '<defaults>'}: daemon"
    opts = _with_defaults(cfg.daemon, DAEMON_DEFAULTS, where)
    intervals = opts["intervals"] or {}
    if not isinstance(intervals, dict):
        raise ConfigError(f"{where}.intervals must be a mapping of kind: duration")
    bad = sorted(set(intervals) - set(KINDS))
    if bad:
        raise ConfigError(f"{where}.intervals: unknown kind(s) {', '.join(map(str, bad))}; "
                          f"kinds: {', '.join(KINDS)}")

    def maybe(key: str) -> float | None:
        return None if opts[key] is None else _positive(opts[key], f"{where}.{key}")

    jitter = None if opts["jitter"] is None else parse_duration(opts["jitter"], f"{where}.jitter")
    return DaemonOptions(
        grace_period=parse_duration(opts["grace_period"], f"{where}.grace_period"),
        crawl_timeout=maybe("crawl_timeout"),
        outbox_interval=_positive(opts["outbox_interval"], f"{where}.outbox_interval"),
        backoff_max=_positive(opts["backoff_max"], f"{where}.backoff_max"),
        jitter=jitter, misfire_grace=maybe("misfire_grace"),
        watch_interval=parse_duration(opts["watch_interval"], f"{where}.watch_interval"),
        intervals={k: _positive(v, f"{where}.intervals.{k}") for k, v in intervals.items()},
    )


@dataclass(frozen=True)
class MetricsOptions:
    enabled: bool
    address: str
    port: int


def metrics_options(cfg: Config, address: str | None = None,
                    port: int | None = None) -> MetricsOptions:
    """The `metrics:` section; command-line values win."""
    where = f"{cfg.path or '<defaults>'}: metrics"
    opts = _with_defaults(cfg.metrics, METRICS_DEFAULTS, where)
    if address is not None:
        opts["address"] = address
    if port is not None:
        opts["port"] = port
    if not isinstance(opts["enabled"], bool):
        raise ConfigError(f"{where}.enabled must be true or false")
    if not isinstance(opts["address"], str) or not opts["address"]:
        raise ConfigError(f"{where}.address must be a host name or IP address")
    try:
        port_n = int(opts["port"])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}.port must be a number, got {opts['port']!r}") from None
    if not 0 < port_n < 65536:
        raise ConfigError(f"{where}.port must be between 1 and 65535, got {port_n}")
    return MetricsOptions(opts["enabled"], opts["address"], port_n)


@dataclass(frozen=True)
class SourcePlan:
    """How one source is scheduled."""

    name: str
    interval: float
    jitter: float
    timeout: float
    misfire_grace: int

    def describe(self) -> str:
        return (f"every {human(self.interval)}"
                + (f" (+ up to {human(self.jitter)} jitter)" if self.jitter else "")
                + f", timeout {human(self.timeout)}")


def human(seconds: float) -> str:
    """'5m', '1h', '90s', '1.5s': durations in log lines."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds >= 120:
        return f"{seconds / 60:.0f}m"
    return f"{seconds:g}s"


def plan_source(cfg: Config, name: str, default_interval: float, opts: DaemonOptions,
                interval_override: float | None = None,
                default_timeout: float = DEFAULT_CRAWL_TIMEOUT) -> SourcePlan:
    """Interval: `sources.<name>.interval` > `daemon.intervals.<kind>` > the spider's
    default_interval (--interval overrides all). Jitter: `sources.<name>.jitter` >
    `daemon.jitter` > 10 % of the interval (at most 5 min). Timeout:
    `sources.<name>.timeout` > `daemon.crawl_timeout` > Scrapy's CLOSESPIDER_TIMEOUT."""
    where = f"{cfg.path or '<defaults>'}: sources.{name}"
    src = cfg.source_options(name)
    if interval_override is not None:
        interval = interval_override
    elif src.get("interval") is not None:
        interval = _positive(src["interval"], f"{where}.interval")
    elif source_kind(name) in opts.intervals:
        interval = opts.intervals[source_kind(name)]
    else:
        interval = float(default_interval)
    if src.get("jitter") is not None:
        jitter = parse_duration(src["jitter"], f"{where}.jitter")
    elif opts.jitter is not None:
        jitter = opts.jitter
    else:
        jitter = min(interval * 0.1, 300.0)
    if src.get("timeout") is not None:
        timeout = _positive(src["timeout"], f"{where}.timeout")
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
