"""What `gpuradar crawl`, `demo` and the daemon share about crawls: which sources exist and
which are enabled, the order crawls run in (exchange rates first), one typed result per
crawl (TrackedCrawl -> CrawlResult), and a one-shot crawl of several sources at once
(run_once: Ctrl-C and a failing database, around the crawl service of
gpuradar.crawler.service, which starts and stops every crawl)."""

from __future__ import annotations

import gc
import logging
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

from scrapy.settings import Settings
from scrapy.spiderloader import get_spider_loader

from gpuradar.core.units import EXIT_INTERRUPTED
from gpuradar.crawler.config import source_status
from gpuradar.crawler.pipelines import crawl_recorded
from gpuradar.crawler.spiders.base import GpuRadarSpider
from gpuradar.storage.ingest import CrawlSummary

log = logging.getLogger(__name__)


def spider_classes(settings: Settings) -> dict[str, type[GpuRadarSpider]]:
    loader = get_spider_loader(settings)
    return {name: loader.load(name) for name in sorted(loader.list())}


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
                               status="failed", error=error)
        result = CrawlResult(**vars(self.summary))
        if result.status == "failed" and (unreachable := unreachable_summary(stats)):
            result.error = unreachable  # one line, not one per dropped request
        return result


class CrawlStopped(Exception):
    """The crawls did not all run to their end; `results` has every source's outcome."""

    def __init__(self, message: str, results: list[CrawlResult]) -> None:
        super().__init__(message)
        self.results = results


class CrawlInterrupted(CrawlStopped):
    """Ctrl-C: the running crawls were recorded failed (interrupted) and stopped."""


class DatabaseUnusable(CrawlStopped):
    """The database failed during the crawls (read-only, locked, gone): the message names the
    cause in one line; the crawls were stopped (each closed nothing)."""


class _DatabaseGuard(logging.Filter):
    """Sees every log record the crawls write; the first database error stops them all.
    Its records (90 lines of traceback per failed write) are not shown without -v: the
    command says the cause in one line instead."""

    def __init__(self, url: str, on_error: Callable[[str], None], quiet: bool) -> None:
        super().__init__()
        self.url, self.on_error, self.quiet = url, on_error, quiet
        self.problem: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        from gpuradar.storage.db import database_problem

        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        problem = database_problem(exc, self.url)
        if problem is None:
            return True
        if self.problem is None:
            self.problem = problem
            self.on_error(problem)
        return not self.quiet


# Where an exception raised in a crawl is logged: signal handlers (the pipelines' open and
# close), item processing, the engine, the pipelines themselves, Twisted's unhandled errors.
_ERROR_LOGGERS = ("scrapy.utils.signal", "scrapy.core.scraper", "scrapy.core.engine",
                  "scrapy.crawler", "gpuradar.crawler.pipelines", "twisted")


def _stats(crawler: Any) -> dict[str, Any]:
    """The crawl's stats; none for a crawl that never started."""
    try:
        return crawler.stats.get_stats() if crawler.stats is not None else {}
    except RuntimeError:  # Scrapy: "stats is not set yet"
        return {}


def _crawl_ids(crawls: dict[str, TrackedCrawl]) -> list[int]:
    """The crawl records of the crawls that have not finished."""
    return [cid for c in crawls.values() if (cid := c.unfinished_crawl_id) is not None]


