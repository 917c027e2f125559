"""Writing crawls into the change-point store.

One `CrawlWriter` per crawl of one source. It loads the source's current offers once, then
compares every observation in memory: an unchanged observation writes nothing, a price or
availability change (or a new offer) writes one change point, which ends the span before
it. Only when the crawl finishes cleanly are offers that were not seen closed (a change
point with no price: not listed from then on).
Everything goes through SQLAlchemy Core bulk statements, one transaction per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuradar.storage.models import Crawl, Offer, PriceChange
from gpuradar.storage.owner import process_owner
from sqlalchemy import Engine, bindparam, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from gpuradar.core.items import PriceItem

log = logging.getLogger(__name__)

OFFER = Offer.__table__
CHANGE = PriceChange.__table__
CRAWL = Crawl.__table__


def epoch(ts: datetime) -> int:
    return int(ts.timestamp())


def micros(price: float | None) -> int | None:
    return None if price is None else round(price * 1_000_000)


def _record_changes(conn, rows: list[dict[str, Any]]) -> None:
    """Insert change points; a second change of one offer within the same second replaces
    the first (the later state is the one that held)."""
    ins = (postgresql.insert(CHANGE) if conn.dialect.name == "postgresql"
           else sqlite.insert(CHANGE))
    conn.execute(ins.on_conflict_do_update(
        index_elements=["offer_id", "at"],
        set_={"price_micros": ins.excluded.price_micros, "available": ins.excluded.available}),
        rows)

# Columns that only describe the offer: a difference updates the offer row, no change point.
DETAIL_FIELDS = ("gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb", "currency",
                 "price_usd", "price_per_gpu_usd", "available_count", "url", "attributes")
_KEY_FIELDS = ("region", "zone", "instance_type", "pricing")


@dataclass(slots=True)
class _State:
    """What storage holds for one offer, as far as change detection needs it."""

    id: int
    price: float
    available: bool | None
    active: bool
    details: tuple


def _details(item: PriceItem) -> tuple:
    return (item.gpu, item.gpu_count, item.gpu_memory_gb, item.vcpus, item.memory_gb,
            item.currency, item.price_usd, item.price_per_gpu_usd, item.available_count,
            item.url[:2000], item.attributes or {})


# (database URL, source) -> (id of the crawl that left this state, offers' state). A daemon
# crawls the same sources again and again: when nobody else wrote the source since our last
# crawl, its state is already in memory and need not be read back.
_STATE_CACHE: dict[tuple[str, str], tuple[int, dict]] = {}


@dataclass
class CrawlSummary:
    crawl_id: int | None
    source: str
    status: str
    items: int = 0
    new_offers: int = 0
    changed: int = 0
    closed: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    unknown_gpus: list[str] = field(default_factory=list)
    error: str = ""
    duration_s: float = 0.0
    changed_offer_ids: set[int] = field(default_factory=set)


class CrawlWriter:
    """Accumulates one crawl of one source into storage."""

    def __init__(self, engine: Engine, source: str, started_at: datetime | None = None) -> None:
        self.engine = engine
        self.source = source
        self.started_at = started_at or datetime.now(UTC)
        self.seen: set[tuple[str, str, str, str]] = set()
        self.items = self.new_offers = self.changed = 0
        self.changed_offer_ids: set[int] = set()
        self._cache_key = (engine.url.render_as_string(hide_password=False), source)
        self._clean = True  # False once a write failed: memory may then differ from the DB
        cols = [OFFER.c[f] for f in ("id", *_KEY_FIELDS, "price", "available", "active",
                                     *DETAIL_FIELDS)]
        with engine.begin() as conn:
            latest = conn.execute(select(func.max(CRAWL.c.id))
                                  .where(CRAWL.c.source == source)).scalar()
            self.crawl_id: int = conn.execute(
                insert(CRAWL).values(source=source, started_at=self.started_at, status="running",
                                     owner=process_owner(),
                                     items=0, new_offers=0, changed=0, closed=0, dropped={},
                                     unknown_gpus=[], error="")
                .returning(CRAWL.c.id)
            ).scalar_one()
            cached = _STATE_CACHE.pop(self._cache_key, None)
            if cached is not None and cached[0] == latest:
                self.current: dict[tuple[str, str, str, str], _State] = cached[1]
                return
            rows = conn.execute(select(*cols).where(OFFER.c.source == source)).all()
        self.current = {}
        for row in rows:
            r = tuple(row)
            self.current[r[1:5]] = _State(r[0], r[5], r[6], r[7], r[8:])

    # -- observations -------------------------------------------------------------------
    def add(self, items: Iterable[PriceItem]) -> None:
        """Store one batch of observations (one transaction)."""
        new: list[PriceItem] = []
        changed: list[tuple[_State, PriceItem]] = []
        details: list[tuple[_State, PriceItem]] = []
        seen, current = self.seen, self.current
        for item in items:
            key = (item.region, item.zone, item.instance_type, item.pricing)
            if key in seen:
                continue  # a source listing the same offer twice: the first one wins
            seen.add(key)
            self.items += 1
            state = current.get(key)
            if state is None:
                new.append(item)
            elif (state.price != item.price or state.available != item.available
                  or not state.active):
                changed.append((state, item))
            elif state.details != _details(item):
                details.append((state, item))
        if not (new or changed or details):
            return
        self._clean = False
        with self.engine.begin() as conn:
            if new:
                self._insert_new(conn, new)
            if changed:
                self._apply_changes(conn, changed)
            if details:  # rare: FX moved, stock count changed, specs corrected
                conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
                    {f: bindparam(f) for f in DETAIL_FIELDS}),
                    [{"_id": s.id, **self._detail_values(i)} for s, i in details])
                for state, item in details:
                    state.details = _details(item)
        self._clean = True

    @staticmethod
    def _detail_values(item: PriceItem) -> dict[str, Any]:
        return dict(zip(DETAIL_FIELDS, _details(item), strict=True))

    @staticmethod
    def _change(offer_id: int, item: PriceItem) -> dict[str, Any]:
        return {"offer_id": offer_id, "at": epoch(item.observed_at),
                "price_micros": micros(item.price), "available": item.available}

    def _insert_new(self, conn, new: list[PriceItem]) -> None:
        rows = [{"source": self.source, "region": i.region, "zone": i.zone,
                 "instance_type": i.instance_type, "pricing": i.pricing, "price": i.price,
                 "available": i.available, "first_seen": i.observed_at,
                 "changed_at": i.observed_at, "active": True, **self._detail_values(i)}
                for i in new]
        ids = conn.execute(insert(OFFER).returning(OFFER.c.id, sort_by_parameter_order=True),
                           rows).scalars().all()
        conn.execute(insert(CHANGE), [self._change(oid, i)
                                      for oid, i in zip(ids, new, strict=True)])
        for oid, i in zip(ids, new, strict=True):
            self.current[(i.region, i.zone, i.instance_type, i.pricing)] = _State(
                oid, i.price, i.available, True, _details(i))
        self.new_offers += len(new)
        self.changed_offer_ids.update(ids)

    def _apply_changes(self, conn, changed: list[tuple[_State, PriceItem]]) -> None:
        _record_changes(conn, [self._change(s.id, i) for s, i in changed])
        values = {f: bindparam(f) for f in ("price", "available", *DETAIL_FIELDS)}
        conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
            **values, changed_at=bindparam("_at"), active=True),
            [{"_id": s.id, "_at": i.observed_at, "price": i.price, "available": i.available,
              **self._detail_values(i)} for s, i in changed])
        for state, item in changed:
            state.price, state.available, state.active = item.price, item.available, True
            state.details = _details(item)
            self.changed_offer_ids.add(state.id)
        self.changed += len(changed)

    # -- end of crawl -------------------------------------------------------------------
    def finish(self, status: str, *, error: str = "", dropped: dict[str, int] | None = None,
               unknown_gpus: Iterable[str] = ()) -> CrawlSummary:
        """Record the outcome; only a clean ("ok") crawl closes offers it did not see."""
        finished = datetime.now(UTC)
        closed = 0
        if status == "ok" and self.items == 0 and any(s.active for s in self.current.values()):
            # An empty answer from a source that listed offers before is a broken source,
            # not a market that emptied in one go: close nothing.
            status, error = "failed", error or "crawl returned no offers; nothing closed"
        with self.engine.begin() as conn:
            if status == "ok":
                gone = [s for k, s in self.current.items() if s.active and k not in self.seen]
                if gone:
                    at = epoch(self.started_at)
                    _record_changes(conn, [{"offer_id": s.id, "at": at, "price_micros": None,
                                            "available": False} for s in gone])
                    conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
                        active=False, available=False, changed_at=self.started_at,
                        available_count=None), [{"_id": s.id} for s in gone])
                    closed = len(gone)
                    self.changed_offer_ids.update(s.id for s in gone)
                    for s in gone:
                        s.active, s.available = False, False
                        i = DETAIL_FIELDS.index("available_count")
                        s.details = (*s.details[:i], None, *s.details[i + 1:])
            summary = CrawlSummary(
                crawl_id=self.crawl_id, source=self.source, status=status, items=self.items,
                new_offers=self.new_offers, changed=self.changed, closed=closed,
                dropped=dict(dropped or {}), unknown_gpus=sorted(set(unknown_gpus)),
                error=error[:4000], duration_s=(finished - self.started_at).total_seconds(),
                changed_offer_ids=self.changed_offer_ids,
            )
            conn.execute(update(CRAWL).where(CRAWL.c.id == self.crawl_id).values(
                finished_at=finished, status=status, items=summary.items,
                new_offers=summary.new_offers, changed=summary.changed, closed=closed,
                dropped=summary.dropped, unknown_gpus=summary.unknown_gpus, error=summary.error,
                duration_s=summary.duration_s))
        if self._clean:
            _STATE_CACHE[self._cache_key] = (self.crawl_id, self.current)
        log.info("%s crawl %s: %s, %d items, %d new, %d changed, %d closed", self.source,
                 self.crawl_id, status, self.items, self.new_offers, self.changed, closed)
        return summary
