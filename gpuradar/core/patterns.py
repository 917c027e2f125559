"""Patterns of the market, computed from stored history alone (docs/patterns.md).

Pure: it takes plain spans (a price per GPU-hour valid over a time) and a `now`, reads no
database and no clock, so every figure can be recomputed by hand from the same spans.

For one GPU, pricing and region, the **hourly price** p(h) is, at each whole UTC hour h,
the lowest price per GPU-hour among the offers whose span is in force at h (a span starting
at or before h and not ended by then; an open span holds until the last observation of its
source, never past it). Hours are sampled from the first whole hour at or after the
earliest span start up to the last observation (or `now`, whichever is earlier); an hour
where no offer is in force has no sample.

* **Volatility**: the sample standard deviation (n - 1) of the daily log changes
  ln(p(d) / p(d - 1 day)), p(d) being the hourly price at 00:00 UTC of day d (both days
  sampled), with the number of changes it rests on. Needs `MIN_DAILY_CHANGES`.
* **Weekly profile**: the mean hourly price of each of the 168 hours of the week
  (Monday 00:00 UTC is hour 0), with how many samples (weeks) each mean rests on; the
  cheapest hours are those whose mean is the lowest. Needs every hour of the week sampled
  at least `MIN_WEEKS` times.
* **Trend over N days**: (p(last) - p(last - N days)) / p(last - N days), `last` being the
  last sampled hour; unknown when the hour N days before it has no sample.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

HOUR = 3600
DAY = 86400
WEEK_HOURS = 168
#: The fewest daily log changes a volatility rests on.
MIN_DAILY_CHANGES = 7
#: The fewest samples (weeks) each hour of the week needs for a weekly profile.
MIN_WEEKS = 2
TREND_DAYS = (7, 30)
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True)
class Span:
    """One offer's price per GPU-hour (USD) from `start` until `end` (epoch seconds; `end`
    None: still in force, observed until `seen_until`)."""

    gpu: str
    pricing: str
    region: str
    start: int
    end: int | None
    seen_until: int
    price: float


@dataclass(frozen=True)
class Bucket:
    """One hour of the week: 0 = Monday 00:00-01:00 UTC ... 167 = Sunday 23:00 UTC."""

    hour: int
    mean: float | None
    weeks: int

    @property
    def label(self) -> str:
        return f"{DAY_NAMES[self.hour // 24]} {self.hour % 24:02d}:00"


@dataclass
class Pattern:
    """The patterns of one GPU, pricing and region; a figure the history cannot support is
    None, and `not_enough` says why in words."""

    gpu: str
    pricing: str
    region: str
    samples: int = 0
    first: datetime | None = None
    last: datetime | None = None
    volatility: float | None = None
    volatility_changes: int = 0
    profile: list[Bucket] = field(default_factory=list)
    weeks: int = 0
    cheapest_hours: list[int] = field(default_factory=list)
    trends: dict[int, float | None] = field(default_factory=dict)
    not_enough: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The JSON form (API, `patterns --json`; each encoder writes the times its way)."""
        return {
            "gpu": self.gpu, "pricing": self.pricing, "region": self.region,
            "hourly_samples": self.samples,
            "first": self.first, "last": self.last,
            "volatility": self.volatility, "volatility_daily_changes": self.volatility_changes,
            "weeks": self.weeks,
            "cheapest_hours": [{"hour_of_week": h, "label": self.profile[h].label,
                                "mean_usd_per_gpu_hour": self.profile[h].mean}
                               for h in self.cheapest_hours] if self.profile else [],
            "weekly_profile": [{"hour_of_week": b.hour, "label": b.label,
                                "mean_usd_per_gpu_hour": b.mean, "weeks": b.weeks}
                               for b in self.profile],
            **{f"trend_{n}d": self.trends.get(n) for n in TREND_DAYS},
            "not_enough_history": self.not_enough,
        }


