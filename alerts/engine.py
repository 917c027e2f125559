"""Rule evaluation and alert state (Alertmanager semantics, stored in the database).

One evaluation reads the current offers ONCE, matches every rule in memory (offers grouped
by GPU and sorted by price, so a rule only looks at the offers that can match it), then
writes state changes and the notifications they cause in one transaction.

Semantics (docs/alerts.md has the user's version):

* A rule matches when at least one listed, not-unavailable offer from a *fresh* source
  passes its filters and its price condition. Pending while `for` has not been met,
  then firing; the first evaluation fires if the condition already holds.
* Firing notifies once; again only when the best price improves by `min_drop`, every
  `repeat` interval, and on resolution if `send_resolved`.
* Hysteresis: a firing rule resolves only when no fresh offer is within the limit plus
  `hysteresis` (2 %), so a price flapping around the limit does not spam.
* A stale source (crawls keep failing, or no success for `stale_after`) cannot make a rule
  fire, and its offers still near the limit keep a firing rule firing: no false "resolved".
* A fit rule (`cheapest fit for 7B finetune under $3/h`) prices each offer as the
  configuration the job needs on it (gpuradar.recommend.fit_price: memory, interconnect,
  currency), and offers the job does not fit on are not candidates; everything above
  (freshness, `for`, hysteresis, notifications) is the same code for every rule.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from gpuradar.alerts.rules import Rule, parse_datetime, parse_pct_or_amount
from gpuradar.storage import alerts as store
from gpuradar.storage.queries import latest_fx
from sqlalchemy import Engine

from gpuradar.core import gpus as catalog
from gpuradar.core.config import ConfigError
from gpuradar.core.currency import FxTable
from gpuradar.core.units import parse_duration, region_pattern
from gpuradar.recommend import Fit, FitRequirement, estimate_memory, fit_offer, fit_price

log = logging.getLogger(__name__)

# Positions in the offer tuples of storage.alerts.alert_offers().
(ID, SRC, REG, ZONE, ITYPE, PRICING, GPU, COUNT, GMEM, VCPU, MEM, PRICE, CUR, PUSD, PGPU,
 AVAIL, ACOUNT, URL) = range(18)
_NOMINAL_MEMORY = {name: g.memory_gb for name, g in catalog.CATALOG.items()}


# -- settings ----------------------------------------------------------------------------
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


# -- the evaluation's view of the market ---------------------------------------------------
class Market:
    """Current offers grouped by GPU and sorted by price; source freshness; FX rates."""

    def __init__(self, offers: list[tuple], health: dict[str, tuple[datetime | None, int]],
                 fx: FxTable, now: datetime, settings: AlertSettings,
                 sorted_cache: dict | None = None) -> None:
        self.offers = offers
        self.now = now
        self.fx = fx
        self.last_success = {s: at for s, (at, _) in health.items()}
        self.failures = {s: n for s, (_, n) in health.items()}
        self.stale: set[str] = set()
        for source, (at, n) in health.items():
            if n >= settings.stale_after_failures or (
                    settings.stale_after is not None and at is not None
                    and now - at > settings.stale_after):
                self.stale.add(source)
        self._by_gpu: dict[str, list[tuple]] | None = None
        self._sorted: dict[tuple, tuple[list[float], list[tuple], list[tuple]]] = (
            {} if sorted_cache is None else sorted_cache)

    def sorted_offers(self, gpu: str, column: int, pricing: str | None,
                      source: str | None = None
                      ) -> tuple[list[float], list[tuple], list[tuple]]:
        """(USD keys, offers sorted by that USD column, offers without a USD price) of one
        GPU (and one pricing, and one source, if given)."""
        key = (gpu, column, pricing, source)
        hit = self._sorted.get(key)
        if hit is None:
            if self._by_gpu is None:
                self._by_gpu = {}
                for o in self.offers:
                    self._by_gpu.setdefault(o[GPU], []).append(o)
            pool = self._by_gpu.get(gpu, [])
            if pricing is not None:
                pool = [o for o in pool if o[PRICING] == pricing]
            if source is not None:
                pool = [o for o in pool if o[SRC] == source]
            priced = sorted((o for o in pool if o[column] is not None), key=lambda o: o[column])
            hit = ([o[column] for o in priced], priced, [o for o in pool if o[column] is None])
            self._sorted[key] = hit
        return hit

    def gpus(self) -> list[str]:
        """Every GPU with an offer (kept with the sorted lists between evaluations)."""
        hit = self._sorted.get(("*gpus*", 0, None))
        if hit is None:
            names = sorted({o[GPU] for o in self.offers})
            hit = ([], [(n,) for n in names], [])
            self._sorted[("*gpus*", 0, None)] = hit
        return [t[0] for t in hit[1]]

    def usd_per_unit(self, currency: str) -> float | None:
        return self.fx.to_usd(1.0, currency)


@dataclass
class RuleMatch:
    """What one rule sees now."""

    rule: Rule
    limit: float | None                     # effective price limit (rule currency/unit)
    matches: list[tuple[float, tuple]] = field(default_factory=list)  # fresh, cheapest first
    in_band: bool = False                   # a fresh offer within limit + hysteresis
    stale_hold: bool = False                # a stale source's offer within the band
    reference: float | None = None          # drop rules: the N-day low compared against
    note: str = ""                          # why nothing can match (no FX rate, no history)

    @property
    def matched(self) -> bool:
        return bool(self.matches)

    @property
    def best(self) -> float | None:
        return self.matches[0][0] if self.matches else None


def offer_filter(rule: Rule) -> Callable[[tuple], bool]:
    """Everything about an offer the rule cares about except its price."""
    pricing = rule.pricing
    sources = set(rule.sources) or None
    excluded = set(rule.exclude_sources)
    regions = region_pattern(rule.regions)
    not_regions = region_pattern(rule.exclude_regions)
    min_gpus, max_gpus = rule.min_gpus, rule.max_gpus
    min_gmem, min_total = rule.min_gpu_memory, rule.min_total_gpu_memory
    min_vcpus, min_mem = rule.min_vcpus, rule.min_memory
    available_only = rule.available_only

    def ok(o: tuple) -> bool:
        if pricing is not None and o[PRICING] != pricing:
            return False
        if sources is not None and o[SRC] not in sources:
            return False
        if excluded and o[SRC] in excluded:
            return False
        if available_only and o[AVAIL] is not True:
            return False
        if min_gpus is not None and o[COUNT] < min_gpus - 1e-9:
            return False
        if max_gpus is not None and o[COUNT] > max_gpus + 1e-9:
            return False
        if min_gmem is not None or min_total is not None:
            mem = _NOMINAL_MEMORY.get(o[GPU]) or o[GMEM]
            if mem is None:
                return False
            if min_gmem is not None and mem < min_gmem * 0.97:
                return False
            if min_total is not None and mem * o[COUNT] < min_total * 0.97:
                return False
        if min_vcpus is not None and (o[VCPU] is None or o[VCPU] < min_vcpus):
            return False
        if min_mem is not None and (o[MEM] is None or o[MEM] < min_mem * 0.97):
            return False
        if regions is not None or not_regions is not None:
            region, zone = o[REG].lower(), (o[ZONE] or "").lower()
            if regions is not None and not (regions.fullmatch(region)
                                            or (zone and regions.fullmatch(zone))):
                return False
            if not_regions is not None and (not_regions.fullmatch(region)
                                            or (zone and not_regions.fullmatch(zone))):
                return False
        return True

    return ok


def price_function(rule: Rule, usd_per_unit: float
                   ) -> Callable[[float, str, float | None, float | None, float], float | None]:
    """(price, currency, price_usd, price_per_gpu_usd, gpu_count) -> the rule's price.

    A rule in CNY compares offers quoted in CNY as quoted and the others through FX."""
    currency, per_instance = rule.currency, rule.per_instance

    def value(price: float, cur: str, usd: float | None, per_gpu_usd: float | None,
              count: float) -> float | None:
        if cur == currency and price is not None:
            return price if per_instance else (price / count if count else None)
        v = usd if per_instance else per_gpu_usd
        return None if v is None else v / usd_per_unit

    return value


def _candidates(market: Market, rule: Rule, bound_usd: float | None) -> Iterable[tuple]:
    """Offers that might match: the rule's GPUs (for `any 80GB+ GPU`, the GPUs with that
    much memory), its pricing, and (with a price bound) only the cheap end of each list."""
    column = PUSD if rule.per_instance else PGPU
    gpus = market.gpus() if rule.gpus is None else sorted(rule.gpus)
    if rule.min_gpu_memory is not None:
        floor = rule.min_gpu_memory * 0.97
        gpus = [g for g in gpus if _NOMINAL_MEMORY.get(g, floor) >= floor]
    # A rule limited to a few sources reads only their lists (the filter still checks).
    sources: list[str | None] = sorted(rule.sources) if rule.sources else [None]
    for gpu in gpus:
        for source in sources:
            keys, priced, unpriced = market.sorted_offers(gpu, column, rule.pricing, source)
            end = len(priced) if bound_usd is None else bisect_right(keys, bound_usd)
            yield from priced[:end]
            yield from unpriced


_SIGNATURE = ("gpus", "min_gpus", "max_gpus", "min_gpu_memory", "min_total_gpu_memory",
              "min_vcpus", "min_memory", "pricing", "sources", "exclude_sources", "regions",
              "exclude_regions", "available_only", "currency", "per_instance")


@dataclass
class _Pool:
    """The offers one filter signature admits, priced in its currency and unit."""

    values: list[float]                  # fresh offers' prices, ascending
    offers: list[tuple[float, tuple]]    # (price, offer), same order
    stale_min: float | None              # cheapest offer of a stale source


def _pool(market: Market, rule: Rule, rate: float, bound: float | None) -> _Pool:
    # The pricing is chosen by the candidate lists and the GPUs by _candidates: a rule that
    # says nothing else needs no per-offer filter.
    ok = None if _only_gpu_and_pricing(rule) else offer_filter(rule)
    value = price_function(rule, rate)
    # In USD the price IS the USD column the candidates are sorted by.
    column = (PUSD if rule.per_instance else PGPU) if rule.currency == "USD" else None
    slack = 1.0 if rule.currency == "USD" else 1.25  # FX drift between stored rates
    bound_usd = None if bound is None else bound * rate * slack + 1e-9
    limit = None if bound is None else bound + 1e-9
    stale = market.stale
    fresh: list[tuple[float, tuple]] = []
    stale_min = None
    for o in _candidates(market, rule, bound_usd):
        if ok is not None and not ok(o):
            continue
        v = o[column] if column is not None else None
        if v is None:
            v = value(o[PRICE], o[CUR], o[PUSD], o[PGPU], o[COUNT])
            if v is None:
                continue
        if limit is not None and v > limit:
            continue
        if o[SRC] in stale:
            stale_min = v if stale_min is None or v < stale_min else stale_min
        else:
            fresh.append((v, o))
    fresh.sort(key=itemgetter(0))
    return _Pool([v for v, _ in fresh], fresh, stale_min)


def _only_gpu_and_pricing(rule: Rule) -> bool:
    return not (rule.sources or rule.exclude_sources or rule.regions or rule.exclude_regions
                or rule.available_only or rule.min_vcpus is not None
                or rule.min_memory is not None or rule.min_total_gpu_memory is not None
                or rule.min_gpus is not None or rule.max_gpus is not None
                or rule.min_gpu_memory is not None)


# -- fit rules ---------------------------------------------------------------------------
def offer_dict(o: tuple) -> dict[str, Any]:
    """An offer tuple as the mapping gpuradar.recommend fits jobs on. The tuples carry no
    `attributes`, so the interconnect comes from gpuradar.core.interconnect's table: the same
    answer the pipeline stores (it fills attributes["interconnect"] from that table)."""
    return {"source": o[SRC], "region": o[REG], "zone": o[ZONE] or "",
            "instance_type": o[ITYPE], "pricing": o[PRICING], "gpu": o[GPU],
            "gpu_count": o[COUNT], "gpu_memory_gb": o[GMEM], "price": o[PRICE],
            "currency": o[CUR], "price_usd": o[PUSD], "available": o[AVAIL],
            "available_count": o[ACOUNT], "url": o[URL] or ""}


def _unlimited(rule: Rule) -> FitRequirement:
    """A fit rule's requirement without its price limit: the engine applies the limit
    (strictly) and the hysteresis band itself, as for every rule."""
    assert rule.fit is not None
    return replace(rule.fit, max_price=None, text="")


def fit_of(rule: Rule, o: tuple) -> Fit | None:
    """The configuration a fit rule's job needs on offer `o` (machines, GPUs), or None."""
    if rule.fit is None:
        return None
    fit, _ = fit_offer(offer_dict(o), estimate_memory(rule.fit.job))
    return fit


