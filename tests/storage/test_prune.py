"""Retention (`gpuradar db prune`), on a real SQLite file and a real PostgreSQL database:
what the store answers from the cutoff on is the same before and after pruning."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select

from gpuradar.storage import maintenance, queries
from gpuradar.storage.db import open_database
from gpuradar.storage.models import CHANGE, CRAWL, OFFER, OUTBOX, SIGNAL
from tests.clirun import gpuradar

NOW = datetime.now(UTC).replace(microsecond=0)
CUTOFF = NOW - timedelta(days=400)


def days_ago(n: float) -> datetime:
    return NOW - timedelta(days=n)


def add_offer(conn, instance: str, changes: list[tuple[float, float | None, bool | None]],
              source: str = "azure", active: bool = True) -> int:
    """An offer with change points (days ago, price or None for 'not listed', available)."""
    last = changes[-1]
    price = next((p for _, p, _ in reversed(changes) if p is not None), 1.0)
    oid = conn.execute(insert(OFFER).values(
        source=source, region="eastus", zone="", instance_type=instance, pricing="on_demand",
        gpu="H100-SXM-80GB", gpu_count=1, price=price, currency="USD", price_usd=price,
        price_per_gpu_usd=price, available=last[2], url="", attributes={},
        first_seen=days_ago(changes[0][0]), changed_at=days_ago(last[0]), active=active,
    ).returning(OFFER.c.id)).scalar_one()
    conn.execute(insert(CHANGE), [
        {"offer_id": oid, "at": int(days_ago(d).timestamp()),
         "price_micros": None if p is None else round(p * 1_000_000), "available": a}
        for d, p, a in changes])
    return oid


def add_signals(conn, instance: str, bands: list[tuple[float, str]]) -> int:
    """A spot offer with interruption-signal change points (days ago, AWS band)."""
    oid = add_offer(conn, instance, [(bands[0][0], 0.5, True)])
    conn.execute(OFFER.update().where(OFFER.c.id == oid).values(pricing="spot"))
    conn.execute(insert(SIGNAL), [
        {"offer_id": oid, "at": int(days_ago(d).timestamp()), "band": band, "rate": None,
         "period": "month", "source": "AWS Spot Advisor", "as_of": None}
        for d, band in bands])
    return oid


def add_crawl(conn, source: str, days: float, status: str) -> int:
    return conn.execute(insert(CRAWL).values(
        source=source, started_at=days_ago(days), finished_at=days_ago(days), status=status,
        dropped={}, unknown_gpus=[], error="").returning(CRAWL.c.id)).scalar_one()


def add_notification(conn, days: float, status: str) -> int:
    return conn.execute(insert(OUTBOX).values(
        created_at=days_ago(days), alert_key="rule:h100", kind="firing", target="slack",
        title="H100 under $2/h", status=status, next_attempt_at=days_ago(days),
    ).returning(OUTBOX.c.id)).scalar_one()


@pytest.fixture
def history(engine):
    """Offers whose history straddles the 400-day cutoff, crawls, notifications."""
    with engine.begin() as conn:
        ids = {
            # changed before, around and after the cutoff: the 420-day point is in force
            "A": add_offer(conn, "A", [(500, 3.0, True), (450, 2.5, True), (420, 2.0, False),
                                       (10, 1.5, True)]),
            # one change long ago: still in force today, kept
            "B": add_offer(conn, "B", [(500, 4.0, True)]),
            # vanished before the cutoff: its 'not listed' point stays in force
            "C": add_offer(conn, "C", [(500, 5.0, True), (450, None, None)], active=False),
            # only recent history: untouched
            "D": add_offer(conn, "D", [(300, 6.0, True), (100, 5.5, None)]),
        }
        # interruption bands: the 420-day band is in force at the cutoff, 500 and 450 go;
        # T's one old band is in force today; U's bands are all recent
        signals = {"S": add_signals(conn, "S", [(500, "<5%"), (450, "5-10%"), (420, "10-15%"),
                                                (10, ">20%")]),
                   "T": add_signals(conn, "T", [(600, "<5%")]),
                   "U": add_signals(conn, "U", [(300, "<5%"), (100, "5-10%")])}
        # azure crawls every so often; aws stopped (disabled) 500 days ago: its last
        # success and last crawl must survive, they are what its freshness is read from
        crawls = [("azure", d, "ok") for d in (700, 600, 450, 401, 399, 1)]
        crawls += [("azure", 420, "failed"), ("azure", 0.5, "failed"), ("aws", 520, "failed"),
                   ("aws", 510, "ok"), ("aws", 500, "failed")]
        for source, d, status in sorted(crawls, key=lambda c: -c[1]):  # ids grow with time
            add_crawl(conn, source, d, status)
        notes = {"old_sent": add_notification(conn, 500, "sent"),
                 "old_failed": add_notification(conn, 450, "failed"),
                 "old_pending": add_notification(conn, 450, "pending"),
                 "new_sent": add_notification(conn, 5, "sent")}
    return ids, notes, signals


def answers(engine, ids: dict[str, int]) -> dict:
    """Everything the store says from the cutoff on."""
    probes = [CUTOFF, CUTOFF + timedelta(days=1), days_ago(350), days_ago(200), days_ago(50),
              days_ago(1)]
    out = {}
    for name, oid in ids.items():
        for at in probes:
            span = queries.price_at(engine, oid, at)
            out[name, at] = None if span is None else (span["price"], span["available"])
    out["last_success"] = queries.last_success(engine)
    out["last_crawls"] = {s: c["id"] for s, c in queries.last_crawls(engine).items()}
    out["failures"] = {s: queries.consecutive_failures(engine, s) for s in ("aws", "azure")}
    return out


def bands_from_cutoff(engine, signals: dict[str, int]) -> dict:
    """Each offer's interruption band in force at the cutoff and at every later change."""
    out = {}
    for name, oid in signals.items():
        series = queries.signal_changes(engine, oid)
        at_cutoff = [p["band"] for p in series if p["valid_from"] <= CUTOFF]
        out[name] = (at_cutoff[-1] if at_cutoff else None,
                     [(p["valid_from"], p["band"]) for p in series if p["valid_from"] > CUTOFF])
    return out


