"""The market index: its arithmetic (pure) and its change-point series, on SQLite and on
PostgreSQL. docs/index.md states the method these tests pin down."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from gpuradar.core.items import PriceItem
from gpuradar.core.marketindex import IndexOffer, compute_index, quantile, screen
from gpuradar.storage import index as store
from gpuradar.storage.ingest import CrawlMemory, CrawlWriter
from gpuradar.storage.models import INDEX

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
H100 = "H100-SXM-80GB"


# -- arithmetic --------------------------------------------------------------------------
def test_quantiles_interpolate_between_order_statistics():
    """Type 7 (numpy's default): h = (n-1) q, linear between neighbours."""
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.5) == 2.5
    assert quantile(values, 0.1) == pytest.approx(1.3)
    assert quantile(values, 0.9) == pytest.approx(3.7)
    assert quantile([5.0], 0.9) == 5.0


def test_screen_excludes_a_price_far_outside_the_robust_band():
    prices = [2.0, 2.1, 2.2, 2.3, 2.4, 50.0]
    assert screen(prices) == [True] * 5 + [False]


def test_screen_never_excludes_within_a_factor_of_two():
    """All prices equal but one (MAD 0): a price 1.9x the median stays, 2.1x goes."""
    assert screen([3.0] * 5 + [5.7]) == [True] * 6
    assert screen([3.0] * 5 + [6.3]) == [True] * 5 + [False]
    assert screen([3.0] * 5 + [1.4]) == [True] * 5 + [False]


def test_each_provider_votes_once_with_its_cheapest_offer():
    """Method v2: three vastai offers are one vote (the cheapest, named), not three; below
    the minimum panel of 3 providers the point is thin."""
    offers = [IndexOffer(1, H100, "spot", "vastai", 1.5),
              IndexOffer(2, H100, "spot", "vastai", 1.0),
              IndexOffer(3, H100, "spot", "vastai", 1.2),
              IndexOffer(4, H100, "spot", "aws", 4.0),
              IndexOffer(5, H100, "on_demand", "aws", 4.0)]
    figures = compute_index(offers)
    spot = figures[(H100, "spot")]
    assert (spot.median, spot.offers, spot.providers, spot.status) == (2.5, 4, 2, "thin")
    assert [(v.source, v.offer_id, v.price, v.offers) for v in spot.panel] == [
        ("aws", 4, 4.0, 1), ("vastai", 2, 1.0, 3)]
    assert figures[(H100, "on_demand")].median == 4.0


def test_three_providers_make_a_market_and_an_outlier_vote_is_excluded_with_its_reason():
    offers = [IndexOffer(n, H100, "on_demand", s, p) for n, (s, p) in enumerate(
        [("a", 2.0), ("b", 2.1), ("c", 2.2), ("d", 2.3), ("far", 40.0)])]
    figure = compute_index(offers)[(H100, "on_demand")]
    assert (figure.status, figure.providers, figure.median) == ("market", 4, 2.15)
    assert [(v.source, v.reason) for v in figure.excluded] == [("far", "outlier")]


def test_a_jump_moves_the_index_only_once_corroborated():
    """A provider's vote 3x its last accepted one is held out, unless another provider
    lies within a factor 2 of it or the same provider shows it again in a later crawl."""
    before = compute_index([IndexOffer(n, H100, "spot", s, 1.0, 100)
                            for n, s in enumerate("abc")])[(H100, "spot")]
    previous = {(H100, "spot"): {v.source: v for v in before.panel}}
    jumped = [IndexOffer(0, H100, "spot", "a", 3.0, 200),
              IndexOffer(1, H100, "spot", "b", 1.0, 200),
              IndexOffer(2, H100, "spot", "c", 1.0, 200)]
    first = compute_index(jumped, previous=previous)[(H100, "spot")]
    assert [(v.source, v.reason, v.ref) for v in first.excluded] == [
        ("a", "unconfirmed jump", 1.0)]
    assert (first.median, first.status) == (1.0, "thin")
    again = {(H100, "spot"): {v.source: v for v in first.panel}}
    later = [o._replace(observed=300) for o in jumped]
    # confirmed: no longer a jump, now judged against the cross-section (3x: an outlier)
    assert [v.reason for v in compute_index(later, previous=again)[(H100, "spot")].excluded
            ] == ["outlier"]
    # corroborated at once: another provider within a factor 2 of the new price
    peers = [*jumped[:2], IndexOffer(2, H100, "spot", "c", 2.5, 200)]
    assert compute_index(peers, previous=previous)[(H100, "spot")].excluded == ()


