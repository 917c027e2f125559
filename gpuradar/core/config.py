"""Configuration: one optional YAML file plus environment variables, checked by one schema.

Without any configuration gpuradar works: SQLite in the user data directory and every
source with a public endpoint enabled. Precedence: command-line option > environment
variable > config file > default.

Every command reads the file through `load_config`: YAML with the line of every key,
`${VAR}` / `${VAR:-default}` expanded in every value, then the pydantic schema below
(unknown keys at any depth with a suggestion, strict types, durations, ports, URLs), so an
error names the file, the line and the key. What needs a higher layer (apprise for target
URLs, the rule grammar, the daemon's plans) is checked on top of this by
gpuradar.scheduler.setup, which every command that acts on the configuration runs.
"""

from __future__ import annotations

import difflib
import importlib
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

import platformdirs
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gpuradar.core import defaults, providers, units
from gpuradar.core.logs import SECRET_NAMES  # option names whose values are secrets

ENV_DATABASE_URL = "GPURADAR_DATABASE_URL"
ENV_CONFIG = "GPURADAR_CONFIG"
# Environment variables that set a key of the file (they win over it; the command line wins
# over them). Credentials have their own variables, declared by each provider.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    ENV_DATABASE_URL: ("database_url",),
    "GPURADAR_METRICS_ADDRESS": ("metrics", "address"),
    "GPURADAR_METRICS_PORT": ("metrics", "port"),
}
SCRAPY_SETTINGS_MODULE = "gpuradar.crawler.settings"
# The daemon's interval groups (`daemon.intervals.<kind>`); each provider declares its `kind`.
KINDS = providers.KINDS

Key = tuple[str | int, ...]


