"""AWS: parsers on recorded files in the real formats (GPU and ML accelerator instances),
regions from the locations feed, SigV4 signing, a refused instance type, and real crawls of
the fixture server through the `gpuradar` command."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import TextResponse
from scrapy.settings import Settings

from gpuradar.core import gpus
from gpuradar.core.currency import FxTable
from gpuradar.core.interconnect import interconnect_for
from gpuradar.core.items import PriceItem
from gpuradar.crawler.parsing import ParseFailed, parse_files
from gpuradar.crawler.pipelines import normalize, validate
from gpuradar.crawler.spiders.aws import REGIONS, AwsSpider, gpu_of, region_of_zone
from gpuradar.crawler.spiders.base import ParseError
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, callback_spider, response
from tests.provider_server import ProviderServer, Reply, serve_standard

FIX = FIXTURES / "aws"
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}
# No credential of the machine running the tests may leak into a test.
NO_AWS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
          "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
          "AWS_CONFIG_FILE": "/nonexistent/config", "AWS_EC2_METADATA_DISABLED": "true"}
FAKE_AWS = {**NO_AWS, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}


@pytest.fixture
def no_aws_env(monkeypatch):
    for name, value in NO_AWS.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)


def make_spider(**options: Any) -> AwsSpider:
    return callback_spider(AwsSpider, **options)


def stats(spider: AwsSpider) -> dict[str, Any]:
    return spider.crawler.stats.get_stats()


def items(outputs) -> list[PriceItem]:
    return [o for o in outputs if isinstance(o, PriceItem)]


def requests(outputs) -> list[Request]:
    return [o for o in outputs if isinstance(o, Request)]


def ondemand_doc(name: str = "ondemand_us-east-1.json") -> dict[str, Any]:
    return json.loads((FIX / name).read_text())


def by_type(found: list[PriceItem]) -> dict[str, PriceItem]:
    return {i.instance_type: i for i in found}


# -- the instance-type table -------------------------------------------------------------
def test_instance_types_map_to_gpu_model_count_and_memory():
    assert gpu_of("p5.48xlarge") == ("H100", 80, 8)
    assert gpu_of("p5.4xlarge") == ("H100", 80, 1)
    assert gpu_of("p4d.24xlarge") == ("A100", 40, 8)
    assert gpu_of("p4de.24xlarge") == ("A100", 80, 8)
    assert gpu_of("p3dn.24xlarge") == ("V100", 32, 8)
    assert gpu_of("g6f.large") == ("L4", 24, 1 / 8)
    assert gpu_of("gr6f.4xlarge") == ("L4", 24, 1 / 2)
    assert gpu_of("g4ad.16xlarge") == ("Radeon Pro V520", 8, 4)
    assert gpu_of("m7i.large") is None and gpu_of("p5.metal") is None


@pytest.mark.parametrize(("instance_type", "expected", "catalog"), [
    ("trn1.2xlarge", ("Trainium", 32, 1), "TRAINIUM"),
    ("trn1.32xlarge", ("Trainium", 32, 16), "TRAINIUM"),
    ("trn1n.32xlarge", ("Trainium", 32, 16), "TRAINIUM"),
    ("trn2.3xlarge", ("Trainium2", 96, 1), "TRAINIUM2"),
    ("trn2.48xlarge", ("Trainium2", 96, 16), "TRAINIUM2"),
    ("inf1.xlarge", ("Inferentia", 8, 1), "INFERENTIA"),
    ("inf1.6xlarge", ("Inferentia", 8, 4), "INFERENTIA"),
    ("inf1.24xlarge", ("Inferentia", 8, 16), "INFERENTIA"),
    ("inf2.xlarge", ("Inferentia2", 32, 1), "INFERENTIA2"),
    ("inf2.24xlarge", ("Inferentia2", 32, 6), "INFERENTIA2"),
    ("inf2.48xlarge", ("Inferentia2", 32, 12), "INFERENTIA2"),
    ("dl1.24xlarge", ("Gaudi HL-205", 32, 8), "GAUDI-HL205"),
])
def test_ml_accelerator_types_map_to_accelerator_chip_count_and_memory(
        instance_type, expected, catalog):
    assert gpu_of(instance_type) == expected
    assert gpus.lookup(*expected[:2]).name == catalog
    # Qualcomm's dl2q (no accelerator of its kind in the catalog) is left to the report.
    assert gpu_of("dl2q.24xlarge") is None


def test_every_family_of_the_table_maps_to_one_catalog_gpu():
    from gpuradar.crawler.spiders.aws import ACCELERATOR_FAMILIES

    for family, (raw, memory, _sizes) in ACCELERATOR_FAMILIES.items():
        gpu = gpus.lookup(raw, memory)
        assert gpu is not None, family
    assert gpus.lookup(*gpu_of("p4de.24xlarge")[:2]).name == "A100-SXM-80GB"
    assert gpus.lookup(*gpu_of("p5en.48xlarge")[:2]).name == "H200-SXM-141GB"
    assert gpus.lookup(*gpu_of("g5g.xlarge")[:2]).name == "T4G"


def test_zone_names_give_their_region():
    assert region_of_zone("us-east-1a") == "us-east-1"
    assert region_of_zone("us-west-2-lax-1a") == "us-west-2"
    assert region_of_zone("ap-southeast-4c") == "ap-southeast-4"


# -- on-demand region files ----------------------------------------------------------------
def test_ondemand_file_yields_accelerated_types_only_with_specs_and_string_prices(caplog):
    spider = make_spider()
    found = items(spider.parse_ondemand(response(FIX / "ondemand_us-east-1.json"),
                                        region="us-east-1"))
    offers = by_type(found)
    assert {"p5.48xlarge", "p5.4xlarge", "p5en.48xlarge", "p4d.24xlarge", "p4de.24xlarge",
            "p3.2xlarge", "p3dn.24xlarge", "g6e.xlarge", "g6.48xlarge", "g6f.large",
            "g5.xlarge", "g4dn.12xlarge", "inf2.xlarge", "trn1.32xlarge"} <= set(offers)
    # CPU types are not offers; the newest GPU family (G7e, RTX PRO 6000) is one.
    assert "m7i.large" not in offers
    g7e = offers["g7e.2xlarge"]
    assert (g7e.gpu, g7e.gpu_count, g7e.gpu_memory_gb, g7e.price) == (
        "RTX PRO 6000", 1, 96, "3.3600000000")
    p5 = offers["p5.48xlarge"]
    assert (p5.region, p5.pricing, p5.gpu, p5.gpu_count, p5.price) == (
        "us-east-1", "on_demand", "H100", 8, "55.0400000000")
    assert (p5.vcpus, p5.memory_gb, p5.gpu_memory_gb, p5.zone) == (192, 2048, 80, "")
    assert offers["g6f.large"].gpu_count == pytest.approx(0.125)
    assert stats(spider).get("gpuradar/uncatalogued", 0) == 0
    assert not [r for r in caplog.records if "catalog" in r.getMessage()]


def test_region_is_read_from_the_file_when_parsed_alone():
    found = items(make_spider().parse_file(response(FIX / "ondemand_us-west-2.json")))
    assert {i.region for i in found} == {"us-west-2"}
    assert by_type(found)["p6-b200.48xlarge"].gpu == "B200"
    assert by_type(found)["gr6f.4xlarge"].gpu_count == 0.5


@pytest.mark.parametrize(("price", "reason"), [
    ("NaN", "bad_price"), ("0.0000000000", "zero_price"), (None, "no_price"),
    ("n/a", "bad_price"), ("-1", "negative_price")])
def test_bad_prices_are_dropped_with_their_reason(price, reason):
    # p5.4xlarge: not a Capacity Block type, whose $0 means "not sold on demand" (below).
    doc = ondemand_doc()
    entry = doc["regions"]["US East (N. Virginia)"]["p5 4xlarge US East N. Virginia Linux"]
    if price is None:
        del entry["price"]
    else:
        entry["price"] = price
    found = by_type(items(make_spider().parse_ondemand(
        response(json.dumps(doc).encode()), region="us-east-1")))
    assert validate(found["p5.4xlarge"]) == reason
    assert validate(found["p4d.24xlarge"]) is None and found["p4d.24xlarge"].price == 21.957642


def test_empty_region_file_is_an_error_and_yields_nothing(caplog):
    doc = ondemand_doc()
    doc["regions"]["US East (N. Virginia)"] = {}
    with caplog.at_level(logging.ERROR):
        found = items(make_spider().parse_ondemand(response(json.dumps(doc).encode()),
                                                   region="us-east-1"))
    assert found == []
    assert any("us-east-1 has no entries" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)


def test_gzip_body_without_content_encoding_is_read():
    plain = (FIX / "ondemand_af-south-1.json").read_bytes()
    # Compressed, or plain with a leading newline (a byte below gzip's magic number).
    for body in (gzip.compress(plain), b"\n" + plain):
        found = items(make_spider().parse_ondemand(response(body), region="af-south-1"))
        assert {i.instance_type for i in found} == {"g4dn.xlarge", "g4dn.12xlarge",
                                                    "g5.xlarge"}


def test_changed_field_names_are_clear_errors():
    doc = ondemand_doc()
    del doc["regions"]["US East (N. Virginia)"]["p5 48xlarge US East N. Virginia Linux"][
        "Instance Type"]
    with pytest.raises(ParseError, match="'Instance Type' is missing"):
        list(make_spider().parse_ondemand(response(json.dumps(doc).encode()),
                                          region="us-east-1"))
    with pytest.raises(ParseError, match="'regions' is missing"):
        list(make_spider().parse_ondemand(response(b'{"manifest": {}, "products": {}}'),
                                          region="us-east-1"))


def test_next_region_is_requested_only_after_the_previous_one_is_parsed():
    spider = make_spider()
    spider.queue_ondemand(["us-west-2", "us-east-1", "eu-north-1"])
    [first] = spider.next_ondemand()
    assert first.url.endswith("/EU%20%28Stockholm%29/Linux/index.json")
    out = list(spider.parse_ondemand(response(FIX / "ondemand_eu-north-1.json"),
                                     region="eu-north-1"))
    [second] = requests(out)
    assert "US%20East%20%28N.%20Virginia%29" in second.url
    assert second.cb_kwargs == {"region": "us-east-1"}


# -- ML accelerator instances in the real price files ---------------------------------------
ASIC_TYPES = {"dl1.24xlarge", "inf1.24xlarge", "inf1.2xlarge", "inf1.6xlarge", "inf1.xlarge",
              "inf2.24xlarge", "inf2.48xlarge", "inf2.8xlarge", "inf2.xlarge", "trn1.2xlarge",
              "trn1.32xlarge", "trn1n.32xlarge"}
SIZES = ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")


def reported(caplog) -> set[str]:
    """Instance types the spider reported as uncatalogued (one warning each)."""
    found = [re.match(r"aws: (\S+) is not in gpuradar's catalog \(listed as a GPU", r.getMessage())
             for r in caplog.records]
    return {m.group(1) for m in found if m}


def test_real_price_file_rows_of_the_ml_asic_families_are_offers(caplog):
    # The real us-east-1 on-demand file of 2026-08 (every GPU, ML ASIC, FPGA and media row).
    spider = make_spider()
    found = by_type(items(spider.parse_ondemand(response(FIX / "ondemand_real_us-east-1.json"),
                                                region="us-east-1")))
    assert {t for t in found if gpus.lookup(*gpu_of(t)[:2]).kind != "GPU"} == ASIC_TYPES
    expected = {"trn1.2xlarge": ("Trainium", 1, "1.3437500000"),
                "trn1.32xlarge": ("Trainium", 16, "21.5000000000"),
                "trn1n.32xlarge": ("Trainium", 16, "24.7800000000"),
                "inf1.xlarge": ("Inferentia", 1, "0.2280000000"),
                "inf1.6xlarge": ("Inferentia", 4, "1.1800000000"),
                "inf2.24xlarge": ("Inferentia2", 6, "6.4906300000"),
                "inf2.48xlarge": ("Inferentia2", 12, "12.9812700000"),
                "dl1.24xlarge": ("Gaudi HL-205", 8, "13.1090400000")}
    for instance_type, (accelerator, chips, price) in expected.items():
        offer = found[instance_type]
        assert (offer.gpu, offer.gpu_count, offer.price, offer.pricing) == (
            accelerator, chips, price, "on_demand"), instance_type
    assert (found["dl1.24xlarge"].vcpus, found["dl1.24xlarge"].memory_gb) == (96, 768)
    # G7e: RTX PRO 6000 Blackwell, 1/1/1/2/4/8 GPUs, at the file's prices.
    assert {t: (found[t].gpu, found[t].gpu_count, found[t].gpu_memory_gb)
            for t in found if t.startswith("g7e.")} == {
        f"g7e.{size}": ("RTX PRO 6000", count, 96)
        for size, count in zip(SIZES, (1, 1, 1, 2, 4, 8), strict=True)}
    assert (found["g7e.48xlarge"].price, found["g7e.2xlarge"].price) == (
        "33.1443200000", "3.3631200000")
    # G7: RTX PRO 4500 Blackwell (32 GB), 1/1/1/2/4/8 GPUs, at the file's prices; AWS
    # prices the 12/24/48xlarge sizes at exactly 2:4:8, as their GPU counts are.
    g7 = {t: o for t, o in found.items() if t.startswith("g7.")}
    assert {t: (o.gpu, o.gpu_count, o.gpu_memory_gb) for t, o in g7.items()} == {
        f"g7.{size}": ("RTX PRO 4500", count, 32)
        for size, count in zip(SIZES, (1, 1, 1, 2, 4, 8), strict=True)}
    assert (g7["g7.2xlarge"].price, g7["g7.12xlarge"].price, g7["g7.48xlarge"].price) == (
        "2.5200000000", "7.1283200000", "28.5132800000")
    assert gpus.lookup("RTX PRO 4500", 32).name == "RTX-PRO-4500"
    # Every accelerated row of the file is now priced: FPGA (f1, f2) and video transcoding
    # (vt1) instances are neither offers nor reported.
    assert not any(t.startswith(("f1.", "f2.", "vt1.")) for t in found)
    assert reported(caplog) == set()
    assert stats(spider).get("gpuradar/uncatalogued", 0) == 0


def test_real_g_offers_with_efa_say_so_and_the_others_do_not():
    # The real us-east-1 file's G offers: the sizes AWS lists as EFA-capable (its EFA
    # device-plugin chart; G7e in aws/sagemaker-hyperpod-cli#380) have EFA between machines,
    # PCIe cards inside; the small sizes have neither.
    spider = make_spider()
    found = by_type(items(spider.parse_ondemand(response(FIX / "ondemand_real_us-east-1.json"),
                                                region="us-east-1")))

    def links(instance_type: str) -> tuple:
        offer = found[instance_type]
        gpu = gpus.lookup(offer.gpu, offer.gpu_memory_gb).name
        info = interconnect_for("aws", instance_type, gpu, offer.gpu_count)
        return info["intra_node"], info["inter_node"]

    assert {t: links(t) for t in ("g6e.48xlarge", "g6e.12xlarge", "g7e.48xlarge",
                                  "g7e.12xlarge", "g7.48xlarge", "g5.48xlarge",
                                  "g4dn.12xlarge")} == dict.fromkeys(
        ("g6e.48xlarge", "g6e.12xlarge", "g7e.48xlarge", "g7e.12xlarge", "g7.48xlarge",
         "g5.48xlarge", "g4dn.12xlarge"), ("pcie", "efa"))
    assert links("g7e.8xlarge") == (None, "efa")  # one GPU, EFA-capable
    assert links("g7e.4xlarge") == links("g6e.xlarge") == (None, None)
    assert links("g7.24xlarge") == ("pcie", None)  # EFA not confirmed below 48xlarge
    assert links("dl1.24xlarge") == (None, "efa")


def test_pipeline_prices_ml_accelerators_per_chip_hour():
    records = {r["instance_type"]: r for r in parse_files(
        "aws", [FIX / "ondemand_real_us-east-1.json"], settings())}
    trn1 = records["trn1.32xlarge"]
    assert (trn1["gpu"], trn1["gpu_count"], trn1["gpu_memory_gb"]) == ("TRAINIUM", 16, 32)
    assert trn1["price_per_gpu_usd"] == pytest.approx(21.5 / 16)
    assert records["inf2.48xlarge"]["gpu"] == "INFERENTIA2"
    assert records["inf1.24xlarge"]["price_per_gpu_usd"] == pytest.approx(4.721 / 16, abs=1e-6)
    assert records["dl1.24xlarge"]["gpu"] == "GAUDI-HL205"
    assert records["dl1.24xlarge"]["price_per_gpu_usd"] == pytest.approx(13.10904 / 8)
    assert all(r["gpu"] in gpus.CATALOG and not r["gpu_raw"] for r in records.values())


# A memory-optimized group as the real spot feed lists it (type and row as in public captures
# of spot.json): CPU types, neither offers nor reported.
HIMEM_GROUP = {"type": "hiMemCurrentGen", "sizes": [{"size": "r3.large", "valueColumns": [
    {"name": "linux", "prices": {"USD": "0.0161"}},
    {"name": "mswin", "prices": {"USD": "0.1741"}}]}]}


def test_real_spot_feed_prices_trainium2_and_gaudi_and_reports_the_rest(caplog):
    spider = make_spider()
    spider.read_locations(json.loads((FIX / "locations.json").read_text()), "f")
    feed = json.loads((FIX / "spot_real_accelerators.json").read_text())
    for region in feed["config"]["regions"]:
        region["instanceTypes"].append(HIMEM_GROUP)
    out = list(spider.parse_spot(response(json.dumps(feed).encode())))
    found = {(i.region, i.instance_type): i for i in items(out)}
    trn2 = found[("us-east-2", "trn2.48xlarge")]
    assert (trn2.gpu, trn2.gpu_count, trn2.gpu_memory_gb, trn2.price, trn2.pricing) == (
        "Trainium2", 16, 96, "8.5964", "spot")
    dl1 = found[("us-west-2", "dl1.24xlarge")]
    assert (dl1.gpu, dl1.gpu_count, dl1.price) == ("Gaudi HL-205", 8, "13.109")
    assert found[("us-west-2", "trn1n.32xlarge")].price == "3.5729"
    assert found[("us-east-2", "inf2.48xlarge")].gpu_count == 12
    # trn2.3xlarge: one Trainium2 chip.
    trn2_3 = found[("sa-east-1", "trn2.3xlarge")]
    assert (trn2_3.gpu, trn2_3.gpu_count, trn2_3.gpu_memory_gb, trn2_3.price) == (
        "Trainium2", 1, 96, "5.5256")
    # Qualcomm's dl2q (no Qualcomm accelerator in the catalog) is reported; vt1 is not.
    assert ("us-west-2", "dl2q.24xlarge") not in found
    assert reported(caplog) == {"dl2q.24xlarge"}
    assert [r.getMessage() for r in caplog.records if "dl2q" in r.getMessage()] == [
        "aws: dl2q.24xlarge is not in gpuradar's catalog (listed as a GPU or ML accelerator "
        "instance, not in the instance-type table); reported as uncatalogued, not stored"]
    assert not any("vt1." in r.getMessage() for r in caplog.records)


# -- regions from the locations feed ---------------------------------------------------------
def test_regions_come_from_the_locations_feed(caplog):
    spider = make_spider()
    del spider.region_names["ap-southeast-6"]  # as if the built-in table did not know it yet
    with caplog.at_level(logging.INFO):
        list(spider.parse_locations(response(FIX / "locations.json")))
    # One line says how many regions the feed names and which ones the table lacks.
    [line] = [r.getMessage() for r in caplog.records if "locations feed" in r.getMessage()]
    assert line == ("aws: 38 regions in the locations feed (not in the built-in table: "
                    "eusc-de-east-1, us-east-2-mci-1, us-gov-east-1, us-gov-west-1)")
    assert spider.region_names["ap-southeast-6"] == "Asia Pacific (New Zealand)"
    assert spider.region_names["ap-east-2"] == "Asia Pacific (Taipei)"
    out = list(spider.parse_spot(response(FIX / "spot_real_accelerators.json")))
    # The newest regions' on-demand files are read under the feed's names; the Local Zone
    # us-east-1-atl-1 (type "AWS Local Zone") is skipped without a warning.
    [first] = requests(out)
    assert first.url.endswith("/Asia%20Pacific%20%28Taipei%29/Linux/index.json")
    assert spider.pending_regions == ["ap-southeast-6", "sa-east-1", "us-east-2", "us-west-2"]
    assert "gpuradar/skipped/unknown_region" not in stats(spider)
    [nz] = requests(spider.parse_ondemand(response(FIX / "ondemand_eu-north-1.json"),
                                          region="ap-east-2"))
    assert nz.url.endswith("/Asia%20Pacific%20%28New%20Zealand%29/Linux/index.json")


def test_a_price_file_of_a_region_only_the_feed_knows_names_that_region():
    """A price file read on its own (`gpuradar parse`) is attributed by the location it
    names: also a region that only the locations feed knows (the Kansas City region)."""
    spider = make_spider()
    list(spider.parse_locations(response(FIX / "locations.json")))
    data = json.loads((FIX / "ondemand_eu-north-1.json").read_text())
    data["regions"] = {"US East (Kansas City)": data["regions"]["EU (Stockholm)"]}
    items = list(spider.ondemand_items(data, "index.json", None))
    assert items and {i.region for i in items} == {"us-east-2-mci-1"}


@pytest.mark.parametrize("entry", [
    {"name": "Somewhere (no code)", "type": "AWS Region"}, None, "AWS Region"],
    ids=["no code", "null", "not an object"])
def test_a_locations_entry_without_a_code_costs_only_itself(entry):
    """An entry of the locations feed without a region code, or that is no object at all,
    is skipped; the entries after it are still read."""
    data = json.loads((FIX / "locations.json").read_text())
    data = {"Somewhere (no code)": entry, **data}
    spider = make_spider()
    del spider.region_names["ap-southeast-6"]
    list(spider.parse_locations(response(json.dumps(data).encode())))
    assert spider.region_names["ap-southeast-6"] == "Asia Pacific (New Zealand)"
    assert "Somewhere (no code)" not in spider.region_names.values()


def test_a_locations_entry_without_a_name_is_read_under_its_key():
    """The feed keys each entry by its location name and repeats it as `name`; an entry
    without `name` is read under its key, which is the name the price files use."""
    data = json.loads((FIX / "locations.json").read_text())
    del data["Asia Pacific (New Zealand)"]["name"]
    spider = make_spider()
    del spider.region_names["ap-southeast-6"]
    list(spider.parse_locations(response(json.dumps(data).encode())))
    assert spider.region_names["ap-southeast-6"] == "Asia Pacific (New Zealand)"


def test_a_price_file_of_another_operating_system_is_no_offer():
    """The same file format serves each operating system (its path names one): rows of a
    Windows file, parsed with `gpuradar parse`, are not Linux offers."""
    data = ondemand_doc()
    for offers in data["regions"].values():
        for offer in offers.values():
            offer["Operating System"] = "Windows"
    assert list(make_spider().ondemand_items(data, "Windows/index.json", "us-east-1")) == []


@pytest.mark.parametrize("body", [b'{"oops": 1}', (FIX / "locations.json").read_bytes()[:5000]],
                         ids=["no regions", "cut short"])
def test_a_broken_locations_feed_falls_back_to_the_table(caplog, body):
    """A feed naming no region, or the real feed cut short (not JSON), is one error line;
    the built-in table's regions are read."""
    spider = make_spider()
    with caplog.at_level(logging.ERROR):
        [spot_request] = list(spider.parse_locations(response(body)))
    assert spot_request.url == AwsSpider.endpoints["spot"]
    assert spider.region_names == REGIONS
    [error] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.startswith("aws: locations feed unreadable (")


