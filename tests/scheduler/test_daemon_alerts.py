"""`gpuradar run` with one rule that fails beside one that fires: a real daemon subprocess
replaying the shipped Vast.ai recording, a real webhook receiver, /healthz and /metrics over
HTTP, and `gpuradar alerts` as a user runs it."""

from __future__ import annotations

import json
import shutil

from tests.clirun import gpuradar
from tests.daemon_helpers import (
    Daemon,
    WebhookSink,
    copy_recordings,
    free_port,
    only_sources,
    wait_for,
    write_config,
)

GOOD = "H100 under $100/h on vastai"
BAD = "H100 under $90/h"  # matches the same offers; names no source


def test_a_failing_rule_is_isolated_and_shown(tmp_path, sqlite_template):
    recordings = copy_recordings(tmp_path / "recordings", ["vastai"])
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    db_url = f"sqlite:///{tmp_path / 'gpuradar.db'}"
    # A user's title template that assumes every rule names its source (`... on SOURCE`):
    # it cannot render the second rule's notification.
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "title.txt.j2").write_text(
        '{{ rule.text }} (source: {{ rule.text.split(" on ")[1] }})', encoding="utf-8")
    port = free_port()
    with WebhookSink() as hook:
        path = write_config(tmp_path / "gpuradar.yaml", {
            "database_url": db_url,
            "sources": only_sources({"vastai": {"interval": 2, "api_key": "k", "jitter": 0}}),
            "targets": {"hook": hook.url},
            "rules": [GOOD, BAD],
            # stale_after never: the replayed recording is from 2026-08 (issue #32)
            "alerts": {"templates": str(templates), "stale_after": "never"},
            "daemon": {"outbox_interval": 1, "grace_period": 10, "watch_interval": 0},
        })
        d = Daemon(tmp_path, path, "--replay", str(recordings), "--metrics-port", str(port),
                   metrics_port=port)
        try:
            d.wait_ready()
            # The good rule notifies, once, although the other one fails at every evaluation.
            wait_for(lambda: hook.posts, 30, "the good rule's webhook", on_fail=d.tail)
            d.wait_metric("gpuradar_rule_evaluations_total", 3, result="ok", rule="")
            d.wait_metric("gpuradar_rule_evaluations_total", 2, result="error",
                          rule="h100-under-90")
            assert hook.titles() == [f"{GOOD} (source: vastai)"]
            assert d.value("gpuradar_rule_evaluations_total", None, result="error",
                           rule="h100-under-100-on-vastai") is None
            assert d.value("gpuradar_rules_firing") == 1
            # Still 200 (the crawler is healthy), but degraded, naming the rule.
            status, health = d.healthz()
            assert status == 200
            assert health["status"] == "degraded"
            assert health["failing_rules"] == ["h100-under-90"]
            assert "rule 'h100-under-90' failed: UndefinedError" in d.logs()
            assert "Traceback" not in d.logs()
            listing = gpuradar("alerts", "--json", db_url=db_url)
            states = {a["name"]: a for a in json.loads(listing.stdout)["alerts"]}
            assert states["h100-under-100-on-vastai"]["state"] == "firing"
            assert states["h100-under-90"]["state"] == "error"
            assert "UndefinedError" in states["h100-under-90"]["best"]["error"]
            table = gpuradar("alerts", db_url=db_url)
            assert table.returncode == 0 and "error" in table.stdout
            assert d.stop() == 0
        finally:
            d.cleanup()
    assert len(hook.posts) == 1
