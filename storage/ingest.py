"""Writing crawls into the change-point store.

One `CrawlWriter` per crawl of one source. It loads the source's current offers once, then
compares every observation in memory: an unchanged observation writes nothing, a price or
availability change (or a new offer) writes one change point, which ends the span before
it. Only when the crawl finishes cleanly are offers that were not seen closed (a change
point with no price: not listed from then on), and not even then:

* an offer the source listed with a price that could not be read or believed (`unreadable`)
  stays open with its last good price, flagged `unreadable_since`;
* a crawl that lists far fewer offers than the source's last successful crawl (the shrink
  guard, below half by default) closes nothing and is recorded `partial`; the next crawl
  closes the missing offers if it confirms the drop.

Everything goes through SQLAlchemy Core bulk statements, one transaction per batch.
"""

from __future__ import annotations

import functools
import logging
import math
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, Text, bindparam, cast, func, insert, select, update

from gpuradar.core import defaults
from gpuradar.core.backfill import Backfilled, PriceHistory
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.items import OfferKey, PriceItem
from gpuradar.core.marketindex import Params
from gpuradar.core.outcome import (
    CrawlStatus,
    ShrinkHold,
    held_outcome,
    shrink_hold,
    stored_outcome,
)
from gpuradar.storage.db import PerEngine, dialect_insert, json_dumps
from gpuradar.storage.models import CHANGE, CRAWL, CRAWL_FINISHED, OFFER
from gpuradar.storage.owner import process_owner
from gpuradar.storage.signals import last_points, point_of, point_row, record_points

log = logging.getLogger(__name__)



def epoch(ts: datetime) -> int:
    return int(ts.timestamp())


def micros(price: float | None) -> int | None:
    """Integer micro-units, rounded (not truncated: 2.01 must come back as 2.01)."""
    return None if price is None else round(price * 1_000_000)


# The bound (excluded) of the prices a change point can hold: price_micros is a signed 64-bit
# integer, and this float itself rounds to 2**63 micro-units, one past the largest.
MAX_STORABLE_PRICE = (2**63 - 1) / 1_000_000
# Default shrink guard (gpuradar.core.defaults): a clean crawl listing fewer than this share
# of the offers of the source's last successful crawl closes nothing until confirmed.
SHRINK_GUARD = defaults.SHRINK_GUARD
#: New offers from which a crawl renews PostgreSQL's planner statistics at once
#: (CrawlWriter._refresh_statistics).
ANALYZE_MIN_NEW = 1000


def storable(price: Any) -> bool:
    """Whether `price` fits a change point: a finite, positive number within 64-bit
    micro-units. The pipeline's plausibility range is far narrower; this is the last guard,
    so that no single value can fail a crawl's transaction."""
    # (NaN and the infinities fail the comparison: no isfinite call per observation)
    return (isinstance(price, int | float) and not isinstance(price, bool)
            and 0 < price < MAX_STORABLE_PRICE)


@functools.cache
def _change_upsert(dialect: str) -> Any:
    """The INSERT of change points of `dialect`, made once (statements a crawl runs batch
    after batch are built once, not per batch)."""
    ins = dialect_insert(dialect, CHANGE)
    return ins.on_conflict_do_update(
        index_elements=["offer_id", "at"],
        set_={"price_micros": ins.excluded.price_micros, "available": ins.excluded.available})


def _record_changes(conn, rows: list[dict[str, Any]]) -> None:
    """Insert change points; a second change of one offer within the same second replaces
    the first (the later state is the one that held)."""
    conn.execute(_change_upsert(conn.dialect.name), rows)

def _insert_new_pg(conn, rows: list[dict[str, Any]],
                   changes: Callable[[list[int]], list[dict[str, Any]]]) -> list[int]:
    """Insert offers and their first change points into PostgreSQL with COPY; the offers'
    ids, in the rows' order. The ids are drawn from the offer sequence first (one query), so
    neither table needs a statement per row. `changes(ids)` gives the change rows."""
    from psycopg.types.json import Json

    from gpuradar.storage.db import json_dumps

    cols = list(rows[0])
    cur_conn = conn.connection.driver_connection
    with cur_conn.cursor() as cur:
        ids = [r[0] for r in cur.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            (OFFER.name, len(rows)))]
        with cur.copy(f"COPY {OFFER.name} (id, {', '.join(cols)}) FROM STDIN") as copy:
            for oid, r in zip(ids, rows, strict=True):
                copy.write_row((oid, *(Json(v, dumps=json_dumps) if c == "attributes" else v
                                       for c, v in r.items())))
        change_cols = ("offer_id", "at", "price_micros", "available")
        with cur.copy(f"COPY {CHANGE.name} ({', '.join(change_cols)}) FROM STDIN") as copy:
            for row in changes(ids):
                copy.write_row(tuple(row[c] for c in change_cols))
    return ids


