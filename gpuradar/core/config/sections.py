"""The sections of the configuration file, one pydantic model each, and the whole file's
schema: the static sections plus one options model per source, built from the providers'
Scrapy-free declarations (gpuradar.core.providers)."""

from __future__ import annotations

import typing
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gpuradar.core import defaults, providers
from gpuradar.core.config.values import (
    MAX_REQUEST_INTERVAL,
    CountOrDuration,
    HttpUrl,
    NeverOrDuration,
    OneLineText,
    OptionalPositiveSeconds,
    OptionalSeconds,
    PositiveNumber,
    PositiveSeconds,
    PriceRange,
    RequestInterval,
    Seconds,
    Section,
    Settings,
    TextOrNumber,
    TextOrTexts,
    between,
    one_of,
)

# The daemon's interval groups (`daemon.intervals.<kind>`); each provider declares its `kind`.
KINDS = providers.KINDS
# the one reactor gpuradar runs on (scrapy-playwright, the daemon)
AsyncioReactor = Literal["twisted.internet.asyncioreactor.AsyncioSelectorReactor"]
ASYNCIO_REACTOR: str = typing.get_args(AsyncioReactor)[0]


# -- sections --------------------------------------------------------------------------------
class SourceOptions(Section):
    """Options every source takes; each provider declares its own options and credentials.

    Each source's model is checked the first time it checks a value (`defer_build`): a
    source the file leaves out has its defaults, as they are written, without it (`gpuradar
    sources` shows all 25 sources, issue #54)."""

    model_config = ConfigDict(defer_build=True)

    enabled: bool = True
    interval: OptionalPositiveSeconds = None
    jitter: OptionalSeconds = None
    timeout: OptionalPositiveSeconds = None
    # the least time between two requests to the source (the provider's default otherwise);
    # at most 5 minutes, as DOWNLOAD_DELAY: a longer one would outlast the crawl's timeout
    request_interval: RequestInterval = None
    # plausible USD per GPU-hour, [low, high]: prices outside are quarantined, never stored
    price_range: PriceRange | None = None
    # a crawl listing fewer than this share of the last one's offers closes nothing (0: off)
    shrink_guard: float | None = Field(None, ge=0, le=1)

    def get(self, name: str, default: Any = None) -> Any:
        """The value of option `name` (one every source takes, or one its provider
        declares); `default` when it is not set. A name the source does not have is a
        KeyError: a spider reads only declared options."""
        if name not in type(self).model_fields:
            raise KeyError(f"{name!r} is not an option of this source")
        value = getattr(self, name)
        return default if value is None else value


class MetricsSection(Section):
    """`metrics:` the daemon's /metrics and /healthz."""

    enabled: bool = True
    address: str = Field("127.0.0.1", min_length=1)
    port: int = Field(9108, ge=1, le=65535)
    # Web origins ("https://dash.example.org", or "*") whose pages may read the JSON API
    # from a browser (CORS); none by default.
    cors_origins: list[str] = Field(default_factory=list)


class WebSection(Section):
    """`web:` the page and JSON API (`gpuradar serve`, and `run` from a child process), on a
    server of their own so that readers never slow /metrics and /healthz. Port 0: any free
    port (the log says which)."""

    enabled: bool = True
    address: str = Field("127.0.0.1", min_length=1)
    port: int = Field(9109, ge=0, le=65535)
    threads: int = Field(4, ge=1, le=64)


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
    # /healthz fails when a source's due crawls were skipped this many times in a row
    # (its previous crawl still held the slot, or the scheduler missed it)
    liveness_intervals: int = Field(3, ge=1)

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

    for_: CountOrDuration = Field(1, alias="for")
    repeat: NeverOrDuration = "never"
    min_drop: TextOrNumber = "5%"
    send_resolved: bool = False
    top: int = Field(5, ge=1)
    hysteresis: TextOrNumber = "2%"
    stale_after_failures: int = Field(3, ge=1)
    stale_after: NeverOrDuration = "2d"
    notify_stale: Annotated[Any, one_of("true, false, or target names",
                                        bool, str, list)] = False
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
    """A notification target: an apprise URL (or several) and tags."""

    url: str | None = None
    urls: TextOrTexts | None = None
    tags: TextOrTexts | None = None
    tag: TextOrTexts | None = None

    @model_validator(mode="after")
    def _has_url(self) -> TargetSpec:
        urls = self.url_list()
        if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise ValueError("has no URL (write name: apprise URL, a list of them, or "
                             "{url: ..., tags: [...]})")
        return self

    def url_list(self) -> list[str]:
        """The target's URLs (`urls`, else `url`)."""
        urls = self.urls or self.url
        return [urls] if isinstance(urls, str) else list(urls or [])

    def tag_list(self) -> list[str]:
        """The target's tags (`tags`, else `tag`): a list, or one text of comma-separated
        tags."""
        tags = self.tags if self.tags is not None else self.tag
        tags = tags or []
        return [t.strip() for t in (tags.split(",") if isinstance(tags, str) else tags)
                if t.strip()]


