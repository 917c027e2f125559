"""Migration 0008: the crawl table keeps two indexes, each source's crawls by id and, for
the crawls that are not ok only, the same by status; downgrading gives back the three of
0007. The crawl records read the same on either side. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import inspect, select

from gpuradar.core.items import PriceItem
from gpuradar.storage import dataset, queries
from gpuradar.storage.db import alembic_config, upgrade
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.models import CRAWL
from gpuradar.storage.queries import source_health

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HEAD = {"ix_crawl_source_id": ["source", "id", "status"],
        "ix_crawl_not_ok": ["status", "source", "id"]}
BEFORE = {"ix_crawl_source_started": ["source", "started_at"],
          "ix_crawl_source_id": ["source", "id", "status"],
          "ix_crawl_status_source": ["status", "source", "started_at", "id"]}


def crawl_indexes(engine) -> dict[str, list[str]]:
    return {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("crawl")}


def condition(engine, name: str) -> str:
    """The WHERE of a partial index as the database states it ('' for a whole index)."""
    (ix,) = [ix for ix in inspect(engine).get_indexes("crawl") if ix["name"] == name]
    where = ix.get("dialect_options", {}).get(f"{engine.dialect.name}_where")
    return "" if where is None else str(where)


def crawl(engine, status: str, at: datetime) -> None:
    item = PriceItem(source="lambda", region="us-east-1", instance_type="gpu_1x_h100",
                     pricing="on_demand", gpu="H100-SXM-80GB", gpu_count=1, price=2.49,
                     currency="USD", available=True, observed_at=at, price_usd=2.49,
                     price_per_gpu_usd=2.49)
    writer = CrawlWriter(engine, "lambda", started_at=at)
    writer.add([item] if status == "ok" else [])
    writer.finish(status, error="" if status == "ok" else "HTTP 503")


def test_migration_0008_leaves_two_crawl_indexes_and_its_downgrade_the_three(engine):
    crawl(engine, "ok", T0)
    crawl(engine, "failed", T0 + timedelta(minutes=15))
    records = dataset.crawls(engine)
    assert [(c["status"], c["started_at"]) for c in records] == [
        ("failed", T0 + timedelta(minutes=15)), ("ok", T0)]
    assert crawl_indexes(engine) == HEAD
    assert "<>" in condition(engine, "ix_crawl_not_ok")
    assert "'ok'" in condition(engine, "ix_crawl_not_ok")

    command.downgrade(alembic_config(engine), "0007_crawl_replay")
    assert crawl_indexes(engine) == BEFORE
    assert condition(engine, "ix_crawl_status_source") == ""
    assert dataset.crawls(engine) == records

    upgrade(engine)
    assert crawl_indexes(engine) == HEAD
    assert dataset.crawls(engine) == records
    assert queries.last_success(engine) == {"lambda": T0}
    assert source_health(engine) == {"lambda": (T0, 1)}


def test_a_live_crawl_keeps_its_start_once_and_every_reader_answers_it(engine):
    # a live crawl observes at its start: observed_at stays NULL (readers take started_at),
    # one copy of that time fewer in each crawl record
    crawl(engine, "ok", T0)
    with engine.connect() as conn:
        assert conn.execute(select(CRAWL.c.observed_at)).scalar_one() is None
    assert queries.last_observed(engine)["lambda"] == queries.Observed(T0, False, None)
    assert queries.last_success(engine) == {"lambda": T0}
    assert source_health(engine) == {"lambda": (T0, 0)}
    assert source_health(engine, by_run=True) == {"lambda": (T0, 0)}
    (row,) = queries.current_offers(engine)
    assert row["observed_at"] == T0 and row["replayed"] is False
