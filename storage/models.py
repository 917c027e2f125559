"""The schema.

Prices are stored as change points: `Offer` holds the current state of each offer (one row
per identity), `PriceChange` one row each time its price or availability changed. The span
after an offer's last change lasts until the source's last successful crawl, so an
unchanged observation writes nothing at all.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    Table,
    UniqueConstraint,
    inspect,
    literal_column,
    text,
)
from sqlmodel import Field, SQLModel


class Offer(SQLModel, table=True):
    __tablename__ = "offer"
    __table_args__ = (
        UniqueConstraint("source", "region", "zone", "instance_type", "pricing",
                         name="uq_offer_key"),
        Index("ix_offer_gpu_price", "gpu", "active", "price_per_gpu_usd"),
        Index("ix_offer_source_active", "source", "active"),
        # Covering indexes for the reads made at every metrics scrape (migration 0003).
        Index("ix_offer_cheapest", "active", "gpu", "pricing", "source", "price_per_gpu_usd",
              "available"),
        Index("ix_offer_counts", "active", "source", "pricing", "available"),
    )

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=32)
    region: str = Field(max_length=64)
    zone: str = Field(default="", max_length=64)
    instance_type: str = Field(max_length=160)
    pricing: str = Field(max_length=16)
    gpu: str = Field(max_length=64)
    gpu_count: float
    gpu_memory_gb: float | None = None
    vcpus: float | None = None
    memory_gb: float | None = None
    price: float
    currency: str = Field(max_length=3)
    price_usd: float | None = None
    price_per_gpu_usd: float | None = None
    available: bool | None = None
    available_count: int | None = None
    url: str = Field(default="", max_length=2000)
    attributes: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    first_seen: datetime
    # When price or availability last changed (start of the open span).
    changed_at: datetime
    # Listed in the source's last successful crawl; False once it vanished.
    active: bool = True
    # Start of the crawl since which the source lists the offer with a price gpuradar cannot
    # read or believe (N/A, negative, absurd): the offer stays listed with its last good
    # price. None when the last observation was readable (migration 0004).
    unreadable_since: datetime | None = None


class PriceChange(SQLModel, table=True):
    """One change point of one offer: from `at` on, its price and availability were these,
    until its next change. `price_micros` NULL means the offer stopped being listed.

    Deliberately compact (integer epoch seconds, integer micro-units of the quoted
    currency, clustered on its primary key with no rowid on SQLite): the history grows by
    one ~20-byte row per change, whatever the crawl frequency."""

    __tablename__ = "price_change"
    __table_args__ = {"sqlite_with_rowid": False}

    offer_id: int = Field(foreign_key="offer.id", primary_key=True)
    at: int = Field(primary_key=True, sa_type=BigInteger)  # epoch seconds, UTC
    price_micros: int | None = Field(default=None, sa_type=BigInteger)
    available: bool | None = None


class InterruptionChange(SQLModel, table=True):
    """One change point of one spot offer's interruption signal (gpuradar.core.spot): from
    `at` on, its provider published this band (and rate, period, source), until its next
    change. Written like prices: only when band, rate, period or source differ from the last
    stored; `as_of` is the day the provider's data described when this value was first
    read. An unknown signal is never a row (migration 0010)."""

    __tablename__ = "interruption_change"
    __table_args__ = {"sqlite_with_rowid": False}

    offer_id: int = Field(foreign_key="offer.id", primary_key=True)
    at: int = Field(primary_key=True, sa_type=BigInteger)  # epoch seconds, UTC
    band: str = Field(max_length=32)  # as published: "<5%", "5-10%", "0-5", "20+"
    rate: float | None = None  # a published average rate, in percent (Alibaba)
    period: str | None = Field(default=None, max_length=16)  # the stated window ("month")
    source: str = Field(max_length=64)  # who published it ("AWS Spot Advisor")
    as_of: str | None = Field(default=None, max_length=10)  # ISO day; None: not stated


# The crawls ix_crawl_not_ok holds: running, failed, partial.
_NOT_OK = "status <> 'ok'"


class Crawl(SQLModel, table=True):
    """One crawl of one source: its outcome and counts (the failure streak, freshness and
    the end of every open span are read from these).

    Two indexes (migration 0008): each source's crawls by id, with their status (its newest
    crawl, newest successful crawl, failure streak: index-only); and, for the few crawls
    that are not ok (running, failed, partial), the same by status, so that the running
    crawls and the failures since the last success are an index range. Most crawls are ok
    and have no entry in the second: by status, ok is never selective."""

    __tablename__ = "crawl"
    __table_args__ = (
        Index("ix_crawl_source_id", "source", "id", "status"),
        Index("ix_crawl_not_ok", "status", "source", "id", sqlite_where=text(_NOT_OK),
              postgresql_where=text(_NOT_OK)),
    )

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=32)
    started_at: datetime
    finished_at: datetime | None = None
    status: str = Field(default="running", max_length=16)  # running | ok | partial | failed
    items: int = 0
    new_offers: int = 0
    changed: int = 0
    closed: int = 0
    dropped: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    unknown_gpus: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    error: str = Field(default="", max_length=4000)
    duration_s: float | None = None
    # Offers the source listed that the spider could not map to a GPU model or count:
    # raw product name -> offers (migration 0004).
    uncatalogued: dict[str, int] = Field(default_factory=dict, sa_column=Column(
        JSON, nullable=False, server_default=text("'{}'")))
    # Offers this crawl did not close although it did not list them, because it listed far
    # fewer offers than the last successful crawl (the shrink guard; migration 0004).
    held: int = Field(default=0, sa_column=Column(Integer, nullable=False,
                                                  server_default=text("0")))
    owner: str | None = Field(default=None, max_length=200)  # host:pid:start (storage.owner)
    # The moment the crawl's data describes: the capture time of the recording for a
    # replayed crawl (migration 0007). NULL when that is its start (a live crawl; rows
    # written before 0007): readers take started_at then.
    observed_at: datetime | None = None
    # Answered from a recording (`--replay`, `gpuradar demo`), not by the provider.
    replayed: bool = Field(default=False, sa_column=Column(
        Boolean, nullable=False, server_default=text("false")))
    # The capture date as the recording's provenance states it ("2026-08-22", "2026-08");
    # None for a live crawl, or a recording that does not say when it was captured.
    captured: str | None = Field(default=None, max_length=40)


class FxRate(SQLModel, table=True):
    __tablename__ = "fx_rate"
    __table_args__ = (UniqueConstraint("currency", "rate_date", name="uq_fx_currency_date"),)

    id: int | None = Field(default=None, primary_key=True)
    currency: str = Field(max_length=3)
    rate_date: date
    # USD per one unit of `currency`.
    usd_per_unit: float
    source: str = Field(default="ecb", max_length=16)
    fetched_at: datetime


class AlertState(SQLModel, table=True):
    """One row per alert (a rule, or a source gone stale): what was last decided and sent.

    Kept in the database so that a restart neither repeats a notification nor forgets one.
    """

    __tablename__ = "alert_state"
    __table_args__ = (
        UniqueConstraint("key", name="uq_alert_state_key"),
        Index("ix_alert_state_state", "state"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # "rule:<name>" or "source:<name>"
    key: str = Field(max_length=200)
    kind: str = Field(max_length=16)  # rule | source
    name: str = Field(max_length=200)
    # Hash of the rule's condition: a changed condition starts a new alert.
    rule_hash: str = Field(default="", max_length=64)
    description: str = Field(default="", max_length=1000)
    state: str = Field(default="inactive", max_length=16)  # inactive | pending | firing
    # Consecutive evaluations the condition held (for `for:`).
    active_count: int = 0
    pending_since: datetime | None = None
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    last_notified_at: datetime | None = None
    # Best price at the last notification (rule currency and unit); None: not notified yet
    # in this firing episode (muted, or no target).
    notified_value: float | None = None
    best_value: float | None = None
    currency: str = Field(default="USD", max_length=3)
    match_count: int = 0
    best: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    updated_at: datetime


class Notification(SQLModel, table=True):
    """The outbox: one message for one target, written with the state change it reports."""

    __tablename__ = "notification"
    __table_args__ = (
        Index("ix_notification_due", "status", "next_attempt_at"),
        Index("ix_notification_created", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime
    alert_key: str = Field(max_length=200)
    # firing | improved | repeat | resolved | stale | recovered
    kind: str = Field(max_length=16)
    target: str = Field(max_length=100)
    channel: str = Field(default="", max_length=16)
    title: str = Field(max_length=1000)
    body_markdown: str = ""
    body_text: str = ""
    body_html: str = ""
    notify_type: str = Field(default="info", max_length=16)
    status: str = Field(default="pending", max_length=16)  # pending | sent | failed
    attempts: int = 0
    next_attempt_at: datetime
    last_error: str = Field(default="", max_length=2000)
    sent_at: datetime | None = None


class PriceIndex(SQLModel, table=True):
    """One change point of the market index of one accelerator model and pricing: from `at`
    on, the index was these figures, until its next change point (gpuradar.core.marketindex
    computes them; docs/index.md gives the method). A row with `offers` 0 and no figures
    means no fresh offer was listed from then on. Figures are integer micro-dollars per
    GPU-hour, so "did it change" is an exact comparison (migration 0006)."""

    __tablename__ = "price_index"
    __table_args__ = {"sqlite_with_rowid": False}

    gpu: str = Field(max_length=64, primary_key=True)
    pricing: str = Field(max_length=16, primary_key=True)
    at: int = Field(primary_key=True, sa_type=BigInteger)  # epoch seconds, UTC
    median_micros: int | None = Field(default=None, sa_type=BigInteger)
    p10_micros: int | None = Field(default=None, sa_type=BigInteger)
    p90_micros: int | None = Field(default=None, sa_type=BigInteger)
    offers: int = 0
    providers: int = 0
    # Ids of the offers whose votes the screens excluded, ascending.
    excluded: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # Method v2 (migration 0009): what made the point, so that it can be reproduced.
    method: int = Field(default=2, sa_column_kwargs={"server_default": "1"})
    status: str = Field(default="market", max_length=16,  # market, thin or none
                        sa_column_kwargs={"server_default": "market"})
    params: dict[str, Any] = Field(default_factory=dict,
                                   sa_column=Column(JSON, nullable=False, server_default="{}"))
    # Every provider's vote: source, offer_id, price, offers, observed, ref, reason.
    panel: list[dict[str, Any]] = Field(default_factory=list,
                                        sa_column=Column(JSON, nullable=False,
                                                         server_default="[]"))
    digest: str = Field(default="", max_length=64, sa_column_kwargs={"server_default": ""})
    # When the point was computed (epoch seconds): a replay's point is dated at its capture.
    published: int | None = Field(default=None, sa_type=BigInteger)
    # The `at` of the point this one corrects (same time, computed again with more data).
    corrects: int | None = Field(default=None, sa_type=BigInteger)


# -- the tables, for SQLAlchemy Core ------------------------------------------------------------
def table_of(model: type[SQLModel]) -> Table:
    """The Core table of a table model. SQLModel sets `__table__` when it creates the class,
    so a type checker does not know it; the mapper does, and storage's SQL reads these."""
    table = inspect(model).local_table
    if not isinstance(table, Table):  # a table model maps one table, never a join
        raise TypeError(f"{model.__name__} is not mapped to one table")
    return table


OFFER = table_of(Offer)
CHANGE = table_of(PriceChange)
SIGNAL = table_of(InterruptionChange)
CRAWL = table_of(Crawl)
# A read of running, failed or partial crawls states ix_crawl_not_ok's condition too: SQLite
# uses a partial index only for a query that names its condition (status = 'running' is not
# enough). A constant in the statement, not a parameter: it also holds for a plan
# PostgreSQL prepares for any parameters.
CRAWL_NOT_OK = CRAWL.c.status != literal_column("'ok'")
# The crawls that have finished, whatever their outcome. A constant too: SQLite prepares a
# statement again at every execution when a parameter might make one of its conditions the
# partial index's (`status != ?` against `status <> 'ok'`), a third more work per query.
CRAWL_FINISHED = CRAWL.c.status != literal_column("'running'")
FX = table_of(FxRate)
STATE = table_of(AlertState)
OUTBOX = table_of(Notification)
INDEX = table_of(PriceIndex)
