"""GCP: SKU pages in the Cloud Billing Catalog's format, machine prices assembled from core +
RAM + GPU SKUs, TPU slices priced per chip from both services' TPU SKUs, the API key kept out
of URLs, and real crawls through `gpuradar`."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.settings import Settings

from gpuradar.core import gpus
from gpuradar.core.items import PriceItem
from gpuradar.crawler.parsing import parse_files
from gpuradar.crawler.pipelines import validate
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.gcp import (
    TPU_GENERATIONS,
    GcpSpider,
    gpu_key,
    stem_of,
    tpu_generation,
    unit_price,
)
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, callback_spider, response
from tests.provider_server import ProviderServer, Reply, serve_standard

FIX = FIXTURES / "gcp"
URL = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"
TPU_URL = "https://cloudbilling.googleapis.com/v1/services/E000-3F24-B8AA/skus"
NO_SKUS = {"skus": [], "nextPageToken": ""}


def make_spider(**options: Any) -> GcpSpider:
    return callback_spider(GcpSpider, **options)


def page(name: str) -> dict[str, Any]:
    return json.loads((FIX / name).read_text())


def crawl_pages(spider: GcpSpider, *pages: dict[str, Any],
                tpu_pages: tuple[dict[str, Any], ...] = (NO_SKUS,)) -> list[Any]:
    """Feed the Compute Engine pages, then the Cloud TPU pages, through parse() as the crawl
    does; all outputs."""
    out: list[Any] = []
    for data in pages:
        out += list(spider.parse(response(data, URL)))
    for data in tpu_pages:
        out += list(spider.parse(response(data, TPU_URL), service="tpu_skus"))
    return out


def offers(outputs) -> dict[tuple[str, str, str], PriceItem]:
    return {(o.region, o.instance_type, o.pricing): o for o in outputs
            if isinstance(o, PriceItem)}


@pytest.fixture
def full() -> tuple[GcpSpider, dict[tuple[str, str, str], PriceItem]]:
    spider = make_spider(api_key="k")
    return spider, offers(crawl_pages(spider, page("skus_page1.json"), page("skus_page2.json"),
                                      tpu_pages=(page("skus_tpu_service.json"),)))


def stats(spider: GcpSpider) -> dict[str, Any]:
    return spider.crawler.stats.get_stats()


# -- descriptions and unit prices -----------------------------------------------------------
def test_descriptions_reduce_to_the_resource():
    assert stem_of("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas"
                   ) == "Nvidia Tesla T4 GPU"
    assert stem_of("Spot Preemptible A2 Instance Core running in Americas") == "A2 Instance Core"
    assert gpu_key(stem_of("A4 Nvidia B200 (1 gpu slice) running in Iowa")) == "a4 b200 1 slice"
    assert gpu_key("Nvidia H100 Mega 80GB GPU") == "h100 mega 80gb"


@pytest.mark.parametrize(("price", "expected"), [
    ({"currencyCode": "USD", "units": "2", "nanos": 933908000}, 2.933908),
    ({"currencyCode": "USD", "nanos": 4237000}, 0.004237),  # zero units are omitted in JSON
    ({"currencyCode": "USD", "units": 3}, 3.0),
    ({"currencyCode": "USD", "units": "NaN", "nanos": 1}, None),
    ({"currencyCode": "USD", "units": "abc"}, None),
    ({"currencyCode": "USD", "units": "-1"}, None),
    ({}, None)])
def test_unit_price_reads_units_and_nanos(price, expected):
    sku = {"pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [
        {"startUsageAmount": 0, "unitPrice": price}]}}]}
    value, _, unit = unit_price(sku)
    assert unit == "h"
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_unit_price_is_the_tier_that_starts_at_zero():
    """A SKU with usage tiers is listed at its first tier (from usage 0, whose
    startUsageAmount JSON omits), not at the price after a volume threshold."""
    sku = {"pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [
        {"unitPrice": {"currencyCode": "USD", "units": "2", "nanos": 933908000}},
        {"startUsageAmount": 720, "unitPrice": {"currencyCode": "USD", "units": "1"}}]}}]}
    assert unit_price(sku) == (pytest.approx(2.933908), "USD", "h")
    # No tier at all: no price (the SKU prices nothing), not an error.
    assert unit_price({"pricingInfo": [{"pricingExpression": {
        "usageUnit": "h", "tieredRates": []}}]}) == (None, "", "h")


# -- assembled machine prices ------------------------------------------------------------
@pytest.mark.parametrize("unit", ["d", "mo"])
def test_a_tpu_sku_priced_in_another_unit_is_skipped_and_counted(caplog, unit):
    """A TPU SKU priced per day, per month (or any unit but the hour) would be misread as an
    hourly price: it prices no slice, is counted, and its warning names the unit."""
    data = page("skus_tpu_service.json")
    (v2,) = [s for s in data["skus"] if s["description"] == "TPU-v2 Accelerator USA"]
    v2["pricingInfo"][0]["pricingExpression"]["usageUnit"] = unit
    spider = make_spider(api_key="k")
    found = offers(crawl_pages(spider, NO_SKUS, tpu_pages=(data,)))
    assert not any(t.startswith("v2-") and p == "on_demand" for _, t, p in found)
    assert stats(spider)["gpuradar/skipped/unexpected_unit"] == 1
    assert f"SKU 'TPU-v2 Accelerator USA' is priced per '{unit}', expected 'h'; skipped" \
        in caplog.text


@pytest.mark.parametrize("unit", ["d", "mo"])  # sorting before and after "h"
def test_a_gpu_sku_priced_in_another_unit_is_skipped_and_counted(caplog, unit):
    """The real A100 SKU priced per day or per month would be misread as hourly: no A2
    machine is priced from it, it is counted, and its warning names the unit."""
    data = page("skus_real_opencost.json")
    (a100,) = [s for s in data["skus"] if s["description"].startswith("Nvidia Tesla A100")]
    a100["pricingInfo"][0]["pricingExpression"]["usageUnit"] = unit
    spider = make_spider(api_key="k")
    assert offers(crawl_pages(spider, data)) == {}
    assert stats(spider)["gpuradar/skipped/unexpected_unit"] == 1
    assert (f"SKU 'Nvidia Tesla A100 GPU' is priced per '{unit}', expected 'h'; skipped"
            in caplog.text)


def test_a2_price_is_cores_plus_ram_plus_gpus_from_the_real_skus():
    # The real page: A100 GPU, A2 core and A2 RAM SKUs "running in Americas".
    found = offers(make_spider().parse_file(response(page("skus_real_opencost.json"), URL)))
    a2 = found[("us-central1", "a2-highgpu-1g", "on_demand")]
    assert a2.price == pytest.approx(12 * 0.031611 + 85 * 0.004237 + 2.933908)
    assert (a2.gpu, a2.gpu_count, a2.vcpus, a2.memory_gb) == ("Nvidia Tesla A100", 1, 12, 85)
    mega = found[("us-west1", "a2-megagpu-16g", "on_demand")]
    assert mega.price == pytest.approx(96 * 0.031611 + 1360 * 0.004237 + 16 * 2.933908)
    # The E2/T2D SKUs (priced in IDR) are not GPU machines; nothing else is offered.
    assert {t for _, t, _ in found} == {"a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g",
                                        "a2-highgpu-8g", "a2-megagpu-16g"}
    assert {o.currency for o in found.values()} == {"USD"}


def test_a_sku_priced_in_an_unexpected_unit_is_skipped_and_counted(caplog):
    """A RAM SKU priced per hour instead of per GiB-hour would be misread by the machine's
    memory: it is skipped with a warning and counted, and the machines it would price are
    reported as not assembled rather than offered at a wrong price."""
    data = page("skus_real_opencost.json")
    (ram,) = [s for s in data["skus"] if s["description"].startswith("A2 Instance Ram")]
    ram["pricingInfo"][0]["pricingExpression"]["usageUnit"] = "h"
    spider = make_spider(api_key="k")
    assert offers(crawl_pages(spider, data)) == {}
    assert stats(spider)["gpuradar/skipped/unexpected_unit"] == 1
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 15   # 5 A2 types x 3 regions
    assert "SKU 'A2 Instance Ram' is priced per 'h', expected 'GiBy.h'; skipped" in caplog.text
    (line,) = [r.getMessage() for r in caplog.records if "not assembled" in r.getMessage()]
    assert line.startswith("gcp: 15 machine prices not assembled")
    assert line.count(" on_demand") == 8 and line.endswith(" ...")  # the first 8 of 15


def test_every_accelerator_family_is_assembled_each_way_google_sells_it(full):
    _, found = full
    a3 = found[("us-central1", "a3-highgpu-8g", "on_demand")]
    assert a3.price == pytest.approx(208 * 0.0261 + 1872 * 0.0025 + 8 * 9.796550569)
    assert a3.attributes == {"gpu_unit_price": 9.796550569, "core_unit_price": 0.0261,
                             "ram_unit_price": 0.0025}
    spot = found[("us-central1", "a3-highgpu-8g", "spot")]
    assert spot.price == pytest.approx(208 * 0.0104 + 1872 * 0.001 + 8 * 2.253)
    assert found[("us-central1", "a3-highgpu-1g", "spot")].gpu_count == 1
    assert found[("us-central1", "a3-megagpu-8g", "on_demand")].gpu == "Nvidia H100 80GB Plus"
    assert found[("us-east1", "a2-ultragpu-8g", "on_demand")].price == pytest.approx(
        96 * 0.031611 + 1360 * 0.004237 + 8 * 3.96924)
    g2 = found[("us-west1", "g2-standard-4", "on_demand")]
    assert g2.price == pytest.approx(4 * 0.024988 + 16 * 0.002927 + 0.56)
    assert found[("us-west1", "g2-standard-48", "spot")].gpu_count == 4
    for offer in found.values():
        assert gpus.lookup(offer.gpu, offer.gpu_memory_gb) is not None, offer.gpu


def test_b200_slices_are_the_machine_price_and_the_spot_wording_wins(full):
    _, found = full
    # Published with usageType OnDemand, but its description says Spot Preemptible.
    a4 = found[("us-central1", "a4-highgpu-8g", "spot")]
    assert a4.price == pytest.approx(8 * 4.9542) and a4.attributes["bundled"] is True


def test_machines_google_sells_only_by_reservation_or_spot_get_no_on_demand_offer(caplog):
    # A4 (B200), A3 Ultra (H200) and A3 High with 1, 2 or 4 GPUs: the catalog prices their
    # parts on demand, but Google does not sell them on demand (SOLD_AS in the facts).
    spider = make_spider(api_key="k")
    with caplog.at_level(logging.INFO):
        found = offers(crawl_pages(spider, page("skus_page1.json"), page("skus_page2.json")))
    for machine in ("a4-highgpu-8g", "a3-ultragpu-8g", "a3-highgpu-1g", "a3-highgpu-2g",
                    "a3-highgpu-4g"):
        assert (("us-central1", machine, "on_demand")) not in found, machine
    assert ("us-central1", "a3-highgpu-8g", "on_demand") in found  # 8 GPUs: on demand too
    # Five machines in us-central1 and A3 High 1/2/4g in europe-west4 too; and A4X (GB200),
    # sold by future reservation only.
    assert stats(spider)["gpuradar/skipped/not_on_demand"] == 9
    (line,) = [r.getMessage() for r in caplog.records if "not sold that way" in r.getMessage()]
    assert "a4-highgpu-8g on-demand" in line and "a3-highgpu-2g on-demand" in line
    assert "a4x-highgpu-4g on-demand" in line


def test_flex_start_and_calendar_mode_skus_are_offers_of_their_own_kind_with_terms(full):
    # "... attached to DWS Defined Duration VMs" is Flex-start, "DWS Calendar Mode ..." a
    # calendar-mode reservation; the B200 rates per GPU-hour are those a public table quotes
    # from the catalog (2026-07-30: Flex-start 8.055, calendar mode 11.277).
    _, found = full
    flex = found[("us-central1", "a4-highgpu-8g", "flex_start")]
    assert flex.price == pytest.approx(8 * 8.055)
    assert flex.attributes["terms"] == {"max_hours": 168}
    calendar = found[("us-central1", "a4-highgpu-8g", "calendar")]
    assert calendar.price == pytest.approx(8 * 11.277)
    assert calendar.attributes["terms"] == {"max_hours": 2160}
    assert "terms" not in found[("us-central1", "a4-highgpu-8g", "spot")].attributes
    # A TPU's calendar-mode and Flex-start SKUs name the generation without "Tpu".
    assert found[("us-east5", "v6e-8", "flex_start")].price == pytest.approx(8 * 1.35)
    assert found[("us-east5", "v6e-8", "calendar")].price == pytest.approx(8 * 1.89)


def test_g4_rtx_pro_6000_is_priced_as_its_whole_machine(full):
    # G4 exists only as g4-standard-48/96/192/384 (1/2/4/8 GPUs): GPU + its cores + its RAM,
    # never "the GPU, with an N1 VM billed on top".
    _, found = full
    assert ("us-central1", "nvidia-rtx-pro-6000", "on_demand") not in found
    for machine, gpus_, vcpus, ram in (("g4-standard-48", 1, 48, 180),
                                       ("g4-standard-96", 2, 96, 360),
                                       ("g4-standard-192", 4, 192, 720),
                                       ("g4-standard-384", 8, 384, 1440)):
        g4 = found[("us-central1", machine, "on_demand")]
        assert (g4.gpu_count, g4.vcpus, g4.memory_gb) == (gpus_, vcpus, ram)
        assert g4.price == pytest.approx(vcpus * 0.03 + ram * 0.004 + gpus_ * 4.5)
        assert "price_basis" not in g4.attributes
        assert gpus.lookup(g4.gpu, g4.gpu_memory_gb).name == "RTX-PRO-6000"


def test_n1_gpus_are_offered_per_gpu(full):
    _, found = full
    t4 = found[("us-east1", "nvidia-tesla-t4", "on_demand")]
    assert (t4.gpu_count, t4.price, t4.vcpus, t4.attributes) == (
        1, 0.35, None, {"price_basis": "gpu_only"})
    assert found[("us-east1", "nvidia-tesla-t4", "spot")].price == 0.14
    assert found[("europe-west1", "nvidia-tesla-t4", "on_demand")].price == 0.385
    assert ("europe-west1", "nvidia-tesla-t4", "spot") not in found
    for accelerator in ("nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4"):
        assert (("us-central1", accelerator, "on_demand")) in found


def test_commitments_reservations_dws_and_sole_tenancy_are_skipped(full):
    _, found = full
    prices = {round(o.price, 6) for o in found.values() if o.price is not None}
    assert 0 not in prices  # the $0 "Reserved" SKU never becomes an offer
    # Only one H100 on-demand price in Iowa: the commitment (6.857585) was not read.
    h100 = {o.attributes["gpu_unit_price"] for (r, t, p), o in found.items()
            if t.startswith("a3-highgpu") and r == "us-central1" and p == "on_demand"}
    assert h100 == {9.796550569}
    assert not any(t.startswith("a3-megagpu") and p == "spot" for _, t, p in found)


def with_gb300(data: dict[str, Any]) -> dict[str, Any]:
    """The page with a GPU SKU no GPU_SKUS row knows: the GB200 SKU renamed GB300 (A4X Max,
    whose SKU wording gpuradar has not seen)."""
    data = copy.deepcopy(data)
    gb = next(s for s in data["skus"] if s["description"] == "Nvidia GB200 GPU running in Iowa")
    data["skus"].append({**gb, "description": "Nvidia GB300 GPU running in Iowa"})
    return data


def test_unmatched_gpu_and_tpu_skus_are_reported_as_uncatalogued_once(caplog):
    spider = make_spider(api_key="k")
    with caplog.at_level(logging.WARNING):
        crawl_pages(spider, page("skus_page1.json"), with_gb300(page("skus_page2.json")))
        assert stats(spider)["gpuradar/uncatalogued"] == 1
        # Seen again on a later crawl page: counted again, logged once.
        spider.read_page(with_gb300(page("skus_page2.json")), "again")
    assert stats(spider)["gpuradar/uncatalogued"] == 2
    lines = [r.getMessage() for r in caplog.records if "uncatalogued" in r.getMessage()]
    assert lines == [
        "gcp: Nvidia GB300 GPU is not in gpuradar's catalog (a GPU SKU matching no known GPU: "
        "renamed or new?); reported as uncatalogued, not stored"]


def test_the_gb200_sku_is_known_and_a4x_sold_only_by_reservation_gets_no_offer(full):
    # GB200 (A4X, a4x-highgpu-4g) is in the catalog; Google sells A4X by future reservation
    # only, so its on-demand SKU prices nothing gpuradar can offer.
    spider, found = full
    assert not any(t.startswith("a4x") for _, t, _ in found)
    assert "gpuradar/uncatalogued" not in stats(spider)


def test_a_renamed_gpu_sku_without_the_word_gpu_is_reported_as_uncatalogued(caplog):
    """Google names some GPU SKUs without the word "GPU" ("RTX 6000 96GB running in Iowa");
    their resource group says GPU. Renamed, such a SKU is reported, not dropped silently."""
    data = page("skus_page2.json")
    rtx = next(s for s in data["skus"] if s["description"] == "RTX 6000 96GB running in Iowa")
    rtx["description"] = "RTX PRO 6000 96GB running in Iowa"
    spider = make_spider()
    with caplog.at_level(logging.WARNING):
        found = offers(spider.parse_file(response(data, URL)))
    assert not any(t.startswith("g4-standard") for _, t, _ in found)
    assert stats(spider)["gpuradar/uncatalogued"] == 1
    assert ("gcp: RTX PRO 6000 96GB is not in gpuradar's catalog (a GPU SKU matching no known "
            "GPU: renamed or new?); reported as uncatalogued, not stored"
            ) in [r.getMessage() for r in caplog.records]


def test_a_sku_of_another_resource_family_is_never_a_machine_part():
    """Only SKUs of resource family "Compute" (and TPUs) are read: the family decides, not
    the wording. Built case, no capture of one: the real A100 SKU relabelled as a one-region
    "License" SKU; read, it would price Iowa's A100 and so its A2 machines."""
    data = page("skus_real_opencost.json")
    a100 = next(s for s in data["skus"]
                if s["description"] == "Nvidia Tesla A100 GPU running in Americas")
    fee = copy.deepcopy(a100)
    fee["category"]["resourceFamily"] = "License"
    fee["serviceRegions"] = ["us-central1"]
    fee["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] = {
        "currencyCode": "USD", "units": "0", "nanos": 10000000}
    data["skus"].append(fee)
    found = offers(make_spider().parse_file(response(data, URL)))
    gpu = {(r, o.attributes["gpu_unit_price"]) for (r, t, p), o in found.items()
           if t == "a2-highgpu-1g"}
    assert gpu == {(r, 2.933908) for r in ("us-central1", "us-east1", "us-west1")}


