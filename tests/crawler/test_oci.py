"""OCI: cost-estimator shapes joined to the price list, on recorded answers in the providers'
formats (the price list partly a real capture), and a real crawl into storage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.oci import PRICE_MODEL, OciSpider, gpu_of_shape, shape_name
from gpuradar.storage.queries import OfferFilter, current_offers
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response
from tests.provider_server import serve_standard

FIX = FIXTURES / "oci"
SHAPES_URL = "https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json"
PRICES_URL = "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD"
GPU_SHAPES = {
    "BM.GPU.H100.8", "BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.GPU.MI300X.8", "BM.GPU.MI355X.8",
    "BM.GPU.GB200.4", "BM.GPU.GB300.4", "BM.GPU.B300.8", "BM.GPU.RTXPRO.8", "VM.GPU3.1",
    "VM.GPU3.2", "VM.GPU3.4", "BM.GPU3.8", "VM.GPU2.1", "BM.GPU2.2", "VM.GPU.A10.1",
    "VM.GPU.A10.2", "BM.GPU.A10.4", "BM.GPU.L40S.4", "BM.GPU.H200.8", "BM.GPU.B200.8",
}


def spider(**options: Any) -> OciSpider:
    s = OciSpider()
    s.settings = Settings({"GPURADAR_SOURCES": {"oci": options}})
    return s


def load(name: str) -> dict[str, Any]:
    return json.loads((FIX / name).read_text())


def offers(shapes: dict | None = None, prices: dict | None = None,
           **options: Any) -> dict[tuple[str, str], PriceItem]:
    out = list(spider(**options).offers(shapes or load("shapes.json"),
                                        prices or load("products_usd.json"), PRICES_URL))
    assert all(isinstance(i, PriceItem) for i in out)
    return {(i.instance_type, i.pricing): i for i in out}


def test_gpu_shapes_join_price_list_parts():
    got = offers()
    h100 = got[("BM.GPU.H100.8", "on_demand")]
    # "GPU Per Hour" part B98415 ($10, the real capture) x 8 GPUs.
    assert h100.price == 80.0 and h100.currency == "USD" and h100.gpu_count == 8
    assert (h100.gpu, h100.gpu_memory_gb, h100.vcpus, h100.memory_gb) == ("H100", 80, 224, 2048)
    assert h100.region == "global" and h100.available is None
    assert h100.attributes["parts"] == [{"part": "B98415", "metric": "GPU Per Hour",
                                         "unit_price": 10.0, "qty": 8}]
    assert h100.attributes["price_list_updated"] == "2026-08-14T09:09:55.872Z"
    assert got[("BM.GPU.MI300X.8", "on_demand")].price == 48.0
    assert got[("VM.GPU.A10.2", "on_demand")].price == 4.0


def test_every_gpu_shape_and_nothing_else(caplog):
    got = offers()
    assert {shape for shape, _ in got} == GPU_SHAPES  # no DenseIO/Standard CPU shapes
    assert all(i.gpu_count > 0 and i.price > 0 for i in got.values())
    # CPU shapes are not GPU offers gpuradar lacks: not even reported as uncatalogued.
    assert "catalog" not in caplog.text


def test_per_gpu_memory_comes_from_the_catalog_not_the_estimator_totals():
    got = offers()
    # The estimator reports totals (320 GB for 8 x A100 40 GB) ...
    assert got[("BM.GPU4.8", "on_demand")].gpu_memory_gb == 40
    assert got[("BM.GPU.A100-v2.8", "on_demand")].gpu_memory_gb == 80
    # ... but a per-GPU figure for MI355X (288) and a wrong one for GB300 (278 for 4).
    assert got[("BM.GPU.MI355X.8", "on_demand")].gpu_memory_gb == 288
    assert got[("BM.GPU.GB300.4", "on_demand")].gpu_memory_gb == 288
    assert got[("VM.GPU3.1", "on_demand")].gpu_memory_gb == 16
    # 32 GB for 2 x V100 is 16 GB each, not the 32 GB V100.
    assert got[("VM.GPU3.2", "on_demand")].gpu_memory_gb == 16
    # A GPU the catalog does not know keeps the estimator's total / count, to 0.1 GB.
    assert OciSpider.gpu_memory("Next Accelerator", 8, 2300.0) == 287.5


def test_newest_shapes_get_their_documented_cpus_and_a_clean_name():
    got = offers()
    gb200 = got[("BM.GPU.GB200.4", "on_demand")]
    assert gb200.price == 64.0  # 4 x $16
    assert gb200.vcpus == 144  # two 72-core Arm Grace CPUs: 1 vCPU per OCPU
    assert gb200.attributes["shape_label"] == "BM.GPU.GB200.4 (NVL72)"
    # a shape whose name is already clean carries no second label
    assert "shape_label" not in got[("BM.GPU.B300.8", "on_demand")].attributes
    b300 = got[("BM.GPU.B300.8", "on_demand")]
    assert (b300.price, b300.vcpus, b300.memory_gb) == (120.0, 256, 4096)
    assert shape_name("BM.GPU.GB300.4 (NVL72)") == "BM.GPU.GB300.4"
    assert [gpu_of_shape(n) for n in ("VM.GPU2.1", "VM.GPU3.4", "BM.GPU4.8", "BM.GPU.RTXPRO.8",
                                      "VM.Standard.E4.Flex")] == [
        "P100", "V100", "A100", "RTXPRO", None]


def test_preemptible_spot_is_half_of_on_demand_and_marked_derived():
    got = offers()
    spot = got[("VM.GPU3.1", "spot")]
    assert spot.price == pytest.approx(2.95 / 2)
    assert spot.attributes["derived"] is True
    assert "derived" not in got[("VM.GPU3.1", "on_demand")].attributes
    assert ("BM.GPU.H100.8", "spot") not in got  # allowPreemptible false
    assert {s for s, p in got if p == "spot"} == {
        "VM.GPU3.1", "VM.GPU3.2", "VM.GPU3.4", "VM.GPU2.1", "VM.GPU.A10.1", "VM.GPU.A10.2"}


def test_ocpu_and_memory_parts_multiply_their_quantities():
    shapes = load("shapes.json")
    shape = next(s for s in shapes["items"] if s["name"] == "VM.GPU3.1")
    shape["products"] = [{"partNumber": "B93114", "qty": 90, "type": {"value": "memory"}},
                         {"partNumber": "B93113", "qty": 6, "type": {"value": "ocpu"}}]
    item = offers(shapes)[("VM.GPU3.1", "on_demand")]
    assert item.price == pytest.approx(6 * 0.025 + 90 * 0.0015)  # OCPU Per Hour, Gigabyte
    # The OCPUs are the ocpu part's quantity, whichever part the estimator lists first.
    assert (item.attributes["ocpus"], item.vcpus) == (6, 12)


def test_the_requested_currency_among_several_to_the_micro_unit():
    """A price list answering several currencies (the API without `currencyCode`) prices in
    the requested one; non-USD prices have more decimals, the sum keeps six."""
    prices = load("products_usd.json")
    for part in prices["items"]:  # constructed: SAR at 3.7504 per USD, listed before USD
        [usd] = part["currencyCodeLocalizations"]
        sar = round(usd["prices"][0]["value"] * 3.7504, 8)
        part["currencyCodeLocalizations"] = [
            {"currencyCode": "SAR", "prices": [{"model": PRICE_MODEL, "value": sar}]}, usd]
    assert offers(prices=prices)[("BM.GPU.H100.8", "on_demand")].price == 80.0
    shapes = load("shapes.json")
    shape = next(s for s in shapes["items"] if s["name"] == "VM.GPU2.1")  # 12 OCPUs, 72 GB
    shape["products"] = [{"partNumber": "B93113", "qty": 12, "type": {"value": "ocpu"}},
                         {"partNumber": "B93114", "qty": 72, "type": {"value": "memory"}}]
    got = offers(shapes, prices, currency="sar")
    p100 = got[("VM.GPU2.1", "on_demand")]
    assert (p100.price, p100.currency) == (1.530163, "SAR")  # 12 x 0.09376 + 72 x 0.0056256
    assert got[("VM.GPU2.1", "spot")].price in (0.765081, 0.765082)  # half, to the micro-unit


def test_lookalike_parts_never_price_a_shape(caplog):
    got = offers()
    # The Cloud@Customer L40S twins ($3.50, $2.90) are not the public L40S part.
    assert got[("BM.GPU.L40S.4", "on_demand")].price == 14.0
    shapes = load("shapes.json")
    by_name = {s["name"]: s for s in shapes["items"]}
    by_name["BM.GPU.H100.8"]["products"][0]["partNumber"] = "B111824"  # AI Enterprise licence
    by_name["BM.GPU.A10.4"]["products"][0]["partNumber"] = "B108806"  # VMware node, per node
    by_name["BM.GPU.H200.8"]["products"][0]["partNumber"] = "B000000"  # not in the price list
    got = offers(shapes)
    assert not {("BM.GPU.H100.8", "on_demand"), ("BM.GPU.A10.4", "on_demand"),
                ("BM.GPU.H200.8", "on_demand")} & set(got)
    assert "BM.GPU.H100.8 skipped: part B111824 is 'OCI - NVIDIA AI Enterprise - H100'" \
        in caplog.text
    assert "BM.GPU.H200.8 skipped: part B000000 is not in the price list" in caplog.text
    assert len(got) == len(offers()) - 3


def test_hidden_inactive_and_unreadable_shapes_are_not_offers(caplog):
    shapes = load("shapes.json")
    by_name = {s["name"]: s for s in shapes["items"]}
    by_name["BM.GPU.H200.8"]["hidden"] = True
    by_name["BM.GPU.B200.8"]["status"] = "DEPRECATED"
    by_name["BM.GPU.B300.8"]["status"] = None  # none stated, or one sorting before ACTIVE
    by_name["BM.GPU.MI355X.8"]["status"] = "ABANDONED"
    by_name["BM.GPU.L40S.4"]["gpuQty"] = None
    by_name["VM.GPU.A10.1"]["name"] = "VM.GPU.A10.Flex"
    names = {s for s, _ in offers(shapes)}
    assert not {"BM.GPU.H200.8", "BM.GPU.B200.8", "BM.GPU.B300.8", "BM.GPU.MI355X.8",
                "BM.GPU.L40S.4", "VM.GPU.A10.Flex"} & names
    assert "BM.GPU.H100.8" in names
    # A GPU shape it cannot read is reported as uncatalogued, with what it lacks.
    assert [r.getMessage() for r in caplog.records if "catalog" in r.getMessage()] == [
        "oci: VM.GPU.A10.Flex is not in gpuradar's catalog (GPU model not recognised from the "
        "shape name); reported as uncatalogued, not stored",
        "oci: BM.GPU.L40S.4 is not in gpuradar's catalog (the estimator gives no GPU count); "
        "reported as uncatalogued, not stored"]


def test_regions_option_repeats_the_offers_per_region():
    out = list(spider(regions=["us-ashburn-1", "eu-frankfurt-1"]).offers(
        load("shapes.json"), load("products_usd.json"), PRICES_URL))
    h100 = [i for i in out if i.instance_type == "BM.GPU.H100.8"]
    assert sorted(i.region for i in h100) == ["eu-frankfurt-1", "us-ashburn-1"]
    assert {i.price for i in h100} == {80.0}


def test_renamed_fields_are_clear_errors():
    prices = load("products_usd.json")
    prices["items"][3]["part_number"] = prices["items"][3].pop("partNumber")
    with pytest.raises(ParseError, match=r"oci:.*'partNumber' is missing.*items\[3\]"):
        offers(prices=prices)
    shapes = load("shapes.json")
    shapes["items"][3]["gpuCount"] = shapes["items"][3].pop("gpuQty")
    with pytest.raises(ParseError, match=r"'gpuQty' is missing.*items\[3\] \(BM.GPU4.8\)"):
        offers(shapes)
    prices = load("products_usd.json")
    for item in prices["items"]:
        item["localizations"] = item.pop("currencyCodeLocalizations")
    with pytest.raises(ParseError, match="'currencyCodeLocalizations' is missing"):
        offers(prices=prices)
    # An empty price list must not become a crawl that closes every offer.
    with pytest.raises(ParseError, match="'items' priced no GPU shape"):
        offers(prices={"lastUpdated": "2026-08-14T09:09:55.872Z", "items": []})


def test_parse_file_tells_the_two_documents_apart_in_any_order(caplog):
    s = spider()
    assert list(s.parse_file(response(FIX / "products_usd.json", PRICES_URL))) == []
    assert "give the shapes.json too" in caplog.text  # one half alone: nothing to join
    out = list(s.parse_file(response(FIX / "shapes.json", SHAPES_URL)))
    assert len(out) == 27
    with pytest.raises(ParseError, match="neither a cost-estimator shape nor a price-list"):
        list(spider().parse_file(response(b'{"items": [{"x": 1}]}', SHAPES_URL)))


def test_gpuradar_parse_on_both_documents_and_on_the_real_capture():
    proc = gpuradar("parse", "oci", str(FIX / "shapes.json"), str(FIX / "products_usd.json"))
    assert proc.returncode == 0, proc.stderr
    rows = {(r["instance_type"], r["pricing"]): r
            for r in map(json.loads, proc.stdout.splitlines())}
    assert rows[("BM.GPU4.8", "on_demand")]["gpu"] == "A100-SXM-40GB"
    assert rows[("BM.GPU.A100-v2.8", "on_demand")]["gpu"] == "A100-SXM-80GB"
    assert rows[("BM.GPU.RTXPRO.8", "on_demand")]["gpu"] == "RTX-PRO-6000"
    assert rows[("VM.GPU2.1", "spot")]["gpu"] == "P100"
    assert rows[("BM.GPU.H100.8", "on_demand")]["price_per_gpu_usd"] == 10.0
    # The verbatim real price-list excerpt prices the shapes whose parts it holds.
    proc = gpuradar("parse", "oci", str(FIX / "shapes.json"),
                    str(FIX / "products_usd_real_excerpt.json"))
    assert proc.returncode == 0, proc.stderr
    real = {r["instance_type"]: r for r in map(json.loads, proc.stdout.splitlines())
            if r["pricing"] == "on_demand"}
    assert real["BM.GPU.H200.8"]["price"] == 80.0 and real["BM.GPU.B200.8"]["price"] == 112.0
    assert "BM.GPU4.8" not in real  # its part (B92740) is not in the excerpt
    assert "BM.GPU4.8 skipped: part B92740 is not in the price list" in " ".join(
        proc.stderr.split())


def test_gpuradar_parse_names_a_renamed_field(tmp_path):
    shapes = load("shapes.json")
    for item in shapes["items"]:
        item["parts"] = item.pop("products")
    bad = tmp_path / "shapes.json"
    bad.write_text(json.dumps(shapes))
    proc = gpuradar("parse", "oci", str(FIX / "products_usd.json"), str(bad))
    assert proc.returncode == 1
    assert "oci: unexpected response shape: field 'products' is missing (in shapes items[2] " \
        "(BM.GPU.H100.8))" in " ".join(proc.stderr.split())


def test_crawl_into_storage(tmp_path, provider_server, db_url, engine):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "oci", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["unknown_gpus"]) == ("ok", 27, [])
    assert [(r.method, r.path, r.query) for r in provider_server.requests] == [
        ("GET", "/a/ocom/docs/cloudestimator2/data/shapes.json", {}),
        ("GET", "/pls/apex/cetools/api/v1/products/", {"currencyCode": ["USD"]})]
    stored = current_offers(engine, OfferFilter(sources=["oci"]))
    assert len(stored) == 27
    h100 = [o for o in stored if o["gpu"].startswith("H100")]
    assert [(o["instance_type"], o["region"], o["price_per_gpu_usd"], o["available"])
            for o in h100] == [("BM.GPU.H100.8", "global", 10.0, None)]
    spot = [o for o in stored if o["pricing"] == "spot"]
    assert len(spot) == 6 and all(o["attributes"]["derived"] for o in spot)
    assert spot[0]["instance_type"] == "VM.GPU2.1" and spot[0]["price_usd"] == 0.6375


def test_prices_table_marks_spot_derived_and_sources_lists_oci(tmp_path, provider_server,
                                                               sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    assert gpuradar("crawl", "oci", config=cfg, db_url=sqlite_url).returncode == 0
    table = gpuradar("prices", "--source", "oci", "--pricing", "spot", config=cfg,
                     db_url=sqlite_url, env={"COLUMNS": "200"})
    line = next(ln for ln in table.stdout.splitlines() if "VM.GPU2.1" in ln)
    assert "global" in line and "$0.6375" in line and "derived" in line
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["oci"]["enabled"] is True
    assert rows["oci"]["why"].startswith("public endpoint (region 'global'); regions need OCI "
                                         "credentials: OCI_CLI_TENANCY")
    assert (rows["oci"]["last_status"], rows["oci"]["last_items"]) == ("ok", 27)


def test_a_price_entry_that_is_not_an_object_is_passed_over():
    """A part's `prices` holding an entry that is not a price object (null, a shape change of
    one entry) costs nothing: the PAY_AS_YOU_GO price after it is still read."""
    prices = load("products_usd.json")
    part = next(p for p in prices["items"] if p["partNumber"] == "B98415")
    for loc in part["currencyCodeLocalizations"]:
        loc["prices"].insert(0, None)
    assert offers(prices=prices)[("BM.GPU.H100.8", "on_demand")].price == 80.0


# -- places, with an API key --------------------------------------------------------------
TENANCY = "ocid1.tenancy.oc1..aaaaaaaatest"
USER = "ocid1.user.oc1..aaaaaaaatest"
FINGERPRINT = "20:3b:97:13:55:1c:1d:a2:5a:5e:ab:6d:49:02:65:5e"


def rsa_key(tmp_path) -> tuple[Any, Any]:
    """A fresh API key: (its PEM file, its public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "oci_api_key.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path, key.public_key()


def verify_oci_signature(public_key: Any, method: str, target: str,
                         headers: dict[str, str]) -> None:
    """Check a request's Authorization as OCI does: keyId, signed headers, RSA-SHA256."""
    import base64
    import re

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    auth = headers["authorization"]
    fields = dict(re.findall(r'(\w+)="([^"]*)"', auth))
    assert auth.startswith("Signature ")
    assert fields["keyId"] == f"{TENANCY}/{USER}/{FINGERPRINT}"
    assert (fields["algorithm"], fields["headers"], fields["version"]) == (
        "rsa-sha256", "date (request-target) host", "1")
    text = (f"date: {headers['date']}\n(request-target): {method.lower()} {target}\n"
            f"host: {headers['host']}")
    public_key.verify(base64.b64decode(fields["signature"]), text.encode(),
                      padding.PKCS1v15(), hashes.SHA256())  # raises if it does not verify


def test_the_signature_verifies_with_the_public_key(tmp_path):
    from cryptography.exceptions import InvalidSignature

    from gpuradar.crawler.signing import oci_headers

    pem, public = rsa_key(tmp_path)
    url = "https://iaas.us-ashburn-1.oraclecloud.com/20160918/shapes?compartmentId=" + TENANCY
    headers = oci_headers(method="GET", url=url, tenancy=TENANCY, user=USER,
                          fingerprint=FINGERPRINT, private_key_pem=pem.read_bytes())
    assert headers["host"] == "iaas.us-ashburn-1.oraclecloud.com"
    assert headers["date"].endswith(" GMT")
    target = "/20160918/shapes?compartmentId=" + TENANCY
    verify_oci_signature(public, "GET", target, headers)
    with pytest.raises(InvalidSignature):  # another request target: not this signature
        verify_oci_signature(public, "GET", "/20160918/shapes", headers)


def test_with_an_api_key_offers_carry_the_regions_that_list_their_shape(
        tmp_path, provider_server, sqlite_url):
    from urllib.parse import urlencode

    from tests.provider_server import Reply, fixture

    pem, public = rsa_key(tmp_path)
    base = provider_server.base
    subs = f"/20160918/tenancies/{TENANCY}/regionSubscriptions"
    provider_server.route("GET", subs, lambda req: Reply(
        body=fixture("oci/region_subscriptions.json")))

    def ashburn(req):
        if req.query.get("page") == ["p2"]:
            return Reply(body=fixture("oci/list_shapes_us-ashburn-1_page2.json"))
        return Reply(body=fixture("oci/list_shapes_us-ashburn-1_page1.json"),
                     headers={"opc-next-page": "p2"})

    provider_server.route("GET", "/us-ashburn-1/20160918/shapes", ashburn)
    provider_server.route("GET", "/eu-frankfurt-1/20160918/shapes", lambda req: Reply(
        body=fixture("oci/list_shapes_eu-frankfurt-1.json")))
    endpoints = {**serve_standard(provider_server, only=["oci"]),
                 "oci.region_subscriptions": base + "/20160918/tenancies/{tenancy}/"
                                                    "regionSubscriptions",
                 "oci.compute_shapes": base + "/{region}/20160918/shapes"}
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"oci": {"tenancy": TENANCY, "user": USER,
                                        "fingerprint": FINGERPRINT, "key_file": str(pem),
                                        "region": "us-ashburn-1"}})
    proc = gpuradar("crawl", "oci", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    assert str(pem) not in proc.stderr and "BEGIN" not in proc.stderr
    api = [r for r in provider_server.requests if r.path.startswith(("/2016", "/us", "/eu"))]
    assert [(r.path, r.query.get("page")) for r in api] == [
        (subs, None), ("/us-ashburn-1/20160918/shapes", None),
        ("/us-ashburn-1/20160918/shapes", ["p2"]), ("/eu-frankfurt-1/20160918/shapes", None)]
    for r in api:  # every API request signed with the tenancy's key, as the SDK signs it
        query = urlencode({k: v[0] for k, v in r.query.items()})
        verify_oci_signature(public, r.method, r.path + (f"?{query}" if query else ""),
                             r.headers)
    rows = gpuradar_json("prices", "--source", "oci", config=cfg, db_url=sqlite_url)
    placed = sorted((r["instance_type"], r["region"], r["pricing"]) for r in rows)
    assert placed == [
        ("BM.GPU.B200.8", "eu-frankfurt-1", "on_demand"),
        ("BM.GPU.H100.8", "us-ashburn-1", "on_demand"),
        ("VM.GPU.A10.1", "eu-frankfurt-1", "on_demand"),
        ("VM.GPU.A10.1", "eu-frankfurt-1", "spot"),
        ("VM.GPU.A10.1", "us-ashburn-1", "on_demand"),
        ("VM.GPU.A10.1", "us-ashburn-1", "spot")]
    # A region rule now tells where: H100 is had in us-ashburn-1, not in Europe.
    us = gpuradar_json("rules", "test", "H100 under $11/h region us-*", config=cfg,
                       db_url=sqlite_url)
    eu = gpuradar_json("rules", "test", "H100 under $11/h region eu-*", config=cfg,
                       db_url=sqlite_url)
    assert (us[0]["matches"], eu[0]["matches"]) == (1, 0)
    sources = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert sources["oci"]["why"] == "credentials found: shapes placed in the tenancy's regions"


def test_without_credentials_sources_says_regions_need_them(tmp_path, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", scrapy={"DOWNLOAD_DELAY": 0})
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert "regions need OCI credentials" in rows["oci"]["why"]


def test_an_unreadable_key_file_is_one_line_and_stores_nothing(tmp_path, provider_server,
                                                              sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"oci": {"tenancy": TENANCY, "user": USER,
                                        "fingerprint": FINGERPRINT,
                                        "key_file": str(tmp_path / "missing.pem"),
                                        "region": "us-ashburn-1"}})
    proc = gpuradar("crawl", "oci", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"]) == ("failed", 0), result
    assert "cannot use the API key file (sources.oci.key_file or OCI_CLI_KEY_FILE): No " \
           "such file or directory; nothing crawled" in result["error"]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "missing.pem" not in proc.stderr + proc.stdout
    assert provider_server.requests == []  # nothing asked, so nothing closed
