"""The market index as a change-point series: updated after each crawl, read by the command
line, the JSON API, metrics, rules and exports.

`update_index` reads the offers that count (listed, not known to be unavailable, priced in
USD per GPU-hour, of a catalog model, from a source fresh at the crawl's data time), lets
gpuradar.core.marketindex (method v2) judge one vote per provider, and writes a point only for
a (model, pricing) whose figures, status or panel changed: the series grows with change, not
with crawl frequency. A point is dated at the time its data describes (a replay: its
capture), never revised: computed again for a time that already has a point, it is written
one second later as a correction naming the point it corrects. docs/index.md describes the
method and how to reproduce every point from an export.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Engine, Select, and_, func, or_, select, tuple_

from gpuradar.core import gpus as catalog
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.marketindex import (
    METHOD_VERSION,
    IndexFigure,
    IndexOffer,
    Params,
    Vote,
    compute_index,
    figure_of,
)
from gpuradar.storage.db import driver_rows
from gpuradar.storage.models import INDEX, OFFER

if TYPE_CHECKING:
    from gpuradar.core.config.sections import AlertsSection

log = logging.getLogger(__name__)


def params_from(section: AlertsSection | None) -> Params:
    """The method's parameters with the configured staleness (`alerts.stale_after`,
    `alerts.stale_after_failures`): the index calls a source stale exactly when rules and
    `sources` do."""
    from gpuradar.core.units import parse_duration

    if section is None:
        return Params()
    value = section.stale_after
    age = (None if value in (None, False, "never")
           else int(parse_duration(value).total_seconds()))
    return Params(stale_after_s=age, stale_after_failures=section.stale_after_failures)


def _micros(value: float | None) -> int | None:
    return None if value is None else round(value * 1_000_000)


def _usd(value: int | None) -> float | None:
    return None if value is None else value / 1_000_000


def fresh_sources(engine: Engine, at: datetime, params: Params = Params()) -> dict[str, int]:
    """Sources whose offers count in an index dated `at`, with the epoch seconds their data
    describes: the last successful crawl's data (a replay: its capture) lies within
    `stale_after` of `at`, either side (crawls of two sources overlap, replays come in any
    order), and fewer than `stale_after_failures` crawls of it failed since."""
    from gpuradar.storage.queries import source_health

    out = {}
    for source, (last_ok, failures) in source_health(engine).items():
        if last_ok is None or failures >= params.stale_after_failures:
            continue
        if params.stale_after_s is None or \
                abs((at - last_ok).total_seconds()) <= params.stale_after_s:
            out[source] = int(last_ok.timestamp())
    return out


def index_inputs(engine: Engine, at: datetime, params: Params = Params(),
                 fresh: Mapping[str, int] | None = None,
                 groups: Collection[tuple[str, str]] | None = None) -> list[IndexOffer]:
    """The offers an index dated `at` is made of (only those of `groups`, (model, pricing)
    pairs, when given; `fresh`: the fresh sources and their data times, when known)."""
    if fresh is None:
        fresh = fresh_sources(engine, at, params)
    if not fresh:
        return []
    q = (select(OFFER.c.id, OFFER.c.gpu, OFFER.c.pricing, OFFER.c.source,
                OFFER.c.price_per_gpu_usd).where(*_input_conditions(fresh)))
    if groups is not None:  # after a crawl: the (model, pricing) pairs its changes touched
        q = q.where(tuple_(OFFER.c.gpu, OFFER.c.pricing).in_(sorted(groups)))
    with engine.connect() as conn:
        # the driver's tuples, without SQLAlchemy's per-row processing: the columns are
        # plain integers, strings and floats
        return [IndexOffer(r[0], r[1], r[2], r[3], r[4], fresh[r[3]])
                for r in driver_rows(conn, q)]


def _input_conditions(fresh: Collection[str]) -> list[ColumnElement[bool]]:
    """The offers that count: listed, priced, not known unavailable, from a fresh source,
    of a catalog model."""
    return [OFFER.c.active.is_(True), OFFER.c.price_per_gpu_usd.is_not(None),
            or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)),
            OFFER.c.source.in_(sorted(fresh)), OFFER.c.gpu.in_(sorted(catalog.CATALOG))]


def cheapest_inputs(engine: Engine, at: datetime, params: Params = Params(),
                    fresh: Mapping[str, int] | None = None,
                    groups: Collection[tuple[str, str]] | None = None) -> list[IndexOffer]:
    """What index_inputs gives, reduced by the database to what the method's votes are made
    of: per (model, pricing) and source, its cheapest offer (ties: the lowest id) standing
    for all of them (`IndexOffer.offers`). The index is the same (a test holds it to a
    recompute from every offer); a crawl's update then reads a few hundred rows, not every
    offer of the models it touched, which was most of an ingest's time (issue #54). Two
    groupings on ix_offer_cheapest, not a window function: SQLite sorts for the window."""
    if fresh is None:
        fresh = fresh_sources(engine, at, params)
    if not fresh:
        return []
    return [_offer(r, fresh) for r in _cheapest_rows(engine, _cheapest_query(fresh, groups),
                                                     groups)]


#: One source's cheapest offer of one (model, pricing), as cheapest_inputs reads it: (offer
#: id, model, pricing, source, USD per GPU-hour, offers it stands for).
Cheapest = tuple[int, str, str, str, float, int]


def _cheapest_query(fresh: Collection[str], groups: Collection[tuple[str, str]] | None
                    ) -> Select[Any]:
    """cheapest_inputs' query: the cheapest offer of each (model, pricing) and source among
    `fresh` sources (of `groups`' models and pricings, when given)."""
    price, key = OFFER.c.price_per_gpu_usd, (OFFER.c.gpu, OFFER.c.pricing, OFFER.c.source)
    # a positive, finite price (compute_index's own guard, here in the query: NaN and
    # infinity are above every bound on PostgreSQL)
    conds = [*_input_conditions(fresh), price > 0, price < math.inf]
    if groups is not None:
        # the models and pricings of `groups`, each a list (PostgreSQL turns a list of
        # pairs into one OR per pair, tested on every row); pairs outside `groups` are
        # whole groups too, left out below
        conds += [OFFER.c.gpu.in_(sorted({g for g, _ in groups})),
                  OFFER.c.pricing.in_(sorted({p for _, p in groups}))]
    best = (select(*key, func.count().label("offers"), func.min(price).label("price"))
            .where(*conds).group_by(*key).subquery())
    return (select(func.min(OFFER.c.id), best.c.gpu, best.c.pricing, best.c.source,
                   best.c.price, best.c.offers)
            .join_from(best, OFFER, and_(OFFER.c.gpu == best.c.gpu,
                                         OFFER.c.pricing == best.c.pricing,
                                         OFFER.c.source == best.c.source,
                                         price == best.c.price))
            .where(OFFER.c.active.is_(True),
                   or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)))
            .group_by(best.c.gpu, best.c.pricing, best.c.source, best.c.price, best.c.offers))


