"""Civo: the GPU tables of its pricing page, on the real capture of 2026-08-22
(tests/fixtures/civo/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.civo import CivoSpider
from tests.helpers import FIXTURES, response
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "civo" / "pricing_gpus_real.html").read_text()
URL = "https://www.civo.com/pricing"


def parse(page: str = PAGE) -> dict[str, PriceItem]:
    spider = CivoSpider()
    spider.settings = Settings()
    return {i.instance_type: i for i in spider.parse(response(page, URL, kind="html"))}


def test_each_size_is_an_on_demand_offer_with_its_commitment_prices_beside_it():
    found = parse()
    h200 = found["8 x NVIDIA H200 - 141GB HBM3e (Extra Large)"]
    assert (h200.gpu, h200.gpu_count, h200.gpu_memory_gb, h200.price, h200.pricing) == (
        "NVIDIA H200", 8, 141, 27.92, "on_demand")
    assert (h200.vcpus, h200.memory_gb, h200.available, h200.region) == (
        176, 1536, None, "unspecified")
    assert h200.attributes["commitment_per_hour"] == {
        "6_months": 26.32, "12_months": 25.52, "24_months": 24.72, "36_months": 23.92}
    # the B200 is sold on commitment only ("N/A" on demand): no on-demand offer
    assert not [k for k in found if "B200" in k]
    assert len(found) == 8


@pytest.mark.parametrize(("change", "replacement", "error"), [
    ("<th width=\"15%\">On-demand</th>", "<th width=\"15%\">Hourly</th>", "header"),
    ("$27.92<span>", "27.92 USD<span>", "expected $N.NN or N/A"),
    ("8 x NVIDIA H200 - 141GB HBM3e", "NVIDIA H200 x8", "product-detail"),
])
def test_a_changed_table_is_refused(change: str, replacement: str, error: str):
    assert change in PAGE
    with pytest.raises(ParseError, match=error.replace("$", r"\$")):
        parse(PAGE.replace(change, replacement, 1))


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {o["instance_type"]: o for o in replayed_offers("civo", sqlite_url)}
    h200 = found["1 x NVIDIA H200 - 141GB HBM3e (Small)"]
    assert (h200["gpu"], h200["price_per_gpu_usd"]) == ("H200-SXM-141GB", 3.49)
    assert h200["attributes"]["price_source"] == "list_page"
    assert h200["observed_at"].startswith("2026-08-22")


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    changed_answer_fails("civo", provider_server, tmp_path, sqlite_url, "/pricing",
                         b"<html><body><h1>Pricing</h1></body></html>",
                         "'GPU pricing tables' has 0 GPU rows, expected at least 5")
