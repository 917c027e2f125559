"""What every gpuradar spider shares: its provider's declared facts, endpoints that settings
can override, per-source options and credentials, and parse errors that name the source and
the field."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, ClassVar

import scrapy
from scrapy.settings import BaseSettings

from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.config import SourceOptions, data_dir
from gpuradar.core.providers import Provider
from gpuradar.crawler.crawl_settings import source_options, source_status

if TYPE_CHECKING:
    from twisted.python.failure import Failure

#: Stats keys of uncatalogued products (see GpuRadarSpider.uncatalogued).
UNCATALOGUED = "gpuradar/uncatalogued"
UNCATALOGUED_NAMES = "gpuradar/uncatalogued_names"
#: Distinct raw names kept per crawl: a source that renamed everything must not bloat the
#: crawl record; the count still covers every offer.
UNCATALOGUED_MAX_NAMES = 200

def warn_once_per_process(crawler: Any, here: set[tuple[str, ...]],
                          logger: logging.Logger | logging.LoggerAdapter, key: tuple[str, ...],
                          message: str, *args: Any) -> None:
    """Log a warning the first time `key` comes up for the crawl service that runs
    `crawler` (its CrawlMemory: a daemon's lives as long as the process, which crawls the
    same sources all day; one line per crawl about the same product would be noise).
    `here`: the caller's own set, for a crawler that no service runs (a test's)."""
    memory = crawler.settings.get("GPURADAR_CRAWL_MEMORY") if crawler is not None else None
    seen = memory.warned if memory is not None else here
    if key not in seen:
        seen.add(key)
        logger.warning(message, *args)


class ParseError(ValueError):
    """A response in a shape the parser does not know: names source, field and where."""

    def __init__(self, source: str, field: str, where: str = "", detail: str = "") -> None:
        self.source, self.field, self.where = source, field, where
        msg = f"{source}: unexpected response shape: field {field!r}"
        if detail:
            msg += f" {detail}"
        if where:
            msg += f" (in {where})"
        super().__init__(msg)


def require(obj: Any, key: str, source: str, where: str = "", kind: type | tuple = object) -> Any:
    """obj[key], or a ParseError naming the missing/mistyped field."""
    if not isinstance(obj, Mapping) or key not in obj:
        raise ParseError(source, key, where, "is missing")
    value = obj[key]
    if kind is not object and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ParseError(source, key, where, f"is {type(value).__name__}, expected {names}")
    return value


def failed_request(failure: Failure) -> scrapy.Request:
    """The request an errback's failure is about. Scrapy sets it on the Failure it passes
    (scrapy/core/scraper.py); Twisted's class does not declare it, so it is read here once."""
    request: scrapy.Request = failure.request  # type: ignore[attr-defined]  # set by Scrapy
    return request


#: Spider attributes taken from the provider's declaration (gpuradar.core.providers), never
#: written in a spider: each fact has one home, which core and the CLI read without Scrapy.
FACTS = ("name", "kind", "default_interval", "endpoints", "credentials", "options",
         "requires_credentials", "notes", "request_interval")


