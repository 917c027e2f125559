"""Together AI: the GPU Clusters table of the public pricing page, on the real page of
2026-08-22 (gpu-index's capture), a changed page, and the replay through the real command."""

from __future__ import annotations

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.together import TogetherSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://www.together.ai/pricing"
REAL = (FIXTURES / "together" / "pricing_gpu_clusters_real.html").read_text()


def parse(page: str) -> tuple[dict[str, PriceItem], TogetherSpider]:
    spider = get_crawler(TogetherSpider)._create_spider()
    items = spider.parse(response(page, URL, kind="html"))
    return {i.instance_type: i for i in items}, spider


def test_each_on_demand_price_is_one_gpu_hour_list_price():
    items, _ = parse(REAL)
    assert {k: (i.price, i.pricing, i.gpu_count, i.region) for k, i in items.items()} == {
        "NVIDIA HGX H100": (3.99, "on_demand", 1, "global"),
        "NVIDIA HGX H200": (5.99, "on_demand", 1, "global"),
        "NVIDIA HGX B200": (8.19, "on_demand", 1, "global"),
    }
    assert {i.available for i in items.values()} == {None}


def test_reservation_terms_are_counted_never_stored_as_on_demand():
    items, spider = parse(REAL)
    stats = spider.crawler.stats
    # 3 rows x 3 priced terms ($3.69 ... $6.79); the 181+ days cells say "Contact us"
    assert stats.get_value("gpuradar/skipped/together_reservation_price") == 9
    assert not {3.69, 3.45, 3.19, 7.99} & {i.price for i in items.values()}
    # GB200/GB300 NVL72 and HGX B300: "—" (not sold on demand) is neither a price nor counted
    assert stats.get_value("gpuradar/skipped/together_unpriced_row") is None


def test_a_contact_us_cell_is_counted_as_unpriced():
    page = REAL.replace('<p data-batch="" class="body-m text-weight-medium">$5.99</p>',
                        '<p data-batch="" class="body-m text-weight-medium">Contact us</p>', 1)
    items, spider = parse(page)
    assert "NVIDIA HGX H200" not in items
    assert spider.crawler.stats.get_value("gpuradar/skipped/together_unpriced_row") == 1


@pytest.mark.parametrize(("change", "field"), [
    (lambda p: p.replace("On-demand hourly rates", "Hourly rates"),
     "On-demand hourly rates and reserved capacity"),
    (lambda p: p.replace("All prices are per GPU per hour.", "All prices are per node."),
     "All prices are per GPU per hour."),
    (lambda p: p.replace(">ON-Demand<", ">Spot<"), "table header"),
    (lambda p: p.replace(">7-30 days<", ">1 week<"), "table header"),
    (lambda p: p.replace(">$3.99<", ">€3.99<", 1), "ON-Demand"),
    (lambda p: p.replace("$8.19", "Contact us").replace("$5.99", "Contact us"),
     "ON-Demand prices"),
    # a row whose cells no longer cover the four terms: columns cannot be told apart
    (lambda p: p.replace('<td colspan="4" class="text-align-center">',
                         '<td class="text-align-center">', 1), "table row"),
])
def test_a_changed_page_is_an_error_naming_what_changed(change, field):
    with pytest.raises(ParseError) as err:
        parse(change(REAL))
    assert err.value.field == field


def test_a_table_with_too_few_rows_is_a_changed_page():
    rows = REAL.split('<div role="listitem"')
    short = '<div role="listitem"'.join(rows[:4])  # 3 of the 6 rows
    with pytest.raises(ParseError, match="has 3 GPU rows, expected at least 4"):
        parse(short)


def test_a_changed_page_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                           sqlite_url):
    changed_answer_fails("together", provider_server, tmp_path, sqlite_url, "/pricing",
                         REAL.replace(">ON-Demand<", ">Preemptible<").encode(),
                         "field 'table header' is")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("together", f"sqlite:///{tmp_path}/r.db")
    assert {(o["gpu"], o["price_per_gpu_usd"]) for o in offers} == {
        ("H100-SXM-80GB", 3.99), ("H200-SXM-141GB", 5.99), ("B200", 8.19)}
    assert {o["observed_at"] for o in offers} == {"2026-08-22T00:00:00Z"}
    assert {o["attributes"]["price_source"] for o in offers} == {"list_page"}