def test_machines_without_core_or_ram_skus_are_not_priced(full, caplog):
    spider, found = full
    # europe-west4 has the H100 GPU SKU only (and a TPU v3 pod SKU, priced per chip).
    assert {t for r, t, _ in found if r == "europe-west4"} == {
        name for name, _ in TPU_GENERATIONS["v3"].pod_slices}
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 5
    (line,) = [r.getMessage() for r in caplog.get_records("setup")
               if "not assembled" in r.getMessage()]
    assert line.startswith("gcp: 5 machine prices not assembled")
    assert "a3-highgpu-8g europe-west4 on_demand" in line
    assert not line.endswith(" ...")  # all five are named: nothing left out


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
def test_a_regions_own_sku_wins_over_a_multi_region_one(after):
    first, second = page("skus_page1.json"), page("skus_page2.json")
    iowa = copy.deepcopy(next(s for s in first["skus"]
                              if s["description"] == "Nvidia Tesla T4 GPU running in Americas"))
    iowa["description"] = "Nvidia Tesla T4 GPU running in Iowa"
    iowa["serviceRegions"] = ["us-central1"]
    iowa["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = 330000000
    # before the Americas SKU, or on the next page: the order must not matter
    second["skus"].append(iowa) if after else first["skus"].insert(0, iowa)
    found = offers(crawl_pages(make_spider(), first, second))
    assert found[("us-central1", "nvidia-tesla-t4", "on_demand")].price == 0.33
    assert found[("us-east1", "nvidia-tesla-t4", "on_demand")].price == 0.35


def mutate(description: str, unit_price_value: dict[str, Any] | None) -> dict[str, Any]:
    data = page("skus_page1.json")
    sku = next(s for s in data["skus"] if s["description"] == description)
    rate = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]
    if unit_price_value is None:
        del rate["unitPrice"]
    else:
        rate["unitPrice"] = unit_price_value
    return data


