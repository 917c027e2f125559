"""What every crawl path shares about crawls, without starting one: which sources exist and
which are enabled, the order crawls run in (exchange rates first), and one typed result per
crawl (TrackedCrawl -> CrawlResult). Crawls are started and stopped by
gpuradar.crawler.service."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, cast

from scrapy.settings import Settings
from scrapy.spiderloader import get_spider_loader

from gpuradar.core.outcome import CrawlStatus
from gpuradar.crawler.crawl_settings import source_status
from gpuradar.crawler.pipelines import crawl_recorded
from gpuradar.crawler.spiders.base import GpuRadarSpider
from gpuradar.storage.ingest import CrawlSummary

log = logging.getLogger(__name__)


def spider_classes(settings: Settings) -> dict[str, type[GpuRadarSpider]]:
    loader = get_spider_loader(settings)
    # SPIDER_MODULES (crawler/settings.py) holds gpuradar's spiders only
    return {name: cast("type[GpuRadarSpider]", loader.load(name))
            for name in sorted(loader.list())}


def enabled_sources(settings: Settings) -> list[str]:
    return [n for n in spider_classes(settings) if source_status(settings, n)[0]]


class UnknownSource(ValueError):
    pass


def resolve_sources(names: Iterable[str], settings: Settings) -> list[str]:
    """The sources to crawl: the named ones (validated), or every enabled one."""
    known = spider_classes(settings)
    names = list(names)
    if not names:
        return enabled_sources(settings)
    bad = [n for n in names if n not in known]
    if bad:
        raise UnknownSource(f"unknown source(s) {', '.join(map(repr, bad))}; known: "
                            f"{', '.join(known)}")
    return names


def unreachable_summary(stats: dict[str, Any]) -> str:
    """'cannot reach a, b (DNS lookup failed, 2 attempts)' from the crawl's stats, or ''."""
    by_cause: dict[str, list[str]] = {}
    for host, why in (stats.get("gpuradar/unreachable") or {}).items():
        by_cause.setdefault(why, []).append(host)
    if not by_cause:
        return ""
    return "cannot reach " + "; ".join(f"{', '.join(hosts)} ({why})"
                                       for why, hosts in by_cause.items())


#: The exchange-rate source: every other source converts its prices with what it stored.
FX = "fx"


def fx_first(sources: Iterable[str]) -> list[list[str]]:
    """The groups crawls run in: the exchange rates first, then every other source at once."""
    names = list(sources)
    return [group for group in ([n for n in names if n == FX], [n for n in names if n != FX])
            if group]


def waits_for_fx(source: str, have_rates: bool) -> bool:
    """Whether a crawl of `source` should wait for a running exchange-rate crawl: without a
    stored rate, its non-USD prices could not be converted and would be dropped."""
    return source != FX and not have_rates


class CrawlResult(CrawlSummary):
    """The outcome of one crawl as the command line and the daemon report it."""


class TrackedCrawl:
    """One crawl and its outcome: the summary the storage pipeline recorded (signal
    `crawl_recorded`), or why it never got that far. Nothing is stored on the crawler."""

    def __init__(self, source: str, crawler: Any) -> None:
        self.source, self.crawler = source, crawler
        self.summary: CrawlSummary | None = None
        self.start_error: str | None = None
        crawler.signals.connect(self._recorded, signal=crawl_recorded)

    def _recorded(self, summary: CrawlSummary) -> None:
        self.summary = summary

    def failed_to_start(self, exc: BaseException) -> None:
        """A crawl that failed to start (a component or a setting Scrapy cannot use): one
        line in its result instead of a traceback."""
        message = " ".join(str(exc).split()) or type(exc).__name__
        self.start_error = f"crawl did not start: {type(exc).__name__}: {message}"

    @property
    def unfinished_crawl_id(self) -> int | None:
        """The crawl record of a crawl that started and has not been recorded yet."""
        return None if self.summary is not None else _stats(self.crawler).get(
            "gpuradar/crawl_id")

    def result(self) -> CrawlResult:
        stats = _stats(self.crawler)
        if self.summary is None:  # the crawl never reached storage (failed to open)
            error = self.start_error or (
                "crawl did not start" if "finish_reason" not in stats
                else f"crawl not recorded (finished: {stats['finish_reason']})")
            return CrawlResult(crawl_id=stats.get("gpuradar/crawl_id"), source=self.source,
                               status=CrawlStatus.FAILED, error=error)
        result = CrawlResult(**vars(self.summary))
        if result.status == CrawlStatus.FAILED and (unreachable := unreachable_summary(stats)):
            result.error = unreachable  # one line, not one per dropped request
        return result


def _stats(crawler: Any) -> dict[str, Any]:
    """The crawl's stats; none for a crawl that never started."""
    try:
        return crawler.stats.get_stats() if crawler.stats is not None else {}
    except RuntimeError:  # Scrapy: "stats is not set yet"
        return {}
