"""The market index: one robust USD-per-GPU-hour figure per accelerator model and pricing.

Pure arithmetic, no database: storage (gpuradar.storage.index) feeds it the offers that are
listed, not known to be unavailable and from fresh sources, and stores what it returns as a
change-point series. docs/index.md states the method precisely enough to recompute it; the
constants below are the ones it names.

* Weighting: **each offer votes once** (one offer = one source, region, zone, instance type
  and pricing), whatever its GPU count. A provider listing a model in ten regions casts ten
  votes: that is ten places the model can be rented at that price. `providers` says how many
  sources stand behind a figure.
* Outlier screen: in log space (prices spread multiplicatively), an offer is excluded when
  its distance to the median log price exceeds both OUTLIER_Z robust standard deviations
  (the modified z-score of Iglewicz and Hoaglin: 0.6745 * |ln x - median| / MAD > 3.5) and
  MIN_BAND (a factor of 2): nothing within a factor of 2 of the median is ever excluded, so
  a market of identical prices (MAD 0) does not exclude the one offer that differs a little.
* Figures: median, p10 and p90 of the kept offers, quantiles by linear interpolation between
  order statistics (Hyndman and Fan type 7: numpy's default, PERCENTILE.INC), rounded to
  micro-dollars.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["MIN_BAND", "OUTLIER_Z", "IndexFigure", "IndexOffer", "compute_index", "quantile",
           "screen"]

#: Modified z-score above which an offer is an outlier (Iglewicz and Hoaglin, 1993).
OUTLIER_Z = 3.5
#: 0.6745: the 0.75 quantile of the standard normal; MAD / 0.6745 estimates sigma.
MAD_SCALE = 0.6745
#: Never exclude an offer within this distance of the median log price (ln 2: a factor 2).
MIN_BAND = math.log(2)
STATS = ("median", "p10", "p90")


class IndexOffer(NamedTuple):
    """One offer as the index sees it (a tuple: an index is computed over every live
    offer after each crawl)."""

    offer_id: int
    gpu: str
    pricing: str
    source: str
    usd_per_gpu_hour: float


@dataclass(frozen=True, slots=True)
class IndexFigure:
    """The index of one model and pricing. `excluded`: ids of the offers the screen left
    out, ascending."""

    gpu: str
    pricing: str
    median: float
    p10: float
    p90: float
    offers: int
    providers: int
    excluded: tuple[int, ...] = ()


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Type-7 quantile of ascending values: position h = (n - 1) q, linear between the two
    order statistics around it."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("quantile of no values")
    h = (n - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def screen(prices: Sequence[float]) -> list[bool]:
    """For each (positive) price, whether it stays in the index (False: an outlier)."""
    logs = [math.log(p) for p in prices]
    centre = quantile(sorted(logs), 0.5)
    deviations = [abs(v - centre) for v in logs]
    mad = quantile(sorted(deviations), 0.5)
    band = max(MIN_BAND, OUTLIER_Z * mad / MAD_SCALE) if mad > 0 else MIN_BAND
    return [d <= band for d in deviations]


def _round(value: float) -> float:
    return round(value, 6)


def compute_index(offers: Iterable[IndexOffer]) -> dict[tuple[str, str], IndexFigure]:
    """The index of every (model, pricing) present in `offers`. Offers without a positive,
    finite price are ignored (storage never holds such a price; this is the last guard)."""
    groups: dict[tuple[str, str], list[IndexOffer]] = {}
    for o in offers:
        p = o.usd_per_gpu_hour
        if isinstance(p, int | float) and math.isfinite(p) and p > 0:
            groups.setdefault((o.gpu, o.pricing), []).append(o)
    out: dict[tuple[str, str], IndexFigure] = {}
    for key in sorted(groups):
        members = groups[key]
        kept_flags = screen([o.usd_per_gpu_hour for o in members])
        kept = [o for o, k in zip(members, kept_flags, strict=True) if k]
        excluded = tuple(sorted(o.offer_id for o, k in zip(members, kept_flags, strict=True)
                                if not k))
        values = sorted(o.usd_per_gpu_hour for o in kept)
        out[key] = IndexFigure(
            gpu=key[0], pricing=key[1], median=_round(quantile(values, 0.5)),
            p10=_round(quantile(values, 0.1)), p90=_round(quantile(values, 0.9)),
            offers=len(kept), providers=len({o.source for o in kept}), excluded=excluded)
    return out