def _cheapest_after_crawl(engine: Engine, fresh: Mapping[str, int],
                          groups: Collection[tuple[str, str]], source: str,
                          kept: Mapping[tuple[str, str, str], Cheapest]
                          ) -> tuple[list[IndexOffer], list[Cheapest]]:
    """cheapest_inputs of `groups` after a crawl of `source`: its offers read again, every
    other fresh source's cheapest as remembered (`kept`); and the rows read."""
    read = (_cheapest_rows(engine, _cheapest_query([source], groups), groups)
            if source in fresh else [])
    rows = [r for k, r in kept.items()
            if k[2] != source and k[2] in fresh and (k[0], k[1]) in groups] + read
    return [_offer(r, fresh) for r in sorted(rows, key=lambda r: (r[1], r[2], r[3]))], read


def _offer(row: Cheapest, fresh: Mapping[str, int]) -> IndexOffer:
    """A source's cheapest offer as the index's input, dated at its source's data time."""
    return IndexOffer(row[0], row[1], row[2], row[3], row[4], fresh[row[3]], row[5])


def _cheapest_rows(engine: Engine, q: Select[Any],
                   groups: Collection[tuple[str, str]] | None) -> list[Cheapest]:
    with engine.connect() as conn:
        return [tuple(r) for r in driver_rows(conn, q)
                if groups is None or (r[1], r[2]) in groups]


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


