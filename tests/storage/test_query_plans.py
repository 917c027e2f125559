"""The production store's query plans: on a real PostgreSQL database with a million change
points, the reads gpuradar makes all the time use indexes (migration 0003 adds the ones
they need), and `db prune` stays fast. The statements checked are the ones the query
functions really send, captured on the way to the server and EXPLAINed with their values."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event

from gpuradar.storage import maintenance, queries
from gpuradar.storage.db import get_engine

OFFERS = 20_000
CHANGES = 1_000_000  # 50 per offer
CRAWLS = 100_000
GPUS = ["H100-SXM-80GB", "H100-PCIE-80GB", "H200-SXM-141GB", "B200", "A100-SXM-80GB",
        "A100-PCIE-40GB", "L40S", "L40", "L4", "A10", "A10G", "T4", "V100-SXM-16GB",
        "RTX-4090", "RTX-3090", "RTX-A6000", "A40", "MI300X", "ASCEND-910B", "P100"]
SOURCES = ["aws", "gcp", "azure", "oci", "alibaba", "tencent", "huawei", "lambda", "runpod",
           "vastai", "autodl"]


def _array(values: list[str]) -> str:
    return "ARRAY[" + ", ".join(f"'{v}'" for v in values) + "]"


FILL = [
    # offers as wide as real ones: provider attributes as JSON, long URLs
    f"""INSERT INTO offer (source, region, zone, instance_type, pricing, gpu, gpu_count, price,
        currency, price_usd, price_per_gpu_usd, available, url, attributes, first_seen,
        changed_at, active)
    SELECT ({_array(SOURCES)})[1 + g % 11], 'region-' || (g % 37), '', 'type-' || g,
        CASE WHEN g % 3 = 0 THEN 'spot' ELSE 'on_demand' END,
        ({_array(GPUS)})[1 + (g / 11) % 20], 1 + g % 8, 1 + (g % 97) * 0.5, 'USD',
        1 + (g % 97) * 0.5, (1 + (g % 97) * 0.5) / (1 + g % 8),
        CASE WHEN g % 10 = 0 THEN false WHEN g % 10 = 1 THEN NULL ELSE true END,
        'https://cloud.example.com/pricing/instances/type-' || g || '?region=region-' || g % 37,
        json_build_object('interruption', '<5%', 'savings_pct', 57, 'reliability', 0.9931,
                          'machine_id', g * 7, 'verified', true,
                          'cpu_name', 'AMD EPYC 7763 64-Core Processor', 'disk_gb', 512),
        now() - interval '400 days', now() - (g % 400) * interval '1 hour', g % 5 <> 0
    FROM generate_series(1, {OFFERS}) g""",
    # one million change points: 50 per offer, hourly
    f"""INSERT INTO price_change (offer_id, at, price_micros, available)
    SELECT 1 + g / 50, extract(epoch FROM now())::bigint - (50 - g % 50) * 3600 * 24 * 8,
        1000000 + (g % 1000) * 1000, g % 7 <> 0
    FROM generate_series(0, {CHANGES - 1}) g""",
    f"""INSERT INTO crawl (source, started_at, finished_at, status, items, new_offers, changed,
        closed, dropped, unknown_gpus, error)
    SELECT ({_array(SOURCES)})[1 + g % 11], now() - ({CRAWLS} - g) * interval '5 minutes',
        now() - ({CRAWLS} - g) * interval '5 minutes' + interval '30 seconds',
        CASE WHEN g % 9 = 0 THEN 'failed' ELSE 'ok' END, 100, 0, 3, 0,
        '{{"no_price": 3}}', '[]', ''
    FROM generate_series(1, {CRAWLS}) g""",
]


@pytest.fixture(scope="module")
def big_engine(request) -> Iterator[Engine]:
    """A PostgreSQL database at head holding a million change points."""
    from tests.conftest import PG_ADMIN, _pg_connect

    template = request.getfixturevalue("pg_template")
    name = f"gpuradar_plans_{uuid.uuid4().hex[:10]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        with _pg_connect(name) as conn:
            # bulk load without per-row foreign-key triggers (the rows are consistent)
            conn.execute("SET session_replication_role = replica")
            for sql in FILL:
                conn.execute(sql)
            conn.execute("VACUUM ANALYZE")
        url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
        engine = get_engine(f"{url}/{name}")
        yield engine
        engine.dispose()
    finally:
        with _pg_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def plans(engine: Engine, call: Callable[[], Any]) -> list[tuple[str, dict]]:
    """(statement, plan tree) of every SELECT `call` sends."""
    sent: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    out = []
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        for statement, params in sent:
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
            out.append((statement, cursor.fetchone()[0][0]["Plan"]))
    return out


def _nodes(node: dict) -> Iterator[dict]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def access(plan: dict, table: str) -> list[tuple[str, str | None]]:
    """How `table` is read: (node type, index) for each scan of it; a bitmap heap scan
    names the index of its bitmap."""
    found = []
    for node in _nodes(plan):
        if node.get("Relation Name") != table:
            continue
        if node["Node Type"] == "Bitmap Heap Scan":
            found += [(n["Node Type"], n.get("Index Name")) for n in _nodes(node)
                      if n["Node Type"] == "Bitmap Index Scan"]
        else:
            found.append((node["Node Type"], node.get("Index Name")))
    return found


def reads_of(engine: Engine, call: Callable[[], Any], table: str) -> list[tuple[str, str | None]]:
    found = [a for _, plan in plans(engine, call) for a in access(plan, table)]
    assert found, f"no statement read {table}"
    return found


INDEX_SCANS = {"Index Scan", "Index Only Scan", "Bitmap Index Scan"}


def test_history_of_an_offer_is_an_index_scan(big_engine):
    offer_id = OFFERS // 2
    reads = reads_of(big_engine, lambda: queries.spans(big_engine, offer_id), "price_change")
    assert reads and all(kind in INDEX_SCANS for kind, _ in reads), reads
    assert {index for _, index in reads} == {"price_change_pkey"}, reads
    assert len(queries.spans(big_engine, offer_id)) == 50
    at = datetime.now(UTC) - timedelta(days=100)
    reads = reads_of(big_engine, lambda: queries.price_at(big_engine, offer_id, at),
                     "price_change")
    assert all(kind in INDEX_SCANS for kind, _ in reads), reads


def test_current_cheapest_per_gpu_uses_indexes(big_engine):
    # what Prometheus scrapes: the cheapest offer of every GPU, pricing and source
    reads = reads_of(big_engine, lambda: queries.cheapest_per_gpu(big_engine), "offer")
    assert reads == [("Index Only Scan", "ix_offer_cheapest")], reads
    # what `gpuradar prices --gpu H100` and the alert rules of one GPU ask
    flt = queries.OfferFilter(gpus=["H100-SXM-80GB", "H100-PCIE-80GB"], available_only=True)
    reads = reads_of(big_engine, lambda: queries.current_offers(big_engine, flt, limit=5),
                     "offer")
    assert reads == [("Bitmap Index Scan", "ix_offer_gpu_price")] or reads == [
        ("Index Scan", "ix_offer_gpu_price")], reads
    assert len(queries.current_offers(big_engine, flt, limit=5)) == 5


def test_scrape_time_gauges_and_failure_streaks_use_indexes(big_engine):
    reads = reads_of(big_engine, lambda: queries.offer_counts(big_engine), "offer")
    assert reads == [("Index Only Scan", "ix_offer_counts")], reads
    reads = reads_of(big_engine, lambda: queries.consecutive_failures(big_engine, "aws"),
                     "crawl")
    assert reads == [("Index Only Scan", "ix_crawl_source_id")], reads


def test_prune_of_a_million_change_points(big_engine):
    # every offer has 50 change points 8 days apart: a cutoff 100 days back keeps the one
    # in force at the cutoff and the 12 after it
    cutoff = datetime.now(UTC) - timedelta(days=100)
    started = time.monotonic()
    result = maintenance.prune(big_engine, cutoff, dry_run=True)
    elapsed = time.monotonic() - started
    assert result.price_changes == OFFERS * 37
    assert elapsed < 30, f"counting what prune deletes took {elapsed:.1f}s"
