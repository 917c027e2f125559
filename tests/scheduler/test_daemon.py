"""`gpuradar run` as users run it: a real subprocess on a seconds-long schedule, replayed
or served over real HTTP on loopback, notifying a real SMTP server (aiosmtpd) and a real
webhook receiver, read through /metrics and /healthz, stopped and reloaded by signals.

Every test can run alone and in any order; each starts its own daemon. What the daemon
decides (its schedule, backoff, the watcher, a rejected reload) and what it notifies and
exports (/metrics, promtool) is tested in-process on a fake clock: test_daemon_logic.py."""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_helpers import (
    Daemon,
    SmtpSink,
    WebhookSink,
    consistency_problems,
    copy_recordings,
    free_port,
    only_sources,
    query,
    wait_for,
    write_config,
)
from tests.provider_server import Reply, serve_standard
from tests.routes.core import AZURE_STANDARD_REQUESTS

pytestmark = pytest.mark.process  # the process's signals, logs, exit and kill -9

SECRET = "SEKRET-vast-key-123456"
# one source each, so that a cheaper offer from another source does not re-notify
H100_RULE = "H100 under $100/h on vastai"
A100_RULE = "A100 under $100/h on lambda"
FAST = {"jitter": 0}


# -- a replayed daemon ----------------------------------------------------------------------
@contextmanager
def replayed_daemon(work: Path, sqlite_template: Path) -> Iterator[dict[str, Any]]:
    """`gpuradar run --replay` of three recorded sources with the H100 rule, notifying a real
    SMTP server and a real webhook; its parts by name."""
    recordings = copy_recordings(work / "recordings", ["lambda", "vastai", "oci"])
    shutil.copy(sqlite_template, work / "gpuradar.db")  # migrated already: faster start
    db_url = f"sqlite:///{work / 'gpuradar.db'}"
    with SmtpSink() as smtp, WebhookSink() as hook:
        config = {
            "database_url": db_url,
            "sources": {"vastai": {"interval": 2, "api_key": SECRET, **FAST},
                        "lambda": {"interval": 3, **FAST}, "oci": {"interval": 5, **FAST}},
            "targets": {"mail": smtp.url, "hook": hook.url},
            "rules": [H100_RULE],
            # the recordings are from 2026-08: rules judge replayed data by its capture
            # date, so only a user who says old data is fine gets alerts from them
            "alerts": {"stale_after": "never"},
            "daemon": {"outbox_interval": 1, "grace_period": 20, "watch_interval": 0,
                       "misfire_grace": 10},
        }
        path = write_config(work / "gpuradar.yaml", config)
        port = free_port()
        daemon = Daemon(work, path, "--replay", str(recordings), "--log-format", "json",
                        "--metrics-port", str(port), metrics_port=port)
        try:
            daemon.wait_ready()
            yield {"daemon": daemon, "smtp": smtp, "hook": hook, "config": config,
                   "path": path, "db_url": db_url}
        finally:
            daemon.cleanup()


@pytest.fixture
def own_replay(tmp_path, sqlite_template):
    """A daemon of the test's own, for the tests that reload or stop it."""
    with replayed_daemon(tmp_path, sqlite_template) as parts:
        yield parts