def _fit_pool(market: Market, rule: Rule, rate: float, bound: float | None) -> _Pool:
    """The offers a fit rule's job fits on, each priced as its configuration in the rule's
    currency and unit (gpuradar.recommend.fit_price), up to `bound`."""
    req = _unlimited(rule)
    est = estimate_memory(req.job)
    # A configuration is one or more whole machines of an offer, so it costs at least the
    # offer's instance price (per GPU: exactly its per-GPU price): only the cheap end of each
    # sorted list can be under the bound.
    column = PGPU if req.per_gpu else PUSD
    slack = 1.0 if rule.currency == "USD" else 1.25  # FX drift between stored rates
    bound_usd = None if bound is None else bound * rate * slack + 1e-9
    limit = None if bound is None else bound + 1e-9
    fresh: list[tuple[float, tuple]] = []
    stale_min = None
    for gpu in market.gpus():
        memory = _NOMINAL_MEMORY.get(gpu)
        if memory and est.gpus_needed(memory) is None:
            continue  # what every GPU holds for itself does not fit on this one
        keys, priced, unpriced = market.sorted_offers(gpu, column, req.pricing)
        end = len(priced) if bound_usd is None else bisect_right(keys, bound_usd)
        for o in chain(priced[:end], unpriced):
            v = fit_price(offer_dict(o), req, market.fx)
            if v is None or (limit is not None and v > limit):
                continue
            if o[SRC] in market.stale:
                stale_min = v if stale_min is None or v < stale_min else stale_min
            else:
                fresh.append((v, o))
    fresh.sort(key=itemgetter(0))
    return _Pool([v for v, _ in fresh], fresh, stale_min)