def hourly_prices(spans: Sequence[Span], now: int) -> dict[int, float]:
    """Hour (epoch seconds, a multiple of 3600) -> the lowest price in force then.

    One sweep over the hours with a heap of the spans begun by then (cheapest on top; a span
    ended by then is dropped when it reaches the top): O((spans + hours) log spans), not
    spans x hours -- a market of thousands of offers over 90 days stays a few milliseconds."""
    if not spans:
        return {}
    last = min(now, max(s.seen_until for s in spans)) // HOUR * HOUR

    def first_hour(s: Span) -> int:
        return -(-s.start // HOUR) * HOUR  # the first whole hour at or after its start

    # in force at hour h while h < stop: an open span through its last observation
    ordered = sorted(((first_hour(s), s.price, s.end if s.end is not None else s.seen_until + 1)
                      for s in spans), key=lambda e: e[0])
    out: dict[int, float] = {}
    heap: list[tuple[float, int]] = []
    i, h = 0, ordered[0][0]
    while h <= last:
        while i < len(ordered) and ordered[i][0] <= h:
            heapq.heappush(heap, (ordered[i][1], ordered[i][2]))
            i += 1
        while heap and heap[0][1] <= h:
            heapq.heappop(heap)
        if heap:
            out[h] = heap[0][0]
        elif i < len(ordered):  # nothing in force: on to the next span's first hour
            h = max(h + HOUR, ordered[i][0])
            continue
        else:
            break
        h += HOUR
    return out


def _stdev(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def hour_of_week(epoch: int) -> int:
    """0 = Monday 00:00 UTC (1970-01-01 was a Thursday, hour 72 of its week)."""
    return (epoch // HOUR + 72) % WEEK_HOURS


def compute(spans: Sequence[Span], now: datetime) -> Pattern:
    """The patterns of spans of one GPU, pricing and region (see the module docstring)."""
    if not spans:
        raise ValueError("no spans")
    head = spans[0]
    pattern = Pattern(head.gpu, head.pricing, head.region)
    prices = hourly_prices(spans, int(now.timestamp()))
    pattern.samples = len(prices)
    if not prices:
        pattern.not_enough.append("no whole hour of prices observed in the window read")
        return pattern
    first, last = min(prices), max(prices)
    pattern.first = datetime.fromtimestamp(first, UTC)
    pattern.last = datetime.fromtimestamp(last, UTC)
    days = (last - first) / DAY
    # volatility: daily log changes at 00:00 UTC
    midnights = sorted(h for h in prices if h % DAY == 0)
    changes = [math.log(prices[d] / prices[d - DAY]) for d in midnights if d - DAY in prices]
    pattern.volatility_changes = len(changes)
    if len(changes) >= MIN_DAILY_CHANGES:
        pattern.volatility = _stdev(changes)
    else:
        pattern.not_enough.append(
            f"volatility needs {MIN_DAILY_CHANGES} daily changes, has {len(changes)}")
    # weekly profile
    sums = [0.0] * WEEK_HOURS
    counts = [0] * WEEK_HOURS
    for h, p in prices.items():
        b = hour_of_week(h)
        sums[b] += p
        counts[b] += 1
    pattern.weeks = min(counts)
    if pattern.weeks >= MIN_WEEKS:
        pattern.profile = [Bucket(b, sums[b] / counts[b], counts[b]) for b in range(WEEK_HOURS)]
        low = min(b.mean for b in pattern.profile if b.mean is not None)
        pattern.cheapest_hours = [b.hour for b in pattern.profile
                                  if b.mean is not None and b.mean <= low * (1 + 1e-12)]
    else:
        pattern.not_enough.append(
            f"a weekly profile needs every hour of the week {MIN_WEEKS} times "
            f"({MIN_WEEKS * 7} days), has {days:.1f} days")
    # trends
    for n in TREND_DAYS:
        before = prices.get(last - n * DAY)
        pattern.trends[n] = None if before is None else (prices[last] - before) / before
        if before is None:
            pattern.not_enough.append(f"a {n}-day trend needs a price {n} days before the last")
    return pattern


def compute_all(spans: Iterable[Span], now: datetime) -> list[Pattern]:
    """One Pattern per GPU, pricing and region, in that order."""
    groups: dict[tuple[str, str, str], list[Span]] = {}
    for s in spans:
        groups.setdefault((s.gpu, s.pricing, s.region), []).append(s)
    return [compute(groups[k], now) for k in sorted(groups)]