# -- spot feed and interruption bands ------------------------------------------------------
@pytest.mark.parametrize("unit", ["permin", "perday"])  # sorting after and before "perhr"
def test_spot_feed_in_another_unit_than_per_hour_is_refused(unit):
    # The real feed says "rate": "perhr"; the same feed claiming another unit is one clear
    # error naming the field, not prices off by a factor.
    feed = json.loads((FIX / "spot_real_us-east-1.json").read_text())
    assert feed["config"]["rate"] == "perhr"
    assert items(make_spider().spot_items(feed, "f"))
    feed["config"]["rate"] = unit
    with pytest.raises(ParseError) as caught:
        list(make_spider().spot_items(feed, "f"))
    assert "config.rate" in str(caught.value) and f"{unit!r}, expected 'perhr'" in str(
        caught.value)


@pytest.mark.parametrize(("meta", "headers", "as_of"), [
    ({}, {"Last-Modified": "Sat, 28 Jun 2025 09:12:00 GMT"}, "2025-06-28"),
    # a replayed answer captured apart from its recording carries its own date
    ({"recording_captured": "2025-06-28"}, {"Last-Modified": "Sun, 06 Dec 2026 01:00:00 GMT"},
     "2025-06-28"),
])
def test_the_interruption_band_is_dated_by_its_feed(meta, headers, as_of):
    spider = make_spider()
    advisor = response(FIX / "spot_advisor_real_accelerators.json", **meta)
    list(spider.parse_advisor(advisor.replace(headers=headers)))
    [item] = [i for i in items(spider.spot_items(json.loads((FIX / "spot.json").read_bytes()),
                                                 "f"))
              if (i.region, i.instance_type) == ("us-east-1", "p5.48xlarge")]
    assert item.attributes["interruption"] == ">20%"  # the real band of 2025-06-28
    assert (item.attributes["interruption_source"], item.attributes["interruption_as_of"]) == (
        "AWS Spot Advisor", as_of)


