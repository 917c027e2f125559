"""Azure Retail Prices: the parser on real rows and on pages in the API's format, the size
names read as Azure documents them, the meter in effect, and real crawls."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.azure import AzureSpider, NotAGpu, Uncatalogued, size_of
from gpuradar.crawler.spiders.base import ParseError
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, callback_spider, response, spider_settings
from tests.provider_server import Reply, serve_standard
from tests.routes.core import azure_retail_prices

FIX = FIXTURES / "azure"
URL = "https://prices.azure.com/api/retail/prices"


def load(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def spider() -> AzureSpider:
    return get_crawler(AzureSpider)._create_spider()


def chain(*pages: dict | Path, s: AzureSpider | None = None) -> tuple[list[PriceItem], list]:
    """Feed pages as one NextPageLink chain; the items at its end, and follow-up requests."""
    s = s or spider()
    items, requests = [], []
    for page in pages:
        for out in s.parse(response(page, URL)):
            (items if isinstance(out, PriceItem) else requests).append(out)
    return items, requests


def by_key(items: list[PriceItem]) -> dict[tuple[str, str, str], PriceItem]:
    return {(i.region, i.instance_type, i.pricing): i for i in items}


def stats(s: AzureSpider) -> dict:
    return s.crawler.stats.get_stats()


# -- size names --------------------------------------------------------------------------
def test_sizes_map_to_gpu_count_and_model_per_azure_naming():
    assert size_of("Standard_ND96isr_H100_v5") == ("H100 SXM", 80, 8, 96)
    assert size_of("Standard_NV6ads_A10_v5").count == pytest.approx(1 / 6)
    assert tuple(size_of("Standard_NC24ads_A100_v4"))[:3] == ("A100 PCIe", 80, 1)
    assert size_of("Standard_ND96asr_v4").memory_gb == 40      # no accelerator in the name
    assert size_of("Standard_ND96amsr_A100_v4").memory_gb == 80
    assert size_of("Standard_NC24r").gpu == "K80"               # version 1: no suffix
    assert size_of("Standard_NV4as_v4").count == pytest.approx(1 / 8)
    with pytest.raises(NotAGpu):
        size_of("Standard_NP10s")  # FPGA
    with pytest.raises(NotAGpu):
        size_of("Standard_D4s_v5")


def test_new_variants_of_a_known_series_need_no_code_change():
    # Real sizes the old closed table did not know: extra tokens and digits in the features.
    assert tuple(size_of("Standard_ND96is_noIB_H100_v5")) == ("H100 SXM", 80, 8, 96)
    assert tuple(size_of("Standard_ND128isrG5_GB300_v6")) == ("GB300", 288, 4, 128)
    assert tuple(size_of("Standard_ND128isr_NDR_GB200_v6"))[:3] == ("GB200", 186, 4)


@pytest.mark.parametrize(("size", "gpus"), [
    ("Standard_NC24lds_xl_RTXPRO6000BSE_v6", 1 / 4), ("Standard_NC36ds_xl_RTXPRO6000BSE_v6", 1 / 4),
    ("Standard_NC36lds_xl_RTXPRO6000BSE_v6", 1 / 4), ("Standard_NC72ds_xl_RTXPRO6000BSE_v6", 1 / 2),
    ("Standard_NC72lds_xl_RTXPRO6000BSE_v6", 1 / 2), ("Standard_NC144ds_xl_RTXPRO6000BSE_v6", 1),
    ("Standard_NC144lds_xl_RTXPRO6000BSE_v6", 1), ("Standard_NC288ds_xl_RTXPRO6000BSE_v6", 2),
    ("Standard_NC288lds_xl_RTXPRO6000BSE_v6", 2)])
def test_rtx_pro_6000_ga_sizes_have_microsofts_gpu_share(size, gpus):
    """The GA sizes of Microsoft's NC RTX PRO 6000 BSE v6 series page, partitioned GPUs as
    fractions (the series' "Accelerators 0.25 - 2")."""
    assert tuple(size_of(size)) == ("RTX PRO 6000", 96, gpus, int(size.split("_")[1][2:5]
                                                                   .rstrip("dls")))


def test_rtx_pro_6000_preview_and_undocumented_sizes_are_reported():
    # Microsoft's NCv6 overview: the preview sizes no longer deploy since GA.
    for preview in ("Standard_NC128lds_xl_RTXPRO6000BSE_v6",
                    "Standard_NC256ds_xl_RTXPRO6000BSE_v6", "Standard_NC320ds_xl_RTXPRO6000BSE_v6"):
        with pytest.raises(Uncatalogued, match="^a NC RTXPRO6000BSE v6 size Microsoft retired "
                                               r"\(no longer deployable\)$"):
            size_of(preview)
    # On the price pages, in no Microsoft size table.
    for size in ("Standard_NC8lds_xl_RTXPRO6000BSE_v6", "Standard_NC132ds_xl_RTXPRO6000BSE_v6",
                 "Standard_NC264lds_xl_RTXPRO6000BSE_v6", "Standard_NC324ds_xl_RTXPRO6000BSE_v6"):
        with pytest.raises(Uncatalogued, match="lists no size with"):
            size_of(size)


def test_a_compact_size_name_is_read_like_the_standard_one():
    # The compact spelling of real meters ("NC36dsxlRTX6kv6" is the meterName of
    # Standard_NC36ds_xl_RTXPRO6000BSE_v6), which a third-party adapter saw as armSkuName.
    assert size_of("NC36dsxlRTX6kv6") == size_of("Standard_NC36ds_xl_RTXPRO6000BSE_v6")
    assert size_of("NC24adsA100v4") == size_of("Standard_NC24ads_A100_v4")
    with pytest.raises(Uncatalogued, match="lists no size with 8 vCPUs"):
        size_of("NC8dsxlRTX6Kv6")
    # Without a known accelerator a compact name could pass for the family's first series
    # (NC24 would be 4 x K80): reported instead.
    with pytest.raises(Uncatalogued, match="accelerator 'Q' unknown"):
        size_of("NC24ldsQv6")
    # A compact name outside the N families is no GPU; an N one in no known form is reported.
    with pytest.raises(NotAGpu):
        size_of("D4sv5")
    with pytest.raises(Uncatalogued, match="does not follow Azure's naming"):
        size_of("NCxyz")


def test_truly_unknown_sizes_say_what_is_missing():
    with pytest.raises(Uncatalogued, match="size table for NC V100 v3 lists no size with 36"):
        size_of("Standard_NC36s_v3")  # no accelerator in the name: the series' GPU
    with pytest.raises(Uncatalogued, match="series ND B400 v7 is not in"):
        size_of("Standard_ND128isr_B400_v7")


# -- the real rows -----------------------------------------------------------------------
def test_real_rows_new_h100_variant_is_an_offer_windows_devtest_reservations_are_not():
    items, requests = chain(FIX / "westus_real_rows.json")
    assert requests == []
    [nd] = items  # every other real row is Windows, DevTest or a Reservation
    assert (nd.region, nd.instance_type, nd.pricing) == (
        "westus", "Standard_ND96is_noIB_H100_v5", "on_demand")
    assert (nd.price, nd.gpu, nd.gpu_count, nd.vcpus) == (115.034, "H100 SXM", 8, 96)
    assert nd.attributes["effective_from"] == "2025-02-01T00:00:00Z"


def test_unknown_size_is_reported_not_dropped():
    """The real RTX PRO 6000 rows with the Linux product name (only `productName` changed,
    " Windows" removed): the GA size Microsoft documents is an offer of a quarter GPU, the
    retired preview size and the undocumented one are reported as uncatalogued with their
    raw names."""
    page = load("westus_real_rows.json")
    for item in page["Items"]:
        item["productName"] = item["productName"].removesuffix(" Windows")
    s = spider()
    items, _ = chain(page, s=s)
    offers = by_key(items)
    rtx = offers[("westus", "Standard_NC36ds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert (rtx.gpu, rtx.gpu_count, rtx.vcpus, rtx.price) == ("RTX PRO 6000", 0.25, 36, 3.53)
    assert stats(s)["gpuradar/uncatalogued"] == 2
    assert stats(s)["gpuradar/uncatalogued_names"] == {
        "Standard_NC264lds_xl_RTXPRO6000BSE_v6": 1, "Standard_NC128lds_xl_RTXPRO6000BSE_v6": 1}
    # The T4 row is a Spot meter (the marker is in meterName and skuName).
    assert offers[("westus", "Standard_NC8as_T4_v3", "spot")].price == 0.360172


def test_every_series_of_the_size_table_has_its_gpu_in_the_catalog():
    """A series whose GPU the catalog lacks would store its offers under a raw name, without
    memory, kind or precision (the P40 of ND, the MI25 of NVv4 and the V620 of NGads were)."""
    from gpuradar.core import gpus
    from gpuradar.crawler.spiders.azure import SERIES

    found = {key: gpus.lookup(series.gpu, series.memory_gb) for key, series in SERIES.items()}
    assert [key for key, gpu in found.items() if gpu is None] == []
    assert (found[("ND", None, "v1")].name, found[("NV", None, "v4")].name,
            found[("NG", "V620", "v1")].name) == ("P40", "MI25", "V620")


def test_a_real_row_of_an_amd_v620_size_is_stored_under_the_catalog_name():
    """The real T4 Spot row with only the size changed to a V620 one (meter, SKU and product
    names): the pipeline stores it as the catalog's V620, a quarter GPU."""
    from gpuradar.core.currency import FxTable
    from gpuradar.crawler.pipelines import normalize

    page = load("westus_real_rows.json")
    row = dict(page["Items"][0], armSkuName="Standard_NG8ads_V620_v1",
               meterName="NG8ads V620 v1 Spot", skuName="NG8ads V620 v1 Spot",
               productName="Virtual Machines NGadsV620 Series")
    items, _ = chain({"Items": [row], "NextPageLink": None})
    [offer] = items
    assert normalize(offer, FxTable()) is None
    assert (offer.gpu, offer.gpu_raw, offer.gpu_count, offer.gpu_memory_gb) == (
        "V620", "", 0.25, 32)  # no raw name kept: the catalog knows the GPU


def test_a_compact_arm_sku_name_is_an_offer_too():
    """A real RTX row whose armSkuName is in the compact form (only `armSkuName` changed, to
    its own meterName; `productName` made Linux)."""
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["meterName"] == "NC36dsxlRTX6kv6"
               and i["type"] == "Consumption")
    page["Items"] = [row | {"armSkuName": row["meterName"],
                            "productName": row["productName"].removesuffix(" Windows")}]
    [item] = chain(page)[0]
    assert (item.instance_type, item.gpu_count, item.price) == ("NC36dsxlRTX6kv6", 0.25, 3.53)


def test_srs_win_products_are_windows_and_never_share_the_linux_key():
    """Real GPU series name their Windows product "... Srs Win"; this is the real ND row with
    `productName` and `retailPrice` changed to such a Windows meter, listed first."""
    page = load("westus_real_rows.json")
    linux = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    windows = {**linux, "productName": "Virtual Machines NDsH100v5 Srs Win", "retailPrice": 130.0}
    page["Items"] = [windows, linux]
    items, _ = chain(page)
    assert [(i.instance_type, i.price) for i in items] == [("Standard_ND96is_noIB_H100_v5",
                                                             115.034)]


def test_spot_is_recognised_from_sku_name_alone():
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    spot = {**row, "skuName": "ND96isnIBH100v5 Spot", "retailPrice": 23.0}  # meterName as is
    page["Items"] = [row, spot]
    offers = by_key(chain(page)[0])
    assert offers[("westus", "Standard_ND96is_noIB_H100_v5", "spot")].price == 23.0
    assert offers[("westus", "Standard_ND96is_noIB_H100_v5", "on_demand")].price == 115.034


def test_superseded_and_future_prices_are_ignored_whatever_the_page_order():
    """The real ND row, and copies that differ in `effectiveStartDate` and `retailPrice`: an
    older meter on a later page, and a price announced for the future."""
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    older = {**row, "effectiveStartDate": "2024-06-01T00:00:00Z", "retailPrice": 98.32}
    future = {**row, "effectiveStartDate": "2999-01-01T00:00:00Z", "retailPrice": 150.0}
    first = {**page, "Items": [future, row], "NextPageLink": URL + "?$skip=2"}
    second = {**page, "Items": [older], "NextPageLink": None}
    for pages in ((first, second), ({**second, "NextPageLink": URL + "?$skip=1"},
                                    {**first, "NextPageLink": None})):
        s = spider()
        items, requests = chain(*pages, s=s)
        assert len(requests) == 1
        assert [(i.instance_type, i.price) for i in items] == [
            ("Standard_ND96is_noIB_H100_v5", 115.034)]
        assert stats(s)["gpuradar/skipped/superseded_price"] == 1
        assert stats(s)["gpuradar/skipped/future_price"] == 1


def test_a_price_taking_effect_this_instant_is_in_effect():
    """A copy of the real ND row whose `effectiveStartDate` is the crawl's own time: that
    price is the offer's, not one for the future."""
    from datetime import UTC, datetime

    from gpuradar.core.clock import FakeClock

    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    now = {**row, "effectiveStartDate": "2026-12-06T12:00:00Z", "retailPrice": 120.0}
    s = spider()
    s.clock = FakeClock(datetime(2026, 12, 6, 12, 0, tzinfo=UTC))
    items, _ = chain({**page, "Items": [row, now], "NextPageLink": None}, s=s)
    assert [(i.instance_type, i.price) for i in items] == [("Standard_ND96is_noIB_H100_v5", 120.0)]
    assert "gpuradar/skipped/future_price" not in stats(s)


def test_the_same_meter_twice_is_a_duplicate_and_a_meter_not_per_hour_is_skipped():
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    daily = {**row, "armSkuName": "Standard_ND96isr_H100_v5", "unitOfMeasure": "1 Day"}
    s = spider()
    items, _ = chain({**page, "Items": [row, dict(row), daily], "NextPageLink": None}, s=s)
    assert [(i.instance_type, i.price) for i in items] == [
        ("Standard_ND96is_noIB_H100_v5", 115.034)]
    assert stats(s)["gpuradar/skipped/duplicate_meter"] == 1
    assert "gpuradar/skipped/superseded_price" not in stats(s)


def test_meters_read_whatever_else_the_page_holds_before_them():
    """An FPGA size first, a meter without `isPrimaryMeterRegion`, a date without offset
    (read as UTC): the GPU meter is still the offer."""
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    fpga = {**row, "armSkuName": "Standard_NP10s", "skuName": "NP10s"}
    plain = {k: v for k, v in row.items() if k != "isPrimaryMeterRegion"}
    plain["effectiveStartDate"] = "2024-06-01T00:00:00"
    s = spider()
    items, _ = chain({**page, "Items": [fpga, plain], "NextPageLink": None}, s=s)
    assert [(i.instance_type, i.price) for i in items] == [
        ("Standard_ND96is_noIB_H100_v5", 115.034)]
    assert items[0].attributes["effective_from"] == "2024-06-01T00:00:00"
    bad = {**row, "effectiveStartDate": "soon"}
    with pytest.raises(ParseError, match="'effectiveStartDate' is 'soon', not a date"):
        chain({**page, "Items": [bad], "NextPageLink": None})


# -- pages in the API's format -----------------------------------------------------------
def test_two_pages_yield_linux_consumption_gpu_meters_once_the_chain_ends():
    s = spider()
    items, requests = chain(FIX / "prices_page1.json", s=s)
    assert items == [] and len(requests) == 1 and "$skip=1000" in requests[0].url
    items, requests = chain(FIX / "prices_page2.json", s=s)
    offers = by_key(items)
    assert ("eastus", "Standard_NC24ads_A100_v4", "on_demand") in offers
    assert offers[("eastus", "Standard_NC24ads_A100_v4", "spot")].price == 0.7346
    assert offers[("eastus", "Standard_NC24ads_A100_v4", "on_demand")].price == 3.673
    # Windows, Low Priority and DevTestConsumption meters are not offers; EUAP is a canary
    # region; NP is an FPGA.
    assert not any(i.region.endswith("euap") for i in items)
    assert not any("NP10s" in i.instance_type for i in items)
    assert len(items) == 14 and stats(s)["gpuradar/skipped/not_a_gpu_size"] == 1


def test_zero_price_is_kept_for_the_pipeline_to_drop():
    items = list(spider().parse_file(response(FIX / "prices_page1.json", URL)))
    [zero] = [i for i in items if i.region == "westeurope"
              and i.instance_type == "Standard_ND96isr_H100_v5"]
    assert zero.price == 0.0  # the pipeline drops it (zero_price); it is never stored


def test_requests_ask_for_primary_meters_in_the_documented_syntax():
    query = parse_qs(urlsplit(spider().region_url("westus")).query)
    assert query["meterRegion"] == ["'primary'"]
    assert "armRegionName eq 'westus'" in query["$filter"][0]
    assert query["api-version"] == ["2023-01-01-preview"]
    # Case-sensitive since 2023-01-01-preview: every armSkuName with a capital N, including
    # compact ones without "Standard_" (which `contains(armSkuName, 'Standard_N')` dropped).
    assert "contains(armSkuName, 'N')" in query["$filter"][0]
    assert "Standard_N" not in query["$filter"][0]
    page = load("westus_real_rows.json")
    page["Items"] = [{**i, "isPrimaryMeterRegion": False} for i in page["Items"]]
    s = spider()
    assert chain(page, s=s)[0] == []
    assert stats(s)["gpuradar/skipped/non_primary_meter"] == 1


def test_fields_not_needed_are_ignored_and_needed_ones_fail_loudly():
    page = load("westus_real_rows.json")
    for item in page["Items"]:
        item["savingsPlan"] = [{"unitPrice": 1.0, "term": "1 Year"}]  # not read
        item.pop("location")
    page["SomethingNew"] = {"x": 1}
    assert len(chain(page)[0]) == 1
    broken = copy.deepcopy(page)
    del broken["Items"][0]["armSkuName"]
    with pytest.raises(ParseError, match=r"azure.*'armSkuName' is missing.*Items\[0\]"):
        chain(broken)
    broken = copy.deepcopy(page)
    broken["Items"][8]["effectiveStartDate"] = 20250201
    with pytest.raises(ParseError, match="'effectiveStartDate' is int, expected str"):
        chain(broken)
    with pytest.raises(ParseError, match="'Items' is dict, expected list"):
        chain({"BillingCurrency": "USD", "Items": {"not": "a list"}})


def test_multi_gpu_offers_carry_their_published_interconnect():
    from gpuradar.core.currency import FxTable
    from gpuradar.crawler.pipelines import normalize

    items = list(spider().parse_file(response(FIX / "prices_page1.json", URL)))
    nd = next(i for i in items if i.instance_type == "Standard_ND96isr_H100_v5"
              and i.price)
    assert normalize(nd, FxTable()) is None
    assert nd.attributes["interconnect"]["intra_node"] == "nvswitch"
    assert nd.attributes["interconnect"]["inter_node"] == "infiniband"
    single = next(i for i in items if i.instance_type == "Standard_NC40ads_H100_v5")
    normalize(single, FxTable())
    assert "interconnect" not in single.attributes


# -- real crawls -------------------------------------------------------------------------
def test_crawl_sends_meter_region_and_stores_the_price_in_effect(tmp_path, provider_server,
                                                                 db_url):
    page = load("westus_real_rows.json")
    row = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    page["Items"].insert(0, {**row, "effectiveStartDate": "2024-06-01T00:00:00Z",
                             "retailPrice": 98.32})
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["azure"]),
                       scrapy={"DOWNLOAD_DELAY": 0})
    provider_server.route("GET", "/api/retail/prices",
                          lambda req: azure_retail_prices(req, page["Items"]))
    # No credentials (an empty variable counts as unset): only the prices are asked for.
    blank = dict.fromkeys(("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
                           "AZURE_SUBSCRIPTION_ID"), "")
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url, env=blank)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["dropped"]) == ("ok", 1, {})
    # Nothing asked of the login or management hosts: one first page per region.
    asked = provider_server.requests
    assert {r.path for r in asked} == {"/api/retail/prices"}
    assert {r.query["meterRegion"][0] for r in asked} == {"'primary'"}
    [offer] = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=db_url)
    assert (offer["instance_type"], offer["price"], offer["gpu_count"]) == (
        "Standard_ND96is_noIB_H100_v5", 115.034, 8)


