"""The crawl service: the one place that starts a Scrapy crawl on an asyncio event loop
(Scrapy's `AsyncCrawlerRunner`, as its "Common practices" page describes for running
crawls from a script), and a stop that always stops.

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
from collections.abc import Awaitable, Callable
from typing import Any

from scrapy import signals
from scrapy.exceptions import CloseSpider

from gpuradar.core.items import PriceBatch
from gpuradar.crawler.runner import CrawlResult, TrackedCrawl, fx_first

log = logging.getLogger(__name__)

#: Seconds a stopped crawl gets to close through Scrapy before it is abandoned.
STOP_BOUND = 15.0


class Crawl:
    """One crawl: prepared (its crawler and signals), then begun on the service's runner;
    a stop that always ends it, and its result."""

    def __init__(self, spidercls: type, settings: Any, *, time_limit: float | None = None,
                 bound: float | None = None,
                 on_item: Callable[[str], None] | None = None) -> None:
        from scrapy.crawler import Crawler

        self.source: str = spidercls.name
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
        if self.error and result.status != "failed":
            result.status, result.error = "failed", self.error
        elif self.abandoned:
            result.status = "failed"
            result.error = f"interrupted ({self.why}; abandoned after {self.bound:g}s)"
        elif self.why is not None and self.tracked.summary is None:
            result.error = f"not started ({self.why})"
        return result


class CrawlService:
    """Starts every crawl of a process. The daemon's runs on a loop it runs itself
    (`AsyncCrawlerRunner`); a one-shot command's starts and stops the asyncio reactor
    (`AsyncCrawlerProcess`, which also sets up Scrapy's logging, DNS resolver and threads)."""

    def __init__(self, settings: Any, *, one_shot: bool = False) -> None:
        from scrapy.crawler import AsyncCrawlerProcess, AsyncCrawlerRunner

        self.runner = AsyncCrawlerProcess(settings) if one_shot else AsyncCrawlerRunner(
            settings)

    def start(self, spidercls: type, settings: Any, *, time_limit: float | None = None,
              bound: float | None = None) -> Crawl:
        """Start one crawl of `spidercls` with `settings`; await `.done` for its result."""
        crawl = Crawl(spidercls, settings, time_limit=time_limit, bound=bound)
        crawl.begin(self.runner)
        return crawl

    async def in_order(self, crawls: dict[str, Crawl]) -> list[CrawlResult]:
        """Run prepared crawls to their end: the exchange rates first (the others convert
        their prices with what it stores), then every other source at once."""
        for group in fx_first(crawls):
            await asyncio.gather(*(crawls[n].begin(self.runner) for n in group))
        return [c.result() for c in crawls.values()]

    def run(self, main: Callable[[], Awaitable[Any]]) -> None:
        """One-shot: run the asyncio reactor until `main()` is done (or the reactor is
        stopped or crashed from outside). Once per process: a reactor does not restart."""
        from twisted.internet import reactor

        def started() -> None:
            task = asyncio.ensure_future(main())
            task.add_done_callback(lambda _t: reactor.callLater(0, _stop))

        def _stop() -> None:
            if reactor.running:
                reactor.stop()

        reactor.callWhenRunning(started)
        self.runner.start(stop_after_crawl=False, install_signal_handlers=False)