def test_spot_offers_carry_band_savings_and_shape_from_the_advisor():
    spider = make_spider()
    [locations_request] = list(spider.parse_advisor(response(FIX / "spot-advisor-data.json")))
    assert locations_request.url == AwsSpider.endpoints["locations"]
    [spot_request] = list(spider.parse_locations(response(FIX / "locations.json")))
    assert spot_request.url == AwsSpider.endpoints["spot"]
    out = list(spider.parse_spot(response(FIX / "spot.json")))
    found = {(i.region, i.instance_type): i for i in items(out)}
    p5 = found[("us-east-1", "p5.48xlarge")]
    assert (p5.pricing, p5.zone, p5.price, p5.gpu_count) == ("spot", "", "23.6727", 8)
    today = datetime.now(UTC).date().isoformat()  # no Last-Modified: dated when fetched
    assert p5.attributes == {"interruption": "<5%", "savings_pct": 57,
                             "interruption_source": "AWS Spot Advisor",
                             "interruption_as_of": today}
    assert (p5.vcpus, p5.memory_gb) == (192, 2048)
    assert found[("us-east-1", "g4dn.12xlarge")].attributes["interruption"] == ">20%"
    # The real af-south-1 capture: every g4dn size and the 16-chip inf1.
    assert {t for r, t in found if r == "af-south-1"} == {
        "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.8xlarge",
        "g4dn.metal", "g4dn.xlarge", "inf1.24xlarge"}
    assert found[("af-south-1", "g4dn.metal")].gpu_count == 8
    inf1 = found[("af-south-1", "inf1.24xlarge")]
    assert (inf1.gpu, inf1.gpu_count, inf1.price) == ("Inferentia", 16, "0.6249")
    assert "interruption" not in found[("us-west-2", "g6e.xlarge")].attributes  # no advice
    g7e = found[("us-east-1", "g7e.2xlarge")]
    assert (g7e.gpu, g7e.gpu_count, g7e.price) == ("RTX PRO 6000", 1, "1.4211")
    assert stats(spider).get("gpuradar/uncatalogued", 0) == 0
    # Then the on-demand files of the feed's regions, the first one now.
    [next_request] = requests(out)
    assert "Africa%20%28Cape%20Town%29" in next_request.url
    assert spider.pending_regions == ["eu-north-1", "us-east-1", "us-west-2"]


