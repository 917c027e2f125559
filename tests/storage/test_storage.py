"""Change-point storage semantics, on SQLite and on PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from gpuradar.core.items import PriceItem
from gpuradar.storage import queries
from gpuradar.storage.ingest import CrawlMemory, CrawlWriter
from gpuradar.storage.models import CHANGE

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def item(instance: str, price: float, at: datetime, *, region: str = "eastus",
         gpu: str = "H100-SXM-80GB", count: float = 8, available: bool | None = True,
         pricing: str = "on_demand") -> PriceItem:
    return PriceItem(source="azure", region=region, instance_type=instance, pricing=pricing,
                     gpu=gpu, gpu_count=count, price=price, currency="USD", available=available,
                     observed_at=at, price_usd=price, price_per_gpu_usd=price / count)


#: The memory of one crawl service (a daemon's), kept from crawl to crawl; emptied for each
#: test, and where a test restarts the process.
MEMORY = CrawlMemory()


@pytest.fixture(autouse=True)
def _a_new_crawl_service():
    MEMORY.clear()


def crawl(engine, items, status="ok", at=None, unreadable=(), error=""):
    writer = CrawlWriter(engine, "azure", started_at=at, memory=MEMORY)
    writer.add(items)
    return writer.finish(status, unreadable=unreadable, error=error)


def span_count(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(CHANGE)).scalar_one()


def test_unchanged_observation_writes_no_span(engine):
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    assert span_count(engine) == 2
    summary = crawl(engine, [item("A", 80.0, T0 + timedelta(hours=1)),
                             item("B", 40.0, T0 + timedelta(hours=1))], at=T0 + timedelta(hours=1))
    assert (summary.new_offers, summary.changed, summary.closed) == (0, 0, 0)
    assert span_count(engine) == 2
    offer = queries.find_offer(engine, "azure", "A")[0]
    (span,) = queries.spans(engine, offer["id"])
    assert span["open"] and span["valid_from"] == T0
    # The open span reaches the last successful crawl.
    assert span["seen_until"] >= T0 + timedelta(hours=1)


def test_price_change_opens_a_new_span_and_closes_the_old(engine):
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    summary = crawl(engine, [item("A", 72.0, t1)], at=t1)
    assert summary.changed == 1
    offer = queries.find_offer(engine, "azure", "A")[0]
    first, second = queries.spans(engine, offer["id"])
    assert first["price"] == 80.0 and first["valid_to"] == t1
    assert second["price"] == 72.0 and second["open"]
    assert offer["price"] == 72.0 and offer["changed_at"].replace(tzinfo=UTC) == t1


def test_availability_change_opens_a_span(engine):
    crawl(engine, [item("A", 80.0, T0, available=True)], at=T0)
    crawl(engine, [item("A", 80.0, T0 + timedelta(minutes=5), available=False)],
          at=T0 + timedelta(minutes=5))
    offer = queries.find_offer(engine, "azure", "A")[0]
    assert [s["available"] for s in queries.spans(engine, offer["id"])] == [True, False]


def test_failed_crawl_closes_nothing(engine):
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    t1 = T0 + timedelta(hours=1)
    summary = crawl(engine, [item("A", 80.0, t1)], status="failed", at=t1)
    assert summary.closed == 0
    rows = queries.current_offers(engine)
    assert {r["instance_type"] for r in rows} == {"A", "B"}
    assert queries.last_success(engine)["azure"] < t1


def test_missing_from_successful_crawl_is_closed_as_unavailable(engine):
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    t1 = T0 + timedelta(hours=1)
    summary = crawl(engine, [item("A", 80.0, t1)], at=t1)
    assert summary.closed == 1
    assert {r["instance_type"] for r in queries.current_offers(engine)} == {"A"}
    gone = queries.find_offer(engine, "azure", "B")[0]
    assert gone["active"] is False and gone["available"] is False
    (span,) = queries.spans(engine, gone["id"])
    assert span["valid_to"] == t1
    # It comes back: a new span, listed again.
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [item("A", 80.0, t2), item("B", 40.0, t2)], at=t2)
    assert len(queries.spans(engine, gone["id"])) == 2
    assert {r["instance_type"] for r in queries.current_offers(engine)} == {"A", "B"}


def test_empty_successful_crawl_is_a_failure_and_closes_nothing(engine):
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    summary = crawl(engine, [], at=T0 + timedelta(hours=1))
    assert summary.status == "failed" and summary.closed == 0
    assert summary.error == "crawl returned no offers; nothing closed"
    assert len(queries.current_offers(engine)) == 1
    # The spider's own reason, when it gave one, is the one reported.
    said = crawl(engine, [], at=T0 + timedelta(hours=2), error="page 2 lost")
    assert (said.status, said.error) == ("failed", "page 2 lost")
    # A crawl that already failed or ended partial keeps its outcome and its (empty) reason.
    assert [(s.status, s.error) for s in (
        crawl(engine, [], status="failed", at=T0 + timedelta(hours=3)),
        crawl(engine, [], status="partial", at=T0 + timedelta(hours=4)))] == [
        ("failed", ""), ("partial", "")]


def test_price_at_time_is_exact(engine):
    t1, t2 = T0 + timedelta(hours=2), T0 + timedelta(hours=4)
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    crawl(engine, [item("A", 72.0, t1)], at=t1)
    crawl(engine, [item("A", 72.0, t2)], at=t2)
    oid = queries.find_offer(engine, "azure", "A")[0]["id"]
    assert queries.price_at(engine, oid, T0 - timedelta(seconds=1)) is None
    assert queries.price_at(engine, oid, T0)["price"] == 80.0
    assert queries.price_at(engine, oid, t1 - timedelta(seconds=1))["price"] == 80.0
    assert queries.price_at(engine, oid, t1)["price"] == 72.0
    assert queries.price_at(engine, oid, t2 - timedelta(minutes=1))["price"] == 72.0
    at_last = queries.price_at(engine, oid, t2)  # the last successful crawl
    assert (at_last["price"], at_last["carried"]) == (72.0, False)
    # Beyond the last successful crawl the price holds until an observation says otherwise,
    # marked as carried forward (it was answered "not listed").
    for later in (t2 + timedelta(seconds=1), datetime.now(UTC) + timedelta(days=1)):
        span = queries.price_at(engine, oid, later)
        assert (span["price"], span["carried"], span["seen_until"]) == (72.0, True, t2)
    # A span that ended was seen until it ended, not until the last crawl.
    assert [s["seen_until"] for s in queries.spans(engine, oid)] == [t1, t2]


def test_cheapest_h100_over_the_last_seven_days(engine):
    now = datetime.now(UTC)
    old, mid, recent = now - timedelta(days=9), now - timedelta(days=5), now - timedelta(hours=1)
    crawl(engine, [item("A", 16.0, old), item("B", 24.0, old)], at=old)         # $2/GPU-h
    crawl(engine, [item("A", 12.0, mid), item("B", 24.0, mid)], at=mid)         # $1.5/GPU-h
    crawl(engine, [item("A", 20.0, recent), item("B", 24.0, recent)], at=recent)
    best = queries.cheapest_over(engine, ["H100-SXM-80GB"], now - timedelta(days=7))
    assert best["price_per_gpu_usd"] == 1.5 and best["instance_type"] == "A"
    # An 8-day-old 16.0 span that ended 5 days ago still overlaps a 7-day window's start.
    best_10 = queries.cheapest_over(engine, ["H100-SXM-80GB"], now - timedelta(days=10))
    assert best_10["price_per_gpu_usd"] == 1.5
    assert queries.cheapest_over(engine, ["A100-SXM-80GB"], now - timedelta(days=7)) is None
    series = queries.cheapest_series(engine, ["H100-SXM-80GB"], now - timedelta(days=7), now, 7)
    assert series[0][1] == 2.0      # days 7..6 ago: A at $2/GPU-h
    assert series[-1][1] == 1.5     # the $1.5 span lasted until an hour ago
    now_best = queries.cheapest_over(engine, ["H100-SXM-80GB"], recent)
    assert now_best["price_per_gpu_usd"] == 2.5


def test_spot_and_on_demand_are_separate_offers(engine):
    crawl(engine, [item("A", 80.0, T0), item("A", 30.0, T0, pricing="spot")], at=T0)
    rows = queries.current_offers(engine, queries.OfferFilter(pricing="spot"))
    assert [(r["instance_type"], r["price"]) for r in rows] == [("A", 30.0)]
    rows = queries.current_offers(engine, queries.OfferFilter(pricing="on_demand"))
    assert [(r["instance_type"], r["price"]) for r in rows] == [("A", 80.0)]


def test_the_cheapest_price_of_one_kind_of_pricing_ignores_the_other(engine):
    """`gpuradar history --pricing on_demand`: a cheaper spot price of the same machine is
    not the on-demand low (nor the other way round)."""
    now = datetime.now(UTC)
    day = now - timedelta(days=1)
    crawl(engine, [item("A", 80.0, day), item("A", 30.0, day, pricing="spot")], at=day)
    h100 = ["H100-SXM-80GB"]
    since = now - timedelta(days=2)
    assert queries.cheapest_over(engine, h100, since, pricing="on_demand")["price"] == 80.0
    assert queries.cheapest_over(engine, h100, since, pricing="spot")["price"] == 30.0
    assert queries.cheapest_over(engine, h100, since)["price"] == 30.0


def test_a_gpu_memory_floor_keeps_gpus_of_at_least_that_memory(engine):
    crawl(engine, [replace(item("A", 80.0, T0), gpu_memory_gb=80.0),
                   replace(item("C", 40.0, T0, count=1, gpu="A100-PCIE-40GB"),
                           gpu_memory_gb=40.0)], at=T0)
    for floor, shown in ((40, ["A", "C"]), (80, ["A"]), (81, [])):
        flt = queries.OfferFilter(min_gpu_memory=floor)
        assert sorted(r["instance_type"] for r in queries.current_offers(engine, flt)) == shown


def test_region_globs_and_filters(engine):
    crawl(engine, [item("A", 80.0, T0, region="eastus"), item("B", 8.0, T0, region="westeurope",
                                                               count=1, gpu="A100-PCIE-80GB")],
          at=T0)
    flt = queries.OfferFilter(regions=["east*"])
    assert [r["instance_type"] for r in queries.current_offers(engine, flt)] == ["A"]
    flt = queries.OfferFilter(min_gpus=8)
    assert [r["instance_type"] for r in queries.current_offers(engine, flt)] == ["A"]
    flt = queries.OfferFilter(max_price=9.0)
    assert [r["instance_type"] for r in queries.current_offers(engine, flt)] == ["B"]


def test_state_kept_in_memory_is_dropped_when_another_writer_crawled(engine):
    """The in-process state cache must never hide a crawl written by another process."""

    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    seen_by_us = dict(MEMORY.states)          # what this process knew after crawl 1
    crawl(engine, [item("A", 72.0, t1)], at=t1)     # "another process" changes A
    MEMORY.states.update(seen_by_us)          # ... while we still hold the old state
    summary = crawl(engine, [item("A", 72.0, t2)], at=t2)
    assert summary.changed == 0 and span_count(engine) == 2
    # And with an up-to-date cache the same crawl is also unchanged.
    assert crawl(engine, [item("A", 72.0, t2 + timedelta(hours=1))],
                 at=t2 + timedelta(hours=1)).changed == 0


def test_the_cheapest_series_shows_an_offer_in_the_slice_where_it_appeared(engine):
    t90, t2 = T0 + timedelta(minutes=90), T0 + timedelta(hours=2)
    crawl(engine, [item("A", 16.0, T0)], at=T0)                                  # $2/GPU-h
    crawl(engine, [item("A", 16.0, t90), item("C", 8.0, t90)], at=t90)           # $1 from 1:30
    crawl(engine, [item("A", 16.0, t2), item("C", 8.0, t2)], at=t2)
    assert queries.cheapest_series(engine, ["H100-SXM-80GB"], T0, t2, 2) == [
        (T0, 2.0), (T0 + timedelta(hours=1), 1.0)]


def test_consecutive_failures_count_back_to_the_last_successful_crawl(engine):
    assert queries.consecutive_failures(engine, "azure") == 0      # never crawled
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    assert queries.consecutive_failures(engine, "azure") == 0
    crawl(engine, [], status="failed", at=T0 + timedelta(hours=1))
    crawl(engine, [], status="failed", at=T0 + timedelta(hours=2))
    assert queries.consecutive_failures(engine, "azure") == 2


def test_offers_known_to_be_unavailable_are_listed_unless_only_available_ones_are_asked(
        engine):
    crawl(engine, [item("A", 80.0, T0, available=False), item("B", 90.0, T0, available=None),
                   item("C", 99.0, T0)], at=T0)
    assert [r["instance_type"] for r in queries.current_offers(engine)] == ["A", "B", "C"]
    available = queries.current_offers(engine, queries.OfferFilter(available_only=True))
    assert [r["instance_type"] for r in available] == ["B", "C"]   # unknown is not "no"


def test_an_ordinary_crawl_reports_nothing_unreadable(engine):
    assert crawl(engine, [item("A", 80.0, T0)], at=T0).unreadable == 0


def test_a_new_process_sees_unchanged_offers_as_unchanged(engine):
    """The offers' state is read back from the database (no state kept in this process):
    the same observation again is no change and writes nothing."""

    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    MEMORY.states.clear()
    summary = crawl(engine, [item("A", 80.0, t1), item("B", 40.0, t1)], at=t1)
    assert (summary.changed, summary.new_offers) == (0, 0) and span_count(engine) == 2


def test_changed_details_of_an_offer_are_stored_without_a_new_span(engine):
    """vCPUs or the provider's notes change while the price stays: the offer shows the new
    details, and its price history has no new span."""
    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    a = item("A", 80.0, T0)
    a.vcpus, a.attributes = 26, {"stock": "High"}
    crawl(engine, [a], at=T0)
    more = item("A", 80.0, t1)
    more.vcpus, more.attributes = 30, {"stock": "High"}
    assert crawl(engine, [more], at=t1).status == "ok"
    low = item("A", 80.0, t2)
    low.vcpus, low.attributes = 30, {"stock": "Low"}
    assert crawl(engine, [low], at=t2).status == "ok"
    (offer,) = queries.find_offer(engine, "azure", "A")
    assert offer["vcpus"] == 30 and offer["attributes"] == {"stock": "Low"}
    assert span_count(engine) == 1


def test_find_offer_narrows_by_pricing_and_zone(engine):
    z = item("A", 30.0, T0, pricing="spot")
    z.zone = "eastus-2"
    crawl(engine, [item("A", 80.0, T0), z], at=T0)
    assert [o["pricing"] for o in queries.find_offer(engine, "azure", "A", pricing="spot")] \
        == ["spot"]
    assert [o["pricing"] for o in queries.find_offer(engine, "azure", "A", zone="")] \
        == ["on_demand"]
    assert [o["zone"] for o in queries.find_offer(engine, "azure", "A", zone="eastus-2")] \
        == ["eastus-2"]


def test_the_newest_exchange_rate_is_the_one_in_force(engine):
    from datetime import date

    assert queries.store_fx(engine, {}, date(2026, 11, 27)) == 0  # nothing to store
    queries.store_fx(engine, {"CNY": 0.139, "EUR": 1.05}, date(2026, 11, 27))
    queries.store_fx(engine, {"CNY": 0.141}, date(2026, 11, 28))
    assert {c: (u, d) for c, (u, d, _) in queries.latest_fx(engine).items()} == {
        "CNY": (0.141, date(2026, 11, 28)), "EUR": (1.05, date(2026, 11, 27))}


def test_history_of_more_offers_than_one_query_takes_has_each_span_once(engine):
    """Spans are read in chunks of offer ids: an offer on a chunk's edge is not read twice."""
    items = [item(f"I{n:05}", 10.0 + n % 7, T0) for n in range(5003)]
    crawl(engine, items, at=T0)
    spans = queries.gpu_spans(engine, ["H100-SXM-80GB"], T0 - timedelta(hours=1),
                              T0 + timedelta(hours=1))
    assert len(spans) == 5003