class _Stops:
    """Why and how `run_once` stops its reactor early: Ctrl-C (once: say so, record the
    running crawls interrupted; twice: exit at once) or a database that failed."""

    def __init__(self, reactor: Any, url: str, crawls: dict[str, TrackedCrawl],
                 on_interrupt: Callable[[], None] | None) -> None:
        self.reactor, self.url, self.crawls = reactor, url, crawls
        self.on_interrupt = on_interrupt
        self.why: dict[str, str] = {}

    def at_once(self) -> None:
        # Not reactor.stop(): its shutdown triggers close every spider gracefully, which
        # waits for the requests in flight and then records the crawls over our record.
        if self.reactor.running:
            self.reactor.crash()

    def database_failed(self, problem: str) -> None:
        self.why.setdefault("database", problem)
        self.reactor.callFromThread(self.at_once)  # the crawls stop; each closed nothing

    def _interrupted_now(self) -> None:
        from gpuradar.storage.db import get_engine
        from gpuradar.storage.owner import mark_interrupted

        try:
            mark_interrupted(get_engine(self.url), _crawl_ids(self.crawls), "Ctrl-C")
        except Exception:  # noqa: BLE001 - the next command marks them (process gone)
            log.debug("could not record the interrupted crawls", exc_info=True)
        self.at_once()

    def on_sigint(self, signum: int, frame: Any) -> None:
        if "interrupt" in self.why:
            os._exit(EXIT_INTERRUPTED)  # a second Ctrl-C: stop without waiting
        self.why["interrupt"] = "interrupted"
        if self.on_interrupt is not None:
            self.on_interrupt()
        self.reactor.callFromThread(self._interrupted_now)

    def results(self, results: list[CrawlResult]) -> list[CrawlResult]:
        """The crawls' results, or the exception that says why they stopped early."""
        if self.why:  # crashed, not stopped: end the reactor's threads, or the exit waits
            pool = getattr(self.reactor, "threadpool", None)
            if pool is not None:
                pool.stop()
        if "interrupt" in self.why:
            for r in results:
                if r.status == "failed":
                    r.error = ("interrupted (Ctrl-C)" if r.crawl_id is not None
                               else "not started (interrupted)")
            raise CrawlInterrupted("interrupted", results)
        if "database" in self.why:
            _record_stopped(self.url, self.crawls, self.why["database"])
            raise DatabaseUnusable(self.why["database"], results)
        return results


def run_once(sources: list[str], settings: Settings,
             on_item: Callable[[str], None] | None = None,
             on_interrupt: Callable[[], None] | None = None) -> list[CrawlResult]:
    """Crawl `sources` and wait for all of them, through the crawl service (exchange rates
    first). Starts and stops a reactor: once per process.

    Ctrl-C calls `on_interrupt` at once (to say "stopping"), records the running crawls
    failed (interrupted) and raises CrawlInterrupted; a second Ctrl-C exits at once. A
    database that fails during the crawls stops them and raises DatabaseUnusable.
    """
    from scrapy.utils.reactor import install_reactor

    from gpuradar.crawler.service import Crawl, CrawlService

    install_reactor(settings["TWISTED_REACTOR"])  # before anything imports the reactor
    from twisted.internet import reactor

    url = settings.get("GPURADAR_DATABASE_URL") or ""
    settings = settings.copy()
    # One crawl of each source in this process: no next crawl would use their offers' state.
    settings.set("GPURADAR_KEEP_STATE", False, priority="cmdline")
    service = CrawlService(settings, one_shot=True)
    classes = spider_classes(settings)
    crawls = {n: Crawl(classes[n], settings, on_item=on_item) for n in sources}
    tracked = {n: c.tracked for n, c in crawls.items()}
    stops = _Stops(reactor, url, tracked, on_interrupt)

    quiet = settings.get("LOG_LEVEL", "DEBUG") not in ("DEBUG", "INFO")
    guard = _DatabaseGuard(url, stops.database_failed, quiet)
    # Scrapy replaces its root handler when a crawl starts: filter where records are made
    loggers = [logging.getLogger(name) for name in _ERROR_LOGGERS]
    for logger in loggers:
        logger.addFilter(guard)
    previous = signal.signal(signal.SIGINT, stops.on_sigint)
    thresholds = gc.get_threshold()
    # Everything imported so far lives as long as the process: the collector's full passes
    # over the crawl's objects (a few per large source) need not walk it again each time.
    # Offers come and go by the thousand: collect the young generation less often.
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    try:
        service.run(lambda: service.in_order(crawls))
    finally:
        gc.set_threshold(*thresholds)
        signal.signal(signal.SIGINT, previous)
        for logger in loggers:
            logger.removeFilter(guard)
    return stops.results([c.result() for c in crawls.values()])


def _record_stopped(url: str, crawls: dict[str, TrackedCrawl], problem: str) -> None:
    """The crawls this process stopped for a database error are recorded failed with that
    error, here and now (not by a later command as "process gone"), when the database takes
    the write; when it does not (still locked, gone), the next command records them."""
    from gpuradar.storage.db import get_engine
    from gpuradar.storage.owner import mark_interrupted

    try:
        mark_interrupted(get_engine(url), _crawl_ids(crawls), f"stopped: {problem}")
    except Exception:  # noqa: BLE001 - the database is the problem: already reported
        log.debug("could not record the stopped crawls", exc_info=True)
