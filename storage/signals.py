"""Writing spot offers' interruption signals as change points (table interruption_change).

Signals change rarely (a Spot Advisor band moves every few weeks), so the crawl writer
looks at them only for the offers whose stored details changed anyway (a signal lives in an
offer's attributes, so a new band always changes them) and compares them with each offer's
last stored point, read once per crawl when first needed and kept with the offers' state.
Only a published interruption rate is stored: an unknown signal (nothing published, not
read, credentials missing) is no value, so it is never a row and never a change; Vast.ai's
host reliability is a per-host score read with every offer, not a published rate, and is
not stored as a series. `band_histories` reads the series back for many offers at once
(the web page's band history under each spot row).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from sqlalchemy import Engine, insert, select

from gpuradar.core.pricing import SPOT
from gpuradar.core.spot import AWS_ADVISOR
from gpuradar.storage.db import dialect_insert
from gpuradar.storage.models import OFFER, SIGNAL


class Point(NamedTuple):
    """One stored value of a signal: what makes a change (band, rate, period, source) and
    the day it describes (as_of, which alone is no change)."""

    band: str
    rate: float | None
    period: str | None
    source: str
    as_of: str | None

    @property
    def value(self) -> tuple[str, float | None, str | None, str]:
        return self.band, self.rate, self.period, self.source


def point_of(pricing: str, attributes: dict[str, Any] | None) -> Point | None:
    """The signal a spot offer's attributes carry as gpuradar.core.spot.signal_of reads it,
    or None when it carries no published interruption rate (unknown is not a value)."""
    if pricing != SPOT or not attributes:
        return None
    band = attributes.get("interruption")
    if not band:
        return None
    source = str(attributes.get("interruption_source") or AWS_ADVISOR)
    rate = attributes.get("interruption_rate")
    period = attributes.get("interruption_window")
    as_of = attributes.get("interruption_as_of")
    return Point(str(band)[:32],
                 float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool)
                 else None,
                 str(period)[:16] if period else None, source[:64],
                 str(as_of)[:10] if as_of else None)


def last_points(conn: Any, source: str) -> dict[int, tuple[str, float | None, str | None, str]]:
    """Each offer of `source`'s last stored signal value, by offer id (one query)."""
    q = (select(SIGNAL.c.offer_id, SIGNAL.c.band, SIGNAL.c.rate, SIGNAL.c.period,
                SIGNAL.c.source)
         .join(OFFER, OFFER.c.id == SIGNAL.c.offer_id).where(OFFER.c.source == source)
         .order_by(SIGNAL.c.offer_id, SIGNAL.c.at))
    return {oid: (band, rate, period, src) for oid, band, rate, period, src in conn.execute(q)}


_COLUMNS = ("offer_id", "at", "band", "rate", "period", "source", "as_of")


def record_points(conn: Any, rows: list[dict[str, Any]], new: bool = False) -> None:
    """Insert signal change points; a second change of one offer within the same second
    replaces the first (the later value is the one that held). `new`: the offers' first
    points (none can conflict), handed to the driver as they are on SQLite, as the first
    price points are (SQLAlchemy's per-row processing would cost a first crawl a fifth)."""
    if new and conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            f"INSERT INTO {SIGNAL.name} ({', '.join(_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [tuple(r[c] for c in _COLUMNS) for r in rows])
        return
    if new:
        conn.execute(insert(SIGNAL), rows)
        return
    ins = dialect_insert(conn.dialect.name, SIGNAL)
    conn.execute(ins.on_conflict_do_update(
        index_elements=["offer_id", "at"],
        set_={c: ins.excluded[c] for c in ("band", "rate", "period", "source", "as_of")}),
        rows)


def point_row(offer_id: int, at: int, point: Point) -> dict[str, Any]:
    return {"offer_id": offer_id, "at": at, **point._asdict()}


def band_histories(engine: Engine, offer_ids: Collection[int]
                   ) -> dict[int, list[tuple[int, str]]]:
    """Each of these offers' stored bands, oldest first, as (epoch seconds, band), in one
    query (a page lists dozens of offers); an offer with no stored point is absent."""
    out: dict[int, list[tuple[int, str]]] = {}
    if not offer_ids:
        return out
    q = (select(SIGNAL.c.offer_id, SIGNAL.c.at, SIGNAL.c.band)
         .where(SIGNAL.c.offer_id.in_(sorted(set(offer_ids))))
         .order_by(SIGNAL.c.offer_id, SIGNAL.c.at))
    with engine.connect() as conn:
        for oid, at, band in conn.execute(q):
            out.setdefault(oid, []).append((at, band))
    return out
