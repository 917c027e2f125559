"""DigitalOcean: the GPU Droplet tables of its docs pricing page, on the real capture of
2026-08-18 (tests/fixtures/digitalocean/SOURCE.md), parsed, replayed and changed."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.digitalocean import DigitaloceanSpider
from tests.helpers import FIXTURES, response
from tests.routes.digitalocean import PATH
from tests.source_checks import changed_answer_fails, replayed_offers

PAGE = (FIXTURES / "digitalocean" / "droplet_pricing_gpu_real.html").read_text()
URL = "https://docs.digitalocean.com" + PATH


def parse(page: str = PAGE) -> dict[tuple[str, str], PriceItem]:
    spider = DigitaloceanSpider()
    spider.settings = Settings()
    return {(i.instance_type, i.pricing): i
            for i in spider.parse(response(page, URL, kind="html"))}


def test_each_droplet_is_an_offer_of_its_gpus_at_its_hourly_price():
    found = parse()
    h100 = found["NVIDIA H100 (8x)", "on_demand"]
    assert (h100.gpu, h100.gpu_count, h100.price, h100.currency, h100.available) == (
        "NVIDIA H100", 8, 35.28, "USD", None)
    assert found["NVIDIA H100", "on_demand"].gpu_count == 1
    # spot only where the page sells it as spot; contract plans have no price
    b300 = found["NVIDIA B300, liquid-cooled (8x)", "spot"]
    assert (b300.gpu, b300.price, b300.attributes) == (
        "NVIDIA B300", 89.52, {"cooling": "liquid-cooled"})
    assert not [k for k in found if k[0].startswith("NVIDIA B300") and k[1] == "on_demand"]
    assert len(found) == 19


@pytest.mark.parametrize(("change", "error"), [
    ('<h2 id="spot-gpu-droplet-pricing">', "<h2 id=spot-gpu-droplet-pricing>' appears 0"),
    ("<th>Price</th>", "header' is ['GPU', 'Cost']"),
    ("$4.41 per hour", "expected '$N.NN per hour'"),
])
def test_a_changed_page_is_refused(change: str, error: str):
    replacement = {"<th>Price</th>": "<th>Cost</th>", "$4.41 per hour": "4.41 USD / h"}.get(
        change, "<h2>")
    with pytest.raises(ParseError, match=error.replace("$", r"\$").replace("[", r"\[")):
        parse(PAGE.replace(change, replacement, 1))


def test_the_shipped_recording_replays_dated_at_its_capture(sqlite_url):
    found = {(o["instance_type"], o["pricing"]): o
             for o in replayed_offers("digitalocean", sqlite_url)}
    h100 = found["NVIDIA H100 (8x)", "on_demand"]
    assert (h100["gpu"], h100["price_per_gpu_usd"]) == ("H100-SXM-80GB", 4.41)
    assert h100["attributes"]["price_source"] == "list_page"
    assert h100["observed_at"].startswith("2026-08-18")
    assert found["AMD MI350X (8x)", "spot"]["gpu"] == "MI350X"


def test_a_changed_page_fails_the_crawl_and_keeps_the_offers(tmp_path, provider_server,
                                                             sqlite_url):
    cut = PAGE.split('<h2 id="spot-gpu-droplet-pricing">')[0].encode()
    changed_answer_fails("digitalocean", provider_server, tmp_path, sqlite_url, PATH, cut,
                         "<h2 id=spot-gpu-droplet-pricing>' appears 0 times")