class IndexMemo:
    """What one writer of the index (a crawl service, a test) remembers of its last update:
    per database URL, the fresh sources, the index table's size and newest time, and each
    fresh source's cheapest offer per (model, pricing). While the first two are the same (no
    source became fresh or stale, no other process wrote the index), an update after a
    crawl recomputes only the models its changed offers belong to (and those with a jump
    awaiting confirmation), reading only the crawled source's offers again: the other
    sources' votes are those remembered (a crawl changes its own source's offers alone).
    Owned by its writer, so a new one (a new service, a test) starts from nothing, and the
    next full recompute proves the memo right or discards it."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[frozenset[str], tuple[int, int | None]]] = {}
        self._cheapest: dict[str, dict[tuple[str, str, str], Cheapest]] = {}

    def unchanged(self, url: str, fresh: frozenset[str], mark: tuple[int, int | None]) -> bool:
        return self._last.get(url) == (fresh, mark)

    def remember(self, url: str, fresh: frozenset[str], mark: tuple[int, int | None]) -> None:
        self._last[url] = (fresh, mark)

    def forget(self, url: str) -> None:
        """Trust nothing remembered of `url` until an update is stored (the next update
        recomputes every model): one is under way, and may fail."""
        self._last.pop(url, None)

    def cheapest(self, url: str) -> dict[tuple[str, str, str], Cheapest] | None:
        """The cheapest offers remembered for `url` (None: none; trust them only while
        `unchanged`)."""
        return self._cheapest.get(url)

    def keep_cheapest(self, url: str, rows: list[Cheapest],
                      groups: Collection[tuple[str, str]] | None = None,
                      source: str | None = None) -> None:
        """Remember `rows`, read for `groups` (None: every one) of `source` (None: every
        source), in place of what was remembered of those. Rows of some groups alone
        are remembered only over a whole read: never taken for all there is."""
        if groups is None:
            self._cheapest[url] = {(r[1], r[2], r[3]): r for r in rows}
            return
        kept = self._cheapest.get(url)
        if kept is None:
            return
        for k in [k for k in kept if (k[0], k[1]) in groups
                  and (source is None or k[2] == source)]:
            del kept[k]
        kept.update(((r[1], r[2], r[3]), r) for r in rows)


def _index_mark(engine: Engine) -> tuple[int, int | None]:
    with engine.connect() as conn:
        count, newest = conn.execute(select(func.count(), func.max(INDEX.c.published))).one()
    return int(count), newest


def _rows_in_force(conn, at: int | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Each (model, pricing)'s point in force at `at` (None: its newest)."""
    latest = select(INDEX.c.gpu, INDEX.c.pricing, func.max(INDEX.c.at).label("at"))
    if at is not None:  # a correction of a time up to `at` is in force at `at`
        latest = latest.where(or_(INDEX.c.at <= at, INDEX.c.corrects <= at))
    newest = latest.group_by(INDEX.c.gpu, INDEX.c.pricing).subquery()
    q = select(INDEX).join(newest, and_(INDEX.c.gpu == newest.c.gpu,
                                        INDEX.c.pricing == newest.c.pricing,
                                        INDEX.c.at == newest.c.at))
    return {(r.gpu, r.pricing): dict(r._mapping) for r in conn.execute(q)}


def votes_of(row: Mapping[str, Any]) -> dict[str, Vote]:
    """A stored point's votes by source (a v1 point has none)."""
    return {v["source"]: Vote(**v) for v in row.get("panel") or []}


def _panel(votes: Sequence[Vote]) -> list[dict[str, Any]]:
    return [v.as_dict() for v in votes]


