"""Crusoe: the GPU table of the public pricing page, on the real page of 2026-08-22
(gpu-index's capture), a changed page, and a real crawl and replay into storage."""

from __future__ import annotations

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.crusoe import CrusoeSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

URL = "https://www.crusoe.ai/cloud/pricing"
REAL = (FIXTURES / "crusoe" / "pricing_gpu_section_real.html").read_text()
RECORDINGS = FIXTURES.parent.parent / "gpuradar" / "recordings"


def parse(page: str) -> tuple[dict[tuple[str, str], PriceItem], CrusoeSpider]:
    spider = get_crawler(CrusoeSpider)._create_spider()
    items = spider.parse(response(page, URL, kind="html"))
    return {(i.instance_type, i.pricing): i for i in items}, spider


def test_each_priced_cell_is_one_gpu_hour_list_price():
    items, spider = parse(REAL)
    assert {k: i.price for k, i in items.items()} == {
        ("NVIDIA H200 141GB HGX", "on_demand"): 4.29,
        ("NVIDIA H100 80GB HGX", "on_demand"): 3.90,
        ("NVIDIA A100 80GB SXM", "on_demand"): 2.30,
        ("NVIDIA A100 80GB PCIe", "on_demand"): 2.00,
        ("NVIDIA L40S 48GB", "on_demand"): 1.50,
        ("AMD MI300X 192GB", "on_demand"): 3.45,
    }
    h100 = items[("NVIDIA H100 80GB HGX", "on_demand")]
    assert (h100.gpu, h100.gpu_count, h100.gpu_memory_gb, h100.region) == (
        "NVIDIA H100 HGX", 1, 80, "global")
    assert {i.available for i in items.values()} == {None}  # a list page says nothing
    # GB200, B200 and MI355X on demand, and every spot cell: "Contact sales"
    assert spider.crawler.stats.get_value("gpuradar/skipped/crusoe_unpriced_cell") == 12


def test_a_spot_price_when_the_page_shows_one_is_a_spot_offer():
    # the H100 row's Current spot cell ("Contact sales" at capture) with a price in it
    cell = REAL.index('<div class="pricing-rich w-richtext"><p><a href="/contact-sales" '
                      'data-wf-native-id-path="58edb9a5')
    end = REAL.index("</div>", cell) + len("</div>")
    page = REAL[:cell] + '<div class="pricing-rich w-richtext"><p>$1.60/GPU-hr</p></div>' + \
        REAL[end:]
    items, _ = parse(page)
    assert items[("NVIDIA H100 80GB HGX", "spot")].price == 1.60


@pytest.mark.parametrize(("change", "field"), [
    (lambda p: p.replace("GPU instances pricing", "GPU pricing"), "GPU instances pricing"),
    (lambda p: p.replace(">On-demand<", ">Reserved<"), "table header"),
    (lambda p: p.replace("$3.90/GPU-hr", "$3.90/GPU-month"), "On-demand"),
    (lambda p: p.replace("$2.00/GPU-hr", "€2.00/GPU-hr"), "On-demand"),
    (lambda p: p.replace('role="listitem"', 'role="row"'), "GPU instances table"),
    (lambda p: p.replace("/GPU-hr", " per GPU-hour"), "On-demand"),
])
def test_a_changed_page_is_an_error_naming_what_changed(change, field):
    with pytest.raises(ParseError) as err:
        parse(change(REAL))
    assert err.value.field == field


def test_a_page_with_too_few_rows_or_prices_is_a_changed_page():
    rows = REAL.split('<div role="listitem"')
    short = '<div role="listitem"'.join(rows[:5])  # 4 of the 9 rows
    with pytest.raises(ParseError, match="has 4 GPU rows, expected at least 5"):
        parse(short)
    unpriced = REAL
    for price in ("$4.29/GPU-hr", "$3.90/GPU-hr", "$2.30/GPU-hr", "$2.00/GPU-hr"):
        unpriced = unpriced.replace(price, "Contact sales")
    with pytest.raises(ParseError, match="found 2, expected 3 or more"):
        parse(unpriced)


def test_a_changed_page_fails_the_crawl_and_closes_nothing(tmp_path, provider_server,
                                                           sqlite_url):
    changed_answer_fails("crusoe", provider_server, tmp_path, sqlite_url, "/cloud/pricing",
                         REAL.replace("GPU instances pricing", "Instances").encode(),
                         "field 'GPU instances pricing' found 0 times")


def test_the_shipped_recording_replays_dated_at_its_capture(tmp_path):
    offers = replayed_offers("crusoe", f"sqlite:///{tmp_path}/r.db")
    assert {o["gpu"] for o in offers} == {"H200-SXM-141GB", "H100-SXM-80GB", "A100-SXM-80GB",
                                          "A100-PCIE-80GB", "L40S", "MI300X"}
    assert {o["observed_at"] for o in offers} == {"2026-08-22T00:00:00Z"}
    assert {o["attributes"]["price_source"] for o in offers} == {"list_page"}