def test_spot_feed_as_jsonp_and_gzip_reads_the_same():
    plain = items(make_spider().spot_items(json.loads((FIX / "spot.json").read_text()), "f"))
    wrapped = b"callback(" + (FIX / "spot.json").read_bytes() + b");"
    found = items(make_spider().parse_spot(response(gzip.compress(wrapped))))
    assert [(i.region, i.instance_type, i.price) for i in found] == [
        (i.region, i.instance_type, i.price) for i in plain]


def test_regions_option_restricts_spot_offers_and_region_files():
    spider = make_spider(regions=["us-west-2"])
    out = list(spider.parse_spot(response(FIX / "spot.json")))
    assert {i.region for i in items(out)} == {"us-west-2"}
    assert [r.cb_kwargs["region"] for r in requests(out)] == ["us-west-2"]
    assert spider.pending_regions == []


def test_a_spot_feed_region_with_an_empty_name_costs_only_itself():
    """A region entry of the spot feed with an empty region name is skipped quietly (no
    "unknown region" warning): every other region is priced and its on-demand file asked."""
    data = json.loads((FIX / "spot.json").read_text())
    before = make_spider()
    expected = [r.cb_kwargs["region"] for r in requests(before.parse_spot(
        response(json.dumps(data).encode())))] + before.pending_regions
    data["config"]["regions"].insert(0, {**data["config"]["regions"][0], "region": ""})
    spider = make_spider()
    out = list(spider.parse_spot(response(json.dumps(data).encode())))
    assert [r.cb_kwargs["region"] for r in requests(out)] + spider.pending_regions == expected
    assert "gpuradar/skipped/unknown_region" not in stats(spider)


def test_unknown_region_in_the_spot_feed_is_logged_once_and_still_priced(caplog):
    data = json.loads((FIX / "spot.json").read_text())
    data["config"]["regions"][0]["region"] = "ap-southeast-9"
    data["config"]["regions"].append({**data["config"]["regions"][0], "region": "us-gov-west-1"})
    spider = make_spider()
    out = list(spider.parse_spot(response(json.dumps(data).encode())))
    assert "ap-southeast-9" in {i.region for i in items(out)}
    assert stats(spider)["gpuradar/skipped/unknown_region"] == 1
    assert [r.getMessage() for r in caplog.records if "region table" in r.getMessage()] == [
        "aws: region ap-southeast-9 is in neither the locations feed nor the region table; its "
        "on-demand prices are not read"]


# -- DescribeSpotPriceHistory / DescribeRegions --------------------------------------------
def test_spot_history_gives_the_latest_price_per_zone():
    spider = make_spider()
    list(spider.parse_advisor(response(FIX / "spot-advisor-data.json")))
    found = items(spider.parse_spot_history(response(FIX / "spot_history_us-east-1_page1.xml"),
                                            region="us-east-1"))
    prices = {(i.zone, i.instance_type): i.price for i in found}
    assert prices == {("us-east-1a", "g4dn.xlarge"): "0.209900",  # the newer of two
                      ("us-east-1c", "g4dn.xlarge"): "0.205500",
                      ("us-east-1a", "p5.48xlarge"): "24.112100",
                      ("us-east-1b", "p5.48xlarge"): "23.904300",
                      ("us-east-1a", "inf2.xlarge"): "0.231200"}
    # The newest point of a zone wins in whatever order EC2 lists the points.
    text = (FIX / "spot_history_us-east-1_page1.xml").read_text()
    start, end = text.index("<item>"), text.rindex("</item>") + len("</item>")
    entries = re.findall(r"<item>.*?</item>", text[start:end], re.DOTALL)
    backwards = text[:start] + "\n".join(reversed(entries)) + text[end:]
    reread = items(spider.parse_spot_history(response(backwards.encode(), kind="xml"),
                                             region="us-east-1"))
    assert {(i.zone, i.instance_type): i.price for i in reread} == prices
    p5 = next(i for i in found if i.zone == "us-east-1a" and i.instance_type == "p5.48xlarge")
    assert (p5.region, p5.pricing, p5.attributes["interruption"]) == ("us-east-1", "spot", "<5%")
    assert p5.attributes["price_since"] == "2026-09-25T17:02:11.000Z"
    # A saved answer asked without the Linux/UNIX filter (`gpuradar parse`) also lists other
    # products (EC2's product descriptions: Linux/UNIX, SUSE Linux, Windows, each also
    # "(Amazon VPC)"): their rows are skipped, the Linux/UNIX rows after them all kept.
    text = (FIX / "spot_history_us-east-1_page1.xml").read_text()
    first = text.index("<item>")
    windows = text[first:text.index("</item>") + len("</item>")].replace(
        "Linux/UNIX", "Windows").replace("24.112100", "26.101200")
    mixed = text[:first] + windows + "\n        " + text[first:]
    found = items(spider.parse_file(response(mixed.encode(), kind="xml")))
    assert {(i.zone, i.instance_type): i.price for i in found} == prices


def test_spot_history_follows_next_token_when_signing():
    spider = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="secret")
    spider.aws_credentials = spider.credential_source(spider.settings).get_frozen_credentials()
    out = list(spider.parse_spot_history(response(FIX / "spot_history_us-east-1_page1.xml"),
                                         region="us-east-1"))
    [follow] = requests(out)
    assert b"NextToken=eyJ2Ijoy" in follow.body
    assert requests(spider.parse_spot_history(response(FIX / "spot_history_us-east-1_page2.xml"),
                                              region="us-east-1")) == []
    empty = list(spider.parse_spot_history(response(FIX / "spot_history_eu-north-1.xml"),
                                           region="eu-north-1"))
    assert empty == []


def signing_spider() -> AwsSpider:
    spider = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="secret")
    spider.aws_credentials = spider.credential_source(spider.settings).get_frozen_credentials()
    return spider


def history_types(request: Request) -> list[str]:
    form = dict(p.split("=", 1) for p in request.body.decode().split("&"))
    return [v for k, v in sorted(form.items(), key=lambda kv: kv[0])
            if k.startswith("InstanceType.")]


def error_response(body: bytes, region: str = "us-west-2") -> TextResponse:
    return response(body, f"https://ec2.{region}.amazonaws.com/", status=400, kind="xml")


def test_a_refused_instance_type_named_by_ec2_is_left_out():
    spider = signing_spider()
    first = spider.spot_history_request("us-west-2")
    asked = tuple(history_types(first))
    assert "p6-b300.48xlarge" in asked and len(asked) > 60
    out = list(spider.parse_spot_history(
        error_response((FIX / "error_invalid_instance_type.xml").read_bytes()),
        region="us-west-2", types=first.cb_kwargs["types"]))
    [again] = requests(out)
    assert set(history_types(again)) == set(asked) - {"p6-b300.48xlarge"}
    assert stats(spider)["gpuradar/skipped/refused_instance_type"] == 1


def test_the_next_page_asks_for_the_same_types_as_the_first():
    """A region asked again without a refused type pages on without it too: asked for on
    the next page, it would be refused again and the region's answer start over."""
    spider = signing_spider()
    types = ("g4dn.xlarge", "inf2.xlarge", "p5.48xlarge")
    [follow] = requests(spider.parse_spot_history(
        response(FIX / "spot_history_us-east-1_page1.xml"), region="us-east-1", types=types))
    assert b"NextToken=eyJ2Ijoy" in follow.body
    assert history_types(follow) == list(types)


def test_a_last_type_refused_by_name_is_left_out_without_an_error(caplog):
    """One type left, and EC2's real message names it: it is left out with a warning, as
    among many; no error, so the crawl is not marked partial for it."""
    spider = signing_spider()
    with caplog.at_level(logging.WARNING):
        out = list(spider.parse_spot_history(
            error_response((FIX / "error_invalid_instance_type.xml").read_bytes()),
            region="us-west-2", types=("p6-b300.48xlarge",)))
    assert out == []
    assert stats(spider)["gpuradar/skipped/refused_instance_type"] == 1
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "in us-west-2 refuses p6-b300.48xlarge" in caplog.records[0].getMessage()


def test_a_refusal_that_names_no_type_is_narrowed_down_by_halves(caplog):
    # A message naming none of the requested types (wording not seen from EC2, but the
    # spider must not depend on the wording).
    body = (FIX / "error_invalid_instance_type.xml").read_bytes().replace(
        b"Invalid value 'p6-b300.48xlarge' for InstanceType.", b"Invalid instance type.")
    spider = signing_spider()
    types = ("g5.xlarge", "g6.xlarge", "p5.48xlarge", "trn1.2xlarge")
    halves = requests(spider.parse_spot_history(error_response(body), region="us-west-2",
                                                types=types))
    assert [history_types(r) for r in halves] == [["g5.xlarge", "g6.xlarge"],
                                                  ["p5.48xlarge", "trn1.2xlarge"]]
    # A half of two still refused is split again, down to the one type EC2 refuses.
    pair = requests(spider.parse_spot_history(error_response(body), region="us-west-2",
                                              types=("g5.xlarge", "g6.xlarge")))
    assert [history_types(r) for r in pair] == [["g5.xlarge"], ["g6.xlarge"]]
    # One type left and still refused without being named: an error (the crawl is partial).
    with caplog.at_level(logging.ERROR):
        assert list(spider.parse_spot_history(error_response(body), region="us-west-2",
                                              types=("g6.xlarge",))) == []
    assert any("InvalidParameterValue" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)