def _compared(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a point differ from the one in force: not its votes' `observed` (a crawl
    that changes nothing writes nothing)."""
    panel = [{k: v for k, v in vote.items() if k != "observed"} for vote in row["panel"] or []]
    return (row["method"], row["status"], row["median_micros"], row["p10_micros"],
            row["p90_micros"], row["digest"], panel)


def _row(gpu: str, pricing: str, at: int, figure: IndexFigure | None, params: Params,
         published: int) -> dict[str, Any]:
    if figure is None:  # no fresh offer: a point without figures, its digest of no votes
        figure = figure_of(gpu, pricing, (), params)
    return {"gpu": gpu, "pricing": pricing, "at": at, "median_micros": _micros(figure.median),
            "p10_micros": _micros(figure.p10), "p90_micros": _micros(figure.p90),
            "offers": figure.offers, "providers": figure.providers,
            "excluded": sorted(v.offer_id for v in figure.excluded),
            "method": METHOD_VERSION, "status": figure.status, "params": params.as_dict(),
            "panel": _panel(figure.panel), "digest": figure.digest, "published": published,
            "corrects": None}


def update_index(engine: Engine, at: datetime | None = None, params: Params = Params(),
                 changed_ids: Collection[int] | None = None, memo: IndexMemo | None = None,
                 clock: Clock = SYSTEM, source: str | None = None) -> int:
    """Compute the index dated `at` (the time the crawl's data describes; default now) and
    store the points that changed; the number written. A point is never revised: when one
    already exists at `at`, the new one is dated at the next free second and `corrects` it.

    `changed_ids`: the offers a crawl added, repriced, made (un)available or closed, when
    nothing else about its offers changed. If the fresh sources are those `memo` holds of its
    owner's last update, only their models are recomputed (and any awaiting a jump's
    confirmation); without a memo, every model is. `source`: the source whose crawl made
    those changes (they are its offers'): then only its offers are read again, the other
    sources' cheapest are the memo's. `clock`: the time a point is published (and `at` when
    not given)."""
    at = at or clock.now()
    fresh = fresh_sources(engine, at, params)
    url = str(engine.url)
    stamp = int(at.timestamp())
    groups: set[tuple[str, str]] | None = None
    kept = None
    with engine.connect() as conn:
        in_force = _rows_in_force(conn, stamp)
    if changed_ids is not None and memo is not None and memo.unchanged(
            url, frozenset(fresh), _index_mark(engine)):
        waiting = {k for k, r in in_force.items()
                   if any(v.get("reason") == "unconfirmed jump" for v in r["panel"] or [])}
        groups = _groups_of(engine, changed_ids) | waiting if changed_ids else waiting
        if not groups:
            return 0
        kept = memo.cheapest(url) if source is not None else None
    if memo is not None:
        memo.forget(url)
    previous = {k: votes_of(r) for k, r in in_force.items()}
    if kept is not None and groups is not None and source is not None:
        inputs, read = _cheapest_after_crawl(engine, fresh, groups, source, kept)
    else:
        source = None  # every source's offers read
        inputs = cheapest_inputs(engine, at, params, fresh, groups)
        read = [(o.offer_id, o.gpu, o.pricing, o.source, o.usd_per_gpu_hour, o.offers)
                for o in inputs]
    figures = compute_index(inputs, params, previous)
    published = int(clock.now().timestamp())
    if groups is not None:
        in_force = {k: v for k, v in in_force.items() if k in groups}
    rows = []
    for key in sorted(figures.keys() | in_force.keys()):
        last = in_force.get(key)
        figure = figures.get(key)
        if figure is None and (last is None or last["status"] == "none"):
            continue
        row = _row(*key, stamp, figure, params, published)
        if last is not None and _compared(row) == _compared(last):
            continue
        rows.append(row)
    with engine.begin() as conn:
        if rows:
            taken = {(r.gpu, r.pricing, r.at) for r in conn.execute(
                select(INDEX.c.gpu, INDEX.c.pricing, INDEX.c.at).where(
                    INDEX.c.at >= stamp,
                    tuple_(INDEX.c.gpu, INDEX.c.pricing).in_(
                        sorted({(r["gpu"], r["pricing"]) for r in rows}))))}
            for row in rows:
                while (row["gpu"], row["pricing"], row["at"]) in taken:
                    row["corrects"] = stamp
                    row["at"] += 1
            conn.execute(INDEX.insert(), rows)
    if memo is not None:
        memo.remember(url, frozenset(fresh), _index_mark(engine))
        memo.keep_cheapest(url, read, groups, source)
    return len(rows)


# -- reads --------------------------------------------------------------------------------
VOTE_KEYS = ("source", "offer_id", "price", "offers", "observed", "ref", "reason")


def _excluded(row: Any) -> list[dict[str, Any]]:
    """The votes the screens left out, one shape for every point (a v1 point stored only
    its outliers' offer ids)."""
    if row["panel"]:
        return [v for v in row["panel"] if v["reason"]]
    return [{**dict.fromkeys(VOTE_KEYS), "offer_id": i, "reason": "outlier"}
            for i in row["excluded"] or []]


def _time(epoch: int | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _figure(row: Any, until: int | None = None) -> dict[str, Any]:
    """A stored point (a mapping) as USD figures and UTC times, with what made it."""
    return {"gpu": row["gpu"], "pricing": row["pricing"], "since": _time(row["at"]),
            "until": _time(until), "status": row["status"],
            "median": _usd(row["median_micros"]), "p10": _usd(row["p10_micros"]),
            "p90": _usd(row["p90_micros"]), "offers": row["offers"],
            "providers": row["providers"], "excluded": _excluded(row),
            "panel": list(row["panel"] or []), "method": row["method"],
            "params": dict(row["params"] or {}), "digest": row["digest"] or None,
            "published": _time(row["published"]), "corrects": _time(row["corrects"])}


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
    then pricing: status (market, or thin: fewer providers than the minimum panel), median,
    p10, p90 (USD per GPU-hour), offers, providers, the panel and excluded votes, and
    `since`, when these figures took effect."""
    with engine.connect() as conn:
        rows = _rows_in_force(conn)
    out = []
    for key in sorted(rows):
        r = rows[key]
        if r["status"] != "none" and (not gpus or key[0] in gpus) \
                and (not pricing or key[1] == pricing):
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
    return _figure(row._mapping) if row is not None and row.status != "none" else None


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


#: The fixed cadences beside the change points: each hour's and each UTC day's close.
CADENCES = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
#: Closes per model and pricing one read may ask for (a year of hours).
MAX_CLOSES = 9000
#: The fields of a close, in order (the JSON API's IndexClose, Store.index_closes).
CLOSE_FIELDS = ("gpu", "pricing", "at", "status", "median", "p10", "p90", "providers", "point",
                "digest")


def index_closes(engine: Engine, gpus: Sequence[str] | None, pricing: str | None,
                 since: datetime, until: datetime, cadence: str) -> list[dict[str, Any]]:
    """The index at a fixed cadence beside its change points: for each (model, pricing)
    with points and each close `at` (every whole hour, or every UTC midnight: the day
    before's close) in (since, until], the point in force just before `at`, or a **gap**
    (status `gap`, no figures): no point yet, a point without an index, or one whose newest
    kept vote's data is older than its `stale_after` at `at` (no crawl came to say so)."""
    step = CADENCES[cadence]
    seconds = int(step.total_seconds())
    first = (int(since.timestamp()) // seconds + 1) * seconds
    closes = range(first, int(until.timestamp()) + 1, seconds)
    if len(closes) > MAX_CLOSES:
        adjective = {"hour": "hourly", "day": "daily"}[cadence]
        raise ValueError(f"{len(closes):,} {adjective} closes asked for; at most {MAX_CLOSES}: "
                         "a shorter window")
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in index_history(engine, gpus, pricing, since, until):
        by_key.setdefault((p["gpu"], p["pricing"]), []).append(p)
    out = []
    for (gpu, pricing_), points in sorted(by_key.items()):
        n = -1
        for at in closes:
            while n + 1 < len(points) and points[n + 1]["since"].timestamp() < at:
                n += 1
            held = points[n] if n >= 0 else None
            row: dict[str, Any] = {**dict.fromkeys(CLOSE_FIELDS), "gpu": gpu,
                                   "pricing": pricing_, "at": datetime.fromtimestamp(at, UTC),
                                   "status": "gap", "providers": 0}
            if held is not None and held["status"] != "none" and not _stale(held, at):
                row.update(status=held["status"], median=held["median"], p10=held["p10"],
                           p90=held["p90"], providers=held["providers"],
                           point=held["since"], digest=held["digest"])
            out.append(row)
    return out


def _stale(point: Mapping[str, Any], at: int) -> bool:
    """Whether a point's data is older at `at` than its own staleness allows (a method 1
    point records neither: never)."""
    limit = (point["params"] or {}).get("stale_after_s")
    seen = [v["observed"] for v in point["panel"] if not v["reason"] and v["observed"]]
    return limit is not None and bool(seen) and at - max(seen) > limit