def _band(rule: Rule, limit: float | None, settings: AlertSettings) -> float | None:
    hyst = rule.hysteresis if rule.hysteresis is not None else settings.hysteresis
    return None if limit is None else limit * (1 + hyst)


def _from_pool(rule: Rule, pool: _Pool, limit: float | None, band: float | None,
               result: RuleMatch) -> RuleMatch:
    if limit is None:
        n = len(pool.values)
    else:
        n = bisect_right(pool.values, limit - 1e-9)
        while n and pool.values[n - 1] >= limit - 1e-9:  # "under" is strict
            n -= 1
    result.matches = pool.offers[:n]
    result.in_band = bool(pool.values) and (band is None or pool.values[0] <= band + 1e-9)
    result.stale_hold = pool.stale_min is not None and (band is None
                                                        or pool.stale_min <= band + 1e-9)
    return result


def match_rule(market: Market, rule: Rule, settings: AlertSettings,
               history: list[dict[str, Any]] | None = None) -> RuleMatch:
    """What one rule matches now: fresh matches, whether a fresh or stale offer is within
    the hysteresis band."""
    rate = market.usd_per_unit(rule.currency)
    if rate is None or rate <= 0:
        return RuleMatch(rule, None, note=f"no exchange rate for {rule.currency}")
    limit = rule.max_price
    result = RuleMatch(rule, limit)
    if rule.drop_pct is not None and rule.drop_window is not None:
        ref = _drop_reference(market, rule, offer_filter(rule), price_function(rule, rate),
                              history or [])
        result.reference = ref
        if ref is None:
            result.note = "no earlier price to compare with in the window"
            return result
        drop_limit = ref * (1 - rule.drop_pct)
        limit = drop_limit if limit is None else min(limit, drop_limit)
        result.limit = limit
    band = _band(rule, limit, settings)
    if rule.fit is not None:
        return _from_pool(rule, _fit_pool(market, rule, rate, band), limit, band, result)
    return _from_pool(rule, _pool(market, rule, rate, band), limit, band, result)


