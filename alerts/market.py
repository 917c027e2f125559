"""The evaluation's view of the market, kept in the process between evaluations.

* `Market`: every live offer a rule can match (listed, not known to be unavailable), by id
  and by (GPU, pricing, source); which sources are fresh; the FX rates. `refresh()` reloads
  only the sources that crawled since the last call (in the daemon: the one that just
  finished), reading the columns that can change and whole rows only for the offers that
  did (or, when this process stored that crawl, only the rows it wrote), and says which
  offers changed.
* `Pool`: the offers one kind of rule can match — same `Selector`, currency, price basis and
  job, whatever the price limit — each priced in the rule's currency and unit, sorted, up to
  the highest limit (plus hysteresis) of the rules that share it. A pool is built once and
  then updated offer by offer, so an evaluation after a crawl costs what changed.
* `PoolSet`: the pools of a rule set, indexed by GPU, pricing and source, so a changed offer
  reaches only the pools that can hold it.
* `match()`: what one rule matches now, read from its pool.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import product
from operator import attrgetter
from typing import Any

from sqlalchemy import Engine

from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.alerts.rules import Condition, Rule, Selector, cached_hash
from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FxTable
from gpuradar.core.pricing import OPEN_MARKET
from gpuradar.core.spot import signal_of
from gpuradar.core.units import region_matches
from gpuradar.recommend import Fit, Job, MemoryEstimate, estimate_memory, fit_offer, price_in
from gpuradar.storage import alert_store as store
from gpuradar.storage.offers import OfferRow
from gpuradar.storage.queries import latest_fx, source_health

log = logging.getLogger(__name__)

NOMINAL_MEMORY = {name: g.memory_gb for name, g in catalog.CATALOG.items()}
EPS = 1e-9
# An offer's old and new row (None: it appeared / it is gone).
Change = tuple[OfferRow | None, OfferRow | None]


# -- the market --------------------------------------------------------------------------
class Market:
    """Live offers, source freshness and FX rates, as of the last `refresh`.

    With `signals`, spot offers carry their attributes (their interruption signal, for
    `interruptions under N%` rules) and a changed signal is a changed offer; without, no
    attributes are read (most rule sets never need them)."""

    def __init__(self, signals: bool = False) -> None:
        self.signals = signals
        self.offers: dict[int, OfferRow] = {}
        self.by_source: dict[str, dict[int, OfferRow]] = {}
        self.buckets: dict[tuple[str, str, str], dict[int, OfferRow]] = {}
        self.versions: dict[str, tuple[int, str]] | None = None
        self.fx = FxTable()
        self.fx_rates: dict[str, Any] = {}
        self.last_success: dict[str, datetime | None] = {}
        self.failures: dict[str, int] = {}
        self.stale: frozenset[str] = frozenset()
        self.now: datetime | None = None

    def refresh(self, engine: Engine, now: datetime, settings: AlertSettings
                ) -> tuple[list[Change], bool, bool]:
        """Read what changed since the last refresh: (changed offers, FX rates changed,
        the set of stale sources changed)."""
        versions = store.crawl_versions(engine)
        if self.versions is None:
            changed: set[str] | None = None
        else:
            changed = {s for s in versions.keys() | self.versions.keys()
                       if versions.get(s) != self.versions.get(s)}
        changes: list[Change] = []
        if changed is None:  # the first read
            rows = store.offer_rows(engine)
            if self.signals:
                attrs = store.spot_attributes(engine)
                rows = [r._replace(attributes=attrs[r.id]) if r.id in attrs else r
                        for r in rows]
            changes = self._load(rows)
        elif changed:
            changes = self._reload(engine, changed, versions)
        self.versions = versions
        rates = latest_fx(engine)
        fx_changed = rates != self.fx_rates
        if fx_changed:
            self.fx_rates, self.fx = rates, FxTable(rates)
        health = source_health(engine)
        self.now = now
        self.last_success = {s: at for s, (at, _) in health.items()}
        self.failures = {s: n for s, (_, n) in health.items()}
        stale = frozenset(source for source, (at, n) in health.items()
                          if settings.stale(at, n, now))
        stale_changed = stale != self.stale
        self.stale = stale
        return changes, fx_changed, stale_changed

    def _load(self, rows: list[OfferRow]) -> list[Change]:
        """The first read: every offer is new."""
        offers, by_source, buckets = self.offers, self.by_source, self.buckets
        for o in rows:
            offers[o.id] = o
            by_source.setdefault(o.source, {})[o.id] = o
            buckets.setdefault((o.gpu, o.pricing, o.source), {})[o.id] = o
        return [(None, o) for o in rows]

    def _reload(self, engine: Engine, sources: set[str],
                versions: dict[str, tuple[int, str]]) -> list[Change]:
        """The offers of `sources` that changed, applied: those a crawl of this process
        wrote when that is known (storage.ingest.written_since), else every offer of the
        source read again and compared."""
        from gpuradar.storage.ingest import written_since

        assert self.versions is not None
        known: dict[str, frozenset[int]] = {}
        if not self.signals:  # (an offer's signal is read apart: the whole source, then)
            for source in sources:
                ids = written_since(engine, source, self.versions.get(source),
                                    versions.get(source))
                if ids is not None:
                    known[source] = ids
        changes = self._compared(engine, sources - known.keys())
        if known:
            changes += self._rows_of(engine, known)
        for before, after in changes:
            if before is not None:
                self.offers.pop(before.id, None)
                self.by_source[before.source].pop(before.id, None)
                self.buckets[(before.gpu, before.pricing, before.source)].pop(before.id, None)
            if after is not None:
                self.offers[after.id] = after
                self.by_source.setdefault(after.source, {})[after.id] = after
                self.buckets.setdefault((after.gpu, after.pricing, after.source), {})[
                    after.id] = after
        return changes

    def _compared(self, engine: Engine, sources: set[str]) -> list[Change]:
        """The offers of `sources` read again; the ones that changed. Only the columns that
        can change are read and compared; whole rows are read for the offers that did
        (after a crawl, a few percent of the source's offers)."""
        if not sources:
            return []
        old: dict[int, OfferRow] = {}
        for source in sources:
            old.update(self.by_source.get(source, {}))
        differ: list[int] = []
        attrs = store.spot_attributes(engine, sources) if self.signals else {}
        held, keep, signals = old.pop, differ.append, self.signals
        for values in store.offer_values(engine, sources):
            # Its key never changes: the rest of the row tells whether the offer did.
            before = held(values[0], None)
            if (before is None or before[6:18] != values[1:]
                    or (signals and before.attributes != attrs.get(values[0]))):
                keep(values[0])
        rows = store.offer_rows(engine, differ) if differ else ()
        changes: list[Change] = [
            (self.offers.get(row.id),
             row._replace(attributes=attrs[row.id]) if row.id in attrs else row)
            for row in rows]
        changes.extend((row, None) for row in old.values())  # listed no more
        return changes

    def _rows_of(self, engine: Engine, written: dict[str, frozenset[int]]) -> list[Change]:
        """The offers the crawls of these sources wrote, read again; those that differ
        from what is held (new, changed, listed no more)."""
        ids = sorted(set().union(*written.values()))
        now = {row.id: row for row in store.offer_rows(engine, ids)} if ids else {}
        changes: list[Change] = []
        for oid in ids:
            before, after = self.offers.get(oid), now.get(oid)
            if before is None and after is None:
                continue
            if before is not None and after is not None and before[6:18] == after[6:18]:
                continue  # written, yet as it was (an offer's key never changes)
            changes.append((before, after))
        return changes

    def gpus(self) -> set[str]:
        return {g for g, _, _ in self.buckets}

    def sources(self) -> set[str]:
        return {s for _, _, s in self.buckets}

    def rows(self, gpus: Iterable[str] | None, pricings: Iterable[str],
             sources: Iterable[str] | None) -> Iterator[OfferRow]:
        """Offers of these GPUs, pricings and sources (None: every one)."""
        for key in product(self.gpus() if gpus is None else gpus, pricings,
                           self.sources() if sources is None else sources):
            bucket = self.buckets.get(key)
            if bucket:
                yield from bucket.values()

    def usd_per_unit(self, currency: str) -> float | None:
        return self.fx.to_usd(1.0, currency)


def needs_signals(rules: Iterable[Rule]) -> bool:
    """Whether any of the rules asks for spot offers' interruption signals (a Market with
    `signals`)."""
    return any(r.condition.offers.max_interruption is not None for r in rules)


# -- pools -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolKey:
    """What rules sharing a pool have in common: their condition without price or drop."""

    offers: Selector
    currency: str
    basis: str
    job: Job | None

    __hash__ = cached_hash

    @classmethod
    def of(cls, condition: Condition) -> PoolKey:
        """The condition's pool key, kept on the condition (frozen, so it cannot go stale):
        every evaluation looks it up for every rule, and a cache keyed by the condition
        would compare whole conditions field by field to find it."""
        key = condition.__dict__.get("_pool_key")
        if key is None:
            key = cls(condition.offers, condition.currency, condition.basis, condition.job)
            object.__setattr__(condition, "_pool_key", key)
        return key


def selector_filter(sel: Selector) -> Callable[[OfferRow], bool]:
    """Everything about an offer the selector cares about except its price."""
    gpus, pricing = sel.gpus, sel.pricing
    sources = set(sel.sources) or None
    excluded = set(sel.exclude_sources)
    min_gpus, max_gpus = sel.min_gpus, sel.max_gpus
    min_gmem, min_total = sel.min_gpu_memory, sel.min_total_gpu_memory
    min_vcpus, min_mem = sel.min_vcpus, sel.min_memory
    regions, not_regions = sel.regions, sel.exclude_regions
    available_only = sel.available_only
    max_interruption = sel.max_interruption
    places: dict[tuple[str, str, str], bool] = {}  # (source, region, zone): few, repeated

    def place_ok(o: OfferRow) -> bool:
        where = (o.source, o.region, o.zone)
        hit = places.get(where)
        if hit is None:
            hit = places[where] = (
                (not regions or region_matches(o.region, o.zone, regions, o.source))
                and not (not_regions
                         and region_matches(o.region, o.zone, not_regions, o.source,
                                            excluding=True)))
        return hit

    def ok(o: OfferRow) -> bool:
        if gpus is not None and o.gpu not in gpus:
            return False
        if o.pricing != pricing if pricing is not None else o.pricing not in OPEN_MARKET:
            return False  # no kind named: the open market only (gpuradar.core.pricing)
        if sources is not None and o.source not in sources:
            return False
        if excluded and o.source in excluded:
            return False
        if available_only and o.available is not True:
            return False
        if min_gpus is not None and o.gpu_count < min_gpus - EPS:
            return False
        if max_gpus is not None and o.gpu_count > max_gpus + EPS:
            return False
        if min_gmem is not None or min_total is not None:
            mem = NOMINAL_MEMORY.get(o.gpu) or o.gpu_memory_gb
            if mem is None:
                return False
            if min_gmem is not None and mem < min_gmem * 0.97:
                return False
            if min_total is not None and mem * o.gpu_count < min_total * 0.97:
                return False
        if min_vcpus is not None and (o.vcpus is None or o.vcpus < min_vcpus):
            return False
        if min_mem is not None and (o.memory_gb is None or o.memory_gb < min_mem * 0.97):
            return False
        if max_interruption is not None:
            # The band's upper bound: unknown (no signal, a score, open-ended) never matches.
            monthly = signal_of(o.attributes).monthly
            if monthly is None or monthly[1] is None or monthly[1] > max_interruption + EPS:
                return False
        return not (regions or not_regions) or place_ok(o)

    return ok


class Pool:
    """The offers one PoolKey admits with their price in its currency and unit, ascending,
    up to `bound` (None: all); fresh sources' and stale sources' offers apart."""

    def __init__(self, key: PoolKey, bound: float | None) -> None:
        self.key = key
        self.bound = bound
        self.accepts = selector_filter(key.offers)
        sel = key.offers
        # What a candidate (an offer of the pool's GPUs, pricing and sources: `candidates`)
        # must still pass; None when the selector asks nothing more of it.
        self.admits = (None if sel == Selector(gpus=sel.gpus, pricing=sel.pricing,
                                               sources=sel.sources) else self.accepts)
        self.estimate: MemoryEstimate | None = (estimate_memory(key.job) if key.job is not None
                                                else None)
        self._price: tuple[FxTable, Callable[[OfferRow], float | None]] | None = None
        self.values: list[float] = []       # fresh, ascending
        self.ids: list[int] = []
        self.stale_values: list[float] = []
        self.stale_ids: list[int] = []

    # pricing ------------------------------------------------------------------------
    def value(self, o: OfferRow, fx: FxTable) -> float | None:
        """The offer's price as the rule reads it, or None (no price, job does not fit)."""
        price = self._price
        if price is None or price[0] is not fx:
            price = self._price = (fx, self.pricer(fx))
        return price[1](o)

    def pricer(self, fx: FxTable) -> Callable[[OfferRow], float | None]:
        """`value` at these rates, as one function: the pool's currency, basis and job are
        looked at once, not once per offer."""
        key = self.key
        currency, per_offer = key.currency, key.basis == "offer"
        if self.estimate is not None:
            def fitted(o: OfferRow) -> float | None:
                fit = self.fit(o)
                return None if fit is None else price_in(fit, currency, fx, not per_offer)
            return fitted
        if currency == "USD":
            return attrgetter("price_usd" if per_offer else "price_per_gpu_usd")
        rate = fx.to_usd(1.0, currency)

        def converted(o: OfferRow) -> float | None:
            if o.currency == currency:
                return o.price if per_offer else (o.price / o.gpu_count if o.gpu_count else None)
            usd = o.price_usd if per_offer else o.price_per_gpu_usd
            return None if usd is None or not rate else usd / rate
        return converted

    def fit(self, o: OfferRow) -> Fit | None:
        """The configuration the pool's job needs on offer `o` (machines, GPUs), or None."""
        if self.estimate is None:
            return None
        return fit_offer(o, self.estimate)[0]

    def _entry(self, o: OfferRow, fx: FxTable) -> float | None:
        if not self.accepts(o):
            return None
        v = self.value(o, fx)
        if v is None or (self.bound is not None and v > self.bound + EPS):
            return None
        return v

    # building and updating ---------------------------------------------------------------
    def candidates(self, market: Market) -> Iterator[OfferRow]:
        sel = self.key.offers
        gpus: Iterable[str] | None = sel.gpus
        if gpus is None and sel.min_gpu_memory is not None:
            floor = sel.min_gpu_memory * 0.97
            gpus = {g for g in market.gpus() if NOMINAL_MEMORY.get(g, floor) >= floor}
        elif gpus is None and self.estimate is not None:
            est = self.estimate  # GPUs too small for what every GPU must hold: none fit
            gpus = {g for g in market.gpus()
                    if g not in NOMINAL_MEMORY or est.gpus_needed(NOMINAL_MEMORY[g])}
        pricings = (sel.pricing,) if sel.pricing else OPEN_MARKET
        return market.rows(gpus, pricings, sel.sources or None)

    def build(self, market: Market) -> None:
        fresh: list[tuple[float, int]] = []
        stale: list[tuple[float, int]] = []
        # `_entry` for each candidate, without a call per check: a pool of a large market
        # looks at tens of thousands of offers.
        admits, value, stale_sources = self.admits, self.pricer(market.fx), market.stale
        top = math.inf if self.bound is None else self.bound + EPS
        for o in self.candidates(market):
            if admits is None or admits(o):
                v = value(o)
                if v is not None and not v > top:
                    (stale if o.source in stale_sources else fresh).append((v, o.id))
        fresh.sort()
        stale.sort()
        self.values, self.ids = [v for v, _ in fresh], [i for _, i in fresh]
        self.stale_values, self.stale_ids = [v for v, _ in stale], [i for _, i in stale]

    def update(self, before: OfferRow | None, after: OfferRow | None,
               market: Market) -> float | None:
        """Apply one changed offer; the lowest price it had or has here (None: untouched).
        Its old price is computed as when it was added: the FX rates and the stale sources
        are those of the pool's last build (a change of either rebuilds the pools)."""
        fx = market.fx
        old = None if before is None else self._entry(before, fx)
        new = None if after is None else self._entry(after, fx)
        if (before is not None and old is not None and after is not None and new is not None
                and after.source == before.source):
            # The same offer, still here: moved from its old place to its new one.
            if new != old:
                self._move(old, new, after.id, after.source in market.stale)
            # (an unchanged price keeps its place; the offer is still touched: the rule
            # shows it as it is now)
            return min(old, new)
        touched: float | None = None
        if before is not None and old is not None:
            values, ids = self._lists(before.source in market.stale)
            i = self._index(values, ids, old, before.id)
            if i is not None:
                del values[i]
                del ids[i]
            touched = old
        if after is not None and new is not None:
            values, ids = self._lists(after.source in market.stale)
            i = _slot(values, ids, new, after.id)
            values.insert(i, new)
            ids.insert(i, after.id)
            touched = new if touched is None else min(touched, new)
        return touched

    def _lists(self, stale: bool) -> tuple[list[float], list[int]]:
        return (self.stale_values, self.stale_ids) if stale else (self.values, self.ids)

    def _index(self, values: list[float], ids: list[int], v: float, oid: int) -> int | None:
        """Where offer `oid` at price `v` is in the lists (None: not there)."""
        i = bisect_left(values, v)
        while i < len(values) and values[i] == v:
            if ids[i] == oid:
                return i
            i += 1
        log.debug("pool %s: offer %d not found at %s", self.key, oid, v)
        return None

    def _move(self, old: float, new: float, oid: int, stale: bool) -> None:
        """Move an offer from price `old` to `new`: only the entries between its old and
        its new place shift (a price moves by a few percent), where a removal and an
        insertion would each shift the whole rest of a list of tens of thousands."""
        values, ids = self._lists(stale)
        at = self._index(values, ids, old, oid)
        if at is None:  # not found (logged): add it at its new place
            i = _slot(values, ids, new, oid)
            values.insert(i, new)
            ids.insert(i, oid)
            return
        # its place in the lists without it (the entries before it there, as `build`
        # orders them: by price, then id)
        to = _slot(values, ids, new, oid) - (1 if old < new else 0)
        if to > at:
            values[at:to] = values[at + 1:to + 1]
            ids[at:to] = ids[at + 1:to + 1]
        elif to < at:
            values[to + 1:at + 1] = values[to:at]
            ids[to + 1:at + 1] = ids[to:at]
        values[to] = new
        ids[to] = oid


def _slot(values: list[float], ids: list[int], v: float, oid: int) -> int:
    """How many entries come before (v, oid): lower prices, and equal prices of lower ids
    (older offers), as `Pool.build` orders them."""
    i = bisect_left(values, v)
    while i < len(values) and values[i] == v and ids[i] < oid:
        i += 1
    return i


def band(rule: Rule, settings: AlertSettings) -> float | None:
    """The highest price a rule looks at: its limit plus hysteresis (None: no limit, or a
    drop rule, whose limit comes from history)."""
    c = rule.condition
    if c.max_price is None or c.drop_pct is not None:
        return None
    return c.max_price * (1 + hysteresis(rule, settings))


def hysteresis(rule: Rule, settings: AlertSettings) -> float:
    """The rule's own hysteresis, else the configured default (a rule may set 0)."""
    return rule.hysteresis if rule.hysteresis is not None else settings.hysteresis


class PoolSet:
    """The pools of one rule set, indexed by (GPU, pricing, source) of the offers they can
    hold (None in a key: any)."""

    def __init__(self) -> None:
        self.pools: dict[PoolKey, Pool] = {}
        self.index: dict[tuple[str | None, str | None, str | None], list[Pool]] = {}
        # (GPU, pricing, source) of an offer -> the pools that can hold it (from the index)
        self.reach: dict[tuple[str, str, str], list[Pool]] = {}

    def sync(self, rules: Iterable[Rule], settings: AlertSettings, market: Market
             ) -> set[PoolKey]:
        """Pools for exactly these rules, each bounded by its rules' highest band. Returns
        the pools built anew (new, or a rule now looks higher than the pool holds)."""
        bounds: dict[PoolKey, float | None] = {}
        for rule in rules:
            key = PoolKey.of(rule.condition)
            b = band(rule, settings)
            if key not in bounds:
                bounds[key] = b
            elif bounds[key] is not None:
                bounds[key] = None if b is None else max(bounds[key], b)  # type: ignore[type-var]
        built: set[PoolKey] = set()
        gone = [key for key in self.pools if key not in bounds]
        for key in gone:
            del self.pools[key]
        for key, b in bounds.items():
            pool = self.pools.get(key)
            if pool is not None and (pool.bound is None or (b is not None and b <= pool.bound)):
                continue
            pool = Pool(key, b)
            pool.build(market)
            self.pools[key] = pool
            built.add(key)
        if built or gone:
            self._reindex()
        return built

    def _reindex(self) -> None:
        self.index, self.reach = {}, {}
        for pool in self.pools.values():
            sel = pool.key.offers
            for key in product(sel.gpus or (None,), (sel.pricing,), sel.sources or (None,)):
                self.index.setdefault(key, []).append(pool)

    def pools_for(self, o: OfferRow) -> list[Pool]:
        """The pools that can hold offer `o`, each once."""
        where = (o.gpu, o.pricing, o.source)
        found = self.reach.get(where)
        if found is None:
            found = self.reach[where] = [
                p for key in product((o.gpu, None), (o.pricing, None), (o.source, None))
                for p in self.index.get(key, ())]
        return found

    def apply(self, changes: list[Change], market: Market, skip: set[PoolKey]
              ) -> dict[PoolKey, float]:
        """Apply changed offers to the pools (but those in `skip`, built from the current
        market already); the lowest price touched in each pool."""
        lowest: dict[Pool, float] = {}
        skipped = {self.pools[k] for k in skip if k in self.pools}
        for before, after in changes:
            if before is None or after is None:
                pools = self.pools_for(before or after)  # type: ignore[arg-type]
            else:  # the same offer: the same pools, unless its GPU changed
                pools, moved = self.pools_for(before), self.pools_for(after)
                if moved is not pools:
                    pools = list(dict.fromkeys(pools + moved))
            for pool in pools:
                if pool in skipped:
                    continue
                v = pool.update(before, after, market)
                if v is not None and (pool not in lowest or v < lowest[pool]):
                    lowest[pool] = v
        return {p.key: low for p, low in lowest.items()}

    def rebuild(self, market: Market, which: Callable[[PoolKey], bool]) -> set[PoolKey]:
        done = set()
        for key, pool in self.pools.items():
            if which(key):
                pool.build(market)
                done.add(key)
        return done


# -- what one rule matches ---------------------------------------------------------------
@dataclass
class RuleMatch:
    """What one rule sees now."""

    rule: Rule
    limit: float | None                     # effective price limit (rule currency/unit)
    count: int = 0                          # fresh offers under the limit
    matches: list[tuple[float, OfferRow]] = field(default_factory=list)  # cheapest first
    in_band: bool = False                   # a fresh offer within limit + hysteresis
    stale_hold: bool = False                # a stale source's offer within the band
    reference: float | None = None          # drop rules: the earlier low compared against
    note: str = ""                          # why nothing can match (no FX rate, no history)
    pool: Pool | None = None
    error: str = ""                         # the rule could not be evaluated: why

    @property
    def matched(self) -> bool:
        return self.count > 0

    @property
    def best(self) -> float | None:
        return self.matches[0][0] if self.matches else None


def match(rule: Rule, pool: Pool, market: Market, settings: AlertSettings, *,
          keep: int | None = None, history: list[dict[str, Any]] | None = None) -> RuleMatch:
    """What `rule` matches now from its pool: the fresh offers under its limit (the first
    `keep` of them with their rows; all when None), and whether a fresh or a stale offer is
    within its hysteresis band."""
    c = rule.condition
    rate = market.usd_per_unit(c.currency)
    if rate is None or rate <= 0:
        return RuleMatch(rule, None, note=f"no exchange rate for {c.currency}")
    limit = c.max_price
    result = RuleMatch(rule, limit, pool=pool)
    if c.drop_pct is not None and (c.drop_window is not None or c.median_window is not None):
        # the price N% is taken off: the low before the drop (drop_reference) or the
        # window's median (median_reference)
        if c.drop_window is not None:
            ref = drop_reference(rule, pool, market, history or [])
            missing = "no earlier price to compare with in the window"
        else:
            ref = median_reference(rule, pool, market, history or [])
            missing = "no stored price in the window to take the median of"
        result.reference = ref
        if ref is None:
            result.note = missing
            return result
        relative = ref * (1 - c.drop_pct)
        limit = relative if limit is None else min(limit, relative)
        result.limit = limit
    top = None if limit is None else limit * (1 + hysteresis(rule, settings))
    values = pool.values
    # "under" is strict: a price within EPS of the limit does not match.
    n = len(values) if limit is None else bisect_left(values, limit - EPS)
    result.count = n
    k = n if keep is None else min(n, keep)
    offers = market.offers
    result.matches = [(values[i], offers[pool.ids[i]]) for i in range(k)]
    result.in_band = bool(values) and (top is None or values[0] <= top + EPS)
    result.stale_hold = bool(pool.stale_values) and (top is None
                                                     or pool.stale_values[0] <= top + EPS)
    return result


def band_best(rule: Rule, market: Market, cache: dict[PoolKey, float | None] | None = None
              ) -> float | None:
    """The cheapest price the rule's offers have now, ignoring its limit (for "resolved"):
    from a pool of its kind without a bound (`cache`: the answers of this evaluation, by
    kind of rule)."""
    key = PoolKey.of(rule.condition)
    if cache is not None and key in cache:
        return cache[key]
    pool = Pool(key, None)
    pool.build(market)
    best = pool.values[0] if pool.values else None
    if cache is not None:
        cache[key] = best
    return best


def _span_row(h: dict[str, Any]) -> OfferRow:
    """A stored span as the offer row it was (for a pool's filter and pricing)."""
    return OfferRow(h["offer_id"], h["source"], h["region"], h["zone"] or "",
                    h["instance_type"], h["pricing"], h["gpu"], h["gpu_count"],
                    h["gpu_memory_gb"], h["vcpus"], h["memory_gb"], h["price"],
                    h["currency"], h["price_usd"], h["price_per_gpu_usd"], h["available"],
                    None, "")


def median_reference(rule: Rule, pool: Pool, market: Market,
                     history: list[dict[str, Any]]) -> float | None:
    """The median an `under its W median by N%` rule compares with: of every price the
    rule's offers held during the last W (not while known unavailable), each weighted by
    how long it held within W, the lowest price at or below which half of that offer-time
    lies. None when no such price is stored. (docs/alerts.md)"""
    window = rule.condition.median_window
    assert window is not None and market.now is not None
    now, start = market.now, market.now - window
    weighted: list[tuple[float, float]] = []
    for h in history:
        if h["available"] is False:
            continue
        begin, end = max(h["valid_from"], start), min(h["valid_to"] or now, now)
        seconds = (end - begin).total_seconds()
        if seconds <= 0:
            continue
        row = _span_row(h)
        if not pool.accepts(row):
            continue
        v = pool.value(row, market.fx)
        if v is not None:
            weighted.append((v, seconds))
    return weighted_median(weighted)


def weighted_median(values: list[tuple[float, float]]) -> float | None:
    """The lowest value at or below which half the total weight lies (None: no weight)."""
    total = sum(w for _, w in values)
    if total <= 0:
        return None
    seen = 0.0
    for value, w in sorted(values):
        seen += w
        if seen >= total / 2 - EPS:
            return value
    return None  # not reached: the weights add up to the total


def drop_reference(rule: Rule, pool: Pool, market: Market,
                   history: list[dict[str, Any]]) -> float | None:
    """The low a `drops N% below its W low` rule compares with: the lowest price of the
    rule's offers during the W before the current cheapest price appeared. The drop must
    itself lie within the last W."""
    window = rule.condition.drop_window
    assert window is not None and market.now is not None
    if not pool.values:
        return None
    best = market.offers[pool.ids[0]]
    opened = {h["offer_id"]: h["valid_from"] for h in history if h["valid_to"] is None}
    since = opened.get(best.id)
    if since is None or since < market.now - window:
        return None
    ref = None
    for h in history:
        if h["valid_from"] >= since or h["available"] is False:
            continue
        if h["valid_to"] is not None and h["valid_to"] <= since - window:
            continue
        row = _span_row(h)
        if not pool.accepts(row):
            continue
        v = pool.value(row, market.fx)
        if v is not None and (ref is None or v < ref):
            ref = v
    return ref
