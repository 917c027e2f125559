"""The `alerts:` section is read into its meaning (AlertSettings: durations, shares) once
per configuration load, and the daemon's evaluations use that reading as it is (issue #46:
it was read twice at load and again at every evaluation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.alerts.engine import evaluate
from gpuradar.scheduler.setup import RunOptions, load_setup
from gpuradar.storage.db import get_engine
from tests.daemon_helpers import write_config


def test_the_alerts_section_is_read_once_per_load_not_at_each_evaluation(
        tmp_path, sqlite_url, monkeypatch):
    reads: list[object] = []
    init = AlertSettings.__init__

    def counted(self: AlertSettings, section: object = None) -> None:
        reads.append(section)
        init(self, section)  # type: ignore[arg-type]

    monkeypatch.setattr(AlertSettings, "__init__", counted)
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": sqlite_url,
        "alerts": {"repeat": "2h", "min_drop": "5%"},
        "targets": {"inbox": {"url": "json://localhost"}},
        "rules": [{"name": "h100", "rule": "H100 under $2/h", "notify": "inbox"}]})
    loaded = load_setup(RunOptions(config=config))
    assert len(reads) == 1
    assert loaded.alert_settings.repeat == timedelta(hours=2)
    assert loaded.alert_settings.min_drop_pct == 0.05
    engine = get_engine(sqlite_url)
    at = datetime(2026, 12, 1, tzinfo=UTC)
    for minute in range(3):  # as the daemon evaluates after each crawl
        evaluate(engine, loaded.rules, now=at + timedelta(minutes=minute),
                 alert_settings=loaded.alert_settings)
    assert len(reads) == 1
