"""The store as data: the reads behind the read-only interfaces (the JSON API, the Python
API `gpuradar.open`, exports). Every answer is plain values (str, numbers, bools, None,
UTC datetimes, lists, dicts), in a stable order, with no secret: nothing here reads the
configuration, and crawl errors are cut to their first line as everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from gpuradar.core import gpus as catalog
from gpuradar.core.pricing import PRICINGS, SPOT
from gpuradar.core.spot import offer_signal
from gpuradar.storage.models import CRAWL, OFFER


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a record as every interface carries it. `kind`: int, count (an integer
    when whole, as 8 GPUs; fractional only for a shared GPU), float, str, bool, time (UTC),
    json."""

    name: str
    kind: str
    nullable: bool = False
    description: str = ""
    choices: tuple[str, ...] = ()


#: An offer's fields, stated once: `prices --json`/`--csv`, the JSON API (its OpenAPI
#: schema), the Python API's `Offer` and the export's offers table carry exactly these, in
#: this order, with these kinds.
OFFER_SCHEMA = (
    Field("id", "int"), Field("source", "str"), Field("region", "str"),
    Field("zone", "str", description="empty when the provider names none"),
    Field("instance_type", "str"),
    Field("pricing", "str", description="how it is sold: on-demand, spot or a reservation "
          "kind (core.pricing)", choices=PRICINGS),
    Field("gpu", "str", description="catalog model, or the raw name a source reported when "
          "the catalog does not know it"),
    Field("gpu_count", "count", description="accelerators in the offer"),
    Field("gpu_memory_gb", "float", True), Field("vcpus", "count", True),
    Field("memory_gb", "float", True),
    Field("price", "float", description="the whole offer per hour, in `currency`"),
    Field("currency", "str"), Field("price_usd", "float", True),
    Field("price_per_gpu_usd", "float", True), Field("available", "bool", True),
    Field("available_count", "int", True), Field("active", "bool"),
    Field("first_seen", "time"), Field("changed_at", "time"),
    Field("observed_at", "time", description="the time the source's data describes: its "
          "last successful crawl, a replayed recording's capture"),
    Field("replayed", "bool", description="the source's data was replayed from a recording"),
    Field("captured", "str", True, "the recording's capture date, as its provenance gives it"),
    Field("unreadable_since", "time", True), Field("url", "str"),
    Field("attributes", "json", description="Provider extras; an offer of a reservation kind "
          "(capacity_block, flex_start, calendar) carries its terms under `terms`: "
          "block_hours, start, end, upfront_fee, currency, as the provider gives them."),
    # A spot offer's interruption signal (gpuradar.core.spot), the same for every provider;
    # null for an offer that is not spot.
    Field("interruption", "str", True, "a spot offer's interruption signal as every table "
          "shows it: the band with its source and date, Vast.ai's host reliability (a "
          "score, not a rate), or why it is unknown; null when the offer is not spot"),
    Field("interruption_kind", "str", True, "'interruption rate' (a published band), "
          "'host reliability' (a score, not a rate) or 'unknown'",
          choices=("interruption rate", "host reliability", "unknown")),
    Field("interruption_source", "str", True, "who published the signal (AWS Spot Advisor, "
          "Alibaba DescribeSpotAdvice, Azure Resource Graph, Vast.ai)"),
    Field("interruption_as_of", "str", True, "the day the signal describes (ISO date)"),
    Field("interruption_monthly_low", "float", True, "share of capacity interrupted in a "
          "month, the band's low end (0.05 = 5 %)"),
    Field("interruption_monthly_high", "float", True, "the band's high end; null with a "
          "band (kind 'interruption rate') means no upper bound"))
#: The fields of an offer in every interface, in this order.
OFFER_FIELDS = tuple(f.name for f in OFFER_SCHEMA)
#: The fields offer_record derives from an offer's interruption signal.
INTERRUPTION_FIELDS = tuple(n for n in OFFER_FIELDS if n.startswith("interruption"))
SPAN_FIELDS = ("offer_id", "source", "region", "zone", "instance_type", "pricing", "gpu",
               "gpu_count", "price", "currency", "price_usd", "price_per_gpu_usd",
               "available", "valid_from", "valid_to", "seen_until", "open")
CRAWL_FIELDS = ("id", "source", "started_at", "finished_at", "status", "items", "new_offers",
                "changed", "closed", "held", "dropped", "unknown_gpus", "uncatalogued",
                "duration_s", "error")


