"""The crawl service: the one place that starts a Scrapy crawl — the daemon's on its own
loop (Scrapy's `AsyncCrawlerRunner`, as its "Common practices" page describes for running
crawls from a script), a one-shot command's on a reactor it starts (`AsyncCrawlerProcess`:
`crawl`, `crawl --replay`, the demo snapshot through `run_once`, `sources --check` through
gpuradar.crawler.probe) — and a stop that always stops.

Why a stop of our own: in Scrapy 2.19 `Crawler.stop_async()` called before the engine runs
only clears the crawler's `crawling` flag. The engine then starts anyway, and when its
spider closes, its own stop finds that flag cleared and never ends the engine: the crawl
never finishes, holds the scheduler's one instance slot and uses up a shutdown's budget.
`Crawl.stop()` instead closes the spider through Scrapy at whatever point the crawl is:

* before or while the spider opens: a `spider_opened` handler raises `CloseSpider`, which
  Scrapy honours once the spider is open (the pipelines open, then record the close);
* after it opened and before the engine runs: an `engine_started` handler closes the spider,
  and the engine's start returns at once (it has no spider any more);
* while the engine runs (mid-page, at shutdown): the engine closes the spider.

Each of these records the crawl through the storage pipeline (failed, "crawl stopped early:
<why>"). Should the close itself hang (a request in flight that never answers, a store that
blocks), the crawl is abandoned `bound` seconds after the stop: its task is cancelled and
its crawl row is recorded failed here. A crawl that outlives its time limit is stopped the
same way, so no crawl holds its caller forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import Spider, signals
from scrapy.exceptions import CloseSpider
from scrapy.settings import Settings

from gpuradar.core import collector
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.items import PriceBatch
from gpuradar.core.outcome import CrawlStatus
from gpuradar.core.units import EXIT_INTERRUPTED
from gpuradar.crawler.runner import CrawlResult, TrackedCrawl, fx_first, spider_classes

if TYPE_CHECKING:
    from gpuradar.storage.ingest import CrawlMemory

log = logging.getLogger(__name__)

#: Seconds a stopped crawl gets to close through Scrapy before it is abandoned.
STOP_BOUND = 15.0


class Crawl:
    """One crawl: prepared (its crawler and signals), then begun on the service's runner;
    a stop that always ends it, and its result."""

    def __init__(self, spidercls: type[Spider], settings: Settings, *,
                 time_limit: float | None = None, bound: float | None = None,
                 on_item: Callable[[str], None] | None = None,
                 memory: CrawlMemory | None = None) -> None:
        from scrapy.crawler import Crawler

        self.source: str = spidercls.name
        if memory is not None:  # the storage pipeline's (gpuradar.storage.ingest.CrawlMemory)
            settings = settings.copy()
            settings.frozen = False
            settings.set("GPURADAR_CRAWL_MEMORY", memory, priority="cmdline")
        self.crawler = Crawler(spidercls, settings)
        self.tracked = TrackedCrawl(self.source, self.crawler)
        self.time_limit = time_limit
        self.bound = STOP_BOUND if bound is None else bound
        self.why: str | None = None  # why the crawl was told to stop, once it was
        self._engine_started = False  # its spider is open (engine_started follows that)
        self.abandoned = False
        self.error = ""  # an exception the crawl raised after it was recorded, in one line
        self.crawler.signals.connect(self._on_spider_opened, signal=signals.spider_opened)
        self.crawler.signals.connect(self._on_engine_started, signal=signals.engine_started)
        self.on_item = on_item
        if on_item is not None:
            self.crawler.signals.connect(self._on_item, signal=signals.item_scraped)
        self._task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self.done: asyncio.Future[CrawlResult] | None = None

    def _on_item(self, item: Any, response: Any, spider: Any) -> None:
        assert self.on_item is not None
        for _ in range(len(item) if isinstance(item, PriceBatch) else 1):
            self.on_item(self.source)  # each offer of a batch, as if it had come alone

    def begin(self, runner: Any) -> asyncio.Future[CrawlResult]:
        """Start the crawl on `runner` (on the running loop); the future of its result."""
        self._task = runner.crawl(self.crawler)
        if self.time_limit is not None:
            self._timers.append(asyncio.get_running_loop().call_later(
                self.time_limit, self.stop,
                f"outlived its time limit of {self.time_limit:g}s"))
        self.done = asyncio.ensure_future(self._finish())
        return self.done

    # -- stopping ---------------------------------------------------------------------------
    def stop(self, why: str, bound: float | None = None) -> None:
        """End the crawl within `bound` seconds (the crawl's own by default), recorded failed
        with `why`. Safe at any moment and more than once (the first reason is kept)."""
        if self._task is None or self._task.done() or self.why is not None:
            return
        self.why = why
        if bound is not None:
            self.bound = STOP_BOUND if bound is None else bound
        log.info("%s: stopping the crawl (%s)", self.source, why,
                 extra={"source": self.source})
        self._timers.append(asyncio.get_running_loop().call_later(self.bound, self._abandon))
        if self._engine_started:  # the spider is open: close it, running or not
            asyncio.ensure_future(self._close(self.crawler.engine))
        # otherwise the spider has not opened yet, or is opening: the signal handlers below
        # close it at the first moment Scrapy allows

    @property
    def _reason(self) -> str:
        return f"cancelled ({self.why})"

    async def _close(self, engine: Any) -> None:
        # RuntimeError: closed meanwhile (it finished on its own), nothing left to stop
        with contextlib.suppress(RuntimeError):
            await engine.close_spider_async(reason=self._reason)

    def _on_spider_opened(self, spider: Any) -> None:
        if self.why is not None:
            raise CloseSpider(self._reason)

    async def _on_engine_started(self) -> None:
        self._engine_started = True
        if self.why is not None:
            # the engine's start then returns at once: it has no spider left to run
            await self._close(self.crawler.engine)

    def _abandon(self) -> None:
        """The close did not end the crawl within its bound: cancel it and record it here
        (its pipelines never got to)."""
        if self._task is None or self._task.done():
            return
        self.abandoned = True
        log.warning("%s: the crawl did not close within %gs of its stop; abandoned",
                    self.source, self.bound, extra={"source": self.source})
        self._task.cancel()

    def _record_abandoned(self) -> None:
        from gpuradar.storage.db import get_engine
        from gpuradar.storage.owner import mark_interrupted

        crawl_id = self.tracked.unfinished_crawl_id
        url = self.crawler.settings.get("GPURADAR_DATABASE_URL")
        if crawl_id is None or not url:
            return
        try:
            mark_interrupted(get_engine(url), [crawl_id], f"{self.why}; abandoned after "
                             f"{self.bound:g}s")
        except Exception:  # noqa: BLE001 - the next start marks it (process gone)
            log.warning("%s: could not record the abandoned crawl", self.source,
                        exc_info=True, extra={"source": self.source})

    # -- the outcome ------------------------------------------------------------------------
    async def _finish(self) -> CrawlResult:
        assert self._task is not None
        try:
            await self._task  # Scrapy's engine may swallow the cancellation: both end here
        except asyncio.CancelledError:
            if not self.abandoned:
                raise
        except Exception as exc:  # noqa: BLE001 - a broken spider fails its crawl only
            log.debug("%s: the crawl raised", self.source, exc_info=True,
                      extra={"source": self.source})
            if self.tracked.summary is None:
                self.tracked.failed_to_start(exc)
            else:
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            for timer in self._timers:
                timer.cancel()
        if self.abandoned:
            self._record_abandoned()
        return self.result()

    def result(self) -> CrawlResult:
        """The crawl's outcome as recorded; a stopped or abandoned crawl says why."""
        result = self.tracked.result()
        if self.error and result.status != CrawlStatus.FAILED:
            result.status, result.error = CrawlStatus.FAILED, self.error
        elif self.abandoned:
            result.status = CrawlStatus.FAILED
            result.error = f"interrupted ({self.why}; abandoned after {self.bound:g}s)"
        elif self.why is not None and self.tracked.summary is None:
            result.error = f"not started ({self.why})"
        return result


class CrawlService:
    """Starts every crawl of a process. The daemon's runs on a loop it runs itself
    (`AsyncCrawlerRunner`); a one-shot command's starts and stops the asyncio reactor
    (`AsyncCrawlerProcess`, which also sets up Scrapy's logging, DNS resolver and threads)."""

    def __init__(self, settings: Any, *, one_shot: bool = False, clock: Clock = SYSTEM) -> None:
        """`clock`: the one its crawls are dated by (the daemon's)."""
        from scrapy.crawler import AsyncCrawlerProcess, AsyncCrawlerRunner

        from gpuradar.storage.ingest import CrawlMemory

        self.runner = AsyncCrawlerProcess(settings) if one_shot else AsyncCrawlerRunner(
            settings)
        #: What this service gives its crawls and keeps between them (each source's offer
        #: state, the index's memo, the warnings given once, its clock): a daemon's
        #: service crawls the same sources again and again.
        self.memory = CrawlMemory(clock)

    def start(self, spidercls: type[Spider], settings: Settings, *, time_limit: float | None = None,
              bound: float | None = None) -> Crawl:
        """Start one crawl of `spidercls` with `settings`; await `.done` for its result."""
        crawl = Crawl(spidercls, settings, time_limit=time_limit, bound=bound,
                      memory=self.memory)
        crawl.begin(self.runner)
        return crawl

    async def in_order(self, crawls: dict[str, Crawl]) -> list[CrawlResult]:
        """Run prepared crawls to their end: the exchange rates first (the others convert
        their prices with what it stores), then every other source at once."""
        for group in fx_first(crawls):
            await asyncio.gather(*(crawls[n].begin(self.runner) for n in group))
        return [c.result() for c in crawls.values()]

    def run(self, main: Callable[[], Awaitable[Any]], *,
            install_signal_handlers: bool = False) -> None:
        """One-shot: run the asyncio reactor until `main()` is done (or the reactor is
        stopped or crashed from outside). Once per process: a reactor does not restart.
        `install_signal_handlers`: Scrapy's (Ctrl-C stops the crawls gracefully)."""
        from scrapy.crawler import AsyncCrawlerProcess
        from twisted.internet import reactor

        if not isinstance(self.runner, AsyncCrawlerProcess):
            raise RuntimeError("run() is a one-shot service's (CrawlService(one_shot=True))")

        def started() -> None:
            task = asyncio.ensure_future(main())
            task.add_done_callback(lambda _t: reactor.callLater(0, _stop))

        def _stop() -> None:
            if reactor.running:
                reactor.stop()

        reactor.callWhenRunning(started)
        self.runner.start(stop_after_crawl=False,
                          install_signal_handlers=install_signal_handlers)


def crawl_here(spidercls: type[Spider], settings: Settings,
               prepare: Callable[[Any], None] | None = None) -> CrawlResult:
    """One crawl run to its end on this thread's asyncio loop, Twisted's asyncio reactor
    installed but not run, so a process may do it again and again (`parse`, the demo
    timeline's steps, tests): only for crawls that reach no network (saved files).
    `prepare(crawler)` connects to its signals before it starts."""
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():
        install_reactor(settings["TWISTED_REACTOR"])
    from twisted.internet import reactor

    # The reactor's loop (Scrapy reads the same attribute), whatever is current meanwhile.
    loop = reactor._asyncioEventloop  # type: ignore[attr-defined]
    asyncio.set_event_loop(loop)
    service = CrawlService(settings)
    crawl = Crawl(spidercls, settings, memory=service.memory)
    if prepare is not None:
        prepare(crawl.crawler)
    runner = service.runner

    async def run() -> CrawlResult:
        return await crawl.begin(runner)

    return loop.run_until_complete(run())


# -- one-shot commands: `crawl`, `crawl --replay`, the demo snapshot ------------------------
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
                if r.status == CrawlStatus.FAILED:
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

    install_reactor(settings["TWISTED_REACTOR"])  # before anything imports the reactor
    from twisted.internet import reactor

    url = settings.get("GPURADAR_DATABASE_URL") or ""
    settings = settings.copy()
    # One crawl of each source in this process: no next crawl would use their offers' state.
    settings.set("GPURADAR_KEEP_STATE", False, priority="cmdline")
    service = CrawlService(settings, one_shot=True)
    classes = spider_classes(settings)
    crawls = {n: Crawl(classes[n], settings, on_item=on_item, memory=service.memory)
              for n in sources}
    tracked = {n: c.tracked for n, c in crawls.items()}
    stops = _Stops(reactor, url, tracked, on_interrupt)

    quiet = settings.get("LOG_LEVEL", "DEBUG") not in ("DEBUG", "INFO")
    guard = _DatabaseGuard(url, stops.database_failed, quiet)
    # Scrapy replaces its root handler when a crawl starts: filter where records are made
    loggers = [logging.getLogger(name) for name in _ERROR_LOGGERS]
    for logger in loggers:
        logger.addFilter(guard)
    previous = signal.signal(signal.SIGINT, stops.on_sigint)
    try:
        with collector.for_crawls():
            service.run(lambda: service.in_order(crawls))
    finally:
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