@pytest.mark.parametrize(("value", "reason"), [
    ({"currencyCode": "USD", "units": "NaN"}, "no_price"), (None, "no_price"),
    ({"currencyCode": "USD", "units": "0", "nanos": 0}, "zero_price")])
def test_bad_gpu_prices_are_dropped_with_their_reason(value, reason):
    data = mutate("Nvidia Tesla P4 GPU running in Americas", value)
    found = offers(make_spider().parse_file(response(data, URL)))
    assert validate(found[("us-central1", "nvidia-tesla-p4", "on_demand")]) == reason


def test_a_price_without_its_currency_code_is_in_the_currency_asked_for():
    """proto3 JSON leaves out empty fields: a unit price without `currencyCode` is read in
    the currency the request asked for (USD by default) and stored, not dropped."""
    data = mutate("Nvidia Tesla P4 GPU running in Americas", {"units": "0", "nanos": 600000000})
    found = offers(make_spider().parse_file(response(data, URL)))
    p4 = found[("us-central1", "nvidia-tesla-p4", "on_demand")]
    assert (p4.price, p4.currency) == (0.6, "USD")
    assert validate(p4) is None


@pytest.mark.parametrize(("part", "units"), [("Core", "NaN"), ("Ram", "NaN"), ("Core", "0")])
def test_a_bad_core_price_prices_no_machine_rather_than_a_wrong_one(part, units):
    data = mutate(f"G2 Instance {part} running in Americas",
                  {"currencyCode": "USD", "units": units})
    spider = make_spider()
    found = offers(spider.parse_file(response(data, URL)))
    assert not any(t.startswith("g2-") and p == "on_demand" for _, t, p in found)
    assert any(t.startswith("g2-") and p == "spot" for _, t, p in found)
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 24  # 8 types x 3 regions


