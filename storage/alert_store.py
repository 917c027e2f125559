"""Reads and writes of alert state and the notification outbox.

Rule evaluation reads everything it needs in a few queries (offers once, source health once,
alert state once) and writes all its changes in one transaction, so a notification is in the
outbox exactly when the state change it reports is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Engine,
    Select,
    Table,
    TypeDecorator,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from gpuradar.core.pricing import SPOT
from gpuradar.storage.db import driver_rows
from gpuradar.storage.models import CRAWL, OFFER, OUTBOX, STATE
from gpuradar.storage.offers import COLUMNS, OfferRow
from gpuradar.storage.queries import newest_crawl_ids


def _aware(ts: datetime | None) -> datetime | None:
    if ts is not None and ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts


# -- evaluation inputs -------------------------------------------------------------------
def crawl_versions(engine: Engine) -> dict[str, tuple[int, str]]:
    """source -> (id, status) of its latest crawl: changes whenever its offers may have."""
    q = (select(CRAWL.c.source, CRAWL.c.id, CRAWL.c.status)
         .where(CRAWL.c.id.in_(newest_crawl_ids())))
    with engine.connect() as conn:
        return {source: (cid, status) for source, cid, status in conn.execute(q)}


# An offer's identity never changes while it is stored (its key: source, region, zone,
# instance type, pricing); these columns may, at any crawl of its source.
KEY_COLUMNS = ("source", "region", "zone", "instance_type", "pricing")
VALUE_COLUMNS = tuple(c for c in COLUMNS if c not in KEY_COLUMNS)  # "id" first


def _listed(q: Select[Any]) -> Select[Any]:
    """Offers listed now and not known to be unavailable: what a rule can match."""
    return q.where(OFFER.c.active.is_(True),
                   or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)))


def offer_values(engine: Engine, sources: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    """(id, *the columns that may change) of the listed offers of `sources`, in
    VALUE_COLUMNS' order: what an evaluation compares with the offers it holds, to find the
    few a crawl changed without building every row again."""
    q = _listed(select(*OFFER.c[VALUE_COLUMNS])).where(
        OFFER.c.source.in_(sorted(set(sources))))
    with engine.connect() as conn:
        yield from driver_rows(conn, q)


def spot_attributes(engine: Engine, sources: Iterable[str] | None = None
                    ) -> dict[int, dict[str, Any]]:
    """id -> attributes of the listed spot offers (of `sources`, None: all): where their
    interruption signal is (gpuradar.core.spot), for the rules that ask for one."""
    q = _listed(select(OFFER.c.id, OFFER.c.attributes)).where(OFFER.c.pricing == SPOT)
    if sources is not None:
        q = q.where(OFFER.c.source.in_(sorted(set(sources))))
    with engine.connect() as conn:
        return {oid: attrs or {} for oid, attrs in conn.execute(q)}


def offer_rows(engine: Engine, ids: Iterable[int] | None = None) -> list[OfferRow]:
    """The listed offers with these ids (None: every listed offer) as OfferRow, without
    attributes; strings that repeat (source, region, GPU, ...) shared between rows."""
    shared: dict[Any, Any] = {}
    one = shared.setdefault
    new = tuple.__new__  # OfferRow._make without its Python call and length check per row
    with engine.connect() as conn:
        if ids is None:
            rows = driver_rows(conn, _listed(select(*OFFER.c[COLUMNS])))
        else:
            # By primary key alone, whether listed is checked here: with the conditions in
            # the query, SQLite scans an index of every listed offer instead.
            wanted = sorted(set(ids))
            rows = (r[:18] for at in range(0, len(wanted), 5000)  # a statement's parameters
                    for r in driver_rows(conn, select(*OFFER.c[COLUMNS], OFFER.c.active)
                                         .where(OFFER.c.id.in_(wanted[at:at + 5000])))
                    if r[18] and r[15] != 0)  # not known unavailable: 0 or False
        # (unpacked by name rather than indexed 18 times: 100,000 rows at a first read)
        return [new(OfferRow, (oid, one(source, source), one(region, region),
                               one(zone or "", zone or ""), itype, one(pricing, pricing),
                               one(gpu, gpu), count, memory, vcpus, ram, price,
                               one(currency, currency), usd, per_gpu_usd,
                               None if available is None else bool(available), available_count,
                               url or "", None, None))
                for (oid, source, region, zone, itype, pricing, gpu, count, memory, vcpus, ram,
                     price, currency, usd, per_gpu_usd, available, available_count, url)
                in rows]


def offer_history(engine: Engine, gpus: Iterable[str] | None,
                  since: datetime) -> list[dict[str, Any]]:
    """Spans overlapping [since, now] with their offer's identity and specs (for drop rules);
    `gpus` None means every GPU. (History is stored as change points: see
    storage.queries.gpu_spans.)"""
    from gpuradar.storage.queries import gpu_spans

    return gpu_spans(engine, None if gpus is None else sorted(set(gpus)), since)


# -- alert state -------------------------------------------------------------------------
def state_stamp(engine: Engine) -> tuple[int, Any]:
    """(rows, latest update) of the alert state: changes whenever any process writes it, so
    a process keeping the state in memory knows when to read it again."""
    q = select(func.count(), func.max(STATE.c.updated_at)).select_from(STATE)
    with engine.connect() as conn:
        n, latest = conn.execute(q).one()
    return int(n), _aware(latest)


def load_states(engine: Engine) -> dict[str, dict[str, Any]]:
    """Every alert's stored state, by key (times as UTC)."""
    out = {}
    with engine.connect() as conn:
        for r in conn.execute(select(STATE)):
            row = dict(r._mapping)
            for k in ("pending_since", "fired_at", "resolved_at", "last_notified_at",
                      "updated_at"):
                row[k] = _aware(row[k])
            out[row["key"]] = row
    return out


