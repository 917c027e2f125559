"""Running crawls from the command line: which sources exist, which are enabled, and a
one-shot crawl of several sources at once in one Scrapy process."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from gpuradar.crawler.spiders.base import GpuRadarSpider
from gpuradar.storage.ingest import CrawlSummary
from scrapy import signals
from scrapy.settings import Settings
from scrapy.spiderloader import get_spider_loader

log = logging.getLogger(__name__)


def spider_classes(settings: Settings) -> dict[str, type[GpuRadarSpider]]:
    loader = get_spider_loader(settings)
    return {name: loader.load(name) for name in sorted(loader.list())}


def enabled_sources(settings: Settings) -> list[str]:
    return [n for n, cls in spider_classes(settings).items() if cls.status(settings)[0]]


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
        raise UnknownSource(f"unknown source(s) {', '.join(bad)}; known: {', '.join(known)}")
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


class CrawlResult(CrawlSummary):
    """The outcome of one crawl as the command line and the daemon report it."""

    @classmethod
    def from_crawler(cls, source: str, crawler: Any) -> CrawlResult:
        summary = getattr(crawler, "gpuradar_summary", None)
        stats = crawler.stats.get_stats() if crawler.stats else {}
        if summary is None:  # the crawl never reached storage (failed to open)
            return cls(crawl_id=None, source=source, status="failed",
                       error=str(stats.get("finish_reason", "crawl did not start")))
        result = cls(**vars(summary))
        if result.status == "failed" and (unreachable := unreachable_summary(stats)):
            result.error = unreachable  # one line, not one per dropped request
        return result


def run_once(sources: list[str], settings: Settings,
             on_item: Callable[[str], None] | None = None) -> list[CrawlResult]:
    """Crawl `sources` and wait for all of them: `fx` first (so the others convert with
    today's rates), then the rest concurrently. Starts and stops a reactor: once per process.
    """
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.reactor import install_reactor

    install_reactor(settings["TWISTED_REACTOR"])  # before anything imports the reactor
    from twisted.internet import defer, reactor

    process = CrawlerProcess(settings)
    crawlers = {}
    handlers = []
    for name in sources:
        crawler = process.create_crawler(name)
        if on_item is not None:
            def counted(item, response, spider, _name=name):
                on_item(_name)
            handlers.append(counted)  # signals hold weak references: keep one
            crawler.signals.connect(counted, signal=signals.item_scraped)
        crawlers[name] = crawler
    groups = [[n for n in sources if n == "fx"], [n for n in sources if n != "fx"]]

    @defer.inlineCallbacks
    def crawl_all():
        try:
            for group in groups:
                if group:
                    results = yield defer.DeferredList(
                        [process.crawl(crawlers[n]) for n in group], consumeErrors=True)
                    for ok, failure in results:
                        if not ok:
                            log.error("crawl failed: %s", failure.getTraceback())
        finally:
            if reactor.running:
                reactor.callLater(0, reactor.stop)

    reactor.callWhenRunning(crawl_all)
    process.start(stop_after_crawl=False)
    return [CrawlResult.from_crawler(name, c) for name, c in crawlers.items()]