def test_a_span_opened_by_a_partial_crawl_is_seen_from_its_own_start(engine):
    """A partial crawl after the last successful one records a new price: its span starts
    then and is not 'seen until' an earlier moment."""
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    crawl(engine, [item("A", 72.0, t1)], status="partial", at=t1)
    offer = queries.find_offer(engine, "azure", "A")[0]
    first, second = queries.spans(engine, offer["id"])
    assert (second["price"], second["valid_from"], second["seen_until"]) == (72.0, t1, t1)


def test_spans_up_to_now_when_no_end_is_given(engine):
    now = datetime.now(UTC).replace(microsecond=0)
    crawl(engine, [item("A", 80.0, now - timedelta(hours=2))], at=now - timedelta(hours=2))
    spans = queries.gpu_spans(engine, ["H100-SXM-80GB"], now - timedelta(hours=3))
    assert [s["price"] for s in spans] == [80.0]


def test_offer_counts_for_metrics_count_only_listed_offers(engine):
    """`gpuradar_offers` counts what is listed now: an offer a complete crawl no longer
    saw is closed and not counted, however its availability was left."""
    crawl(engine, [item("A", 80.0, T0), item("B", 90.0, T0, available=None),
                   item("C", 70.0, T0, pricing="spot")], at=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, t1), item("B", 90.0, t1, available=None)], at=t1)
    assert sorted(queries.offer_counts(engine)) == [
        ("azure", "on_demand", "available", 1), ("azure", "on_demand", "unknown", 1)]


