"""`gpuradar run` as users run it: a real subprocess on a seconds-long schedule, replayed
or served over real HTTP on loopback, notifying a real SMTP server (aiosmtpd) and a real
webhook receiver, read through /metrics and /healthz, stopped and reloaded by signals.

Every test can run alone and in any order: the tests that only watch a replayed daemon
share one; the tests that reload or stop a daemon, the hanging-source and the kill -9 tests
start their own. What the daemon decides (its schedule, backoff, the watcher, a rejected
reload) is tested in-process on a fake clock: test_daemon_logic.py."""

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


@pytest.fixture(scope="module")
def replay(tmp_path_factory, sqlite_template):
    """One daemon shared by the tests that only watch it: none of them changes it."""
    with replayed_daemon(tmp_path_factory.mktemp("daemon"), sqlite_template) as parts:
        yield parts


@pytest.fixture
def own_replay(tmp_path, sqlite_template):
    """A daemon of the test's own, for the tests that reload or stop it."""
    with replayed_daemon(tmp_path, sqlite_template) as parts:
        yield parts


def test_a_matching_rule_notifies_by_email_and_webhook_once(replay):
    d, smtp, hook = replay["daemon"], replay["smtp"], replay["hook"]
    wait_for(lambda: smtp.messages and hook.posts, 30, "the email and the webhook",
             on_fail=d.tail)
    assert "H100" in smtp.subjects()[0]
    assert "H100" in hook.titles()[0]
    body = smtp.messages[0].get_body(("plain",)).get_content()
    assert "vastai" in body
    # the recording loops: several more crawls and evaluations, no second notification
    crawls = d.value("gpuradar_crawls_total", source="vastai", status="ok")
    d.wait_metric("gpuradar_crawls_total", crawls + 2, source="vastai", status="ok")
    d.wait_metric("gpuradar_rule_evaluations_total", 4, result="ok", rule="")
    assert len(smtp.messages) == 1 and len(hook.posts) == 1


def test_metrics_show_crawls_prices_and_notifications(replay):
    d = replay["daemon"]
    d.wait_metric("gpuradar_notifications_total", 1, channel="email", status="sent")
    d.wait_metric("gpuradar_notifications_total", 1, channel="webhook", status="sent")
    for source in ("vastai", "lambda", "oci"):
        d.wait_metric("gpuradar_crawls_total", 1, source=source, status="ok")
    m = d.metrics()

    def get(name, **labels):
        return m.get((name, frozenset(labels.items())))

    for source in ("vastai", "lambda", "oci"):
        assert get("gpuradar_crawls_total", source=source, status="ok") >= 1
        assert get("gpuradar_crawls_total", source=source, status="failed") == 0
        assert get("gpuradar_crawl_duration_seconds_count", source=source) >= 1
        assert get("gpuradar_last_success_timestamp_seconds", source=source) > 1.7e9
        assert get("gpuradar_source_consecutive_failures", source=source) == 0
    assert get("gpuradar_crawl_items_total", source="vastai") >= 4
    assert get("gpuradar_offer_changes_total", source="vastai", change="new") == 4
    # the interval in force (the config's 2 s), which the staleness alert reads
    assert get("gpuradar_source_interval_seconds", source="vastai") == 2
    assert get("gpuradar_offers", source="vastai", pricing="on_demand",
               availability="available") > 0
    h100 = [v for (name, labels), v in m.items()
            if name == "gpuradar_cheapest_usd_per_gpu_hour"
            and ("gpu", "H100-SXM-80GB") in labels and ("source", "vastai") in labels]
    assert h100 and all(0 < v < 100 for v in h100)
    assert get("gpuradar_rules_firing") == 1
    assert get("gpuradar_outbox_backlog") == 0
    assert get("gpuradar_database_up") == 1
    assert [k for k in m if k[0] == "gpuradar_build_info"]
    assert get("process_resident_memory_bytes") > 0
    # labels stay bounded: no offer ids, regions or URLs (rule names come from the config)
    label_names = {k for (_, labels) in m for k, _ in labels}
    assert label_names <= {"source", "status", "le", "reason", "change", "pricing",
                           "availability", "gpu", "channel", "result", "rule", "job", "version",
                           "python", "scrapy", "implementation", "major", "minor",
                           "patchlevel", "generation", "vendor", "kind", "frameworks",
                           "stat"}  # the market index: median/p10/p90
    status, health = d.healthz()
    assert status == 200 and health["status"] == "ok" and health["database"] == "ok"


def test_a_scrape_passes_promtool_with_units_separate_counts_and_zeros(replay):
    """`promtool check metrics` on a scrape of the running daemon; the index carries its unit
    in its name (it was gpuradar_price_index_usd) and its offers, providers and excluded
    offers are separate metrics (they were one, under a label `count`, and cannot be
    summed); labelled counters have their known series at 0 before any event (they had
    none until the first, so rate() and absence alerts misbehaved after a restart)."""
    import subprocess

    from tests.project.test_deploy import tool

    d = replay["daemon"]
    for source in ("vastai", "lambda", "oci"):
        d.wait_metric("gpuradar_crawls_total", 1, source=source, status="ok")
    text = d.metrics_text()
    proc = subprocess.run([tool("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc
    m = d.metrics()

    def get(name, **labels):
        return m.get((name, frozenset(labels.items())))

    h100 = {"gpu": "H100-SXM-80GB", "pricing": "on_demand"}
    assert get("gpuradar_price_index_usd_per_gpu_hour", **h100, stat="median") > 0
    assert get("gpuradar_price_index_offers", **h100) >= 1
    assert get("gpuradar_price_index_providers", **h100) >= 1
    assert get("gpuradar_price_index_excluded_offers", **h100) >= 0
    assert "gpuradar_price_index_usd{" not in text and 'count="' not in text
    # known label values, before their first event
    assert get("gpuradar_notifications_total", channel="slack", status="failed") == 0
    assert get("gpuradar_notifications_total", channel="email", status="retry") == 0
    assert get("gpuradar_config_reloads_total", result="failure") == 0
    assert get("gpuradar_config_reloads_total", result="success") == 0
    assert get("gpuradar_leader_lock_attempts_total", result="unreachable") == 0
    for source in ("vastai", "lambda", "oci"):
        assert get("gpuradar_offer_changes_total", source=source, change="closed") == 0
        assert get("gpuradar_crawl_dropped_items_total", source=source,
                   reason="implausible_price") == 0
        assert get("gpuradar_scheduler_skipped_runs_total", job=f"crawl:{source}",
                   reason="max_instances") == 0


def test_logs_are_json_lines_without_secrets(replay):
    d = replay["daemon"]
    # after a crawl and a delivery, the moments a key or a target could leak
    d.wait_metric("gpuradar_notifications_total", 1, channel="email", status="sent")
    logs = wait_for(lambda: "crawl ok" in d.logs() and d.logs(), 30, "a crawl's log line",
                    on_fail=d.tail)
    lines = [line for line in logs.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert {"ts", "level", "logger", "message"} <= set(records[0])
    assert any(r.get("source") == "vastai" and "crawl ok" in r["message"] for r in records)
    assert SECRET not in logs
    assert SECRET not in d.metrics_text()
    assert replay["smtp"].url not in logs


def test_sighup_with_a_valid_config_applies_new_rules(own_replay):
    d, smtp, hook = own_replay["daemon"], own_replay["smtp"], own_replay["hook"]
    wait_for(lambda: any("H100" in s for s in smtp.subjects()), 30, "the H100 rule's email",
             on_fail=d.tail)
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
