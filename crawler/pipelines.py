"""Item pipelines: validate, normalise, store.

Spiders only read responses; everything that is the same for every source happens here:
drop what cannot be an offer (reason counted in the crawl's stats), map the GPU through the
catalog, convert to USD, quarantine implausible prices, refuse a second observation of the
same offer, and hand batches to storage.

A row dropped because of its price (missing, unreadable, zero, negative, implausible, in a
currency without a rate) is not a vanished offer: the drop is an `UnreadablePrice`, and
storage keeps that offer open with its last good price, flagged `unreadable_since`.
"""

from __future__ import annotations

import logging
import math
import sys
import weakref
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem
from scrapy.utils.log import logformatter_adapter

from gpuradar.core import defaults, gpus, providers
from gpuradar.core.backfill import PriceHistory
from gpuradar.core.clock import SYSTEM
from gpuradar.core.currency import FxTable
from gpuradar.core.interconnect import interconnect_for
from gpuradar.core.items import PRICINGS, FxRateItem, OfferKey, PriceBatch, PriceItem
from gpuradar.core.outcome import CrawlSeen, crawl_outcome
from gpuradar.crawler.crawl_settings import source_options
from gpuradar.crawler.middlewares import Recording, crawling
from gpuradar.crawler.spiders.base import UNCATALOGUED_NAMES, warn_once_per_process

if TYPE_CHECKING:  # spider_opened imports them when a crawl starts
    from gpuradar.storage.ingest import CrawlSummary, CrawlWriter

log = logging.getLogger(__name__)

#: Scrapy signal sent once the storage pipeline has recorded the crawl (`summary`: its
#: CrawlSummary); the crawl service listens for it (gpuradar.crawler.runner.TrackedCrawl).
crawl_recorded = object()

#: Drop reasons about the price only: the offer is still listed, so it is kept open with its
#: last good price instead of being closed as vanished.
UNREADABLE_REASONS = frozenset({"no_price", "bad_price", "zero_price", "negative_price",
                                "implausible_price", "unknown_currency"})
#: Plausible USD per GPU-hour, both ends inclusive (settings GPURADAR_PRICE_RANGE, or
#: `sources.<name>.price_range: [low, high]` in the config file).
PRICE_RANGE = defaults.PRICE_RANGE


class UnreadablePrice(DropItem):
    """The item's offer is listed but its price cannot be stored (see UNREADABLE_REASONS)."""


def _drop(crawler: Crawler, reason: str, item: PriceItem) -> DropItem:
    assert reason in DROP_REASONS, reason  # a new reason is added there (its metric's zero)
    crawler.stats.inc_value(f"gpuradar/dropped/{reason}")
    cls = UnreadablePrice if reason in UNREADABLE_REASONS else DropItem
    return cls(f"{reason}: {item.source} {item.region} {item.instance_type} {item.pricing}")


_scraper_log = logging.getLogger("scrapy.core.scraper")


def drop_from_batch(crawler: Crawler, drop: DropItem, item: PriceItem) -> None:
    """What Scrapy does with an item a pipeline drops, for an offer of a PriceBatch (the
    batch itself goes on): the drop's DEBUG line and the `item_dropped` signal, which
    Scrapy's stats and StoragePipeline (unreadable offers stay open) listen to."""
    spider = crawling(crawler)
    logkws = crawler.logformatter.dropped(item, drop, None, spider)
    if logkws is not None:
        _scraper_log.log(*logformatter_adapter(logkws), extra={"spider": spider, "item": item})
    crawler.signals.send_catch_log(signal=signals.item_dropped, item=item, response=None,
                                   spider=spider, exception=drop)


def fail_in_batch(crawler: Crawler, item: PriceItem) -> None:
    """What Scrapy does when a pipeline fails on an item, for an offer of a PriceBatch (the
    other offers go on, as they would have one by one): the error with its traceback, logged
    against the spider, and the `item_error` signal. Call it while handling the exception."""
    from twisted.python.failure import Failure

    spider = crawling(crawler)
    exc = sys.exc_info()[1]
    assert exc is not None  # called while an exception is handled
    logkws = crawler.logformatter.item_error(item, exc, None, spider)
    _scraper_log.log(*logformatter_adapter(logkws), extra={"spider": spider, "item": item},
                     exc_info=True)
    crawler.signals.send_catch_log(signal=signals.item_error, item=item, response=None,
                                   spider=spider, failure=Failure())


