"""Verda (formerly DataCrunch): the JSON-LD offers of its pricing page, on the real capture
of 2026-08 (tests/fixtures/verda/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.verda import VerdaSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "verda" / "pricing_jsonld_real.html").read_text()
URL = "https://verda.com/pricing"


def parse(page: str = PAGE) -> list[PriceItem]:
    spider = VerdaSpider()
    spider.settings = Settings()
    return list(spider.parse(response(page, URL, kind="html")))


def test_each_priced_instance_is_an_offer_at_its_list_price():
    items = parse()
    found = {(i.instance_type, i.pricing): i for i in items}
    h100 = found["1x H100 SXM5 80GB", "on_demand"]
    assert (h100.gpu, h100.gpu_count, h100.price, h100.currency, h100.available) == (
        "H100 SXM5 80GB", 1, 3.25, "USD", None)
    assert found["1x H100 SXM5 80GB", "spot"].price == 1.625
    # the page lists the 1x H100 twice (two hardware variants, one price): one offer
    assert len([i for i in items if i.instance_type == "1x H100 SXM5 80GB"]) == 2
    # confidential computing is a mode of the same GPU
    cc = found["1x B200 CC SXM6 180GB", "on_demand"]
    assert (cc.gpu, cc.price, cc.attributes["confidential_computing"]) == (
        "B200 SXM6 180GB", 6.232, True)
    # an instant cluster is an on-demand offer of all its GPUs
    cluster = found["12x GB300 SXM6 288GB", "on_demand"]
    assert (cluster.gpu_count, cluster.price, cluster.attributes["product"]) == (
        12, 103.4, "instant cluster")
    # the unnamed CPU rows are not GPU offers
    assert all(i.instance_type for i in items) and len(items) == 32


def test_a_price_its_specification_contradicts_is_refused():
    changed = PAGE.replace('"price":3.25,"priceCurrency":"USD","priceSpecification":'
                           '{"@type":"UnitPriceSpecification","price":3.25',
                           '"price":3.25,"priceCurrency":"USD","priceSpecification":'
                           '{"@type":"UnitPriceSpecification","price":32.5', 1)
    with pytest.raises(ParseError, match="priceSpecification"):
        parse(changed)


def test_a_page_without_its_offers_is_a_changed_page():
    with pytest.raises(ParseError, match="'Offer' has 0 GPU rows, expected at least 10"):
        parse(PAGE.replace('"@type":"Offer"', '"@type":"Product"'))


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {(o["instance_type"], o["pricing"]): o for o in replayed_offers("verda", sqlite_url)}
    h100 = found["1x H100 SXM5 80GB", "on_demand"]
    assert (h100["gpu"], h100["price_per_gpu_usd"]) == ("H100-SXM-80GB", 3.25)
    assert h100["attributes"]["price_source"] == "list_page"
    assert found["1x B200 SXM6 180GB", "spot"]["gpu"] == "B200"


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    changed_answer_fails("verda", provider_server, tmp_path, sqlite_url, "/pricing",
                         b"<html><body><h1>Pricing</h1></body></html>",
                         "'Offer' has 0 GPU rows, expected at least 10")