class ConfigError(ValueError):
    """A configuration that cannot be used; each problem names the file, line and key.

    str() is the first problem (one line) and how many more there are; `problems` has all."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        text = self.problems[0] if self.problems else "invalid configuration"
        if len(self.problems) > 1:
            text += (f" (and {len(self.problems) - 1} more problem"
                     f"{'s' if len(self.problems) > 2 else ''}: `gpuradar config check` "
                     "lists them)")
        super().__init__(text)


def dotted(keys: Key) -> str:
    """('sources', 'azure', 'enabled') -> 'sources.azure.enabled'; list items as [n]."""
    out = ""
    for k in keys:
        out += f"[{k + 1}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


@dataclass
class Marks:
    """Where each key of the configuration came from: a line of the file, an environment
    variable, or the command line."""

    path: Path | None = None
    lines: dict[Key, int] = field(default_factory=dict)
    origins: dict[Key, str] = field(default_factory=dict)

    def where(self, keys: Key) -> str:
        """'/etc/gpuradar.yaml:12', 'environment variable GPURADAR_METRICS_PORT', ..."""
        for n in range(len(keys), 0, -1):
            if keys[:n] in self.origins:
                return self.origins[keys[:n]]
            if keys[:n] in self.lines and self.path is not None:
                return f"{self.path}:{self.lines[keys[:n]]}"
        return str(self.path) if self.path else "<defaults>"

    def line(self, keys: Key) -> int:
        """The line of the key (or of the nearest enclosing one); 0 when unknown."""
        for n in range(len(keys), 0, -1):
            if keys[:n] in self.lines:
                return self.lines[keys[:n]]
        return 0

    def problem(self, keys: Key, message: str) -> str:
        name = dotted(keys)
        return f"{self.where(keys)}: {name + ': ' if name else ''}{message}"


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


# -- value types -----------------------------------------------------------------------------
def _seconds(value: Any) -> float | None:
    """Durations: 300 (seconds), "90s", "5m", "1h30m", "2 days" -> seconds."""
    if value is None:
        return None
    return units.parse_duration(value).total_seconds()


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise ValueError("must be more than 0 seconds")
    return value


#: The longest pause between two requests to one host (DOWNLOAD_DELAY, request_interval).
MAX_REQUEST_INTERVAL = 300.0


def _at_most_delay(value: float | None) -> float | None:
    if value is not None and value > MAX_REQUEST_INTERVAL:
        raise ValueError(f"must be at most {MAX_REQUEST_INTERVAL:g} seconds (5 minutes), got "
                         f"{value:g}")
    return value


def _never_or_seconds(value: Any) -> Any:
    if value in (None, False, "never"):
        return value
    _seconds(value)
    return value


def _count_or_duration(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError("must be at least 1 evaluation, or a duration such as 10m")
        return value
    _seconds(value)
    return value


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value


def _positive_number(value: float) -> float:
    if value <= 0:
        raise ValueError("must be more than 0")
    return value


def one_of(words: str, *accepted: type) -> Any:
    """A value of one of several types (no bool unless named): `one_of("text or a list",
    str, list)`. One clear error instead of one per member of a union."""
    def check(value: Any) -> Any:
        if isinstance(value, accepted) and (bool in accepted or not isinstance(value, bool)):
            return value
        raise PydanticCustomError("type_words", "must be {words}", {"words": words})

    return Annotated[Any, AfterValidator(check)]


TextOrNumber = one_of("text or a number", str, int, float)


def _flat_texts(value: Any) -> Any:
    if isinstance(value, str) or (isinstance(value, list)
                                  and all(isinstance(v, str) for v in value)):
        return value
    raise PydanticCustomError("type_words", "must be {words}",
                              {"words": "text or a flat list of texts"})


TextOrTexts = Annotated[Any, AfterValidator(_flat_texts)]


Seconds = Annotated[float, BeforeValidator(_seconds)]
OptionalSeconds = Annotated[float | None, BeforeValidator(_seconds)]
PositiveSeconds = Annotated[float, BeforeValidator(_seconds), AfterValidator(_positive)]
OptionalPositiveSeconds = Annotated[float | None, BeforeValidator(_seconds),
                                    AfterValidator(_positive)]
PositiveNumber = Annotated[float, AfterValidator(_positive_number)]


class Section(BaseModel):
    """A mapping of the file: unknown keys are errors, types are strict (`"no"` is not a
    boolean, `"5"` is not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


# -- sections --------------------------------------------------------------------------------
class SourceOptions(Section):
    """Options every source takes; each provider declares its own options and credentials."""

    enabled: bool = True
    interval: OptionalPositiveSeconds = None
    jitter: OptionalSeconds = None
    timeout: OptionalPositiveSeconds = None
    # the least time between two requests to the source (the provider's default otherwise);
    # at most 5 minutes, as DOWNLOAD_DELAY: a longer one would outlast the crawl's timeout
    request_interval: Annotated[OptionalSeconds, AfterValidator(_at_most_delay)] = None
    # plausible USD per GPU-hour, [low, high]: prices outside are quarantined, never stored
    price_range: PriceRange | None = None
    # a crawl listing fewer than this share of the last one's offers closes nothing (0: off)
    shrink_guard: float | None = Field(None, ge=0, le=1)


class MetricsSection(Section):
    """`metrics:` the daemon's /metrics and /healthz."""

    enabled: bool = True
    address: str = Field("127.0.0.1", min_length=1)
    port: int = Field(9108, ge=1, le=65535)


class DaemonSection(Section):
    """`daemon:` durations in seconds; `intervals` per kind of source."""

    grace_period: Seconds = 30.0           # SIGTERM: how long running crawls may take
    stop_timeout: PositiveSeconds = 40.0   # SIGTERM: the whole stop, signal to exit
    crawl_timeout: OptionalPositiveSeconds = None   # None: Scrapy's CLOSESPIDER_TIMEOUT
    outbox_interval: PositiveSeconds = 60.0  # periodic retry of pending notifications
    backoff_max: PositiveSeconds = 6 * 3600.0  # longest pause of a failing source
    jitter: OptionalSeconds = None         # None: 10 % of the interval, at most 5 min
    misfire_grace: OptionalPositiveSeconds = None  # None: half the interval
    watch_interval: Seconds = 10.0         # poll the config/rules files; 0: only SIGHUP
    intervals: dict[str, PositiveSeconds] = {}  # per kind: {marketplace: 5m, ...}
    leader_retry: PositiveSeconds = 5.0     # PostgreSQL replicas: standbys try the lock this often
    takeover_within: PositiveSeconds = 30.0  # a lost leader is replaced within this

    @model_validator(mode="after")
    def _takeover_after_retries(self) -> DaemonSection:
        if self.takeover_within < 4 * self.leader_retry:
            raise ValueError(f"takeover_within must be at least 4 x leader_retry "
                             f"({4 * self.leader_retry:g}s), got {self.takeover_within:g}s")
        if self.grace_period >= self.stop_timeout:
            raise ValueError(f"grace_period ({self.grace_period:g}s) must be shorter than "
                             f"stop_timeout ({self.stop_timeout:g}s), the whole stop's budget")
        return self

    @field_validator("intervals", mode="before")
    @classmethod
    def _known_kinds(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for kind in value:
                if kind not in KINDS:
                    raise PydanticCustomError("unknown_key", "unknown kind of source",
                                              {"key": kind, "allowed": list(KINDS),
                                               "what": "kind"})
        return value


class AlertsSection(Section):
    """`alerts:` defaults of every rule, staleness and delivery. The meaning of each value
    is gpuradar.alerts' (checked there too); here: the keys and their types."""

    for_: Annotated[Any, AfterValidator(_count_or_duration)] = Field(
        1, alias="for")
    repeat: Annotated[Any, AfterValidator(_never_or_seconds)] = "never"
    min_drop: TextOrNumber = "5%"
    send_resolved: bool = False
    top: int = Field(5, ge=1)
    hysteresis: TextOrNumber = "2%"
    stale_after_failures: int = Field(3, ge=1)
    stale_after: Annotated[Any, AfterValidator(_never_or_seconds)] = "2d"
    notify_stale: one_of("true, false, or target names", bool, str, list) = False
    templates: str | None = None
    max_attempts: PositiveNumber = 8
    retry_backoff: PositiveNumber = 30
    send_timeout: PositiveNumber = defaults.SEND_TIMEOUT


def _target_form(value: Any) -> Any:
    """A target is an apprise URL, a list of them, or {url(s): ..., tags: ...}."""
    if isinstance(value, str):
        return {"urls": [value]}
    if isinstance(value, list):
        return {"urls": value}
    if not isinstance(value, dict):
        raise PydanticCustomError("type_words", "must be {words}", {
            "words": "an apprise URL, a list of them, or {url: ..., tags: [...]}"})
    return value


class TargetSpec(Section):
    url: str | None = None
    urls: TextOrTexts | None = None
    tags: TextOrTexts | None = None
    tag: TextOrTexts | None = None

    @model_validator(mode="after")
    def _has_url(self) -> TargetSpec:
        urls = self.urls or self.url
        urls = [urls] if isinstance(urls, str) else list(urls or [])
        if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise ValueError("has no URL (write name: apprise URL, a list of them, or "
                             "{url: ..., tags: [...]})")
        return self


def _rule_entry(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(f"a rule is a text or a mapping, not {type(value).__name__}")
    return value


def _price_range(value: list[float] | None) -> list[float] | None:
    """[low, high] in USD per GPU-hour: two finite numbers, 0 < low < high. The one check of
    `sources.<name>.price_range` and the GPURADAR_PRICE_RANGE Scrapy setting."""
    if value is None:
        return value
    if len(value) != 2 or not all(math.isfinite(v) for v in value) or \
            not 0 < value[0] < value[1]:
        raise ValueError("must be [low, high] in USD per GPU-hour with 0 < low < high, got "
                         f"{_shown((), value)}")
    return value


PriceRange = Annotated[list[float], AfterValidator(_price_range)]


def _between(low: float, high: float, *, above: bool = False, whole: bool = False) -> Any:
    """A number in [low, high] ((low, high] when `above`); a whole number when `whole`."""
    bound = Field(gt=low, le=high) if above else Field(ge=low, le=high)
    return Annotated[int if whole else float, bound]


def _one_line_text(value: str) -> str:
    if not value.strip() or "\n" in value or "\r" in value or len(value) > 500:
        raise ValueError("must be one line of text (at most 500 characters)")
    return value


class PlaywrightLaunch(Section):
    """PLAYWRIGHT_LAUNCH_OPTIONS: the options of Playwright's BrowserType.launch that make
    sense for a headless crawler (timeouts in milliseconds)."""

    executable_path: str | None = None
    headless: bool = True
    args: list[str] = []
    channel: str | None = None
    timeout: _between(0, 600_000, above=True) | None = None
    slow_mo: _between(0, 10_000) | None = None
    chromium_sandbox: bool | None = None
    env: dict[str, str] | None = None
    proxy: dict[str, str] | None = None


_ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"


class ScrapySection(Section):
    """`scrapy:` the Scrapy settings the config file may change, each with its type and
    range; every other setting is refused (Scrapy's component settings, the reactor, the
    database and the sources are gpuradar's own). Seconds unless the name says otherwise."""

    # politeness and concurrency (a delay beyond 5 minutes would outlast the crawl timeout)
    DOWNLOAD_DELAY: _between(0, MAX_REQUEST_INTERVAL) = None
    DOWNLOAD_DELAY_JITTER: _between(0, 1) = None
    CONCURRENT_REQUESTS: _between(1, 256, whole=True) = None
    CONCURRENT_REQUESTS_PER_DOMAIN: _between(1, 64, whole=True) = None
    CONCURRENT_ITEMS: _between(1, 10_000, whole=True) = None
    AUTOTHROTTLE_ENABLED: bool = None
    AUTOTHROTTLE_START_DELAY: _between(0, 300) = None
    AUTOTHROTTLE_MAX_DELAY: _between(0, 300) = None
    AUTOTHROTTLE_TARGET_CONCURRENCY: _between(0, 64, above=True) = None
    AUTOTHROTTLE_DEBUG: bool = None
    # timeouts
    DOWNLOAD_TIMEOUT: _between(0, 3600, above=True) = None
    CLOSESPIDER_TIMEOUT: _between(0, 86_400, above=True) = None
    DNS_TIMEOUT: _between(0, 600, above=True) = None
    DNSCACHE_ENABLED: bool = None
    # retries (gpuradar.crawler.middlewares.BackoffRetryMiddleware)
    RETRY_ENABLED: bool = None
    RETRY_TIMES: _between(0, 10, whole=True) = None
    RETRY_HTTP_CODES: list[_between(400, 599, whole=True)] = None
    RETRY_BACKOFF_BASE: _between(0, 60) = None
    RETRY_BACKOFF_MAX: _between(0, 3600, above=True) = None
    # sizes in bytes (0: no limit)
    DOWNLOAD_MAXSIZE: _between(0, 2**40, whole=True) = None
    DOWNLOAD_WARNSIZE: _between(0, 2**40, whole=True) = None
    # identity and proxies (HTTPPROXY_ENABLED reads the http(s)_proxy environment variables)
    USER_AGENT: Annotated[str, AfterValidator(_one_line_text)] = None
    DEFAULT_REQUEST_HEADERS: dict[str, str] = None
    HTTPPROXY_ENABLED: bool = None
    # the asyncio reactor is the only one gpuradar runs on (scrapy-playwright, the daemon)
    TWISTED_REACTOR: Literal[_ASYNCIO_REACTOR] = None
    # gpuradar's own (crawler/settings.py says what each does)
    GPURADAR_ANSWER_TIMEOUT: _between(0, 600, above=True) = None
    GPURADAR_CONNECT_ATTEMPTS: _between(1, 10, whole=True) = None
    GPURADAR_UNREACHABLE_AFTER: _between(0, 3600, above=True) = None
    GPURADAR_PRICE_RANGE: PriceRange = None
    GPURADAR_SHRINK_GUARD: _between(0, 1) = None
    GPURADAR_BATCH_SIZE: _between(1, 100_000, whole=True) = None
    # scrapy-playwright (milliseconds where the name says TIMEOUT)
    PLAYWRIGHT_BROWSER_TYPE: Literal["chromium", "firefox", "webkit"] = None
    PLAYWRIGHT_LAUNCH_OPTIONS: PlaywrightLaunch = None
    PLAYWRIGHT_MAX_CONTEXTS: _between(1, 32, whole=True) = None
    PLAYWRIGHT_MAX_PAGES_PER_CONTEXT: _between(1, 64, whole=True) = None
    PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT: _between(0, 600_000, above=True) = None

    @model_validator(mode="after")
    def _consistent(self) -> ScrapySection:
        base, cap = self.RETRY_BACKOFF_BASE, self.RETRY_BACKOFF_MAX
        if base is not None and cap is not None and base > cap:
            raise ValueError(f"RETRY_BACKOFF_BASE ({base:g}) must not exceed RETRY_BACKOFF_MAX "
                             f"({cap:g})")
        return self


# Settings the file has another way to say.
_SCRAPY_INSTEAD = {
    "GPURADAR_DATABASE_URL": "`database_url:` or --database-url",
    "GPURADAR_SOURCES": "the `sources:` section",
    "GPURADAR_ENDPOINTS": "the `endpoints:` section",
    "GPURADAR_RECORD_DIR": "`gpuradar crawl --record DIR`",
    "GPURADAR_REPLAY_DIR": "`gpuradar crawl --replay DIR` or `gpuradar run --replay DIR`",
    "LOG_LEVEL": "-v or `gpuradar run --log-level`",
    "RANDOMIZE_DOWNLOAD_DELAY": "DOWNLOAD_DELAY_JITTER (Scrapy deprecated this one)",
}


def scrapy_setting_problem(name: str) -> str:
    """Why `name` is refused in the `scrapy:` section: a Scrapy setting gpuradar does not let
    the file change, or a name Scrapy does not know."""
    supported = list(ScrapySection.model_fields)
    if name in _SCRAPY_INSTEAD:
        return (f"Scrapy setting {name!r} cannot be set in the config file; use "
                f"{_SCRAPY_INSTEAD[name]}")
    if name in scrapy_defaults() or name.startswith(("PLAYWRIGHT_", "GPURADAR_")):
        return (f"Scrapy setting {name!r} cannot be set in the config file (gpuradar relies on "
                "its own value; docs/configuration.md lists the settings that can be)")
    return f"unknown Scrapy setting {name!r} in scrapy{_suggest(name, supported, 'setting')}"


@cache
def scrapy_defaults() -> dict[str, Any]:
    """Every setting Scrapy and the project's settings module define, with its value."""
    from scrapy.settings import Settings

    settings = Settings()
    settings.setmodule(SCRAPY_SETTINGS_MODULE, priority="project")
    return {name: settings[name] for name in settings.attributes}


def source_option_types(provider: providers.Provider) -> dict[str, Any]:
    """A source's own options, name -> type: its declared `options` and its credentials
    (text)."""
    return provider.option_types()


def _endpoint_values(value: Any) -> Any:
    allowed = known_endpoints()
    for name in value if isinstance(value, dict) else ():
        if name not in allowed:
            raise PydanticCustomError("unknown_key", "unknown endpoint",
                                      {"key": name, "allowed": allowed, "what": "endpoint"})
    return value


@cache
def known_endpoints() -> list[str]:
    return sorted(f"{p.name}.{e}" for p in providers.PROVIDERS for e in p.endpoints)


@cache
def schema() -> type[BaseModel]:
    """The whole file: static sections plus one options model per source, built from the
    providers' declarations (gpuradar.core.providers)."""
    sources = {}
    for provider in providers.PROVIDERS:
        opts = {opt: (typ | None, None) for opt, typ in source_option_types(provider).items()}
        model = create_model(f"Source_{provider.name}", __base__=SourceOptions, **opts)
        sources[provider.name] = (model | None, None)
    sources_model = create_model("Sources", __base__=Section, **sources)
    return create_model(
        "ConfigFile", __base__=_Root,
        sources=(sources_model, Field(default_factory=sources_model,
                                      description=KNOWN_KEYS["sources"])),
    )


KNOWN_KEYS = {
    "database_url": "SQLAlchemy URL: sqlite:///path.db or postgresql://user:pw@host/db",
    "sources": "per-source options: enabled, interval, jitter, timeout, credentials, ...",
    "endpoints": "URL overrides, 'source.endpoint': URL (mirrors, tests)",
    "targets": "notification targets, name: apprise URL",
    "rules": "alert rules (readable strings or structured mappings)",
    "rules_file": "a YAML file with a `rules:` list, reloaded on SIGHUP",
    "alerts": "alert defaults: repeat, min_drop, send_resolved, stale_after, ...",
    "metrics": "daemon metrics endpoint: enabled, address, port",
    "daemon": "daemon options: grace_period, crawl_timeout, outbox_interval, ...",
    "scrapy": "extra Scrapy settings (advanced)",
}


class _Root(Section):
    """The top level of the file (`sources` is added per provider by schema())."""

    database_url: str | None = Field(None, description=KNOWN_KEYS["database_url"])
    endpoints: Annotated[dict[str, Annotated[str, AfterValidator(_http_url)]],
                         BeforeValidator(_endpoint_values)] = Field(
        {}, description=KNOWN_KEYS["endpoints"])
    targets: dict[str, Annotated[TargetSpec, BeforeValidator(_target_form)]] = Field(
        {}, description=KNOWN_KEYS["targets"])
    rules: list[Annotated[Any, AfterValidator(_rule_entry)]] = Field(
        [], description=KNOWN_KEYS["rules"])
    rules_file: str | None = Field(None, description=KNOWN_KEYS["rules_file"])
    alerts: AlertsSection = Field(default_factory=AlertsSection,
                                  description=KNOWN_KEYS["alerts"])
    metrics: MetricsSection = Field(default_factory=MetricsSection,
                                    description=KNOWN_KEYS["metrics"])
    daemon: DaemonSection = Field(default_factory=DaemonSection,
                                  description=KNOWN_KEYS["daemon"])
    scrapy: ScrapySection = Field(default_factory=ScrapySection,
                                  description=KNOWN_KEYS["scrapy"])

    NULLABLE: ClassVar[tuple[str, ...]] = ("sources", "endpoints", "targets", "rules",
                                           "alerts", "metrics", "daemon", "scrapy")

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        """`targets:` with nothing under it is an empty section, not an error."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in cls.NULLABLE)}
        return data


# -- errors ----------------------------------------------------------------------------------
def _unwrap(annotation: Any) -> Any:
    """The model or container inside Optional[...] / Annotated[...]."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else args[0]
        else:
            return annotation


def _model_at(root: type[BaseModel], keys: Key) -> Any:
    """The model (or dict) type that validates the mapping at `keys`."""
    current: Any = root
    for key in keys:
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {f.alias or n: f for n, f in current.model_fields.items()}
            fields.update(current.model_fields)
            if key not in fields:
                return None
            current = _unwrap(fields[key].annotation)
        elif typing.get_origin(current) in (dict, list):
            current = _unwrap(typing.get_args(current)[-1])
        else:
            return None
    return current


def _allowed_keys(model: Any) -> list[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or n for n, f in model.model_fields.items()]
    return []


def _suggest(key: Any, allowed: list[str], what: str = "key") -> str:
    text = str(key).lower()
    close = [a for a in allowed if len(text) >= 3 and a.lower().startswith(text)] or \
        difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    if close:
        return f" — did you mean {close[0]!r}?"
    if allowed and len(allowed) <= 30:
        return f"; known {what}s: {', '.join(allowed)}"
    return ""


_TYPE_WORDS = {"bool_type": "true or false", "int_type": "a whole number",
               "float_type": "a number", "string_type": "text (quote it)",
               "list_type": "a list", "dict_type": "a mapping (key: value)",
               "model_type": "a mapping (key: value)", "model_attributes_type":
               "a mapping (key: value)"}


def _shown(keys: Key, value: Any) -> str:
    """The offending value for an error; for a secret, only its type."""
    names = [k for k in keys if isinstance(k, str)]
    if names and (SECRET_NAMES.search(names[-1]) or names[0] in ("targets", "database_url")):
        kind = ("a number" if isinstance(value, int | float) and not isinstance(value, bool)
                else "a list" if isinstance(value, list) else "a mapping"
                if isinstance(value, dict) else "text" if isinstance(value, str)
                else _shown((), value))
        return f"{kind} (value not shown)"
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _real_keys(loc: tuple, data: Any) -> Key:
    """The keys of the data in a pydantic error location, without the tags pydantic adds
    for union members and validators ('str', 'function-after[...]')."""
    keys: list[str | int] = []
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if in_dict or in_list:
            data = data[part]
            keys.append(part)
    return tuple(keys)


def _problems(exc: ValidationError, marks: Marks, root: type[BaseModel], data: Any,
              base: Key = ()) -> list[str]:
    """One line per problem: where (file:line), which key, what is wrong."""
    found: dict[Key, list[str]] = {}
    type_words: dict[Key, list[str]] = {}
    shown: dict[Key, str] = {}
    for err in exc.errors():
        keys: Key = base + _real_keys(err["loc"], data)
        kind, ctx = err["type"], err.get("ctx") or {}
        if kind == "extra_forbidden":
            parent, key = keys[:-1], keys[-1]
            if parent == ("scrapy",):
                found.setdefault(keys, []).append(
                    f"{marks.where(keys)}: {scrapy_setting_problem(str(key))}")
                continue
            what = "source" if parent == ("sources",) else "key"
            allowed = _allowed_keys(_model_at(root, parent[len(base):]))
            place = f"in {dotted(parent)}" if parent else "at the top level"
            found.setdefault(keys, []).append(
                f"{marks.where(keys)}: unknown {what} {key!r} {place}"
                f"{_suggest(key, allowed, what)}")
        elif kind == "unknown_key":
            key, what = ctx["key"], ctx.get("what", "key")
            found.setdefault(keys + (key,), []).append(
                f"{marks.where(keys + (key,))}: unknown {what} {key!r} in {dotted(keys)}"
                f"{_suggest(key, list(ctx.get('allowed', ())), what)}")
        elif kind in _TYPE_WORDS or kind == "type_words":
            type_words.setdefault(keys, []).append(ctx.get("words") or _TYPE_WORDS[kind])
            shown[keys] = _shown(keys, err["input"])
            found.setdefault(keys, [])
        else:
            if kind == "value_error":
                message = str(ctx.get("error") or err["msg"])
            else:
                message = err["msg"].replace("Input should be", "must be")
                message = message[0].lower() + message[1:]
                if "input" in err and not isinstance(err["input"], dict | list):
                    message += f", got {_shown(keys, err['input'])}"
            found.setdefault(keys, []).append(marks.problem(keys, message))
    out: list[tuple[int, str]] = []
    for keys, messages in found.items():
        if keys in type_words and not messages:
            words = " or ".join(dict.fromkeys(type_words[keys]))
            messages = [marks.problem(keys, f"must be {words}, got {shown[keys]}")]
        line = marks.line(keys)
        out.extend((line, m) for m in (messages[:1] if keys in type_words else messages))
    return [m for _, m in sorted(out, key=lambda lm: lm[0])]


def validate_section(model: type[BaseModel], data: Any, keys: Key,
                     marks: Marks | None = None) -> Any:
    """`data` (the mapping at `keys` of the file) checked by `model`; ConfigError naming the
    file, line and key of every problem."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise ConfigError(_problems(exc, marks or Marks(), model, data, keys)) from None


# -- reading the file ------------------------------------------------------------------------
_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|(\{))")


def expand_env(text: str, where: str) -> str:
    """`${VAR}`, `${VAR:-default}` (default when unset or empty), `${VAR-default}` (when
    unset) and `$$` (a literal `$`); an unset variable without a default is an error."""
    def sub(m: re.Match) -> str:
        if m.group(1):
            return "$"
        if m.group(5):
            raise ConfigError(f"{where}: malformed ${{...}}: write ${{NAME}} or "
                              "${NAME:-default}")
        name, op, default = m.group(2), m.group(3), m.group(4)
        value = os.environ.get(name)
        if op == ":-" and not value:
            return default
        if op == "-" and value is None:
            return default
        if value is None:
            raise ConfigError(f"{where}: environment variable {name} is not set (write "
                              f"${{{name}:-default}} to give a default)")
        return value

    return _VAR.sub(sub, text)


def _walk(node: yaml.Node, keys: Key, marks: Marks, loader: yaml.SafeLoader,
          seen: set[int], errors: list[str]) -> None:
    """Record the line of every key and list item; expand `${VAR}` in every scalar value (a
    plain scalar is then typed as YAML would type the result: `${PORT:-9108}` is a number)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            line = key_node.start_mark.line + 1
            if key in first and key != "<<":
                raise ConfigError(f"{marks.path}:{line}: {dotted(keys + (key,))}: the key "
                                  f"appears twice (also line {first[key]})")
            first[key] = line
            marks.lines[keys + (key,)] = line
            _walk(value_node, keys + (key,), marks, loader, seen, errors)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            marks.lines[keys + (i,)] = item.start_mark.line + 1
            _walk(item, keys + (i,), marks, loader, seen, errors)
    elif isinstance(node, yaml.ScalarNode) and "$" in node.value:
        where = marks.problem(keys, "").rstrip(": ")
        try:
            node.value = expand_env(node.value, where)
        except ConfigError as exc:
            errors.extend(exc.problems)
            return
        if len(node.value) > MAX_SCALAR_CHARS:
            errors.append(f"{where}: {len(node.value):,} characters once ${{...}} is expanded "
                          f"(at most {MAX_SCALAR_CHARS:,})")
            return
        if node.style is None:
            node.tag = loader.resolve(yaml.ScalarNode, node.value, (True, False))


# Limits of a YAML file gpuradar reads (the config file, a rules file): a configuration is a
# few kilobytes; these refuse a hostile or broken file in milliseconds, before it is built.
MAX_YAML_BYTES = 256 * 1024       # the whole file (PyYAML reads ~50 KB/s on a busy core)
MAX_SCALAR_CHARS = 64 * 1024      # one value (after ${VAR} expansion)
MAX_YAML_NODES = 100_000          # values once every alias is expanded (billion laughs)
MAX_YAML_DEPTH = 50               # nesting of mappings and lists


def excerpt(text: str, limit: int = 60) -> str:
    """`text` for an error message: at most `limit` characters, with the length when cut."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


_BRACKET = re.compile(r"[\[\]{}]")


def _check_flow_depth(text: str, path: Path) -> None:
    """Refuse brackets nested deeper than MAX_YAML_DEPTH before parsing: PyYAML's scanner
    slows down with the square of that depth. Counted over the raw text (quotes and comments
    included), so a file would need 50 unclosed brackets inside its strings to be refused
    wrongly."""
    depth = 0
    for m in _BRACKET.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > MAX_YAML_DEPTH:
            line = text.count("\n", 0, m.start()) + 1
            raise ConfigError(f"{path}:{line}: nested more than {MAX_YAML_DEPTH} levels deep")


def _check_limits(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases expand beyond MAX_YAML_NODES values, that nests deeper
    than MAX_YAML_DEPTH, or that holds a value longer than MAX_SCALAR_CHARS. Each node is
    visited once (aliases share nodes), so a bomb costs no more than its own size."""
    weight: dict[int, int] = {}
    depth: dict[int, int] = {}
    # iterative post-order: a node's weight is its own plus its children's, aliases counted
    # every time they are used
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in weight and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_SCALAR_CHARS:
                raise ConfigError(f"{path}:{node.start_mark.line + 1}: a value of "
                                  f"{len(node.value):,} characters (at most "
                                  f"{MAX_SCALAR_CHARS:,}): {excerpt(node.value)}")
            weight[key], depth[key] = 1, 0
            continue
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = list(node.value)
        if not done:
            weight[key] = 0  # in progress: a cycle (`&a [*a]`) counts as nothing more
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in weight)
            continue
        weight[key] = 1 + sum(weight.get(id(c), 0) for c in children)
        depth[key] = 1 + max((depth.get(id(c), 0) for c in children), default=0)
        line = f"{path}:{node.start_mark.line + 1}"
        if weight[key] > MAX_YAML_NODES:
            raise ConfigError(f"{line}: the aliases (*name) here expand to more than "
                              f"{MAX_YAML_NODES:,} values; write the values out instead")
        if depth[key] > MAX_YAML_DEPTH:
            raise ConfigError(f"{line}: nested more than {MAX_YAML_DEPTH} levels deep")


def read_yaml(path: Path, marks: Marks, *, expand: bool = True) -> Any:
    """The file's data with `${VAR}` expanded (unless not `expand`); `marks` gets the line of
    every key. Within the limits above: ConfigError names the file and line otherwise."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_YAML_BYTES // 1024} KiB; a configuration "
                          "or rules file is at most that")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    _check_flow_depth(text, path)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_limits(node, path)
        errors: list[str] = []
        if expand:
            _walk(node, (), marks, loader, set(), errors)
        if errors:
            raise ConfigError(errors)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark else str(path)
        column = f" (column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).replace("\n", " ")
        raise ConfigError(f"{at}: not valid YAML{column}: {problem[:200]}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    finally:
        loader.dispose()


# -- the configuration in force --------------------------------------------------------------
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


def load_config(path: Path | str | None = None, *, database_url: str | None = None) -> Config:
    """Read the config file (if any) and the environment, and check them against the schema.

    `database_url` is the command line's (it wins over GPURADAR_DATABASE_URL and the file)."""
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
    model = validate_section(schema(), raw, (), marks)
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
    where = f"environment variable SCRAPY_SETTINGS_MODULE={_shown((), name)}"
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


def scrapy_settings(config: Config, **overrides: Any):
    """Scrapy settings for crawling with this configuration."""
    from scrapy.utils.project import get_project_settings

    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", SCRAPY_SETTINGS_MODULE)
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
