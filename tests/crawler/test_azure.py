"""Azure Retail Prices: the parser on real rows and on pages in the API's format, the size
names read as Azure documents them, the meter in effect, and real crawls."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.azure import AzureSpider, NotAGpu, Uncatalogued, size_of
from gpuradar.crawler.spiders.base import ParseError
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response
from tests.provider_server import Reply, serve_standard

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
        with pytest.raises(Uncatalogued, match="size Microsoft retired"):
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
    query = parse_qs(urlsplit(spider().first_url()).query)
    assert query["meterRegion"] == ["'primary'"]
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
                          lambda req: Reply(body=json.dumps(page).encode()))
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["dropped"]) == ("ok", 1, {})
    [req] = provider_server.requests
    assert req.query["meterRegion"] == ["'primary'"]
    [offer] = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=db_url)
    assert (offer["instance_type"], offer["price"], offer["gpu_count"]) == (
        "Standard_ND96is_noIB_H100_v5", 115.034, 8)