# -- the Resource SKUs API (with credentials) ------------------------------------------------
CREDS = {"tenant_id": "tenant-0001", "client_id": "client-0002",
         "client_secret": "cs-secret-5a4b3c2d1e", "subscription_id": "sub-0003"}
TOKEN = "eyJ0-test-access-token-9f8e7d"  # token_real.json's `access_token` becomes this
TOKEN_URL = "https://login.microsoftonline.com/tenant-0001/oauth2/v2.0/token"
SKUS_URL = ("https://management.azure.com/subscriptions/sub-0003/providers/"
            "Microsoft.Compute/skus?api-version=2021-07-01")


PAGES = [FIX / "prices_page1.json", FIX / "prices_page2.json"]
GRAPH_URL = ("https://management.azure.com/providers/Microsoft.ResourceGraph/resources"
             "?api-version=2021-03-01")
EVICTIONS = "resource_graph_spot_eviction_rates.json"


def prices(s: AzureSpider) -> list[PriceItem]:
    """The two chained price pages; the offers yielded at the chain's end."""
    return [i for page in PAGES for i in s.parse(response(page, URL)) if isinstance(i, PriceItem)]


def with_creds(**settings) -> AzureSpider:
    """A spider with credentials whose price walk is one region's chain (the pages fed)."""
    return callback_spider(AzureSpider, settings, regions=["westus"], **CREDS)


