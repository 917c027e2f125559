"""The market index as a change-point series: updated after each crawl, read by the command
line, the JSON API, metrics, rules and exports.

`update_index` reads the offers that count (listed, not known to be unavailable, priced in
USD per GPU-hour, of a catalog model, from a fresh source), lets gpuradar.core.marketindex
compute the figures, and writes a row only for a (model, pricing) whose figures changed:
like offers' prices, the series grows with change, not with crawl frequency. A (model,
pricing) left without any fresh offer gets one row with no figures ("none from here on").
docs/index.md describes the method.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, func, or_, select, tuple_

from gpuradar.core import gpus as catalog
from gpuradar.core.marketindex import IndexFigure, IndexOffer, compute_index
from gpuradar.storage.db import dialect_insert, driver_rows
from gpuradar.storage.models import INDEX, OFFER

log = logging.getLogger(__name__)


#: A source is fresh while its last successful crawl started at most this long before the
#: index is computed and fewer than STALE_AFTER_FAILURES crawls have failed since: the
#: defaults of the alerts' `stale_after` and `stale_after_failures`.
MAX_AGE = timedelta(days=2)
STALE_AFTER_FAILURES = 3


@dataclass(frozen=True)
class Freshness:
    max_age: timedelta = MAX_AGE
    max_failures: int = STALE_AFTER_FAILURES


def _micros(value: float | None) -> int | None:
    return None if value is None else round(value * 1_000_000)


def _usd(value: int | None) -> float | None:
    return None if value is None else value / 1_000_000


def fresh_sources(engine: Engine, at: datetime, freshness: Freshness = Freshness()
                  ) -> set[str]:
    """Sources whose offers count in an index computed at `at`: judged by when their last
    successful crawl ran, so an index computed after a replay is the recorded market's."""
    from gpuradar.storage.alerts import source_health

    return {source for source, (last_ok, failures) in source_health(engine, by_run=True).items()
            if last_ok is not None and at - last_ok <= freshness.max_age
            and failures < freshness.max_failures}


def index_inputs(engine: Engine, at: datetime, freshness: Freshness = Freshness(),
                 fresh: Collection[str] | None = None,
                 groups: Collection[tuple[str, str]] | None = None) -> list[IndexOffer]:
    """The offers an index computed at `at` is made of (only those of `groups`, (model,
    pricing) pairs, when given; `fresh`: the fresh sources, when already known)."""
    if fresh is None:
        fresh = fresh_sources(engine, at, freshness)
    if not fresh:
        return []
    q = (select(OFFER.c.id, OFFER.c.gpu, OFFER.c.pricing, OFFER.c.source,
                OFFER.c.price_per_gpu_usd)
         .where(OFFER.c.active.is_(True), OFFER.c.price_per_gpu_usd.is_not(None),
                or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)),
                OFFER.c.source.in_(sorted(fresh))))
    if groups is None:
        q = q.where(OFFER.c.gpu.in_(sorted(catalog.CATALOG)))
    else:  # after a crawl: the few (model, pricing) pairs its changes touched
        q = q.where(tuple_(OFFER.c.gpu, OFFER.c.pricing).in_(
            sorted(g for g in groups if g[0] in catalog.CATALOG)))
    with engine.connect() as conn:
        # the driver's tuples, without SQLAlchemy's per-row processing: the columns are
        # plain integers, strings and floats, read after every crawl
        return list(map(IndexOffer._make, driver_rows(conn, q)))


def _groups_of(engine: Engine, ids: Collection[int]) -> set[tuple[str, str]]:
    """The (model, pricing) pairs of these offers, as stored now."""
    found: set[tuple[str, str]] = set()
    ordered = sorted(ids)
    with engine.connect() as conn:
        for i in range(0, len(ordered), 1000):
            q = (select(OFFER.c.gpu, OFFER.c.pricing).distinct()
                 .where(OFFER.c.id.in_(ordered[i:i + 1000])))
            found.update((r.gpu, r.pricing) for r in conn.execute(q))
    return found