def _match_all(market: Market, rules: list[Rule], settings: AlertSettings,
               history: list[dict[str, Any]]) -> list[RuleMatch]:
    """Every rule; rules that differ only in their price limit share one pass over the
    offers (the common case: many people watching "H100 under $X")."""
    groups: dict[tuple, list[Rule]] = {}
    fits: dict[FitRequirement, list[int]] = {}
    out: dict[int, RuleMatch] = {}
    for i, rule in enumerate(rules):
        if rule.drop_pct is not None:
            out[i] = match_rule(market, rule, settings, history)
        elif rule.fit is not None:  # the same job and filters: one pass, whatever the limits
            fits.setdefault(_unlimited(rule), []).append(i)
        else:
            groups.setdefault(tuple(getattr(rule, f) for f in _SIGNATURE), []).append(rule)
    for indices in fits.values():
        members = [rules[i] for i in indices]
        rate = market.usd_per_unit(members[0].currency)
        bands = [_band(r, r.max_price, settings) for r in members]
        bound = None if any(b is None for b in bands) else max(b for b in bands if b is not None)
        fit_pool = (_fit_pool(market, members[0], rate, bound)
                    if rate is not None and rate > 0 else None)
        for i, r, band in zip(indices, members, bands, strict=True):
            out[i] = (RuleMatch(r, None, note=f"no exchange rate for {r.currency}")
                      if fit_pool is None else
                      _from_pool(r, fit_pool, r.max_price, band, RuleMatch(r, r.max_price)))
    pools: dict[tuple, tuple[_Pool, float] | None] = {}
    for sig, members in groups.items():
        rate = market.usd_per_unit(members[0].currency)
        if rate is None or rate <= 0:
            pools[sig] = None
            continue
        bands = [_band(r, r.max_price, settings) for r in members]
        bound = None if any(b is None for b in bands) else max(b for b in bands if b is not None)
        pools[sig] = (_pool(market, members[0], rate, bound), rate)
    for i, rule in enumerate(rules):
        if i in out:
            continue
        hit = pools[tuple(getattr(rule, f) for f in _SIGNATURE)]
        if hit is None:
            out[i] = RuleMatch(rule, None, note=f"no exchange rate for {rule.currency}")
            continue
        band = _band(rule, rule.max_price, settings)
        out[i] = _from_pool(rule, hit[0], rule.max_price, band, RuleMatch(rule, rule.max_price))
    return [out[i] for i in range(len(rules))]