def count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_prune_keeps_what_the_cutoff_still_answers(engine, history):
    ids, notes, signals = history
    before = answers(engine, ids)
    bands_before = bands_from_cutoff(engine, signals)
    changes_before, crawls_before = count(engine, CHANGE), count(engine, CRAWL)

    dry = maintenance.prune(engine, CUTOFF, dry_run=True)
    assert (count(engine, CHANGE), count(engine, CRAWL)) == (changes_before, crawls_before)

    result = maintenance.prune(engine, CUTOFF)
    # A loses 500 and 450 (420 is in force at the cutoff), C loses 500 (its 'gone' point
    # stays); azure loses 700, 600, 450, 420 (failed), 401; aws keeps its last success and
    # its latest crawl, loses the failure before them
    assert (result.price_changes, result.crawls, result.notifications) == (3, 6, 2)
    assert (dry.price_changes, dry.crawls, dry.notifications) == (3, 6, 2)
    assert (result.signal_changes, dry.signal_changes) == (2, 2)  # S's 500 and 450 days
    assert answers(engine, ids) == before
    assert bands_from_cutoff(engine, signals) == bands_before
    assert [(p["valid_from"], p["band"]) for p in queries.signal_changes(engine, signals["S"])
            ] == [(days_ago(420), "10-15%"), (days_ago(10), ">20%")]
    assert count(engine, SIGNAL) == 5

    first = queries.spans(engine, ids["A"])[0]
    assert first["valid_from"] == days_ago(420) and first["price"] == 2.0
    assert [s["price"] for s in queries.spans(engine, ids["B"])] == [4.0]
    assert queries.spans(engine, ids["C"]) == []
    assert len(queries.spans(engine, ids["D"])) == 2
    with engine.connect() as conn:
        left = set(conn.execute(select(OUTBOX.c.id)).scalars())
    assert left == {notes["old_pending"], notes["new_sent"]}

    again = maintenance.prune(engine, CUTOFF)
    assert (again.price_changes, again.crawls, again.notifications) == (0, 0, 0)
    assert again.signal_changes == 0


def test_prune_with_vacuum_gives_a_working_database(engine, history):
    ids, _, _ = history
    maintenance.prune(engine, CUTOFF)
    maintenance.vacuum(engine)
    assert queries.price_at(engine, ids["A"], days_ago(5))["price"] == 1.5


def test_db_prune_command(db_url, history):
    ids, _, _ = history
    proc = gpuradar("db", "prune", "--older-than", "400d", "--dry-run", "--json", db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    dry = json.loads(proc.stdout)
    assert dry["dry_run"] is True
    assert dry["deleted"] == {"price_change": 3, "interruption_change": 2, "crawl": 6,
                              "notification": 2}

    proc = gpuradar("db", "prune", "--older-than", "400d", "--vacuum", db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    assert ("deleted 3 change point(s), 2 interruption-signal change(s), 6 crawl record(s), "
            "2 notification(s)") in proc.stdout

    engine = open_database(db_url)
    assert queries.price_at(engine, ids["A"], days_ago(399))["price"] == 2.0
    proc = gpuradar("db", "prune", "--older-than", "400d", "--json", db_url=db_url)
    assert json.loads(proc.stdout)["deleted"] == {"price_change": 0, "interruption_change": 0,
                                                  "crawl": 0, "notification": 0}


@pytest.mark.parametrize("bad", ["400", "400x", "forever", "", "-3d"])
def test_an_age_without_a_unit_is_refused(bad):
    import gpuradar.cli  # noqa: F401  (loads the command modules in their order)
    from gpuradar.cli.db_cmd import parse_age

    with pytest.raises(ValueError, match="--older-than"):
        parse_age(bad)
    assert parse_age("58w") == timedelta(weeks=58)
    assert parse_age("1d12h") == timedelta(days=1, hours=12)


def test_db_prune_command_refuses_a_bare_number(sqlite_url):
    proc = gpuradar("db", "prune", "--older-than", "400", db_url=sqlite_url)
    assert proc.returncode == 2
    assert "give a number with a unit" in proc.stderr