def test_describe_regions_skips_regions_not_enabled_with_one_line(caplog):
    spider = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="secret")
    spider.aws_credentials = spider.credential_source(spider.settings).get_frozen_credentials()
    with caplog.at_level(logging.INFO):
        out = list(spider.parse_describe_regions(response(FIX / "describe_regions.xml"),
                                                 region="us-east-1"))
    history = [r for r in out if r.cb_kwargs["params"]["Action"] == "DescribeSpotPriceHistory"]
    assert sorted(r.cb_kwargs["region"] for r in history) == [
        "eu-north-1", "us-east-1", "us-west-2"]
    lines = [r.getMessage() for r in caplog.records if "not enabled" in r.getMessage()]
    assert lines == ["aws: regions not enabled for this account, skipped: af-south-1, ap-east-1"]


# -- Capacity Blocks for ML -----------------------------------------------------------------
def capacity_block_requests(out) -> dict[tuple[str, str], dict[str, str]]:
    return {(r.cb_kwargs["region"], r.cb_kwargs["params"].get("InstanceType")
             or r.cb_kwargs["params"]["UltraserverType"]): r.cb_kwargs["params"]
            for r in requests(out)
            if r.cb_kwargs["params"]["Action"] == "DescribeCapacityBlockOfferings"}


def test_with_credentials_every_enabled_region_is_asked_for_capacity_blocks():
    out = list(signing_spider().parse_describe_regions(response(FIX / "describe_regions.xml"),
                                                       region="us-east-1"))
    asked = capacity_block_requests(out)
    assert {r for r, _ in asked} == {"eu-north-1", "us-east-1", "us-west-2"}
    # Each type EC2 sells as blocks, a 24-hour block of one instance (botocore's EC2 model:
    # InstanceType, InstanceCount, CapacityDurationHours) ...
    assert asked[("us-east-1", "p6-b200.48xlarge")] == {
        "Action": "DescribeCapacityBlockOfferings", "InstanceType": "p6-b200.48xlarge",
        "InstanceCount": "1", "CapacityDurationHours": "24"}
    assert {t for r, t in asked if r == "us-east-1"} >= {
        "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "trn2.48xlarge"}
    # ... and one GB200 UltraServer (UltraserverType, UltraserverCount).
    assert asked[("us-west-2", "u-p6e-gb200x72")] == {
        "Action": "DescribeCapacityBlockOfferings", "UltraserverType": "u-p6e-gb200x72",
        "UltraserverCount": "1", "CapacityDurationHours": "24"}
    # The Trn2 UltraServer: four trn2u.48xlarge of 16 Trainium2 each (AWS Neuron's Trn2 page).
    assert asked[("us-east-1", "u-trn2x64")]["UltraserverType"] == "u-trn2x64"
    assert gpu_of("trn2u.48xlarge") == ("Trainium2", 96, 16)
    off = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="s", capacity_blocks=False)
    off.aws_credentials = off.credential_source(off.settings).get_frozen_credentials()
    assert not capacity_block_requests(off.parse_describe_regions(
        response(FIX / "describe_regions.xml"), region="us-east-1"))


def test_a_capacity_block_offering_is_an_offer_of_its_own_kind_with_its_terms():
    # AWS's published p5.48xlarge rate in N. Virginia, $39.33 an instance-hour: a 24 h block
    # costs 943.92 up front. Two offerings in us-east-1a: the same price, the earlier kept.
    found = items(signing_spider().parse_capacity_blocks(
        response(FIX / "capacity_blocks_us-east-1.xml"), region="us-east-1"))
    by_zone = {o.zone: o for o in found}
    assert sorted(by_zone) == ["us-east-1a", "us-east-1b"]
    block = by_zone["us-east-1a"]
    assert (block.region, block.instance_type, block.pricing, block.gpu, block.gpu_count,
            block.currency, block.available) == (
        "us-east-1", "p5.48xlarge", "capacity_block", "H100", 8, "USD", True)
    assert block.price == pytest.approx(39.33)
    assert block.attributes["terms"] == {
        "block_hours": 24, "start": "2024-12-10T11:30:00.000Z",
        "end": "2024-12-11T11:30:00.000Z", "upfront_fee": 943.92, "currency": "USD",
        "instance_count": 1, "offering_id": "cb-0123456789abcdef0"}
    # A real answer's figures: one trn2.48xlarge (16 Trainium2), 24 h in ap-south-2b for
    # $858.26 up front, $35.76 an hour (see SOURCE.md).
    [trn2] = items(signing_spider().parse_capacity_blocks(
        response(FIX / "capacity_blocks_trn2_ap-south-2.xml"), region="ap-south-2"))
    assert (trn2.zone, trn2.gpu, trn2.gpu_count, trn2.price) == (
        "ap-south-2b", "Trainium2", 16, pytest.approx(35.76, abs=0.005))
    assert trn2.attributes["terms"]["upfront_fee"] == 858.26
    # p5e (8 x H200) in Ohio at its published $43.26.
    [p5e] = items(signing_spider().parse_capacity_blocks(
        response(FIX / "capacity_blocks_p5e_us-east-2.xml"), region="us-east-2"))
    assert (p5e.gpu, p5e.pricing, p5e.price) == ("H200", "capacity_block", pytest.approx(43.26))
    normalize(p5e, FxTable({}))
    assert p5e.price_per_gpu_usd == pytest.approx(43.26 / 8)


def test_an_ultraserver_block_counts_every_gpu_and_a_block_without_a_fee_is_not_priced():
    # An UltraServer offering (the model's ultraserverType and instanceCount): its GPUs are
    # those of all its instances. No public answer gives a fee: with none, no price.
    body = (FIX / "capacity_blocks_us-east-1.xml").read_text()
    first = body[body.index("<item>"):body.index("</item>") + len("</item>")]
    ultra = (first.replace("p5.48xlarge", "p6e-gb200.36xlarge")
             .replace("<instanceCount>1<", "<instanceCount>18<")
             .replace("<upfrontFee>943.92</upfrontFee>", "")
             .replace("<tenancy>", "<ultraserverType>u-p6e-gb200x72</ultraserverType>"
                      "<ultraserverCount>1</ultraserverCount><tenancy>"))
    text = body[:body.index("<item>")] + ultra + body[body.rindex("</item>") + 7:]
    [offer] = items(signing_spider().parse_capacity_blocks(
        response(text.encode(), kind="xml"), region="us-east-1"))
    assert (offer.instance_type, offer.gpu, offer.gpu_count, offer.price) == (
        "u-p6e-gb200x72", "GB200", 72, None)
    assert validate(offer) == "no_price"


def test_an_offering_that_states_no_instance_count_is_a_block_of_one_instance():
    # `instanceCount` left out of an offering: a block of one instance (the count asked
    # for), its GPUs those of one p5.48xlarge, never more.
    body = (FIX / "capacity_blocks_us-east-1.xml").read_text()
    first = body[body.index("<item>"):body.index("</item>") + len("</item>")]
    text = (body[:body.index("<item>")] + first.replace("<instanceCount>1</instanceCount>", "")
            + body[body.rindex("</item>") + 7:])
    [offer] = items(signing_spider().parse_capacity_blocks(
        response(text.encode(), kind="xml"), region="us-east-1"))
    assert (offer.instance_type, offer.gpu_count, offer.price) == (
        "p5.48xlarge", 8, pytest.approx(39.33))
    assert offer.attributes["terms"]["instance_count"] == 1


def test_a_region_that_sells_no_blocks_of_a_type_is_no_failure(caplog):
    spider = signing_spider()
    body = (FIX / "error_invalid_instance_type.xml").read_bytes()
    assert list(spider.parse_capacity_blocks(error_response(body), region="eu-north-1")) == []
    assert list(spider.parse_capacity_blocks(response(FIX / "capacity_blocks_none.xml"),
                                             region="us-west-2")) == []
    assert stats(spider)["gpuradar/skipped/capacity_blocks_not_sold_here"] == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # Credentials without the permission: said once, as a warning; spot prices still count.
    refused = (FIX / "error_unauthorized.xml").read_bytes()
    for region in ("us-east-1", "us-west-2"):
        list(spider.parse_capacity_blocks(response(refused, status=403, kind="xml"),
                                          region=region))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ec2:DescribeCapacityBlockOfferings" in warnings[0]
    assert "You are not authorized to perform this operation." in warnings[0]