def _drop_reference(market: Market, rule: Rule, ok: Callable[[tuple], bool],
                    value: Callable[..., float | None],
                    history: list[dict[str, Any]]) -> float | None:
    """The low a `drops N% below its W low` rule compares with: the lowest price of the
    rule's offers during the W before the current cheapest price appeared. The drop must
    itself lie within the last W."""
    window = rule.drop_window
    assert window is not None
    opened = {h["offer_id"]: h["valid_from"] for h in history if h["valid_to"] is None}
    best_v, best_o = None, None
    for o in _candidates(market, rule, None):
        if o[SRC] in market.stale or not ok(o):
            continue
        v = value(o[PRICE], o[CUR], o[PUSD], o[PGPU], o[COUNT])
        if v is not None and (best_v is None or v < best_v):
            best_v, best_o = v, o
    if best_o is None:
        return None
    since = opened.get(best_o[ID])
    if since is None or since < market.now - window:
        return None
    ref = None
    for h in history:
        if h["valid_from"] >= since or h["available"] is False:
            continue
        if h["valid_to"] is not None and h["valid_to"] <= since - window:
            continue
        row = (h["offer_id"], h["source"], h["region"], h["zone"], h["instance_type"],
               h["pricing"], h["gpu"], h["gpu_count"], h["gpu_memory_gb"], h["vcpus"],
               h["memory_gb"], h["price"], h["currency"], h["price_usd"],
               h["price_per_gpu_usd"], h["available"], None, "")
        if rule.gpus is not None and row[GPU] not in rule.gpus:
            continue
        if not ok(row):
            continue
        v = value(row[PRICE], row[CUR], row[PUSD], row[PGPU], row[COUNT])
        if v is not None and (ref is None or v < ref):
            ref = v
    return ref


