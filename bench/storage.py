"""Storage figures: ingest throughput and growth, gpuradar's change points against a naive
one-row-per-observation table fed the same workload."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    func,
    insert,
    select,
    text,
)

from bench.workload import Workload
from gpuradar.storage.db import get_engine, upgrade
from gpuradar.storage.ingest import CrawlMemory, CrawlWriter
from gpuradar.storage.models import CHANGE

START = datetime(2026, 11, 1, tzinfo=UTC)

naive_meta = MetaData()
NAIVE = Table(
    "observation", naive_meta,
    Column("id", Integer, primary_key=True),
    Column("source", String(32)), Column("offer_key", String(200)),
    Column("observed_at", DateTime(timezone=True)), Column("price", Float),
    Column("currency", String(3)), Column("available", Boolean),
    Index("ix_observation_offer_time", "offer_key", "observed_at"),
)


@contextmanager
def database(kind: str, workdir: Path, pg_admin: str) -> Iterator[Engine]:
    """A fresh, migrated database: a SQLite file or a throwaway PostgreSQL database."""
    if kind == "sqlite":
        path = workdir / f"bench-{uuid.uuid4().hex[:8]}.db"
        engine = get_engine(f"sqlite:///{path}")
        upgrade(engine)
        yield engine
        engine.dispose()
        return
    import psycopg

    name = f"gpuradar_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg_admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + name
    engine = get_engine(url)
    try:
        upgrade(engine)
        yield engine
    finally:
        engine.dispose()
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: What a daemon's crawl service keeps between its crawls (each source's offer state, the
#: index's memo): the benchmark's crawls are a daemon's, one after the other.
SERVICE_MEMORY = CrawlMemory()


def ingest(engine: Engine, crawls: dict, batch: int = 1000) -> float:
    """Write one crawl of every source, as the daemon's crawl service does; returns
    seconds."""
    t0 = time.perf_counter()
    for source, items in crawls.items():
        writer = CrawlWriter(engine, source, started_at=items[0].observed_at,
                             memory=SERVICE_MEMORY)
        for i in range(0, len(items), batch):
            writer.add(items[i:i + batch])
        writer.finish("ok")
    return time.perf_counter() - t0


def change_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(CHANGE)).scalar_one()


def ingest_figures(engine: Engine, n: int) -> dict[str, float]:
    """Observations per second for an unchanged crawl and for a crawl with 2 % changes."""
    work = Workload(n, change=0.02, churn=0.0)
    gen = work.crawls(START, timedelta(minutes=15), 3)
    _, first = next(gen)
    ingest(engine, first)
    rows = change_rows(engine)
    _, same = 0, {s: [_shift(i, 15) for i in items] for s, items in first.items()}
    secs = ingest(engine, same)
    unchanged = {"obs_per_s": work.size / secs, "new_change_rows": change_rows(engine) - rows}
    gen2 = Workload(n, change=0.02, churn=0.0).crawls(START + timedelta(hours=1),
                                                      timedelta(minutes=15), 2)
    next(gen2)
    _, changed = next(gen2)
    secs = ingest(engine, changed)
    return {"unchanged_obs_per_s": unchanged["obs_per_s"],
            "unchanged_new_rows": unchanged["new_change_rows"],
            "changed_obs_per_s": work.size / secs, "observations": work.size}


def _shift(item, minutes: int):
    from dataclasses import replace

    return replace(item, observed_at=item.observed_at + timedelta(minutes=minutes))


def table_bytes(engine: Engine, tables: list[str]) -> int:
    """Bytes used by these tables and their indexes (SQLite: dbstat pages; PostgreSQL:
    pg_total_relation_size after VACUUM, as autovacuum would leave it)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            return sum(conn.execute(text(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = :t OR name IN "
                "(SELECT name FROM sqlite_master WHERE tbl_name = :t)"), {"t": t}).scalar_one()
                for t in tables)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM"))
        return sum(conn.execute(text("SELECT pg_total_relation_size(:t)"), {"t": t}).scalar_one()
                   for t in tables)


# The price history and its crawl records; the market index, a series derived from them,
# is measured apart (growth_figures).
STORE = ["offer", "price_change", "crawl"]


def growth_figures(engine: Engine, n: int, crawls: int) -> dict[str, float]:
    """Bytes per observation after the first crawl: gpuradar vs the naive table, fed the
    same crawls in the same run."""
    naive_meta.create_all(engine)
    work = Workload(n, change=0.02, churn=0.0)
    observations = base = base_naive = 0
    for k, (_at, batch) in enumerate(work.crawls(START, timedelta(minutes=15), crawls)):
        ingest(engine, batch)
        with engine.begin() as conn:
            conn.execute(insert(NAIVE), [
                {"source": i.source, "offer_key": f"{i.region}|{i.instance_type}|{i.pricing}",
                 "observed_at": i.observed_at, "price": i.price, "currency": i.currency,
                 "available": i.available} for items in batch.values() for i in items])
        if k == 0:
            base, base_naive = table_bytes(engine, STORE), table_bytes(engine, ["observation"])
            base_index = table_bytes(engine, ["price_index"])
        else:
            observations += work.size
    return {"bytes_per_obs": (table_bytes(engine, STORE) - base) / observations,
            "index_bytes_per_obs": (table_bytes(engine, ["price_index"]) - base_index)
            / observations,
            "naive_bytes_per_obs": (table_bytes(engine, ["observation"]) - base_naive)
            / observations, "observations": observations, "crawls": crawls, "offers": work.size}
