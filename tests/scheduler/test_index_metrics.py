"""`gpuradar_price_index_usd_per_gpu_hour{gpu,pricing,stat}`: the market index at scrape
time, and what each figure is made of."""

from __future__ import annotations

from prometheus_client import generate_latest

from tests.daemon_helpers import parse_metrics
from tests.storage.test_index import T0, crawl, item


def three_providers(engine, spot: bool = False) -> None:
    """H100 on-demand from three providers at 2, 3 and 4 $/GPU-h (one vote each)."""
    for source, price in (("azure", 2.0), ("lambda", 3.0), ("aws", 4.0)):
        extra = [item(source, "S", 1.0, pricing="spot")] if spot and source == "azure" else []
        crawl(engine, source, [item(source, "A", price), *extra], T0)


def test_metrics_export_the_index_and_its_counts(engine):
    from gpuradar.scheduler.metrics import Metrics

    three_providers(engine)
    series = parse_metrics(generate_latest(Metrics(lambda: engine).registry).decode())

    def get(name, **labels):
        return series.get((name, frozenset(labels.items())))

    base = {"gpu": "H100-SXM-80GB", "pricing": "on_demand"}
    assert get("gpuradar_price_index_usd_per_gpu_hour", **base, stat="median") == 3.0
    assert get("gpuradar_price_index_usd_per_gpu_hour", **base, stat="p10") == 2.2
    assert get("gpuradar_price_index_usd_per_gpu_hour", **base, stat="p90") == 3.8
    assert get("gpuradar_price_index_offers", **base) == 3
    assert get("gpuradar_price_index_providers", **base) == 3
    assert get("gpuradar_price_index_excluded_offers", **base) == 0
    assert get("gpuradar_price_index_usd_per_gpu_hour", gpu="H100-SXM-80GB", pricing="spot",
               stat="median") is None


def test_the_page_charts_the_index_of_each_model(engine):
    """The web page: one chart per model and pricing with its median, p10, p90 and counts,
    following the page's filters."""
    from datetime import timedelta

    from gpuradar.scheduler.web import render

    three_providers(engine, spot=True)
    now = T0 + timedelta(hours=2)
    html = render(engine, {}, now=now)
    section = html[html.index('id="index"'):html.index("Price history")]
    assert section.count("<svg") == 2
    assert "H100-SXM-80GB on-demand: $3.0000" in section
    assert "p10 $2.2000, p90 $3.8000; 3 offers from 3 providers</div>" in section
    assert "spot: $1.0000" in section and "1 offers from 1 provider; thin: fewer providers " \
        "than the minimum panel, not the market" in section
    html = render(engine, {"pricing": ["spot"]}, now=now)
    section = html[html.index('id="index"'):html.index("Price history")]
    assert section.count("<svg") == 1 and "H100-SXM-80GB spot: $1.0000" in section
    html = render(engine, {"gpu": ["A100"]}, now=now)
    assert "No index yet" in html


def test_a_flat_index_chart_writes_its_price_as_its_title_does():
    """#50 item 11: a chart titled $1.7011 had $1.7012 on its axis (the middle tick was
    0.9 x + 0.1 x of the one price, a float's error away). Its axis now names the price."""
    import re
    from datetime import timedelta

    from gpuradar.core.units import money
    from gpuradar.scheduler.web import svg_chart

    series = [(T0, 1.70115), (T0 + timedelta(hours=1), 1.70115)]
    svg = svg_chart([("on_demand", series)], T0 + timedelta(hours=2))
    ticks = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert ticks[1] == money(1.70115) == "$1.7012", ticks
