"""The pieces of a clean handover, in-process (issue #33): a fence failure seen by a delivery
thread deposes the replica before that thread goes on; the leader's watch of its lock
session notices a terminated session at once (real PostgreSQL); a job the scheduler
cancels on the way out logs one INFO line, no traceback; the stop budget is checked with
the configuration. The whole story with real processes: tests/scheduler/test_handover.py."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import create_engine

from gpuradar.alerts.delivery import Withheld
from gpuradar.core.config import Config, ConfigError
from gpuradar.scheduler.daemon import Daemon
from gpuradar.scheduler.health import Health
from gpuradar.scheduler.jobs import daemon_options
from gpuradar.scheduler.leadership import Leadership, SendGate
from gpuradar.storage.leader import LeaderLock, LockUnavailable
from tests.daemon_helpers import query


@pytest.fixture
def pg_url(request, pg_template):
    from tests.conftest import _pg_database

    return _pg_database(request, pg_template)


def options(**daemon):
    return daemon_options(Config(database_url="sqlite://", daemon=daemon))


class RefusingLock:
    """A lock whose server no longer lists it for this session."""

    name = "gpuradar lock test:1"

    def __init__(self) -> None:
        self.abandoned = False

    def confirm(self) -> None:
        raise LockUnavailable("the server no longer lists the leader lock for this session")

    def abandon(self) -> None:
        self.abandoned = True


def test_a_fence_failure_in_a_delivery_thread_deposes_before_the_thread_goes_on(caplog):
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")  # never used
    gauge = Gauge("gpuradar_leader", "", registry=CollectorRegistry())
    leadership = Leadership(engine, options(), gauge=gauge)
    health = Health(lambda: create_engine("sqlite://"), lambda: True,
                    role=lambda: leadership.role)
    deposed: list[str] = []

    async def scenario() -> None:
        leadership._loop = asyncio.get_running_loop()
        leadership._deposed = lambda: deposed.append(threading.current_thread().name)
        leadership._lead()
        lock = leadership._lock = RefusingLock()
        assert leadership.role == "leader" and gauge._value.get() == 1
        guard = leadership.guard()
        outcome: list[BaseException | None] = []

        def deliver() -> None:  # a delivery thread about to send a message
            try:
                with guard():
                    outcome.append(None)  # sent: must not happen
            except Withheld as exc:
                outcome.append(exc)
            # the moment the thread learns it may not send, the replica has stepped down
            outcome.append((leadership.role, gauge._value.get(), health.check()[1]["role"]))

        t = threading.Thread(target=deliver, name="gpuradar-notify_0")
        t.start()
        await asyncio.get_running_loop().run_in_executor(None, t.join)
        refused, flipped = outcome
        assert isinstance(refused, Withheld) and "lost the leader lock" in str(refused)
        assert flipped == ("standby", 0, "standby")
        assert lock.abandoned
        # the scheduler's part (jobs removed, crawls stopped) runs on the loop
        await asyncio.sleep(0)
        assert deposed == ["MainThread"]
        # nothing more goes out of this term, not even without asking the server
        with pytest.raises(Withheld), guard():
            pass

    with caplog.at_level(logging.INFO, logger="gpuradar.leadership"):
        asyncio.run(scenario())
    (line,) = [r for r in caplog.records if r.name == "gpuradar.leadership"]
    assert line.levelno == logging.ERROR
    assert line.getMessage().startswith("leader lock lost (the server no longer lists")


def test_the_send_gate_refuses_at_once_and_counts_the_sends_in_flight():
    gate = SendGate()
    gate.enter()
    gate.close("stopping")
    with pytest.raises(Withheld, match="stopping"):
        gate.enter()
    assert gate.in_flight == 1 and not gate.wait_idle(0)
    gate.leave()
    assert gate.in_flight == 0 and gate.wait_idle(0)


def test_the_lock_watch_notices_a_terminated_session_at_once(pg_url):
    """No periodic check here: only the watch can notice that the server ended the
    session, and it does while the connection is otherwise idle; the lock's own queries
    (a reply on the same socket) do not wake it."""
    from gpuradar.storage.db import get_engine

    lock = LeaderLock(get_engine(pg_url), session_timeout=60, io_timeout=5)
    lost = threading.Event()
    reasons: list[str] = []
    try:
        assert lock.try_acquire()
        lock.watch(lambda why: (reasons.append(why), lost.set()))
        for _ in range(20):
            lock.confirm()
        assert not lost.is_set()
        (backend,), = query(pg_url, "SELECT pid FROM pg_stat_activity WHERE "
                                    "application_name = :n", n=lock.name)
        query(pg_url, "SELECT pg_terminate_backend(:p)", p=backend)
        assert lost.wait(5), "the watch did not notice the terminated session"
        assert len(reasons) == 1 and reasons[0]
        with pytest.raises(LockUnavailable):
            lock.confirm()
    finally:
        lock.abandon()


def test_a_leader_whose_lock_session_is_terminated_stands_down_at_once(pg_url):
    """leader_retry 30 s: the periodic check cannot be what notices it within the wait."""
    from gpuradar.storage.db import get_engine

    engine = get_engine(pg_url)
    gauge = Gauge("gpuradar_leader", "", registry=CollectorRegistry())
    leadership = Leadership(engine, options(leader_retry=30, takeover_within=120),
                            gauge=gauge)
    stood_by = asyncio.Event()

    async def scenario() -> None:
        leadership.start(lambda: None, stood_by.set)
        for _ in range(500):
            if leadership.is_leader:
                break
            await asyncio.sleep(0.01)
        assert leadership.is_leader and gauge._value.get() == 1
        name = leadership._lock.name
        (backend,), = query(pg_url, "SELECT pid FROM pg_stat_activity WHERE "
                                    "application_name = :n", n=name)
        query(pg_url, "SELECT pg_terminate_backend(:p)", p=backend)
        await asyncio.wait_for(stood_by.wait(), 5)
        assert leadership.role == "standby" and gauge._value.get() == 0
        leadership.stop_trying()
        await leadership.release(1)

    asyncio.run(scenario())


def test_a_job_cancelled_on_the_way_out_logs_one_info_line(caplog):
    """APScheduler cancels the jobs still running when it shuts down; it would log that as
    `Job ... raised an exception` with a CancelledError traceback."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    class Sweeping:  # stands in for the daemon: its delivery never ends
        def __init__(self) -> None:
            self.started = asyncio.Event()

        async def deliver(self) -> None:
            self.started.set()
            await asyncio.Event().wait()

    async def scenario() -> None:
        daemon = Sweeping()
        scheduler = AsyncIOScheduler()
        scheduler.start()
        scheduler.add_job(Daemon._outbox_job, args=[daemon], id="outbox")
        scheduler.add_job(Daemon._crawl_job, args=[daemon, "vastai"], id="crawl:vastai",
                          next_run_time=None)
        await asyncio.wait_for(daemon.started.wait(), 5)
        scheduler.shutdown(wait=False)
        for _ in range(5):
            await asyncio.sleep(0)

    with caplog.at_level(logging.DEBUG):
        asyncio.run(scenario())
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r.getMessage() for r in caplog.records if r.name == "gpuradar.daemon"] == \
        ["outbox cancelled: the daemon is stopping"]
    assert not any(r.exc_info for r in caplog.records)


def test_the_grace_period_must_fit_in_the_stop_budget():
    assert (options().grace_period, options().stop_timeout) == (30.0, 40.0)
    with pytest.raises(ConfigError, match=r"grace_period \(40s\) must be shorter than "
                                          r"stop_timeout \(40s\)"):
        options(grace_period="40s")
    assert options(grace_period=50, stop_timeout="1m").stop_timeout == 60.0
