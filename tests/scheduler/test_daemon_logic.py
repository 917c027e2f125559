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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from gpuradar.core.clock import FakeClock
from gpuradar.scheduler.daemon import FX_FIRST_DELAY
from tests.daemon_helpers import (
    copy_recordings,
    only_sources,
    parse_metrics,
    query,
    write_config,
)
from tests.scheduler.harness import in_process_daemon

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
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