# Columns that only describe the offer: a difference updates the offer row, no change point.
DETAIL_FIELDS = ("gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb", "currency",
                 "price_usd", "price_per_gpu_usd", "available_count", "url", "attributes")

#: An observed offer's row rewritten: its price, availability and details (`_id`, `_at`).
_OBSERVED = update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
    {**{f: bindparam(f) for f in ("price", "available", *DETAIL_FIELDS)},
     "changed_at": bindparam("_at"), "active": True, "unreadable_since": None})


@dataclass(frozen=True)
class Replay:
    """A crawl answered from a recording: the capture date as the recording's provenance
    states it ("2026-08-22", "2026-08"; None when it does not say) and the moment that date
    stands for (the start of the stated day or month, UTC; None when unknown)."""

    captured: str | None
    at: datetime | None


_AVAILABLE = (False, True, None)  # availability as _States.available holds it: 0, 1, 2


def _available_code(available: Any) -> int:
    return 2 if available is None else 1 if available else 0


class _States:
    """What storage holds for each offer of one source, as far as change detection needs it:
    an index per offer key and, per index, the offer's id, last good price, availability,
    whether it is listed, and a hash of its details (DETAIL_FIELDS) -- flat arrays, not an
    object per offer, so a source of 100,000 offers costs a crawl a few MB. Details are only
    compared for equality: their hash changes whenever one of them does (see details_hash)."""

    __slots__ = ("index", "keys", "ids", "prices", "available", "active", "details",
                 "unreadable", "signals")

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.keys: list[tuple] = []
        self.ids = array("q")
        self.prices = array("d")
        self.available = bytearray()
        self.active = bytearray()
        self.details = array("q")
        #: index -> since when the offer's listed price could not be read (few offers).
        self.unreadable: dict[int, datetime] = {}
        #: offer id -> its last stored interruption signal (storage.signals); None until a
        #: crawl first needs it (read once, then kept up to date with every point written).
        self.signals: dict[int, tuple] | None = None

    def add(self, key: tuple, offer_id: int, price: float | None, available: bool | None,
            active: bool, details: int, unreadable_since: datetime | None = None) -> int:
        i = len(self.keys)
        self.index[key] = i
        self.keys.append(key)
        self.ids.append(offer_id)
        self.prices.append(math.nan if price is None else price)
        self.available.append(_available_code(available))
        self.active.append(1 if active else 0)
        self.details.append(details)
        if unreadable_since is not None:
            self.unreadable[i] = unreadable_since
        return i

    def set_observed(self, i: int, price: float, available: bool | None, details: int) -> None:
        """An observation was stored for offer `i`: listed, readable, these values."""
        self.prices[i] = price
        self.available[i] = _available_code(available)
        self.active[i] = 1
        self.details[i] = details
        self.unreadable.pop(i, None)


def details_hash(gpu: Any, gpu_count: Any, gpu_memory_gb: Any, vcpus: Any, memory_gb: Any,
                 currency: Any, price_usd: Any, price_per_gpu_usd: Any, available_count: Any,
                 url: str, attributes_json: str) -> int:
    """One number for an offer's details (DETAIL_FIELDS, attributes as stored JSON text):
    equal details give equal numbers (1 and 1.0 alike, as the database returns them); a
    change in one of them changes it (a tuple hash, 64-bit)."""
    return hash((gpu, gpu_count, gpu_memory_gb, vcpus, memory_gb, currency, price_usd,
                 price_per_gpu_usd, available_count, url, attributes_json))


def _kept_price(item: PriceItem) -> float:
    """The price of an item CrawlWriter.add kept: a storable number, never None."""
    price = item.price
    assert price is not None, "add() keeps only storable prices"
    return price


def _details(item: PriceItem) -> tuple:
    return (item.gpu, item.gpu_count, item.gpu_memory_gb, item.vcpus, item.memory_gb,
            item.currency, item.price_usd, item.price_per_gpu_usd, item.available_count,
            item.url[:2000], item.attributes or {})


#: The stored JSON of no attributes (most offers have none): written once, not per offer.
NO_ATTRIBUTES = json_dumps({})