class GpuRadarSpider(scrapy.Spider):
    """Base class: a source of PriceItems. A subclass sets `facts` to its provider's
    declaration; name, kind, default_interval, endpoints (name -> default URL, overridden
    by GPURADAR_ENDPOINTS["<source>.<name>"]), credentials (option -> environment
    variable), options, requires_credentials, notes and request_interval come from it."""

    #: The provider's declaration (gpuradar.core.providers.<provider>).
    facts: ClassVar[Provider]
    endpoints: ClassVar[Mapping[str, str]] = {}
    credentials: ClassVar[Mapping[str, str]] = {}
    options: ClassVar[Mapping[str, Any]] = {}
    requires_credentials: ClassVar[bool] = False
    notes: ClassVar[str] = ""
    default_interval: ClassVar[int] = 3600
    kind: ClassVar[str] = "cloud"
    #: Enforced by Scrapy's download slot, which the backoff middleware widens when the
    #: provider still throttles; the option `request_interval` overrides it.
    request_interval: ClassVar[float] = 0.0
    #: Whether a crawl may ask for a page rendered with JavaScript (meta "playwright"):
    #: only then does its download handler load scrapy-playwright (crawler/handlers.py).
    renders_pages: bool = False
    #: Where a spider reads the time (a request's time window, a price's effective date, a
    #: time budget): passed in, so a test sets a FakeClock.
    clock: ClassVar[Clock] = SYSTEM

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        facts = cls.__dict__.get("facts")
        if facts is None:
            return
        written = [attr for attr in FACTS if attr in cls.__dict__]
        if written:
            raise TypeError(f"{cls.__name__} sets {', '.join(written)}: these come from its "
                            f"declaration, gpuradar.core.providers ({facts.name!r})")
        for attr in FACTS:
            setattr(cls, attr, getattr(facts, attr))

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """The provider's request interval becomes the crawl's download delay (without
        jitter, so it is a minimum). The class default yields to a DOWNLOAD_DELAY given in
        the config's `scrapy` section; `sources.<name>.request_interval` wins over both,
        except when replaying a recording (nothing to be polite to)."""
        super().update_settings(settings)
        interval = cls.options_from(settings).get("request_interval")
        if interval is not None and not settings.get("GPURADAR_REPLAY_DIR"):
            settings.set("DOWNLOAD_DELAY", float(interval), priority="cmdline")
            settings.set("DOWNLOAD_DELAY_JITTER", 0.0, priority="cmdline")
        elif cls.request_interval:
            settings.set("DOWNLOAD_DELAY", cls.request_interval, priority="spider")
            settings.set("DOWNLOAD_DELAY_JITTER", 0.0, priority="spider")
        if (cls.facts.reads_pages_with(cls.options_from(settings))
                and not settings.get("GPURADAR_REPLAY_DIR")):
            # A site, not an API: its robots.txt is obeyed, and a page that has not changed
            # since the last crawl is not sent again (Scrapy's HTTP cache revalidates with
            # If-None-Match / If-Modified-Since under RFC 2616 rules). A recording is
            # replayed as captured: nothing there to be polite to.
            settings.set("ROBOTSTXT_OBEY", True, priority="spider")
            settings.set("HTTPCACHE_ENABLED", True, priority="spider")
            settings.set("HTTPCACHE_POLICY", "scrapy.extensions.httpcache.RFC2616Policy",
                         priority="spider")
            settings.set("HTTPCACHE_DIR", str(data_dir() / "httpcache"), priority="spider")

    def endpoint(self, name: str) -> str:
        overrides = self.settings.getdict("GPURADAR_ENDPOINTS")
        return overrides.get(f"{self.name}.{name}") or self.endpoints[name]

    def answer_day(self, response: scrapy.http.Response, header: bytes = b"Date") -> str:
        """The day an answer describes (a signal's as-of date): a replayed capture's own
        date (a recording can hold answers older than the rest of it), else the day in the
        HTTP `header` the provider sent (`Date`; a file's `Last-Modified`), else today by
        the spider's clock."""
        captured = response.meta.get("recording_captured")
        if captured:
            return str(captured)[:10]
        sent = response.headers.get(header)
        if sent:
            try:
                return parsedate_to_datetime(sent.decode("latin-1")).astimezone(UTC).date(
                ).isoformat()
            except (TypeError, ValueError):
                pass
        return self.clock.now().date().isoformat()

    def option(self, name: str, default: Any = None) -> Any:
        """A declared option's value (`default` when not set)."""
        return self.options_from(self.settings).get(name, default)

    @classmethod
    def options_from(cls, settings: BaseSettings) -> SourceOptions:
        """Source options: the config file's `sources.<name>` section as the schema checked
        it (gpuradar.crawler.crawl_settings.source_options), then environment variables for the
        credentials it leaves out."""
        return cls.facts.with_env_credentials(source_options(settings, cls.name))

    def json_body(self, response) -> Any:
        """The response's JSON, or a ParseError naming the source and the URL."""
        try:
            return json.loads(response.text)
        except ValueError as exc:
            raise ParseError(self.name, "<body>", response.url, f"is not JSON ({exc})") from None

    def expect_rows(self, rows: int, what: str, where: str) -> None:
        """Refuse an answer with fewer GPU rows than the provider's declared bound
        (`min_rows`): a changed page or answer is a crawl that failed as not understood,
        never a silently empty or half-read table that closes the offers it no longer
        shows."""
        if rows < self.facts.min_rows:
            raise ParseError(self.name, what, where, f"has {rows} GPU rows, expected at "
                             f"least {self.facts.min_rows}: the page or answer changed")

    def count(self, reason: str) -> None:
        """Count something the spider skipped on purpose (`gpuradar/skipped/<reason>`)."""
        crawler = getattr(self, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(f"gpuradar/skipped/{reason}")

    def uncatalogued(self, raw_name: str, detail: str = "") -> None:
        """Report one offer the source lists but this spider cannot turn into a PriceItem
        because its GPU model or GPU count is not known (a new size, a renamed SKU, a new
        accelerator). Such offers are never dropped silently: call this once per offer row
        instead of skipping it, with the provider's raw product name (instance type, size,
        shape) and, in `detail`, what is missing ("GPU count of 80 vCPUs unknown").

        It counts the offer (stats `gpuradar/uncatalogued`) and keeps the raw name with its
        count (stats `gpuradar/uncatalogued_names`, at most 200 names); the storage pipeline
        writes them into the crawl record, from where the crawl summary, `gpuradar sources`
        and the metric `gpuradar_uncatalogued_offers{source}` report them. A warning naming
        the product is logged once per process. Do not call it for products that are not
        GPU offers at all (CPU sizes, licences): those are skipped with `count()`."""
        crawler = getattr(self, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            stats = crawler.stats
            stats.inc_value(UNCATALOGUED)
            names = stats.get_value(UNCATALOGUED_NAMES) or {}
            if raw_name in names or len(names) < UNCATALOGUED_MAX_NAMES:
                names[raw_name] = names.get(raw_name, 0) + 1
                stats.set_value(UNCATALOGUED_NAMES, names)
        warn_once_per_process(
            crawler, self.__dict__.setdefault("_warned_here", set()), self.logger,
            ("uncatalogued", self.name, raw_name),
            "%s: %s is not in gpuradar's catalog (%s); reported as uncatalogued, not stored",
            self.name, raw_name, detail or "GPU model or count unknown")

    def warn_once(self, key: str, message: str, *args: Any) -> None:
        """Log a warning the first time `key` comes up in this crawl only."""
        warned = self.__dict__.setdefault("_warned", set())
        if key not in warned:
            warned.add(key)
            self.logger.warning(message, *args)

    def parse_file(self, response) -> Any:
        """Parse one saved response (`gpuradar parse`); spiders that read several kinds of
        response override this to pick the parser from the content."""
        return self.parse(response)

    @classmethod
    def status(cls, settings: BaseSettings) -> tuple[bool, str]:
        """Whether the source runs with these settings, and why: its declaration's answer
        (gpuradar.core.providers.base.Provider.status), which `gpuradar sources` reads
        without Scrapy."""
        return source_status(settings, cls.name)
