"""The `alerts:` section of the configuration: defaults for every rule, staleness, and the
delivery settings (read by alerts.delivery through the targets)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuradar.alerts.rules import parse_pct_or_amount

from gpuradar.core.config import ConfigError
from gpuradar.core.units import parse_duration


@dataclass
class AlertSettings:
    """The `alerts:` section of the config: defaults for every rule, and staleness."""

    for_count: int = 1
    for_duration: timedelta | None = None
    repeat: timedelta | None = None
    min_drop_pct: float | None = 0.05
    min_drop_abs: float | None = None
    send_resolved: bool = False
    top: int = 5
    hysteresis: float = 0.02
    stale_after_failures: int = 3
    stale_after: timedelta | None = timedelta(days=2)
    notify_stale: bool | tuple[str, ...] = False
    templates: Path | None = None


SETTING_KEYS = {"for", "repeat", "min_drop", "send_resolved", "top", "hysteresis",
                "stale_after_failures", "stale_after", "notify_stale", "templates",
                # delivery (alerts.delivery)
                "max_attempts", "retry_backoff", "send_timeout"}


def parse_settings(raw: dict[str, Any] | AlertSettings | None) -> AlertSettings:
    """`alerts:` mapping -> AlertSettings; ConfigError names the bad key."""
    if isinstance(raw, AlertSettings):
        return raw
    s = AlertSettings()
    if not raw:
        return s
    if not isinstance(raw, dict):
        raise ConfigError("alerts: must be a mapping")
    unknown = sorted(set(map(str, raw)) - SETTING_KEYS)
    if unknown:
        raise ConfigError(f"alerts: unknown key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(SETTING_KEYS))}")
    try:
        if "for" in raw:
            v = raw["for"]
            if isinstance(v, int) and not isinstance(v, bool):
                s.for_count = max(1, v)
            else:
                s.for_duration = parse_duration(v)
        if raw.get("repeat") not in (None, False, "never"):
            s.repeat = parse_duration(raw["repeat"])
        if raw.get("min_drop") is not None:
            s.min_drop_pct, s.min_drop_abs = parse_pct_or_amount(raw["min_drop"], "min_drop")
        if "send_resolved" in raw:
            s.send_resolved = bool(raw["send_resolved"])
        if "top" in raw:
            s.top = max(1, int(raw["top"]))
        if "hysteresis" in raw:
            pct, _ = parse_pct_or_amount(raw["hysteresis"], "hysteresis")
            s.hysteresis = pct or 0.0
        if "stale_after_failures" in raw:
            s.stale_after_failures = max(1, int(raw["stale_after_failures"]))
        if "stale_after" in raw:
            v = raw["stale_after"]
            s.stale_after = None if v in (None, False, "never") else parse_duration(v)
        if "notify_stale" in raw:
            v = raw["notify_stale"]
            s.notify_stale = (bool(v) if isinstance(v, bool) or v is None
                              else tuple(str(x) for x in ([v] if isinstance(v, str) else v)))
        if raw.get("templates"):
            s.templates = Path(str(raw["templates"])).expanduser()
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"alerts: {exc}") from None
    return s