def _details_of(item: PriceItem) -> int:
    attributes = item.attributes
    return details_hash(item.gpu, item.gpu_count, item.gpu_memory_gb, item.vcpus,
                        item.memory_gb, item.currency, item.price_usd, item.price_per_gpu_usd,
                        item.available_count, item.url[:2000],
                        json_dumps(attributes) if attributes else NO_ATTRIBUTES)


class CrawlMemory:
    """What a crawl service keeps from one crawl of a source to its next (a daemon crawls
    the same sources again and again): each source's offer state, kept by the crawl that
    left it, so that when nobody else wrote the source since, it need not be read back; and
    the market index's memo of its last update. It also carries the service's clock, which
    dates its crawls. Owned by the crawl service (a one-shot command's keeps nothing); a
    test makes a fresh one. Scrapy copies a crawl's settings deeply: the memory rides in
    them as a handle, never copied."""

    def __init__(self, clock: Clock = SYSTEM) -> None:
        self.clock = clock
        #: (database URL, source) -> (id of the crawl that left this state, offers' state)
        self.states: dict[tuple[str, str], tuple[int, _States]] = {}
        #: What the service's crawls have warned of (crawler.spiders.base): said once.
        self.warned: set[tuple[str, ...]] = set()
        from gpuradar.storage.index import IndexMemo

        self.index = IndexMemo()

    def __deepcopy__(self, memo: dict[int, Any]) -> CrawlMemory:
        return self

    def clear(self) -> None:
        """Forget everything (as a new process would)."""
        from gpuradar.storage.index import IndexMemo

        self.states.clear()
        self.warned.clear()
        self.index = IndexMemo()


class Written(NamedTuple):
    """What one finished crawl of a source wrote to its offers, as this process saw it."""

    crawl_id: int
    after: int | None             # the source's newest crawl when it started (None: none)
    offer_ids: frozenset[int] | None  # every offer whose row it changed; None: not known


#: Per engine, each source's last crawl finished by this process (`Written`): a reader of
#: the offers in the same process (the daemon's rule evaluation) reads again only the offers
#: a crawl wrote, not the whole source (`written_since`).
WRITTEN: PerEngine[dict[str, Written]] = PerEngine(lambda engine: {})


def written_since(engine: Engine, source: str, seen: tuple[int, str] | None,
                  now: tuple[int, str] | None) -> frozenset[int] | None:
    """The offers of `source` whose rows can differ from what a reader saw when the
    source's newest crawl was `seen` ((id, status), as storage.alert_store.crawl_versions
    gives it), now that it is `now`: those the one crawl since wrote, when this process
    stored that crawl and the one seen had finished when the reader saw it (its writes were
    all there). None when that is not known: the reader reads the whole source again."""
    if seen is None or now is None or seen[1] == CrawlStatus.RUNNING:
        return None
    written = WRITTEN.get(engine).get(source)
    if written is None or written.crawl_id != now[0] or written.after != seen[0]:
        return None
    return written.offer_ids


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
    #: Raw product name -> offers the spider could not map to a GPU model or count.
    uncatalogued: dict[str, int] = field(default_factory=dict)
    #: Listed offers kept open with their last good price: this crawl could not read or
    #: believe their price.
    unreadable: int = 0
    #: Offers not closed because the crawl listed far fewer than the last successful one.
    held: int = 0
    #: History stored from before the first crawl (gpuradar.core.backfill); None: none.
    backfilled: Backfilled | None = None