def test_find_offer_narrows_by_region(engine):
    crawl(engine, [item("A", 80.0, T0), item("A", 70.0, T0, region="westus")], at=T0)
    assert [(o["region"], o["price"]) for o in
            queries.find_offer(engine, "azure", "A", region="eastus")] == [("eastus", 80.0)]
    assert len(queries.find_offer(engine, "azure", "A")) == 2


def test_changed_details_of_one_offer_change_no_other_offer(engine):
    """Only A's vCPUs are corrected: B, stored after A, keeps its own."""
    a, b = item("A", 80.0, T0), item("B", 40.0, T0)
    a.vcpus, b.vcpus = 26, 12
    crawl(engine, [a, b], at=T0)
    t1 = T0 + timedelta(hours=1)
    a, b = item("A", 80.0, t1), item("B", 40.0, t1)
    a.vcpus, b.vcpus = 30, 12
    assert crawl(engine, [a, b], at=t1).status == "ok"
    vcpus = {o["instance_type"]: o["vcpus"] for o in queries.current_offers(engine)}
    assert vcpus == {"A": 30, "B": 12}


def test_only_crawls_left_running_are_marked_interrupted(engine):
    """A process starting after a kill fails the crawls the killed one left running; the
    finished crawls keep their outcome."""
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    CrawlWriter(engine, "lambda", started_at=T0)  # never finished: the process was killed
    assert queries.mark_interrupted_crawls(engine) == 1
    last = queries.last_crawls(engine)
    assert last["azure"]["status"] == "ok" and last["azure"]["error"] == ""
    assert last["lambda"]["status"] == "failed"
    assert last["lambda"]["error"] == "interrupted (process stopped during the crawl)"


def test_an_older_exchange_rate_stored_later_does_not_replace_the_newest(engine):
    from datetime import date

    queries.store_fx(engine, {"CNY": 0.141}, date(2026, 11, 28))
    queries.store_fx(engine, {"CNY": 0.139}, date(2026, 11, 27))  # a backfilled day
    assert {c: (u, d) for c, (u, d, _) in queries.latest_fx(engine).items()} == {
        "CNY": (0.141, date(2026, 11, 28))}


def test_find_offer_finds_only_the_instance_type_asked_for(engine):
    crawl(engine, [item("A", 80.0, T0), item("B", 70.0, T0)], at=T0)
    assert [o["instance_type"] for o in queries.find_offer(engine, "azure", "A")] == ["A"]


# -- survivors of the fresh ingest samples (issue #31) ----------------------------------
def test_the_cheapest_price_per_gpu_skips_offers_known_unavailable(engine):
    """The per-GPU lows (`gpuradar_cheapest_usd_per_gpu_hour`, the demo's table) come from
    offers known available or of unknown stock, never from a sold-out one."""
    crawl(engine, [item("A", 80.0, T0), item("B", 8.0, T0, available=False),
                   item("C", 40.0, T0, gpu="A100-SXM-80GB", available=None),
                   item("D", 8.0, T0, gpu="A100-SXM-80GB", available=False)], at=T0)
    assert sorted(queries.cheapest_per_source(engine)) == [
        ("A100-SXM-80GB", "on_demand", "azure", 5.0), ("H100-SXM-80GB", "on_demand", "azure", 10.0)]
    assert [(o["gpu"], o["instance_type"], o["price_per_gpu_usd"])
            for o in queries.cheapest_per_gpu(engine)] == [
        ("A100-SXM-80GB", "C", 5.0), ("H100-SXM-80GB", "A", 10.0)]


