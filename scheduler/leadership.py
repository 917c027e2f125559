"""Which replica of `gpuradar run` acts: the leader crawls, evaluates the rules and delivers
the outbox; a standby only serves /metrics and /healthz from the shared database.

On PostgreSQL the replicas elect their leader with the advisory lock of storage.leader: a
standby tries to take it every `daemon.leader_retry`; the leader checks every
`daemon.leader_retry`, and before each crawl, rule evaluation, delivery batch and message,
that its lock connection still answers and still holds the lock, and a thread watches the
lock session so that the server ending it is noticed at once. Any check that fails or gets
no answer in time deposes it AT ONCE (fencing), from whichever thread noticed: role, the
`gpuradar_leader` gauge and /healthz flip and the send gate closes before that thread
returns; then its crawl and outbox jobs are removed and its running crawls stopped (on the
loop). It sends nothing more, not even what it had read already.

Sends pass one guard (`Leadership.guard`): the term's `SendGate` (closed by a deposal or a
shutdown, counting the sends in flight) and, inside it, the fence check. So once the gate
is closed no message starts, and `release` can give the lock up after the sends that had
started are done: no message leaves a process after it let go of its lock.

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
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from gpuradar.alerts.delivery import Withheld
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.units import format_duration
from gpuradar.scheduler.jobs import DaemonOptions
from gpuradar.storage.leader import (
    InstanceLock,
    InstanceLocked,
    LeaderLock,
    LockUnavailable,
    sqlite_path,
)

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge

log = logging.getLogger("gpuradar.leadership")

LEADER, STANDBY = "leader", "standby"
# before start(): neither, yet (a lone SQLite daemon's first instants read "standby")
STARTING = "starting"

__all__ = ["LEADER", "STANDBY", "STARTING", "InstanceLocked", "Leadership", "SendGate"]


class SendGate:
    """Whether this process may still start a send, and how many it has in flight. Every
    message is sent between `enter()` (which raises Withheld once the gate is closed) and
    `leave()`; `close()` refuses every later one at once and never waits."""

    def __init__(self, closed: str | None = None) -> None:
        self._cond = threading.Condition()
        self.closed = closed
        self._inflight = 0

    def enter(self) -> None:
        with self._cond:
            if self.closed is not None:
                raise Withheld(self.closed)
            self._inflight += 1

    def leave(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def close(self, why: str) -> None:
        with self._cond:
            if self.closed is None:
                self.closed = why

    @property
    def in_flight(self) -> int:
        return self._inflight

    def wait_idle(self, timeout: float) -> bool:
        """Block until no send is in flight (True) or `timeout` passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._inflight == 0, max(0.0, timeout))