def each_offer(crawler: Crawler, item: Any, judge: Any) -> Any:
    """Run `judge` (a pipeline stage for one PriceItem: returns it or raises DropItem) on
    `item`, or on every offer of a PriceBatch, keeping the offers it passes, in order."""
    if not isinstance(item, PriceBatch):
        return judge(item)
    kept = []
    for offer in item.items:
        try:
            kept.append(judge(offer))
        except DropItem as drop:
            drop_from_batch(crawler, drop, offer)
        except Exception:  # noqa: BLE001 - logged and signalled as Scrapy would
            fail_in_batch(crawler, offer)
    item.items = kept
    return item


def price_range(crawler: Crawler, source: str) -> tuple[float, float]:
    """The plausible USD per GPU-hour of `source`: its `price_range` option, else the
    GPURADAR_PRICE_RANGE setting, else PRICE_RANGE."""
    opts = source_options(crawler.settings, source)
    low, high = (opts.get("price_range") or crawler.settings.getlist("GPURADAR_PRICE_RANGE")
                 or PRICE_RANGE)
    return float(low), float(high)


def shrink_guard(crawler: Crawler, source: str) -> float:
    """The share of the last successful crawl's offers below which a crawl closes nothing
    until confirmed: the source's `shrink_guard` option, else GPURADAR_SHRINK_GUARD."""
    value = source_options(crawler.settings, source).shrink_guard
    if value is None:
        value = crawler.settings.getfloat("GPURADAR_SHRINK_GUARD", defaults.SHRINK_GUARD)
    return float(value)


def database_url(crawler: Crawler) -> str:
    from gpuradar.core.config import default_database_url

    return crawler.settings.get("GPURADAR_DATABASE_URL") or default_database_url()


# What a spider counts (GpuRadarSpider.count) for a machine the provider does not sell as
# the pricing kind its price list prices it: reported with the crawl's dropped rows.
NOT_SOLD = ("not_on_demand", "kind_not_sold")
#: Every reason a row is dropped for (`gpuradar/dropped/<reason>` in the crawl's stats; the
#: daemon's gpuradar_crawl_dropped_items_total starts each at zero).
DROP_REASONS = UNREADABLE_REASONS | {"bad_pricing", "no_gpu", "no_identity",
                                     "duplicate_offer", *NOT_SOLD}


def validate(item: PriceItem) -> str | None:
    """Coerce the price; the reason the item cannot be stored, or None when it can."""
    price = item.price
    if price is None:
        return "no_price"
    if isinstance(price, bool):
        return "bad_price"
    try:
        price = float(price)
    except (TypeError, ValueError, OverflowError):
        return "bad_price"
    if math.isnan(price) or math.isinf(price):
        return "bad_price"
    if price < 0:
        return "negative_price"
    if price == 0:
        return "zero_price"
    item.price = price
    if item.pricing not in PRICINGS:
        return "bad_pricing"
    if not item.currency or len(item.currency) != 3:
        return "unknown_currency"
    item.currency = item.currency.upper()
    if not item.gpu_count or item.gpu_count <= 0:
        return "no_gpu"
    if not item.instance_type or not item.region:
        return "no_identity"
    return None


def normalize(item: PriceItem, fx: FxTable,
              plausible: tuple[float, float] = PRICE_RANGE) -> str | None:
    """Canonical GPU and USD prices; the drop reason, or None. An unknown GPU is kept as-is
    (`gpu_raw` set), never guessed. A USD price per GPU-hour outside `plausible` is
    `implausible_price`: quarantined, never stored."""
    raw = item.gpu
    gpu = gpus.lookup(raw, item.gpu_memory_gb)
    if gpu is None:
        item.gpu_raw = raw
    else:
        item.gpu = gpu.name
        if item.gpu_memory_gb is None:
            item.gpu_memory_gb = gpu.memory_gb
    if item.gpu_count >= 2 and "interconnect" not in item.attributes:
        # What links the GPUs (and machines) of a multi-GPU offer, where the provider
        # publishes it: `gpuradar recommend` needs it for sharded jobs.
        link = interconnect_for(item.source, item.instance_type, item.gpu, item.gpu_count)
        if link["intra_node"] or link["inter_node"]:
            item.attributes = {**item.attributes, "interconnect": {
                k: link[k] for k in ("intra_node", "inter_node", "basis")}}
    if "price_source" not in item.attributes and item.source in providers.BY_NAME:
        # API price or a page's list price: shown with the offer, never guessed for an
        # unknown source.
        item.attributes = {**item.attributes,
                           "price_source": providers.BY_NAME[item.source].price_source}
    if item.price is None:  # validate() drops it first
        return "no_price"
    usd = fx.to_usd(item.price, item.currency)
    if usd is None:
        return "unknown_currency"
    per_gpu = usd / item.gpu_count
    if not plausible[0] <= per_gpu <= plausible[1]:
        return "implausible_price"
    item.price_usd = round(usd, 6)
    item.price_per_gpu_usd = round(per_gpu, 6)
    return None


