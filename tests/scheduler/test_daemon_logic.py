"""The daemon's decisions, in-process on a fake clock (tests/scheduler/harness.py): when each
source is crawled at start and after, how a failing source backs off and recovers, how a
changed or broken configuration is applied or refused. The crawls are real (recordings
replayed through the crawl service), so is the SQLite database; only time is the test's.

The same daemon as a process, where the process is the subject (signals, kill -9, two
replicas), is in test_daemon.py, test_ha.py and test_handover*.py."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from sqlalchemy import update

from gpuradar.core.clock import FakeClock
from gpuradar.scheduler.daemon import FX_FIRST_DELAY
from gpuradar.storage.db import get_engine
from gpuradar.storage.models import CRAWL
from tests.daemon_helpers import (
    RECORDINGS,
    SmtpSink,
    WebhookSink,
    copy_recordings,
    free_port,
    only_sources,
    parse_metrics,
    query,
    write_config,
)
from tests.scheduler.harness import in_process_daemon

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SECRET = "SEKRET-vast-key-123456"
NO_JITTER = {"jitter": 0}


def config(work: Path, sqlite_template: Path, sources: dict[str, dict[str, Any]],
           **extra: Any) -> tuple[Path, dict[str, Any]]:
    shutil.copy(sqlite_template, work / "gpuradar.db")
    cfg = {"database_url": f"sqlite:///{work / 'gpuradar.db'}",
           "sources": only_sources(sources),
           "metrics": {"enabled": False}, "web": {"enabled": False},
           "alerts": {"stale_after": "never"},
           "daemon": {"watch_interval": 0, "backoff_max": 3600}, **extra}
    return write_config(work / "gpuradar.yaml", cfg), cfg


def crawls(db_url: str, source: str) -> list[tuple[str, str]]:
    """(status, started_at as stored) of each crawl of `source`, oldest first."""
    return [(r[0], str(r[1])[:19]) for r in query(
        db_url, "SELECT status, started_at FROM crawl WHERE source = :s ORDER BY id", s=source)]


def metric(daemon: Any, name: str, **labels: str) -> float | None:
    values = parse_metrics(generate_latest(daemon.metrics.registry).decode())
    return values.get((name, frozenset(labels.items())))


@pytest.fixture
def replays(tmp_path: Path) -> Path:
    """lambda and vastai's recordings, and a `runpod` whose recording answers nothing (each
    of its requests is "not in recording": its crawls fail)."""
    root = copy_recordings(tmp_path / "recordings", ["lambda", "vastai", "runpod"])
    (root / "runpod" / "index.json").write_text("[]")
    return root


def test_at_start_every_source_never_crawled_is_due_at_once_then_every_interval(
        tmp_path, sqlite_template, replays, monkeypatch):
    path, cfg = config(tmp_path, sqlite_template, {"lambda": {"interval": 600, **NO_JITTER},
                                                   "vastai": {"interval": 900, **NO_JITTER}})
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        assert h.next_run("crawl:lambda") == START and h.next_run("crawl:vastai") == START
        h.run_due()
        db = cfg["database_url"]
        assert [s for s, _ in crawls(db, "lambda")] == ["ok"]
        assert [s for s, _ in crawls(db, "vastai")] == ["ok"]
        assert h.next_run("crawl:lambda") == START + timedelta(seconds=600)
        assert h.next_run("crawl:vastai") == START + timedelta(seconds=900)
        h.advance(599)
        assert len(crawls(db, "lambda")) == 1  # one second early: nothing
        h.advance(1)
        assert len(crawls(db, "lambda")) == 2 and len(crawls(db, "vastai")) == 1
        h.advance(300)
        assert len(crawls(db, "vastai")) == 2
        assert metric(h.daemon, "gpuradar_crawls_total", source="lambda", status="ok") == 2


def test_after_a_restart_a_source_crawled_recently_waits_for_its_interval(
        tmp_path, sqlite_template, replays, monkeypatch):
    path, cfg = config(tmp_path, sqlite_template, {"lambda": {"interval": 3600, **NO_JITTER}})
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        h.run_due()
    assert [s for s, _ in crawls(cfg["database_url"], "lambda")] == ["ok"]
    clock.advance(1200)  # restarted 20 minutes after that crawl
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        assert h.next_run("crawl:lambda") == START + timedelta(seconds=3600)
        assert h.run_due() > 0  # the heartbeat and the outbox, not the crawl
        assert len(crawls(cfg["database_url"], "lambda")) == 1
        h.advance(2400)
        assert len(crawls(cfg["database_url"], "lambda")) == 2


def test_the_exchange_rates_go_first_when_they_are_due(tmp_path, sqlite_template, replays,
                                                         monkeypatch):
    """A new `fx` source that is due makes the other due sources wait FX_FIRST_DELAY."""
    (replays / "fx").mkdir()
    (replays / "fx" / "index.json").write_text("[]")  # the ECB unreachable: its crawl fails
    path, cfg = config(tmp_path, sqlite_template, {
        "lambda": {"interval": 600, **NO_JITTER}, "fx": {"interval": 86400, **NO_JITTER}})
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        assert h.next_run("crawl:fx") == START
        assert h.next_run("crawl:lambda") == START + timedelta(seconds=FX_FIRST_DELAY)
        h.run_due()
        db = cfg["database_url"]
        assert len(crawls(db, "fx")) == 1 and crawls(db, "lambda") == []
        h.advance(FX_FIRST_DELAY)
        assert [s for s, _ in crawls(db, "lambda")] == ["ok"]


def test_a_failing_source_backs_off_doubling_up_to_the_cap_and_recovers(
        tmp_path, sqlite_template, replays, monkeypatch, caplog):
    """First failure: the next crawl comes after one interval; then 2, 4, ... intervals, at
    most daemon.backoff_max; a success resets it. The other source keeps its schedule."""
    caplog.set_level(logging.WARNING, "gpuradar.daemon")
    path, cfg = config(tmp_path, sqlite_template, {
        "runpod": {"interval": 600, **NO_JITTER}, "lambda": {"interval": 600, **NO_JITTER}},
        daemon={"watch_interval": 0, "backoff_max": 2400})
    db = cfg["database_url"]
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        h.run_due()
        assert [s for s, _ in crawls(db, "runpod")] == ["failed"]
        gaps = []
        for _ in range(4):
            due = h.next_run("crawl:runpod")
            gaps.append((due - clock.now()).total_seconds())
            h.advance((due - clock.now()).total_seconds())
        assert gaps == [600, 1200, 2400, 2400]  # interval, x2, x4 capped at backoff_max
        assert [s for s, _ in crawls(db, "runpod")] == ["failed"] * 5
        assert metric(h.daemon, "gpuradar_source_consecutive_failures", source="runpod") == 5
        assert "runpod: crawl failed" in caplog.text and "5 failed in a row, next crawl in " \
            "40m" in caplog.text
        # lambda kept its own schedule meanwhile: every crawl ok, the next on its 10-minute
        # grid (the runs a long step of the clock passed over fold into one: coalesce)
        assert {s for s, _ in crawls(db, "lambda")} == {"ok"}
        lambda_next = h.next_run("crawl:lambda")
        assert 0 < (lambda_next - clock.now()).total_seconds() <= 600
        assert (lambda_next - START).total_seconds() % 600 == 0
        # the provider answers again: one success resets the count and the interval
        shutil.rmtree(replays / "runpod")
        copy_recordings(replays, ["runpod"])
        h.advance((h.next_run("crawl:runpod") - clock.now()).total_seconds())
        assert crawls(db, "runpod")[-1][0] == "ok"
        assert metric(h.daemon, "gpuradar_source_consecutive_failures", source="runpod") == 0
        assert h.next_run("crawl:runpod") == clock.now() + timedelta(seconds=600)


def test_a_changed_config_file_is_reloaded_by_the_watcher(tmp_path, sqlite_template,
                                                         replays, monkeypatch, caplog):
    caplog.set_level(logging.INFO, "gpuradar.daemon")
    path, cfg = config(tmp_path, sqlite_template, {"lambda": {"interval": 600, **NO_JITTER}})
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        h.run_due()
        assert h.next_run("watch") is None  # daemon.watch_interval: 0, no watcher
        cfg["daemon"] = {**cfg["daemon"], "watch_interval": 5}
        write_config(path, cfg)
        assert h.call(h.daemon.reload, "SIGHUP") is True  # turns the watcher on
        assert h.next_run("watch") == clock.now() + timedelta(seconds=5)
        h.advance(5)
        assert "the config file changed" not in caplog.text  # unchanged since the reload
        cfg["sources"]["vastai"] = {"interval": 700, **NO_JITTER}
        write_config(path, cfg)
        h.advance(5)  # the watcher's next look
        assert "configuration reloaded (the config file changed)" in caplog.text
        assert "vastai: every 11m40s" in caplog.text
        assert metric(h.daemon, "gpuradar_config_reloads_total", result="success") == 2
        assert len(crawls(cfg["database_url"], "vastai")) == 1  # never crawled: due at once
        assert h.next_run("crawl:vastai") == clock.now() + timedelta(seconds=700)


@pytest.mark.parametrize("broken, error", [
    ("rules: [\"H100 under $100/h\"\n  bad: [", "not valid YAML"),
    ("rules: [\"H10O under banana\"]\n", "H10O"),
])
def test_a_broken_config_is_rejected_and_the_old_one_stays(tmp_path, sqlite_template, replays,
                                                          monkeypatch, caplog, broken, error):
    """What SIGHUP calls (Daemon.reload; the signal itself: test_daemon.py)."""
    path, cfg = config(tmp_path, sqlite_template, {"vastai": {"interval": 600, **NO_JITTER}},
                       rules=["H100 under $100/h on vastai"])
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        h.run_due()
        assert metric(h.daemon, "gpuradar_rules_firing") == 1
        path.write_text(broken)
        caplog.set_level(logging.ERROR, "gpuradar.daemon")
        assert h.call(h.daemon.reload, "SIGHUP") is False
        (rejected,) = [r for r in caplog.records if "reload (SIGHUP) rejected" in r.message]
        assert rejected.levelname == "ERROR" and error in rejected.getMessage()
        assert metric(h.daemon, "gpuradar_config_reloads_total", result="failure") == 1
        # still crawling and evaluating with the configuration in force
        h.advance(600)
        assert [s for s, _ in crawls(cfg["database_url"], "vastai")] == ["ok", "ok"]
        assert metric(h.daemon, "gpuradar_rules_firing") == 1
        assert h.daemon.health.check()[0] is True
        assert json.dumps(h.daemon.loaded.cfg.rules) == json.dumps(cfg["rules"])


# -- a replayed daemon notifying real receivers, read through its /metrics and /healthz ------
H100_RULE = "H100 under $100/h on vastai"


@contextmanager
def replayed(tmp_path: Path, sqlite_template: Path, monkeypatch: Any
             ) -> Iterator[tuple[Any, SmtpSink, WebhookSink, int]]:
    """Three recorded sources on 2-5 s intervals with the H100 rule, notifying a real SMTP
    server and a real webhook, /metrics and /healthz on a port of their own; the harness
    after its first crawls, evaluations and deliveries (and its metrics port)."""
    recordings = copy_recordings(tmp_path / "recordings", ["lambda", "vastai", "oci"])
    port = free_port()
    with SmtpSink() as smtp, WebhookSink() as hook:
        path, _cfg = config(
            tmp_path, sqlite_template,
            {"vastai": {"interval": 2, "api_key": SECRET, **NO_JITTER},
             "lambda": {"interval": 3, **NO_JITTER}, "oci": {"interval": 5, **NO_JITTER}},
            targets={"mail": smtp.url, "hook": hook.url}, rules=[H100_RULE],
            metrics={"enabled": True, "address": "127.0.0.1", "port": port},
            daemon={"outbox_interval": 1, "watch_interval": 0})
        with in_process_daemon(monkeypatch, path, FakeClock(START), replay=recordings) as h:
            h.run_due()
            yield h, smtp, hook, port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def request(url: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_matching_rule_notifies_by_email_and_webhook_once(tmp_path, sqlite_template,
                                                            monkeypatch):
    with replayed(tmp_path, sqlite_template, monkeypatch) as (h, smtp, hook, port):
        assert len(smtp.messages) == 1 and len(hook.posts) == 1
        assert "H100" in smtp.subjects()[0]
        assert "H100" in hook.titles()[0]
        body = smtp.messages[0].get_body(("plain",)).get_content()
        assert "vastai" in body
        # the recording again and again: more crawls and evaluations, no second notification
        for _ in range(3):
            h.advance(2)
        m = parse_metrics(scrape(port))
        assert m[("gpuradar_crawls_total",
                  frozenset({"source": "vastai", "status": "ok"}.items()))] == 4
        assert m[("gpuradar_rule_evaluations_total",
                  frozenset({"result": "ok", "rule": ""}.items()))] >= 4
        assert len(smtp.messages) == 1 and len(hook.posts) == 1


def test_metrics_show_crawls_prices_and_notifications(tmp_path, sqlite_template, monkeypatch):
    with replayed(tmp_path, sqlite_template, monkeypatch) as (_h, _smtp, _hook, port):
        m = parse_metrics(scrape(port))

        def get(name, **labels):
            return m.get((name, frozenset(labels.items())))

        assert get("gpuradar_notifications_total", channel="email", status="sent") == 1
        assert get("gpuradar_notifications_total", channel="webhook", status="sent") == 1
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
                               "availability", "gpu", "channel", "result", "rule", "job",
                               "version", "python", "scrapy", "implementation", "major",
                               "minor", "patchlevel", "generation", "vendor", "kind",
                               "frameworks", "stat"}  # the market index: median/p10/p90
        status, health = healthz(port)
        assert status == 200 and health["status"] == "ok" and health["database"] == "ok"
        assert SECRET not in scrape(port)


def test_a_scrape_passes_promtool_with_units_separate_counts_and_zeros(tmp_path,
                                                                       sqlite_template,
                                                                       monkeypatch):
    """`promtool check metrics` on a scrape of the running daemon; the index carries its unit
    in its name (it was gpuradar_price_index_usd) and its offers, providers and excluded
    offers are separate metrics (they were one, under a label `count`, and cannot be
    summed); labelled counters have their known series at 0 before any event (they had
    none until the first, so rate() and absence alerts misbehaved after a restart)."""
    from tests.project.test_deploy import tool

    with replayed(tmp_path, sqlite_template, monkeypatch) as (_h, _smtp, _hook, port):
        text = scrape(port)
    proc = subprocess.run([tool("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc
    m = parse_metrics(text)

    def get(name, **labels):
        return m.get((name, frozenset(labels.items())))

    for source in ("vastai", "lambda", "oci"):
        assert get("gpuradar_crawls_total", source=source, status="ok") == 1
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


def test_deposed_it_stops_scheduling_and_elected_again_it_resumes_where_the_store_says(
        tmp_path, sqlite_template, replays, monkeypatch, caplog):
    """What a lost and a regained leader lock do to the schedule (stand_by() and lead(), as
    Leadership calls them; the lock itself and two replicas: test_ha.py): deposed, no crawl
    or outbox job is left and nothing is stalled; elected, the outbox is swept at once and
    each source is due by its last success in the store, not by the old schedule."""
    caplog.set_level(logging.INFO, "gpuradar.daemon")
    path, cfg = config(tmp_path, sqlite_template, {"lambda": {"interval": 600, **NO_JITTER},
                                                   "vastai": {"interval": 900, **NO_JITTER}},
                       daemon={"outbox_interval": 30, "watch_interval": 0})
    db = cfg["database_url"]
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, path, clock, replay=replays) as h:
        h.run_due()
        h.daemon.health.stalled["lambda"] = "a stall the standby must not keep"
        h.call(h.daemon.stand_by)
        jobs = {j.id for j in h.daemon.scheduler.get_jobs()}
        assert not {j for j in jobs if j.startswith("crawl:")} and "outbox" not in jobs
        assert h.daemon.health.stalled == {}
        h.advance(3600)  # an hour as a standby: nothing crawled
        assert len(crawls(db, "lambda")) == 1 and len(crawls(db, "vastai")) == 1
        # the other replica crawled lambda 5 minutes ago (its row, as the store shows it)
        with get_engine(db).begin() as conn:
            conn.execute(update(CRAWL).where(CRAWL.c.source == "lambda").values(
                started_at=clock.now() - timedelta(minutes=5)))
        h.call(h.daemon.lead)
        assert h.next_run("outbox") == clock.now()
        assert h.next_run("crawl:lambda") == clock.now() + timedelta(minutes=5)
        assert h.next_run("crawl:vastai") == clock.now()  # its last success is an hour old
        h.run_due()
        assert len(crawls(db, "vastai")) == 2 and len(crawls(db, "lambda")) == 1


def test_a_source_whose_crawls_stop_starting_fails_liveness_until_one_starts(
        tmp_path, sqlite_template, provider_server, monkeypatch, caplog):
    """APScheduler's own events, in-process: while a crawl is still running (its provider
    holds the answer), each due run of the source is skipped (max_instances); past
    `daemon.liveness_intervals` of them (and what the crawl's time limit explains) the
    health check fails naming the source; once the crawl ends the next run starts and the
    health check passes again. (The events fed by hand, over HTTP: test_liveness.py.)"""
    import threading

    from tests.provider_server import serve_standard

    endpoints = serve_standard(provider_server, only=["vastai"])
    bundles = provider_server.routes[("POST", "/api/v0/bundles/")]
    answer = threading.Event()

    def held(req: Any) -> Any:  # the provider answers when the test lets it
        answer.wait(60)
        return bundles(req)

    provider_server.route("POST", "/api/v0/bundles/", held)
    path, cfg = config(tmp_path, sqlite_template, {"vastai": {"interval": 60, "timeout": 20,
                                                              **NO_JITTER}},
                       endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       daemon={"liveness_intervals": 3, "watch_interval": 0})
    caplog.set_level(logging.ERROR, "gpuradar.daemon")
    clock = FakeClock(START)
    try:
        with in_process_daemon(monkeypatch, path, clock) as h:
            h.advance_without_waiting(0)  # the first crawl starts and waits for its answer
            for _ in range(3):  # three due runs skipped: allowed
                h.advance_without_waiting(60)
            assert h.daemon.health.check()[0] is True
            h.advance_without_waiting(60)  # the fourth
            alive, body = h.daemon.health.check()
            assert alive is False and body["status"] == "unhealthy"
            assert body["stalled_crawls"] == {"vastai": (
                "4 due crawls in a row did not start (its previous crawl still holds its "
                "slot, or the scheduler missed them; allowed: 3)")}
            assert "vastai: 4 due crawls in a row did not start" in caplog.text
            answer.set()  # the provider answers: the crawl ends
            h.wait_until(lambda: h.daemon.state["vastai"].job_task is None)
            assert [s for s, _ in crawls(cfg["database_url"], "vastai")] == ["ok"], query(
                cfg["database_url"], "SELECT error, items FROM crawl")
            h.advance(60)  # the next due run starts
            assert len(crawls(cfg["database_url"], "vastai")) == 2
            assert h.daemon.health.check()[0] is True and h.daemon.health.stalled == {}
    finally:
        answer.set()


def test_the_running_service_serves_the_page(tmp_path, sqlite_template, monkeypatch):
    """The daemon (`gpuradar run --replay`) on every shipped real recording, without any
    credential (gcp's needs an API key live), crawls each ok and answers `/` on its web port
    with its offers, dated at their capture and marked replayed (issue #32); its own
    endpoint keeps /metrics and the health checks only. (Here, not in test_web.py:
    Playwright's sync API keeps an event loop running in that module's thread.)"""
    recorded = sorted(p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists())
    recordings = copy_recordings(tmp_path / "recordings", recorded)
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    port, web_port = free_port(), free_port()
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": f"sqlite:///{tmp_path / 'gpuradar.db'}",
        "sources": {name: {"interval": 600, "jitter": 0} for name in recorded},
        "metrics": {"address": "127.0.0.1", "port": port},
        "web": {"enabled": True, "address": "127.0.0.1", "port": web_port},
        "daemon": {"watch_interval": 0}})
    monkeypatch.setenv("GCP_API_KEY", "")
    monkeypatch.setenv("VAST_API_KEY", "")
    clock = FakeClock(START)
    with in_process_daemon(monkeypatch, config, clock, replay=recordings) as h:
        h.run_due()
        statuses = {name: [r[0] for r in query(
            f"sqlite:///{tmp_path / 'gpuradar.db'}",
            "SELECT status FROM crawl WHERE source = :s", s=name)] for name in recorded}
        assert statuses == {name: ["ok"] for name in recorded}
        status, _headers, body = request(f"http://127.0.0.1:{web_port}/")
        assert status == 200 and "<table id=\"cheapest\">" in body
        assert "H100-SXM-80GB" in body and "$0.4001" in body
        assert "Cheapest live" not in body and "Replayed from recordings, not live" in body
        assert "vastai captured 2026-08-22" in body and "gcp captured 2023-03-24" in body
        assert "captured 2026-08-22 (replayed)" in body and " ago</td></tr>" not in body
        assert request(f"http://127.0.0.1:{web_port}/", "POST")[0] == 405
        # the daemon's own endpoint keeps /metrics and the health checks only
        assert request(f"http://127.0.0.1:{port}/")[0] == 404
        assert request(f"http://127.0.0.1:{port}/api/v1/offers")[0] == 404
        assert request(f"http://127.0.0.1:{port}/healthz")[0] == 200