def test_a_zero_on_demand_price_of_a_capacity_block_type_is_not_sold_on_demand(caplog):
    # p5e.48xlarge at $0 in the public on-demand file: not sold on demand, so no offer (the
    # row built from the real p5en row of the us-east-1 capture). A $0 of another type stays
    # a dropped zero price for the pipeline to count.
    data = json.loads((FIX / "ondemand_real_us-east-1.json").read_text())
    [location] = data["regions"]
    rows = data["regions"][location]
    p5en = rows["p5en 48xlarge US East N. Virginia Linux"]
    rows["p5e 48xlarge US East N. Virginia Linux"] = {
        **p5en, "Instance Type": "p5e.48xlarge", "price": "0.0000000000"}
    g5 = next(k for k, v in rows.items() if v["Instance Type"] == "g5.xlarge")
    rows[g5] = {**rows[g5], "price": "0.0000000000"}
    spider = make_spider()
    with caplog.at_level(logging.INFO):
        found = by_type(items(spider.ondemand_items(data, "file", "us-east-1")))
    assert "p5e.48xlarge" not in found and found["p5en.48xlarge"].price == "63.2960000000"
    assert stats(spider)["gpuradar/skipped/not_on_demand"] == 1
    assert validate(found["g5.xlarge"]) == "zero_price"
    assert [r.getMessage() for r in caplog.records if "not sold on demand" in r.getMessage()
            ] == ["aws: p5e.48xlarge is listed at $0 on demand: not sold on demand (Capacity "
                  "Blocks), so no on-demand offer"]