class Leadership:
    """The role of this process, and the lock behind it."""

    def __init__(self, engine: Engine, opts: DaemonOptions, gauge: Gauge | None = None,
                 clock: Clock = SYSTEM) -> None:
        """`clock`: the wall clock its log lines are dated by (the lock's own retries and
        checks run on the event loop's time, as the server's timeouts do)."""
        self.engine = engine
        self.clock = clock
        self.single = engine.dialect.name != "postgresql"
        self.role = STARTING
        self.gauge = gauge
        self.attempts: Counter | None = None  # by result: a standby that tries is visible
        self.configure(opts)
        self._instance: InstanceLock | None = None
        self._lock: LeaderLock | None = None
        self._task: asyncio.Task | None = None
        self._check: asyncio.Future[bool] | None = None
        self._elected: Callable[[], None] = lambda: None
        self._deposed: Callable[[], None] = lambda: None
        self._not_before = 0.0
        self._last_view: str | None = None
        self._stopping = False  # shutting down: no more attempts, checks go on
        self._flip = threading.Lock()  # role, gauge, gate and lock change together
        self._gate = SendGate(closed="this replica is not the leader")
        self._loop: asyncio.AbstractEventLoop | None = None
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
        self._loop = asyncio.get_running_loop()
        if self.single:
            self._lead()
            log.info("leader: the only daemon on this database", extra={"role": LEADER})
            elected()
            return
        self._set(STANDBY)
        log.info("standby until the leader lock is taken (trying every %s; a lost leader is "
                 "replaced within %s)", format_duration(self.retry),
                 format_duration(self.takeover_within),
                 extra={"role": STANDBY})
        self._task = asyncio.get_running_loop().create_task(self._run(), name="leadership")

    def _set(self, role: str) -> None:
        self.role = role
        if self.gauge is not None:
            self.gauge.set(1 if role == LEADER else 0)

    def _lead(self) -> None:
        with self._flip:
            self._gate = SendGate()
            self._set(LEADER)

    # -- the election ------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self.is_leader:
                    await self.confirm()
                elif loop.time() >= self._not_before and not self._stopping:
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
            self._count("unreachable")
            self._view(f"cannot reach the database for the leader lock ({exc}); retrying "
                       f"every {format_duration(self.retry)}", logging.WARNING)
            return
        self._count("taken" if acquired else "held")
        if acquired and self._stopping:  # took it while shutting down: hand it back
            await self._give_up(lock)
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
        self._lead()
        try:  # the server ending the lock session deposes this replica at once
            lock.watch(self.depose)
        except LockUnavailable as exc:
            self.depose(str(exc))
            return
        log.info("leader: took the leader lock as %s; crawling, evaluating and delivering%s",
                 lock.name, f"; {interrupted} crawl(s) left running by the previous leader "
                 "marked failed" if interrupted else "", extra={"role": LEADER})
        try:
            self._elected()
        except Exception as exc:  # noqa: BLE001 - e.g. the database failed meanwhile
            log.error("taking over failed: %s", exc, exc_info=exc, extra={"role": LEADER})
            self.depose(f"taking over failed: {str(exc).splitlines()[0] if str(exc) else exc}")

    def _count(self, result: str) -> None:
        if self.attempts is not None:
            self.attempts.labels(result).inc()

    def _view(self, message: str, level: int = logging.INFO) -> None:
        """Log what a standby sees when it changes (not every retry)."""
        if message != self._last_view:
            self._last_view = message
            log.log(level, "%s", message, extra={"role": STANDBY})

    async def _give_up(self, lock: LeaderLock, timeout: float | None = None) -> None:
        from gpuradar.scheduler.threads import in_thread

        if self._lock is lock:
            self._lock = None
        try:
            await asyncio.wait_for(in_thread(lock.release),
                                   self.check_timeout if timeout is None else timeout)
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

    def guard(self) -> Callable[[], AbstractContextManager[None]]:
        """The guard every message of a delivery pass is sent in (alerts.delivery's `guard`),
        bound to the present term: it enters the term's SendGate, then confirms the lock on
        its connection; a failed check deposes this replica on the spot (from the delivery
        thread) and withholds the message. Once the gate is closed (deposed, stopping)
        nothing more is sent; the messages left stay pending for the leader."""
        gate, lock = self._gate, self._lock

        @contextlib.contextmanager
        def fenced() -> Iterator[None]:
            gate.enter()
            try:
                if not self.single:
                    try:
                        if lock is None or lock is not self._lock or not self.is_leader:
                            raise LockUnavailable("not the leader any more")
                        lock.confirm()
                    except LockUnavailable as exc:
                        self.depose(str(exc))
                        raise Withheld(f"this replica lost the leader lock ({exc}); the "
                                       "leader sends it") from None
                yield
            finally:
                gate.leave()

        return fenced

    @property
    def gate(self) -> SendGate:
        """The present term's send gate."""
        return self._gate

    def close_gate(self, why: str) -> None:
        """No message starts from now on (shutting down); those in flight go on."""
        self._gate.close(why)

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
        """Stop acting as the leader at once, and stand by. Safe from any thread: the role,
        the gauge (so /healthz and /metrics), the send gate and the log flip before this
        returns; removing the jobs and stopping the crawls follows on the event loop."""
        with self._flip:
            if not self.is_leader:
                return
            self._gate.close(f"this replica lost the leader lock ({reason}); the leader "
                             "sends it")
            self._set(STANDBY)
            lock, self._lock = self._lock, None
            # a healthy standby gets the first chance to take over (loop.time() is monotonic)
            self._not_before = time.monotonic() + 2 * self.retry
        if lock is not None:
            lock.abandon()
        log.error("leader lock lost (%s): stopped crawling, evaluating and delivering; "
                  "standing by", reason, extra={"role": STANDBY})
        loop = self._loop
        if loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._deposed()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to stop
                loop.call_soon_threadsafe(self._deposed)

    # -- stop --------------------------------------------------------------------------------
    def stop_trying(self) -> None:
        """Shutting down: no more attempts to take the lock. A leader goes on checking its
        lock (a lock lost meanwhile still deposes it) and stays leader until `release`."""
        self._stopping = True

    async def others(self, timeout: float) -> list[str] | None:
        """The other replicas connected to this database (their lock sessions), None when
        that cannot be told in `timeout`; always [] on SQLite."""
        from gpuradar.scheduler.threads import in_thread

        if self.single:
            return []
        lock = self._lock
        if lock is None:
            return None
        try:
            return await asyncio.wait_for(in_thread(lock.others), timeout)
        except (TimeoutError, LockUnavailable):
            return None

    async def release(self, timeout: float | None = None) -> None:
        """Hand over: stop sending, stand by, then give the lock up so that a standby takes
        over at its next try. The caller has made sure that nothing of this process is
        still sending or writing (see Daemon.shutdown)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
        with self._flip:
            was_leader = self.is_leader
            self._gate.close("this replica is stopping; the leader after it sends it")
            self._set(STANDBY)  # before the lock is free: never two leaders at once
            lock, self._lock = self._lock, None
        if lock is not None:
            released_at = self.clock.now().timestamp()
            await self._give_up(lock, timeout)
            if was_leader:
                log.info("leader lock released: a standby takes over within %s",
                         format_duration(self.retry),
                         extra={"role": STANDBY, "released_at": released_at})
        if self._instance is not None:
            self._instance.release()
