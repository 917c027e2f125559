"""The schema, declared once as SQLAlchemy Core tables.

Prices are stored as change points: `offer` holds the current state of each offer (one row
per identity), `price_change` one row each time its price or availability changed. The span
after an offer's last change lasts until the source's last successful crawl, so an
unchanged observation writes nothing at all.

Every read and write of gpuradar is a Core statement on these tables; no ORM class maps
them. Declaring them with SQLAlchemy Core alone (not as SQLModel table classes, as until
issue #54) keeps SQLAlchemy's ORM, SQLModel and pydantic's model building out of every
process that only reads or writes rows: they were about a fifth of `gpuradar prices`.
Alembic's migrations (storage/migrations) own the schema in the database; `metadata` is
what they are compared against (tests/project/test_deploy.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    TypeDecorator,
    UniqueConstraint,
    event,
    literal_column,
    text,
)
from sqlalchemy.types import DateTime

metadata = MetaData()


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime, stored in UTC and read back aware in UTC on both databases
    (SQLite keeps no zone; PostgreSQL's timestamptz comes back in the session's zone). The
    type the migrations created these columns with (sqlmodel's `UTCDateTime`, the same
    behaviour): a naive datetime is refused, never stored as if it were UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError(f"a naive datetime cannot be stored: {value!r} (give its zone)")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect
                             ) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:  # SQLite: stored in UTC without an offset
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _text(length: int | None = None, default: str | None = None, *, name: str,
          nullable: bool = False, **kw: Any) -> Column[Any]:
    """A string column (VARCHAR(length), or unbounded)."""
    return Column(name, String(length), nullable=nullable, default=default, **kw)


def _json(name: str, server_default: Any = None) -> Column[Any]:
    """A JSON column that is never NULL (an empty dict or list is written instead)."""
    return Column(name, JSON, nullable=False, server_default=server_default)


# The current state of each offer, one row per identity (source, region, zone, instance
# type, pricing).
OFFER = Table(
    "offer", metadata,
    Column("id", Integer, primary_key=True),
    _text(32, name="source"),
    _text(64, name="region"),
    _text(64, "", name="zone"),
    _text(160, name="instance_type"),
    _text(16, name="pricing"),
    _text(64, name="gpu"),
    Column("gpu_count", Float, nullable=False),
    Column("gpu_memory_gb", Float),
    Column("vcpus", Float),
    Column("memory_gb", Float),
    Column("price", Float, nullable=False),
    _text(3, name="currency"),
    Column("price_usd", Float),
    Column("price_per_gpu_usd", Float),
    Column("available", Boolean),
    Column("available_count", Integer),
    _text(2000, "", name="url"),
    _json("attributes"),
    Column("first_seen", UTCDateTime, nullable=False),
    # When price or availability last changed (start of the open span).
    Column("changed_at", UTCDateTime, nullable=False),
    # Listed in the source's last successful crawl; False once it vanished.
    Column("active", Boolean, nullable=False, default=True),
    # Start of the crawl since which the source lists the offer with a price gpuradar cannot
    # read or believe (N/A, negative, absurd): the offer stays listed with its last good
    # price. NULL when the last observation was readable (migration 0004).
    Column("unreadable_since", UTCDateTime),
    UniqueConstraint("source", "region", "zone", "instance_type", "pricing",
                     name="uq_offer_key"),
    Index("ix_offer_gpu_price", "gpu", "active", "price_per_gpu_usd"),
    Index("ix_offer_source_active", "source", "active"),
    # Covering indexes for the reads made at every metrics scrape (migration 0003).
    Index("ix_offer_cheapest", "active", "gpu", "pricing", "source", "price_per_gpu_usd",
          "available"),
    Index("ix_offer_counts", "active", "source", "pricing", "available"),
)

# One change point of one offer: from `at` on, its price and availability were these, until
# its next change. `price_micros` NULL means the offer stopped being listed. Deliberately
# compact (integer epoch seconds, integer micro-units of the quoted currency, clustered on
# its primary key with no rowid on SQLite): the history grows by one ~20-byte row per
# change, whatever the crawl frequency.
CHANGE = Table(
    "price_change", metadata,
    Column("offer_id", Integer, ForeignKey("offer.id"), primary_key=True),
    Column("at", BigInteger, primary_key=True),  # epoch seconds, UTC
    Column("price_micros", BigInteger),
    Column("available", Boolean),
    sqlite_with_rowid=False,
)

# One change point of one spot offer's interruption signal (gpuradar.core.spot): from `at`
# on, its provider published this band (and rate, period, source), until its next change.
# Written like prices: only when band, rate, period or source differ from the last stored;
# `as_of` is the day the provider's data described when this value was first read. An
# unknown signal is never a row (migration 0010).
SIGNAL = Table(
    "interruption_change", metadata,
    Column("offer_id", Integer, ForeignKey("offer.id"), primary_key=True),
    Column("at", BigInteger, primary_key=True),  # epoch seconds, UTC
    _text(32, name="band"),  # as published: "<5%", "5-10%", "0-5", "20+"
    Column("rate", Float),  # a published average rate, in percent (Alibaba)
    _text(16, name="period", nullable=True),  # the stated window ("month")
    _text(64, name="source"),  # who published it ("AWS Spot Advisor")
    _text(10, name="as_of", nullable=True),  # ISO day; None: not stated
    sqlite_with_rowid=False,
)

# The crawls ix_crawl_not_ok holds: running, failed, partial.
_NOT_OK = "status <> 'ok'"

# One crawl of one source: its outcome and counts (the failure streak, freshness and the end
# of every open span are read from these). Two indexes (migration 0008): each source's
# crawls by id, with their status (its newest crawl, newest successful crawl, failure
# streak: index-only); and, for the few crawls that are not ok (running, failed, partial),
# the same by status, so that the running crawls and the failures since the last success
# are an index range. Most crawls are ok and have no entry in the second: by status, ok is
# never selective.
CRAWL = Table(
    "crawl", metadata,
    Column("id", Integer, primary_key=True),
    _text(32, name="source"),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    _text(16, "running", name="status"),  # running | ok | partial | failed
    Column("items", Integer, nullable=False, default=0),
    Column("new_offers", Integer, nullable=False, default=0),
    Column("changed", Integer, nullable=False, default=0),
    Column("closed", Integer, nullable=False, default=0),
    _json("dropped"),
    _json("unknown_gpus"),
    _text(4000, "", name="error"),
    Column("duration_s", Float),
    # Offers the source listed that the spider could not map to a GPU model or count:
    # raw product name -> offers (migration 0004).
    _json("uncatalogued", text("'{}'")),
    # Offers this crawl did not close although it did not list them, because it listed far
    # fewer offers than the last successful crawl (the shrink guard; migration 0004).
    Column("held", Integer, nullable=False, server_default=text("0")),
    _text(200, name="owner", nullable=True),  # host:pid:start (storage.owner)
    # The moment the crawl's data describes: the capture time of the recording for a
    # replayed crawl (migration 0007). NULL when that is its start (a live crawl; rows
    # written before 0007): readers take started_at then.
    Column("observed_at", UTCDateTime),
    # Answered from a recording (`--replay`, `gpuradar demo`), not by the provider.
    Column("replayed", Boolean, nullable=False, server_default=text("false")),
    # The capture date as the recording's provenance states it ("2026-08-22", "2026-08");
    # NULL for a live crawl, or a recording that does not say when it was captured.
    _text(40, name="captured", nullable=True),
    Index("ix_crawl_source_id", "source", "id", "status"),
    # Its PostgreSQL condition is added by with_postgresql_options(), below.
    Index("ix_crawl_not_ok", "status", "source", "id", sqlite_where=text(_NOT_OK)),
)


def with_postgresql_options() -> None:
    """Give ix_crawl_not_ok its PostgreSQL condition (`postgresql_where`), once.

    A dialect's keyword on an Index makes SQLAlchemy import that dialect to validate it;
    declared in the Table, it imported the PostgreSQL dialect (~6 % of `gpuradar prices`)
    into every process on SQLite. It is added here instead, when PostgreSQL is really used:
    by storage.db for a PostgreSQL engine, and before this table is created on PostgreSQL
    (the listener below), so the schema on PostgreSQL is the same as before."""
    index = next(ix for ix in CRAWL.indexes if ix.name == "ix_crawl_not_ok")
    if index.dialect_options["postgresql"]["where"] is None:
        index.dialect_kwargs["postgresql_where"] = text(_NOT_OK)


def _before_create(_table: Table, connection: Any, **_kw: Any) -> None:
    """metadata.create_all() on a PostgreSQL connection made elsewhere than storage.db."""
    if connection.dialect.name == "postgresql":
        with_postgresql_options()


event.listen(CRAWL, "before_create", _before_create)

# ECB reference rates: USD per one unit of `currency`, per rate date.
FX = Table(
    "fx_rate", metadata,
    Column("id", Integer, primary_key=True),
    _text(3, name="currency"),
    Column("rate_date", Date, nullable=False),
    Column("usd_per_unit", Float, nullable=False),
    _text(16, "ecb", name="source"),
    Column("fetched_at", UTCDateTime, nullable=False),
    UniqueConstraint("currency", "rate_date", name="uq_fx_currency_date"),
)

# One row per alert (a rule, or a source gone stale): what was last decided and sent. Kept
# in the database so that a restart neither repeats a notification nor forgets one.
STATE = Table(
    "alert_state", metadata,
    Column("id", Integer, primary_key=True),
    _text(200, name="key"),  # "rule:<name>" or "source:<name>"
    _text(16, name="kind"),  # rule | source
    _text(200, name="name"),
    # Hash of the rule's condition: a changed condition starts a new alert.
    _text(64, "", name="rule_hash"),
    _text(1000, "", name="description"),
    _text(16, "inactive", name="state"),  # inactive | pending | firing
    # Consecutive evaluations the condition held (for `for:`).
    Column("active_count", Integer, nullable=False, default=0),
    Column("pending_since", UTCDateTime),
    Column("fired_at", UTCDateTime),
    Column("resolved_at", UTCDateTime),
    Column("last_notified_at", UTCDateTime),
    # Best price at the last notification (rule currency and unit); NULL: not notified yet
    # in this firing episode (muted, or no target).
    Column("notified_value", Float),
    Column("best_value", Float),
    _text(3, "USD", name="currency"),
    Column("match_count", Integer, nullable=False, default=0),
    _json("best"),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("key", name="uq_alert_state_key"),
    Index("ix_alert_state_state", "state"),
)

# The outbox: one message for one target, written with the state change it reports.
OUTBOX = Table(
    "notification", metadata,
    Column("id", Integer, primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    _text(200, name="alert_key"),
    # firing | improved | repeat | resolved | stale | recovered
    _text(16, name="kind"),
    _text(100, name="target"),
    _text(16, "", name="channel"),
    _text(1000, name="title"),
    _text(None, "", name="body_markdown"),
    _text(None, "", name="body_text"),
    _text(None, "", name="body_html"),
    _text(16, "info", name="notify_type"),
    _text(16, "pending", name="status"),  # pending | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    _text(2000, "", name="last_error"),
    Column("sent_at", UTCDateTime),
    Index("ix_notification_due", "status", "next_attempt_at"),
    Index("ix_notification_created", "created_at"),
)

# One change point of the market index of one accelerator model and pricing: from `at` on,
# the index was these figures, until its next change point (gpuradar.core.marketindex
# computes them; docs/index.md gives the method). A row with `offers` 0 and no figures means
# no fresh offer was listed from then on. Figures are integer micro-dollars per GPU-hour, so
# "did it change" is an exact comparison (migration 0006).
INDEX = Table(
    "price_index", metadata,
    _text(64, name="gpu", primary_key=True),
    _text(16, name="pricing", primary_key=True),
    Column("at", BigInteger, primary_key=True),  # epoch seconds, UTC
    Column("median_micros", BigInteger),
    Column("p10_micros", BigInteger),
    Column("p90_micros", BigInteger),
    Column("offers", Integer, nullable=False, default=0),
    Column("providers", Integer, nullable=False, default=0),
    # Ids of the offers whose votes the screens excluded, ascending.
    _json("excluded"),
    # Method v2 (migration 0009): what made the point, so that it can be reproduced.
    Column("method", Integer, nullable=False, default=2, server_default="1"),
    _text(16, "market", name="status", server_default="market"),  # market, thin or none
    _json("params", "{}"),
    # Every provider's vote: source, offer_id, price, offers, observed, ref, reason.
    _json("panel", "[]"),
    _text(64, "", name="digest", server_default=""),
    # When the point was computed (epoch seconds): a replay's point is dated at its capture.
    Column("published", BigInteger),
    # The `at` of the point this one corrects (same time, computed again with more data).
    Column("corrects", BigInteger),
    sqlite_with_rowid=False,
)

# A read of running, failed or partial crawls states ix_crawl_not_ok's condition too: SQLite
# uses a partial index only for a query that names its condition (status = 'running' is not
# enough). A constant in the statement, not a parameter: it also holds for a plan
# PostgreSQL prepares for any parameters.
CRAWL_NOT_OK = CRAWL.c.status != literal_column("'ok'")
# The crawls that have finished, whatever their outcome. A constant too: SQLite prepares a
# statement again at every execution when a parameter might make one of its conditions the
# partial index's (`status != ?` against `status <> 'ok'`), a third more work per query.
CRAWL_FINISHED = CRAWL.c.status != literal_column("'running'")