#: database URL -> (the fresh sources, the index table's size and newest time) after this
#: process's last index update. While both are the same (no source became fresh or stale, no
#: other process wrote the index), an update after a crawl recomputes only the models its
#: changed offers belong to: no other offer's price, presence or freshness moved since.
_LAST: dict[str, tuple[frozenset[str], tuple[int, int | None]]] = {}


def _index_mark(engine: Engine) -> tuple[int, int | None]:
    with engine.connect() as conn:
        count, newest = conn.execute(select(func.count(), func.max(INDEX.c.at))).one()
    return int(count), newest


def _latest_rows(conn) -> dict[tuple[str, str], dict[str, Any]]:
    newest = (select(INDEX.c.gpu, INDEX.c.pricing, func.max(INDEX.c.at).label("at"))
              .group_by(INDEX.c.gpu, INDEX.c.pricing).subquery())
    q = select(INDEX).join(newest, and_(INDEX.c.gpu == newest.c.gpu,
                                        INDEX.c.pricing == newest.c.pricing,
                                        INDEX.c.at == newest.c.at))
    return {(r.gpu, r.pricing): dict(r._mapping) for r in conn.execute(q)}


def _row(gpu: str, pricing: str, at: int, figure: IndexFigure | None) -> dict[str, Any]:
    if figure is None:
        return {"gpu": gpu, "pricing": pricing, "at": at, "median_micros": None,
                "p10_micros": None, "p90_micros": None, "offers": 0, "providers": 0,
                "excluded": []}
    return {"gpu": gpu, "pricing": pricing, "at": at, "median_micros": _micros(figure.median),
            "p10_micros": _micros(figure.p10), "p90_micros": _micros(figure.p90),
            "offers": figure.offers, "providers": figure.providers,
            "excluded": list(figure.excluded)}


_COMPARED = ("median_micros", "p10_micros", "p90_micros", "offers", "providers", "excluded")


def update_index(engine: Engine, at: datetime | None = None,
                 freshness: Freshness = Freshness(),
                 changed_ids: Collection[int] | None = None) -> int:
    """Compute the index as of `at` (default now) and store the figures that changed; the
    number of change points written. A change point is never dated before the series' last
    one (crawls of two sources may finish out of order).

    `changed_ids`: the offers a crawl added, repriced, made (un)available or closed, when
    nothing else about its offers changed. If the fresh sources are those of this process's
    last update, only their models are recomputed (none: nothing is)."""
    at = at or datetime.now(UTC)
    fresh = frozenset(fresh_sources(engine, at, freshness))
    memo = str(engine.url)
    groups: set[tuple[str, str]] | None = None
    if changed_ids is not None and _LAST.get(memo) == (fresh, _index_mark(engine)):
        if not changed_ids:
            return 0
        groups = _groups_of(engine, changed_ids)
    figures = compute_index(index_inputs(engine, at, freshness, fresh, groups))
    stamp = int(at.timestamp())
    with engine.begin() as conn:
        latest = _latest_rows(conn)
        if groups is not None:
            latest = {k: v for k, v in latest.items() if k in groups}
        rows = []
        for key in sorted(figures.keys() | latest.keys()):
            last = latest.get(key)
            figure = figures.get(key)
            if figure is None and (last is None or last["offers"] == 0):
                continue
            row = _row(*key, max(stamp, last["at"]) if last else stamp, figure)
            if last is not None and all(row[c] == last[c] for c in _COMPARED):
                continue
            rows.append(row)
        if rows:
            ins = dialect_insert(conn.dialect.name, INDEX)
            conn.execute(ins.on_conflict_do_update(
                index_elements=["gpu", "pricing", "at"],
                set_={c: ins.excluded[c] for c in _COMPARED}), rows)
    _LAST[memo] = (fresh, _index_mark(engine))
    return len(rows)


# -- reads --------------------------------------------------------------------------------
def _figure(row: Any, until: int | None = None) -> dict[str, Any]:
    """A stored change point (a mapping) as USD figures and UTC times."""
    return {"gpu": row["gpu"], "pricing": row["pricing"],
            "since": datetime.fromtimestamp(row["at"], UTC),
            "until": datetime.fromtimestamp(until, UTC) if until is not None else None,
            "median": _usd(row["median_micros"]), "p10": _usd(row["p10_micros"]),
            "p90": _usd(row["p90_micros"]), "offers": row["offers"],
            "providers": row["providers"], "excluded": list(row["excluded"] or [])}