def test_logs_are_json_lines_without_secrets_and_sighup_applies_new_rules(own_replay):
    """The process's log lines (after a crawl and a delivery, the moments a key or a target
    could leak), then SIGHUP with a valid configuration: one daemon for both."""
    d, smtp, hook = own_replay["daemon"], own_replay["smtp"], own_replay["hook"]
    wait_for(lambda: any("H100" in s for s in smtp.subjects()), 30, "the H100 rule's email",
             on_fail=d.tail)
    d.wait_metric("gpuradar_notifications_total", 1, channel="email", status="sent")
    logs = wait_for(lambda: "crawl ok" in d.logs() and d.logs(), 30, "a crawl's log line",
                    on_fail=d.tail)
    lines = [line for line in logs.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert {"ts", "level", "logger", "message"} <= set(records[0])
    assert any(r.get("source") == "vastai" and "crawl ok" in r["message"] for r in records)
    assert SECRET not in logs
    assert SECRET not in d.metrics_text()
    assert smtp.url not in logs
    config = dict(own_replay["config"], rules=[H100_RULE, A100_RULE])
    write_config(own_replay["path"], config)
    d.signal(signal.SIGHUP)
    d.wait_metric("gpuradar_config_reloads_total", 1, result="success")
    wait_for(lambda: any("A100" in s for s in smtp.subjects())
             and any("A100" in t for t in hook.titles()), 30,
             "the new rule's notifications", on_fail=d.tail)
    d.wait_metric("gpuradar_rules_firing", 2)
    assert sum("H100" in s for s in smtp.subjects()) == 1  # the old rule did not re-fire
    assert "configuration reloaded (SIGHUP): 2 rule(s)" in d.logs()


def test_sigterm_exits_0_within_the_grace_period(own_replay):
    d = own_replay["daemon"]
    d.wait_metric("gpuradar_crawls_total", 1, source="vastai", status="ok")  # stored something
    grace = own_replay["config"]["daemon"]["grace_period"]
    started = time.monotonic()
    assert d.stop(timeout=grace + 15) == 0
    assert time.monotonic() - started < grace
    logs = d.logs()
    assert "SIGTERM: stopping" in logs and "gpuradar daemon stopped" in logs
    assert consistency_problems(own_replay["db_url"]) == []


# -- a hanging source ---------------------------------------------------------------------------
@pytest.fixture
def production_db_url(request, sqlite_url):
    """PostgreSQL (the production store) where the server is there, else SQLite."""
    from tests.conftest import _pg_database

    try:
        return _pg_database(request, request.getfixturevalue("pg_template"))
    except pytest.skip.Exception:
        return sqlite_url


def test_a_hanging_source_does_not_delay_the_others(tmp_path, provider_server,
                                                    production_db_url):
    endpoints = serve_standard(provider_server)
    # azure answers nothing for 30 s; fx fails with 500s; vastai is fine
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(delay=30))
    provider_server.route("GET", "/stats/eurofxref/eurofxref-daily.xml",
                          lambda req: Reply(status=500, body=b"down"))
    db_url = production_db_url
    port = free_port()
    path = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": db_url, "endpoints": endpoints,
        "sources": only_sources({"azure": {"interval": 600, "timeout": 6, **FAST},
                                 "vastai": {"interval": 1, **FAST},
                                 "fx": {"interval": 1, **FAST}}),
        "scrapy": {"DOWNLOAD_DELAY": 0},
        "daemon": {"backoff_max": 4, "grace_period": 5, "watch_interval": 0,
                   "misfire_grace": 10},
        "metrics": {"port": port},
    })
    d = Daemon(tmp_path, path, metrics_port=port)
    try:
        d.wait_ready()
        azure = wait_for(lambda: query(db_url, "SELECT started_at, finished_at, status, error "
                                       "FROM crawl WHERE source = 'azure' AND status != "
                                       "'running'"), 30, "the hung azure crawl to be closed",
                         on_fail=d.tail)[0]
        started, finished, status, error = azure
        assert status == "failed" and "closespider_timeout" in error, error
        vast = query(db_url, "SELECT status FROM crawl WHERE source = 'vastai' AND "
                     "started_at >= :a AND started_at <= :b AND status != 'running'",
                     a=started, b=finished)
        assert len(vast) >= 2, "vastai was not crawled on time while azure hung"
        assert set(vast) == {("ok",)}, "azure's errors leaked into vastai's crawls"
        assert d.healthz()[0] == 200
        # the failing source backs off: 1 s, then 2 s, then 4 s (the cap)
        d.wait_metric("gpuradar_source_consecutive_failures", 3, source="fx")
        logs = d.logs()
        assert "fx: crawl failed" in logs
        assert "2 failed in a row, next crawl in 2s" in logs
        assert "3 failed in a row, next crawl in 4s" in logs
        assert d.value("gpuradar_crawls_total", source="azure", status="failed") == 1
        assert d.stop() == 0
    finally:
        d.cleanup()
    assert consistency_problems(db_url) == []