def test_eight_machines_not_assembled_are_all_named_without_dots(caplog):
    """The warning names up to eight machines and ends in "..." only past eight: with the
    L4 SKU in one region and its G2 core SKU unpriced, the eight g2 types are all named."""
    data = mutate("G2 Instance Core running in Americas", {"currencyCode": "USD", "units": "NaN"})
    l4 = next(s for s in data["skus"] if s["description"] == "Nvidia L4 GPU running in Americas")
    l4["serviceRegions"] = ["us-central1"]
    spider = make_spider()
    with caplog.at_level(logging.WARNING):
        list(spider.parse_file(response(data, URL)))
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 8
    (line,) = [r.getMessage() for r in caplog.records if "not assembled" in r.getMessage()]
    assert line.startswith("gcp: 8 machine prices not assembled")
    assert line.count("us-central1 on_demand") == 8 and not line.endswith(" ...")


def test_changed_field_names_are_clear_errors():
    with pytest.raises(ParseError, match="'skus' is missing"):
        list(make_spider().parse_file(response({"items": [], "nextPageToken": ""}, URL)))
    data = page("skus_page1.json")
    del data["skus"][3]["description"]
    with pytest.raises(ParseError, match="'description' is missing"):
        list(make_spider().parse_file(response(data, URL)))