def _conditions(gpus: Sequence[str] | None, pricing: str | None) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if gpus:
        conds.append(INDEX.c.gpu.in_(list(gpus)))
    if pricing:
        conds.append(INDEX.c.pricing == pricing)
    return conds


def current_index(engine: Engine, gpus: Sequence[str] | None = None,
                  pricing: str | None = None) -> list[dict[str, Any]]:
    """The index of each model and pricing as it stands (those with fresh offers), by model
    then pricing: median, p10, p90 (USD per GPU-hour), offers, providers, the ids of the
    excluded offers and `since`, when these figures took effect."""
    with engine.connect() as conn:
        rows = _latest_rows(conn)
    out = []
    for key in sorted(rows):
        r = rows[key]
        if r["offers"] and (not gpus or key[0] in gpus) and (not pricing or key[1] == pricing):
            out.append(_figure(r))
    return out


def index_history(engine: Engine, gpus: Sequence[str] | None = None,
                  pricing: str | None = None, since: datetime | None = None,
                  until: datetime | None = None) -> list[dict[str, Any]]:
    """The index's change points, by model, pricing and time; each with `since` and `until`
    (None: still in force). With `since`, the change point in force at `since` is included;
    a change point with `offers` 0 has no figures (no fresh offer from then on)."""
    conds = _conditions(gpus, pricing)
    if until is not None:
        conds.append(INDEX.c.at <= int(until.timestamp()))
    q = select(INDEX).where(*conds).order_by(INDEX.c.gpu, INDEX.c.pricing, INDEX.c.at)
    with engine.connect() as conn:
        rows = conn.execute(q).fetchall()
    out = []
    for n, r in enumerate(rows):
        nxt = rows[n + 1] if n + 1 < len(rows) else None
        end = nxt.at if nxt is not None and (nxt.gpu, nxt.pricing) == (r.gpu, r.pricing) \
            else None
        if since is not None and end is not None and end <= since.timestamp():
            continue
        out.append(_figure(r._mapping, end))
    return out


def index_at(engine: Engine, gpu: str, pricing: str, at: datetime) -> dict[str, Any] | None:
    """The index of one model and pricing in force at `at`; None when it had none then."""
    q = (select(INDEX).where(INDEX.c.gpu == gpu, INDEX.c.pricing == pricing,
                             INDEX.c.at <= int(at.timestamp()))
         .order_by(INDEX.c.at.desc()).limit(1))
    with engine.connect() as conn:
        row = conn.execute(q).first()
    return _figure(row._mapping) if row is not None and row.offers else None


def excluded_offers(engine: Engine, ids: Sequence[int]) -> list[dict[str, Any]]:
    """The offers behind excluded ids (source, region, instance type, USD per GPU-hour)."""
    if not ids:
        return []
    cols = [OFFER.c[c] for c in ("id", "source", "region", "zone", "instance_type", "pricing",
                                 "gpu", "gpu_count", "price_per_gpu_usd")]
    with engine.connect() as conn:
        rows = conn.execute(select(*cols).where(OFFER.c.id.in_(list(ids)))
                            .order_by(OFFER.c.id)).fetchall()
    return [dict(r._mapping) for r in rows]


def index_series(engine: Engine, gpu: str, pricing: str, since: datetime, until: datetime,
                 buckets: int) -> list[tuple[datetime, float | None]]:
    """The median in force at the start of each of `buckets` equal slices of [since, until]
    (None: no index then), for a chart."""
    points = [p for p in index_history(engine, [gpu], pricing, since, until)
              if p["gpu"] == gpu]
    step = (until - since) / buckets
    out: list[tuple[datetime, float | None]] = []
    for i in range(buckets):
        t = since + step * i
        value = None
        for p in points:
            if p["since"] <= t + step and (p["until"] is None or p["until"] > t):
                value = p["median"]  # the last change point touching the slice wins
        out.append((t, value))
    return out