def test_index_ignores_prices_that_are_not_positive_numbers():
    figures = compute_index([IndexOffer(1, H100, "spot", "a", math.nan),
                             IndexOffer(2, H100, "spot", "a", 0.0),
                             IndexOffer(3, H100, "spot", "a", 2.0)])
    assert figures[(H100, "spot")].offers == 1


# -- the stored series -------------------------------------------------------------------
def item(source: str, instance: str, per_gpu: float, *, gpu: str = H100, count: float = 8,
         available: bool | None = True, pricing: str = "on_demand",
         at: datetime = T0) -> PriceItem:
    price = per_gpu * count
    return PriceItem(source=source, region="r1", instance_type=instance, pricing=pricing,
                     gpu=gpu, gpu_count=count, price=price, currency="USD",
                     available=available, observed_at=at, price_usd=price,
                     price_per_gpu_usd=per_gpu)


#: One crawl service's memory (a daemon's): crawl after crawl, the index update recomputes
#: only the models a crawl changed while its memo holds. Fresh for each test.
MEMORY = CrawlMemory()


@pytest.fixture(autouse=True)
def _a_new_crawl_service():
    MEMORY.clear()


def crawl(engine, source: str, items: list[PriceItem], at: datetime, status: str = "ok"):
    writer = CrawlWriter(engine, source, started_at=at, memory=MEMORY)
    writer.add(items)
    return writer.finish(status)


def rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(INDEX)).scalar_one()


def test_a_crawl_stores_the_index_of_each_model_and_pricing(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0),
                            item("azure", "C", 4.0),
                            item("azure", "S", 1.0, pricing="spot"),
                            item("azure", "X", 9.0, gpu="made-up GPU")], T0)
    (od, spot) = store.current_index(engine, [H100])
    assert (od["pricing"], od["median"], od["status"]) == ("on_demand", 2.0, "thin")
    assert (od["offers"], od["providers"], od["since"]) == (3, 1, T0)
    assert [(v["source"], v["price"], v["offers"]) for v in od["panel"]] == [("azure", 2.0, 3)]
    assert od["method"] == 2 and len(od["digest"]) == 64 and od["params"]["min_panel"] == 3
    assert (spot["pricing"], spot["median"], spot["offers"]) == ("spot", 1.0, 1)
    # a GPU the catalog does not know has no index
    assert {r["gpu"] for r in store.current_index(engine)} == {H100}


def test_an_unchanged_index_writes_no_row_and_a_change_writes_one(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0)], T0)
    assert rows(engine) == 1
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0)],
          T0 + timedelta(hours=1))
    assert rows(engine) == 1
    t2 = T0 + timedelta(hours=2)
    crawl(engine, "azure", [item("azure", "A", 2.5), item("azure", "B", 3.0)], t2)
    assert rows(engine) == 2
    first, second = store.index_history(engine, [H100], "on_demand")
    assert (first["median"], first["until"]) == (2.0, t2)
    assert (second["median"], second["since"], second["until"]) == (2.5, t2, None)
    assert store.index_at(engine, H100, "on_demand", t2 - timedelta(minutes=1))["median"] == 2.0
    assert store.index_at(engine, H100, "on_demand", T0 - timedelta(minutes=1)) is None
    # history from a time: the change point in force then, and the later ones
    assert [h["median"] for h in store.index_history(
        engine, [H100], since=t2 + timedelta(minutes=1))] == [2.5]


def test_offers_known_unavailable_do_not_count(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0, available=False),
                            item("azure", "C", 3.0, available=None)], T0)
    (od,) = store.current_index(engine)
    assert (od["offers"], od["median"]) == (2, 2.0)


def test_a_stale_source_leaves_the_index(engine):
    """A source whose last successful crawl is older than two days does not count; a model
    only it listed gets a 'none from here on' change point."""
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "G", 1.0, gpu="A10")], T0)
    t1 = T0 + timedelta(days=3)
    crawl(engine, "lambda", [item("lambda", "L", 4.0)], t1)
    (od,) = store.current_index(engine)
    assert (od["gpu"], od["median"], od["providers"]) == (H100, 4.0, 1)
    a10 = store.index_history(engine, ["A10"])
    assert [(h["offers"], h["median"]) for h in a10] == [(1, 1.0), (0, None)]
    assert a10[1]["since"] == t1


