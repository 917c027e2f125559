"""The daemon in the test's own process, on a fake clock (issue #52).

`gpuradar run`'s `Daemon` as it is — its configuration, database, leadership, metrics,
crawl service, rule evaluation and delivery — with two parts replaced: APScheduler never
sets a timer (a job runs when the test moves the clock and calls `run_due()`), and no
signal handler is installed (the test calls what a signal calls). Scheduling, backoff,
liveness, reloads and the leader's start are thereby tested without starting a process and
without waiting for time to pass: the fake clock says when things are due.

What still runs for real: the crawls (Scrapy's `AsyncCrawlerRunner` on Twisted's asyncio
reactor's loop, which the harness runs without running the reactor, as a command's crawls do;
replayed recordings or real HTTP on loopback), SQLite, the SMTP and webhook receivers.

APScheduler 3 reads `datetime.now()` itself (its scheduler, triggers and executors): the
harness points those modules' `datetime` at the fake clock while a harness is open.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TypeVar

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gpuradar.core.clock import FakeClock
from gpuradar.scheduler.daemon import Daemon, RunOptions

T = TypeVar("T")

#: APScheduler's modules that read the wall clock
_APSCHEDULER_CLOCK_READERS = ("apscheduler.schedulers.base", "apscheduler.executors.base",
                              "apscheduler.triggers.interval", "apscheduler.triggers.date")


def _datetime_on(clock: FakeClock) -> type[datetime]:
    """A `datetime` whose now() is `clock`'s (every other use is the real class's)."""

    class ClockDatetime(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
            now = clock.now()
            return now.astimezone(tz) if tz is not None else now.replace(tzinfo=None)

    return ClockDatetime


class FakeClockScheduler(AsyncIOScheduler):
    """APScheduler that sets no timer: `run_due()` submits what is due at the clock's now."""

    def _start_timer(self, wait_seconds: float | None) -> None:
        self.next_wait = wait_seconds  # when the real one would wake up next (seconds)

    def _stop_timer(self) -> None:
        pass

    def wakeup(self) -> None:
        pass  # jobs are looked at when the test says (run_due)

    def due(self, now: datetime) -> list[Any]:
        return [j for j in self.get_jobs()
                if j.next_run_time is not None and j.next_run_time <= now]


class HarnessDaemon(Daemon):
    """The daemon with the fake clock's scheduler and no signal handlers."""

    def make_scheduler(self) -> FakeClockScheduler:
        from datetime import UTC

        return FakeClockScheduler(timezone=UTC, job_defaults={
            "coalesce": True, "max_instances": 1})

    def install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        pass


