"""Which replica of `gpuradar run` acts: the leader crawls, evaluates the rules and delivers
the outbox; a standby only serves /metrics and /healthz from the shared database.

On PostgreSQL the replicas elect their leader with the advisory lock of storage.leader: a
standby tries to take it every `daemon.leader_retry`; the leader checks every
`daemon.leader_retry`, and before each crawl, rule evaluation, delivery batch and message,
that its lock connection still answers and still holds the lock. A check that fails or gets
no answer in time deposes it AT ONCE (fencing): its crawl and outbox jobs are removed, its
running crawls stopped, and it sends nothing more, not even what it had read already.

Why that is safe: the lock session asks the server to drop it after
`takeover_within - leader_retry` of silence, while a leader that stops hearing from the
server deposes itself within `takeover_within / 2` (one check interval plus the check's
timeout, `takeover_within / 2 - leader_retry`); with `takeover_within >= 4 x leader_retry`
the old leader has stopped at least one `leader_retry` before the lock can pass on. A
standby takes over at most `leader_retry` after the lock is free, so within
`takeover_within`.

On SQLite there is one daemon per database file (storage.leader.InstanceLock): it is the
leader from the start and never loses the role.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from gpuradar.scheduler.jobs import DaemonOptions
from gpuradar.storage.leader import (
    InstanceLock,
    InstanceLocked,
    LeaderLock,
    LockUnavailable,
    sqlite_path,
)
from sqlalchemy import Engine

from gpuradar.core.units import format_duration

log = logging.getLogger("gpuradar.leadership")

LEADER, STANDBY = "leader", "standby"

__all__ = ["LEADER", "STANDBY", "InstanceLocked", "Leadership"]


class Leadership:
    """The role of this process, and the lock behind it."""

    def __init__(self, engine: Engine, opts: DaemonOptions, gauge: Any = None) -> None:
        self.engine = engine
        self.single = engine.dialect.name != "postgresql"
        self.role = STANDBY
        self.gauge = gauge
        self.configure(opts)
        self._instance: InstanceLock | None = None
        self._lock: LeaderLock | None = None
        self._task: asyncio.Task | None = None
        self._check: asyncio.Future[bool] | None = None
        self._elected: Callable[[], None] = lambda: None
        self._deposed: Callable[[], None] = lambda: None
        self._not_before = 0.0
        self._last_view: str | None = None
        if gauge is not None:
            gauge.set(0)

    def configure(self, opts: DaemonOptions) -> None:
        """Timings of the election (also on reload; a new lock session uses them)."""
        self.retry = opts.leader_retry
        self.takeover_within = opts.takeover_within
        # the longest a check may take: the leader still stops before the server frees
        # its lock (module docstring); attempts to take the lock may take longer
        self.check_timeout = max(self.retry, self.takeover_within / 2 - self.retry)
        self.attempt_timeout = max(self.check_timeout, 10.0)

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def claim(self) -> None:
        """Before the daemon marks or writes anything: on SQLite take the instance lock
        (raises InstanceLocked naming the process that holds it)."""
        path = sqlite_path(self.engine) if self.single else None
        if path is not None:
            self._instance = InstanceLock(path)
            self._instance.acquire()

    def start(self, elected: Callable[[], None], deposed: Callable[[], None]) -> None:
        """From the event loop: call `elected` when this process becomes the leader and
        `deposed` the moment it stops being it."""
        self._elected, self._deposed = elected, deposed
        if self.single:
            self._set(LEADER)
            log.info("leader: the only daemon on this database", extra={"role": LEADER})
            elected()
            return
        log.info("standby until the leader lock is taken (trying every %s; a lost leader is "
                 "replaced within %s)", format_duration(self.retry),
                 format_duration(self.takeover_within),
                 extra={"role": STANDBY})
        self._task = asyncio.get_running_loop().create_task(self._run(), name="leadership")

    def _set(self, role: str) -> None:
        self.role = role
        if self.gauge is not None:
            self.gauge.set(1 if role == LEADER else 0)

    # -- the election ------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self.is_leader:
                    await self.confirm()
                elif loop.time() >= self._not_before:
                    await self._attempt()
            except Exception as exc:  # noqa: BLE001 - the election must go on
                log.error("leader election: %s: %s", type(exc).__name__, exc, exc_info=exc,
                          extra={"role": self.role})
            await asyncio.sleep(self.retry)

    async def _call(self, lock: LeaderLock, fn: Callable[[], Any], timeout: float) -> Any:
        """`fn` in a thread, given up after `timeout` (the lock session is abandoned)."""
        from gpuradar.scheduler.threads import in_thread

        try:
            return await asyncio.wait_for(in_thread(fn), timeout)
        except TimeoutError:
            lock.abandon()
            if self._lock is lock:
                self._lock = None
            raise LockUnavailable(f"the database did not answer within {timeout:g}s"
                                  ) from None

    async def _attempt(self) -> None:
        from gpuradar.scheduler.threads import in_thread
        from gpuradar.storage.queries import mark_interrupted_crawls

        if self._lock is None:
            self._lock = LeaderLock(self.engine, self.takeover_within - self.retry,
                                    self.check_timeout)
        lock = self._lock
        try:
            acquired = await self._call(lock, lock.try_acquire, self.attempt_timeout)
            if not acquired:
                holder = await self._call(lock, lock.holder, self.attempt_timeout)
        except LockUnavailable as exc:
            self._view(f"cannot reach the database for the leader lock ({exc}); retrying "
                       f"every {format_duration(self.retry)}", logging.WARNING)
            return
        if not acquired:
            self._view(f"standby: the leader is {holder or 'another replica'}; taking over "
                       f"when it stops (checking every {format_duration(self.retry)})")
            return
        # the previous leader is gone: its crawls left 'running' stopped with it
        try:
            interrupted = await in_thread(mark_interrupted_crawls, self.engine)
        except Exception as exc:  # noqa: BLE001 - give the lock back and try again
            log.error("took the leader lock but cannot mark the previous leader's crawls: "
                      "%s; giving the lock up", str(exc).splitlines()[0] if str(exc) else exc,
                      extra={"role": STANDBY})
            await self._give_up(lock)
            return
        self._last_view = None
        self._set(LEADER)
        log.info("leader: took the leader lock as %s; crawling, evaluating and delivering%s",
                 lock.name, f"; {interrupted} crawl(s) left running by the previous leader "
                 "marked failed" if interrupted else "", extra={"role": LEADER})
        try:
            self._elected()
        except Exception as exc:  # noqa: BLE001 - e.g. the database failed meanwhile
            log.error("taking over failed: %s", exc, exc_info=exc, extra={"role": LEADER})
            self.depose(f"taking over failed: {str(exc).splitlines()[0] if str(exc) else exc}")

    def _view(self, message: str, level: int = logging.INFO) -> None:
        """Log what a standby sees when it changes (not every retry)."""
        if message != self._last_view:
            self._last_view = message
            log.log(level, "%s", message, extra={"role": STANDBY})

    async def _give_up(self, lock: LeaderLock) -> None:
        from gpuradar.scheduler.threads import in_thread

        if self._lock is lock:
            self._lock = None
        try:
            await asyncio.wait_for(in_thread(lock.release), self.check_timeout)
        except TimeoutError:
            lock.abandon()

    # -- fencing -----------------------------------------------------------------------------
    async def confirm(self) -> bool:
        """True while this process is the leader and its lock still holds (checked on the
        lock connection now; concurrent callers share one check). A failed check deposes
        it before returning False."""
        if not self.is_leader:
            return False
        if self.single:
            return True
        if self._check is None or self._check.done():
            self._check = asyncio.ensure_future(self._probe())
        return await asyncio.shield(self._check)

    def fenced(self, send: Callable[..., Any]) -> Callable[..., Any]:
        """`send` for the delivery threads that first confirms the lock on its connection:
        a leader that lost the lock while a delivery pass was running (it was frozen, or cut
        off from the database but not from the targets) sends nothing more of that pass.
        The refusal is recorded as a failed attempt; the new leader sends the message."""
        if self.single:
            return send

        def guarded(*args: Any, **kwargs: Any) -> Any:
            lock = self._lock
            try:
                if lock is None or not self.is_leader:
                    raise LockUnavailable("deposed")
                lock.confirm()
            except LockUnavailable as exc:
                raise LockUnavailable(f"not sent: this replica lost the leader lock ({exc}); "
                                      "the leader sends it") from None
            return send(*args, **kwargs)

        return guarded

    async def _probe(self) -> bool:
        lock = self._lock
        if lock is None:
            self.depose("the leader lock connection is gone")
            return False
        try:
            await self._call(lock, lock.confirm, self.check_timeout)
        except LockUnavailable as exc:
            if self._lock is lock or self._lock is None:
                self.depose(str(exc))
            return False
        return self.is_leader

    def depose(self, reason: str) -> None:
        """Stop acting as the leader at once, and stand by."""
        if not self.is_leader:
            return
        self._set(STANDBY)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.abandon()
        # a healthy standby gets the first chance to take over
        self._not_before = asyncio.get_running_loop().time() + 2 * self.retry
        log.error("leader lock lost (%s): stopped crawling, evaluating and delivering; "
                  "standing by", reason, extra={"role": STANDBY})
        self._deposed()

    # -- stop --------------------------------------------------------------------------------
    def stop_trying(self) -> None:
        """Shutting down: no more elections (a leader stays leader until `release`)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def release(self) -> None:
        """Hand over: give the lock up so that a standby takes over at its next try."""
        self.stop_trying()
        was_leader = self.is_leader
        self._set(STANDBY)
        lock, self._lock = self._lock, None
        if lock is not None:
            await self._give_up(lock)
            if was_leader:
                log.info("leader lock released: a standby takes over within %s",
                         format_duration(self.retry), extra={"role": STANDBY})
        if self._instance is not None:
            self._instance.release()