# -- TPUs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("description", "generation"), [
    ("TpuV5e running in Delhi", "v5e"),
    ("TpuV5p running in Sao Paulo", "v5p"),
    ("TpuV6e attached to Spot Preemptible VMs running in Columbus", "v6e"),
    ("TPU7x running in Americas", "7x"),
    ("Tpu-v4 Pod Accelerator USA", "v4"),
    ("TPU-v2 Accelerator USA", "v2"),
    ("Nvidia Tesla T4 GPU running in Americas", None),
    ("A3 Instance Core running in Americas", None),
])
def test_the_tpu_generation_is_read_from_the_sku_description(description, generation):
    assert tpu_generation(description) == generation


def test_a_tpu_sku_of_usage_type_preemptible_is_spot_whatever_its_wording():
    """The usage type says Spot as much as the wording does: the real Singapore v5e Spot
    SKU (usageType Preemptible), reworded without "Spot Preemptible", still prices Spot
    slices, never on-demand ones at the Spot price."""
    data = page("skus_tpu_real.json")
    sku = next(s for s in data["skus"] if s["description"] ==
               "TpuV5e attached to Spot Preemptible VMs running in Singapore")
    sku["description"] = "TpuV5e running in Singapore"
    found = offers(make_spider().parse_file(response(data, URL)))
    singapore = {(t, p): o.price for (r, t, p), o in found.items() if r == "asia-southeast1"}
    assert singapore[("v5litepod-8", "spot")] == pytest.approx(8 * 0.78)
    assert {p for _, p in singapore} == {"spot"}


def test_real_tpu_skus_become_the_slices_users_rent_priced_per_chip(caplog):
    # Seven SKUs captured live from the Compute Engine service (resourceGroup "TPU").
    spider = make_spider()
    found = offers(spider.parse_file(response(page("skus_tpu_real.json"), URL)))
    v5e = found[("asia-south2", "v5litepod-8", "on_demand")]
    assert (v5e.gpu, v5e.gpu_count, v5e.gpu_memory_gb, v5e.currency) == ("TPU v5e", 8, 16, "USD")
    assert v5e.price == pytest.approx(8 * 1.44132)
    assert v5e.attributes == {"chip_unit_price": 1.44132}
    assert {t for r, t, p in found if r == "asia-south2" and p == "on_demand"} == {
        f"v5litepod-{n}" for n in (1, 4, 8, 16, 32, 64, 128, 256)}
    # v5p slices are named by TensorCores: v5p-8 is 4 chips.
    v5p = found[("southamerica-east1", "v5p-8", "on_demand")]
    assert (v5p.gpu_count, v5p.price) == (4, pytest.approx(4 * 6.430995))
    assert found[("southamerica-east1", "v5p-12288", "on_demand")].gpu_count == 6144
    assert found[("us-south1", "v6e-4", "on_demand")].price == pytest.approx(10.8)
    # Spot: usage type "Preemptible", "attached to Spot Preemptible VMs".
    spot = found[("asia-southeast1", "v5litepod-1", "spot")]
    assert spot.price == pytest.approx(0.78)
    # The calendar-mode reservation is an offer of its own kind; the commitment is none.
    assert not any(r == "europe-west4" for r, _, _ in found)
    assert ("asia-south2", "v5p-8", "on_demand") not in found
    reserved = found[("asia-south2", "v5p-8", "calendar")]
    assert reserved.price == pytest.approx(4 * 2.94)
    assert reserved.attributes == {"chip_unit_price": 2.94, "terms": {"max_hours": 2160}}
    # TPU7x (Ironwood), $12 per chip-hour in its three regions: tpu7x-8 is the 4-chip VM,
    # named by TensorCores (two per chip) like v5p.
    ironwood = found[("us-central1", "tpu7x-8", "on_demand")]
    assert (ironwood.gpu, ironwood.gpu_count, ironwood.gpu_memory_gb, ironwood.price) == (
        "TPU7x", 4, 192, pytest.approx(48.0))
    assert gpus.lookup(ironwood.gpu, ironwood.gpu_memory_gb).name == "TPU-7X"
    assert found[("us-east1", "tpu7x-8192", "on_demand")].gpu_count == 4096
    assert {t for r, t, _ in found if r == "us-west1"} == {
        f"tpu7x-{n}" for n in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)}
    assert stats(spider).get("gpuradar/uncatalogued", 0) == 0
    assert {(r, p) for r, _, p in found} == {
        ("asia-south2", "on_demand"), ("asia-south2", "calendar"),
        ("southamerica-east1", "on_demand"),
        ("us-south1", "on_demand"), ("asia-southeast1", "spot"), ("us-west1", "on_demand"),
        ("us-central1", "on_demand"), ("us-east1", "on_demand")}