class DaemonHarness:
    """One in-process daemon: `start()`, then `advance()` / `run_due()`, then `stop()`."""

    def __init__(self, config: Path, clock: FakeClock, *, replay: Path | None = None) -> None:
        self.clock = clock
        self.daemon = HarnessDaemon(RunOptions(config=config, replay=replay), clock=clock)
        self._main: asyncio.Future[None] | None = None
        self.loop = _reactor_loop()

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> HarnessDaemon:
        """prepare() (StartupError as in `run`), then main() up to the leader's first
        schedule; nothing due has run yet."""
        self.daemon.prepare()
        self._main = self.loop.create_task(self.daemon.main())
        self._settle()
        return self.daemon

    def stop(self) -> None:
        """What SIGTERM does, to the end of shutdown()."""
        if self._main is None or self._main.done():
            return
        self.daemon._on_stop_signal(signal.SIGTERM)
        self.loop.run_until_complete(self._main)
        self._settle()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the daemon's loop, as a signal handler calls it (a reload), and
        then what it started, to its end."""

        async def inside() -> T:
            return fn(*args)

        out = self.loop.run_until_complete(inside())
        self._settle()
        return out

    # -- time -------------------------------------------------------------------------------
    def run_due(self, rounds: int = 20) -> int:
        """Run every job due at the clock's now, to the end of what they start (crawls,
        evaluations, deliveries), again while runs make more due (a job moved to now); how
        many job runs started."""
        scheduler = self.daemon.scheduler
        started = 0
        for _ in range(rounds):
            due = scheduler.due(self.clock.now())
            if not due:
                return started
            scheduler._process_jobs()
            started += len(due)
            self._settle()
        raise AssertionError(f"jobs still due after {rounds} rounds: {due}")

    def advance(self, seconds: float) -> int:
        """Move the clock and run what became due (see run_due)."""
        self.clock.advance(seconds)
        return self.run_due()

    def advance_without_waiting(self, seconds: float) -> None:
        """Move the clock and submit what became due, without waiting for it to end (a crawl
        still running when its next run is due: APScheduler's max_instances)."""
        self.clock.advance(seconds)
        self.daemon.scheduler._process_jobs()
        self.loop.run_until_complete(asyncio.sleep(0))  # the jobs begin

    def wait_until(self, done: Callable[[], bool]) -> None:
        """Run the loop until `done()` (what the daemon's running jobs do takes real time:
        a crawl's request); then until nothing it started is left running."""

        async def until() -> None:
            while not done():
                await asyncio.sleep(0.01)

        self.loop.run_until_complete(until())
        self._settle()

    def next_run(self, job_id: str) -> datetime | None:
        job = self.daemon.scheduler.get_job(job_id)
        return None if job is None else job.next_run_time

    def _settle(self) -> None:
        """Run the loop until nothing the daemon started is left running: the jobs the
        scheduler submitted, the tasks and threads they started. Crawls take real time."""
        self.loop.run_until_complete(self._quiet())

    async def _quiet(self) -> None:
        d = self.daemon
        for _ in range(2):  # a task that finishes may start another (crawl -> evaluation)
            await asyncio.sleep(0)
            while True:
                executor = (d.scheduler._lookup_executor("default")
                            if d.scheduler is not None and d.scheduler.running else None)
                pending = [f for f in getattr(executor, "_pending_futures", ())
                           if not f.done()]
                pending += [t for t in d._tasks if not t.done()]
                pending += [f for f in d._busy if not f.done()]
                if not pending:
                    break
                await asyncio.wait(pending)


def _reactor_loop() -> asyncio.AbstractEventLoop:
    """Twisted's asyncio reactor's loop (installed if need be), as CrawlService.run uses it: the
    crawls run on it while the harness runs the loop, the reactor itself never runs."""
    from gpuradar.scheduler.daemon import install_asyncio_reactor

    if asyncio._get_running_loop() is not None:
        raise RuntimeError("the in-process daemon needs this thread's event loop, and one is "
                           "running here (Playwright's sync API keeps one: use the harness "
                           "in a module without it)")
    install_asyncio_reactor()
    from twisted.internet import reactor

    loop = reactor._asyncioEventloop  # type: ignore[attr-defined]
    asyncio.set_event_loop(loop)
    return loop


@contextmanager
def in_process_daemon(monkeypatch: Any, config: Path, clock: FakeClock, *,
                      replay: Path | None = None) -> Iterator[DaemonHarness]:
    """A started DaemonHarness, stopped at the end; APScheduler on `clock` meanwhile."""
    import importlib

    fake = _datetime_on(clock)
    for name in _APSCHEDULER_CLOCK_READERS:
        monkeypatch.setattr(importlib.import_module(name), "datetime", fake)
    from gpuradar.core.logs import REDACT

    secrets = REDACT._secrets  # the daemon masks its configuration's secrets process-wide
    harness = DaemonHarness(config, clock, replay=replay)
    # The reactor never runs here, so its thread pool, where its resolver looks names up,
    # never starts: names (of loopback servers) are looked up in place instead.
    from twisted.internet import reactor
    from twisted.internet.base import BlockingResolver

    resolver = reactor.resolver  # type: ignore[attr-defined]
    reactor.installResolver(BlockingResolver())  # type: ignore[attr-defined]
    try:
        harness.start()
        yield harness
    finally:
        try:
            harness.stop()
        finally:
            REDACT.set_secrets(secrets)
            reactor.installResolver(resolver)  # type: ignore[attr-defined]