@dataclass
class _OfferCache:
    versions: dict[str, tuple[int, str]]
    by_source: dict[str, list[tuple]]
    offers: list[tuple]
    sorted: dict[tuple[str, int], tuple[list[float], list[tuple], list[tuple]]]


_CACHE: weakref.WeakKeyDictionary[Engine, _OfferCache] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def _current_offers(engine: Engine) -> _OfferCache:
    """The offers rules can match, reloaded only for sources that crawled since the last
    evaluation in this process (in the daemon: the one source that just finished)."""
    versions = store.crawl_versions(engine)
    with _CACHE_LOCK:
        cached = _CACHE.get(engine)
    if cached is not None and cached.versions == versions:
        return cached
    if cached is None:
        by_source: dict[str, list[tuple]] = {}
        for o in store.alert_offers(engine):
            by_source.setdefault(o[SRC], []).append(o)
    else:
        changed = {s for s in versions.keys() | cached.versions.keys()
                   if versions.get(s) != cached.versions.get(s)}
        by_source = {s: rows for s, rows in cached.by_source.items() if s not in changed}
        for o in store.alert_offers(engine, changed):
            by_source.setdefault(o[SRC], []).append(o)
    fresh = _OfferCache(versions, by_source, [o for rows in by_source.values() for o in rows],
                        {})
    with _CACHE_LOCK:
        _CACHE[engine] = fresh
    return fresh


def load_market(engine: Engine, now: datetime, settings: AlertSettings) -> Market:
    cache = _current_offers(engine)
    return Market(cache.offers, store.source_health(engine), FxTable(latest_fx(engine)), now,
                  settings, sorted_cache=cache.sorted)


def match_rules(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
                alert_settings: dict[str, Any] | AlertSettings | None = None,
                market: Market | None = None) -> list[RuleMatch]:
    """What every rule matches now (no state, nothing written): `gpuradar rules test`."""
    now = now or datetime.now(UTC)
    settings = parse_settings(alert_settings)
    market = market or load_market(engine, now, settings)
    history = _history(engine, rules, now)
    return _match_all(market, rules, settings, history)


def _history(engine: Engine, rules: list[Rule], now: datetime) -> list[dict[str, Any]]:
    drops = [r for r in rules if r.drop_pct is not None and r.drop_window is not None]
    if not drops:
        return []
    gpus: set[str] | None = set()
    for r in drops:
        if r.gpus is None:
            gpus = None
            break
        gpus.update(r.gpus)
    window = max(r.drop_window for r in drops if r.drop_window is not None)
    return store.offer_history(engine, gpus, now - 2 * window)


# -- state ------------------------------------------------------------------------------
@dataclass
class EvaluationResult:
    """What one evaluation did."""

    firing: int = 0                 # rules firing now
    pending: int = 0
    notifications: int = 0          # outbox rows queued
    fired: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    stale_sources: list[str] = field(default_factory=list)
    matches: dict[str, RuleMatch] = field(default_factory=dict)
    state_writes: int = 0           # alert_state rows inserted, updated or deleted
    seconds: float = 0.0


def _effective(rule: Rule, settings: AlertSettings) -> dict[str, Any]:
    own_drop = rule.min_drop_pct is not None or rule.min_drop_abs is not None
    return {
        "for_count": rule.for_count or (None if rule.for_duration else settings.for_count),
        "for_duration": rule.for_duration or (None if rule.for_count else settings.for_duration),
        "repeat": rule.repeat if rule.repeat_set else settings.repeat,
        "min_drop_pct": rule.min_drop_pct if own_drop else settings.min_drop_pct,
        "min_drop_abs": rule.min_drop_abs if own_drop else settings.min_drop_abs,
        "send_resolved": (settings.send_resolved if rule.send_resolved is None
                          else rule.send_resolved),
        "top": rule.top or settings.top,
    }


def _improved(best: float, notified: float, eff: dict[str, Any]) -> bool:
    if eff["min_drop_abs"] is not None:
        return best <= notified - eff["min_drop_abs"] + 1e-9 and best < notified
    pct = eff["min_drop_pct"] or 0.0
    return best <= notified * (1 - pct) + 1e-9 and best < notified