def test_the_cheapest_price_over_a_window_skips_spans_known_unavailable(engine):
    """`gpuradar history`'s low: a sold-out offer's price is no price one could have paid
    (unless unavailable offers are asked for)."""
    day = datetime.now(UTC) - timedelta(days=1)
    crawl(engine, [item("A", 80.0, day), item("B", 8.0, day, available=False),
                   item("C", 40.0, day, available=None)], at=day)
    since = day - timedelta(days=1)
    best = queries.cheapest_over(engine, ["H100-SXM-80GB"], since)
    assert (best["instance_type"], best["price_per_gpu_usd"]) == ("C", 5.0)
    anyway = queries.cheapest_over(engine, ["H100-SXM-80GB"], since, available_only=False)
    assert (anyway["instance_type"], anyway["price_per_gpu_usd"]) == ("B", 1.0)


def test_an_offer_url_is_stored_cut_to_2000_characters(engine):
    url = "https://portal.azure.com/#view/" + "x" * 2500
    crawl(engine, [replace(item("A", 80.0, T0), url=url)], at=T0)
    summary = crawl(engine, [replace(item("A", 80.0, T0 + timedelta(hours=1)), url=url)],
                    at=T0 + timedelta(hours=1))
    assert (summary.new_offers, summary.changed) == (0, 0)
    assert [o["url"] for o in queries.current_offers(engine)] == [url[:2000]]


def test_an_offer_listed_twice_in_a_batch_keeps_its_first_price_and_the_rest_is_stored(engine):
    summary = crawl(engine, [item("A", 80.0, T0), item("A", 70.0, T0), item("B", 40.0, T0)],
                    at=T0)
    assert (summary.items, summary.new_offers) == (2, 2)
    prices = {o["instance_type"]: o["price"] for o in queries.current_offers(engine)}
    assert prices == {"A": 80.0, "B": 40.0}


def test_a_span_states_its_price_per_gpu_to_the_micro_dollar(engine):
    """`gpuradar history`'s per-GPU-hour figures keep the precision prices are stored at."""
    crawl(engine, [item("A", 9.876543, T0)], at=T0)
    (span,) = queries.spans(engine, queries.find_offer(engine, "azure", "A")[0]["id"])
    assert (span["price_usd"], span["price_per_gpu_usd"]) == (9.876543, 1.234568)


def test_an_offer_whose_write_failed_is_stored_by_the_next_crawl(engine, monkeypatch):
    """A batch rolled back half-way leaves the writer's memory ahead of the database: that
    memory must not be kept for the next crawl, which would take the lost offer as known."""
    from gpuradar.storage import ingest

    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    crawl(engine, [item("A", 80.0, T0)], at=T0)

    def lost(conn, rows):
        raise RuntimeError("connection lost")

    writer = CrawlWriter(engine, "azure", started_at=t1, memory=MEMORY)
    with monkeypatch.context() as m:
        m.setattr(ingest, "_record_changes", lost)
        with pytest.raises(RuntimeError):
            writer.add([item("A", 72.0, t1), item("B", 40.0, t1)])  # B inserted, then lost
    assert writer.finish("failed", error="connection lost").status == "failed"
    assert crawl(engine, [item("A", 72.0, t2), item("B", 40.0, t2)], at=t2).new_offers == 1
    prices = {o["instance_type"]: o["price"] for o in queries.current_offers(engine)}
    assert prices == {"A": 72.0, "B": 40.0}


def test_an_offer_without_a_usd_price_has_a_history_in_its_own_currency_only(engine):
    """An offer quoted in a currency with no exchange rate stored yet: `gpuradar history`
    shows its quoted price and no USD figure, and no per-GPU low is made up from it."""
    cny = replace(item("A", 80.0, T0), currency="CNY", price_usd=None, price_per_gpu_usd=None)
    crawl(engine, [cny], at=T0)
    (span,) = queries.spans(engine, queries.find_offer(engine, "azure", "A")[0]["id"])
    assert (span["price"], span["currency"], span["price_usd"], span["price_per_gpu_usd"]) \
        == (80.0, "CNY", None, None)
    assert queries.gpu_spans(engine, ["H100-SXM-80GB"], T0 - timedelta(hours=1),
                             T0 + timedelta(hours=1)) == []


def test_consecutive_failures_stop_counting_at_50(engine):
    """`gpuradar_source_consecutive_failures` and the daemon's back-off read at most the
    last 50 crawls, however long a source has been failing."""
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    for n in range(1, 52):
        crawl(engine, [], status="failed", at=T0 + timedelta(minutes=n))
    assert queries.consecutive_failures(engine, "azure") == 50


@pytest.mark.parametrize("available", [False, None], ids=["sold-out", "unknown-stock"])
def test_an_offer_listed_again_unchanged_writes_no_new_span(engine, available):
    """A sold-out offer listed sold out again, or one whose provider never says whether it is
    in stock listed again, is no change, whether this process remembers it or reads it back
    from the database."""

    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    crawl(engine, [item("A", 80.0, T0, available=available)], at=T0)
    assert crawl(engine, [item("A", 80.0, t1, available=available)], at=t1).changed == 0
    MEMORY.states.clear()
    assert crawl(engine, [item("A", 80.0, t2, available=available)], at=t2).changed == 0
    offer = queries.find_offer(engine, "azure", "A")[0]
    assert [(s["available"], s["valid_from"]) for s in queries.spans(engine, offer["id"])] \
        == [(available, T0)]


def test_the_latest_finished_crawl_of_each_source_counts_its_uncatalogued_offers(engine):
    """`gpuradar_uncatalogued_offers{source}`: the products each source's last finished
    crawl could not map, whatever older crawls or a crawl still running reported."""
    def finished(source: str, status: str, uncatalogued: dict[str, int], at) -> None:
        writer = CrawlWriter(engine, source, started_at=at)
        writer.add([replace(item("A", 80.0, at), source=source)])
        writer.finish(status, uncatalogued=uncatalogued)

    finished("azure", "ok", {"ND96 v6": 2, "NV4 v9": 1}, T0)
    finished("lambda", "ok", {"gpu_1x_x": 4}, T0)
    finished("azure", "ok", {"NV4 v9": 5}, T0 + timedelta(hours=1))
    CrawlWriter(engine, "azure", started_at=T0 + timedelta(hours=2))  # still running
    finished("lambda", "failed", {"gpu_1x_y": 7, "gpu_1x_x": 1}, T0 + timedelta(hours=2))
    assert queries.uncatalogued_offers(engine) == {"azure": 5, "lambda": 8}


def test_times_read_back_are_utc(engine):
    """Every time a read returns is aware, in UTC (SQLite stores none), so it compares with
    the crawl's own times and prints as UTC."""
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    crawl(engine, [item("A", 72.0, t1)], at=t1)
    (offer,) = queries.current_offers(engine)
    read = (offer["first_seen"], offer["changed_at"], offer["observed_at"],
            queries.last_success(engine)["azure"], queries.last_observed(engine)["azure"].at)
    assert read == (T0, t1, t1, t1, t1)
    assert {t.utcoffset() for t in read} == {timedelta(0)}


