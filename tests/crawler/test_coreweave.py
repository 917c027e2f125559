"""CoreWeave: the per-region GPU tables of its pricing page, on the real capture of 2026-08
(tests/fixtures/coreweave/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.coreweave import CoreweaveSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "coreweave" / "pricing_excerpt.html").read_text()
URL = "https://www.coreweave.com/pricing"


def parse(page: str = PAGE) -> dict[tuple[str, str, str], PriceItem]:
    spider = CoreweaveSpider()
    spider.settings = Settings()
    return {(i.region, i.instance_type, i.pricing): i
            for i in spider.parse(response(page, URL, kind="html"))}


def test_each_priced_cell_is_an_offer_of_the_whole_node_in_its_region():
    found = parse()
    h100 = found["north-america", "NVIDIA HGX H100", "on_demand"]
    assert (h100.gpu_count, h100.price, h100.currency, h100.vcpus, h100.memory_gb) == (
        8, 49.24, "USD", 128, 2048)
    assert h100.available is None
    # the same node's spot price differs by region
    assert found["north-america", "NVIDIA HGX H100", "spot"].price == 19.71
    assert found["europe", "NVIDIA HGX H100", "spot"].price == 19.51
    assert found["north-america", "NVIDIA GH200", "on_demand"].gpu_count == 1
    # "Contact sales" and "N/A" carry no price: no offer (GB300 at all, GH200 no spot)
    assert not [k for k in found if "GB300" in k[1]]
    assert ("north-america", "NVIDIA GH200", "spot") not in found
    assert len(found) == 7


@pytest.mark.parametrize(("change", "error"), [
    (("REGION: EUROPE", "EUROPE"), "region heading"),
    (("Spot Price (Per Hour)</div></div></div></div><div class=\"table-v2-body",
      "Spot (Per Hour)</div></div></div></div><div class=\"table-v2-body"), "table header"),
    (("<div>$68.80</div>", "<div>68.80 USD</div>"), "expected $N.NN"),
])
def test_a_changed_table_is_refused(change: tuple[str, str], error: str):
    assert change[0] in PAGE
    with pytest.raises(ParseError, match=error.replace("$", r"\$")):
        parse(PAGE.replace(*change))


def test_a_table_cut_short_is_a_changed_page():
    rows = PAGE.split('<div role="listitem"')
    short = rows[0] + '<div role="listitem"' + rows[1] + "</div></div></div></section>"
    with pytest.raises(ParseError, match="has 1 GPU rows, expected at least 4"):
        parse(short)


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {(o["region"], o["gpu"], o["pricing"]): o
             for o in replayed_offers("coreweave", sqlite_url)}
    h100 = found["north-america", "H100-SXM-80GB", "on_demand"]
    assert (h100["price"], h100["price_per_gpu_usd"], h100["available"]) == (
        49.24, 6.155, None)
    assert h100["attributes"]["price_source"] == "list_page"
    assert found["europe", "H100-SXM-80GB", "spot"]["price"] == 19.51
    assert ("north-america", "B200", "spot") in found


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    changed_answer_fails("coreweave", provider_server, tmp_path, sqlite_url,
                         "/pricing", b"<html><body><h1>Pricing</h1></body></html>",
                         "has 0 GPU rows, expected at least 4")
