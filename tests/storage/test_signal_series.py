"""Interruption signals are stored as a series (issue #51, migration 0010): one change point
when a spot offer's band, rate or source changes, nothing when it is unchanged or unknown,
and prices are never touched by it. On real signal data: the AWS Spot Advisor capture the
demo replays (2025-06-28, spider-parsed and pipeline-normalized as a crawl does), the
DescribeSpotAdvice and Resource Graph answers of tests/fixtures, read by their spiders'
readers. SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

import gpuradar
from gpuradar.core.currency import FxTable
from gpuradar.core.items import PriceItem
from gpuradar.crawler.pipelines import normalize, validate
from gpuradar.crawler.spiders.alibaba import SpotAdvice, read_spot_advice
from gpuradar.crawler.spiders.aws import AwsSpider
from gpuradar.crawler.spiders.azure import read_evictions
from gpuradar.storage import queries
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.models import CHANGE, SIGNAL
from tests.helpers import FIXTURES, callback_spider, response

RECORDING = Path(gpuradar.__file__).parent / "recordings" / "aws"
ADVISOR = json.loads((RECORDING / "0001-spot-advisor-data-json.json").read_text())
SPOT_FEED = json.loads((RECORDING / "0003-spot-json.json").read_text())
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
P5 = ("us-east-1", "p5.48xlarge")


def aws_items(advisor: dict[str, Any], captured: str, at: datetime) -> list[PriceItem]:
    """The spot offers an AWS crawl stores from these answers: the spider's items after the
    pipeline's validation and normalization."""
    spider = callback_spider(AwsSpider)
    list(spider.parse_advisor(response(advisor, recording_captured=captured)))
    out = []
    for item in spider.spot_items(SPOT_FEED, "spot.json"):
        if isinstance(item, PriceItem) and validate(item) is None \
                and normalize(item, FxTable()) is None:
            item.observed_at = at
            out.append(item)
    return out


def crawl(engine, source: str, items: list[PriceItem], at: datetime):
    writer = CrawlWriter(engine, source, started_at=at)
    writer.add(items)
    return writer.finish("ok")


def signal_rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(SIGNAL)).scalar_one()


def price_rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(CHANGE)).scalar_one()


def offer_id(engine, source: str, region: str, instance_type: str) -> int:
    [offer] = queries.find_offer(engine, source, instance_type, region, "spot")
    return offer["id"]


def moved(band_index: int) -> dict[str, Any]:
    """The capture with p5.48xlarge in us-east-1 in another of its own bands, as a later
    feed would say (the bands and every other entry as captured)."""
    doc = copy.deepcopy(ADVISOR)
    doc["spot_advisor"]["us-east-1"]["Linux"]["p5.48xlarge"]["r"] = band_index
    return doc


def test_a_band_change_is_stored_once_and_an_unchanged_band_writes_nothing(engine):
    first = aws_items(ADVISOR, "2025-06-28", T0)
    # distinct offers (the feed lists a few twice; the first one is stored)
    banded = {i.key for i in first if "interruption" in i.attributes}
    assert len(banded) > 10
    crawl(engine, "aws", first, T0)
    assert signal_rows(engine) == len(banded)  # each offer's first signal: one row
    p5 = offer_id(engine, "aws", *P5)
    [start] = queries.signal_changes(engine, p5)
    assert (start["band"], start["source"], start["as_of"]) == (
        ">20%", "AWS Spot Advisor", "2025-06-28")  # the real band of that day
    assert (start["monthly_low"], start["monthly_high"], start["risk"]) == (0.2, None, "high")
    assert start["valid_from"] == T0 and start["valid_to"] is None

    # The same answer a day later (dated later): nothing written, prices nor signals.
    prices = price_rows(engine)
    crawl(engine, "aws", aws_items(ADVISOR, "2025-06-29", T0 + timedelta(days=1)),
          T0 + timedelta(days=1))
    assert (signal_rows(engine), price_rows(engine)) == (len(banded), prices)

    # The band moves to "<5%" (the capture's first range): one row, the price untouched.
    later = T0 + timedelta(days=2)
    assert ADVISOR["ranges"][0]["label"] == "<5%"
    crawl(engine, "aws", aws_items(moved(0), "2025-07-05", later), later)
    assert signal_rows(engine) == len(banded) + 1
    assert price_rows(engine) == prices
    old, new = queries.signal_changes(engine, p5)
    assert old["valid_to"] == later and (old["band"], old["as_of"]) == (">20%", "2025-06-28")
    assert (new["band"], new["as_of"], new["valid_to"], new["risk"]) == (
        "<5%", "2025-07-05", None, "low")
    assert new["text"] == "interruption <5%/month (AWS Spot Advisor, 2025-07-05)"
    [offer] = [o for o in queries.current_offers(engine) if o["id"] == p5]
    assert offer["active"] and offer["attributes"]["interruption"] == "<5%"


