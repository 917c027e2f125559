"""Scaleway: the Instance API's catalog and stock, on the real answers of fr-par-2 (2026-08,
tests/fixtures/scaleway/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scrapy.settings import Settings

from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.scaleway import ScalewaySpider
from tests.helpers import FIXTURES
from tests.source_checks import changed_answer_fails, replayed_offers

FIX = FIXTURES / "scaleway"
URL = "https://api.scaleway.com/instance/v1/zones/fr-par-2/products/servers"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIX / name).read_text())["servers"]


def offers(stock: dict[str, Any] | None = None, servers: dict[str, Any] | None = None):
    spider = ScalewaySpider()
    spider.settings = Settings()
    return {i.instance_type: i for i in spider.offers(
        servers if servers is not None else load("servers_fr-par-2_real.json"), "fr-par-2",
        URL, stock)}


def test_gpu_types_become_offers_priced_per_instance_in_euros_with_their_stock():
    found = offers(load("availability_fr-par-2_real.json"))
    assert "BASIC2-A2C-4G" not in found  # a CPU type
    h100 = found["H100-SXM-8-80G"]
    assert (h100.gpu, h100.gpu_count, h100.price, h100.currency, h100.region, h100.zone) == (
        "H100-SXM", 8, 25.3308, "EUR", "fr-par", "fr-par-2")
    assert (h100.gpu_memory_gb, h100.vcpus, h100.available) == (80.0, 128, True)
    # "shortage": none to rent now; "available": can be rented
    assert found["H100-2-80G"].available is False
    assert found["B300-SXM-8-288G"].attributes == {"stock": "shortage"}


def test_without_the_stock_answer_availability_is_unknown():
    assert {i.available for i in offers(None).values()} == {None}


def test_a_catalog_without_gpu_types_is_a_changed_answer():
    cpu_only = {"BASIC2-A2C-4G": load("servers_fr-par-2_real.json")["BASIC2-A2C-4G"]}
    with pytest.raises(ParseError, match="'servers' has 0 GPU rows, expected at least 1"):
        offers(None, cpu_only)


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {o["instance_type"]: o for o in replayed_offers("scaleway", sqlite_url)}
    h100 = found["H100-SXM-8-80G"]
    assert (h100["gpu"], h100["price"], h100["currency"]) == ("H100-SXM-80GB", 25.3308, "EUR")
    assert h100["attributes"]["price_source"] == "api" and h100["available"] is True
    assert found["H100-1-80G"]["gpu"] == "H100-PCIE-80GB"
    assert h100["observed_at"].startswith("2026-08-01")


def test_a_changed_catalog_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                                sqlite_url):
    reshaped = json.dumps({"server_types": load("servers_fr-par-2_real.json")}).encode()
    changed_answer_fails("scaleway", provider_server, tmp_path, sqlite_url,
                         "/instance/v1/zones/fr-par-2/products/servers", reshaped,
                         "unexpected response shape: field 'servers' is missing")


def test_a_saved_stock_answer_lists_no_prices_and_a_saved_catalog_page_does():
    """`gpuradar parse scaleway` (and the parse benchmark) on the two answers a crawl saves:
    the stock answer carries no prices, so it yields no offer instead of failing as a
    catalog page without GPUs."""
    from scrapy.http import TextResponse

    spider = ScalewaySpider()
    spider.settings = Settings()
    stock = TextResponse(URL + "/availability?per_page=100", body=(
        FIX / "availability_fr-par-2_real.json").read_bytes(), encoding="utf-8")
    assert list(spider.parse_file(stock)) == []
    catalog = TextResponse(URL + "?per_page=100&page=1", body=(
        FIX / "servers_fr-par-2_real.json").read_bytes(), encoding="utf-8")
    assert {i.instance_type for i in spider.parse_file(catalog)} >= {"H100-SXM-8-80G"}