def test_the_pipeline_prices_tpus_per_chip_hour_under_the_catalog_names():
    import gpuradar.crawler.settings as project

    settings = Settings()
    settings.setmodule(project)
    records = {(r["region"], r["instance_type"], r["pricing"]): r for r in parse_files(
        "gcp", [FIX / "skus_tpu_real.json"], settings)}
    v6e = records[("us-south1", "v6e-8", "on_demand")]
    assert (v6e["gpu"], v6e["gpu_count"], v6e["price_per_gpu_usd"]) == ("TPU-V6E", 8, 2.7)
    assert not v6e["gpu_raw"]
    assert {r["gpu"] for r in records.values()} == {"TPU-V5E", "TPU-V5P", "TPU-V6E", "TPU-7X"}
    ironwood = records[("us-east1", "tpu7x-16", "on_demand")]
    assert (ironwood["gpu_count"], ironwood["price_per_gpu_usd"]) == (8, 12.0)
    assert all(gpus.CATALOG[r["gpu"]].kind == "TPU" for r in records.values())


def test_capacity_optimized_and_committed_tpu_skus_are_skipped(full):
    _, found = full
    # Columbus: one plain on-demand rate (2.70), one spot (1.4033), one Flex-start (DWS
    # Defined Duration, 1.35) and one calendar-mode rate (Reserved ... in Calendar Mode,
    # 1.89) per chip; the committed rate (also 1.89) is none, and the capacity-optimised twin
    # of the plain SKU does not replace it.
    columbus = {(t, p): o for (r, t, p), o in found.items() if r == "us-east5"}
    assert {(p, o.attributes["chip_unit_price"]) for (_, p), o in columbus.items()} == {
        ("on_demand", 2.7), ("spot", 1.4033), ("flex_start", 1.35), ("calendar", 1.89)}
    assert columbus[("v6e-8", "on_demand")].price == pytest.approx(8 * 2.7)
    assert columbus[("v6e-8", "spot")].price == pytest.approx(8 * 1.4033)


def test_the_cloud_tpu_service_prices_4_chip_devices_and_pod_slices(full):
    _, found = full
    # v2-8 is one 4-chip device: SKU 3B3D-4CB4-AECC at $4.50/h, $1.125 per chip.
    v2 = found[("us-central1", "v2-8", "on_demand")]
    assert (v2.gpu, v2.gpu_count, v2.price) == ("TPU v2", 4, 4.5)
    assert v2.attributes == {"chip_unit_price": 1.125}
    assert found[("us-central1", "v2-8", "spot")].price == pytest.approx(1.35)
    assert found[("us-central1", "v3-8", "on_demand")].price == 8.0
    # v4 is sold as pod slices only; "Tpu-v4 Pod" prices 4 chips: $3.22 per chip.
    v4 = {t: o for (r, t, p), o in found.items() if r == "us-central2"}
    assert set(v4) == {f"v4-{n}" for n in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)}
    assert (v4["v4-8"].gpu_count, v4["v4-8"].price) == (4, pytest.approx(12.88))
    assert (v4["v4-32"].gpu_count, v4["v4-32"].price) == (16, pytest.approx(16 * 3.22))
    # The v3 pod SKU (europe-west4) prices pod slices, not the v3-8 device.
    assert ("europe-west4", "v3-8", "on_demand") not in found
    assert found[("europe-west4", "v3-32", "on_demand")].price == pytest.approx(16 * 2.2)


def test_metrics_are_labelled_by_accelerator(tmp_path, provider_server, sqlite_url):
    from prometheus_client import generate_latest

    from gpuradar.scheduler.metrics import Metrics
    from gpuradar.storage.db import open_database
    from tests.daemon_helpers import parse_metrics

    cfg = config(tmp_path, provider_server)
    proc = gpuradar("crawl", "gcp", config=cfg, db_url=sqlite_url, env={"GCP_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    engine = open_database(sqlite_url)
    series = parse_metrics(generate_latest(Metrics(lambda: engine).registry).decode())

    def get(name, **labels):
        return series.get((name, frozenset(labels.items())))

    assert get("gpuradar_cheapest_usd_per_gpu_hour", gpu="TPU-V6E", pricing="spot",
               source="gcp") == pytest.approx(1.4033)
    assert get("gpuradar_cheapest_usd_per_gpu_hour", gpu="TPU-V4", pricing="on_demand",
               source="gcp") == pytest.approx(3.22)
    assert get("gpuradar_accelerator_info", gpu="TPU-V5E", vendor="Google", kind="TPU",
               frameworks="XLA/JAX") == 1
    assert get("gpuradar_accelerator_info", gpu="H100-SXM-80GB", vendor="NVIDIA", kind="GPU",
               frameworks="CUDA") == 1
    info = {dict(labels)["gpu"] for name, labels in series if name == "gpuradar_accelerator_info"}
    priced = {dict(labels)["gpu"] for name, labels in series
              if name == "gpuradar_cheapest_usd_per_gpu_hour"}
    assert info == priced


def test_every_tpu_generation_maps_to_its_catalog_entry():
    for generation, spec in TPU_GENERATIONS.items():
        entry = gpus.lookup(spec.accelerator, spec.memory_gb)
        assert entry is not None and entry.kind == "TPU", generation
        assert entry.memory_gb == spec.memory_gb
        assert all(chips >= 1 for _, chips in spec.slices + spec.pod_slices)


# -- requests: paging and the key --------------------------------------------------------
def test_pages_are_followed_with_the_key_in_a_header_only():
    spider = make_spider(api_key="s3cr3t-key")
    first = spider.page_request()
    assert "key" not in first.url and "s3cr3t" not in first.url
    assert first.headers[b"X-Goog-Api-Key"] == b"s3cr3t-key"
    assert "currencyCode=USD" in first.url and "pageSize=5000" in first.url
    out = list(spider.parse(response(page("skus_page1.json"), URL)))
    [follow] = out  # nothing is offered before the last page
    assert isinstance(follow, Request) and "pageToken=APKCS1HVa0Y" in follow.url
    assert follow.headers[b"X-Goog-Api-Key"] == b"s3cr3t-key"
    # The last Compute Engine page: then the Cloud TPU service, with the same key.
    [tpu] = list(spider.parse(response(page("skus_page2.json"), URL)))
    assert tpu.url.startswith(TPU_URL + "?") and "key" not in tpu.url
    assert tpu.headers[b"X-Goog-Api-Key"] == b"s3cr3t-key"
    assert tpu.cb_kwargs == {"service": "tpu_skus"}
    done = list(spider.parse(response(page("skus_tpu_service.json"), TPU_URL),
                             service="tpu_skus"))
    assert done and all(isinstance(o, PriceItem) for o in done)
    assert {o.gpu for o in done} >= {"Nvidia H100 80GB", "TPU v2", "TPU v4", "TPU v6e"}
    assert list(spider.parse(response(NO_SKUS, TPU_URL), service="tpu_skus")) == []  # once


def test_a_repeated_page_token_stops_the_crawl(caplog):
    spider = make_spider(api_key="k")
    list(spider.parse(response(page("skus_page1.json"), URL)))
    [tpu] = list(spider.parse(response(page("skus_page1.json"), URL)))  # on to the next service
    assert tpu.url.startswith(TPU_URL)
    out = list(spider.parse(response(NO_SKUS, TPU_URL), service="tpu_skus"))
    assert out and all(isinstance(o, PriceItem) for o in out)
    # The token (the real one of the captured page) is quoted by its first 12 characters.
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "gcp: the API returned page token 'APKCS1HVa0Yp' twice; stopping"]


def test_api_refusal_is_logged_with_googles_message(caplog):
    spider = make_spider(api_key="bad-key")
    refusal = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API "
                         "key.", "status": "INVALID_ARGUMENT"}}
    # Logged; the Cloud TPU service is still asked (its own refusal ends the crawl).
    [tpu] = list(spider.parse(response(refusal, URL, status=400)))
    assert tpu.url.startswith(TPU_URL)
    assert list(spider.parse(response(refusal, TPU_URL, status=400), service="tpu_skus")) == []
    [line, _] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line == ("gcp: Cloud Billing API refused the request (HTTP 400): API key not valid. "
                    "Please pass a valid API key.")


