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
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.models import PriceIndex

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


def test_index_each_offer_votes_and_counts_providers():
    offers = [IndexOffer(1, H100, "spot", "vastai", 1.0),
              IndexOffer(2, H100, "spot", "vastai", 1.0),
              IndexOffer(3, H100, "spot", "vastai", 1.0),
              IndexOffer(4, H100, "spot", "aws", 4.0),
              IndexOffer(5, H100, "on_demand", "aws", 4.0)]
    figures = compute_index(offers)
    spot = figures[(H100, "spot")]
    # four votes: the three vastai offers carry the median (per provider it would be 2.5)
    assert (spot.median, spot.offers, spot.providers) == (1.0, 3, 1)
    assert spot.excluded == (4,)  # 4x the median with MAD 0
    assert figures[(H100, "on_demand")].median == 4.0


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


def crawl(engine, source: str, items: list[PriceItem], at: datetime, status: str = "ok"):
    writer = CrawlWriter(engine, source, started_at=at)
    writer.add(items)
    return writer.finish(status)


def rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(PriceIndex)).scalar_one()


def test_a_crawl_stores_the_index_of_each_model_and_pricing(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0),
                            item("azure", "C", 4.0),
                            item("azure", "S", 1.0, pricing="spot"),
                            item("azure", "X", 9.0, gpu="made-up GPU")], T0)
    (od, spot) = store.current_index(engine, [H100])
    assert (od["pricing"], od["median"], od["p10"], od["p90"]) == ("on_demand", 3.0, 2.2, 3.8)
    assert (od["offers"], od["providers"], od["since"]) == (3, 1, T0)
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
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 4.0)], t2)
    assert rows(engine) == 2
    first, second = store.index_history(engine, [H100], "on_demand")
    assert (first["median"], first["until"]) == (2.5, t2)
    assert (second["median"], second["since"], second["until"]) == (3.0, t2, None)
    assert store.index_at(engine, H100, "on_demand", t2 - timedelta(minutes=1))["median"] == 2.5
    assert store.index_at(engine, H100, "on_demand", T0 - timedelta(minutes=1)) is None
    # history from a time: the change point in force then, and the later ones
    assert [h["median"] for h in store.index_history(
        engine, [H100], since=t2 + timedelta(minutes=1))] == [3.0]


def test_offers_known_unavailable_do_not_count(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0, available=False),
                            item("azure", "C", 3.0, available=None)], T0)
    (od,) = store.current_index(engine)
    assert (od["offers"], od["median"]) == (2, 2.5)


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


def test_excluded_offers_are_listed(engine):
    crawl(engine, "azure", [item("azure", f"A{n}", 2.0 + n / 100) for n in range(5)]
          + [item("azure", "FAR", 40.0)], T0)
    (od,) = store.current_index(engine)
    assert od["offers"] == 5 and len(od["excluded"]) == 1
    (far,) = store.excluded_offers(engine, od["excluded"])
    assert (far["instance_type"], far["price_per_gpu_usd"]) == ("FAR", 40.0)


def test_a_late_crawl_never_dates_a_change_point_before_the_last(engine):
    """Crawls of two sources finishing out of order: the later-finishing, earlier-started
    crawl's figures take effect at the series' last change point, not before it."""
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0 + timedelta(minutes=10))
    crawl(engine, "lambda", [item("lambda", "L", 4.0)], T0)
    (only,) = store.index_history(engine, [H100])
    assert (only["since"], only["median"]) == (T0 + timedelta(minutes=10), 3.0)


def test_update_index_alone_recomputes_from_stored_offers(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    assert store.update_index(engine, T0 + timedelta(minutes=1)) == 0
    assert store.update_index(engine, T0 + timedelta(days=3)) == 1  # azure went stale
    assert store.current_index(engine) == []


def full_index(engine, at: datetime) -> dict:
    """The index recomputed from every stored offer (what an update must agree with)."""
    figures = compute_index(store.index_inputs(engine, at))
    return {k: (f.median, f.p10, f.p90, f.offers, f.providers, f.excluded)
            for k, f in figures.items()}


def stored_index(engine) -> dict:
    return {(r["gpu"], r["pricing"]): (r["median"], r["p10"], r["p90"], r["offers"],
                                       r["providers"], tuple(r["excluded"]))
            for r in store.current_index(engine) if r["offers"]}


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
