"""/healthz as liveness of the leader's crawls (issue #46): when a source's due crawls stop
starting — APScheduler skips each run because the previous crawl still holds the job's one
slot, or misses it — for more than `daemon.liveness_intervals` intervals (and more than the
crawl's time limit could explain), /healthz answers 503 with the source and the reason, so
an orchestrator restarts the wedged replica. A standby runs no crawl and is never stalled.

The daemon's own handler receives APScheduler's real events here; /healthz is served over
real HTTP on loopback."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest
from apscheduler.events import (
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobSubmissionEvent,
)
from prometheus_client import CollectorRegistry

from gpuradar.crawler.service import STOP_BOUND
from gpuradar.scheduler.daemon import Daemon, RunOptions, SourceState
from gpuradar.scheduler.health import Health, make_app, serve, stalled
from gpuradar.scheduler.metrics import Metrics
from tests.daemon_helpers import only_sources, write_config
from tests.helpers import free_port

INTERVAL, TIMEOUT = 60, 20  # time limit 2 x 20 s + the stop bound: within one interval


@pytest.fixture
def daemon(tmp_path, sqlite_url):
    """A daemon with its configuration, state, metrics and health as prepare() makes them,
    the scheduler's events fed to it by hand; its /healthz on loopback."""
    from gpuradar.storage.db import get_engine

    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": sqlite_url,
        "sources": only_sources({"vastai": {"interval": INTERVAL, "timeout": TIMEOUT}}),
        "daemon": {"liveness_intervals": 3},
    })
    d = Daemon(RunOptions(config=config))
    d.loaded = d.load()
    d.state = {"vastai": SourceState()}
    d.metrics = Metrics(registry=CollectorRegistry())
    role = {"value": "leader"}
    d.health = Health(lambda: get_engine(sqlite_url), lambda: True, role=lambda: role["value"])
    port = free_port()
    httpd = serve("127.0.0.1", port, make_app(CollectorRegistry(), d.health, lambda s: s))
    d.port, d.role = port, role
    yield d
    httpd.shutdown()
    httpd.server_close()


def healthz(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def skipped(d: Daemon, code: int = EVENT_JOB_MAX_INSTANCES) -> None:
    """APScheduler's event for a due run of vastai's crawl job that did not start."""
    d._job_event(JobSubmissionEvent(code, "crawl:vastai", "default",
                                    [datetime.now(UTC)]))


def test_healthz_fails_once_a_sources_crawls_stopped_starting_for_too_long(daemon):
    for _ in range(3):
        skipped(daemon)
    assert healthz(daemon.port)[0] == 200  # 3 intervals: allowed
    skipped(daemon, EVENT_JOB_MISSED)  # a missed run counts the same
    status, body = healthz(daemon.port)
    assert status == 503 and body["status"] == "unhealthy"
    assert body["stalled_crawls"] == {"vastai": (
        "4 due crawls in a row did not start (its previous crawl still holds its slot, or "
        "the scheduler missed them; allowed: 3)")}


def test_a_standby_runs_no_crawl_and_is_not_stalled(daemon):
    for _ in range(4):
        skipped(daemon)
    daemon.role["value"] = "standby"
    assert healthz(daemon.port)[0] == 200


def test_other_jobs_events_do_not_count(daemon):
    for _ in range(10):
        daemon._job_event(JobSubmissionEvent(EVENT_JOB_MAX_INSTANCES, "outbox", "default",
                                             [datetime.now(UTC)]))
    assert healthz(daemon.port)[0] == 200


def test_a_crawl_longer_than_its_intervals_is_not_called_stalled():
    """A crawl may legitimately run up to its time limit (2 x timeout) plus the stop bound:
    the runs it keeps from starting meanwhile are allowed on top of liveness_intervals."""
    limit = 2 * 600 + STOP_BOUND
    allowed = math.ceil(limit / 60)
    assert stalled(allowed, 60, limit, 3) is None
    assert stalled(allowed + 1, 60, limit, 3) is not None
    assert stalled(3, 600, 100, 3) is None and stalled(4, 600, 100, 3) is not None