# -- survivors of the fifth fresh ingest sample (issue #31) ------------------------------
def test_a_crawl_still_running_shows_nothing_counted_yet(engine):
    """`gpuradar sources` during a crawl: its record counts nothing until it finishes."""
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    CrawlWriter(engine, "azure", started_at=T0 + timedelta(hours=1))
    running = queries.last_crawls(engine)["azure"]
    fields = ("status", "items", "new_offers", "changed", "closed", "held", "dropped",
              "unknown_gpus", "uncatalogued", "error")
    assert {f: running[f] for f in fields} == {
        "status": "running", "items": 0, "new_offers": 0, "changed": 0, "closed": 0, "held": 0,
        "dropped": {}, "unknown_gpus": [], "uncatalogued": {}, "error": ""}


def test_a_crawl_of_one_source_leaves_every_other_sources_offers_alone(engine):
    """A source's offers read back from the database (a new process) are its own only: a
    crawl of a source named before or after "azure" neither changes nor closes azure's
    offers, not even one with the same region and instance type."""

    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    for n, source in enumerate(("aws", "vastai"), start=1):
        MEMORY.states.clear()
        at = T0 + timedelta(hours=n)
        writer = CrawlWriter(engine, source, started_at=at)
        writer.add([replace(item("A", 70.0, at), source=source)])
        summary = writer.finish("ok")
        assert (summary.new_offers, summary.changed, summary.closed) == (1, 0, 0)
    prices = {(o["source"], o["instance_type"]): o["price"]
              for o in queries.current_offers(engine)}
    assert prices == {("azure", "A"): 80.0, ("azure", "B"): 40.0, ("aws", "A"): 70.0,
                      ("vastai", "A"): 70.0}


def test_gpu_count_and_price_filters_include_their_bounds(engine):
    """`gpuradar prices --min-gpus 4 --max-price 9`: 4 GPUs and $9/GPU-h are shown."""
    crawl(engine, [item("A", 80.0, T0), item("B", 8.0, T0, count=1, gpu="A100-PCIE-80GB"),
                   item("C", 36.0, T0, count=4)], at=T0)

    def shown(**flt) -> list[str]:
        rows = queries.current_offers(engine, queries.OfferFilter(**flt))
        return sorted(r["instance_type"] for r in rows)

    assert shown(min_gpus=4) == ["A", "C"]
    assert shown(min_gpus=5) == ["A"]
    assert shown(max_price=9.0) == ["B", "C"]  # C: $36/h for 4 GPUs
    assert shown(max_price=8.99) == ["B"]


def test_a_history_in_another_currency_follows_the_offers_latest_rate(engine):
    """`gpuradar history` of a CNY offer: each span keeps its quoted price; its USD figure
    converts at the rate of the offer's latest observation (queries._spans_of)."""
    def cny(price: float, rate: float, at: datetime):
        return replace(item("A", price, at), currency="CNY", price_usd=round(price * rate, 6),
                       price_per_gpu_usd=round(price * rate / 8, 6))

    t1 = T0 + timedelta(hours=1)
    crawl(engine, [cny(100.0, 0.14, T0)], at=T0)
    crawl(engine, [cny(50.0, 0.15, t1)], at=t1)
    spans = queries.spans(engine, queries.find_offer(engine, "azure", "A")[0]["id"])
    assert [(s["price"], s["currency"], s["price_usd"], s["price_per_gpu_usd"]) for s in spans] \
        == [(100.0, "CNY", 15.0, 1.875), (50.0, "CNY", 7.5, 0.9375)]


def test_a_failed_market_index_update_fails_no_stored_crawl(engine, monkeypatch, caplog):
    """The crawl is stored first: an index update that fails is a warning (its first line,
    or the error's type when it says nothing), and the crawl stays ok."""
    from gpuradar.storage import index

    def locked(*args, **kwargs):
        raise RuntimeError("database table is locked\n[SQL: UPDATE market_index ...]")

    def silent(*args, **kwargs):
        raise KeyError

    t1 = T0 + timedelta(hours=1)
    with caplog.at_level("WARNING", logger="gpuradar.storage.ingest"):
        monkeypatch.setattr(index, "update_index", locked)
        assert crawl(engine, [item("A", 80.0, T0)], at=T0).status == "ok"
        monkeypatch.setattr(index, "update_index", silent)
        assert crawl(engine, [item("A", 72.0, t1)], at=t1).status == "ok"
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "azure: updating the market index failed: database table is locked",
        "azure: updating the market index failed: KeyError"]
    assert [o["price"] for o in queries.current_offers(engine)] == [72.0]


def test_the_last_success_is_the_last_ok_crawl_whatever_came_after(engine):
    """When a source is next due (`last_success`) and what its offers describe
    (`last_observed`): its last ok crawl, not a later partial, failed or running one."""
    t1, t2, t3 = (T0 + timedelta(hours=h) for h in (1, 2, 3))
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    crawl(engine, [item("A", 80.0, t1)], status="partial", at=t1)
    crawl(engine, [item("A", 80.0, t2)], status="failed", at=t2)
    CrawlWriter(engine, "azure", started_at=t3)
    assert queries.last_success(engine) == {"azure": T0}
    assert queries.last_observed(engine)["azure"].at == T0


def test_the_cheapest_series_skips_spans_known_unavailable(engine):
    """The history chart's lows come from offers one could rent: sold-out ones, listed
    before and after the one available, are left out."""
    t2 = T0 + timedelta(hours=2)
    for at in (T0, t2):
        crawl(engine, [item("B", 8.0, at, available=False), item("A", 16.0, at),
                       item("C", 4.0, at, available=False)], at=at)
    assert queries.cheapest_series(engine, ["H100-SXM-80GB"], T0, t2, 2) == [
        (T0, 2.0), (T0 + timedelta(hours=1), 2.0)]


def test_an_offer_only_a_partial_crawl_listed_is_seen_at_its_start(engine):
    """No successful crawl of the source yet: an offer's open span is seen at its own start
    only, and its price is known then."""
    crawl(engine, [item("A", 80.0, T0)], status="partial", at=T0)
    assert queries.last_success(engine) == {}
    oid = queries.find_offer(engine, "azure", "A")[0]["id"]
    (span,) = queries.spans(engine, oid)
    assert (span["valid_from"], span["seen_until"], span["open"]) == (T0, T0, True)
    assert queries.price_at(engine, oid, T0)["price"] == 80.0


def test_a_partial_crawl_ends_a_run_of_failures(engine):
    """The daemon backs a source off by its failed crawls in a row; a partial crawl is no
    failure (it stored what it got), so the count read back after a restart starts after it,
    as the running daemon's own count does."""
    crawl(engine, [item("A", 80.0, T0)], at=T0)
    for h, status in enumerate(("failed", "partial", "failed", "failed"), start=1):
        crawl(engine, [item("A", 80.0, T0 + timedelta(hours=h))], status=status,
              at=T0 + timedelta(hours=h))
    assert queries.consecutive_failures(engine, "azure") == 2