def test_an_unknown_signal_writes_nothing_and_is_not_a_change(engine):
    crawl(engine, "aws", aws_items(moved(0), "2025-06-28", T0), T0)
    stored = signal_rows(engine)
    # The advisor feed cannot be read: the offers come without a band.
    spider = callback_spider(AwsSpider)
    unknown = [i for i in spider.spot_items(SPOT_FEED, "spot.json")
               if isinstance(i, PriceItem) and validate(i) is None
               and normalize(i, FxTable()) is None]
    assert not any("interruption" in i.attributes for i in unknown)
    at = T0 + timedelta(days=1)
    for i in unknown:
        i.observed_at = at
    crawl(engine, "aws", unknown, at)
    assert signal_rows(engine) == stored
    # The band read again as it was: still no change, the first point stands.
    again = T0 + timedelta(days=2)
    crawl(engine, "aws", aws_items(moved(0), "2025-07-01", again), again)
    assert signal_rows(engine) == stored
    [point] = queries.signal_changes(engine, offer_id(engine, "aws", *P5))
    assert (point["band"], point["as_of"], point["valid_from"]) == ("<5%", "2025-06-28", T0)


def spot_offer(source: str, region: str, zone: str, instance_type: str, gpu: str,
               attributes: dict[str, Any], at: datetime) -> PriceItem:
    # The prices are not what is tested here: one per offer, the same in every crawl.
    return PriceItem(source=source, region=region, zone=zone, instance_type=instance_type,
                     pricing="spot", gpu=gpu, gpu_count=1, price=1.0, currency="USD",
                     available=True, observed_at=at, price_usd=1.0, price_per_gpu_usd=1.0,
                     attributes=attributes)


def alibaba_items(answer: dict[str, Any], day: str, at: datetime) -> list[PriceItem]:
    advice = SpotAdvice()
    read_spot_advice(answer, advice, day, lambda _reason: None)
    return [spot_offer("alibaba", "cn-hangzhou", zone, itype, "A10", advice.attributes(
        itype, zone), at) for itype, zone in sorted(advice.signals)]


def test_alibabas_rate_is_a_change_and_its_band_kept_with_it(engine):
    answer = json.loads((FIXTURES / "alibaba" / "describe_spot_advice_gn7i.json").read_text())
    crawl(engine, "alibaba", alibaba_items(answer, "2026-12-01", T0), T0)
    assert signal_rows(engine) == 2  # one per zone
    crawl(engine, "alibaba", alibaba_items(answer, "2026-12-02", T0 + timedelta(days=1)),
          T0 + timedelta(days=1))
    assert signal_rows(engine) == 2
    # The 30-day rate of zone i moves within its band (another day's answer): a change.
    later = copy.deepcopy(answer)
    resource = later["AvailableSpotZones"]["AvailableSpotZone"][0]["AvailableSpotResources"][
        "AvailableSpotResource"][0]
    resource["InterruptionRate"] = 2.4
    at = T0 + timedelta(days=2)
    crawl(engine, "alibaba", alibaba_items(later, "2026-12-03", at), at)
    assert signal_rows(engine) == 3
    [offer] = queries.find_offer(engine, "alibaba", "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou",
                                 "spot", zone="cn-hangzhou-i")
    old, new = queries.signal_changes(engine, offer["id"])
    assert (old["band"], old["rate"], old["period"]) == ("0-3%", 1.2, "30 days")
    assert (new["band"], new["rate"], new["as_of"], new["valid_from"]) == (
        "0-3%", 2.4, "2026-12-03", at)
    assert new["text"].startswith("interruption 0-3%/30 days (average 2.4%)")
    with engine.connect() as conn:
        ids = dict(conn.execute(select(CHANGE.c.offer_id, func.count())
                                .group_by(CHANGE.c.offer_id)).all())
    assert sorted(ids.values()) == [1, 1]  # prices: each offer's first point only