# -- kill -9 and restart ------------------------------------------------------------------------
def test_kill_9_during_a_crawl_and_a_delivery_then_restart(tmp_path, provider_server,
                                                           sqlite_url):
    endpoints = serve_standard(provider_server)
    standard_azure = provider_server.routes[("GET", "/api/retail/prices")]
    azure_requests = []

    def azure(req):  # the first crawl answers; the next one hangs
        azure_requests.append(req)
        return (standard_azure(req) if len(azure_requests) <= AZURE_STANDARD_REQUESTS
                else Reply(delay=60))

    provider_server.route("GET", "/api/retail/prices", azure)
    db_url = sqlite_url
    with SmtpSink() as smtp, WebhookSink() as hook:
        def start(**sources):
            port = free_port()
            path = write_config(tmp_path / "gpuradar.yaml", {
                "database_url": db_url, "endpoints": endpoints,
                "sources": only_sources(sources),
                # rto: apprise waits up to 60 s for the webhook's answer, bounded by
                # send_timeout; the message in flight is reserved for 15 + 5 s from its
                # start, then sent again after the restart
                "targets": {"mail": smtp.url, "hook": hook.url + "?rto=60"},
                "rules": [H100_RULE], "scrapy": {"DOWNLOAD_DELAY": 0},
                "alerts": {"send_timeout": 15},
                "daemon": {"outbox_interval": 1, "grace_period": 5, "watch_interval": 0,
                           "misfire_grace": 10},
                "metrics": {"port": port}})
            d = Daemon(tmp_path, path, metrics_port=port)
            d.wait_ready()
            return d

        def sql(q):
            return query(db_url, q)

        # 1. the webhook keeps the delivery in flight; azure's second crawl hangs: kill -9
        hook.hang = 30
        d = start(azure={"interval": 1, **FAST}, vastai={"interval": 60, **FAST},
                  fx={"interval": 3600, **FAST})
        try:
            wait_for(lambda: hook.posts and sql(
                "SELECT 1 FROM notification WHERE target = 'mail' AND status = 'sent'")
                and sql("SELECT 1 FROM crawl WHERE source = 'azure' AND status = 'ok'")
                and sql("SELECT 1 FROM crawl WHERE source = 'azure' AND status = 'running'"),
                30, "a delivery and a crawl in flight", on_fail=d.tail)
            d.kill9()
        finally:
            d.cleanup()
        azure_offers = sql("SELECT COUNT(*) FROM offer WHERE source = 'azure' AND active")
        assert azure_offers[0][0] > 0
        assert sql("SELECT status FROM notification WHERE target = 'hook'") == [("pending",)]
        assert sql("SELECT COUNT(*) FROM crawl WHERE status = 'running'")[0][0] >= 1

        # 2. restart: the crawl is marked failed and closed nothing; the webhook in flight
        # is delivered again; the email is not; further evaluations send nothing new
        hook.hang = 0
        azure_requests.clear()
        d = start(azure={"interval": 600, **FAST}, vastai={"interval": 1, **FAST},
                  fx={"interval": 3600, **FAST})
        try:
            interrupted = sql("SELECT error FROM crawl WHERE source = 'azure' AND status = "
                              "'failed'")
            assert interrupted and interrupted[0][0].startswith("interrupted")
            assert sql("SELECT COUNT(*) FROM offer WHERE source = 'azure' AND "
                       "active") == azure_offers
            d.wait_metric("gpuradar_notifications_total", 1, channel="webhook", status="sent")
            # evaluations at start and after a crawl: the firing rule sends nothing new
            d.wait_metric("gpuradar_crawls_total", 1, source="vastai", status="ok")
            d.wait_metric("gpuradar_rule_evaluations_total", 2, result="ok", rule="")
            assert d.value("gpuradar_outbox_backlog") == 0
            assert d.stop() == 0
        finally:
            d.cleanup()

    # at-least-once: only the message in flight at the kill arrived twice
    assert len(smtp.messages) == 1 and len(hook.posts) == 2
    assert hook.posts[0]["title"] == hook.posts[1]["title"]
    assert sql("SELECT status, COUNT(*) FROM notification GROUP BY status") == [("sent", 2)]
    assert consistency_problems(db_url) == []
