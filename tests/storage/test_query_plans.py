"""The production store's query plans: on a real PostgreSQL database with a million change
points and 100,000 crawls, the reads gpuradar makes all the time use indexes (migrations
0003 and 0008 add the ones they need), and `db prune` reads each table once or through an
index, never once per row. The statements checked are the ones the query functions really
send, captured on the way to the server and EXPLAINed with their values; the crawl reads
are checked on SQLite too."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event

from gpuradar.storage import alert_store, maintenance, owner, queries
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
    # each spot offer's interruption band: five points 60 days apart
    f"""INSERT INTO interruption_change (offer_id, at, band, rate, period, source, as_of)
    SELECT o, extract(epoch FROM now())::bigint - k * 3600 * 24 * 60,
        (ARRAY['<5%', '5-10%', '10-15%', '15-20%', '>20%'])[k], NULL, 'month',
        'AWS Spot Advisor', NULL
    FROM generate_series(3, {OFFERS}, 3) o, generate_series(1, 5) k""",
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


def sent_by(engine: Engine, call: Callable[[], Any], keep: Callable[[str], bool]
            ) -> list[tuple[str, Any]]:
    """(statement, parameters) of every statement `call` sends that `keep` accepts."""
    sent: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if keep(statement):
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    return sent


def plans(engine: Engine, call: Callable[[], Any]) -> list[tuple[str, dict]]:
    """(statement, plan tree) of every SELECT `call` sends."""
    sent = sent_by(engine, call, lambda statement: statement.lstrip().upper().startswith(
        "SELECT"))
    out = []
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        for statement, params in sent:
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, params)
            out.append((statement, cursor.fetchone()[0][0]["Plan"]))
    return out


EXPLAIN = "EXPLAIN (FORMAT JSON) "


def explained(engine: Engine, call: Callable[[], Any]) -> list[tuple[str, dict]]:
    """(statement, plan tree) of every UPDATE and DELETE `call` sends, each EXPLAINed in its
    place instead of run: the database is left as it was."""
    sent: list[tuple[str, dict]] = []

    def explain(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().split(None, 1)[0].upper() in ("UPDATE", "DELETE"):
            return EXPLAIN + statement, parameters
        return statement, parameters

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.startswith(EXPLAIN):
            sent.append((statement.removeprefix(EXPLAIN), cursor.fetchone()[0][0]["Plan"]))

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    event.listen(engine, "after_cursor_execute", capture)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", explain)
        event.remove(engine, "after_cursor_execute", capture)
    return sent


def _nodes(node: dict) -> Iterator[dict]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def access(plan: dict, table: str) -> list[tuple[str, str | None]]:
    """How `table` is read: (node type, index) for each scan of it; a bitmap heap scan
    names the index of its bitmap; the node of an UPDATE or DELETE itself writes."""
    found = []
    for node in _nodes(plan):
        if node.get("Relation Name") != table or node["Node Type"] == "ModifyTable":
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


def per_row_scans(plan: dict, table: str) -> list[str]:
    """Scans of `table` without an index that run once for each row of another input: on
    the inner side of a nested loop, or in a subplan that is not hashed (run once)."""
    hashed = set(re.findall(r"hashed (SubPlan \d+)", str(plan)))
    repeated = [node["Plans"][1] for node in _nodes(plan) if node["Node Type"] == "Nested Loop"]
    repeated += [node for node in _nodes(plan)
                 if node.get("Parent Relationship") == "SubPlan"
                 and node.get("Subplan Name") not in hashed]
    return [f"{n['Node Type']} of {table} under {r['Node Type']}" for r in repeated
            for n in _nodes(r) if n.get("Relation Name") == table
            and n["Node Type"] not in INDEX_SCANS | {"Bitmap Heap Scan"}]


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


def test_current_cheapest_per_source_uses_indexes(big_engine):
    # what Prometheus scrapes: the cheapest offer of every GPU, pricing and source
    reads = reads_of(big_engine, lambda: queries.cheapest_per_source(big_engine), "offer")
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


def test_running_crawls_and_failures_since_the_last_success_are_index_ranges(big_engine):
    # the crawls not ok are few (running, failed, partial): their partial index answers the
    # crawls left running and the failures since each source's last success
    reads = reads_of(big_engine, lambda: owner.mark_dead_crawls(big_engine), "crawl")
    assert reads == [("Index Scan", "ix_crawl_not_ok")], reads
    updates = explained(big_engine, lambda: queries.mark_interrupted_crawls(big_engine))
    assert [access(plan, "crawl") for _, plan in updates] == [
        [("Index Scan", "ix_crawl_not_ok")]], updates
    fails = [plan for statement, plan in plans(big_engine, lambda: queries.source_health(
        big_engine)) if "count(*)" in statement]
    assert len(fails) == 1
    assert ("Index Only Scan", "ix_crawl_not_ok") in access(fails[0], "crawl"), fails
    # each source's newest (successful) crawl, then its row by primary key: one pass over
    # the crawls whatever the plan, never one per source or per crawl
    for call in (queries.last_success, queries.last_observed, queries.last_crawls,
                 alert_store.crawl_versions):
        for statement, plan in plans(big_engine, lambda call=call: call(big_engine)):
            assert ("Index Scan", "crawl_pkey") in access(plan, "crawl"), statement
            assert not per_row_scans(plan, "crawl"), (statement, plan)
    assert set(queries.last_success(big_engine)) == set(SOURCES)


def test_prune_of_a_million_change_points(big_engine):
    # every offer has 50 change points 8 days apart: a cutoff 100 days back keeps the one
    # in force at the cutoff and the 12 after it
    cutoff = datetime.now(UTC) - timedelta(days=100)
    result = maintenance.prune(big_engine, cutoff, dry_run=True)
    assert result.price_changes == OFFERS * 37
    # the bands of 180, 240 and 300 days ago go; the one of 120 days ago is in force
    assert result.signal_changes == OFFERS // 3 * 3
    # What keeps it fast on any machine: the deletes it sends (EXPLAINed, not run) read
    # price_change, interruption_change and crawl once, or through an index, never once per
    # change point or crawl; the counts of the dry run are the same statements as SELECTs.
    deletes = explained(big_engine, lambda: maintenance.prune(big_engine, cutoff))
    assert [statement.split()[2] for statement, _ in deletes] == [
        "price_change", "interruption_change", "crawl", "notification"]
    counts = plans(big_engine, lambda: maintenance.prune(big_engine, cutoff, dry_run=True))
    assert len(counts) == 4
    for statement, plan in deletes + counts:
        for table in ("price_change", "interruption_change", "crawl"):
            assert not per_row_scans(plan, table), (statement, plan)
    # each source's newest crawls, which prune keeps, come from the index
    assert ("Index Only Scan", "ix_crawl_source_id") in access(deletes[2][1], "crawl")
    assert maintenance.prune(big_engine, cutoff, dry_run=True) == result  # nothing deleted


# -- the crawl reads on SQLite (its plans do not depend on the data: no statistics) ----------
def sqlite_plans(engine: Engine, call: Callable[[], Any]) -> list[tuple[str, list[str]]]:
    """(statement, EXPLAIN QUERY PLAN lines) of every statement on crawl `call` sends."""
    sent = sent_by(engine, call, lambda statement: " crawl" in statement
                   and not statement.startswith("EXPLAIN"))
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()
        return [(statement, [row[3] for row in cursor.execute(
            "EXPLAIN QUERY PLAN " + statement, params).fetchall()]) for statement, params in sent]


def test_crawl_reads_use_the_crawl_indexes_on_sqlite(sqlite_url):
    engine = get_engine(sqlite_url)

    def details(call: Callable[[], Any]) -> list[str]:
        return [line for _, lines in sqlite_plans(engine, call) for line in lines]

    not_ok = "SEARCH crawl USING INDEX ix_crawl_not_ok (status=?)"
    assert details(lambda: owner.mark_dead_crawls(engine)) == [not_ok]
    assert details(lambda: queries.mark_interrupted_crawls(engine)) == [not_ok]
    assert "SEARCH crawl USING COVERING INDEX ix_crawl_not_ok (status=?)" in details(
        lambda: queries.source_health(engine))
    assert details(lambda: queries.consecutive_failures(engine, "aws")) == [
        "SEARCH crawl USING COVERING INDEX ix_crawl_source_id (source=?)"]
    for call in (queries.last_success, queries.last_observed, queries.last_crawls,
                 queries.uncatalogued_offers, alert_store.crawl_versions, queries.source_health):
        found = details(lambda call=call: call(engine))
        assert "SCAN crawl USING COVERING INDEX ix_crawl_source_id" in found, (call, found)
        assert "SEARCH crawl USING INTEGER PRIMARY KEY (rowid=?)" in found, (call, found)
        assert "SCAN crawl" not in found, (call, found)  # never the rows themselves