def test_azures_eviction_bands_are_stored_as_published(engine):
    page = json.loads((FIXTURES / "azure" / "resource_graph_spot_eviction_rates.json")
                      .read_text())
    rates: dict[tuple[str, str], dict[str, Any]] = {}
    read_evictions(page, "2026-12-01", rates, lambda _reason: None)
    items = [spot_offer("azure", region, "", sku, "A100", attrs, T0)
             for (sku, region), attrs in sorted(rates.items())]
    crawl(engine, "azure", items, T0)
    oid = offer_id(engine, "azure", "westus3", "standard_nd96amsr_a100_v4")
    [point] = queries.signal_changes(engine, oid)
    # Azure states no period: the band is shown as published, never made a monthly rate.
    assert (point["band"], point["period"], point["monthly_low"], point["risk"]) == (
        "20+", None, None, "unknown")
    assert signal_rows(engine) == 4


def test_signals_cost_no_query_per_offer(engine):
    """Signals are compared with state the crawl already holds: an unchanged answer reads no
    signal at all; a re-dated one (every offer's details change) reads them once, however
    many offers; a daemon's next crawl (CrawlMemory) keeps them from the last."""
    from sqlalchemy import event

    from gpuradar.storage.ingest import CrawlMemory

    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        memory = CrawlMemory()
        days = [T0 + timedelta(days=n) for n in range(4)]
        for n, (captured, at) in enumerate(zip(
                ("2025-06-28", "2025-06-28", "2025-06-29", "2025-06-30"), days, strict=True)):
            statements.clear()
            writer = CrawlWriter(engine, "aws", started_at=at,
                                 memory=memory if n >= 2 else None)
            writer.add(aws_items(ADVISOR, captured, at))
            writer.finish("ok")
            reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")
                     and "interruption_change" in s]
            assert len(reads) == (0, 0, 1, 0)[n], (n, reads)
    finally:
        event.remove(engine, "before_cursor_execute", seen)


def test_migration_0010_starts_the_series_from_the_stored_signals(db_url):
    """Downgraded to 0009 the table is gone and the stored prices stay; upgraded again, it
    starts with each listed spot offer's current band, dated at its source's last
    successful crawl (known to hold from then on); the next crawl's unchanged band adds
    nothing, and an offer without a band has no point."""
    from alembic import command
    from sqlalchemy import inspect

    from gpuradar.storage import db

    engine = db.open_database(db_url)
    first = aws_items(ADVISOR, "2025-06-28", T0)
    crawl(engine, "aws", first, T0)
    stored = signal_rows(engine)
    prices = price_rows(engine)
    command.downgrade(db.alembic_config(engine), "0009_index_v2")
    assert "interruption_change" not in inspect(engine).get_table_names()
    assert price_rows(engine) == prices
    command.upgrade(db.alembic_config(engine), "head")
    assert signal_rows(engine) == stored == len(
        {i.key for i in first if "interruption" in i.attributes})
    [point] = queries.signal_changes(engine, offer_id(engine, "aws", *P5))
    assert (point["band"], point["as_of"], point["valid_from"]) == (">20%", "2025-06-28", T0)
    assert queries.signal_changes(engine, offer_id(engine, "aws", "us-east-1",
                                                   "g6f.xlarge")) == []
    later = T0 + timedelta(days=1)
    crawl(engine, "aws", aws_items(ADVISOR, "2025-06-29", later), later)
    assert signal_rows(engine) == stored