def test_api_error_is_logged_with_its_code(caplog):
    spider = make_spider()
    resp = response(FIX / "error_unauthorized.xml", "https://ec2.us-east-1.amazonaws.com/",
                    status=403)
    assert list(spider.parse_spot_history(resp, region="us-east-1")) == []
    [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.getMessage() == ("aws: DescribeSpotPriceHistory in us-east-1 refused: "
                                 "UnauthorizedOperation You are not authorized to perform this "
                                 "operation.")


@pytest.mark.parametrize("status", [400, 503])
def test_an_error_status_without_ec2s_error_document_is_reported_by_status(caplog, status):
    """A refusal whose body is not EC2's <Response><Errors> document (a load balancer's
    page) is still a refusal: logged with its HTTP status, no offer, no parse error."""
    spider = make_spider()
    page = f"<html><body><h1>{status} Service Temporarily Unavailable</h1></body></html>"
    resp = response(page, "https://ec2.us-east-1.amazonaws.com/", status=status)
    assert list(spider.parse_spot_history(resp, region="us-east-1")) == []
    [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.getMessage() == (f"aws: DescribeSpotPriceHistory in us-east-1 refused: "
                                 f"HTTP {status} ")


def test_a_successful_answer_that_is_not_ec2s_is_a_parse_error():
    """A 200 whose XML is not an EC2 answer (a portal's page) is a changed format, named as
    such, not a refusal."""
    resp = response("<html><body>Sign in</body></html>", "https://ec2.us-east-1.amazonaws.com/")
    with pytest.raises(ParseError, match="spotPriceHistorySet"):
        list(make_spider().parse_spot_history(resp, region="us-east-1"))


@pytest.fixture
def container_role(no_aws_env, monkeypatch, provider_server):
    """A container role's credentials endpoint (ECS/EKS: an HTTP endpoint of the task) on
    the provider server, named by AWS_CONTAINER_CREDENTIALS_FULL_URI."""
    expiry = (datetime.now(UTC) + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    role = {"AccessKeyId": "ASIAROLEEXAMPLE", "SecretAccessKey": "role-secret-never-shown",
            "Token": "role-session-token", "Expiration": expiry}
    provider_server.route("GET", "/v2/credentials/task",
                          lambda req: Reply(body=json.dumps(role).encode()))
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI",
                       provider_server.base + "/v2/credentials/task")


def test_a_container_role_is_used_at_crawl_time_and_not_asked_by_status(
        container_role, provider_server):
    """Credentials from a container role give per-zone spot prices at crawl time;
    `gpuradar sources` makes no such network call and says a role is tried at crawl time."""
    enabled, why = AwsSpider.status(Settings({"GPURADAR_SOURCES": {"aws": {}}}))
    assert enabled and "an instance role is tried at crawl time" in why
    assert provider_server.requests == []
    credentials = AwsSpider.credential_source(make_spider().settings)
    assert credentials.method == "container-role"
    assert credentials.get_frozen_credentials().access_key == "ASIAROLEEXAMPLE"
    assert [r.path for r in provider_server.requests] == ["/v2/credentials/task"]


@pytest.mark.parametrize("replay", [False, True], ids=["crawl", "replay"])
def test_a_crawl_asks_the_container_role_and_a_replay_does_not(
        container_role, provider_server, tmp_path, replay):
    """Starting a crawl looks up a container role (per-zone spot prices follow); starting
    a replay touches no network, not even the role's endpoint."""
    spider = callback_spider(AwsSpider, {"GPURADAR_REPLAY_DIR": str(tmp_path)} if replay
                             else {})

    async def first_request() -> Request:
        return await spider.start().__anext__()

    assert asyncio.run(first_request()).url == AwsSpider.endpoints["advisor"]
    if replay:
        assert (spider.aws_credentials, provider_server.requests) == (None, [])
    else:
        assert spider.aws_credentials.access_key == "ASIAROLEEXAMPLE"
        assert [r.path for r in provider_server.requests] == ["/v2/credentials/task"]


def test_the_spot_history_starts_at_the_top_of_the_hour():
    # EC2 answers the price in effect at StartTime plus every change since; the whole hour
    # keeps the signed body the same for an hour, which a recording replays.
    from urllib.parse import parse_qs

    def hour() -> str:
        return datetime.now(UTC).strftime("%Y-%m-%dT%H:00:00Z")

    before = hour()
    request = signing_spider().spot_history_request("us-west-2")
    after = hour()
    assert parse_qs(request.body.decode())["StartTime"][0] in {before, after}


def test_signed_request_carries_a_valid_sigv4_signature():
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    spider = make_spider(access_key_id="AKIDEXAMPLE", secret_access_key="s3cr3t")
    spider.aws_credentials = spider.credential_source(spider.settings).get_frozen_credentials()
    request = spider.spot_history_request("eu-north-1")
    assert request.url == "https://ec2.eu-north-1.amazonaws.com/" and request.method == "POST"
    auth = request.headers[b"Authorization"].decode()
    assert re.match(r"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\d{8}/eu-north-1/ec2/aws4_request,"
                    r" SignedHeaders=[a-z;-]+, Signature=[0-9a-f]{64}$", auth)
    form = dict(p.split("=", 1) for p in request.body.decode().split("&"))
    assert form["Action"] == "DescribeSpotPriceHistory" and form["Version"] == "2016-11-15"
    assert form["ProductDescription.1"] == "Linux%2FUNIX"
    # Recompute the signature for the same request and time: it must be identical.
    stamp = request.headers[b"X-Amz-Date"].decode()
    check = AWSRequest(method="POST", url=request.url, data=request.body, headers={
        "Content-Type": request.headers[b"Content-Type"].decode(), "X-Amz-Date": stamp})
    signer = SigV4Auth(Credentials("AKIDEXAMPLE", "s3cr3t"), "ec2", "eu-north-1")
    signer._modify_request_before_signing = lambda req: None  # keep our X-Amz-Date
    check.context["timestamp"] = stamp
    signer.add_auth(check)
    assert check.headers["Authorization"] == auth
    assert "s3cr3t" not in auth and b"s3cr3t" not in request.body


def test_status_says_what_credentials_add(no_aws_env):
    def status(**options: Any) -> tuple[bool, str]:
        return AwsSpider.status(Settings({"GPURADAR_SOURCES": {"aws": options}}))

    enabled, why = status()
    assert enabled and "AWS_ACCESS_KEY_ID" in why and "per-zone spot prices" in why
    assert "(capacity blocks need credentials)" in why
    assert status(access_key_id="AKIDEXAMPLE", secret_access_key="x") == (
        True, "public price files; AWS credentials found (config-file): per-zone spot prices, "
        "Capacity Block offerings")
    assert status(access_key_id="AKIDEXAMPLE", secret_access_key="x",
                  capacity_blocks=False)[1].endswith("per-zone spot prices")
    # A key id without its secret is not a credential: the standard chain is looked at.
    assert "would add per-zone spot prices" in status(access_key_id="AKIDEXAMPLE")[1]
    assert status(spot_history=False) == (
        True, "public price files; per-zone spot prices off (sources.aws.spot_history)")
    # A profile that is not there costs the spot history only, and says why.
    assert status(profile="nowhere") == (
        True, "public price files; AWS credentials unusable (ProfileNotFound)")
    assert status(enabled=False) == (False, "disabled in the config file")


# -- gpuradar parse --------------------------------------------------------------------------
def settings() -> Settings:
    import gpuradar.crawler.settings as project

    out = Settings()
    out.setmodule(project)
    return out


def test_parse_tells_every_kind_of_file_apart(caplog):
    def parsed(*names: str) -> list[dict[str, Any]]:
        return list(parse_files("aws", [FIX / n for n in names], settings()))

    assert parsed("describe_regions.xml") == []
    with caplog.at_level(logging.INFO):
        assert parsed("spot-advisor-data.json") == []
    # Bands of accelerated types only (m7i.large and i4i.12xlarge of the feed are not).
    assert "aws: advisor data read: 21 GPU offers with a band" in caplog.messages
    zones = parsed("spot-advisor-data.json", "spot_history_us-west-2.xml")
    assert {(o["zone"], o["gpu"], o["attributes"].get("interruption")) for o in zones} == {
        ("us-west-2a", "T4G", "<5%"), ("us-west-2b", "H100-SXM-80GB", "5-10%")}
    spot = parsed("spot.json")
    assert {o["pricing"] for o in spot} == {"spot"} and len(spot) == 31
    assert parsed("locations.json") == []
    od = parsed("ondemand_eu-north-1.json")
    assert [(o["instance_type"], o["gpu"], o["price_usd"]) for o in od] == [
        ("g4dn.xlarge", "T4", 0.558), ("g5.xlarge", "A10G", 1.069),
        ("g6e.2xlarge", "L40S", 2.448)]
    with pytest.raises(ParseFailed, match="not an AWS price file"):
        parsed("../gcp/skus_page2.json")


def test_every_gpu_in_the_fixtures_maps_to_the_catalog():
    names = sorted(p.name for p in FIX.iterdir() if p.name.startswith(("ondemand", "spot")))
    for record in parse_files("aws", [FIX / n for n in names], settings()):
        assert record["gpu"] in gpus.CATALOG, record
        assert not record["gpu_raw"]


def test_pipeline_prices_fractional_gpus_per_whole_gpu():
    item = by_type(items(make_spider().parse_ondemand(response(FIX / "ondemand_us-east-1.json"),
                                                      region="us-east-1")))["g6f.large"]
    assert validate(item) is None and normalize(item, FxTable()) is None
    assert item.gpu == "L4" and item.price_per_gpu_usd == pytest.approx(0.214 * 8)


# -- real crawls over HTTP -------------------------------------------------------------------
def config(tmp_path: Path, server: ProviderServer, **sources: Any) -> Path:
    return write_config(tmp_path / "config.yaml", endpoints=serve_standard(server),
                        scrapy=FAST, sources=sources)


def crawl(cfg: Path, db_url: str, *names: str, env: dict[str, str] | None = None
          ) -> dict[str, dict]:
    proc = gpuradar("crawl", *names, "--json", config=cfg, db_url=db_url,
                    env={**NO_AWS, **(env or {})})
    assert proc.returncode in (0, 1, 4), proc.stderr  # 4: a partial crawl
    result = {r["source"]: r for r in json.loads(proc.stdout)}
    result["_stderr"] = proc.stderr  # type: ignore[assignment]
    return result


def aws_offers(cfg: Path, db_url: str, *args: str) -> list[dict[str, Any]]:
    """What `gpuradar prices --source aws` lists."""
    return gpuradar_json("prices", "--source", "aws", "--limit", "0", *args, config=cfg,
                         db_url=db_url)


def stored_aws_offers(db_url: str) -> list[dict[str, Any]]:
    """The same, read in-process (fewer slow subprocesses for secondary checks)."""
    from gpuradar.storage.db import open_database
    from gpuradar.storage.queries import OfferFilter, current_offers

    return current_offers(open_database(db_url), OfferFilter(sources=["aws"]))


def test_public_crawl_stores_every_region_and_h100_lists_aws_beside_the_others(
        tmp_path, provider_server, db_url):
    cfg = config(tmp_path, provider_server)
    result = crawl(cfg, db_url, "fx", "azure", "vastai", "aws", "gcp",
                   env={"GCP_API_KEY": "AIzaFAKE"})
    assert result["aws"]["status"] == "ok", result
    assert result["aws"]["items"] == 31 + 36  # spot feed + four region files (g7e.2xlarge in both)
    offers = aws_offers(cfg, db_url)
    assert {o["region"] for o in offers} == {"af-south-1", "eu-north-1", "us-east-1",
                                              "us-west-2"}
    assert {o["zone"] for o in offers} == {""}  # no credentials: no per-zone prices
    p5 = {(o["region"], o["pricing"]): o for o in offers if o["instance_type"] == "p5.48xlarge"}
    assert p5[("us-east-1", "on_demand")]["price_per_gpu_usd"] == pytest.approx(6.88)
    extra = p5[("us-east-1", "spot")]["attributes"]
    assert (extra["interruption"], extra["savings_pct"]) == ("<5%", 57)
    # On-demand files are fetched one after the other, each once.
    od = [r.path for r in provider_server.requests if "/ec2-ondemand-" in r.path]
    assert len(od) == len(set(od)) == 4
    table = gpuradar("prices", "--source", "aws", "--gpu", "H100", "--pricing", "spot",
                     config=cfg, db_url=db_url, env={"COLUMNS": "250"})
    # the band with its source and date (no Last-Modified on the loopback: the crawl's day)
    assert re.search(r"<5%/month \(AWS Spot Advisor, \d{4}-\d\d-\d\d\) +saves 57%",
                     table.stdout), table.stdout
    # `gpuradar prices --gpu H100`: AWS and GCP side by side with Azure and Vast.ai.
    assert {result[s]["status"] for s in ("azure", "vastai", "gcp")} == {"ok"}
    h100 = gpuradar_json("prices", "--gpu", "H100", "--limit", "0", config=cfg, db_url=db_url)
    assert {(o["source"], o["pricing"]) for o in h100} >= {
        (s, p) for s in ("aws", "gcp", "azure", "vastai") for p in ("on_demand", "spot")}
    assert all(o["gpu"].startswith("H100") for o in h100)
    per_gpu = [o["price_per_gpu_usd"] for o in h100]
    assert per_gpu == sorted(per_gpu)


def test_prices_filters_over_mixed_accelerators(tmp_path, provider_server, db_url):
    """GPUs, TPUs, Trainium/Inferentia in one store: `--gpu TPU`, `--vendor`, `--kind`."""
    from gpuradar.storage.db import open_database
    from gpuradar.storage.queries import OfferFilter, current_offers

    cfg = config(tmp_path, provider_server)
    result = crawl(cfg, db_url, "aws", "gcp", env={"GCP_API_KEY": "AIzaFAKE"})
    assert result["aws"]["status"] == result["gcp"]["status"] == "ok", result
    engine = open_database(db_url)

    def gpus_of(**flt: Any) -> set[str]:
        return {o["gpu"] for o in current_offers(engine, OfferFilter(**flt))}

    tpus = {"TPU-V2", "TPU-V3", "TPU-V4", "TPU-V5E", "TPU-V5P", "TPU-V6E", "TPU-7X"}
    assert gpus_of(vendors=["google"]) == tpus == gpus_of(kinds=["TPU"])
    assert gpus_of(vendors=["AWS"]) == {"TRAINIUM", "INFERENTIA", "INFERENTIA2"}
    assert gpus_of(kinds=["npu"]) == gpus_of(kinds=["ASIC"]) == {
        "TRAINIUM", "INFERENTIA", "INFERENTIA2"}
    assert "H100-SXM-80GB" in gpus_of(kinds=["GPU"]) and not tpus & gpus_of(kinds=["GPU"])
    assert gpus_of(vendors=["NVIDIA", "Google"]) >= tpus | {"H100-SXM-80GB", "L4"}
    assert gpus_of(gpus=["TPU-V5E"], vendors=["AWS"]) == set()  # both must hold
    # The command line: `--gpu TPU` and `--vendor google` list the same offers, cheapest
    # per chip-hour first; a vendor the catalog does not know is a usage error.
    by_kind = gpuradar_json("prices", "--gpu", "TPU", "--limit", "0", config=cfg, db_url=db_url)
    by_vendor = gpuradar_json("prices", "--vendor", "google", "--kind", "tpu", "--limit", "0",
                              config=cfg, db_url=db_url)
    assert [o["id"] for o in by_kind] == [o["id"] for o in by_vendor] and by_kind
    per_chip = [o["price_per_gpu_usd"] for o in by_kind]
    assert per_chip == sorted(per_chip)
    trainium = gpuradar_json("prices", "--gpu", "Trainium", "--pricing", "on-demand",
                             config=cfg, db_url=db_url)
    assert {(o["instance_type"], o["gpu_count"]) for o in trainium} == {("trn1.32xlarge", 16)}
    proc = gpuradar("prices", "--vendor", "Nokia", config=cfg, db_url=db_url)
    assert proc.returncode == 2 and "unknown vendor 'Nokia'" in proc.stderr
    proc = gpuradar("prices", "--kind", "FPGA", config=cfg, db_url=db_url)
    assert proc.returncode == 2 and "unknown accelerator kind 'FPGA'" in proc.stderr


def test_failed_or_empty_region_file_closes_nothing(tmp_path, provider_server, sqlite_url):
    from tests.routes.aws import ONDEMAND

    cfg = config(tmp_path, provider_server)
    assert crawl(cfg, sqlite_url, "aws")["aws"]["status"] == "ok"
    before = {o["id"] for o in stored_aws_offers(sqlite_url)}
    empty = {"manifest": {"serviceId": "ec2"}, "regions": {"US West (Oregon)": {}}}
    provider_server.route("GET", ONDEMAND + "US%20West%20%28Oregon%29/Linux/index.json",
                          lambda req: Reply(body=json.dumps(empty).encode()))
    provider_server.route("GET", ONDEMAND + "EU%20%28Stockholm%29/Linux/index.json",
                          lambda req: Reply(500, b"oops"))
    result = crawl(cfg, sqlite_url, "aws")
    assert result["aws"]["status"] == "partial" and result["aws"]["closed"] == 0
    assert "HTTP 500" in result["aws"]["error"]
    assert "us-west-2 has no entries" in result["_stderr"]
    assert {o["id"] for o in stored_aws_offers(sqlite_url)} == before


def capture_headers(server: ProviderServer) -> list[tuple[str, dict[str, str]]]:
    """Record the headers of every request the fixture server gets (its routes see none)."""
    seen: list[tuple[str, dict[str, str]]] = []
    base = server.httpd.RequestHandlerClass

    class Capturing(base):  # type: ignore[misc, valid-type]
        def _serve(self) -> None:
            seen.append((self.path, dict(self.headers.items())))
            super()._serve()

        do_GET = do_POST = _serve

    server.httpd.RequestHandlerClass = Capturing
    return seen


def test_credentials_add_signed_per_zone_spot_prices(tmp_path, provider_server, sqlite_url):
    seen = capture_headers(provider_server)
    cfg = config(tmp_path, provider_server)
    result = crawl(cfg, sqlite_url, "aws", env=FAKE_AWS)
    assert result["aws"]["status"] == "ok", result
    signed = [(p, h) for p, h in seen if p.startswith("/ec2/")]
    # DescribeRegions in us-east-1, then the enabled regions (two pages of spot history in
    # us-east-1), and in each the Capacity Blocks of 7 instance types and 3 UltraServers.
    assert sorted(p for p, _ in signed) == sorted(
        ["/ec2/eu-north-1/", "/ec2/us-east-1/", "/ec2/us-east-1/", "/ec2/us-east-1/",
         "/ec2/us-west-2/"] + [f"/ec2/{r}/" for r in ("eu-north-1", "us-east-1", "us-west-2")
                              for _ in range(10)])
    for path, headers in signed:
        region = path.split("/")[2]
        assert re.match(rf"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\d{{8}}/{region}/ec2/"
                        r"aws4_request, SignedHeaders=\S+, Signature=[0-9a-f]{64}$",
                        headers["Authorization"])
        assert re.match(r"\d{8}T\d{6}Z$", headers["X-Amz-Date"])
    stored = stored_aws_offers(sqlite_url)
    zones = {(o["zone"], o["instance_type"]): o for o in stored
             if o["zone"] and o["pricing"] == "spot"}
    assert set(zones) == {("us-east-1a", "g4dn.xlarge"), ("us-east-1c", "g4dn.xlarge"),
                          ("us-east-1a", "p5.48xlarge"), ("us-east-1b", "p5.48xlarge"),
                          ("us-east-1d", "g6e.xlarge"), ("us-east-1f", "g6f.large"),
                          ("us-west-2a", "g5g.xlarge"), ("us-west-2b", "p5.48xlarge"),
                          ("us-east-1a", "inf2.xlarge")}
    assert zones[("us-east-1a", "p5.48xlarge")]["price"] == pytest.approx(24.1121)
    assert zones[("us-east-1a", "inf2.xlarge")]["gpu"] == "INFERENTIA2"
    assert zones[("us-east-1a", "p5.48xlarge")]["attributes"]["interruption"] == "<5%"
    assert FAKE_AWS["AWS_SECRET_ACCESS_KEY"] not in result["_stderr"]
    # The Capacity Blocks the answer offers, stored apart from spot and on-demand: per zone,
    # with their terms, and shown as such by `prices --pricing capacity-block`.
    blocks = {o["zone"]: o for o in stored if o["pricing"] == "capacity_block"}
    assert sorted(blocks) == ["us-east-1a", "us-east-1b"]
    assert blocks["us-east-1a"]["price_per_gpu_usd"] == pytest.approx(39.33 / 8)
    assert blocks["us-east-1a"]["attributes"]["terms"]["start"] == "2024-12-10T11:30:00.000Z"
    table = gpuradar("prices", "--source", "aws", "--pricing", "capacity-block", config=cfg,
                     db_url=sqlite_url).stdout
    assert "capacity-block" in table and "24 h block, 2024-12-10 11:30 to 2024-12-11 11:30 UTC" \
        in " ".join(table.split())


@pytest.mark.parametrize("status", [403, 401])
def test_unauthorized_spot_history_makes_the_crawl_partial(tmp_path, provider_server,
                                                          sqlite_url, status):
    """EC2 refuses in its error envelope with 403 (not permitted) or 401 (credentials not
    accepted): the user reads EC2's own code and message, not just an HTTP status."""
    from tests.routes import aws as routes

    def refuse_oregon(req):
        if req.path == "/ec2/us-west-2/":
            return Reply(status, (FIX / "error_unauthorized.xml").read_bytes(),
                         content_type="text/xml")
        return routes.ec2_handler(req)

    cfg = config(tmp_path, provider_server)
    provider_server.route("POST", "/ec2/us-west-2/", refuse_oregon)
    result = crawl(cfg, sqlite_url, "aws", env=FAKE_AWS)
    assert result["aws"]["status"] == "partial" and result["aws"]["closed"] == 0
    assert "UnauthorizedOperation" in result["_stderr"]
    assert any(o["zone"] == "us-east-1a" for o in stored_aws_offers(sqlite_url))


def test_one_refused_instance_type_costs_a_region_nothing_else(tmp_path, provider_server,
                                                              sqlite_url):
    """The local EC2 answers like EC2 does for a type it does not know in a region (HTTP 400,
    `InvalidParameterValue` naming the type): the region is asked again without it."""
    from urllib.parse import parse_qs

    from tests.routes import aws as routes

    asked: list[list[str]] = []

    def oregon_lacks_b300(req):
        form = {k: v[0] for k, v in parse_qs(req.body.decode()).items()}
        if form.get("Action") == "DescribeSpotPriceHistory":
            types = [v for k, v in form.items() if k.startswith("InstanceType.")]
            asked.append(types)
            if "p6-b300.48xlarge" in types:
                return Reply(400, (FIX / "error_invalid_instance_type.xml").read_bytes(),
                             content_type=routes.XML)
        return routes.ec2_handler(req)

    cfg = config(tmp_path, provider_server)
    provider_server.route("POST", "/ec2/us-west-2/", oregon_lacks_b300)
    result = crawl(cfg, sqlite_url, "aws", env=FAKE_AWS)
    assert result["aws"]["status"] == "ok", result
    assert len(asked) == 2 and "p6-b300.48xlarge" not in asked[1]
    assert set(asked[0]) - set(asked[1]) == {"p6-b300.48xlarge"}
    assert "refuses p6-b300.48xlarge" in result["_stderr"]
    zones = {(o["zone"], o["instance_type"]) for o in stored_aws_offers(sqlite_url)}
    assert {("us-west-2a", "g5g.xlarge"), ("us-west-2b", "p5.48xlarge")} <= zones


def test_a_failed_locations_feed_makes_the_crawl_partial(tmp_path, provider_server,
                                                         sqlite_url):
    cfg = config(tmp_path, provider_server)
    assert crawl(cfg, sqlite_url, "aws")["aws"]["status"] == "ok"
    before = {o["id"] for o in stored_aws_offers(sqlite_url)}
    provider_server.route("GET", "/locations/1.0/aws/current/locations.json",
                          lambda req: Reply(503, b"unavailable"))
    result = crawl(cfg, sqlite_url, "aws")
    assert result["aws"]["status"] == "partial" and result["aws"]["closed"] == 0
    assert "locations feed failed" in result["_stderr"]
    # The built-in table still names the four regions: nothing was lost.
    assert {o["id"] for o in stored_aws_offers(sqlite_url)} == before


def test_gpuradar_parse_command_reads_a_saved_file():
    proc = gpuradar("parse", "aws", str(FIX / "spot_history_us-west-2.xml"))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["zone"], r["instance_type"], r["price_usd"]) for r in lines] == [
        ("us-west-2a", "g5g.xlarge", 0.1668), ("us-west-2b", "p5.48xlarge", 25.34)]