def starts(s: AzureSpider) -> list:
    async def collect():
        return [r async for r in s.start()]
    return asyncio.run(collect())


def token_answer(**changes) -> dict:
    return {**load("token_real.json"), "access_token": TOKEN, **changes}


def sku_entry(name: str, real: str = "Standard_NC24ads_A100_v4") -> dict:
    """A copy of a real Resource SKUs entry with only `name` changed."""
    entry = next(e for e in load("resource_skus_southcentralus_real.json")["value"]
                 if e["name"] == real)
    return {**copy.deepcopy(entry), "name": name}


def skus_page(*extra: dict) -> dict:
    page = load("resource_skus_southcentralus_real.json")
    page["value"] += list(extra)
    return page


def authorize(s: AzureSpider, evictions: Any = None) -> Any:
    """The token answer, then Resource Graph's eviction rates (the fixture unless given); the
    Resource SKUs request the token answer asked for."""
    skus, graph = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    assert graph.url == GRAPH_URL
    assert feed(s, s.parse_evictions, load(EVICTIONS) if evictions is None else evictions,
                graph.url) == ([], [])  # the prices and SKUs are still awaited
    return skus


def feed(s: AzureSpider, callback, body, url: str, status: int = 200) -> tuple[list, list]:
    items, requests = [], []
    for out in callback(response(body, url, status=status)) or ():
        (items if isinstance(out, PriceItem) else requests).append(out)
    return items, requests


