"""The one offer row the layers above storage read: alert rules and `recommend` alike.

A NamedTuple: fields by name for the code, a plain tuple in memory (the alert engine keeps
every live offer of a large market in the process, so the row must stay small).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, or_, select

from gpuradar.storage.models import OFFER


class OfferRow(NamedTuple):
    """One listed offer as stored: identity, specs, price (quoted, USD, USD per GPU-hour)."""

    id: int
    source: str
    region: str
    zone: str
    instance_type: str
    pricing: str
    gpu: str
    gpu_count: float
    gpu_memory_gb: float | None
    vcpus: float | None
    memory_gb: float | None
    price: float
    currency: str
    price_usd: float | None
    price_per_gpu_usd: float | None
    available: bool | None
    available_count: int | None
    url: str
    # Read only where needed (recommend: interconnect, spot signals); None otherwise.
    attributes: dict[str, Any] | None = None
    # Start of the source's last successful crawl (recommend fills it; alerts read the
    # source's health instead).
    observed_at: datetime | None = None


# Columns of the row, in order, without the optional tail.
COLUMNS = OfferRow._fields[:18]


def live_offers(engine: Engine, sources: Iterable[str] | None = None, *,
                include_unavailable: bool = False, with_attributes: bool = False
                ) -> list[OfferRow]:
    """Offers listed now (of some sources only, when given), not known to be unavailable
    unless `include_unavailable`; `attributes` only when asked for (they are the wide part
    of an offer). Repeated strings (source, region, GPU, ...) are shared between rows."""
    cols = [OFFER.c[c] for c in COLUMNS]
    if with_attributes:
        cols.append(OFFER.c.attributes)
    q = select(*cols).where(OFFER.c.active.is_(True))
    if not include_unavailable:
        q = q.where(or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)))
    if sources is not None:
        q = q.where(OFFER.c.source.in_(sorted(set(sources))))
    with engine.connect() as conn:
        fetched = conn.execute(q).fetchall()
    # region, zone, pricing, gpu, currency and source repeat across thousands of rows
    shared: dict[Any, Any] = {}
    one = shared.setdefault
    make = OfferRow._make
    return [make((r[0], one(r[1], r[1]), one(r[2], r[2]), one(r[3] or "", r[3] or ""), r[4],
                  one(r[5], r[5]), one(r[6], r[6]), r[7], r[8], r[9], r[10], r[11],
                  one(r[12], r[12]), r[13], r[14], r[15], r[16], r[17] or "",
                  r[18] if with_attributes else None, None))
            for r in fetched]


def with_observed_at(rows: Iterable[OfferRow], seen: dict[str, datetime]) -> list[OfferRow]:
    """Rows stamped with their source's last successful crawl (naive times read as UTC)."""
    out = []
    for row in rows:
        at = seen.get(row.source)
        if at is not None and at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        out.append(row._replace(observed_at=at))
    return out
