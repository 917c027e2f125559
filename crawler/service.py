"""The crawl service: the one place that starts a Scrapy crawl, one way — Scrapy's
`AsyncCrawlerRunner` (as its "Common practices" page describes for running crawls from a
script) on Twisted's asyncio reactor's loop: the daemon's while it runs the reactor, a
command's (`crawl`, `crawl --replay`, the demo through `run_once`, `parse` and the demo
timeline through gpuradar.crawler.parsing, `sources --check` through gpuradar.crawler.probe)
while `CrawlService.run` drives that loop, so a process may crawl again and again — and a
stop that always stops.

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
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

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
T = TypeVar("T")

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
            self.bound = bound
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
    """Starts every crawl of a process, through one Scrapy `AsyncCrawlerRunner` on Twisted's
    asyncio reactor's loop: the daemon's while it runs the reactor; a command's while `run`
    drives that loop to the end of its crawls (the reactor itself never started, so a
    process may crawl again and again)."""

    def __init__(self, settings: Any, *, clock: Clock = SYSTEM) -> None:
        """`clock`: the one its crawls are dated by (the daemon's)."""
        from scrapy.crawler import AsyncCrawlerRunner
        from scrapy.utils.reactor import install_reactor, is_reactor_installed

        from gpuradar.storage.ingest import CrawlMemory

        if not is_reactor_installed():  # before anything imports (and so installs) another
            install_reactor(settings["TWISTED_REACTOR"])
        self.runner = AsyncCrawlerRunner(settings)
        #: What this service gives its crawls and keeps between them (each source's offer
        #: state, the index's memo, the warnings given once, its clock): a daemon's
        #: service crawls the same sources again and again.
        self.memory = CrawlMemory(clock)
        self._stopped: asyncio.Future[None] | None = None

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

    def run(self, main: Callable[[], Awaitable[T]], *, shutdown_signals: bool = False) -> T | None:
        """A command's crawls: `main()` run to its end on Twisted's asyncio reactor's loop,
        driven with `run_until_complete` rather than by starting the reactor (which starts
        once per process), so that a process may do it again. What the reactor's start gave
        crawls is set up for the run and put back after (`_reactor_for_crawls`). None when
        `stop_now()` ended it first. `shutdown_signals`: Scrapy's Ctrl-C (and SIGTERM) — the
        first stops the crawls gracefully, the second at once."""
        with _reactor_for_crawls(self.runner) as loop:
            self._stopped = loop.create_future()
            task = loop.create_task(_as_coroutine(main))
            either: set[asyncio.Future[Any]] = {task, self._stopped}
            with _shutdown_signals(self) if shutdown_signals else contextlib.nullcontext():
                loop.run_until_complete(asyncio.wait(either,
                                                     return_when=asyncio.FIRST_COMPLETED))
            return task.result() if task.done() and not task.cancelled() else None

    def stop_now(self) -> None:
        """End `run` at once, its crawls left as they are (nothing more is recorded): what
        crashing the reactor did. Safe from a signal handler or another thread."""
        from twisted.internet import reactor

        def stop() -> None:
            if self._stopped is not None and not self._stopped.done():
                self._stopped.set_result(None)

        reactor.callFromThread(stop)  # type: ignore[attr-defined]


async def _as_coroutine(main: Callable[[], Awaitable[T]]) -> T:
    """`main()` called on the running loop: a crawl begins there (`Crawl.begin`)."""
    return await main()


@contextlib.contextmanager
def _shutdown_signals(service: CrawlService) -> Iterator[None]:
    """Scrapy's shutdown signals (SIGINT, SIGTERM) for `service.run`: the first stops every
    crawl gracefully (each records its outcome), the second stops at once."""
    from scrapy.utils.ossignal import install_shutdown_handlers, signal_names
    from twisted.internet import reactor

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def graceful(signum: int, _frame: Any) -> None:
        install_shutdown_handlers(kill)
        reactor.callFromThread(log.info, "received %s, shutting down gracefully; send "  # type: ignore[attr-defined]
                               "again to force", signal_names[signum])
        reactor.callFromThread(  # type: ignore[attr-defined]
            lambda: asyncio.ensure_future(service.runner.stop()).add_done_callback(
                lambda _f: service.stop_now()))

    def kill(signum: int, _frame: Any) -> None:
        install_shutdown_handlers(signal.SIG_IGN)
        service.stop_now()

    install_shutdown_handlers(graceful)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _reactor_for_crawls(runner: Any) -> Iterator[asyncio.AbstractEventLoop]:
    """Twisted's asyncio reactor's loop (installed by the service, never started), with what
    starting the reactor gave crawls: Scrapy's DNS resolver and the thread pool it (and
    `deferToThread`) works in. After, what the run set up or left is put back: the
    resolver, the pool stopped (its threads would hold up the process's exit), the delayed
    calls and tasks its crawls left on the loop cancelled — nothing of one run meets the
    next."""
    from scrapy.utils.misc import build_from_crawler, load_object
    from twisted.internet import reactor

    # The reactor's loop (Scrapy reads the same attribute), whatever is current meanwhile.
    loop: asyncio.AbstractEventLoop = reactor._asyncioEventloop  # type: ignore[attr-defined]
    asyncio.set_event_loop(loop)
    resolver = reactor.nameResolver  # type: ignore[attr-defined]
    # as Scrapy's AsyncCrawlerProcess does when it starts the reactor
    build_from_crawler(load_object(runner.settings["TWISTED_DNS_RESOLVER"]), runner,
                       reactor=reactor).install_on_reactor()
    pool = reactor.getThreadPool()  # type: ignore[attr-defined]
    pool.adjustPoolsize(maxthreads=runner.settings.getint("REACTOR_THREADPOOL_MAXSIZE"))
    pool.start()
    try:
        yield loop
    finally:
        try:
            _cancel_leftovers(loop, reactor)
        finally:
            reactor._stopThreadPool()  # type: ignore[attr-defined]  # the reactor's own stop step
            reactor.installNameResolver(resolver)  # type: ignore[attr-defined]


def _cancel_leftovers(loop: asyncio.AbstractEventLoop, reactor: Any) -> None:
    """Cancel the tasks a run left on `loop` (a crawl stopped at once, a download in flight)
    and let them end, then the reactor's delayed calls (heartbeats, timeouts)."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=STOP_BOUND))
    for call in reactor.getDelayedCalls():
        if call.active():
            call.cancel()


@contextlib.contextmanager
def scrapy_logging(settings: Settings) -> Iterator[None]:
    """Scrapy's logging set-up for a command's crawls (as its `AsyncCrawlerProcess` did):
    Twisted's log routed to the `twisted` logger, warnings captured, Scrapy's logger levels
    and root handler. Twisted's observer and Scrapy's root handler are removed after: a
    later run in the same process would log Twisted's records twice, and each later crawl
    would install Scrapy's handler again (it does when one is installed)."""
    from scrapy.utils import log as scrapy_log
    from twisted.python import log as twisted_log

    before = list(twisted_log.theLogPublisher.observers)
    scrapy_log.configure_logging(settings)
    scrapy_log.log_scrapy_info(settings)
    try:
        yield
    finally:
        for observer in twisted_log.theLogPublisher.observers:
            if observer not in before:
                twisted_log.removeObserver(observer)
        scrapy_log._uninstall_scrapy_root_handler()  # private: Scrapy has no public undo


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
    """Why and how `run_once` stops its crawls early: Ctrl-C (once: say so, record the
    running crawls interrupted; twice: exit at once) or a database that failed."""

    def __init__(self, service: CrawlService, url: str, crawls: dict[str, TrackedCrawl],
                 on_interrupt: Callable[[], None] | None) -> None:
        self.service, self.url, self.crawls = service, url, crawls
        self.on_interrupt = on_interrupt
        self.why: dict[str, str] = {}

    def database_failed(self, problem: str) -> None:
        self.why.setdefault("database", problem)
        # Not a graceful stop: closing the spiders waits for the requests in flight and
        # then records the crawls over our record. Each closed nothing.
        self.service.stop_now()

    def _interrupted_now(self) -> None:
        from gpuradar.storage.db import get_engine
        from gpuradar.storage.owner import mark_interrupted

        try:
            mark_interrupted(get_engine(self.url), _crawl_ids(self.crawls), "Ctrl-C")
        except Exception:  # noqa: BLE001 - the next command marks them (process gone)
            log.debug("could not record the interrupted crawls", exc_info=True)
        self.service.stop_now()

    def on_sigint(self, signum: int, frame: Any) -> None:
        from twisted.internet import reactor

        if "interrupt" in self.why:
            os._exit(EXIT_INTERRUPTED)  # a second Ctrl-C: stop without waiting
        self.why["interrupt"] = "interrupted"
        if self.on_interrupt is not None:
            self.on_interrupt()
        reactor.callFromThread(self._interrupted_now)  # type: ignore[attr-defined]

    def results(self, results: list[CrawlResult]) -> list[CrawlResult]:
        """The crawls' results, or the exception that says why they stopped early."""
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
    first), on the reactor's loop (`CrawlService.run`: again and again in one process).

    Ctrl-C calls `on_interrupt` at once (to say "stopping"), records the running crawls
    failed (interrupted) and raises CrawlInterrupted; a second Ctrl-C exits at once. A
    database that fails during the crawls stops them and raises DatabaseUnusable.
    """
    url = settings.get("GPURADAR_DATABASE_URL") or ""
    settings = settings.copy()
    # One crawl of each source in this process: no next crawl would use their offers' state.
    settings.set("GPURADAR_KEEP_STATE", False, priority="cmdline")
    service = CrawlService(settings)
    classes = spider_classes(settings)
    crawls = {n: Crawl(classes[n], settings, on_item=on_item, memory=service.memory)
              for n in sources}
    tracked = {n: c.tracked for n, c in crawls.items()}
    stops = _Stops(service, url, tracked, on_interrupt)

    quiet = settings.get("LOG_LEVEL", "DEBUG") not in ("DEBUG", "INFO")
    guard = _DatabaseGuard(url, stops.database_failed, quiet)
    # Scrapy replaces its root handler when a crawl starts: filter where records are made
    loggers = [logging.getLogger(name) for name in _ERROR_LOGGERS]
    for logger in loggers:
        logger.addFilter(guard)
    previous = signal.signal(signal.SIGINT, stops.on_sigint)
    try:
        with collector.for_crawls(), scrapy_logging(settings):
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