class ValidatePipeline:
    """Reject what cannot be stored as an offer; never store a zero or missing price."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ValidatePipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        return each_offer(self.crawler, item, self.judge)

    def judge(self, item: Any) -> Any:
        if isinstance(item, PriceItem):
            reason = validate(item)
            if reason:
                raise _drop(self.crawler, reason, item)
        return item


class NormalizePipeline:
    """Canonical GPU names, USD prices, per-GPU prices; implausible prices quarantined."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.fx = FxTable()
        self.unknown: set[str] = set()
        self.ranges: dict[str, tuple[float, float]] = {}
        self.warned: set[tuple[str, ...]] = set()  # without a crawl service (a test)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NormalizePipeline:
        return cls(crawler)

    def spider_opened(self, spider) -> None:
        from gpuradar.storage.db import open_database
        from gpuradar.storage.queries import latest_fx

        given = self.crawler.settings.get("GPURADAR_FX")  # `parse`: no database
        self.fx = given if given is not None else FxTable(
            latest_fx(open_database(database_url(self.crawler))))

    def process_item(self, item: Any) -> Any:
        return each_offer(self.crawler, item, self.judge)

    def judge(self, item: Any) -> Any:
        if not isinstance(item, PriceItem):
            return item
        if item.source not in self.ranges:
            self.ranges[item.source] = price_range(self.crawler, item.source)
        plausible = self.ranges[item.source]
        reason = normalize(item, self.fx, plausible)
        if item.gpu_raw:
            self.crawler.stats.inc_value("gpuradar/unknown_gpu")
            if item.gpu_raw not in self.unknown:
                self.unknown.add(item.gpu_raw)
                self.crawler.stats.set_value("gpuradar/unknown_gpu_names", sorted(self.unknown))
            warn_once_per_process(self.crawler, self.warned, log,
                                  ("unknown_gpu", item.source, item.gpu_raw),
                                  "%s: GPU %r matches nothing in the catalog; kept as-is",
                                  item.source, item.gpu_raw)
        if reason == "implausible_price":
            warn_once_per_process(
                self.crawler, self.warned, log,
                ("implausible", item.source, *item.key, str(item.price)),
                "%s: %s %s %s is priced %s %s, outside the plausible %s-%s USD per GPU-hour; "
                "quarantined (not stored, the offer keeps its last good price)", item.source,
                item.region, item.instance_type, item.pricing, item.price, item.currency,
                *plausible)
        if reason:
            raise _drop(self.crawler, reason, item)
        return item


class _CrawlErrors(logging.Handler):
    """Collects ERROR records about one spider. Scrapy's `log_count/ERROR` cannot be used:
    its handler counts every crawler's errors in every crawler running in the process.

    It listens on the root logger (Scrapy's own records about the spider) and on the
    spider's logger, named after the spider: a package may claim that name and stop its
    records from propagating (the Vast.ai SDK does so with "vastai"). A record both see is
    kept once."""

    def __init__(self, spider) -> None:
        super().__init__(level=logging.ERROR)
        self.spider = spider
        self.messages: list[str] = []
        self.loggers = (logging.getLogger(), logging.getLogger(spider.name))
        self._seen: weakref.WeakSet[logging.LogRecord] = weakref.WeakSet()

    def attach(self) -> None:
        for logger in self.loggers:
            logger.addHandler(self)

    def detach(self) -> None:
        for logger in self.loggers:
            logger.removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "spider", None) is self.spider and record not in self._seen:
            self._seen.add(record)
            try:
                message = record.getMessage().splitlines()[0]
            except Exception:  # noqa: BLE001 - a broken log call must not break the crawl
                message = str(record.msg)
            if record.exc_info and record.exc_info[1] is not None:
                message += f": {record.exc_info[1]}"
            self.messages.append(message[:500])


