"""The reads behind the web page (storage/page_reads.py): price history per GPU with spot and
on-demand apart, under the page's filters, and a chart or a reason for every listed GPU."""

from __future__ import annotations

from datetime import timedelta

from gpuradar.core.gpus import CATALOG
from gpuradar.storage.page_reads import overview, price_history
from gpuradar.storage.queries import OfferFilter
from tests.storage.test_index import H100, T0, crawl, item

HOUR = timedelta(hours=1)


def values(series) -> list[float | None]:
    return [v for _, v in series]


def test_history_keeps_spot_and_on_demand_apart(engine):
    """A spot offer appearing for two hours is the spot line's dip, not an on-demand drop."""
    for hour in (0, 2, 4, 6):
        at = T0 + hour * HOUR
        spot = [item("vastai", "A", 0.40, pricing="spot", at=at)] if hour == 2 else []
        crawl(engine, "vastai", [item("vastai", "A", 1.74, at=at), *spot], at)
    history = price_history(engine, [H100], OfferFilter(), T0, T0 + 6 * HOUR, 6)[H100]
    assert values(history["on_demand"]) == [1.74] * 6
    assert values(history["spot"]) == [None, None, 0.40, 0.40, 0.40, None]
    spot_only = price_history(engine, [H100], OfferFilter(pricing="spot"), T0,
                              T0 + 6 * HOUR, 6)[H100]
    assert list(spot_only) == ["spot"]


def test_history_follows_the_source_and_region_filters(engine):
    for at in (T0, T0 + 2 * HOUR):
        crawl(engine, "azure", [item("azure", "A", 3.0, at=at)], at)
        crawl(engine, "lambda", [item("lambda", "B", 2.0, at=at)], at)
    flt = OfferFilter(sources=["azure"])
    until = T0 + 2 * HOUR
    assert values(price_history(engine, [H100], flt, T0, until, 2)[H100]["on_demand"]) == [
        3.0, 3.0]
    assert values(price_history(engine, [H100], OfferFilter(), T0, until, 2)[H100][
        "on_demand"]) == [2.0, 2.0]
    assert price_history(engine, [H100], OfferFilter(regions=["eu-*"]), T0, until, 2) == {}


def test_every_listed_gpu_is_charted_with_its_price_carried_forward(engine):
    """Eleven GPUs listed, eleven charts (the page used to stop at eight, silently); a GPU
    whose only observation falls before the range is still listed, so its price holds
    through the range (it was left uncharted: the quick-start data had no chart at all)."""
    names = sorted(CATALOG)[:11]
    later = T0 + 10 * 24 * HOUR
    crawl(engine, "azure", [item("azure", f"old-{names[0]}", 1.0, gpu=names[0])], T0)
    crawl(engine, "lambda", [item("lambda", f"i-{n}", 2.0 + k, gpu=n, at=later)
                             for k, n in enumerate(names[1:])], later)
    data = overview(engine, OfferFilter(), days=7, now=later + HOUR, buckets=7)
    listed = [o["gpu"] for o in data["cheapest"]]
    assert sorted(listed) == names
    assert [c["gpu"] for c in data["charts"]] == listed and data["uncharted"] == []
    old = next(c for c in data["charts"] if c["gpu"] == names[0])
    assert values(old["series"]["on_demand"]) == [1.0] * 7


def test_the_page_the_api_and_the_python_api_read_sources_and_cheapest_offers_once(engine):
    """One `sources()` and one `cheapest_per_gpu()` (storage.queries) behind every reader:
    the page, the JSON API's /sources, `gpuradar.open().sources()` and the metrics' gauge
    show the same thing."""
    from gpuradar.api import Store
    from gpuradar.scheduler import http_api as json_api
    from gpuradar.storage import queries

    crawl(engine, "lambda", [item("lambda", "A", 2.0), item("lambda", "B", 1.5)], T0)
    crawl(engine, "vastai", [item("vastai", "C", 1.2, pricing="spot"),
                             item("vastai", "D", 1.9)], T0)
    crawl(engine, "vastai", [], T0 + HOUR, status="failed")
    rows = queries.sources(engine)
    assert [(r["source"], r["status"], r["failures"]) for r in rows] == [
        ("lambda", "ok", 0), ("vastai", "failed", 1)]
    assert all(r["last_success"].tzinfo is not None and r["last_crawl"].tzinfo is not None
               for r in rows)
    page = overview(engine, OfferFilter(), now=T0 + 2 * HOUR)
    assert page["sources"] == rows
    assert json_api.sources(engine, None) == {"count": 2, "sources": rows}
    assert [s.source for s in Store(engine).sources()] == ["lambda", "vastai"]
    assert [s.failures for s in Store(engine).sources()] == [0, 1]

    cheapest = queries.cheapest_per_gpu(engine)
    assert [(o["pricing"], o["instance_type"], o["price_per_gpu_usd"]) for o in cheapest] == [
        ("spot", "C", 1.2), ("on_demand", "B", 1.5)]
    assert page["cheapest"] == queries.cheapest_per_gpu(engine, OfferFilter())
    by_source = queries.cheapest_per_source(engine)   # the gauge: per source too
    assert sorted(by_source) == [(H100, "on_demand", "lambda", 1.5),
                                 (H100, "on_demand", "vastai", 1.9),
                                 (H100, "spot", "vastai", 1.2)]