def evaluate(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
             alert_settings: dict[str, Any] | AlertSettings | None = None) -> EvaluationResult:
    """One evaluation of every rule against the stored offers.

    Writes the alert state and the outbox rows for the notifications it decides on, in one
    transaction. `rules` is the whole rule set: state of rules no longer in it is dropped.
    """
    from gpuradar.alerts import messages

    started = time.perf_counter()
    now = now or datetime.now(UTC)
    settings = parse_settings(alert_settings)
    unique: dict[str, Rule] = {}
    for r in rules:
        if r.key in unique:
            log.warning("two rules are named %r; only the first is evaluated", r.name)
            continue
        unique[r.key] = r
    rules = list(unique.values())
    market = load_market(engine, now, settings)
    matches = match_rules(engine, rules, now=now, alert_settings=settings, market=market)
    states = store.load_states(engine)
    renderer = messages.Renderer(settings.templates)
    result = EvaluationResult(matches={m.rule.name: m for m in matches})
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    outbox: list[dict[str, Any]] = []

    def queue(key: str, kind: str, targets: Iterable[str], msg: messages.Message) -> int:
        n = 0
        for target in dict.fromkeys(targets):
            outbox.append({"created_at": now, "alert_key": key, "kind": kind, "target": target,
                           "channel": "", "title": msg.title[:1000],
                           "body_markdown": msg.markdown, "body_text": msg.text,
                           "body_html": msg.html, "notify_type": msg.notify_type,
                           "status": "pending", "attempts": 0, "next_attempt_at": now,
                           "last_error": "", "sent_at": None})
            n += 1
        return n

    for m in matches:
        rule = m.rule
        eff = _effective(rule, settings)
        targets = rule.targets if rule.targets is not None else rule.notify
        old = states.get(rule.key)
        new_hash = rule.condition_hash_value
        fresh = old is None or old["rule_hash"] != new_hash
        st: dict[str, Any] = (
            {"key": rule.key, "kind": "rule", "name": rule.name, "rule_hash": new_hash,
             "state": "inactive", "active_count": 0, "pending_since": None, "fired_at": None,
             "resolved_at": None, "last_notified_at": None, "notified_value": None,
             "best_value": None, "match_count": 0, "best": {}}
            if fresh else dict(old))
        before = dict(st)
        st["description"] = rule.text[:1000]
        st["currency"] = rule.currency
        muted = rule.mute_until is not None and now < rule.mute_until
        kind: str | None = None
        if m.matched:
            if st["state"] != "firing":  # counted for `for:` only; no write while firing
                st["active_count"] = (st["active_count"] or 0) + 1
            st["pending_since"] = st["pending_since"] or now
            st["best_value"], st["match_count"] = m.best, len(m.matches)
            st["best"] = messages.offer_summary(m.matches[0], rule, market)
            if st["state"] != "firing":
                held = now - st["pending_since"]
                ready = (held >= eff["for_duration"] if eff["for_duration"]
                         else st["active_count"] >= (eff["for_count"] or 1))
                if ready:
                    st.update(state="firing", fired_at=now, notified_value=None,
                              resolved_at=None)
                    result.fired.append(rule.name)
                    kind = "firing"
                else:
                    st["state"] = "pending"
            elif st["notified_value"] is None:
                kind = "firing"  # muted or without targets until now
            elif _improved(m.best, st["notified_value"], eff):
                kind = "improved"
            elif eff["repeat"] and st["last_notified_at"] and (
                    now - st["last_notified_at"] >= eff["repeat"]):
                kind = "repeat"
        elif st["state"] == "firing" and (m.in_band or m.stale_hold):
            pass  # hysteresis, or a stale source may still have it: keep firing
        elif st["state"] == "firing":
            announced = st["notified_value"] is not None
            st.update(state="inactive", resolved_at=now, active_count=0, pending_since=None,
                      match_count=0)
            result.resolved.append(rule.name)
            if eff["send_resolved"] and announced:
                kind = "resolved"
            st["notified_value"] = None
        elif st["state"] == "pending" and not m.stale_hold:
            st.update(state="inactive", active_count=0, pending_since=None, match_count=0)
        if kind and not muted and targets:
            previous = st["notified_value"] if kind == "improved" else None
            msg = renderer.rule_message(
                kind, m, market, eff["top"], previous,
                resolved_best=_band_best(m, market) if kind == "resolved" else None)
            if queue(rule.key, kind, targets, msg):
                st["last_notified_at"] = now
                if kind != "resolved":
                    st["notified_value"] = m.best
        if st["state"] == "firing":
            result.firing += 1
        elif st["state"] == "pending":
            result.pending += 1
        if fresh and old is None:
            st["updated_at"] = now
            inserts.append(st)
        elif fresh or st != before:
            st["updated_at"] = now
            updates.append({k: v for k, v in st.items() if k != "id"})

    # Sources gone stale: one notification when it starts (opt-in), one when it ends.
    watchers: dict[str, set[str]] = {}
    for r in rules:
        targets = r.targets if r.targets is not None else r.notify
        for source in market.last_success.keys() | market.failures.keys():
            if (not r.sources or source in r.sources) and source not in r.exclude_sources:
                watchers.setdefault(source, set()).update(targets)
    for source in sorted(market.last_success.keys() | market.failures.keys()):
        key = f"source:{source}"
        old = states.get(key)
        is_stale = source in market.stale
        if is_stale:
            result.stale_sources.append(source)
        if old is None and not is_stale:
            continue
        st = dict(old) if old else {
            "key": key, "kind": "source", "name": source, "rule_hash": "",
            "description": f"source {source} is stale", "state": "inactive",
            "active_count": 0, "pending_since": None, "fired_at": None, "resolved_at": None,
            "last_notified_at": None, "notified_value": None, "best_value": None,
            "currency": "USD", "match_count": 0, "best": {}}
        before = dict(st)
        kind = None
        if is_stale and st["state"] != "firing":
            st.update(state="firing", fired_at=now, resolved_at=None, notified_value=None)
            kind = "stale"
        elif not is_stale and st["state"] == "firing":
            st.update(state="inactive", resolved_at=now)
            kind = "recovered" if st["notified_value"] is not None else None
            st["notified_value"] = None
        st["active_count"] = market.failures.get(source, 0)
        if kind and settings.notify_stale:
            targets = (sorted(watchers.get(source, ())) if settings.notify_stale is True
                       else list(settings.notify_stale))
            msg = renderer.source_message(kind, source, market)
            if queue(key, kind, targets, msg):
                st["last_notified_at"] = now
                st["notified_value"] = 1.0 if kind == "stale" else None
        if old is None:
            st["updated_at"] = now
            inserts.append(st)
        elif st != before:
            st["updated_at"] = now
            updates.append({k: v for k, v in st.items() if k != "id"})

    configured = {r.key for r in rules}
    deletes = [k for k, s in states.items() if s["kind"] == "rule" and k not in configured]
    result.notifications = len(outbox)
    result.state_writes = len(inserts) + len(updates) + len(deletes)
    store.save_evaluation(engine, inserts=inserts, updates=updates, deletes=deletes,
                          notifications=outbox)
    result.seconds = time.perf_counter() - started
    log.info("evaluated %d rules in %.0f ms: %d firing, %d notifications queued", len(rules),
             result.seconds * 1000, result.firing, result.notifications)
    return result


def _band_best(m: RuleMatch, market: Market) -> float | None:
    """Cheapest price the rule's offers have now, ignoring the limit (for "resolved")."""
    rate = market.usd_per_unit(m.rule.currency)
    if rate is None:
        return None
    if m.rule.fit is not None:
        values = _fit_pool(market, m.rule, rate, None).values
        return values[0] if values else None
    ok = offer_filter(m.rule)
    value = price_function(m.rule, rate)
    best = None
    for o in _candidates(market, m.rule, None):
        if o[SRC] in market.stale or not ok(o):
            continue
        v = value(o[PRICE], o[CUR], o[PUSD], o[PGPU], o[COUNT])
        if v is not None and (best is None or v < best):
            best = v
    return best


__all__ = ["AlertSettings", "EvaluationResult", "Market", "RuleMatch", "evaluate",
           "match_rules", "parse_datetime", "parse_settings"]