@pytest.mark.parametrize("body", [
    "<html><body>" + "403 Forbidden. " * 20 + "</body></html>",     # a proxy's page
    '{"message": "' + "no error object " * 20 + '"}'])               # JSON of another shape
def test_a_refusal_that_is_not_googles_error_shows_its_first_200_characters(caplog, body):
    spider = make_spider(api_key="k")
    list(spider.parse(response(body, URL, status=403)))
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line == f"gcp: Cloud Billing API refused the request (HTTP 403): {body[:200]}"


def test_status_names_the_setting_that_enables_the_source(monkeypatch):
    monkeypatch.delenv("GCP_API_KEY", raising=False)

    def status(**options: Any) -> tuple[bool, str]:
        return GcpSpider.status(Settings({"GPURADAR_SOURCES": {"gcp": options}}))

    assert status() == (False, "needs a Google Cloud API key with the Cloud Billing API "
                               "enabled: set GCP_API_KEY or sources.gcp.api_key")
    assert status(api_key="k") == (True, "API key from sources.gcp.api_key")
    monkeypatch.setenv("GCP_API_KEY", "k")
    assert status() == (True, "API key from GCP_API_KEY")
    assert status(enabled=False) == (False, "disabled in the config file")


def test_parse_command_reads_a_saved_page():
    import gpuradar.crawler.settings as project

    settings = Settings()
    settings.setmodule(project)
    records = list(parse_files("gcp", [FIX / "skus_page2.json"], settings))
    gpu_records = [r for r in records
                   if not r["instance_type"].startswith(("v5", "v6", "tpu7x"))]
    assert {r["instance_type"] for r in gpu_records} == {
        "a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-highgpu-8g", "a3-edgegpu-8g",
        "a3-megagpu-8g", "a4-highgpu-8g", "g4-standard-48", "g4-standard-96",
        "g4-standard-192", "g4-standard-384"}
    # A3 Ultra is sold by reservation, Flex-start or Spot: the page prices it on demand only.
    assert not any(r["instance_type"] == "a3-ultragpu-8g" for r in records)
    assert {r["gpu"] for r in records} == {"H100-SXM-80GB", "B200",
                                           "RTX-PRO-6000", "TPU-V5E", "TPU-V5P", "TPU-V6E",
                                           "TPU-7X"}
    proc = gpuradar("parse", "gcp", str(FIX / "skus_real_opencost.json"))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 15 and {r["gpu"] for r in lines} == {"A100-SXM-40GB"}


# -- real crawls over HTTP -------------------------------------------------------------------
def config(tmp_path: Path, server: ProviderServer, **sources: Any) -> Path:
    return write_config(tmp_path / "config.yaml", endpoints=serve_standard(server),
                        scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 1}, sources=sources)


def test_without_a_key_the_source_is_disabled_and_says_why(tmp_path, provider_server,
                                                           sqlite_url):
    cfg = config(tmp_path, provider_server)
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url,
                                                  env={"GCP_API_KEY": ""})}
    assert rows["gcp"]["enabled"] is False
    assert "GCP_API_KEY or sources.gcp.api_key" in rows["gcp"]["why"]