def test_region_table_names_are_unique():
    assert len(set(REGIONS.values())) == len(REGIONS)


def test_replayed_recordings_land_in_storage(sqlite_url):
    import gpuradar as package

    recordings = Path(package.__file__).parent / "recordings"
    proc = gpuradar("crawl", "gcp", "--replay", str(recordings), "--json",
                    db_url=sqlite_url, env={**NO_AWS, "GCP_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    result = {r["source"]: r for r in json.loads(proc.stdout)}
    assert (result["gcp"]["status"], result["gcp"]["items"]) == ("ok", 15)
    # AWS's recording is made of public captures of its feeds (gpuradar/recordings/aws/
    # provenance.json): it replays without AWS credentials, dated at its capture
    proc = gpuradar("crawl", "aws", "--replay", str(recordings), "--json", db_url=sqlite_url,
                    env=NO_AWS)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "ok"
    offers = gpuradar_json("prices", "--source", "aws", "--limit", "0", db_url=sqlite_url)
    assert offers and {(o["captured"], o["replayed"]) for o in offers} == {("2026-08-09", True)}
    # Its Spot Advisor feed is the real one of 2025-06-28 (alexei-led/spotinfo): every spot
    # offer the feed advises on carries its band, dated by that capture, not the others'
    spot = {o["instance_type"]: o["attributes"] for o in offers if o["pricing"] == "spot"}
    assert spot["p5.48xlarge"]["interruption"] == ">20%"
    assert spot["p5.48xlarge"]["savings_pct"] == 52
    assert spot["p4de.24xlarge"]["interruption"] == "<5%"
    banded = [a for a in spot.values() if "interruption" in a]
    assert len(banded) > 40 and all(
        (a["interruption_source"], a["interruption_as_of"]) == ("AWS Spot Advisor", "2025-06-28")
        for a in banded)