def save_evaluation(engine: Engine, *, inserts: Sequence[dict[str, Any]],
                    updates: Sequence[dict[str, Any]], deletes: Sequence[str],
                    notifications: Sequence[dict[str, Any]]) -> None:
    """Store state changes and the notifications they cause in ONE transaction."""
    if not (inserts or updates or deletes or notifications):
        return
    with engine.begin() as conn:
        if deletes:
            conn.execute(delete(STATE).where(STATE.c.key.in_(list(deletes))))
        if inserts:
            insert_many(conn, STATE, inserts)
        # Group updates by their column set: one executemany per shape.
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in updates:
            cols = tuple(sorted(k for k in row if k != "key"))
            shapes.setdefault(cols, []).append({**{k: row[k] for k in cols}, "_key": row["key"]})
        for cols, rows in shapes.items():
            conn.execute(update(STATE).where(STATE.c.key == bindparam("_key"))
                         .values({c: bindparam(c) for c in cols}), rows)
        if notifications:
            insert_many(conn, OUTBOX, notifications)


def insert_many(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows (every one with the keys of the first) with one executemany of the
    driver. SQLAlchemy's executemany builds and type-converts each row's parameters one by
    one (most of the time of storing 10,000 new alert states); here each column's converter
    is looked up once, and a value repeated down a column (the evaluation's time, in
    several columns of every row) converted once."""
    dialect = conn.dialect
    names = list(rows[0])
    compiled = insert(table).inline().compile(dialect=dialect, column_keys=names)
    order = list(compiled.positiontup or ()) if compiled.positional else list(
        compiled.binds)
    keys = rows[0].keys()
    if not set(order) <= keys or any(row.keys() != keys for row in rows):
        # Rows that leave a column to its default (or differ): SQLAlchemy fills them in.
        conn.execute(insert(table), list(rows))
        return
    # Column by column, each column's values converted in one pass, then zipped into rows:
    # a Python step per value fewer than row by row (18 columns of 10,000 new alert
    # states at a process's first evaluation).
    columns: list[list[Any]] = []
    for name in order:
        kind = table.c[name].type
        convert = kind.dialect_impl(dialect).bind_processor(dialect)
        base = kind.impl if isinstance(kind, TypeDecorator) else kind
        values = [row[name] for row in rows]
        if convert is None:
            pass
        elif not isinstance(base, DateTime):
            values = [None if v is None else convert(v) for v in values]
        else:  # a time repeats down its column: converted once per instant and zone
            seen: dict[Any, Any] = {}
            for i, v in enumerate(values):
                if v is not None:
                    key = (v, v.tzinfo)
                    hit = seen.get(key)
                    values[i] = seen[key] = convert(v) if hit is None else hit
        columns.append(values)
    rows_out = zip(*columns, strict=True)
    params: list[Any] = (list(rows_out) if compiled.positional
                         else [dict(zip(order, values, strict=True)) for values in rows_out])
    conn.exec_driver_sql(compiled.string, params)


def firing_count(engine: Engine) -> int:
    """Rules firing now (the Prometheus gauge); stale-source alerts are not rules."""
    q = select(func.count()).select_from(STATE).where(STATE.c.state == "firing",
                                                      STATE.c.kind == "rule")
    with engine.connect() as conn:
        return int(conn.execute(q).scalar_one())


def alert_rows(engine: Engine, include_inactive: bool = False) -> list[dict[str, Any]]:
    """Alerts as stored: firing, pending and failing ones (or all of them)."""
    q = select(STATE)
    if not include_inactive:
        q = q.where(STATE.c.state.in_(("firing", "pending", "error")))
    q = q.order_by(STATE.c.kind.desc(), STATE.c.state, STATE.c.name)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q)]


# -- outbox ------------------------------------------------------------------------------
def outbox_backlog(engine: Engine) -> int:
    """Notifications not yet delivered (waiting or being retried)."""
    q = select(func.count()).select_from(OUTBOX).where(OUTBOX.c.status == "pending")
    with engine.connect() as conn:
        return int(conn.execute(q).scalar_one())


#: Notifications that announce an alert (a resolution or recovery reports on them).
ANNOUNCING = ("firing", "improved", "repeat", "stale")


def announced_to(engine: Engine, alert_key: str, since: datetime | None) -> set[str]:
    """The targets an alert was announced to since it fired (`since`): a notice queued
    then and not given up on (sent, or still pending). Only they hear of its end."""
    q = (select(OUTBOX.c.target).distinct()
         .where(OUTBOX.c.alert_key == alert_key, OUTBOX.c.kind.in_(ANNOUNCING),
                OUTBOX.c.status != "failed"))
    if since is not None:
        q = q.where(OUTBOX.c.created_at >= since)
    with engine.connect() as conn:
        return set(conn.execute(q).scalars())


def due_notifications(engine: Engine, now: datetime, limit: int = 100) -> list[dict[str, Any]]:
    """Pending notifications whose next attempt is due, oldest first."""
    q = (select(OUTBOX).where(OUTBOX.c.status == "pending", OUTBOX.c.next_attempt_at <= now)
         .order_by(OUTBOX.c.id).limit(limit))
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q)]


def claim_notification(engine: Engine, notification_id: int, due_at: datetime,
                       until: datetime) -> bool:
    """Reserve a pending row for one send: its next attempt moves to `until`, so no other
    replica finds it due meanwhile. True only for the caller that finds the row as it read
    it (`due_at`); a replica that took the row over since then leaves it alone."""
    with engine.begin() as conn:
        res = conn.execute(update(OUTBOX).where(
            OUTBOX.c.id == notification_id, OUTBOX.c.status == "pending",
            OUTBOX.c.next_attempt_at == due_at).values(next_attempt_at=until))
        return res.rowcount == 1


def record_attempt(engine: Engine, notification_id: int, **values: Any) -> None:
    """Store the outcome of one delivery attempt (status, attempts, error, next try) on a
    row still pending: a late attempt (a replica that lost the leader lock meanwhile) never
    overwrites what the leader recorded."""
    with engine.begin() as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id == notification_id,
                                          OUTBOX.c.status == "pending").values(**values))


def notification_log(engine: Engine, limit: int = 50,
                     status: str | None = None) -> list[dict[str, Any]]:
    """The newest notifications with their delivery outcome."""
    q = select(OUTBOX.c.id, OUTBOX.c.created_at, OUTBOX.c.alert_key, OUTBOX.c.kind,
               OUTBOX.c.target, OUTBOX.c.channel, OUTBOX.c.title, OUTBOX.c.status,
               OUTBOX.c.attempts, OUTBOX.c.next_attempt_at, OUTBOX.c.last_error,
               OUTBOX.c.sent_at)
    if status:
        q = q.where(OUTBOX.c.status == status)
    q = q.order_by(OUTBOX.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q)]
