"""`alerts:` has one schema, core's AlertsSection: AlertSettings is what its values mean
for evaluation, with no defaults of its own (issue 31)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gpuradar.alerts.alert_settings import SETTING_KEYS, AlertSettings, parse_settings
from gpuradar.alerts.loader import load_settings
from gpuradar.core.config import AlertsSection, Config, ConfigError


def test_the_defaults_are_the_section_s():
    section = AlertsSection()
    settings = AlertSettings()
    assert settings == AlertSettings(section) == parse_settings(None) == parse_settings({})
    assert (settings.for_count, settings.repeat, settings.min_drop_pct, settings.top,
            settings.hysteresis, settings.stale_after_failures, settings.stale_after) == (
        section.for_, None, 0.05, section.top, 0.02, section.stale_after_failures,
        timedelta(days=2))
    assert {f.alias or n for n, f in AlertsSection.model_fields.items()} == SETTING_KEYS


def test_each_value_is_read_for_evaluation():
    s = parse_settings({"for": "10m", "repeat": "1h", "min_drop": "$0.10", "hysteresis": "5%",
                        "stale_after": "never", "notify_stale": "ops", "templates": "~/t"})
    assert (s.for_count, s.for_duration, s.repeat) == (1, timedelta(minutes=10),
                                                       timedelta(hours=1))
    assert (s.min_drop_pct, s.min_drop_abs, s.hysteresis) == (None, 0.10, 0.05)
    assert (s.stale_after, s.notify_stale) == (None, ("ops",))
    assert s.templates == Path("~/t").expanduser()
    assert parse_settings(s) is s
    assert parse_settings(AlertsSection(top=2)).top == 2


def test_a_value_the_schema_accepts_but_alerts_cannot_read_names_its_key():
    cfg = Config(database_url="sqlite://", path=Path("/etc/gpuradar.yaml"),
                 alerts={"min_drop": "lots"})
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg)
    assert str(exc.value).startswith("/etc/gpuradar.yaml: alerts.min_drop: min_drop: write a "
                                     "percentage (5%) or an amount ($0.10)")
    with pytest.raises(ConfigError, match="unknown key 'topp' in alerts — did you mean 'top'"):
        parse_settings({"topp": 3})