@pytest.mark.parametrize("compute", [
    (403, "PERMISSION_DENIED", "Cloud Billing API has not been used in project 123."),
    (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")],
    ids=["403", "400"])
def test_a_key_google_refuses_fails_the_crawl_with_googles_own_words(tmp_path, provider_server,
                                                                    sqlite_url, compute):
    """A key without the Cloud Billing API enabled (403), not valid (400, Google's answer to
    a wrong key) or not accepted (401): the crawl fails, closes nothing, and says what Google
    said for each service."""
    def refusal(code: int, status: str, message: str):
        body = {"error": {"code": code, "message": message, "status": status}}
        return lambda req: Reply(code, json.dumps(body).encode())

    cfg = config(tmp_path, provider_server)
    provider_server.route("GET", "/v1/services/6F81-5844-456A/skus", refusal(*compute))
    provider_server.route("GET", "/v1/services/E000-3F24-B8AA/skus", refusal(
        401, "UNAUTHENTICATED", "Request had invalid authentication credentials."))
    proc = gpuradar("crawl", "gcp", "--json", config=cfg, db_url=sqlite_url,
                    env={"GCP_API_KEY": "AIzaFAKEKEY123"})
    [result] = json.loads(proc.stdout)
    assert result["status"] != "ok" and result["closed"] == 0
    assert f"refused the request (HTTP {compute[0]}): {compute[2]}" in proc.stderr
    assert ("refused the request (HTTP 401): Request had invalid authentication "
            "credentials.") in proc.stderr


def test_a_page_that_failed_is_named_by_its_service_and_the_next_service_goes_ahead(caplog):
    from twisted.python.failure import Failure

    spider = make_spider(api_key="k")
    failure = Failure(TimeoutError("User timeout caused connection failure."))
    failure.request = spider.page_request(service="skus")
    out = list(spider.page_failed(failure))
    assert [r.cb_kwargs["service"] for r in out] == ["tpu_skus"]
    assert "gcp: SKU page of 6F81-5844-456A failed (User timeout caused connection failure.)" \
        in caplog.text


def test_crawl_pages_through_the_catalog_with_a_key(tmp_path, provider_server, sqlite_url):
    # On PostgreSQL too: tests/crawler/test_aws.py crawls gcp beside the other sources on both.
    cfg = config(tmp_path, provider_server)
    proc = gpuradar("crawl", "gcp", "--json", config=cfg, db_url=sqlite_url,
                    env={"GCP_API_KEY": "AIzaFAKEKEY123"})
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    # 121 machine and GPU offers, 72 TPU slices of v2-v6e, 33 of TPU7x (11 sizes x 3 regions),
    # 28 Flex-start and calendar-mode TPU slices (v6e x 2 kinds, v5p calendar mode)
    assert result["status"] == "ok" and result["items"] == 121 + 72 + 33 + 28, result
    # The machines Google does not sell on demand are said in the crawl's summary.
    assert result["dropped"]["not_on_demand"] == 9
    pages = [r for r in provider_server.requests if r.path.endswith("/skus")]
    assert [(r.path.split("/")[3], r.query.get("pageToken") is not None) for r in pages] == [
        ("6F81-5844-456A", False), ("6F81-5844-456A", True), ("E000-3F24-B8AA", False)]
    assert all("key" not in r.query for r in pages)
    assert "AIzaFAKEKEY123" not in proc.stderr + proc.stdout
    h100 = gpuradar_json("prices", "--source", "gcp", "--gpu", "H100", "--limit", "0",
                         config=cfg, db_url=sqlite_url)
    assert {(o["instance_type"], o["pricing"]) for o in h100} >= {
        ("a3-highgpu-8g", "on_demand"), ("a3-highgpu-8g", "spot"), ("a3-megagpu-8g", "on_demand")}
    assert {o["region"] for o in h100} == {"us-central1"}
    # `--gpu TPU`: every TPU slice of both services, priced per chip-hour, and nothing else.
    tpus = gpuradar_json("prices", "--gpu", "TPU", "--limit", "0", config=cfg,
                         db_url=sqlite_url)
    assert {o["gpu"] for o in tpus} == {"TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5E", "TPU-V5P",
                                        "TPU-V6E", "TPU-7X"}
    v5e = {(o["region"], o["instance_type"], o["pricing"]): o for o in tpus
           if o["gpu"] == "TPU-V5E"}
    delhi = v5e[("asia-south2", "v5litepod-8", "on_demand")]
    assert (delhi["gpu_count"], delhi["price_per_gpu_usd"]) == (8, pytest.approx(1.44132))
    assert delhi["price_usd"] == pytest.approx(8 * 1.44132)
    assert v5e[("asia-southeast1", "v5litepod-4", "spot")]["price_usd"] == pytest.approx(3.12)
    per_chip = [o["price_per_gpu_usd"] for o in tpus]
    assert per_chip == sorted(per_chip)


def test_core_and_ram_in_another_currency_price_no_machine_and_each_is_counted():
    """A machine price adds the GPU, core and RAM SKUs: if one is in another currency the
    sum would mix them, so no G2 machine is priced on demand, and every shape left out is
    counted."""
    before = offers(make_spider().parse_file(response(page("skus_page1.json"), URL)))
    g2 = [k for k in before if k[1].startswith("g2-") and k[2] == "on_demand"]
    data = mutate("G2 Instance Core running in Americas",
                  {"currencyCode": "EUR", "units": "0", "nanos": 24988000})
    spider = make_spider()
    after = offers(spider.parse_file(response(data, URL)))
    assert len(g2) > 1 and not any(k in after for k in g2)
    assert stats(spider)["gpuradar/skipped/currency_mismatch"] == len(g2)


def test_the_usage_type_alone_marks_a_spot_price():
    """A SKU of usage type Preemptible is a spot price even when its description does not
    say "Spot Preemptible" (the wording is the fallback for mislabelled SKUs, not the rule)."""
    data = page("skus_page1.json")
    on_demand = next(s for s in data["skus"]
                     if s["description"] == "Nvidia Tesla P4 GPU running in Americas")
    spot = copy.deepcopy(on_demand)
    spot["category"]["usageType"] = "Preemptible"
    spot["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = 240000000
    data["skus"].append(spot)
    found = offers(make_spider().parse_file(response(data, URL)))
    assert found[("us-east1", "nvidia-tesla-p4", "spot")].price == 0.24
    assert found[("us-east1", "nvidia-tesla-p4", "on_demand")].price == 0.6