def test_a_source_failing_three_times_leaves_the_index(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    crawl(engine, "lambda", [item("lambda", "L", 4.0)], T0)
    for n in (1, 2):
        crawl(engine, "azure", [], T0 + timedelta(minutes=n), status="failed")
    assert store.current_index(engine)[0]["median"] == 3.0  # two failures: still fresh
    crawl(engine, "azure", [], T0 + timedelta(minutes=3), status="failed")
    (od,) = store.current_index(engine)
    assert (od["median"], od["providers"]) == (4.0, 1)


def test_excluded_votes_are_listed_with_their_reason(engine):
    for n, source in enumerate(("aws", "azure", "gcp", "lambda")):
        crawl(engine, source, [item(source, "A", 2.0 + n / 100)], T0)
    crawl(engine, "oci", [item("oci", "FAR", 40.0)], T0)
    (od,) = store.current_index(engine)
    assert (od["status"], od["providers"]) == ("market", 4)
    assert [(v["source"], v["price"], v["reason"]) for v in od["excluded"]] == [
        ("oci", 40.0, "outlier")]


def test_a_point_is_dated_at_its_data_and_never_revised(engine):
    """A crawl whose data is older than the series' last point is dated at its data; a
    second computation for a time that has a point is a correction one second later."""
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0 + timedelta(minutes=10))
    crawl(engine, "lambda", [item("lambda", "L", 4.0)], T0)
    crawl(engine, "gcp", [item("gcp", "G", 3.0)], T0)
    points = store.index_history(engine, [H100])
    assert [(p["since"], p["median"], p["corrects"]) for p in points] == [
        (T0, 3.0, None), (T0 + timedelta(seconds=1), 3.0, T0),
        (T0 + timedelta(minutes=10), 2.0, None)]


def test_update_index_alone_recomputes_from_stored_offers(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    assert store.update_index(engine, T0 + timedelta(minutes=1)) == 0
    assert store.update_index(engine, T0 + timedelta(days=3)) == 1  # azure went stale
    assert store.current_index(engine) == []


def full_index(engine, at: datetime) -> dict:
    """The index recomputed from every stored offer (what an update must agree with)."""
    figures = compute_index(store.index_inputs(engine, at))
    return {k: (f.median, f.p10, f.p90, f.offers, f.providers, f.status)
            for k, f in figures.items()}


def stored_index(engine) -> dict:
    return {(r["gpu"], r["pricing"]): (r["median"], r["p10"], r["p90"], r["offers"],
                                       r["providers"], r["status"])
            for r in store.current_index(engine) if r["offers"]}


def test_the_cheapest_offers_read_makes_the_index_of_every_offer(engine):
    """The update reads each source's cheapest offer per model and pricing, counted for
    all of its offers (storage.index.cheapest_inputs): the figures, panels (the offer each
    vote names, ties to the lowest id, its offer count) and digests are those of the index
    made from every offer, and offers that do not count (unavailable, unknown model, stale
    source) count there neither."""
    a100 = "A100-SXM-80GB"
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 2.0),
                            item("azure", "C", 4.0), item("azure", "D", 1.0, available=False),
                            item("azure", "E", 3.0, gpu=a100),
                            item("azure", "S", 1.5, pricing="spot"),
                            item("azure", "X", 0.5, gpu="made-up GPU")], T0)
    crawl(engine, "gcp", [item("gcp", "G", 2.5), item("gcp", "H", 2.2, available=None),
                          item("gcp", "I", 9.0, gpu=a100)], T0)
    crawl(engine, "lambda", [item("lambda", "L", 1.0)], T0 - timedelta(days=5))  # stale
    at = T0 + timedelta(minutes=1)
    every = compute_index(store.index_inputs(engine, at))
    cheapest = store.cheapest_inputs(engine, at)
    assert compute_index(cheapest) == every
    assert sorted(every) == [(a100, "on_demand"), (H100, "on_demand"), (H100, "spot")]
    votes = {(o.gpu, o.pricing, o.source): (o.usd_per_gpu_hour, o.offers) for o in cheapest}
    assert votes[(H100, "on_demand", "azure")] == (2.0, 3)  # A and B tie, C; D unavailable
    assert votes[(H100, "on_demand", "gcp")] == (2.2, 2)  # availability unknown counts
    assert len(cheapest) == len(votes) == 5
    tie = [o.offer_id for o in store.index_inputs(engine, at)
           if o.gpu == H100 and o.pricing == "on_demand" and o.usd_per_gpu_hour == 2.0]
    assert len(tie) == 2
    panel = every[(H100, "on_demand")].panel
    assert {v.source: v.offer_id for v in panel}["azure"] == min(tie)
    only = store.cheapest_inputs(engine, at, groups={(H100, "spot"), (a100, "spot")})
    assert [(o.gpu, o.pricing, o.source) for o in only] == [(H100, "spot", "azure")]


