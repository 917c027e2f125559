"""GCP: SKU pages in the Cloud Billing Catalog's format, machine prices assembled from core +
RAM + GPU SKUs, the API key kept out of URLs, and real crawls through `gpuradar`."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from gpuradar.crawler.parsing import parse_files
from gpuradar.crawler.pipelines import validate
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.gcp import GcpSpider, gpu_key, stem_of, unit_price
from scrapy import Request
from scrapy.http import TextResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from gpuradar.core import gpus
from gpuradar.core.items import PriceItem
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.provider_server import ProviderServer, serve_standard

FIX = Path(__file__).parent / "fixtures" / "gcp"
URL = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"


def make_spider(**options: Any) -> GcpSpider:
    crawler = get_crawler(GcpSpider, {"GPURADAR_SOURCES": {"gcp": options}})
    return crawler._create_spider()


def page(name: str) -> dict[str, Any]:
    return json.loads((FIX / name).read_text())


def response(data: Any, url: str = URL, status: int = 200) -> TextResponse:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    return TextResponse(url=url, status=status, body=body, encoding="utf-8",
                        request=Request(url))


def crawl_pages(spider: GcpSpider, *pages: dict[str, Any]) -> list[Any]:
    """Feed the pages through parse() as the crawl does; all outputs."""
    out: list[Any] = []
    for data in pages:
        out += list(spider.parse(response(data)))
    return out


def offers(outputs) -> dict[tuple[str, str, str], PriceItem]:
    return {(o.region, o.instance_type, o.pricing): o for o in outputs
            if isinstance(o, PriceItem)}


@pytest.fixture
def full() -> tuple[GcpSpider, dict[tuple[str, str, str], PriceItem]]:
    spider = make_spider(api_key="k")
    return spider, offers(crawl_pages(spider, page("skus_page1.json"), page("skus_page2.json")))


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


# -- assembled machine prices ------------------------------------------------------------
def test_a2_price_is_cores_plus_ram_plus_gpus_from_the_real_skus():
    # The real page: A100 GPU, A2 core and A2 RAM SKUs "running in Americas".
    found = offers(make_spider().parse_file(response(page("skus_real_opencost.json"))))
    a2 = found[("us-central1", "a2-highgpu-1g", "on_demand")]
    assert a2.price == pytest.approx(12 * 0.031611 + 85 * 0.004237 + 2.933908)
    assert (a2.gpu, a2.gpu_count, a2.vcpus, a2.memory_gb) == ("Nvidia Tesla A100", 1, 12, 85)
    mega = found[("us-west1", "a2-megagpu-16g", "on_demand")]
    assert mega.price == pytest.approx(96 * 0.031611 + 1360 * 0.004237 + 16 * 2.933908)
    # The E2/T2D SKUs (priced in IDR) are not GPU machines; nothing else is offered.
    assert {t for _, t, _ in found} == {"a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g",
                                        "a2-highgpu-8g", "a2-megagpu-16g"}
    assert {o.currency for o in found.values()} == {"USD"}


def test_every_accelerator_family_is_assembled_on_demand_and_spot(full):
    _, found = full
    a3 = found[("us-central1", "a3-highgpu-8g", "on_demand")]
    assert a3.price == pytest.approx(208 * 0.0261 + 1872 * 0.0025 + 8 * 9.796550569)
    assert a3.attributes == {"gpu_unit_price": 9.796550569, "core_unit_price": 0.0261,
                             "ram_unit_price": 0.0025}
    spot = found[("us-central1", "a3-highgpu-8g", "spot")]
    assert spot.price == pytest.approx(208 * 0.0104 + 1872 * 0.001 + 8 * 2.253)
    assert found[("us-central1", "a3-highgpu-1g", "on_demand")].gpu_count == 1
    assert found[("us-central1", "a3-megagpu-8g", "on_demand")].gpu == "Nvidia H100 80GB Plus"
    assert found[("us-central1", "a3-ultragpu-8g", "on_demand")].price == pytest.approx(
        224 * 0.029 + 2952 * 0.0032 + 8 * 9.31174)
    assert found[("us-east1", "a2-ultragpu-8g", "on_demand")].price == pytest.approx(
        96 * 0.031611 + 1360 * 0.004237 + 8 * 3.96924)
    g2 = found[("us-west1", "g2-standard-4", "on_demand")]
    assert g2.price == pytest.approx(4 * 0.024988 + 16 * 0.002927 + 0.56)
    assert found[("us-west1", "g2-standard-48", "spot")].gpu_count == 4
    for offer in found.values():
        assert gpus.lookup(offer.gpu, offer.gpu_memory_gb) is not None, offer.gpu


def test_b200_slices_are_the_machine_price_and_the_spot_wording_wins(full):
    _, found = full
    a4 = found[("us-central1", "a4-highgpu-8g", "on_demand")]
    assert a4.price == pytest.approx(8 * 16.11) and a4.attributes["bundled"] is True
    # Published with usageType OnDemand, but its description says Spot Preemptible.
    assert found[("us-central1", "a4-highgpu-8g", "spot")].price == pytest.approx(8 * 4.9542)


def test_n1_gpus_and_rtx_pro_6000_are_offered_per_gpu(full):
    _, found = full
    t4 = found[("us-east1", "nvidia-tesla-t4", "on_demand")]
    assert (t4.gpu_count, t4.price, t4.vcpus, t4.attributes) == (
        1, 0.35, None, {"price_basis": "gpu_only"})
    assert found[("us-east1", "nvidia-tesla-t4", "spot")].price == 0.14
    assert found[("europe-west1", "nvidia-tesla-t4", "on_demand")].price == 0.385
    assert ("europe-west1", "nvidia-tesla-t4", "spot") not in found
    for accelerator in ("nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4"):
        assert (("us-central1", accelerator, "on_demand")) in found
    rtx = found[("us-central1", "nvidia-rtx-pro-6000", "on_demand")]
    assert gpus.lookup(rtx.gpu, rtx.gpu_memory_gb).name == "RTX-PRO-6000"


def test_commitments_reservations_dws_and_sole_tenancy_are_skipped(full):
    _, found = full
    prices = {round(o.price, 6) for o in found.values() if o.price is not None}
    assert 0 not in prices  # the $0 "Reserved" SKU never becomes an offer
    # Only one H100 on-demand price in Iowa: the commitment (6.857585) was not read.
    h100 = {o.attributes["gpu_unit_price"] for (r, t, p), o in found.items()
            if t.startswith("a3-highgpu") and r == "us-central1" and p == "on_demand"}
    assert h100 == {9.796550569}
    assert not any(t.startswith("a3-megagpu") and p == "spot" for _, t, p in found)


def test_unmatched_gpu_sku_is_counted_and_logged_once(full, caplog):
    spider, _ = full
    assert stats(spider)["gpuradar/skipped/unmatched_gpu_sku"] == 1
    # Seen again on a later crawl page: counted again, logged once.
    spider.read_page(page("skus_page2.json"), "again")
    assert stats(spider)["gpuradar/skipped/unmatched_gpu_sku"] == 2
    logged = caplog.get_records("setup") + caplog.records  # the fixture crawled the pages
    lines = [r.getMessage() for r in logged if "GB200" in r.getMessage()]
    assert lines == ["gcp: GPU SKU 'Nvidia GB200 GPU' matches no known GPU (renamed or new?); "
                     "skipped"]


def test_machines_without_core_or_ram_skus_are_not_priced(full, caplog):
    spider, found = full
    assert not any(r == "europe-west4" for r, _, _ in found)  # H100 GPU SKU only
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 5
    assert any("a3-highgpu-8g europe-west4 on_demand" in r.getMessage()
               for r in caplog.get_records("setup"))


def test_a_regions_own_sku_wins_over_a_multi_region_one():
    first, second = page("skus_page1.json"), page("skus_page2.json")
    iowa = copy.deepcopy(next(s for s in first["skus"]
                              if s["description"] == "Nvidia Tesla T4 GPU running in Americas"))
    iowa["description"] = "Nvidia Tesla T4 GPU running in Iowa"
    iowa["serviceRegions"] = ["us-central1"]
    iowa["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = 330000000
    first["skus"].insert(0, iowa)  # before the Americas SKU: order must not matter
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
    found = offers(make_spider().parse_file(response(data)))
    assert validate(found[("us-central1", "nvidia-tesla-p4", "on_demand")]) == reason


def test_a_bad_core_price_prices_no_machine_rather_than_a_wrong_one():
    data = mutate("G2 Instance Core running in Americas", {"currencyCode": "USD", "units": "NaN"})
    spider = make_spider()
    found = offers(spider.parse_file(response(data)))
    assert not any(t.startswith("g2-") and p == "on_demand" for _, t, p in found)
    assert any(t.startswith("g2-") and p == "spot" for _, t, p in found)
    assert stats(spider)["gpuradar/skipped/incomplete_price"] == 24  # 8 types x 3 regions


def test_changed_field_names_are_clear_errors():
    with pytest.raises(ParseError, match="'skus' is missing"):
        list(make_spider().parse_file(response({"items": [], "nextPageToken": ""})))
    data = page("skus_page1.json")
    del data["skus"][3]["description"]
    with pytest.raises(ParseError, match="'description' is missing"):
        list(make_spider().parse_file(response(data)))


# -- requests: paging and the key --------------------------------------------------------
def test_pages_are_followed_with_the_key_in_a_header_only():
    spider = make_spider(api_key="s3cr3t-key")
    first = spider.page_request()
    assert "key" not in first.url and "s3cr3t" not in first.url
    assert first.headers[b"X-Goog-Api-Key"] == b"s3cr3t-key"
    assert "currencyCode=USD" in first.url and "pageSize=5000" in first.url
    out = list(spider.parse(response(page("skus_page1.json"))))
    [follow] = out  # nothing is offered before the last page
    assert isinstance(follow, Request) and "pageToken=APKCS1HVa0Y" in follow.url
    assert follow.headers[b"X-Goog-Api-Key"] == b"s3cr3t-key"
    done = list(spider.parse(response(page("skus_page2.json"))))
    assert done and all(isinstance(o, PriceItem) for o in done)
    assert list(spider.parse(response(page("skus_page2.json")))) == []  # assembled once


def test_a_repeated_page_token_stops_the_crawl(caplog):
    spider = make_spider(api_key="k")
    list(spider.parse(response(page("skus_page1.json"))))
    out = list(spider.parse(response(page("skus_page1.json"))))
    assert out and all(isinstance(o, PriceItem) for o in out)
    assert any("page token" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)


def test_api_refusal_is_logged_with_googles_message(caplog):
    spider = make_spider(api_key="bad-key")
    refusal = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API "
                         "key.", "status": "INVALID_ARGUMENT"}}
    assert list(spider.parse(response(refusal, status=400))) == []
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line == ("gcp: Cloud Billing API refused the request (HTTP 400): API key not valid. "
                    "Please pass a valid API key.")


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
    assert {r["instance_type"] for r in records} == {
        "a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-highgpu-8g", "a3-edgegpu-8g",
        "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "nvidia-rtx-pro-6000"}
    assert {r["gpu"] for r in records} == {"H100-SXM-80GB", "H200-SXM-141GB", "B200",
                                           "RTX-PRO-6000"}
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


def test_crawl_pages_through_the_catalog_with_a_key(tmp_path, provider_server, sqlite_url):
    # On PostgreSQL too: tests/test_aws.py crawls gcp beside the other sources on both.
    cfg = config(tmp_path, provider_server)
    proc = gpuradar("crawl", "gcp", "--json", config=cfg, db_url=sqlite_url,
                    env={"GCP_API_KEY": "AIzaFAKEKEY123"})
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 121, result
    pages = [r for r in provider_server.requests if r.path.endswith("/skus")]
    assert [r.query.get("pageToken") is not None for r in pages] == [False, True]
    assert all("key" not in r.query for r in pages)
    assert "AIzaFAKEKEY123" not in proc.stderr + proc.stdout
    h100 = gpuradar_json("prices", "--source", "gcp", "--gpu", "H100", "--limit", "0",
                         config=cfg, db_url=sqlite_url)
    assert {(o["instance_type"], o["pricing"]) for o in h100} >= {
        ("a3-highgpu-8g", "on_demand"), ("a3-highgpu-8g", "spot"), ("a3-megagpu-8g", "on_demand")}
    assert {o["region"] for o in h100} == {"us-central1"}