def crawl_with_skus(s: AzureSpider, pages: list, sku_pages: list,
                    prices_first: bool = True) -> list[PriceItem]:
    """The token answer, the SKU pages and the price pages, one chain before the other."""
    [_, token_request] = starts(s)
    assert token_request.url == TOKEN_URL
    sku_request = authorize(s)
    items: list[PriceItem] = []

    def prices():
        for page in pages:
            items.extend(feed(s, s.parse, page, URL)[0])

    if prices_first:
        prices()
        assert items == []  # held until the SKU answer has ended
    url = sku_request.url
    for page in sku_pages:
        got, follow = feed(s, s.parse_skus, page, url)
        items.extend(got)
        url = follow[0].url if follow else url
    if not prices_first:
        prices()
    return items


@pytest.fixture
def unlisted_a100(monkeypatch):
    """gpuradar's size table as if it did not list the 24-vCPU NC A100 v4 size yet: the real
    Standard_NC24ads_A100_v4 entry of the SKU answer is then a size only that answer counts."""
    from gpuradar.crawler.spiders import azure

    series = azure.SERIES[("NC", "A100", "v4")]
    monkeypatch.setitem(azure.SERIES, ("NC", "A100", "v4"),
                        azure.Series(series.gpu, series.memory_gb, {48: 2, 96: 4}))


def test_without_credentials_only_the_prices_are_asked_for(caplog):
    [only] = starts(spider())
    assert only.url.startswith("https://prices.azure.com/")
    partly = callback_spider(AzureSpider, tenant_id="t", client_id="c")
    assert len(starts(partly)) == 1
    assert ("AZURE_CLIENT_SECRET (or sources.azure.client_secret) and AZURE_SUBSCRIPTION_ID "
            "(or sources.azure.subscription_id) missing") in caplog.text