def test_after_a_failed_update_or_another_writer_every_source_is_read_again(
        engine, monkeypatch):
    """An update after a crawl reads only the crawled source's offers again and takes the
    other sources' cheapest from the service's memo: after an update that failed (the crawl
    is stored, the index is not), or the index written by another service, the next update
    reads every source again, and the index is the whole market's."""
    real = store.compute_index

    def failing_once(*args, **kwargs):
        monkeypatch.setattr(store, "compute_index", real)
        raise RuntimeError("disk full")

    at = T0
    crawl(engine, "azure", [item("azure", "A", 3.0, at=at)], at)
    crawl(engine, "lambda", [item("lambda", "L", 5.0, at=at)], at)
    # the index update after azure's crawl fails
    at += timedelta(minutes=10)
    monkeypatch.setattr(store, "compute_index", failing_once)
    crawl(engine, "azure", [item("azure", "A", 2.0, at=at)], at)
    at += timedelta(minutes=1)
    crawl(engine, "lambda", [item("lambda", "L", 4.0, at=at)], at)
    assert stored_index(engine) == full_index(engine, at)
    # another crawl service stores azure's next crawl (and the index)
    at += timedelta(minutes=10)
    writer = CrawlWriter(engine, "azure", started_at=at, memory=CrawlMemory())
    writer.add([item("azure", "A", 1.5, at=at)])
    writer.finish("ok")
    at += timedelta(minutes=1)
    crawl(engine, "lambda", [item("lambda", "L", 3.5, at=at)], at)
    assert stored_index(engine) == full_index(engine, at)
    median, *_, providers, _status = stored_index(engine)[(H100, "on_demand")]
    assert (median, providers) == (2.5, 2)  # azure's $1.50 and lambda's $3.50


def test_an_update_after_a_crawl_agrees_with_a_full_recompute(engine):
    """After a crawl only the models its changed offers belong to are recomputed (while no
    source became fresh or stale): the stored index must still be the whole market's, through
    price moves, new and closed offers, a model changing hands, and a source going stale."""
    a100 = "A100-SXM-80GB"
    steps = [
        ("azure", [item("azure", "A", 2.0), item("azure", "B", 3.0),
                   item("azure", "G", 1.5, gpu=a100)], T0),
        ("lambda", [item("lambda", "L", 4.0), item("lambda", "M", 1.2, gpu=a100)],
         T0 + timedelta(minutes=10)),
        # unchanged: nothing to recompute, nothing written
        ("azure", [item("azure", "A", 2.0), item("azure", "B", 3.0),
                   item("azure", "G", 1.5, gpu=a100)], T0 + timedelta(minutes=20)),
        # a price moves in one model; the other model's figures stay
        ("lambda", [item("lambda", "L", 5.0), item("lambda", "M", 1.2, gpu=a100)],
         T0 + timedelta(minutes=30)),
        # an offer closes, another appears in a spot series, one becomes unavailable
        ("azure", [item("azure", "A", 2.0, available=False),
                   item("azure", "S", 0.9, pricing="spot"),
                   item("azure", "G", 1.5, gpu=a100)], T0 + timedelta(minutes=40)),
        # lambda goes stale (its last crawl three days old): a full recompute
        ("azure", [item("azure", "A", 2.5), item("azure", "S", 0.9, pricing="spot"),
                   item("azure", "G", 1.5, gpu=a100)], T0 + timedelta(days=3)),
    ]
    written = []
    for source, items, at in steps:
        before = rows(engine)
        crawl(engine, source, [replace(i, observed_at=at) for i in items], at)
        written.append(rows(engine) - before)
        assert stored_index(engine) == full_index(engine, at), (source, at)
    assert written[2] == 0  # the unchanged crawl wrote no change point
    # lambda left the index of both models with its freshness: azure's offers alone
    final = stored_index(engine)
    assert final[(H100, "on_demand")][3:5] == (1, 1)
    assert final[("A100-SXM-80GB", "on_demand")][:5] == (1.5, 1.5, 1.5, 1, 1)
