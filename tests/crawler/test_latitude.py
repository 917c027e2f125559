"""Latitude.sh: the bare-metal GPU plans its pricing page embeds, on the real capture of
2026-08-22 (tests/fixtures/latitude/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.latitude import LatitudeSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "latitude" / "pricing_plans_real.html").read_text()
URL = "https://www.latitude.sh/pricing"


def parse(page: str = PAGE) -> dict[tuple[str, str], PriceItem]:
    spider = LatitudeSpider()
    spider.settings = Settings()
    return {(i.instance_type, i.region): i
            for i in spider.parse(response(page, URL, kind="html"))}


def test_each_gpu_plan_is_an_offer_per_region_with_its_stock():
    found = parse()
    rtx = found["g4-rtx6kpro-large", "Japan"]
    assert (rtx.gpu, rtx.gpu_count, rtx.gpu_memory_gb, rtx.price, rtx.currency) == (
        "NVIDIA RTX PRO 6000", 8, 96, 52.0, "USD")
    assert (rtx.available, rtx.attributes["stock_level"], rtx.attributes["in_stock"]) == (
        True, "low", ["TYO4"])
    # listed with a price but out of stock: unavailable
    assert found["g4-rtx6kpro-large", "Netherlands"].available is False
    # no price in the United Kingdom (null): no offer there
    assert ("g4-rtx6kpro-large", "United Kingdom") not in found
    h100 = found["g3-h100-small", "United States"]
    assert (h100.gpu, h100.price, h100.available, h100.vcpus) == (
        "NVIDIA H100 80GB", 3.37, False, None)
    assert len(found) == 6


def test_a_page_without_its_plan_data_is_a_changed_page():
    with pytest.raises(ParseError, match="'plansData' is missing"):
        parse(PAGE.replace("plansData", "plans"))
    with pytest.raises(ParseError, match="pricing.USD.hour' is '3.37'"):
        parse(PAGE.replace('\\"hour\\":3.37', '\\"hour\\":\\"3.37\\"'))


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {(o["instance_type"], o["region"]): o
             for o in replayed_offers("latitude", sqlite_url)}
    rtx = found["g4-rtx6kpro-large", "United States"]
    assert (rtx["gpu"], rtx["price_per_gpu_usd"], rtx["available"]) == (
        "RTX-PRO-6000", 6.0, True)
    assert rtx["attributes"]["price_source"] == "list_page"
    assert found["g4-b300-large", "United States"]["gpu"] == "B300"


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    changed_answer_fails("latitude", provider_server, tmp_path, sqlite_url, "/pricing",
                         b"<html><body><h1>Pricing</h1></body></html>",
                         "'plansData' is missing")
