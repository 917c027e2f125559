"""The market's patterns from plain spans (gpuradar.core.patterns), each figure recomputed
here by hand from the definitions of docs/patterns.md."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.core.patterns import (
    MIN_DAILY_CHANGES,
    Span,
    compute,
    compute_all,
    hour_of_week,
    hourly_prices,
)

MONDAY = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday, 00:00 UTC
T0 = int(MONDAY.timestamp())
H, D = 3600, 86400


def span(start: int, end: int | None, price: float, seen: int, region: str = "us-east-1",
         gpu: str = "H100-SXM-80GB", pricing: str = "spot") -> Span:
    return Span(gpu, pricing, region, start, end, seen, price)


def test_hour_of_week_starts_on_monday_midnight_utc():
    assert hour_of_week(T0) == 0
    assert hour_of_week(T0 + 27 * H + 59 * 60) == 27  # Tuesday 03:59
    assert hour_of_week(T0 - H) == 167  # Sunday 23:00 before it


def test_the_hourly_price_is_the_lowest_in_force_and_stops_at_the_last_observation():
    seen = T0 + 5 * H + 1800  # observed until 05:30: no sample at 06:00
    spans = [span(T0 + 1800, None, 2.0, seen),           # from 00:30, open
             span(T0 + 2 * H, T0 + 3 * H, 1.5, seen)]     # 02:00-03:00 only
    assert hourly_prices(spans, now=T0 + 100 * H) == {
        T0 + H: 2.0, T0 + 2 * H: 1.5, T0 + 3 * H: 2.0, T0 + 4 * H: 2.0, T0 + 5 * H: 2.0}
    # `now` bounds it too
    assert max(hourly_prices(spans, now=T0 + 3 * H + 10)) == T0 + 3 * H


def test_weekly_profile_finds_the_cheap_hours_and_the_weeks_they_rest_on():
    weeks = 3
    seen = T0 + weeks * 7 * D - H  # the last hour sampled: Sunday 23:00 of week 3
    spans = [span(T0, None, 2.0, seen)]
    # a cheaper offer every Tuesday 03:00-05:00
    spans += [span(T0 + w * 7 * D + D + 3 * H, T0 + w * 7 * D + D + 5 * H, 1.5, seen)
              for w in range(weeks)]
    p = compute(spans, now=MONDAY + timedelta(days=30))
    assert p.samples == weeks * 168 and p.weeks == weeks
    assert p.cheapest_hours == [24 + 3, 24 + 4]
    assert [p.profile[h].label for h in p.cheapest_hours] == ["Tue 03:00", "Tue 04:00"]
    assert p.profile[27].mean == 1.5 and p.profile[0].mean == 2.0
    assert {b.weeks for b in p.profile} == {weeks}
    # every midnight at 2.0: twenty daily changes of 0
    assert (p.volatility, p.volatility_changes) == (0.0, weeks * 7 - 1)
    assert p.trends[7] == 0.0 and p.trends[30] is None
    assert p.not_enough == ["a 30-day trend needs a price 30 days before the last"]


def test_volatility_is_the_sample_stdev_of_daily_log_changes():
    # the price changes at every midnight: 1.0, 1.2, 0.9, 1.0, 1.5, 1.5, 1.1, 1.3, 1.0
    daily = [1.0, 1.2, 0.9, 1.0, 1.5, 1.5, 1.1, 1.3, 1.0]
    seen = T0 + len(daily) * D - H
    spans = [span(T0 + i * D, T0 + (i + 1) * D if i + 1 < len(daily) else None, price, seen)
             for i, price in enumerate(daily)]
    p = compute(spans, now=MONDAY + timedelta(days=60))
    changes = [math.log(b / a) for a, b in zip(daily, daily[1:], strict=False)]
    assert p.volatility_changes == len(changes) == 8
    assert p.volatility == pytest.approx(statistics.stdev(changes), rel=1e-12)
    # 7-day trend: last hour (day 8, 23:00) against day 1, 23:00
    assert p.trends[7] == pytest.approx((1.0 - 1.2) / 1.2)


def test_too_little_history_is_said_with_each_threshold():
    seen = T0 + 3 * D
    p = compute([span(T0, None, 2.0, seen)], now=MONDAY + timedelta(days=10))
    assert p.volatility is None and p.profile == [] and p.cheapest_hours == []
    assert p.trends == {7: None, 30: None}
    assert p.not_enough == [
        f"volatility needs {MIN_DAILY_CHANGES} daily changes, has 3",
        "a weekly profile needs every hour of the week 2 times (14 days), has 3.0 days",
        "a 7-day trend needs a price 7 days before the last",
        "a 30-day trend needs a price 30 days before the last"]
    assert p.as_dict()["not_enough_history"] == p.not_enough


def test_one_pattern_per_gpu_pricing_and_region():
    seen = T0 + D
    found = compute_all([span(T0, None, 2.0, seen, region="us-west-2"),
                         span(T0, None, 3.0, seen, region="us-east-1"),
                         span(T0, None, 4.0, seen, pricing="on_demand")], MONDAY + timedelta(2))
    assert [(p.pricing, p.region) for p in found] == [
        ("on_demand", "us-east-1"), ("spot", "us-east-1"), ("spot", "us-west-2")]


def _hour_by_hour(spans: list[Span], now: int) -> dict[int, float]:
    """The definition, literally: every whole hour, the lowest price of the spans in force."""
    first = -(-min(s.start for s in spans) // H) * H
    last = min(now, max(s.seen_until for s in spans)) // H * H
    out: dict[int, float] = {}
    for h in range(first, last + 1, H):
        live = [s.price for s in spans if s.start <= h
                and h < (s.end if s.end is not None else s.seen_until + 1)]
        if live:
            out[h] = min(live)
    return out


def test_the_sweep_gives_the_definition_on_random_markets():
    import random

    rng = random.Random(7)  # deterministic
    for _ in range(200):
        spans = []
        for _ in range(rng.randint(1, 6)):
            seen = T0 + rng.randint(0, 20 * D)
            cuts = sorted(rng.sample(range(T0, T0 + 20 * D), rng.randint(1, 5)))
            for i, c in enumerate(cuts):
                end = (cuts[i + 1] if i + 1 < len(cuts)
                       else None if rng.random() < 0.7 else c + rng.randint(1, 9 * H))
                spans.append(span(c, end, round(rng.uniform(1, 3), 4), max(seen, c)))
        now = T0 + rng.randint(0, 25 * D)
        assert hourly_prices(spans, now) == _hour_by_hour(spans, now)
