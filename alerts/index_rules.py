"""Rules on the market index (docs/index.md): `H100 index under $2.50/h`, `H100 spot index
drops 10% in 7 days`.

An index rule watches the index of each catalog model its GPU names (each pricing, or the
one it names), not offers: it matches the models whose median per GPU-hour, in the rule's
currency, is under its price, or at least N % below the highest median of that model and
pricing in the last W (the drop must be within the window). Alert state, repeats,
hysteresis and the outbox are those of every rule (alerts.engine); only what "matches" means
is here. The index already leaves out stale sources, so nothing is held for staleness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.alerts.market import EPS, RuleMatch, hysteresis
from gpuradar.alerts.rules import Rule
from gpuradar.storage.index import current_index, index_history


@dataclass
class IndexMatch(RuleMatch):
    """What an index rule sees now: the matching figures, cheapest median first, each as
    (median in the rule's currency, the figure with its `reference` high when a drop)."""

    figures: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    #: The lowest median of the rule's models now, whatever its limit (for "resolved").
    lowest: float | None = None

    @property
    def best(self) -> float | None:
        return self.figures[0][0] if self.figures else None

    def summary(self) -> dict[str, Any]:
        """The best figure as plain data (stored with the alert)."""
        if not self.figures:
            return {}
        value, f = self.figures[0]
        return {"index": True, "gpu": f["gpu"], "pricing": f["pricing"], "value": value,
                "unit": "GPU-h", "median": f["median"], "p10": f["p10"], "p90": f["p90"],
                "offers": f["offers"], "providers": f["providers"],
                "since": f["since"].isoformat()}


def read_index(engine: Engine, rules: list[Rule], now: datetime) -> dict[str, Any]:
    """What the index rules need, read once per evaluation: the current figures and, for
    drop rules, the change points of their longest window."""
    rules = [r for r in rules if r.condition.index]
    if not rules:
        return {}
    data: dict[str, Any] = {"current": current_index(engine), "history": []}
    windows = [r.condition.drop_window for r in rules if r.condition.drop_window is not None]
    if windows:
        data["history"] = index_history(engine, since=now - max(windows), until=now)
    return data


def index_match(rule: Rule, data: dict[str, Any], usd_per_unit: float | None,
                settings: AlertSettings, now: datetime) -> IndexMatch:
    c, s = rule.condition, rule.condition.offers
    if usd_per_unit is None or usd_per_unit <= 0:
        return IndexMatch(rule, None, note=f"no exchange rate for {c.currency}")
    candidates = [f for f in data.get("current", [])
                  if (s.gpus is None or f["gpu"] in s.gpus)
                  and (s.pricing is None or f["pricing"] == s.pricing)]
    result = IndexMatch(rule, c.max_price)
    if not candidates:
        result.note = "no index for these models yet"
        return result
    result.lowest = min(f["median"] / usd_per_unit for f in candidates)
    h = hysteresis(rule, settings)
    matched, in_band, limits = [], False, []
    for f in candidates:
        value = f["median"] / usd_per_unit
        limit = c.max_price
        reference = None
        if c.drop_pct is not None and c.drop_window is not None:
            reference = _window_high(data.get("history", []), f, now - c.drop_window)
            if reference is None:
                continue
            reference /= usd_per_unit
            drop_limit = reference * (1 - c.drop_pct)
            limit = drop_limit if limit is None else min(limit, drop_limit)
        limits.append(limit)
        if limit is None or value < limit - EPS:  # "under" is strict, as for offers
            matched.append((value, {**f, "reference": reference, "limit": limit}))
        if limit is None or value <= limit * (1 + h) + EPS:
            in_band = True
    matched.sort(key=lambda m: (m[0], m[1]["gpu"], m[1]["pricing"]))
    result.figures, result.count, result.in_band = matched, len(matched), in_band
    if matched:
        result.limit, result.reference = matched[0][1]["limit"], matched[0][1]["reference"]
    elif limits:
        result.limit = min((x for x in limits if x is not None), default=None)
    else:
        result.note = "no earlier index to compare with in the window"
    return result


def _window_high(history: list[dict[str, Any]], figure: dict[str, Any],
                 since: datetime) -> float | None:
    """The highest median of the figure's model and pricing in force at any time since
    `since`, before the current figure took effect (None: no earlier figure then)."""
    high = None
    for p in history:
        if (p["gpu"], p["pricing"]) != (figure["gpu"], figure["pricing"]):
            continue
        if p["median"] is None or p["since"] >= figure["since"]:
            continue
        if p["until"] is not None and p["until"] <= since:
            continue
        high = p["median"] if high is None else max(high, p["median"])
    return high