def test_the_token_request_is_the_documented_client_credentials_grant():
    s = with_creds()
    [prices, token] = starts(s)
    assert prices.url.startswith("https://prices.azure.com/")
    assert (token.method, token.url) == ("POST", TOKEN_URL)
    assert token.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"
    assert parse_qs(token.body.decode()) == {
        "client_id": ["client-0002"], "scope": ["https://management.azure.com/.default"],
        "client_secret": ["cs-secret-5a4b3c2d1e"], "grant_type": ["client_credentials"]}
    assert token.meta["dont_record"] is True  # the secret and the token stay out of recordings
    assert token.meta["handle_httpstatus_all"] is True  # an error answer is read, and said
    [skus, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    assert skus.url == SKUS_URL
    assert skus.headers[b"Authorization"] == f"Bearer {TOKEN}".encode()
    assert skus.meta["handle_httpstatus_all"] is True


def test_a_replay_asks_for_the_sku_list_without_a_token():
    s = with_creds(GPURADAR_REPLAY_DIR="/nonexistent")
    [_, skus, graph] = starts(s)
    assert skus.url == SKUS_URL and skus.headers[b"Authorization"] == b"Bearer replay"
    assert graph.url == GRAPH_URL and graph.headers[b"Authorization"] == b"Bearer replay"


@pytest.mark.parametrize("prices_first", [True, False])
def test_a_size_the_table_lacks_takes_its_gpu_count_from_the_sku_answer(unlisted_a100, caplog,
                                                                        prices_first):
    s = with_creds()
    items = crawl_with_skus(s, PAGES,
                            [load("resource_skus_southcentralus_real.json")], prices_first)
    offers = by_key(items)
    a100 = offers[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
    assert (a100.gpu, a100.gpu_count, a100.gpu_memory_gb, a100.vcpus) == ("A100 PCIe", 1, 80, 24)
    assert a100.attributes["gpu_count_from"] == "Resource SKUs API"
    # Sizes the table knows keep its count, and say nothing about where it came from.
    nd = next(i for i in items if i.instance_type == "Standard_ND96isr_H100_v5")
    assert nd.gpu_count == 8 and "gpu_count_from" not in nd.attributes
    assert len(items) == 14 and "gpuradar/uncatalogued" not in stats(s)
    assert ("Standard_NC24ads_A100_v4 is not in gpuradar's size table; its GPU count (1) is the "
            "Resource SKUs API's") in caplog.text


def test_a_partitioned_series_size_stays_uncatalogued_whatever_the_sku_answer_says():
    """The real RTX PRO 6000 rows made Linux (only `productName` changed); the SKU answer
    lists the 264-vCPU size (a copy of the real NC24ads_A100_v4 entry, only `name` changed,
    "GPUs": "1" as Microsoft reports partitions)."""
    page = load("westus_real_rows.json")
    for item in page["Items"]:
        item["productName"] = item["productName"].removesuffix(" Windows")
    s = with_creds()
    with_entry = skus_page(sku_entry("Standard_NC264lds_xl_RTXPRO6000BSE_v6"))
    items = crawl_with_skus(s, [page], [with_entry])
    assert "Standard_NC264lds_xl_RTXPRO6000BSE_v6" not in {i.instance_type for i in items}
    assert stats(s)["gpuradar/uncatalogued_names"] == {
        "Standard_NC264lds_xl_RTXPRO6000BSE_v6": 1, "Standard_NC128lds_xl_RTXPRO6000BSE_v6": 1}
    rtx = by_key(items)[("westus", "Standard_NC36ds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert rtx.gpu_count == 0.25 and "gpu_count_from" not in rtx.attributes


def test_why_a_partitioned_size_stays_uncatalogued_is_said(monkeypatch):
    s = with_creds()
    said = []
    monkeypatch.setattr(s, "uncatalogued", lambda name, why: said.append((name, why)))
    s._skus = {"Standard_NC264lds_xl_RTXPRO6000BSE_v6": 1.0}
    for name in ("Standard_NC264lds_xl_RTXPRO6000BSE_v6", "Standard_NC8lds_xl_RTXPRO6000BSE_v6"):
        with pytest.raises(Uncatalogued) as why:
            size_of(name)
        assert s.sku_size(name, why.value) is None
    assert [name for name, _ in said] == ["Standard_NC264lds_xl_RTXPRO6000BSE_v6",
                                          "Standard_NC8lds_xl_RTXPRO6000BSE_v6"]
    for _, why in said:
        assert why.endswith("lists no size with " + why.split(" with ")[1].split(" ")[0]
                            + " vCPUs (GPU count unknown); NC RTXPRO6000BSE v6 sells GPU "
                            "partitions, which the Resource SKUs API counts as whole GPUs: "
                            "its count is not used")


def test_what_the_sku_answer_does_not_count_stays_uncatalogued(unlisted_a100):
    """Copies of the real NC24ads_A100_v4 entry: another resource type, "GPUs" "0", a
    non-numeric count, no capabilities; and one size listed in two regions with two counts."""
    entry = sku_entry("Standard_NC24ads_A100_v4")
    gpus = next(c for c in entry["capabilities"] if c["name"] == "GPUs")
    variants = [{**entry, "resourceType": "disks"},
                {**entry, "capabilities": [{"name": "GPUs", "value": "0"}]},
                {**entry, "capabilities": [{"name": "GPUs", "value": "²"}]},
                {**entry, "capabilities": None}, {**entry, "name": None}]
    for variant in variants:
        page = load("resource_skus_southcentralus_real.json")
        page["value"] = [e for e in page["value"] if e["name"] != entry["name"]] + [variant]
        s = with_creds()
        items = crawl_with_skus(s, PAGES, [page])
        assert "Standard_NC24ads_A100_v4" not in {i.instance_type for i in items}, variant
        assert stats(s)["gpuradar/uncatalogued_names"] == {"Standard_NC24ads_A100_v4": 2}
    twice = {**entry, "capabilities": [{**gpus, "value": "2"}]}
    s = with_creds()
    items = crawl_with_skus(s, PAGES, [skus_page(twice)])
    assert "Standard_NC24ads_A100_v4" not in {i.instance_type for i in items}
    same = {**entry, "locations": ["eastus"]}  # the same count in another region
    s = with_creds()
    items = crawl_with_skus(s, PAGES, [skus_page(same)])
    assert by_key(items)[("eastus", "Standard_NC24ads_A100_v4", "spot")].gpu_count == 1


def test_an_entry_without_a_name_or_capabilities_does_not_end_the_sku_page(unlisted_a100):
    """Entries the SKU answer gives no name or no capabilities list are passed over, not
    taken for the page's end: the sizes listed after them still get their GPU counts."""
    entry = sku_entry("Standard_NC24ads_A100_v4")
    page = load("resource_skus_southcentralus_real.json")
    page["value"] = [{**entry, "name": None}, {**entry, "name": "Standard_X", "capabilities": None},
                     *page["value"]]
    s = with_creds()
    items = crawl_with_skus(s, PAGES, [page])
    a100 = by_key(items)[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
    assert (a100.gpu_count, a100.attributes["gpu_count_from"]) == (1, "Resource SKUs API")
    assert "gpuradar/uncatalogued_names" not in stats(s)


def test_a_sku_page_whose_next_link_is_no_link_is_the_last(unlisted_a100):
    """A `nextLink` that is not a string (or an empty one) names no page: the answer ends
    there and its GPU counts are used."""
    for no_link in (7, {"href": SKUS_URL}, ""):
        page = {**load("resource_skus_southcentralus_real.json"), "nextLink": no_link}
        s = with_creds()
        items = crawl_with_skus(s, PAGES, [page])
        a100 = by_key(items)[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
        assert (a100.gpu_count, a100.attributes["gpu_count_from"]) == (1, "Resource SKUs API")


def test_the_sku_answer_is_read_to_the_end_of_its_next_link_chain(unlisted_a100):
    """The real answer split in two pages (the envelope's `nextLink` added)."""
    real = load("resource_skus_southcentralus_real.json")
    second = SKUS_URL + "&$skiptoken=2"
    first = {"value": real["value"][:2], "nextLink": second}
    last = {"value": real["value"][2:]}
    s = with_creds()
    [_, token] = starts(s)
    request = authorize(s)
    assert prices(s) == []
    got, [follow] = feed(s, s.parse_skus, first, request.url)
    assert got == [] and follow.url == second
    assert follow.headers[b"Authorization"] == f"Bearer {TOKEN}".encode()
    items, _ = feed(s, s.parse_skus, last, follow.url)
    assert by_key(items)[("eastus", "Standard_NC24ads_A100_v4", "on_demand")].gpu_count == 1
    # A nextLink to another host would carry the token there: refused, and said.
    s = with_creds()
    starts(s)
    authorize(s)
    prices(s)
    items, follow = feed(s, s.parse_skus, {**first, "nextLink": "https://evil.example/x"},
                         SKUS_URL)
    assert follow == [] and "Standard_NC24ads_A100_v4" not in {i.instance_type for i in items}
    # ... whichever way the host or the scheme differs
    for away in ("https://other.example/x", "http://management.azure.com/x"):
        s = with_creds()
        starts(s)
        authorize(s)
        prices(s)
        items, follow = feed(s, s.parse_skus, {**first, "nextLink": away}, SKUS_URL)
        assert follow == [], away
        assert "Standard_NC24ads_A100_v4" not in {i.instance_type for i in items}
    # A nextLink back to a page already read would hold the offers for ever: refused.
    s = with_creds()
    starts(s)
    authorize(s)
    prices(s)
    got, [again] = feed(s, s.parse_skus, first, SKUS_URL)
    items, follow = feed(s, s.parse_skus, {**first, "nextLink": SKUS_URL}, again.url)
    assert follow == [] and "Standard_NC24ads_A100_v4" not in {i.instance_type for i in items}


@pytest.mark.parametrize(("step", "status", "body", "said"), [
    ("token", 400, "token_error_docs_example.json", "the token request answered HTTP 400 "
     "invalid_scope"),
    ("token", 200, {"token_type": "Bearer", "expires_in": 3599}, "the token request answered "
     "HTTP 200"),
    ("token", 200, "not json", "the token request answered HTTP 200"),
    ("skus", 403, "arm_error_authorization_failed_real.json", "the SKU list answered HTTP 403 "
     "AuthorizationFailed"),
    ("skus", 500, "", "the SKU list answered HTTP 500"),
    ("skus", 200, "<html>", "the SKU list is not JSON"),
    ("skus", 200, {"values": []}, "the answer has no `value` list"),
])
def test_a_failed_sku_call_keeps_the_tables_offers_and_says_why_once(unlisted_a100, caplog, step,
                                                                    status, body, said):
    s = with_creds()
    [_, token] = starts(s)
    assert prices(s) == []
    if isinstance(body, str) and body.endswith(".json"):
        body = FIX / body
    if step == "token":
        items, requests = feed(s, s.parse_token, body, TOKEN_URL, status)
    else:
        skus = authorize(s)
        items, requests = feed(s, s.parse_skus, body, skus.url, status)
    assert requests == []
    kinds = {i.instance_type for i in items}
    assert "Standard_ND96isr_H100_v5" in kinds and "Standard_NC24ads_A100_v4" not in kinds
    assert stats(s)["gpuradar/uncatalogued_names"] == {"Standard_NC24ads_A100_v4": 2}
    [line] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert line.getMessage() == (f"azure: Resource SKUs API unavailable ({said}): sizes missing "
                                 "from gpuradar's size table stay uncatalogued")


def test_a_long_error_is_cut_to_keep_the_line_one_line(caplog):
    """ARM's real 403 body with its `code` made 400 characters long."""
    body = load("arm_error_authorization_failed_real.json")
    body["error"]["code"] = "X" * 400
    s = with_creds()
    starts(s)
    skus = authorize(s)
    feed(s, s.parse_skus, body, skus.url, 403)
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    reason = line.split(" (", 1)[1].rsplit("): sizes missing", 1)[0]
    assert reason == ("the SKU list answered HTTP 403 " + "X" * 400)[:300]


def test_an_unanswered_sku_call_is_one_line_without_the_secret(unlisted_a100, caplog):
    from twisted.python.failure import Failure

    s = with_creds()
    starts(s)
    s._token = TOKEN
    failure = Failure(ConnectionError(f"refused {TOKEN} cs-secret-5a4b3c2d1e"))
    assert list(s.skus_failed(failure)) == []  # the price chain has not ended yet
    feed(s, s.parse_evictions, load(EVICTIONS), GRAPH_URL)
    items = prices(s)
    kinds = {i.instance_type for i in items}
    assert "Standard_ND96isr_H100_v5" in kinds and "Standard_NC24ads_A100_v4" not in kinds
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line == ("azure: Resource SKUs API unavailable (refused *** ***): sizes missing from "
                    "gpuradar's size table stay uncatalogued")


def test_status_says_what_the_credentials_add():
    assert AzureSpider.status(spider_settings("azure", **CREDS)) == (True, (
        "public Retail Prices API; Azure credentials found: GPU counts missing from the size "
        "table come from the Resource SKUs API, spot eviction rates from Azure Resource "
        "Graph"))
    assert AzureSpider.status(spider_settings("azure", tenant_id="t")) == (True, (
        "public Retail Prices API; the Resource SKUs API and the spot eviction rates "
        "(Resource Graph) are not used: AZURE_CLIENT_ID (or "
        "sources.azure.client_id) and AZURE_CLIENT_SECRET (or sources.azure.client_secret) and "
        "AZURE_SUBSCRIPTION_ID (or sources.azure.subscription_id) missing"))
    assert AzureSpider.status(spider_settings("azure")) == (True, (
        "public Retail Prices API; AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and "
        "AZURE_SUBSCRIPTION_ID (or sources.azure.tenant_id, ...) add GPU counts from the "
        "Resource SKUs API for sizes missing from the size table, and spot eviction rates "
        "(Resource Graph)"))


def test_a_saved_sku_page_parses_to_no_offers():
    page = response(FIX / "resource_skus_southcentralus_real.json", SKUS_URL)
    assert list(spider().parse_file(page)) == []
    graph = response(FIX / EVICTIONS, GRAPH_URL)  # nor does a Resource Graph answer
    assert list(spider().parse_file(graph)) == []


def test_crawl_with_credentials_counts_an_unlisted_size_and_never_shows_the_secrets(
        tmp_path, provider_server, db_url):
    """A whole crawl over HTTP with a service principal in the config file. The price page is
    the real ND row, a copy of it as a size the table lacks (only `armSkuName` changed, to
    Standard_NC12ads_A100_v4) and the real RTX PRO 6000 rows made Linux (only `productName`
    changed); the SKU answer is the real one in two pages (`nextLink` added) plus copies of
    its NC24ads_A100_v4 entry named after the two sizes the table lacks (only `name` changed).
    Logged with -v and recorded: neither the client secret nor the token appears anywhere."""
    from sqlalchemy import create_engine, text

    from tests.routes.core import AZURE_CREDENTIALS, AZURE_SKUS_PATH, AZURE_TOKEN

    page = load("westus_real_rows.json")
    for item in page["Items"]:
        item["productName"] = item["productName"].removesuffix(" Windows")
    nd = next(i for i in page["Items"] if i["armSkuName"] == "Standard_ND96is_noIB_H100_v5")
    page["Items"].append({**nd, "armSkuName": "Standard_NC12ads_A100_v4"})
    real = load("resource_skus_southcentralus_real.json")["value"]
    extra = [sku_entry("Standard_NC12ads_A100_v4"),
             sku_entry("Standard_NC264lds_xl_RTXPRO6000BSE_v6")]

    def skus(req):
        if req.headers.get("authorization") != f"Bearer {AZURE_TOKEN}":
            return Reply(401, fixture_bytes("arm_error_authorization_failed_real.json"))
        if "$skiptoken" in req.query:
            return Reply(body=json.dumps({"value": real[2:] + extra}).encode())
        return Reply(body=json.dumps({"value": real[:2], "nextLink": "{{BASE}}"
                                      + AZURE_SKUS_PATH + "?api-version=2021-07-01"
                                      "&$skiptoken=2"}).encode())

    endpoints = serve_standard(provider_server, ["azure"])
    provider_server.route("GET", "/api/retail/prices",
                          lambda req: Reply(body=json.dumps(page).encode()))
    provider_server.route("GET", AZURE_SKUS_PATH, skus)
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"azure": AZURE_CREDENTIALS})
    record = tmp_path / "rec"
    proc = gpuradar("crawl", "azure", "--json", "-v", "--record", str(record),
                    config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"]) == ("ok", 4), result
    assert set(result["uncatalogued"]) == {"Standard_NC264lds_xl_RTXPRO6000BSE_v6",
                                           "Standard_NC128lds_xl_RTXPRO6000BSE_v6"}
    assert [r.path for r in provider_server.requests].count(AZURE_SKUS_PATH) == 2
    offers = {o["instance_type"]: o for o in gpuradar_json("prices", "--source", "azure",
                                                           config=cfg, db_url=db_url)}
    unlisted = offers["Standard_NC12ads_A100_v4"]
    assert (unlisted["gpu_count"], unlisted["attributes"]["gpu_count_from"]) == (
        1, "Resource SKUs API")
    assert offers["Standard_ND96is_noIB_H100_v5"]["gpu_count"] == 8
    assert "Standard_NC12ads_A100_v4 is not in gpuradar's size table" in proc.stderr
    secrets = (AZURE_CREDENTIALS["client_secret"], AZURE_TOKEN)
    with create_engine(db_url).connect() as conn:
        stored = [str(row) for table in ("offer", "crawl", "price_change")
                  for row in conn.execute(text(f"SELECT * FROM {table}"))]
    recorded = [p.read_text(errors="replace") for p in record.rglob("*") if p.is_file()]
    assert "oauth2" not in (record / "azure" / "index.json").read_text()  # never recorded
    for secret in secrets:
        assert secret not in proc.stdout + proc.stderr
        assert not [s for s in stored + recorded if secret in s]


def test_a_failed_sku_call_keeps_the_tables_offers_in_a_partial_crawl(tmp_path, provider_server,
                                                                      db_url):
    """ARM refuses the SKU list (its real 403 answer): the offers the size table counts are
    stored, the crawl is partial (it closes nothing: an offer only that answer could count is
    not gone), and one line says why, without the secret."""
    from tests.routes.core import AZURE_CREDENTIALS, AZURE_SKUS_PATH

    endpoints = serve_standard(provider_server, ["azure"])
    provider_server.route("GET", AZURE_SKUS_PATH, lambda req: Reply(
        403, fixture_bytes("arm_error_authorization_failed_real.json")))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"azure": AZURE_CREDENTIALS})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url)
    [result] = json.loads(proc.stdout)
    # The 14 offers of the two pages, less the zero price the pipeline drops.
    assert (result["status"], result["items"]) == ("partial", 13), result
    line = ("azure: Resource SKUs API unavailable (the SKU list answered HTTP 403 "
            "AuthorizationFailed): sizes missing from gpuradar's size table stay uncatalogued")
    assert line in result["error"]
    assert proc.stderr.count("Resource SKUs API unavailable") == 1, proc.stderr
    assert AZURE_CREDENTIALS["client_secret"] not in proc.stdout + proc.stderr
    assert len(gpuradar_json("prices", "--source", "azure", config=cfg, db_url=db_url)) == 13


def fixture_bytes(name: str) -> bytes:
    return (FIX / name).read_bytes()


def test_a_size_restricted_for_the_subscription_is_unavailable_there():
    """Resource SKUs `restrictions` (azure-mgmt-compute ResourceSkuRestrictions: type
    Location, values the regions, reasonCode NotAvailableForSubscription) were not read: a
    size this subscription cannot use in a region looked like any other offer. It is stored
    unavailable there, saying why; the same size elsewhere stays unknown."""
    page = skus_page()
    a100 = next(v for v in page["value"] if v["name"] == "Standard_NC24ads_A100_v4")
    a100["restrictions"] = [{
        "type": "Location", "values": ["eastus"],
        "restrictionInfo": {"locations": ["eastus"], "zones": []},
        "reasonCode": "NotAvailableForSubscription"}]
    items = by_key(crawl_with_skus(with_creds(), PAGES, [page]))
    restricted = items[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
    assert restricted.available is False
    assert restricted.attributes["restriction"] == "NotAvailableForSubscription"
    other = items[("eastus", "Standard_NC40ads_H100_v5", "on_demand")]
    assert other.available is None and "restriction" not in other.attributes
    # a restriction of another type (a zone) listed first does not hide the region's
    a100["restrictions"].insert(0, {
        "type": "Zone", "values": ["westus"],
        "restrictionInfo": {"locations": ["westus"], "zones": ["1"]},
        "reasonCode": "NotAvailableForSubscription"})
    items = by_key(crawl_with_skus(with_creds(), PAGES, [page]))
    assert items[("eastus", "Standard_NC24ads_A100_v4", "on_demand")].available is False


# -- the walk, one region at a time ------------------------------------------------------------
def test_each_region_is_walked_on_its_own_next_link_chain(tmp_path, provider_server, sqlite_url):
    """No `$skip` chain over every region (its pages shift when a price changes during the
    walk): each region of Microsoft's list is asked with its own `armRegionName` filter and
    its own NextPageLink chain is followed (the stand-in pages 5 items a page, as the API
    pages by `$skip`); the offers are those of the one chain before."""
    from gpuradar.core.providers.azure import REGIONS

    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server, ["azure"]),
                       scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"]) == ("ok", 13), result  # a zero price dropped
    asked = [(region, int(r.query.get("$skip", ["0"])[0]))
             for r in provider_server.requests
             for region in [r.query["$filter"][0].split("armRegionName eq '")[1].split("'")[0]]]
    assert [region for region, skip in asked if skip == 0] == list(REGIONS)
    # eastus holds 9 meters: its chain is 2 pages, asked one after the other.
    assert [a for a in asked if a[0] == "eastus"] == [("eastus", 0), ("eastus", 5)]
    offers = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert len(offers) == 13
    assert "eastus2euap" not in {o["region"] for o in offers}  # canary: not in the list


def test_a_region_answering_an_error_loses_that_region_alone(tmp_path, provider_server,
                                                             sqlite_url):
    """westeurope answers HTTP 400: its offers are not read, one line says so, the other
    regions' offers are stored and the crawl is partial (it closes nothing)."""
    from tests.routes.core import azure_handler, azure_region

    endpoints = serve_standard(provider_server, ["azure"])
    provider_server.route("GET", "/api/retail/prices", lambda req: (
        Reply(400, b'{"Error": "bad"}') if azure_region(req) == "westeurope"
        else azure_handler(req)))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"azure": {"regions": ["eastus", "westeurope", "westus3"]}})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "partial", result
    assert ("azure: the prices of region westeurope answered HTTP 400: its offers are not "
            "read") in result["error"]
    regions = {o["region"] for o in gpuradar_json("prices", "--source", "azure", config=cfg,
                                                  db_url=sqlite_url)}
    assert regions == {"eastus", "westus3"}


