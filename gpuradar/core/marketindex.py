"""The market index, method v2: one robust USD-per-GPU-hour figure per accelerator model and
pricing, made so that one provider cannot outvote the market.

Pure arithmetic, no database: storage (gpuradar.storage.index) feeds it the offers that are
listed, not known to be unavailable and from fresh sources, with each provider's previous
vote, and stores what it returns as a change-point series. docs/index.md states the method
precisely enough to recompute it; `Params` holds the constants it names, and every stored
point carries them, the panel and a digest of its inputs.

* Votes: **one per provider** (source): its lowest listed offer, named by id. A provider
  listing a model in ten regions or a hundred machines still casts one vote.
* Cross-section screen: in log space (prices spread multiplicatively), a vote is excluded
  when its distance to the median log vote exceeds both `outlier_z` robust standard
  deviations (the modified z-score of Iglewicz and Hoaglin) and a factor `band` (2).
* History screen: a vote that moved by more than a factor `jump` from the provider's last
  accepted vote is held out until it is corroborated: by another provider's vote within a
  factor `band` of it, or by the same provider showing the same price again in a later
  crawl.
* Panel: fewer than `min_panel` kept votes make the point `thin` (published with its panel,
  never as the market).
* Figures: median, p10 and p90 of the kept votes (Hyndman and Fan type 7, numpy's default,
  PERCENTILE.INC), rounded to micro-dollars.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import orjson

__all__ = ["METHOD_VERSION", "IndexFigure", "IndexOffer", "Params", "Vote", "compute_index",
           "digest", "figure_of", "judge", "quantile", "screen"]

#: The method's version, stored with every point: a point is reproduced by this method only.
METHOD_VERSION = 2
#: 0.6745: the 0.75 quantile of the standard normal; MAD / 0.6745 estimates sigma.
MAD_SCALE = 0.6745
STATUSES = ("market", "thin", "none")


@dataclass(frozen=True, slots=True)
class Params:
    """The method's parameters, stored with every point. `stale_after_s` (None: never by
    age) and `stale_after_failures` are the alerts' staleness settings, which the index
    shares with rules and `sources`."""

    min_panel: int = 3
    outlier_z: float = 3.5
    band: float = 2.0
    jump: float = 2.0
    stale_after_s: int | None = 172_800
    stale_after_failures: int = 3

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class IndexOffer(NamedTuple):
    """One offer as the index sees it. `observed`: epoch seconds its source's data
    describes (a replay: the capture), which tells a later crawl from the same one.
    `offers`: how many of its source's offers of the model and pricing it stands for, when
    storage reads only each source's cheapest (a vote needs no more); 1 otherwise."""

    offer_id: int
    gpu: str
    pricing: str
    source: str
    usd_per_gpu_hour: float
    observed: int = 0
    offers: int = 1


@dataclass(frozen=True, slots=True)
class Vote:
    """One provider's vote: its lowest offer. `offers`: how many of its offers were
    candidates; `ref`: its last accepted vote, recorded when this one jumped away from it
    (None otherwise); `reason`: why the vote is excluded ('' when kept)."""

    source: str
    offer_id: int
    price: float
    offers: int
    observed: int
    ref: float | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def accepted(self) -> float | None:
        """The reference the next computation compares this provider with."""
        return self.price if self.reason in ("", "outlier") else self.ref


@dataclass(frozen=True, slots=True)
class IndexFigure:
    """The index of one model and pricing: figures over the kept votes (None when no vote is
    kept), `status` market / thin, the panel (every vote, kept or excluded with its
    reason), and the SHA-256 of its inputs."""

    gpu: str
    pricing: str
    median: float | None
    p10: float | None
    p90: float | None
    status: str
    panel: tuple[Vote, ...] = field(default_factory=tuple)
    digest: str = ""

    @property
    def providers(self) -> int:
        return sum(1 for v in self.panel if not v.reason)

    @property
    def offers(self) -> int:
        return sum(v.offers for v in self.panel if not v.reason)

    @property
    def excluded(self) -> tuple[Vote, ...]:
        return tuple(v for v in self.panel if v.reason)


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


def screen(prices: Sequence[float], params: Params = Params()) -> list[bool]:
    """For each (positive) price, whether it stays (False: an outlier of the cross-section)."""
    if not prices:
        return []
    logs = [math.log(p) for p in prices]
    centre = quantile(sorted(logs), 0.5)
    deviations = [abs(v - centre) for v in logs]
    mad = quantile(sorted(deviations), 0.5)
    floor = math.log(params.band)
    band = max(floor, params.outlier_z * mad / MAD_SCALE) if mad > 0 else floor
    return [d <= band for d in deviations]


