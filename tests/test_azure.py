"""Azure Retail Prices: parser on recorded pages in the API's format, and a real crawl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpuradar.crawler.spiders.azure import AzureSpider, gpu_of
from gpuradar.crawler.spiders.base import ParseError
from scrapy import Request
from scrapy.http import TextResponse

from gpuradar.core.items import PriceItem

FIX = Path(__file__).parent / "fixtures" / "azure"


def response(name: str, url: str = "https://prices.azure.com/api/retail/prices") -> TextResponse:
    return TextResponse(url=url, body=(FIX / name).read_bytes(), encoding="utf-8",
                        request=Request(url))


def parse(name: str) -> tuple[list[PriceItem], list[Request]]:
    out = list(AzureSpider().parse(response(name)))
    return ([o for o in out if isinstance(o, PriceItem)],
            [o for o in out if isinstance(o, Request)])


def test_first_page_yields_linux_consumption_gpu_meters_and_follows_next_page():
    items, requests = parse("prices_page1.json")
    keys = {(i.region, i.instance_type, i.pricing) for i in items}
    assert ("eastus", "Standard_NC24ads_A100_v4", "on_demand") in keys
    assert ("eastus", "Standard_NC24ads_A100_v4", "spot") in keys
    # Windows, Low Priority and DevTestConsumption meters are not offers; EUAP is a canary region.
    a100 = [i for i in items if i.instance_type == "Standard_NC24ads_A100_v4"]
    assert sorted(i.price for i in a100) == [0.7346, 3.673]
    assert not any(i.region.endswith("euap") for i in items)
    [nxt] = requests
    assert "$skip=1000" in nxt.url


def test_sizes_map_to_gpu_count_and_model():
    assert gpu_of("Standard_ND96isr_H100_v5") == ("H100 SXM", 80, 8, 96)
    assert gpu_of("Standard_NV6ads_A10_v5")[2] == pytest.approx(1 / 6)
    assert gpu_of("Standard_NC24ads_A100_v4")[:3] == ("A100 PCIe", 80, 1)
    assert gpu_of("Standard_D4s_v5") is None
    assert gpu_of("Standard_NP10s") is None  # FPGA, not a GPU


def test_zero_price_is_kept_for_the_pipeline_to_drop():
    items, _ = parse("prices_page1.json")
    [zero] = [i for i in items if i.region == "westeurope"
              and i.instance_type == "Standard_ND96isr_H100_v5"]
    assert zero.price == 0.0  # the pipeline drops it (zero_price); it is never stored


def test_changed_field_name_is_a_clear_error(tmp_path):
    page = json.loads((FIX / "prices_page1.json").read_text())
    del page["Items"][0]["armSkuName"]
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page))
    resp = TextResponse(url="https://prices.azure.com/x", body=path.read_bytes(), encoding="utf-8")
    with pytest.raises(ParseError, match=r"azure.*'armSkuName' is missing.*Items\[0\]"):
        list(AzureSpider().parse(resp))
    page = {"BillingCurrency": "USD", "Items": {"not": "a list"}}
    resp = TextResponse(url="https://prices.azure.com/x", body=json.dumps(page).encode(),
                        encoding="utf-8")
    with pytest.raises(ParseError, match="'Items' is dict, expected list"):
        list(AzureSpider().parse(resp))


def test_multi_gpu_offers_carry_their_published_interconnect():
    from gpuradar.crawler.pipelines import normalize

    from gpuradar.core.currency import FxTable

    items, _ = parse("prices_page1.json")
    nd = next(i for i in items if i.instance_type == "Standard_ND96isr_H100_v5")
    assert normalize(nd, FxTable()) is None
    assert nd.attributes["interconnect"]["intra_node"] == "nvswitch"
    assert nd.attributes["interconnect"]["inter_node"] == "infiniband"
    single = next(i for i in items if i.instance_type == "Standard_NC40ads_H100_v5")
    normalize(single, FxTable())
    assert "interconnect" not in single.attributes