# -- gaps found reading ingest.py against its tests (issue #31) ---------------------------
def test_an_offer_closed_before_a_restart_is_not_closed_again_and_reopens_when_listed(engine):
    """After a restart the offers are read back from the database: one a crawl closed stays
    closed (the next crawls close nothing), and is listed again when a crawl lists it."""

    t1, t2, t3 = (T0 + timedelta(hours=h) for h in (1, 2, 3))
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    assert crawl(engine, [item("A", 80.0, t1)], at=t1).closed == 1
    MEMORY.states.clear()
    again = crawl(engine, [item("A", 80.0, t2)], at=t2)
    assert (again.closed, again.changed, again.new_offers) == (0, 0, 0)
    MEMORY.states.clear()
    back = crawl(engine, [item("A", 80.0, t3), item("B", 40.0, t3)], at=t3)
    assert (back.closed, back.changed, back.new_offers) == (0, 1, 0)
    b = queries.find_offer(engine, "azure", "B")[0]
    assert [(s["valid_from"], s["valid_to"]) for s in queries.spans(engine, b["id"])] == [
        (T0, t1), (t3, None)]


def test_an_offer_unreadable_crawl_after_crawl_stays_flagged_since_the_first(engine):
    """`unreadable_since` is when gpuradar last could read the offer's price no more: crawls
    that still cannot read it (before or after a restart) keep that time; once read again
    the flag goes, and a later crawl that cannot read it flags it anew."""

    key = ("eastus", "", "B", "on_demand")
    t = [T0 + timedelta(hours=h) for h in range(6)]

    def since(n: int, listed_b: bool = False) -> datetime | None:
        items = [item("A", 80.0, t[n])] + ([item("B", 40.0, t[n])] if listed_b else [])
        summary = crawl(engine, items, at=t[n], unreadable=() if listed_b else [key])
        assert (summary.status, summary.closed) == ("ok", 0)
        return queries.find_offer(engine, "azure", "B")[0]["unreadable_since"]

    crawl(engine, [item("A", 80.0, t[0]), item("B", 40.0, t[0])], at=t[0])
    assert since(1) == t[1]
    assert since(2) == t[1]
    MEMORY.states.clear()
    assert since(3) == t[1]
    assert since(4, listed_b=True) is None
    MEMORY.states.clear()
    assert since(5) == t[5]


def test_a_crawl_that_reprices_or_respecs_some_offers_leaves_the_others_as_they_were(engine):
    """Of 80 offers a crawl reprices 20 and corrects the vCPUs of 20 others: each of those
    shows its own new value, and the 40 unchanged ones (stored before, between and after
    them) keep theirs."""
    def offer(n: int, price: float, vcpus: int, at: datetime) -> PriceItem:
        return replace(item(f"I{n:02}", price, at), vcpus=vcpus)

    crawl(engine, [offer(n, 80.0, 96, T0) for n in range(80)], at=T0)
    t1 = T0 + timedelta(hours=1)
    expected = {f"I{n:02}": (70.0 if n % 4 == 3 else 80.0, 48 if n % 4 == 1 else 96)
                for n in range(80)}
    summary = crawl(engine, [offer(n, *expected[f"I{n:02}"], t1) for n in range(80)], at=t1)
    assert (summary.changed, summary.new_offers, summary.closed) == (20, 0, 0)
    assert {o["instance_type"]: (o["price"], o["vcpus"])
            for o in queries.current_offers(engine)} == expected


def test_a_closed_offer_ends_its_exported_history_with_an_unlisted_unavailable_point(
        engine, tmp_path):
    """`gpuradar export`'s price_changes: an offer a complete crawl no longer listed ends
    with a change point without price, unavailable from then on."""
    import json

    from gpuradar.storage.export import export

    t1 = T0 + timedelta(hours=1)
    crawl(engine, [item("A", 80.0, T0), item("B", 40.0, T0)], at=T0)
    crawl(engine, [item("A", 80.0, t1)], at=t1)
    b = queries.find_offer(engine, "azure", "B")[0]["id"]
    export(engine, tmp_path, formats=["jsonl"])
    rows = [json.loads(line) for line in (tmp_path / "price_changes.jsonl").open()]
    assert [(r["at"], r["price"], r["available"]) for r in rows if r["offer_id"] == b] == [
        ("2026-11-01T12:00:00Z", 40.0, True), ("2026-11-01T13:00:00Z", None, False)]


def test_a_new_exchange_rate_alone_moves_the_market_index(engine):
    """A CNY offer whose quoted price stays while the rate moves: no new span, but its USD
    price changes, and so does the market index of its model."""
    from gpuradar.storage.index import current_index

    def cny(rate: float, at: datetime) -> PriceItem:
        return replace(item("A", 100.0, at), currency="CNY", price_usd=round(100.0 * rate, 6),
                       price_per_gpu_usd=round(100.0 * rate / 8, 6))

    t1 = T0 + timedelta(hours=1)
    crawl(engine, [cny(0.14, T0)], at=T0)
    assert [(i["gpu"], i["median"]) for i in current_index(engine)] == [("H100-SXM-80GB", 1.75)]
    assert crawl(engine, [cny(0.15, t1)], at=t1).changed == 0
    assert [(i["gpu"], i["median"]) for i in current_index(engine)] == [
        ("H100-SXM-80GB", 1.875)]


def test_a_crawl_error_is_stored_cut_to_4000_characters(engine):
    """A spider's error can be a whole traceback: the crawl keeps its first 4,000
    characters."""
    error = "".join(f"line {n:05}\n" for n in range(500))  # 5,500 characters
    summary = crawl(engine, [item("A", 80.0, T0)], status="failed", at=T0, error=error)
    assert summary.error == error[:4000]
    assert queries.last_crawls(engine)["azure"]["error"] == error[:4000]


def test_a_new_offer_is_stored_whole(engine):
    """Every field of new offers reads back as the crawl gave it, each with its first change
    point. (PostgreSQL stores new offers with COPY, a path of its own: the `ingest` mutation
    target runs this test on both databases.)"""
    a = replace(item("A", 80.5, T0, available=None), zone="eastus-1", gpu_memory_gb=80.0,
                vcpus=96, memory_gb=1900.0, available_count=3, url="https://example.com/a",
                attributes={"stock": "High", "nodes": 2})
    crawl(engine, [a, item("B", 40.0, T0)], at=T0)
    (offer,) = queries.find_offer(engine, "azure", "A")
    fields = ("source", "region", "zone", "instance_type", "pricing", "gpu", "gpu_count",
              "gpu_memory_gb", "vcpus", "memory_gb", "price", "currency", "price_usd",
              "price_per_gpu_usd", "available", "available_count", "url", "attributes",
              "active", "first_seen", "changed_at", "unreadable_since")
    assert {f: offer[f] for f in fields} == {
        "source": "azure", "region": "eastus", "zone": "eastus-1", "instance_type": "A",
        "pricing": "on_demand", "gpu": "H100-SXM-80GB", "gpu_count": 8, "gpu_memory_gb": 80.0,
        "vcpus": 96, "memory_gb": 1900.0, "price": 80.5, "currency": "USD", "price_usd": 80.5,
        "price_per_gpu_usd": 10.0625, "available": None, "available_count": 3,
        "url": "https://example.com/a", "attributes": {"stock": "High", "nodes": 2},
        "active": True, "first_seen": T0, "changed_at": T0, "unreadable_since": None}
    for name, price, available in (("A", 80.5, None), ("B", 40.0, True)):
        oid = queries.find_offer(engine, "azure", name)[0]["id"]
        assert [(s["price"], s["available"], s["valid_from"], s["open"])
                for s in queries.spans(engine, oid)] == [(price, available, T0, True)]


