"""The `alerts:` section read for evaluation: defaults for every rule, staleness, and the
delivery settings (read by alerts.delivery through the targets).

The section's one schema, with its defaults, is gpuradar.core.config.AlertsSection; an
AlertSettings is what its values mean here (durations, a drop as a share or an amount)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpuradar.alerts.rules import parse_pct_or_amount
from gpuradar.core.config import AlertsSection, ConfigError, Marks, validate_section
from gpuradar.core.units import parse_duration

#: The keys of `alerts:` (its names in the file).
SETTING_KEYS = {f.alias or n for n, f in AlertsSection.model_fields.items()}


class AlertSettingError(ConfigError):
    """A value of `alerts:` the schema accepts but alerts cannot read; `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        self.key, self.message = key, message
        super().__init__(f"alerts: {message}")


@dataclass(init=False)
class AlertSettings:
    """The `alerts:` section of the config as evaluation uses it. AlertSettings() is the
    defaults (AlertsSection's); AlertSettings(section) reads a checked section."""

    for_count: int
    for_duration: timedelta | None
    repeat: timedelta | None
    min_drop_pct: float | None
    min_drop_abs: float | None
    send_resolved: bool
    top: int
    hysteresis: float
    stale_after_failures: int
    stale_after: timedelta | None
    notify_stale: bool | tuple[str, ...]
    templates: Path | None

    def __init__(self, section: AlertsSection | None = None) -> None:
        s = section if section is not None else AlertsSection()
        value = s.for_
        counted = isinstance(value, int) and not isinstance(value, bool)
        self.for_count = value if counted else 1
        self.for_duration = None if counted else _duration("for", value)
        self.repeat = _never_or_duration("repeat", s.repeat)
        self.min_drop_pct, self.min_drop_abs = _share_or_amount("min_drop", s.min_drop)
        self.send_resolved = s.send_resolved
        self.top = s.top
        self.hysteresis = _share_or_amount("hysteresis", s.hysteresis)[0] or 0.0
        self.stale_after_failures = s.stale_after_failures
        self.stale_after = _never_or_duration("stale_after", s.stale_after)
        v = s.notify_stale
        self.notify_stale = (v if isinstance(v, bool)
                             else tuple(str(x) for x in ([v] if isinstance(v, str) else v)))
        self.templates = Path(s.templates).expanduser() if s.templates else None

    def stale(self, data_at: datetime | None, failures: int, now: datetime) -> bool:
        """The one judgement of a stale source, for its alert, the page and /readyz alike:
        `stale_after_failures` failed crawls since its last success, or data (a replay's:
        its capture time) older than `stale_after`."""
        return failures >= self.stale_after_failures or (
            self.stale_after is not None and data_at is not None
            and now - data_at > self.stale_after)


def _duration(key: str, value: Any) -> timedelta:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise AlertSettingError(key, str(exc)) from None


def _never_or_duration(key: str, value: Any) -> timedelta | None:
    return None if value in (None, False, "never") else _duration(key, value)


def _share_or_amount(key: str, value: Any) -> tuple[float | None, float | None]:
    try:
        return parse_pct_or_amount(value, key)
    except ValueError as exc:
        raise AlertSettingError(key, str(exc)) from None


def parse_settings(raw: dict[str, Any] | AlertsSection | AlertSettings | None
                   ) -> AlertSettings:
    """AlertSettings from the configuration's checked `alerts:` section, or from a plain
    mapping (a program, a test), checked by the same schema; ConfigError names the bad key."""
    if isinstance(raw, AlertSettings):
        return raw
    if raw is None or isinstance(raw, AlertsSection):
        return AlertSettings(raw)
    if not isinstance(raw, dict):
        raise ConfigError("alerts: must be a mapping")
    marks = Marks(origins={("alerts",): "alert settings"})
    return AlertSettings(validate_section(AlertsSection, raw, ("alerts",), marks))