def _round(value: float) -> float:
    return round(value, 6)


def digest(params: Params, votes: Iterable[Vote]) -> str:
    """SHA-256 (hex) of a point's inputs: the method version, its parameters and each
    provider's vote [source, offer id, price, offers, history reference], as canonical JSON
    (sorted keys, no spaces). Not the votes' `observed`: a crawl that changes no price
    changes no digest, and writes no point."""
    inputs = {"method": METHOD_VERSION, "params": params.as_dict(),
              "votes": sorted([v.source, v.offer_id, v.price, v.offers, v.ref]
                              for v in votes)}
    return hashlib.sha256(orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _votes(members: Sequence[IndexOffer],
           previous: Mapping[str, Vote]) -> list[Vote]:
    """Each provider's lowest offer (ties: the lowest id), with its history reference."""
    best: dict[str, IndexOffer] = {}
    counts: dict[str, int] = {}
    for o in members:
        counts[o.source] = counts.get(o.source, 0) + o.offers
        b = best.get(o.source)
        if b is None or (o.usd_per_gpu_hour, o.offer_id) < (b.usd_per_gpu_hour, b.offer_id):
            best[o.source] = o
    out = []
    for source in sorted(best):
        o = best[source]
        prev = previous.get(source)
        out.append(Vote(source, o.offer_id, _round(o.usd_per_gpu_hour), counts[source],
                        o.observed, None if prev is None else prev.accepted))
    return out


def judge(votes: list[Vote], previous: Mapping[str, Vote], params: Params) -> list[Vote]:
    """The screens: an unconfirmed jump first (against the provider's own history), then the
    cross-section among the votes left."""
    limit = math.log(params.jump)
    near = math.log(params.band)
    judged: list[Vote] = []
    for v in votes:
        jumped = v.ref is not None and abs(math.log(v.price / v.ref)) > limit
        if not jumped:  # the reference is kept only where it decided something
            v = Vote(v.source, v.offer_id, v.price, v.offers, v.observed)
        else:
            prev = previous.get(v.source)
            again = prev is not None and prev.price == v.price and v.observed > prev.observed
            peers = any(abs(math.log(v.price / w.price)) <= near
                        for w in votes if w.source != v.source)
            if not (again or peers):
                v = Vote(v.source, v.offer_id, v.price, v.offers, v.observed, v.ref,
                         "unconfirmed jump")
        judged.append(v)
    candidates = [v for v in judged if not v.reason]
    kept = dict(zip((v.source for v in candidates),
                    screen([v.price for v in candidates], params), strict=True))
    return [v if v.reason or kept[v.source]
            else Vote(v.source, v.offer_id, v.price, v.offers, v.observed, v.ref, "outlier")
            for v in judged]


def figure_of(gpu: str, pricing: str, panel: Sequence[Vote], params: Params) -> IndexFigure:
    """The figures and status of one (model, pricing) from its judged panel."""
    values = sorted(v.price for v in panel if not v.reason)
    status = ("market" if len(values) >= params.min_panel else "thin" if values
              else "none")  # none: every vote held out (a jump awaiting confirmation)
    med = p10 = p90 = None
    if values:
        med, p10, p90 = (_round(quantile(values, q)) for q in (0.5, 0.1, 0.9))
    return IndexFigure(gpu, pricing, med, p10, p90, status, tuple(panel),
                       digest(params, panel))


def compute_index(offers: Iterable[IndexOffer], params: Params = Params(),
                  previous: Mapping[tuple[str, str], Mapping[str, Vote]] | None = None
                  ) -> dict[tuple[str, str], IndexFigure]:
    """The index of every (model, pricing) present in `offers`; `previous`: each key's
    votes in the point in force before (the history screen's reference). Offers without a
    positive, finite price are ignored (storage never holds one; this is the last guard)."""
    groups: dict[tuple[str, str], list[IndexOffer]] = {}
    for o in offers:
        p = o.usd_per_gpu_hour
        if isinstance(p, int | float) and math.isfinite(p) and p > 0:
            groups.setdefault((o.gpu, o.pricing), []).append(o)
    previous = previous or {}
    out: dict[tuple[str, str], IndexFigure] = {}
    for key in sorted(groups):
        prev = previous.get(key, {})
        panel = judge(_votes(groups[key], prev), prev, params)
        out[key] = figure_of(*key, panel, params)
    return out