class CrawlWriter:
    """Accumulates one crawl of one source into storage."""

    def __init__(self, engine: Engine, source: str, started_at: datetime | None = None,
                 shrink_guard: float = SHRINK_GUARD, replay: Replay | None = None,
                 keep_state: bool = True, index_params: Params | None = None,
                 memory: CrawlMemory | None = None, clock: Clock = SYSTEM) -> None:
        """`memory`: the crawl service's, where the source's offer state is taken from when
        still current and, with `keep_state`, left for the service's next crawl of it (a
        daemon); without it (a one-shot crawl) the state is read from the database and freed
        before the index update. `index_params`: the market index's (its staleness is the
        configured one). `clock`: when the crawl starts and finishes."""
        self.engine = engine
        self.clock = clock
        self.memory = memory
        self.keep_state = keep_state and memory is not None
        self.index_params = index_params or Params()
        self.source = source
        self.started_at = started_at or clock.now()
        # The time every observation of this crawl describes: a replay's capture time (an
        # unknown one falls back to the replay's start, and is shown as unknown).
        self.replay = replay
        self.observed_at = (replay.at if replay is not None and replay.at is not None
                            else self.started_at)
        self.refused = ""
        self.shrink_guard = shrink_guard
        self.seen: set[tuple] = set()
        self.items = self.new_offers = self.changed = 0
        self.unstorable: set[tuple] = set()  # keys (OfferKey or equal tuples)
        self.changed_offer_ids: set[int] = set()
        # False once an offer's details were rewritten (FX, specs, stock): its model or USD
        # price may have moved, so the index update cannot be limited to changed offers.
        self._index_by_changes = True
        self._cache_key = (engine.url.render_as_string(hide_password=False), source)
        self._clean = True  # False once a write failed: memory may then differ from the DB
        self.backfilled: Backfilled | None = None
        # The attributes as their stored JSON text (json_dumps wrote it): hashed as they are.
        cols: list[Any] = [OFFER.c[f] for f in ("id", *OfferKey._fields, "price", "available",
                                                "active", *DETAIL_FIELDS[:-1])]
        cols += [cast(OFFER.c.attributes, Text), OFFER.c.unreadable_since]
        with engine.begin() as conn:
            latest = self._after = conn.execute(select(func.max(CRAWL.c.id))
                                                .where(CRAWL.c.source == source)).scalar()
            if replay is not None:
                self.refused = self._older_than_stored(conn)
            self.crawl_id: int = conn.execute(
                insert(CRAWL).values(source=source, started_at=self.started_at,
                                     status=CrawlStatus.RUNNING,
                                     owner=process_owner(),
                                     # NULL when it is the start (a live crawl): readers
                                     # take started_at, and the time is stored once
                                     observed_at=(None if self.observed_at == self.started_at
                                                  else self.observed_at),
                                     replayed=replay is not None,
                                     captured=replay.captured if replay else None,
                                     items=0, new_offers=0, changed=0, closed=0, dropped={},
                                     unknown_gpus=[], error="", uncatalogued={}, held=0)
                .returning(CRAWL.c.id)
            ).scalar_one()
            cached = memory.states.pop(self._cache_key, None) if memory else None
            if cached is not None and cached[0] == latest:
                self.current: _States = cached[1]
                return
            # Streamed (a server-side cursor on PostgreSQL): a large source's rows are not
            # held twice, as rows and as state, at the crawl's start.
            self.current = current = _States()
            # The key's strings (a few hundred regions and sizes) one object each, not one
            # per row.
            share: dict[str, str] = {}
            for r in conn.execute(select(*cols).where(OFFER.c.source == source)
                                  .execution_options(yield_per=5000)):
                key = tuple(share.setdefault(v, v) for v in r[1:5])
                current.add(key, r[0], r[5], r[6], r[7], details_hash(*r[8:-1]), r[-1])

    def _older_than_stored(self, conn) -> str:
        """Why this replay must not be stored ('' when it may): history is a sequence of
        changes in time, so a capture older than what the database already holds for the
        source would be written before it and contradict the current prices."""
        newest = conn.execute(
            select(func.max(func.coalesce(CRAWL.c.observed_at, CRAWL.c.started_at)))
            .where(CRAWL.c.source == self.source,
                   CRAWL.c.status.in_((CrawlStatus.OK, CrawlStatus.PARTIAL)))
        ).scalar()
        if newest is None or self.observed_at >= newest:
            return ""
        return (f"the recording was captured {self.replay.captured if self.replay else '?'}, "
                f"before the newest {self.source} data in this database "
                f"({newest:%Y-%m-%d %H:%M} UTC); replay it into another database "
                "(nothing stored)")

    # -- observations -------------------------------------------------------------------
    def listed(self, key: tuple) -> bool:
        """Whether an observation of the offer `key` was already added in this crawl (kept,
        or skipped as unstorable): a second one is a duplicate. A refused replay keeps no
        keys (False)."""
        return key in self.seen or key in self.unstorable

    def add(self, items: Iterable[PriceItem]) -> None:
        """Store one batch of observations (one transaction). A replay's observations are
        dated at the recording's capture time."""
        if self.refused:
            return
        replayed = self.replay is not None
        new: list[tuple[tuple, PriceItem]] = []
        changed: list[tuple[int, PriceItem]] = []
        details: list[tuple[int, PriceItem, int]] = []
        seen, current = self.seen, self.current
        index, prices, available, active = (current.index, current.prices, current.available,
                                            current.active)
        for item in items:
            if replayed:
                item.observed_at = self.observed_at
            # The offer's key (OfferKey) as a plain tuple, equal to it: an OfferKey made per
            # observation costs a tenth of an unchanged crawl's storage time.
            key = (item.region, item.zone, item.instance_type, item.pricing)
            if key in seen:
                continue  # the pipeline counts duplicates (duplicate_offer); first one wins
            if not storable(item.price):
                # The pipeline range-checks prices far more narrowly; this is the guard that
                # keeps one absurd value from failing the whole batch's transaction.
                self.unstorable.add(key)  # listed all the same: kept open, like unreadable
                log.warning("%s: price %r of %s is not storable; skipped", self.source,
                            item.price, item.key)
                continue
            self.items += 1
            i = index.get(key)
            if i is None:
                seen.add(key)  # the key object the state will hold: one per offer
                new.append((key, item))
                continue
            seen.add(current.keys[i])
            if (prices[i] != item.price or _AVAILABLE[available[i]] != item.available
                    or not active[i]):
                changed.append((i, item))
            else:
                digest = _details_of(item)
                if current.details[i] != digest or i in current.unreadable:
                    details.append((i, item, digest))
        if not (new or changed or details):
            return
        self._clean = False
        with self.engine.begin() as conn:
            if new:
                self._insert_new(conn, new)
            if changed:
                self._apply_changes(conn, changed)
            if details:  # rare: FX moved, stock count changed, specs corrected, readable again
                self._record_signals(conn, [(current.ids[i], item) for i, item, _ in details])
                self._index_by_changes = False
                conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
                    {**{f: bindparam(f) for f in DETAIL_FIELDS}, "unreadable_since": None}),
                    [{"_id": current.ids[i], **self._detail_values(item)}
                     for i, item, _ in details])
                for i, _, digest in details:
                    current.details[i] = digest
                    current.unreadable.pop(i, None)
        self._clean = True

    @staticmethod
    def _detail_values(item: PriceItem) -> dict[str, Any]:
        return dict(zip(DETAIL_FIELDS, _details(item), strict=True))

    @staticmethod
    def _change(offer_id: int, item: PriceItem) -> dict[str, Any]:
        return {"offer_id": offer_id, "at": epoch(item.observed_at),
                "price_micros": micros(item.price), "available": item.available}

    def _insert_new(self, conn, new: list[tuple[tuple, PriceItem]]) -> None:
        rows = [{"source": self.source, "region": i.region, "zone": i.zone,
                 "instance_type": i.instance_type, "pricing": i.pricing, "price": i.price,
                 "available": i.available, "first_seen": i.observed_at,
                 "changed_at": i.observed_at, "active": True, **self._detail_values(i)}
                for _, i in new]
        def change_rows(ids: list[int]) -> list[dict[str, Any]]:
            return [self._change(oid, i) for oid, (_, i) in zip(ids, new, strict=True)]

        if conn.dialect.name == "postgresql":
            ids = _insert_new_pg(conn, rows, change_rows)
        else:
            # Multi-row INSERT ... RETURNING ("insertmanyvalues"), a few statements per
            # batch. The ids are matched to the offers by key, not by order: asking for the
            # parameters' order makes SQLAlchemy insert one row per statement on SQLite.
            returned = conn.execute(
                insert(OFFER).returning(OFFER.c.id, *OFFER.c[OfferKey._fields]), rows).all()
            ids_by_key = {tuple(r[1:]): r[0] for r in returned}
            ids = [ids_by_key[key] for key, _ in new]
            # Integers and a flag (sqlite3 stores True as 1, as SQLAlchemy's Boolean does):
            # handed to the driver as they are, without SQLAlchemy's per-row parameter
            # processing, a third of the first crawl's storage time.
            conn.exec_driver_sql(
                f"INSERT INTO {CHANGE.name} (offer_id, at, price_micros, available) "
                "VALUES (?, ?, ?, ?)",
                [(oid, epoch(i.observed_at), micros(i.price), i.available)
                 for oid, (_, i) in zip(ids, new, strict=True)])
        for oid, (key, i) in zip(ids, new, strict=True):
            # The key tuple `seen` holds, not a copy: one per offer for a whole crawl.
            self.current.add(key, oid, _kept_price(i), i.available, True, _details_of(i))
        self.new_offers += len(new)
        self.changed_offer_ids.update(ids)
        self._record_signals(conn, [(oid, i) for oid, (_, i) in zip(ids, new, strict=True)],
                             new=True)

    def _apply_changes(self, conn, changed: list[tuple[int, PriceItem]]) -> None:
        ids = self.current.ids
        _record_changes(conn, [self._change(ids[i], item) for i, item in changed])
        conn.execute(_OBSERVED, [{"_id": ids[i], "_at": item.observed_at, "price": item.price,
              "available": item.available, **self._detail_values(item)}
             for i, item in changed])
        for i, item in changed:
            self.current.set_observed(i, _kept_price(item), item.available, _details_of(item))
            self.changed_offer_ids.add(ids[i])
        self.changed += len(changed)
        self._record_signals(conn, [(ids[i], item) for i, item in changed])

    def _record_signals(self, conn, offers: list[tuple[int, PriceItem]],
                        new: bool = False) -> None:
        """Store the interruption signals of offers whose row this crawl wrote (a changed
        signal always changes an offer's attributes): a change point only where band, rate,
        period or source differ from the offer's last one (storage.signals); an unknown
        signal is no change. The last ones are read once per crawl, when first needed."""
        current, rows = self.current, []
        for oid, item in offers:
            point = point_of(item.pricing, item.attributes)
            if point is None:
                continue
            if current.signals is None and not new:  # a new offer has no point yet
                current.signals = last_points(conn, self.source)
            if current.signals is None or current.signals.get(oid) != point.value:
                rows.append(point_row(oid, epoch(item.observed_at), point))
                if current.signals is not None:
                    current.signals[oid] = point.value
        if rows:
            record_points(conn, rows, new=new)

    # -- history from before the first crawl ----------------------------------------------
    def offer_keys(self) -> frozenset[tuple]:
        """The keys of every offer the source has stored (listed or not): a spider asks for
        history only for offers it has none of."""
        return frozenset(self.current.keys)

    def backfill(self, histories: Iterable[PriceHistory], refused: int = 0) -> Backfilled:
        """Store back-dated prices as change points at their own times, call after the
        crawl's observations are added. Only points older than the offer's first stored
        change point are written: live data always wins, and a second back-fill of the same
        offer writes nothing it already has (the key (offer, time) is never written twice).
        Consecutive equal prices are one change point. `first_seen` moves back to the oldest
        point; nothing is closed, and the offer's current price, `changed_at` and the
        market index's published points stay as they are. `refused`: points the pipeline
        did not pass (counted in the summary)."""
        done = Backfilled(refused=refused)
        wanted: dict[int, PriceHistory] = {}
        for h in histories:
            done.days = max(done.days, h.days)
            i = self.current.index.get(h.key)
            if i is not None and not self.refused:  # an offer this crawl did not store: none
                wanted[self.current.ids[i]] = h
        if wanted:
            with self.engine.begin() as conn:
                firsts = dict(conn.execute(
                    select(CHANGE.c.offer_id, func.min(CHANGE.c.at))
                    .where(CHANGE.c.offer_id.in_(list(wanted))).group_by(CHANGE.c.offer_id)
                ).all())
                rows: list[dict[str, Any]] = []
                oldest: list[dict[str, Any]] = []
                for oid, h in wanted.items():
                    first, last = firsts.get(oid), None
                    for at, price in sorted(h.points):
                        if first is not None and at >= first:
                            break
                        if (m := micros(price)) != last:
                            rows.append({"offer_id": oid, "at": at, "price_micros": m,
                                         "available": None})
                            last = m
                    if last is not None:
                        oldest.append({"_id": oid, "_at": datetime.fromtimestamp(
                            min(at for at, _ in h.points), UTC)})
                        done.types.add(h.key.instance_type)
                        done.regions.add(h.key.region)
                if rows:
                    ins = dialect_insert(conn.dialect.name, CHANGE)
                    conn.execute(ins.on_conflict_do_nothing(index_elements=["offer_id", "at"]),
                                 rows)
                    conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id"),
                                                     OFFER.c.first_seen > bindparam("_at"))
                                 .values(first_seen=bindparam("_at")), oldest)
                done.points = len(rows)
        self.backfilled = done
        return done

    # -- end of crawl -------------------------------------------------------------------
    def _refresh_statistics(self, before: int) -> None:
        """After a crawl that added many offers to a PostgreSQL database (a first crawl, a
        new source), renew the planner's statistics of the tables it wrote now, as
        PostgreSQL advises after a bulk load, rather than when autovacuum next looks (up to
        a minute later): until then the planner takes the tables for as small as they were,
        and the index update after the next crawl read 100,000 offers through a plan made
        for a few hundred (a sort on disk; issue #54). The threshold is autovacuum's own
        (10 % of the rows), counted over this source's offers, from 1,000 new ones."""
        if self.engine.dialect.name != "postgresql" or self.new_offers < max(
                ANALYZE_MIN_NEW, before // 10):
            return
        with self.engine.begin() as conn:
            conn.exec_driver_sql(f"ANALYZE {OFFER.name}, {CHANGE.name}")

    def _update_index(self) -> None:
        """Bring the market index up to date with what this crawl stored (or, failed, with
        its source's freshness), dated at the time its data describes (a replay: the capture).
        The crawl is already recorded: a failure here is logged and the next crawl's update
        catches up."""
        from gpuradar.storage.index import update_index

        if self.refused:  # nothing stored, no source's freshness moved
            return
        try:
            update_index(self.engine, self.observed_at, self.index_params, changed_ids=(
                self.changed_offer_ids if self._index_by_changes else None),
                memo=self.memory.index if self.memory is not None else None,
                clock=self.clock, source=self.source)
        except Exception as exc:  # noqa: BLE001 - the index never fails a stored crawl
            log.warning("%s: updating the market index failed: %s", self.source,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _shrink_baseline(self, conn) -> int | None:
        """Offers the source's last successful crawl before this one listed."""
        return conn.execute(
            select(CRAWL.c["items"]).where(CRAWL.c.source == self.source,
                                        CRAWL.c.status == CrawlStatus.OK,
                                        CRAWL.c.id < self.crawl_id)
            .order_by(CRAWL.c.id.desc()).limit(1)).scalar()

    def _drop_reported(self, conn) -> bool:
        """Whether the source's crawl before this one held missing offers (a drop it
        reported, which this crawl confirms)."""
        return bool(conn.execute(
            select(CRAWL.c.held).where(CRAWL.c.source == self.source,
                                       CRAWL_FINISHED, CRAWL.c.id < self.crawl_id)
            .order_by(CRAWL.c.id.desc()).limit(1)).scalar())

    def finish(self, status: str, *, error: str = "", dropped: Mapping[str, int] | None = None,
               unknown_gpus: Iterable[str] = (), unreadable: Iterable[tuple] = (),
               uncatalogued: Mapping[str, int] | None = None, rates: int = 0) -> CrawlSummary:
        """Record the outcome; only a clean ("ok") crawl closes offers it did not see, and
        never those in `unreadable` (keys of offers listed with a price that could not be
        read or believed) nor, unconfirmed, after a large drop (the shrink guard). `rates`:
        exchange rates stored by this crawl (the FX source), counted as its items. The
        decisions are gpuradar.core.outcome's (stored_outcome, shrink_hold): this reads the
        facts they need and writes what they decided, one step per method."""
        finished = self.clock.now()
        closed = held = 0
        current = self.current
        before = len(current.keys) - self.new_offers  # the offers stored before this crawl
        kept = self._kept_unreadable(unreadable)
        status, error = stored_outcome(
            CrawlStatus(status), error, refused=self.refused, stored=self.items,
            kept_unreadable=len(kept), listed_before=any(current.active))
        with self.engine.begin() as conn:
            self._flag_unreadable(conn, kept)
            gone = self._missing(kept)
            hold = self._hold(conn, status, listed=len(self.seen) + len(kept), gone=gone)
            if hold is not None:
                held = hold.held
                status, error = held_outcome(hold, error)
            elif status == CrawlStatus.OK and gone:
                closed = self._close(conn, gone)
            summary = CrawlSummary(
                crawl_id=self.crawl_id, source=self.source, status=status,
                items=self.items + rates, new_offers=self.new_offers, changed=self.changed,
                closed=closed, dropped=self._dropped(dropped),
                unknown_gpus=sorted(set(unknown_gpus)), error=error[:4000],
                duration_s=(finished - self.started_at).total_seconds(),
                changed_offer_ids=self.changed_offer_ids,
                uncatalogued=dict(sorted((uncatalogued or {}).items())), unreadable=len(kept),
                held=held, backfilled=self.backfilled,
            )
            self._record_outcome(conn, summary, finished)
        # (a crawl that wrote more than a quarter of a large source's offers, a first one
        # above all, records none: reading the source is then about as cheap, and the ids
        # are not kept in memory)
        few = len(self.changed_offer_ids) <= max(1000, len(current.keys) // 4)
        WRITTEN.get(self.engine)[self.source] = Written(
            self.crawl_id, self._after,
            frozenset(self.changed_offer_ids) if self._index_by_changes and few else None)
        del current
        self._release_state()
        self._refresh_statistics(before)
        self._update_index()
        log.info("%s crawl %s: %s, %d items, %d new, %d changed, %d closed", self.source,
                 self.crawl_id, status, summary.items, self.new_offers, self.changed, closed)
        if self.backfilled is not None:
            log.info("%s: %s", self.source, self.backfilled.line())
        return summary

    def _dropped(self, dropped: Mapping[str, int] | None) -> dict[str, int]:
        """The pipeline's drop counts, with the prices this writer found unstorable."""
        out = dict(dropped or {})
        if self.unstorable:
            out["unstorable_price"] = out.get("unstorable_price", 0) + len(self.unstorable)
        return out

    def _kept_unreadable(self, unreadable: Iterable[tuple]) -> list[int]:
        """The listed offers kept open with their last good price: listed with a price that
        could not be read or stored (a key read fine elsewhere in this crawl is not
        unreadable), and listed before."""
        current = self.current
        return [i for k in (set(unreadable) | self.unstorable) - self.seen
                if (i := current.index.get(k)) is not None and current.active[i]]

    def _flag_unreadable(self, conn, kept: list[int]) -> None:
        """Mark the kept offers not flagged yet as unreadable since this crawl's time."""
        current = self.current
        flag = [i for i in kept if i not in current.unreadable]
        if flag:
            conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
                unreadable_since=self.observed_at), [{"_id": current.ids[i]} for i in flag])
            for i in flag:
                current.unreadable[i] = self.observed_at

    def _missing(self, kept: list[int]) -> list[int]:
        """The offers listed before that this crawl did not see (nor kept as unreadable)."""
        current, seen, kept_set = self.current, self.seen, set(kept)
        return [i for i, k in enumerate(current.keys)
                if current.active[i] and k not in seen and i not in kept_set]

    def _hold(self, conn, status: str, listed: int, gone: list[int]) -> ShrinkHold | None:
        """The shrink guard's hold of a clean crawl that misses offers (None: close them):
        none when the crawl before reported the same drop, which this one confirms."""
        if status != CrawlStatus.OK or not gone or self.shrink_guard <= 0:
            return None
        hold = shrink_hold(listed=listed, gone=len(gone), guard=self.shrink_guard,
                           baseline=self._shrink_baseline(conn))
        if hold is not None and self._drop_reported(conn):
            log.info("%s: the drop to %d offers is confirmed (last successful crawl: %d); "
                     "closing the missing ones", self.source, listed, hold.baseline)
            return None
        return hold

    def _close(self, conn, gone: list[int]) -> int:
        """Close the offers a clean crawl did not list: a change point with no price, the
        offer row no longer active; the number closed."""
        current = self.current
        at = epoch(self.observed_at)
        gone_ids = [current.ids[i] for i in gone]
        _record_changes(conn, [{"offer_id": oid, "at": at, "price_micros": None,
                                "available": False} for oid in gone_ids])
        conn.execute(update(OFFER).where(OFFER.c.id == bindparam("_id")).values(
            active=False, available=False, changed_at=self.observed_at,
            available_count=None, unreadable_since=None),
            [{"_id": oid} for oid in gone_ids])
        self.changed_offer_ids.update(gone_ids)
        for i in gone:
            # Its details no longer matter: an offer listed again is a change, which
            # stores them anew.
            current.active[i], current.available[i] = 0, _available_code(False)
            current.unreadable.pop(i, None)
        return len(gone)

    def _record_outcome(self, conn, summary: CrawlSummary, finished: datetime) -> None:
        """The crawl's row: its outcome and counts."""
        conn.execute(update(CRAWL).where(CRAWL.c.id == self.crawl_id).values(
            finished_at=finished, status=summary.status, items=summary.items,
            new_offers=summary.new_offers, changed=summary.changed, closed=summary.closed,
            dropped=summary.dropped, unknown_gpus=summary.unknown_gpus, error=summary.error,
            duration_s=summary.duration_s, uncatalogued=summary.uncatalogued,
            held=summary.held))

    def _release_state(self) -> None:
        """The crawl is recorded: leave the offers' state for the service's next crawl of
        the source (when every write succeeded), and free what the index update can use
        (the keys, 100,000 for a large source, and the state unless kept)."""
        if self._clean and self.keep_state and self.memory is not None:
            self.memory.states[self._cache_key] = (self.crawl_id, self.current)
        self.seen = set()
        if not self.keep_state:
            self.current = _States()