#: The longest GPU query read (docs/limits.md): a catalog name or alias is under 40
#: characters, a raw name a source reported under 100.
MAX_GPU_QUERY = 200


class UnknownGpu(ValueError):
    """A GPU query that names no catalog model and no stored raw name."""


def aware(ts: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes: they are UTC."""
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


def resolve_gpus(engine: Engine, query: str | None) -> list[str]:
    """Model names for a family ('H100'), an exact model ('H100-SXM-80GB') or a kind
    ('TPU'), else a raw name some source reported; [] for no query. Raises UnknownGpu."""
    from gpuradar.core.text import excerpt
    from gpuradar.storage.queries import gpu_names

    if not query:
        return []
    if len(query) > MAX_GPU_QUERY:  # longer than any name; difflib's hint would be slow
        raise UnknownGpu(f"unknown GPU {excerpt(query)}: no model name is that long")
    found = [g.name for g in catalog.match_family(query)]
    if found:
        return found
    raw = [n for n in gpu_names(engine) if n.lower() == query.lower()]
    if raw:
        return raw
    hint = catalog.suggest(query)
    raise UnknownGpu(f"unknown GPU {excerpt(query)}" + (f"; did you mean {hint}?" if hint
                                                         else ""))


def typed(value: Any, kind: str) -> Any:
    """A stored value as its kind says every interface carries it (SQLite and PostgreSQL
    hand back the same): a whole count an int, times aware UTC."""
    if value is None:
        return None
    if kind == "count":
        return int(value) if float(value).is_integer() else float(value)
    if kind == "float":
        return float(value)
    if kind == "int":
        return int(value)
    if kind == "bool":
        return bool(value)
    if kind == "time":
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def offer_record(row: dict[str, Any]) -> dict[str, Any]:
    """One offer (a row of current_offers) as every interface carries it: OFFER_SCHEMA."""
    out = {f.name: typed(row.get(f.name), f.kind) for f in OFFER_SCHEMA}
    out["zone"] = out["zone"] or ""
    out["attributes"] = out["attributes"] or {}
    out["replayed"] = bool(out["replayed"])
    out.update(interruption_fields(out["source"], out["pricing"], out["attributes"]))
    return out


def interruption_fields(source: str, pricing: str, attributes: dict[str, Any] | None
                        ) -> dict[str, Any]:
    """An offer's interruption_* fields (OFFER_SCHEMA), read from its attributes by
    gpuradar.core.spot: all null for an offer that is not spot."""
    if pricing != SPOT:
        return dict.fromkeys(INTERRUPTION_FIELDS)
    signal = offer_signal(source, pricing, attributes)
    if signal is None:
        return dict.fromkeys(INTERRUPTION_FIELDS)
    low, high = signal.monthly if signal.monthly is not None else (None, None)
    return {"interruption": signal.label(), "interruption_kind": signal.kind,
            "interruption_source": signal.source, "interruption_as_of": signal.as_of,
            "interruption_monthly_low": low, "interruption_monthly_high": high}


def last_change(engine: Engine) -> datetime | None:
    """When the stored data last changed: the newest finished crawl or index point (every
    write of offers, history and the index comes from one); None when there is none."""
    from sqlalchemy import func

    from gpuradar.storage.models import INDEX

    with engine.connect() as conn:
        crawled = aware(conn.execute(select(func.max(CRAWL.c.finished_at))).scalar())
        published = conn.execute(select(func.max(INDEX.c.published))).scalar()
    times = [t for t in (crawled, None if published is None
                         else datetime.fromtimestamp(published, UTC)) if t is not None]
    return max(times) if times else None


def unknown_sources(engine: Engine, names: Sequence[str], crawled: bool = False) -> list[str]:
    """The names that are neither a source of this gpuradar nor stored (the source of an
    offer, or with `crawled` of a crawl: a source since removed keeps its data): a typo to
    refuse, not a filter matching nothing."""
    from gpuradar.core.sources import providers

    rest = [n for n in dict.fromkeys(names) if n not in providers()]
    if not rest:
        return []
    column = CRAWL.c.source if crawled else OFFER.c.source
    with engine.connect() as conn:
        stored = set(conn.execute(select(column).where(column.in_(rest)).distinct()).scalars())
    return [n for n in rest if n not in stored]


def offers(engine: Engine, flt: Any = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Offers as they stand (storage.queries.OfferFilter), cheapest per GPU-hour first."""
    from gpuradar.storage.queries import current_offers

    return [offer_record(o) for o in current_offers(engine, flt, limit=limit)]


def history(engine: Engine, *, offer_id: int | None = None, gpus: Sequence[str] | None = None,
            since: datetime, until: datetime | None = None, pricing: str | None = None,
            sources: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Spans (price, availability, valid_from .. valid_to) of one offer, or of every offer
    of some GPUs overlapping [since, until], by offer then time."""
    from gpuradar.storage import queries

    if offer_id is not None:
        with engine.connect() as conn:
            found = conn.execute(select(OFFER).where(OFFER.c.id == offer_id)).first()
        if found is None:
            return []
        spans = [{**dict(found._mapping), **s} for s in queries.spans(engine, offer_id)]
        spans = [s for s in spans if s["seen_until"] >= since
                 and (until is None or s["valid_from"] <= until)]
    else:
        spans = queries.gpu_spans(engine, gpus, since, until, pricing, sources)
    out = [{k: s.get(k) for k in SPAN_FIELDS} for s in spans]
    out.sort(key=lambda s: (s["offer_id"], s["valid_from"]))
    return out


def crawl_record(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row.get(k) for k in CRAWL_FIELDS}
    out["started_at"], out["finished_at"] = aware(out["started_at"]), aware(out["finished_at"])
    out["error"] = (out["error"] or "").splitlines()[0][:300] if out["error"] else ""
    out["dropped"] = dict(sorted((out["dropped"] or {}).items()))
    out["uncatalogued"] = dict(sorted((out["uncatalogued"] or {}).items()))
    out["unknown_gpus"] = list(out["unknown_gpus"] or [])
    return out


def crawls(engine: Engine, source: str | Sequence[str] | None = None, limit: int | None = 50,
           oldest_first: bool = False) -> list[dict[str, Any]]:
    """Crawl records, newest first (or oldest first), of one source, of several, or all."""
    q = select(CRAWL)
    names = [source] if isinstance(source, str) else list(source or ())
    if names:
        q = q.where(CRAWL.c.source.in_(names))
    q = q.order_by(CRAWL.c.id if oldest_first else CRAWL.c.id.desc())
    if limit:
        q = q.limit(limit)
    with engine.connect() as conn:
        return [crawl_record(dict(r._mapping)) for r in conn.execute(q)]


def live_crawls(path: Path) -> int:
    """How many crawls of the SQLite file at `path` were live (not replayed); 0 when it is
    not a gpuradar database. Opened read-only by SQLite itself: nothing is migrated or
    created, whatever the file holds."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT count(*) FROM crawl WHERE NOT replayed").fetchone()[0]
    except sqlite3.Error:
        return 0


def open_read_only(url: str) -> Engine:
    """The engine of a database already at the schema this gpuradar reads, checked without
    writing anything (no migration: a reader must not change a database, and a standby
    replica's user may not be allowed to). DatabaseError, one line, for anything else: a
    SQLite file that does not exist (not created, nor its directory), a file that is not a
    database, a schema older (upgrade the database) or newer (upgrade gpuradar)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from gpuradar.storage.db import (
        DatabaseError,
        alembic_config,
        check_connection,
        get_engine,
        redact_url,
    )

    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None  # get_engine says why
    if parsed is not None and parsed.drivername.startswith("sqlite") \
            and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).expanduser().is_file():
        raise DatabaseError(f"no database file at {parsed.database} (reading creates none: "
                            "`gpuradar db upgrade` or a crawl makes one)")
    engine = get_engine(url)
    try:
        check_connection(engine)
        script = ScriptDirectory.from_config(alembic_config(engine))
        head = script.get_current_head()
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:  # e.g. a file that is not a SQLite database
        message = str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__
        raise DatabaseError(f"database {redact_url(url)} cannot be read: {message}") from None
    if current != head:
        known = current is None or any(r.revision == current for r in script.walk_revisions())
        raise DatabaseError(
            f"database {redact_url(url)} is at schema {current or 'none (empty)'}, this "
            f"gpuradar reads {head}: " + (
                "run `gpuradar db upgrade --database-url ...` first" if known else
                "a newer gpuradar wrote it; upgrade gpuradar to read it"))
    return engine