def test_a_long_history_reads_back_every_span(engine):
    """An offer repriced at every crawl for weeks (vast.ai's are): its 301 change points
    read back as 301 spans, each ending where the next begins."""
    from sqlalchemy import insert

    from gpuradar.storage.models import CHANGE

    crawl(engine, [item("A", 80.0, T0)], at=T0)
    oid = queries.find_offer(engine, "azure", "A")[0]["id"]
    with engine.begin() as conn:
        conn.execute(insert(CHANGE), [
            {"offer_id": oid, "at": int((T0 + timedelta(hours=n)).timestamp()),
             "price_micros": (80 + n % 2) * 1_000_000, "available": True}
            for n in range(1, 301)])
    spans = queries.spans(engine, oid)
    assert [s["price"] for s in spans] == [80.0 + n % 2 for n in range(301)]
    assert [s["valid_to"] for s in spans] == [s["valid_from"] for s in spans[1:]] + [None]


# -- gaps found reading queries.py against its tests (issue #31) --------------------------
H100 = ["H100-SXM-80GB"]


def test_an_older_span_in_another_currency_converts_to_the_micro_dollar(engine):
    """`gpuradar history` of a CNY offer: an older span converts at the offer's latest rate
    and, like every USD figure, is rounded to the micro-dollar, not coarser nor finer."""
    def cny(price: float, at: datetime) -> PriceItem:
        usd = round(price * 0.1234567, 6)
        return replace(item("A", price, at), currency="CNY", price_usd=usd,
                       price_per_gpu_usd=round(usd / 8, 6))

    t1 = T0 + timedelta(hours=1)
    crawl(engine, [cny(10.0, T0)], at=T0)
    crawl(engine, [cny(7.0, t1)], at=t1)
    spans = queries.spans(engine, queries.find_offer(engine, "azure", "A")[0]["id"])
    assert [(s["price"], s["price_usd"], s["price_per_gpu_usd"]) for s in spans] == [
        (10.0, 1.234567, 0.154321), (7.0, 0.864197, 0.108025)]


def test_a_window_ending_at_a_price_change_holds_it_and_no_later_one(engine):
    """The low of [since, until] counts a price that took effect at `until`, and none that
    took effect after it."""
    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    for at, price in ((T0, 16.0), (t1, 8.0), (t2, 4.0)):
        crawl(engine, [item("A", price, at)], at=at)
    best = queries.cheapest_over(engine, H100, T0, t1)
    assert (best["price_per_gpu_usd"], best["valid_from"]) == (1.0, t1)


def test_a_window_of_spot_prices_ignores_a_cheaper_on_demand_price(engine):
    """Spot can cost more than on-demand (it does on AWS at times): the spot low is the spot
    price all the same."""
    day = datetime.now(UTC) - timedelta(days=1)
    crawl(engine, [item("A", 30.0, day), item("A", 80.0, day, pricing="spot")], at=day)
    since = day - timedelta(days=1)
    assert queries.cheapest_over(engine, H100, since, pricing="spot")["price"] == 80.0
    assert queries.cheapest_over(engine, H100, since, pricing="on_demand")["price"] == 30.0


def test_a_window_starting_at_the_last_crawl_holds_its_prices(engine):
    """A price last seen exactly when the window starts was on offer in it."""
    crawl(engine, [item("A", 16.0, T0)], at=T0)
    assert queries.cheapest_over(engine, H100, T0)["price_per_gpu_usd"] == 2.0
    assert [s["price"] for s in queries.gpu_spans(engine, H100, T0)] == [16.0]


def test_the_low_of_a_window_is_where_it_was_first_reached(engine):
    """An offer back at its earlier low: the window's low is dated when it was first
    reached."""
    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    for at, price in ((T0, 8.0), (t1, 10.0), (t2, 8.0)):
        crawl(engine, [item("A", price, at)], at=at)
    best = queries.cheapest_over(engine, H100, T0 - timedelta(hours=1))
    assert (best["price_per_gpu_usd"], best["valid_from"]) == (1.0, T0)


def test_the_cheapest_series_counts_offers_of_unknown_stock(engine):
    """The history chart's lows come from offers one could rent: of unknown stock counts,
    sold out does not."""
    t2 = T0 + timedelta(hours=2)
    for at in (T0, t2):
        crawl(engine, [item("A", 16.0, at, available=None),
                       item("B", 8.0, at, available=False)], at=at)
    assert queries.cheapest_series(engine, H100, T0, t2, 2) == [
        (T0, 2.0), (T0 + timedelta(hours=1), 2.0)]


def test_the_cheapest_series_shows_a_price_begun_before_it_in_its_first_slices_only(engine):
    """A price that took effect before the chart's start and ended within its first slice
    is that slice's low, and no later slice's."""
    t1, t3 = T0 + timedelta(hours=1), T0 + timedelta(hours=3)
    for at, price in ((T0, 8.0), (t1, 16.0), (t3, 16.0)):
        crawl(engine, [item("A", price, at)], at=at)
    since = T0 + timedelta(minutes=30)
    assert queries.cheapest_series(engine, H100, since, since + timedelta(hours=2), 2) == [
        (since, 1.0), (since + timedelta(hours=1), 2.0)]


def test_find_offer_finds_exactly_the_offers_named(engine):
    """`gpuradar history SOURCE INSTANCE [--region] [--pricing]`: the offers of that source,
    instance type, region and pricing only, not those that sort before or after them."""
    crawl(engine, [item("A", 80.0, T0), item("A", 70.0, T0, region="westus"),
                   item("A", 30.0, T0, pricing="spot"), item("B", 40.0, T0)], at=T0)
    for source in ("aws", "vastai"):
        writer = CrawlWriter(engine, source, started_at=T0)
        writer.add([replace(item("A", 60.0, T0), source=source)])
        writer.finish("ok")

    def found(source: str, instance: str, **kw) -> list[tuple[str, str, str, str]]:
        return sorted((o["source"], o["instance_type"], o["region"], o["pricing"])
                      for o in queries.find_offer(engine, source, instance, **kw))

    assert found("azure", "A") == [("azure", "A", "eastus", "on_demand"),
                                   ("azure", "A", "eastus", "spot"),
                                   ("azure", "A", "westus", "on_demand")]
    assert found("azure", "B") == [("azure", "B", "eastus", "on_demand")]
    assert found("azure", "A", region="westus") == [("azure", "A", "westus", "on_demand")]
    assert found("azure", "A", region="eastus", pricing="on_demand") == [
        ("azure", "A", "eastus", "on_demand")]
    assert found("aws", "A") == [("aws", "A", "eastus", "on_demand")]
    assert found("vastai", "A") == [("vastai", "A", "eastus", "on_demand")]


