"""The schema.

Prices are stored as change points: `Offer` holds the current state of each offer (one row
per identity), `PriceSpan` one row per run of an unchanged price/availability. An open span
(`valid_to` NULL) lasts until the source's last successful crawl, so an unchanged
observation writes nothing at all.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


class Offer(SQLModel, table=True):
    __tablename__ = "offer"
    __table_args__ = (
        UniqueConstraint("source", "region", "zone", "instance_type", "pricing",
                         name="uq_offer_key"),
        Index("ix_offer_gpu_price", "gpu", "active", "price_per_gpu_usd"),
        Index("ix_offer_source_active", "source", "active"),
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


class Crawl(SQLModel, table=True):
    __tablename__ = "crawl"
    __table_args__ = (Index("ix_crawl_source_started", "source", "started_at"),)

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