class StoragePipeline:
    """Batches items into the change-point store and records the crawl's outcome. One offer,
    one price per crawl: a second observation of an offer is dropped (`duplicate_offer`),
    so the order of a source's rows never decides a price."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.batch_size = crawler.settings.getint("GPURADAR_BATCH_SIZE", 1000)
        self.batch: list[PriceItem] = []
        # Keys of the offers in `batch`; those already flushed are the writer's (listed()):
        # one set of 100,000 keys per crawl, not two.
        self.keys: set[tuple[str, str, str, str]] = set()
        self.ranges: dict[str, tuple[float, float]] = {}
        self.unreadable: set[OfferKey] = set()
        self.fx: dict[tuple[str, date], float] = {}
        self.errors: list[str] = []
        self.writer: CrawlWriter | None = None
        self.summary: CrawlSummary | None = None
        # Back-dated prices (gpuradar.core.backfill), stored once the crawl's offers are.
        self.history: list[PriceHistory] = []
        self.history_refused = 0
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.spider_error, signal=signals.spider_error)
        crawler.signals.connect(self.item_dropped, signal=signals.item_dropped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        return cls(crawler)

    def spider_opened(self, spider) -> None:
        from gpuradar.core.marketindex import Params
        from gpuradar.storage.db import open_database
        from gpuradar.storage.ingest import CrawlWriter, Replay

        settings = self.crawler.settings
        if not settings.getbool("GPURADAR_STORE", True):
            return  # `parse`: judged and counted (duplicates too), stored nowhere
        self.engine = open_database(database_url(self.crawler))
        # the crawl service's (crawler/service.py): its clock, what it keeps between crawls
        memory = settings.get("GPURADAR_CRAWL_MEMORY")
        replay_dir = settings.get("GPURADAR_REPLAY_DIR")
        staged = settings.getdict("GPURADAR_STAGED")
        started_at = None
        # A replay's observations describe the recording's capture time, not today.
        replay = Recording(Path(replay_dir), spider.name).replay() if replay_dir else None
        if staged:  # the demo timeline: a capture's prices at a staged time
            started_at = staged["at"]
            replay = Replay(staged["captured"], started_at)
        self.writer = CrawlWriter(
            self.engine, spider.name, replay=replay, started_at=started_at,
            shrink_guard=shrink_guard(self.crawler, spider.name),
            keep_state=self.crawler.settings.getbool("GPURADAR_KEEP_STATE", True),
            memory=memory, clock=memory.clock if memory is not None else SYSTEM,
            index_params=Params(**self.crawler.settings.getdict("GPURADAR_INDEX_PARAMS")))
        self.log_errors = _CrawlErrors(spider)
        self.log_errors.attach()
        self.crawler.stats.set_value("gpuradar/crawl_id", self.writer.crawl_id)
        # What the source already has: a spider asks for back-dated history only for
        # offers it has none of (the AWS spider's first crawl of a region).
        spider.stored_offer_keys = self.writer.offer_keys()

    def spider_error(self, failure, response, spider) -> None:
        # Also logged (and collected) by Scrapy; keep the message for the crawl record.
        self.errors.append(f"{failure.getErrorMessage()} ({response.url if response else '?'})")

    def item_dropped(self, item: Any, response: Any, exception: Exception, spider: Any) -> None:
        """An offer listed with a price that cannot be stored is still listed."""
        if isinstance(exception, UnreadablePrice) and isinstance(item, PriceItem):
            self.unreadable.add(item.key)

    def process_item(self, item: Any) -> Any:
        return each_offer(self.crawler, item, self.judge)

    def judge(self, item: Any) -> Any:
        if isinstance(item, FxRateItem):
            self.fx[(item.currency, date.fromisoformat(item.rate_date))] = item.per_eur
        elif isinstance(item, PriceHistory):
            self.keep_history(item)
        elif isinstance(item, PriceItem):
            key = item.key
            if key in self.keys or (self.writer is not None and self.writer.listed(key)):
                raise _drop(self.crawler, "duplicate_offer", item)
            self.keys.add(key)
            if self.writer is not None:
                self.batch.append(item)
                if len(self.batch) >= self.batch_size:
                    self.flush()
        return item

    def keep_history(self, item: PriceHistory) -> None:
        """Keep the back-dated prices a live price would pass: storable, and per GPU within
        the source's plausible range (USD); the rest are counted, never stored."""
        if item.source not in self.ranges:
            self.ranges[item.source] = price_range(self.crawler, item.source)
        low, high = self.ranges[item.source]
        kept = [(at, p) for at, p in item.points
                if item.currency == "USD" and item.gpu_count > 0 and isinstance(p, float)
                and math.isfinite(p) and low <= p / item.gpu_count <= high]
        self.history_refused += len(item.points) - len(kept) + item.unreadable
        if kept:
            item.points = kept
            self.history.append(item)

    def flush(self) -> None:
        if self.batch and self.writer is not None:
            self.writer.add(self.batch)
            self.batch = []
            if not self.writer.refused:  # a refused replay keeps no keys: keep them here
                self.keys = set()

    def _seen(self, reason: str) -> CrawlSeen:
        """What this crawl saw, for crawl_outcome (gpuradar.core.outcome) to judge."""
        stats = self.crawler.stats
        prefix = "downloader/response_status_count/"
        # a site without robots.txt (404) is no error of the crawl: its answers are not counted
        robots = "robotstxt/response_status_count/"
        statuses = {int(k.removeprefix(prefix)): v - stats.get_value(
                        robots + k.removeprefix(prefix), 0)
                    for k, v in stats.get_stats().items() if k.startswith(prefix)}
        # a page the site's robots.txt forbids was not read: its offers are not gone
        forbidden = stats.get_value("robotstxt/forbidden", 0)
        unread = (f"{forbidden} page(s) forbidden by the site's robots.txt, not read",) \
            if forbidden else ()
        return CrawlSeen(
            finish_reason=reason, spider_errors=tuple(self.errors) + unread,
            http_statuses={code: n for code, n in statuses.items() if n > 0},
            ignored=stats.get_value("httperror/response_ignored_count", 0),
            gave_up=stats.get_value("retry/max_reached", 0),
            logged=tuple(self.log_errors.messages),
            stored=bool(self.writer and self.writer.items))

    def spider_closed(self, spider, reason: str) -> None:
        if self.writer is None:
            return
        self.log_errors.detach()
        try:
            self.flush()
        except Exception as exc:  # storage failed mid-crawl: record it, close nothing
            log.exception("%s: storing items failed", spider.name)
            self.errors.append(f"storage error: {exc}")
            reason = "storage_error"
        if (self.history or self.history_refused) and reason != "storage_error":
            try:
                self.writer.backfill(self.history, self.history_refused)
            except Exception as exc:  # the back-fill never costs the crawl its offers
                log.exception("%s: storing back-dated history failed", spider.name)
                self.errors.append(f"storage error (history): {exc}")
        rates = self._store_fx() if self.fx else 0
        status, error = crawl_outcome(self._seen(reason))
        stats = self.crawler.stats.get_stats()
        dropped = {k.rsplit("/", 1)[1]: v for k, v in stats.items()
                   if k.startswith("gpuradar/dropped/")}
        # Rows of a machine the provider does not sell that way (GCP's A4 on demand, AWS's
        # p5e at $0): never offers, said in the crawl's summary beside the dropped rows.
        dropped.update({reason: stats[f"gpuradar/skipped/{reason}"] for reason in NOT_SOLD
                        if stats.get(f"gpuradar/skipped/{reason}")})
        self.summary = self.writer.finish(
            status, error=error, dropped=dropped,
            unknown_gpus=stats.get("gpuradar/unknown_gpu_names", ()),
            unreadable=self.unreadable, uncatalogued=stats.get(UNCATALOGUED_NAMES) or {},
            rates=rates)
        self.crawler.signals.send_catch_log(crawl_recorded, summary=self.summary)

    def _store_fx(self) -> int:
        """Store the collected ECB rates as USD per unit; how many were stored."""
        from gpuradar.storage.queries import store_fx

        stored = 0
        by_date: dict[date, dict[str, float]] = {}
        for (cur, day), per_eur in self.fx.items():
            by_date.setdefault(day, {})[cur] = per_eur
        for day, day_rates in by_date.items():
            usd_per_eur = day_rates.get("USD")
            if not usd_per_eur:
                self.errors.append(f"ECB rates of {day} have no USD rate")
                continue
            rates = {cur: usd_per_eur / v for cur, v in day_rates.items() if v > 0}
            rates["EUR"] = usd_per_eur
            rates.pop("USD", None)
            stored += store_fx(self.engine, rates, day)
        return stored
