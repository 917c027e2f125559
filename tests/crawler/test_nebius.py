"""Nebius: the GPU table of its price page, on the real capture of 2026-08
(tests/fixtures/nebius/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.nebius import NebiusSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "nebius" / "prices_real.html").read_text()
URL = "https://nebius.com/prices"


def parse(page: str = PAGE) -> dict[tuple[str, str], PriceItem]:
    spider = NebiusSpider()
    spider.settings = Settings()
    return {(i.instance_type, i.pricing): i
            for i in spider.parse(response(page, URL, kind="html"))}


def test_each_priced_cell_is_an_offer_of_one_gpu_at_its_list_price():
    found = parse()
    h100 = found["NVIDIA HGX H100", "on_demand"]
    assert (h100.gpu, h100.gpu_count, h100.price, h100.currency) == (
        "NVIDIA HGX H100", 1, 3.85, "USD")
    assert (h100.vcpus, h100.memory_gb, h100.available, h100.region) == (
        16, 200, None, "unspecified")
    assert found["NVIDIA HGX H100", "spot"].price == 2.15  # the preemptible column
    # "Contact us" and "––" carry no price: no offer
    assert not [k for k in found if "NVL72" in k[0]]
    # the CPU-only and storage tables are not GPU offers
    assert not [k for k in found if "EPYC" in k[0] or "storage" in k[0].lower()]
    assert len(found) == 14


def test_a_from_price_is_kept_as_a_floor_with_its_ranges():
    l40s = parse()["NVIDIA L40S with AMD CPU", "on_demand"]
    assert (l40s.gpu, l40s.price, l40s.vcpus) == ("NVIDIA L40S", 1.55, None)
    assert l40s.attributes["price_from"] is True and l40s.attributes["vcpus"] == "8-40"


@pytest.mark.parametrize(("change", "error"), [
    (("NVIDIA GPU Instances", "GPU instances"), "'NVIDIA GPU Instances' is missing"),
    (('\\"Preemptible, GPU-hour\\"', '\\"Spot, GPU-hour\\"'), "table.content[0]"),
    (("\\\"$3.85\\\"", "\\\"3.85 USD\\\""), "expected $N.NN"),
])
def test_a_changed_table_is_refused(change: tuple[str, str], error: str):
    with pytest.raises(ParseError, match=error.replace("$", r"\$").replace("[", r"\[")):
        parse(PAGE.replace(*change))


def test_a_table_cut_short_is_a_changed_page():
    rows = PAGE.split('[\\"NVIDIA HGX B200')
    short = rows[0].rstrip(",") + "]," + '\\"customColumnWidth' + PAGE.split(
        '\\"customColumnWidth', 1)[1]
    with pytest.raises(ParseError, match="has 3 GPU rows, expected at least 5"):
        parse(short)


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {(o["gpu"], o["pricing"]): o for o in replayed_offers("nebius", sqlite_url)}
    h100 = found["H100-SXM-80GB", "on_demand"]
    assert (h100["price_per_gpu_usd"], h100["available"]) == (3.85, None)
    assert h100["attributes"]["price_source"] == "list_page"
    assert found["B200", "spot"]["price"] == 3.95 and ("L40S", "spot") in found


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    changed_answer_fails("nebius", provider_server, tmp_path, sqlite_url, "/prices",
                         b"<html><body><h1>Pricing</h1></body></html>",
                         "'NVIDIA GPU Instances' is missing")
