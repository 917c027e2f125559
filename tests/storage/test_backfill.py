"""Back-dated history (CrawlWriter.backfill): change points at their own times before an
offer's first observation, on SQLite and PostgreSQL -- never over live data, never twice,
never closing anything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from gpuradar.core.backfill import PriceHistory
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.models import CHANGE, OFFER
from gpuradar.storage.queries import spans
from tests.storage.test_index import T0, item

DAY = 86400


def epoch(when: datetime) -> int:
    return int(when.timestamp())


def history(points: list[tuple[datetime, float]], instance: str = "A") -> PriceHistory:
    spot = item("aws", instance, 1.0, pricing="spot")
    return PriceHistory("aws", spot.key, 8, "USD", [(epoch(t), p) for t, p in points], 90)


def changes(engine) -> list[tuple[int, int | None]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            select(CHANGE.c.at, CHANGE.c.price_micros).order_by(CHANGE.c.at))]


def first_crawl(engine, points, at: datetime = T0):
    writer = CrawlWriter(engine, "aws", started_at=at)
    writer.add([item("aws", "A", 2.0, pricing="spot", at=at)])
    done = writer.backfill([history(points)])
    return done, writer.finish("ok")


def test_back_dated_points_go_before_the_first_observation_and_move_first_seen(engine):
    old = [(T0 - timedelta(days=80), 14.0), (T0 - timedelta(days=40), 16.0),
           (T0 - timedelta(days=39), 16.0),            # no change: not a change point
           (T0 - timedelta(days=2), 16.0 + 0.0)]
    done, summary = first_crawl(engine, old)
    assert (done.points, done.types, done.regions) == (2, {"A"}, {"r1"})
    assert summary.backfilled is done and summary.status == "ok" and summary.closed == 0
    assert changes(engine) == [(epoch(T0) - 80 * DAY, 14_000_000),
                               (epoch(T0) - 40 * DAY, 16_000_000),
                               (epoch(T0), 16_000_000)]
    with engine.connect() as conn:
        offer = conn.execute(select(OFFER)).one()._mapping
    assert offer["first_seen"] == T0 - timedelta(days=80)
    assert (offer["changed_at"], offer["price"], offer["active"]) == (T0, 16.0, True)
    found = spans(engine, offer["id"])
    assert [(s["valid_from"], s["price"]) for s in found] == [
        (T0 - timedelta(days=80), 14.0), (T0 - timedelta(days=40), 16.0), (T0, 16.0)]


def test_live_data_wins_and_a_second_back_fill_writes_nothing_new(engine):
    first_crawl(engine, [(T0 - timedelta(days=10), 15.0)])
    before = changes(engine)
    later = T0 + timedelta(hours=1)
    writer = CrawlWriter(engine, "aws", started_at=later)
    writer.add([item("aws", "A", 2.0, pricing="spot", at=later)])
    # the same point again, one at the first observation and one after it (live data)
    done = writer.backfill([history([(T0 - timedelta(days=10), 15.0), (T0, 99.0),
                                     (T0 + timedelta(minutes=5), 98.0)])])
    summary = writer.finish("ok")
    assert done.points == 0 and summary.changed == 0 and summary.closed == 0
    assert changes(engine) == before


def test_a_history_of_an_offer_the_crawl_did_not_store_is_not_written(engine):
    writer = CrawlWriter(engine, "aws", started_at=T0)
    writer.add([item("aws", "A", 2.0, pricing="spot")])
    done = writer.backfill([history([(T0 - timedelta(days=3), 12.0)], instance="B")],
                           refused=2)
    writer.finish("ok")
    assert (done.points, done.refused) == (0, 2)
    assert done.line() == ("back-filled 90 days: 0 price points for 0 types in 0 regions "
                           "(2 unreadable or implausible, not stored)")
    assert len(changes(engine)) == 1


def test_back_dated_points_never_close_an_offer_a_failed_crawl_keeps(engine):
    first_crawl(engine, [(T0 - timedelta(days=5), 15.0)])
    later = T0 + timedelta(hours=2)
    writer = CrawlWriter(engine, "aws", started_at=later)
    writer.backfill([history([(T0 - timedelta(days=9), 13.0)])])
    summary = writer.finish("failed")
    with engine.connect() as conn:
        assert conn.execute(select(OFFER.c.active)).scalar_one() is True
    assert summary.closed == 0
    # an older point than the first still fits before it: history, not a change now
    assert changes(engine)[0] == (epoch(T0) - 9 * DAY, 13_000_000)
    assert datetime.fromtimestamp(changes(engine)[-1][0], UTC) == T0