def test_a_region_whose_next_page_is_lost_keeps_none_of_its_offers(tmp_path, provider_server,
                                                                   sqlite_url):
    """eastus's chain is two pages and its second answers HTTP 400: the offers of its first
    page are not stored either (the price in effect of any of them may be on the lost
    page), the other region's are, and the crawl is partial."""
    from tests.routes.core import azure_handler, azure_region

    endpoints = serve_standard(provider_server, ["azure"])
    provider_server.route("GET", "/api/retail/prices", lambda req: (
        Reply(400, b'{"Error": "bad"}')
        if azure_region(req) == "eastus" and req.query.get("$skip") else azure_handler(req)))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"azure": {"regions": ["eastus", "westus3"]}})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "partial", result
    assert [r.query.get("$skip") for r in provider_server.requests
            if azure_region(r) == "eastus"] == [None, ["5"]]  # its first page was read
    regions = {o["region"] for o in gpuradar_json("prices", "--source", "azure", config=cfg,
                                                  db_url=sqlite_url)}
    assert regions == {"westus3"}


# -- spot eviction rates: Azure Resource Graph --------------------------------------------------
def test_the_eviction_query_is_a_resource_graph_query_request():
    """POST .../Microsoft.ResourceGraph/resources?api-version=2021-03-01 with the bearer
    token and a QueryRequest (azure-mgmt-resourcegraph): the SpotResources query, objectArray
    rows, the largest page; no `subscriptions` (the table answers at tenant scope)."""
    s = with_creds()
    starts(s)
    [_, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    assert (graph.method, graph.url) == ("POST", GRAPH_URL)
    assert graph.headers[b"Authorization"] == f"Bearer {TOKEN}".encode()
    assert graph.headers[b"Content-Type"] == b"application/json"
    body = json.loads(graph.body)
    assert set(body) == {"query", "options"}
    assert body["options"] == {"resultFormat": "objectArray", "$top": 1000,
                               "allowPartialScopes": False}
    assert "SpotResources" in body["query"]
    assert "'microsoft.compute/skuspotevictionrate/location'" in body["query"]
    assert "evictionRate = tostring(properties.evictionRate)" in body["query"]


def test_spot_offers_carry_their_eviction_band_named_and_dated_never_a_monthly_rate():
    s = with_creds()
    items = crawl_with_skus(s, PAGES, [load("resource_skus_southcentralus_real.json")])
    offers = by_key(items)
    a100 = offers[("eastus", "Standard_NC24ads_A100_v4", "spot")].attributes
    assert {k: a100[k] for k in ("interruption", "interruption_source")} == {
        "interruption": "0-5", "interruption_source": "Azure Resource Graph"}
    assert len(a100["interruption_as_of"]) == 10 and "interruption_window" not in a100
    assert offers[("westus3", "Standard_ND96amsr_A100_v4", "spot")].attributes[
        "interruption"] == "20+"
    assert "interruption" not in offers[("eastus", "Standard_NC24ads_A100_v4",
                                         "on_demand")].attributes
    # A spot size the answer does not list says so.
    nd = offers[("eastus", "Standard_ND96isr_H100_v5", "spot")].attributes
    assert nd["interruption_unknown"] == ("not in Resource Graph's eviction rates for this "
                                          "size and region")
    # Read by gpuradar.core.spot: shown as published, with no period stated no rate.
    from gpuradar.core.spot import signal_of

    signal = signal_of(a100)
    assert signal.label().startswith("interruption 0-5% (Azure Resource Graph, ")
    assert signal.kind == "interruption rate" and signal.monthly is None


def test_eviction_pages_are_followed_and_an_unreadable_band_is_counted_not_guessed():
    page = load(EVICTIONS)
    first = {**page, "data": page["data"][:2], "$skipToken": "ew0KICAiJGlkIjogIjEiLA0K"}
    odd = [{**page["data"][2], "evictionRate": "high"}, page["data"][3]]
    s = with_creds()
    starts(s)
    [skus, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    got, [follow] = feed(s, s.parse_evictions, first, graph.url)
    assert got == [] and json.loads(follow.body)["options"]["$skipToken"] == first["$skipToken"]
    feed(s, s.parse_evictions, {**page, "data": odd}, graph.url)
    prices(s)
    items, _ = feed(s, s.parse_skus, load("resource_skus_southcentralus_real.json"), skus.url)
    offers = by_key(items)
    assert offers[("westus3", "Standard_ND96amsr_A100_v4", "spot")].attributes[
        "interruption_unknown"] == "Azure eviction rate 'high' not understood"
    assert offers[("southcentralus", "Standard_NC4as_T4_v3", "spot")].attributes[
        "interruption"] == "10-15"
    assert stats(s)["gpuradar/skipped/unreadable_interruption_band"] == 1
    # a $skipToken already followed would loop for ever: the signal is given up, said once
    s = with_creds()
    starts(s)
    [skus, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    feed(s, s.parse_evictions, first, graph.url)
    assert feed(s, s.parse_evictions, first, graph.url) == ([], [])
    assert s._evictions_failed and "already read" in s._evictions_failed


@pytest.mark.parametrize(("status", "body", "said"), [
    (403, "arm_error_authorization_failed_real.json", "HTTP 403 AuthorizationFailed"),
    (200, {"totalRecords": 0}, "no `data` list"),
    (200, "<html>", "not JSON"),
])
def test_a_failed_eviction_query_costs_the_signal_alone(caplog, status, body, said):
    """The prices and GPU counts are kept, the crawl is not made partial (one WARNING), and
    every spot offer says why its signal is unknown."""
    s = with_creds()
    starts(s)
    [skus, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    if isinstance(body, str) and body.endswith(".json"):
        body = FIX / body
    feed(s, s.parse_evictions, body, graph.url, status)
    prices(s)
    items, _ = feed(s, s.parse_skus, load("resource_skus_southcentralus_real.json"), skus.url)
    spot = [i for i in items if i.pricing == "spot"]
    assert spot and all("interruption" not in i.attributes for i in spot)
    whys = {i.attributes["interruption_unknown"] for i in spot}
    assert len(whys) == 1 and said in whys.pop()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    [line] = [r.getMessage() for r in caplog.records if "eviction" in r.getMessage()]
    assert line.startswith("azure: spot eviction rates unavailable (") and said in line
    assert TOKEN not in caplog.text


def test_an_unreadable_eviction_band_is_quoted_to_its_first_20_characters():
    from gpuradar.crawler.spiders.azure import read_evictions

    band = "between 5 and 10 percent, mostly"
    rates: dict = {}
    read_evictions({"data": [{"skuName": "Standard_NC4as_T4_v3", "location": "eastus",
                              "evictionRate": band}]}, "2026-12-06", rates, lambda what: None)
    assert rates == {("standard_nc4as_t4_v3", "eastus"): {
        "interruption_unknown": "Azure eviction rate 'between 5 and 10 per' not understood"}}


def test_a_long_eviction_query_error_is_cut_in_its_warning_and_in_each_spot_offer(caplog):
    """ARM's real 403 body with its `code` made 400 characters long: the WARNING line gives
    its first 300 characters, each spot offer its first 120."""
    body = load("arm_error_authorization_failed_real.json")
    body["error"]["code"] = "X" * 400
    s = with_creds()
    starts(s)
    [skus, graph] = feed(s, s.parse_token, token_answer(), TOKEN_URL)[1]
    feed(s, s.parse_evictions, body, graph.url, 403)
    prices(s)
    items, _ = feed(s, s.parse_skus, load("resource_skus_southcentralus_real.json"), skus.url)
    [line] = [r.getMessage() for r in caplog.records if "eviction" in r.getMessage()]
    why = line.removeprefix("azure: spot eviction rates unavailable (").removesuffix(
        "): spot offers carry no interruption signal")
    assert why.endswith("X" * 100) and "HTTP 403" in why and len(why) == 300
    whys = {i.attributes["interruption_unknown"] for i in items if i.pricing == "spot"}
    assert whys == {f"the Resource Graph eviction rates failed ({why[:120]})"}


def test_without_credentials_azure_spot_offers_say_the_signal_needs_them():
    from gpuradar.core.spot import offer_signal

    items = prices(spider())
    [spot, *_] = [i for i in items if i.pricing == "spot"]
    assert not any(k.startswith("interruption") for k in spot.attributes)
    signal = offer_signal("azure", "spot", spot.attributes)
    assert signal.kind == "unknown" and signal.text.endswith("not read")
    assert "AZURE_CLIENT_SECRET" in signal.text


def test_a_crawl_with_credentials_shows_each_spot_offers_eviction_band(tmp_path,
                                                                      provider_server,
                                                                      sqlite_url):
    """Over HTTP: the token, the SKU list and the eviction query on loopback; `prices` shows
    the band with its source and date in the interruption column, the JSON carries the same
    signal in its interruption fields; neither the secret nor the token is shown."""
    from tests.routes.core import AZURE_CREDENTIALS, AZURE_RESOURCE_GRAPH_PATH, AZURE_TOKEN

    endpoints = serve_standard(provider_server, ["azure"])
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"azure": AZURE_CREDENTIALS})
    record = tmp_path / "rec"
    proc = gpuradar("crawl", "azure", "--json", "-v", "--record", str(record), config=cfg,
                    db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok", result
    assert [r.path for r in provider_server.requests].count(AZURE_RESOURCE_GRAPH_PATH) == 1
    offers = gpuradar_json("prices", "--source", "azure", "--pricing", "spot", config=cfg,
                           db_url=sqlite_url)
    a100 = next(o for o in offers if o["instance_type"] == "Standard_NC24ads_A100_v4")
    assert a100["interruption"].startswith("interruption 0-5% (Azure Resource Graph, 20")
    assert (a100["interruption_kind"], a100["interruption_source"]) == (
        "interruption rate", "Azure Resource Graph")
    assert a100["interruption_monthly_low"] is None  # no period stated: no monthly rate
    table = gpuradar("prices", "--source", "azure", "--pricing", "spot", config=cfg,
                     db_url=sqlite_url, env={"COLUMNS": "250"}).stdout
    assert "0-5% (Azure Resource Graph, 20" in table and "interruption" in table, table
    # The recording holds the eviction answer (never the token exchange) and replays it:
    # the band comes back with the same source, without asking anyone for a token.
    recorded = [p.read_text(errors="replace") for p in record.rglob("*") if p.is_file()]
    assert "oauth2" not in (record / "azure" / "index.json").read_text()
    replayed_db = f"sqlite:///{tmp_path / 'replayed.db'}"
    again = gpuradar("crawl", "azure", "--replay", str(record), "--json", config=cfg,
                     db_url=replayed_db)
    assert again.returncode == 0, again.stderr
    replayed = gpuradar_json("prices", "--source", "azure", "--pricing", "spot", config=cfg,
                             db_url=replayed_db)
    assert {(o["instance_type"], o["region"], o["interruption_source"]) for o in replayed} == {
        (o["instance_type"], o["region"], o["interruption_source"]) for o in offers}
    for secret in (AZURE_CREDENTIALS["client_secret"], AZURE_TOKEN):
        assert secret not in proc.stdout + proc.stderr
        assert not [text for text in recorded if secret in text]