def _rule_entry(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(f"a rule is a text or a mapping, not {type(value).__name__}")
    return value


# a Playwright timeout: at most 10 minutes, in milliseconds
Milliseconds = Annotated[float, between(0, 600_000, above=True)]


class PlaywrightLaunch(Section):
    """PLAYWRIGHT_LAUNCH_OPTIONS: the options of Playwright's BrowserType.launch that make
    sense for a headless crawler (timeouts in milliseconds)."""

    executable_path: str | None = None
    headless: bool = True
    args: list[str] = []
    channel: str | None = None
    timeout: Milliseconds | None = None
    slow_mo: Annotated[float, between(0, 10_000)] | None = None
    chromium_sandbox: bool | None = None
    env: dict[str, str] | None = None
    proxy: dict[str, str] | None = None


class ScrapySection(Settings):
    """`scrapy:` the Scrapy settings the config file may change, each with its type and
    range; every other setting is refused (Scrapy's component settings, the reactor, the
    database and the sources are gpuradar's own). Seconds unless the name says otherwise."""

    # politeness and concurrency (a delay beyond 5 minutes would outlast the crawl timeout)
    DOWNLOAD_DELAY: Annotated[float, between(0, MAX_REQUEST_INTERVAL)] | None = None
    DOWNLOAD_DELAY_JITTER: Annotated[float, between(0, 1)] | None = None
    CONCURRENT_REQUESTS: Annotated[int, between(1, 256)] | None = None
    CONCURRENT_REQUESTS_PER_DOMAIN: Annotated[int, between(1, 64)] | None = None
    CONCURRENT_ITEMS: Annotated[int, between(1, 10_000)] | None = None
    AUTOTHROTTLE_ENABLED: bool | None = None
    AUTOTHROTTLE_START_DELAY: Annotated[float, between(0, 300)] | None = None
    AUTOTHROTTLE_MAX_DELAY: Annotated[float, between(0, 300)] | None = None
    AUTOTHROTTLE_TARGET_CONCURRENCY: Annotated[float, between(0, 64, above=True)] | None = None
    AUTOTHROTTLE_DEBUG: bool | None = None
    # timeouts
    DOWNLOAD_TIMEOUT: Annotated[float, between(0, 3600, above=True)] | None = None
    CLOSESPIDER_TIMEOUT: Annotated[float, between(0, 86_400, above=True)] | None = None
    DNS_TIMEOUT: Annotated[float, between(0, 600, above=True)] | None = None
    DNSCACHE_ENABLED: bool | None = None
    # retries (gpuradar.crawler.middlewares.BackoffRetryMiddleware)
    RETRY_ENABLED: bool | None = None
    RETRY_TIMES: Annotated[int, between(0, 10)] | None = None
    RETRY_HTTP_CODES: list[Annotated[int, between(400, 599)]] | None = None
    RETRY_BACKOFF_BASE: Annotated[float, between(0, 60)] | None = None
    RETRY_BACKOFF_MAX: Annotated[float, between(0, 3600, above=True)] | None = None
    # sizes in bytes (0: no limit)
    DOWNLOAD_MAXSIZE: Annotated[int, between(0, 2**40)] | None = None
    DOWNLOAD_WARNSIZE: Annotated[int, between(0, 2**40)] | None = None
    # identity and proxies (HTTPPROXY_ENABLED reads the http(s)_proxy environment variables)
    USER_AGENT: OneLineText | None = None
    DEFAULT_REQUEST_HEADERS: dict[str, str] | None = None
    HTTPPROXY_ENABLED: bool | None = None
    # the asyncio reactor is the only one gpuradar runs on (scrapy-playwright, the daemon)
    TWISTED_REACTOR: AsyncioReactor | None = None
    # gpuradar's own (crawler/settings.py says what each does)
    GPURADAR_ANSWER_TIMEOUT: Annotated[float, between(0, 600, above=True)] | None = None
    GPURADAR_CONNECT_ATTEMPTS: Annotated[int, between(1, 10)] | None = None
    GPURADAR_UNREACHABLE_AFTER: Annotated[float, between(0, 3600, above=True)] | None = None
    GPURADAR_PRICE_RANGE: PriceRange | None = None
    GPURADAR_SHRINK_GUARD: Annotated[float, between(0, 1)] | None = None
    GPURADAR_BATCH_SIZE: Annotated[int, between(1, 100_000)] | None = None
    # scrapy-playwright (milliseconds where the name says TIMEOUT)
    PLAYWRIGHT_BROWSER_TYPE: Literal["chromium", "firefox", "webkit"] | None = None
    PLAYWRIGHT_LAUNCH_OPTIONS: PlaywrightLaunch | None = None
    PLAYWRIGHT_MAX_CONTEXTS: Annotated[int, between(1, 32)] | None = None
    PLAYWRIGHT_MAX_PAGES_PER_CONTEXT: Annotated[int, between(1, 64)] | None = None
    PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT: Milliseconds | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ScrapySection:
        base, cap = self.RETRY_BACKOFF_BASE, self.RETRY_BACKOFF_MAX
        if base is not None and cap is not None and base > cap:
            raise ValueError(f"RETRY_BACKOFF_BASE ({base:g}) must not exceed RETRY_BACKOFF_MAX "
                             f"({cap:g})")
        return self


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
def source_model(name: str) -> type[SourceOptions]:
    """The options model of source `name`: the options every source takes plus the ones its
    provider declares (gpuradar.core.providers); SourceOptions for a name no provider has."""
    provider = next((p for p in providers.PROVIDERS if p.name == name), None)
    if provider is None:
        return SourceOptions
    opts: dict[str, Any] = {opt: (typ | None, None)
                            for opt, typ in source_option_types(provider).items()}
    return create_model(f"Source_{provider.name}", __base__=SourceOptions, **opts)


def schema(names: Iterable[str] | None = None) -> type[BaseModel]:
    """The whole file: static sections plus one options model per source, built from the
    providers' declarations (gpuradar.core.providers).

    With `names` (the sources a file names), `sources` holds the models of those known
    sources only: a file is checked the same, but a command does not build the options
    model of each of the 25 sources the file does not mention (a share of `gpuradar
    prices`' start-up, issue #54). Any other name is still refused as an unknown source,
    with every source named as allowed (`KNOWN_NAMES`)."""
    known = [p.name for p in providers.PROVIDERS]
    wanted = known if names is None else [n for n in known if n in set(names)]
    return _schema(tuple(wanted))


@cache
def _schema(names: tuple[str, ...]) -> type[BaseModel]:
    sources: dict[str, Any] = {name: (source_model(name) | None, None) for name in names}
    sources_model = create_model("Sources", __base__=_Sources, **sources)
    return create_model(
        "ConfigFile", __base__=_Root,
        sources=(sources_model, Field(default_factory=sources_model,
                                      description=KNOWN_KEYS["sources"])),
    )


class _Sources(Section):
    """The `sources` mapping: a field per source (schema() adds them)."""

    #: every source's name: what an unknown name is refused against (errors.py)
    KNOWN_NAMES: ClassVar[tuple[str, ...]] = tuple(p.name for p in providers.PROVIDERS)


KNOWN_KEYS = {
    "database_url": "SQLAlchemy URL: sqlite:///path.db or postgresql://user:pw@host/db",
    "read_database_url": "where readers (serve, export, gpuradar.open) read: a streaming "
                         "replica's URL; unset: database_url",
    "sources": "per-source options: enabled, interval, jitter, timeout, credentials, ...",
    "endpoints": "URL overrides, 'source.endpoint': URL (mirrors, tests)",
    "targets": "notification targets, name: apprise URL",
    "rules": "alert rules (readable strings or structured mappings)",
    "rules_file": "a YAML file with a `rules:` list, reloaded on SIGHUP",
    "alerts": "alert defaults: repeat, min_drop, send_resolved, stale_after, ...",
    "metrics": "daemon metrics endpoint: enabled, address, port",
    "web": "the web page and JSON API: enabled, address, port, threads",
    "daemon": "daemon options: grace_period, crawl_timeout, outbox_interval, ...",
    "scrapy": "extra Scrapy settings (advanced)",
}


class _Root(Section):
    """The top level of the file (`sources` is added per provider by schema()). Checked
    only as schema()'s subclass: built only then (`defer_build`), not also at import."""

    model_config = ConfigDict(defer_build=True)

    database_url: str | None = Field(None, description=KNOWN_KEYS["database_url"])
    read_database_url: str | None = Field(None, description=KNOWN_KEYS["read_database_url"])
    endpoints: Annotated[dict[str, HttpUrl],
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
    web: WebSection = Field(default_factory=WebSection, description=KNOWN_KEYS["web"])
    daemon: DaemonSection = Field(default_factory=DaemonSection,
                                  description=KNOWN_KEYS["daemon"])
    scrapy: ScrapySection = Field(default_factory=ScrapySection,
                                  description=KNOWN_KEYS["scrapy"])

    NULLABLE: ClassVar[tuple[str, ...]] = ("sources", "endpoints", "targets", "rules",
                                           "alerts", "metrics", "web", "daemon", "scrapy")

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        """`targets:` with nothing under it is an empty section, not an error."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in cls.NULLABLE)}
        return data