def test_each_sources_latest_crawl_is_its_own_whatever_other_sources_did_since(engine):
    """`gpuradar sources` and the offers' age: each source's latest crawl and what its last
    successful one observed, though another source crawled between its crawls."""
    def run(source: str, status: str, at: datetime) -> None:
        writer = CrawlWriter(engine, source, started_at=at)
        writer.add([replace(item("A", 80.0, at), source=source)])
        writer.finish(status)

    t1, t2, t3 = (T0 + timedelta(hours=h) for h in (1, 2, 3))
    run("azure", "ok", T0)
    run("vastai", "ok", t1)
    run("azure", "ok", t2)
    run("azure", "failed", t3)
    assert {s: o.at for s, o in queries.last_observed(engine).items()} == {
        "azure": t2, "vastai": t1}
    assert {s: (c["status"], c["started_at"]) for s, c in queries.last_crawls(engine).items()} \
        == {"azure": ("failed", t3), "vastai": ("ok", t1)}


def test_consecutive_failures_count_the_sources_own_crawls_only(engine):
    """The daemon's back-off of azure: azure's failures in a row, whatever sources named
    before or after it (aws, vastai) did in between."""
    def run(source: str, status: str, at: datetime) -> None:
        writer = CrawlWriter(engine, source, started_at=at)
        writer.add([replace(item("A", 80.0, at), source=source)] if status != "failed" else [])
        writer.finish(status)

    run("azure", "ok", T0)
    for h, (source, status) in enumerate((("aws", "failed"), ("azure", "failed"),
                                          ("vastai", "ok"), ("aws", "ok"), ("azure", "failed"),
                                          ("vastai", "failed")), start=1):
        run(source, status, T0 + timedelta(hours=h))
    assert {s: queries.consecutive_failures(engine, s) for s in ("aws", "azure", "vastai")} \
        == {"aws": 0, "azure": 2, "vastai": 1}
    # A crawl of azure under way has no outcome yet: the count stays.
    CrawlWriter(engine, "azure", started_at=T0 + timedelta(hours=7))
    assert queries.consecutive_failures(engine, "azure") == 2


def test_current_offers_are_dated_by_what_their_source_last_observed(engine):
    """`gpuradar prices`: an offer's age is what its source's last successful crawl observed,
    not when its price last changed; a source without a successful crawl yet dates its
    offers by their last change, as live data; `--limit N` shows the N cheapest."""
    t1 = T0 + timedelta(hours=1)
    for at in (T0, t1):
        crawl(engine, [item("A", 80.0, at), item("B", 40.0, at), item("C", 60.0, at)], at=at)
    writer = CrawlWriter(engine, "lambda", started_at=t1)
    writer.add([replace(item("X", 160.0, t1), source="lambda")])
    writer.finish("partial")
    assert {(r["source"], r["instance_type"]): (r["changed_at"], r["observed_at"], r["replayed"],
                                                r["captured"])
            for r in queries.current_offers(engine)} == {
        ("azure", "A"): (T0, t1, False, None), ("azure", "B"): (T0, t1, False, None),
        ("azure", "C"): (T0, t1, False, None), ("lambda", "X"): (t1, t1, False, None)}
    assert [r["instance_type"] for r in queries.current_offers(engine, limit=2)] == ["B", "C"]


def test_each_currency_has_its_own_newest_exchange_rate(engine):
    """A currency whose newest rate is older than another's (its source skipped a day) keeps
    its own newest rate, and the other currency its own, whatever order the days were
    stored in (here the older day is backfilled last). The `ingest` mutation target runs
    this test on PostgreSQL too: rows come back there in the order they were stored."""
    from datetime import date

    queries.store_fx(engine, {"AUD": 0.65}, date(2026, 11, 29))
    queries.store_fx(engine, {"EUR": 1.06}, date(2026, 11, 28))
    queries.store_fx(engine, {"CNY": 0.139, "EUR": 1.05, "JPY": 0.0066}, date(2026, 11, 27))
    assert {c: (u, d) for c, (u, d, _) in queries.latest_fx(engine).items()} == {
        "AUD": (0.65, date(2026, 11, 29)), "CNY": (0.139, date(2026, 11, 27)),
        "EUR": (1.06, date(2026, 11, 28)), "JPY": (0.0066, date(2026, 11, 27))}


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_crawl_adding_many_offers_renews_postgresql_statistics(engine):
    """PostgreSQL plans by its statistics of the tables, which autovacuum renews up to a
    minute after a bulk write: a crawl that adds 1,000 offers or more (and a tenth of its
    source's) renews them at its end, so that the index update after the next crawl is not
    planned for an empty table; a crawl that adds few leaves that to autovacuum."""
    from sqlalchemy import text

    def planner_rows() -> float:
        with engine.connect() as conn:
            return conn.execute(text("SELECT reltuples FROM pg_class WHERE relname = 'offer'")
                                ).scalar_one()

    def autovacuum(setting: str) -> None:  # off: only the crawl can renew them here
        with engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE offer {setting}"))

    autovacuum("SET (autovacuum_enabled = false)")
    try:
        t0 = datetime(2026, 11, 1, tzinfo=UTC)
        crawl(engine, [item(f"small-{n}", 1.0 + n / 100, t0) for n in range(50)], at=t0)
        assert planner_rows() <= 0  # never analyzed (-1): planned as if empty
        t1 = t0 + timedelta(minutes=15)
        crawl(engine, [item(f"NC{n}", 1.0 + n / 1000, t1) for n in range(1200)], at=t1)
        assert planner_rows() == 1250
    finally:
        autovacuum("RESET (autovacuum_enabled)")


def test_an_offer_read_again_then_unreadable_again_is_flagged_anew_by_a_running_service(
        engine):
    """The same as above without a restart in between: the crawl service's memory forgets
    the first episode once the price is read again, so the second is flagged from its own
    crawl, not left unflagged."""
    key = ("eastus", "", "B", "on_demand")
    t = [T0 + timedelta(hours=h) for h in range(4)]
    crawl(engine, [item("A", 80.0, t[0]), item("B", 40.0, t[0])], at=t[0])
    found = []
    for n, listed_b in ((1, False), (2, True), (3, False)):
        items = [item("A", 80.0, t[n])] + ([item("B", 40.0, t[n])] if listed_b else [])
        crawl(engine, items, at=t[n], unreadable=() if listed_b else [key])
        found.append(queries.find_offer(engine, "azure", "B")[0]["unreadable_since"])
    assert found == [t[1], None, t[3]]
