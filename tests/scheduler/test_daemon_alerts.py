"""The daemon with one rule that fails beside one that fires: in-process on a fake clock
(tests/scheduler/harness.py), replaying the shipped Vast.ai recording, a real webhook
receiver over HTTP, /healthz's answer and /metrics' samples as the daemon makes them, and
`gpuradar alerts` as a user runs it."""

from __future__ import annotations

import json
import logging
import shutil
from datetime import UTC, datetime

from prometheus_client import generate_latest

from gpuradar.core.clock import FakeClock
from tests.clirun import gpuradar
from tests.daemon_helpers import (
    WebhookSink,
    copy_recordings,
    only_sources,
    parse_metrics,
    write_config,
)
from tests.scheduler.harness import in_process_daemon

GOOD = "H100 under $100/h on vastai"
BAD = "H100 under $90/h"  # matches the same offers; names no source


def test_a_failing_rule_is_isolated_and_shown(tmp_path, sqlite_template, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    db_url = f"sqlite:///{tmp_path / 'gpuradar.db'}"
    # A user's title template that assumes every rule names its source (`... on SOURCE`):
    # it cannot render the second rule's notification.
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "title.txt.j2").write_text(
        '{{ rule.text }} (source: {{ rule.text.split(" on ")[1] }})', encoding="utf-8")
    with WebhookSink() as hook:
        path = write_config(tmp_path / "gpuradar.yaml", {
            "database_url": db_url,
            "sources": only_sources({"vastai": {"interval": 2, "api_key": "k", "jitter": 0}}),
            "targets": {"hook": hook.url},
            "rules": [GOOD, BAD],
            # stale_after never: the replayed recording is from 2026-08 (issue #32)
            "alerts": {"templates": str(templates), "stale_after": "never"},
            "metrics": {"enabled": False}, "web": {"enabled": False},
            "daemon": {"outbox_interval": 1, "grace_period": 10, "watch_interval": 0},
        })
        clock = FakeClock(datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
        with in_process_daemon(monkeypatch, path, clock, replay=recordings) as h:
            h.run_due()  # the first crawl, its evaluation and delivery
            for _ in range(2):  # two more crawls: the rule fails at each evaluation
                h.advance(2)
            d = h.daemon
            metrics = parse_metrics(generate_latest(d.metrics.registry).decode())

            def value(name: str, **labels: str) -> float | None:
                return metrics.get((name, frozenset(labels.items())))

            # The good rule notifies, once, although the other one fails at every evaluation.
            assert hook.titles() == [f"{GOOD} (source: vastai)"]
            assert value("gpuradar_rule_evaluations_total", result="ok", rule="") >= 3
            assert value("gpuradar_rule_evaluations_total", result="error",
                         rule="h100-under-90") >= 2
            assert value("gpuradar_rule_evaluations_total", result="error",
                         rule="h100-under-100-on-vastai") is None
            assert value("gpuradar_rules_firing") == 1
            # Still alive (the crawler is healthy), but degraded, naming the rule.
            alive, health = d.health.check()
            assert alive is True
            assert health["status"] == "degraded"
            assert health["failing_rules"] == ["h100-under-90"]
            assert "rule 'h100-under-90' failed: UndefinedError" in caplog.text
            assert "Traceback" not in caplog.text
            listing = gpuradar("alerts", "--json", db_url=db_url)
            states = {a["name"]: a for a in json.loads(listing.stdout)["alerts"]}
            assert states["h100-under-100-on-vastai"]["state"] == "firing"
            assert states["h100-under-90"]["state"] == "error"
            assert "UndefinedError" in states["h100-under-90"]["best"]["error"]
            table = gpuradar("alerts", db_url=db_url)
            assert table.returncode == 0 and "error" in table.stdout
    assert len(hook.posts) == 1
