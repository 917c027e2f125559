"""The reads behind the web page (storage/web.py): price history per GPU with spot and
on-demand apart, under the page's filters, and a chart or a reason for every listed GPU."""

from __future__ import annotations

from datetime import timedelta

from gpuradar.core.gpus import CATALOG
from gpuradar.storage.queries import OfferFilter
from gpuradar.storage.web import overview, price_history
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
