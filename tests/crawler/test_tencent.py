"""Tencent Cloud: TC3 signing against Tencent's worked example, the parser on documented
response shapes, and a real crawl of the fixture server into storage."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from scrapy.settings import Settings

from gpuradar.core.units import region_matches
from gpuradar.crawler.parsing import ParseFailed, parse_files
from gpuradar.crawler.signing import tencent_tc3_headers
from gpuradar.crawler.spiders.tencent import FAMILIES, TencentSpider
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, callback_spider, response, spider_settings
from tests.provider_server import Reply, Request, serve_standard

FIX = FIXTURES / "tencent"
SECRET_KEY = "tencent-secret-never-shown-0123456789"
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}


def test_tc3_signature_matches_tencents_worked_example():
    payload = ('{"Limit": 1, "Filters": [{"Values": ["\\u672a\\u547d\\u540d"], '
               '"Name": "instance-name"}]}')
    headers = tencent_tc3_headers(
        secret_id="AKID**********************0123456789EXAMPLE",
        secret_key="Gu5t9xGARNpq86cd98joQYCN3EXAMPLE", service="cvm",
        host="cvm.tencentcloudapi.com", action="DescribeInstances", version="2017-03-12",
        region="ap-guangzhou", payload=payload, timestamp=1551113065,
        content_type="application/json; charset=utf-8")  # the example's content type
    assert headers["Authorization"] == (
        "TC3-HMAC-SHA256 Credential=AKID**********************0123456789EXAMPLE/2019-02-25/cvm/"
        "tc3_request, SignedHeaders=content-type;host, "
        "Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168")
    assert headers["X-TC-Timestamp"] == "1551113065" and headers["X-TC-Region"] == "ap-guangzhou"


def project_settings(**options) -> Settings:
    return spider_settings("tencent", **{"site": "china", **options})


def parsed(name: str, **options) -> list[dict]:
    return list(parse_files("tencent", [FIX / name], project_settings(**options)))


def edited_answer(tmp_path: Path, name: str, edit: Callable[[dict], None]) -> Path:
    """A copy of a fixture answer whose first quota row `edit` changes (values only)."""
    data = json.loads((FIX / name).read_text())
    edit(data["Response"]["InstanceTypeQuotaSet"][0])
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False))
    return path


def test_parse_on_demand_answer():
    items = {(i["zone"], i["instance_type"]): i for i in parsed(
        "zone_instance_config_postpaid_gpu.json")}
    assert ("ap-guangzhou-6", "S5.LARGE8") not in items  # not a GPU type
    t4 = items[("ap-guangzhou-3", "GN7.2XLARGE32")]
    assert (t4["gpu"], t4["gpu_count"], t4["price"], t4["currency"]) == ("T4", 1.0, 8.68, "CNY")
    assert t4["region"] == "ap-guangzhou" and t4["pricing"] == "on_demand"
    assert t4["available"] is True and (t4["vcpus"], t4["memory_gb"]) == (8, 32)
    assert t4["attributes"]["unit_price_second_step"] == 7.81
    assert t4["attributes"]["unit_price_third_step"] == 6.94
    quarter = items[("ap-guangzhou-3", "GN7.LARGE20")]
    assert quarter["gpu"] == "T4" and quarter["gpu_count"] == 0.25
    a100 = items[("ap-guangzhou-6", "GT4.41XLARGE948")]
    assert a100["gpu"] == "A100-SXM-40GB" and a100["gpu_count"] == 8
    assert a100["available"] is False and a100["attributes"]["sold_out_reason"] == "资源售罄"
    h800 = items[("ap-shanghai-5", "HCCPNV5.28XLARGE1920")]
    assert h800["gpu"] == "H800-SXM-80GB" and h800["region"] == "ap-shanghai"
    assert h800["price_per_gpu_usd"] == pytest.approx(h800["price_usd"] / 8)


def test_on_demand_price_is_the_list_price_even_with_an_account_discount(tmp_path):
    """An account with a discount gets UnitPriceDiscount below UnitPrice (Discount "80.000000"
    = 80 %); the on-demand offer is the list price, the discounted one is kept beside it."""
    def discounted(row: dict) -> None:
        row["Price"].update(Discount="80.000000", UnitPriceDiscount=6.94)

    path = edited_answer(tmp_path, "zone_instance_config_postpaid_gpu.json", discounted)
    t4 = next(i for i in parse_files("tencent", [path], project_settings())
              if (i["zone"], i["instance_type"]) == ("ap-guangzhou-3", "GN7.2XLARGE32"))
    assert t4["pricing"] == "on_demand" and t4["price"] == 8.68
    assert t4["attributes"]["unit_price_discount"] == 6.94
    # it is the on-demand price itself: no second "on-demand price" beside it
    assert "on_demand_unit_price" not in t4["attributes"]


@pytest.mark.parametrize(("zone", "region", "mainland"), [
    ("ap-guangzhou-3", "ap-guangzhou", True),
    ("ap-shanghai-fsi-1", "ap-shanghai-fsi", True),  # a finance zone: its region has a dash
    ("ap-hongkong-2", "ap-hongkong", False),
    ("ap-singapore-1", "ap-singapore", False),
    ("eu-frankfurt-1", "eu-frankfurt", False),
])
def test_region_of_a_zone_and_the_mainland_alias(tmp_path, zone, region, mainland):
    """A saved answer's offer gets the region its zone belongs to, and `--region mainland`
    keeps it exactly when that region is in mainland China (Hong Kong and abroad are not)."""
    path = edited_answer(tmp_path, "zone_instance_config_spotpaid_gpu.json",
                         lambda row: row.update(Zone=zone))
    offer = next(i for i in parse_files("tencent", [path], project_settings())
                 if i["zone"] == zone)
    assert offer["region"] == region
    assert region_matches(offer["region"], zone, ["mainland"], "tencent") is mainland


def test_parse_spot_answer_uses_the_spot_price_and_usd_option():
    items = parsed("zone_instance_config_spotpaid_gpu.json", currency="usd")
    t4 = next(i for i in items if i["zone"] == "ap-guangzhou-3")
    assert t4["pricing"] == "spot" and t4["price"] == 1.74 and t4["currency"] == "USD"
    assert t4["attributes"]["on_demand_unit_price"] == 8.68
    assert "unit_price_discount" not in t4["attributes"]  # the spot price is the price
    assert t4["price_usd"] == 1.74
    a10 = next(i for i in items if i["instance_type"] == "PNV4.7XLARGE116")
    assert a10["available"] is False


def test_an_answer_gives_only_the_zones_of_the_region_asked():
    """Each offer is stored under the region it was asked for: zones of another region in
    an answer (the fixture holds ap-guangzhou's and ap-shanghai's) are left out."""
    spider = callback_spider(TencentSpider, site="china")
    answer = response(FIX / "zone_instance_config_postpaid_gpu.json")
    for region, zones in (("ap-shanghai", {"ap-shanghai-5"}),
                          ("ap-guangzhou", {"ap-guangzhou-3", "ap-guangzhou-6"})):
        items = list(spider.parse(answer, region=region))
        assert {i.zone for i in items} == zones
        assert {i.region for i in items} == {region}


def test_documented_non_gpu_example_yields_nothing_and_errors_are_named():
    assert parsed("tccli_example_postpaid.json") == []
    with pytest.raises(ParseFailed, match="AuthFailure.SignatureFailure"):
        parsed("error_signature.json")


@pytest.mark.parametrize(("edit", "error"), [
    (lambda row: row.pop("Zone"), "'Zone' is missing"),
    # GB: the other ChargeUnit of Tencent's ItemPrice (SDK docs, traffic): never an hourly price
    (lambda row: row["Price"].update(ChargeUnit="GB"), "ChargeUnit.*'GB', expected 'HOUR'"),
    (lambda row: row["Price"].update(ChargeUnit="MONTH"), "ChargeUnit.*'MONTH', expected 'HOUR'"),
])
def test_changed_answer_is_a_clear_error(tmp_path, edit, error):
    """A renamed field or a price per another unit stops the parse with the field named."""
    bad = edited_answer(tmp_path, "zone_instance_config_postpaid_gpu.json", edit)
    with pytest.raises(ParseFailed, match=error):
        list(parse_files("tencent", [bad], project_settings()))


def test_status_names_the_settings(monkeypatch):
    monkeypatch.delenv("TENCENTCLOUD_SECRET_ID", raising=False)
    monkeypatch.delenv("TENCENTCLOUD_SECRET_KEY", raising=False)
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {}}))
    assert not enabled and "TENCENTCLOUD_SECRET_ID" in why and "secret_key" in why
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDx")
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {}}))
    assert not enabled and "TENCENTCLOUD_SECRET_KEY" in why     # half a key is no key
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "y")
    # The answers name no currency: without the account's site the source does not run
    # (it used to store an international account's USD prices as CNY).
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {}}))
    assert not enabled and "sources.tencent.site" in why and "intl" in why
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {"tencent": {
        "site": "china"}}}))
    assert enabled and "CNY" in why and "all regions (DescribeRegions)" in why
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {"tencent": {
        "site": "intl"}}}))
    assert enabled and "USD" in why
    enabled, why = TencentSpider.status(Settings({"GPURADAR_SOURCES": {"tencent": {
        "site": "china", "regions": ["ap-guangzhou"]}}}))
    assert enabled and "ap-guangzhou" in why and "DescribeRegions" not in why


def test_demo_says_tencent_needs_credentials():
    """`gpuradar demo` has no Tencent sample and tells how to get offers: configure a key."""
    proc = gpuradar("demo", env={"COLUMNS": "200"})  # one line per message
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "tencent" in x)
    assert line.startswith("no public sample:") and "configure credentials" in line


def config(tmp_path: Path, server, **tencent) -> Path:
    return write_config(tmp_path / "config.yaml", endpoints=serve_standard(server),
                        scrapy=FAST, sources={"tencent": {"secret_id": "AKIDtest",
                                                          "secret_key": SECRET_KEY,
                                                          "site": "china", **tencent}})


def test_crawl_into_storage_shows_cny_and_usd(tmp_path, provider_server, db_url):
    cfg = config(tmp_path, provider_server)
    proc = gpuradar("crawl", "fx", "tencent", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    result = {r["source"]: r for r in json.loads(proc.stdout)}["tencent"]
    # ap-guangzhou: 4 on-demand + 2 spot; ap-shanghai and ap-mumbai are UNAVAILABLE. The
    # fixture answers every region with zones of both regions: the spider keeps only the
    # zones of the region it asked about.
    assert result["status"] == "ok" and result["items"] == 6, (result, proc.stderr[-3000:])
    bodies = [r.json() for r in provider_server.requests if r.path == "/"]
    assert {} in bodies and len(bodies) == 1 + 2  # regions, then one call per charge type
    # no family filter: every family is asked, so a GPU family gpuradar does not know yet
    # (PNV5, HCCPNV5v, GC49, ...) is seen and named instead of never asked for
    assert sorted((b["Filters"] for b in bodies if b), key=json.dumps) == [
        [{"Name": "instance-charge-type", "Values": [charge]}]
        for charge in ("POSTPAID_BY_HOUR", "SPOTPAID")]
    offers = gpuradar_json("prices", "--source", "tencent", "--all", config=cfg, db_url=db_url)
    assert {o["region"] for o in offers} == {"ap-guangzhou"}
    t4 = next(o for o in offers if o["zone"] == "ap-guangzhou-3" and o["pricing"] == "on_demand"
              and o["instance_type"] == "GN7.2XLARGE32")
    assert (t4["price"], t4["currency"], t4["gpu"]) == (8.68, "CNY", "T4")
    assert 0 < t4["price_usd"] < t4["price"]  # converted from CNY with the stored ECB rate
    table = gpuradar("prices", "--source", "tencent", "--gpu", "A100", "--all", config=cfg,
                     db_url=db_url)
    assert "¥213.60" in table.stdout  # the quoted CNY price beside the USD one
    assert SECRET_KEY not in proc.stdout + proc.stderr


def test_api_error_makes_the_crawl_partial_and_hides_the_key(tmp_path, provider_server,
                                                              sqlite_url):
    cfg = config(tmp_path, provider_server)
    provider_server.route("POST", "/", lambda req: Reply(
        body=(FIX / "error_signature.json").read_bytes()) if req.json() else Reply(
        body=(FIX / "describe_regions.json").read_bytes()))
    proc = gpuradar("crawl", "tencent", "--json", "-v", config=cfg, db_url=sqlite_url)
    result = json.loads(proc.stdout)[0]
    assert result["status"] in ("partial", "failed") and result["items"] == 0
    assert "AuthFailure.SignatureFailure" in proc.stderr
    assert SECRET_KEY not in proc.stdout + proc.stderr


def test_parse_command_on_a_saved_answer(tmp_path):
    cfg = write_config(tmp_path / "config.yaml", sources={"tencent": {"site": "china"}})
    proc = gpuradar("parse", "tencent", str(FIX / "zone_instance_config_spotpaid_gpu.json"),
                    config=cfg)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 3 and {x["pricing"] for x in lines} == {"spot"}


def test_regions_the_api_does_not_serve_are_not_errors(tmp_path, provider_server, sqlite_url):
    """DescribeRegions lists more regions than DescribeZoneInstanceConfigInfos serves: the
    undocumented ones are not asked, and a region answering UnsupportedRegion (as Tencent
    documents) has no offers but does not make the crawl partial, so offers still close."""
    regions = json.loads((FIX / "describe_regions.json").read_text())
    regions["Response"]["RegionSet"] = [  # the skipped ones first: each skips only itself
        {"Region": "ap-mumbai", "RegionName": "亚太南部(孟买)", "RegionState": "AVAILABLE"},
        {"Region": "ap-beijing", "RegionName": "华北地区(北京)", "RegionState": "UNAVAILABLE"},
        {"Region": "ap-guangzhou", "RegionName": "华南地区(广州)", "RegionState": "AVAILABLE"},
        {"Region": "ap-seoul", "RegionName": "亚太东北(首尔)", "RegionState": "AVAILABLE"}]
    standard = serve_standard(provider_server)
    answer = provider_server.routes[("POST", "/")]

    def tencent(req):
        if not req.json():
            return Reply(body=json.dumps(regions).encode())
        if req.headers.get("x-tc-region") == "ap-seoul":
            return Reply(body=(FIX / "error_unsupported_region.json").read_bytes())
        return answer(req)

    provider_server.route("POST", "/", tencent)
    cfg = write_config(tmp_path / "config.yaml", endpoints=standard, scrapy=FAST,
                       sources={"tencent": {"secret_id": "AKIDtest", "site": "china",
                                            "secret_key": SECRET_KEY}})
    proc = gpuradar("crawl", "tencent", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 6, (result, proc.stderr)
    asked = {r.headers.get("x-tc-region") for r in provider_server.requests if r.json()}
    assert asked == {"ap-guangzhou", "ap-seoul"}  # ap-mumbai is not a documented region,
    # ap-beijing is not available now
    assert "ap-seoul does not serve DescribeZoneInstanceConfigInfos" in proc.stderr


def test_configured_regions_are_asked_directly_and_a_failed_call_is_retried(
        tmp_path, provider_server, sqlite_url):
    """With `regions` set no DescribeRegions is made: each named region is asked at once. A
    call the gateway refuses (503) is asked again, the same call."""
    standard = serve_standard(provider_server)
    answer = provider_server.routes[("POST", "/")]
    refused: list[Request] = []
    lock = threading.Lock()

    def one_failure(req: Request) -> Reply:
        with lock:
            first = not refused
            if first:
                refused.append(req)
        if first:
            return Reply(503, b"service unavailable")
        return answer(req)

    provider_server.route("POST", "/", one_failure)
    cfg = write_config(tmp_path / "config.yaml", endpoints=standard, scrapy=FAST,
                       sources={"tencent": {"secret_id": "AKIDtest", "secret_key": SECRET_KEY,
                                            "site": "china", "regions": ["ap-guangzhou"]}})
    proc = gpuradar("crawl", "tencent", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 6, (result, proc.stderr)
    sent = provider_server.requests
    assert all(r.json() for r in sent)  # no DescribeRegions
    assert {r.headers.get("x-tc-region") for r in sent} == {"ap-guangzhou"}
    assert len(sent) == 1 + 2  # 2 charge types, and the retry
    [first] = refused
    assert [r for r in sent if r.body == first.body and r is not first]


def test_a_retry_is_signed_afresh():
    """Tencent refuses signatures older than five minutes: a call the gateway refuses late
    (503, answered a second after it was signed: a fake clock) is retried by the backoff
    middleware with a new X-TC-Timestamp and signature."""
    import asyncio
    from types import SimpleNamespace

    from scrapy.http import TextResponse

    from gpuradar.core.clock import FakeClock
    from gpuradar.crawler.middlewares import BackoffRetryMiddleware

    spider = callback_spider(TencentSpider, {"RETRY_TIMES": 1, "RETRY_BACKOFF_BASE": 0.0},
                             secret_id="AKIDtest", secret_key=SECRET_KEY)
    clock = spider.clock = FakeClock(datetime.fromtimestamp(1_764_506_096.0, UTC))
    crawler = spider.crawler
    crawler.spider = spider
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}))  # no crawl running
    first = next(spider.region_requests("ap-guangzhou"))
    clock.advance(1.0)  # the refusal comes a second later
    refused = TextResponse(first.url, status=503, body=b"service unavailable", request=first)
    retry = asyncio.run(BackoffRetryMiddleware.from_crawler(crawler).process_response(
        first, refused))
    assert retry.body == first.body and retry.meta["retry_times"] == 1
    assert int(retry.headers["X-TC-Timestamp"]) == int(first.headers["X-TC-Timestamp"]) + 1
    assert retry.headers["Authorization"] != first.headers["Authorization"]


def test_the_wait_after_request_limit_exceeded_doubles_from_the_base():
    """RequestLimitExceeded in an HTTP 200 answer: the first retry waits RETRY_BACKOFF_BASE,
    each later one twice the one before. Another status is not the spider's to read (the
    retry middleware's rules for it stand: a 400 is not asked again)."""
    from scrapy.http import TextResponse

    spider = callback_spider(TencentSpider, {"RETRY_BACKOFF_BASE": 1.5},
                             secret_id="AKIDtest", secret_key=SECRET_KEY)
    first = next(spider.region_requests("ap-guangzhou"))
    body = (FIX / "error_request_limit.json").read_bytes()

    def answer(status: int = 200, retries: int | None = None) -> TextResponse:
        meta = {} if retries is None else {"retry_times": retries}
        return TextResponse(first.url, status=status, body=body,
                            request=first.replace(meta={**first.meta, **meta}))

    assert [spider.throttle_pause(answer(retries=n)) for n in (None, 1, 2)] == [1.5, 3.0, 6.0]
    # an answer not tied to its request (no retries known) is a first one
    assert spider.throttle_pause(TextResponse(first.url, status=200, body=body)) == 1.5
    assert spider.throttle_pause(answer(status=400)) is None
    # a page that is no API answer (a gateway's HTML naming the error) is not one to pause on
    html = b"<html><body>RequestLimitExceeded</body></html>"
    assert spider.throttle_pause(TextResponse(first.url, status=200, body=html,
                                              request=first)) is None


def test_financial_regions_are_called_at_their_own_host():
    """CVM "Request Structure": financial regions are isolated from the others, and a call
    whose Region is ap-shanghai-fsi or ap-shenzhen-fsi goes to cvm.<region>.tencentcloudapi.com
    (the nearest-region host serves only non-financial regions). The signed Host follows."""
    spider = callback_spider(TencentSpider, secret_id="AKIDtest", secret_key=SECRET_KEY)
    for region, host in (("ap-shanghai-fsi", "cvm.ap-shanghai-fsi.tencentcloudapi.com"),
                         ("ap-shenzhen-fsi", "cvm.ap-shenzhen-fsi.tencentcloudapi.com"),
                         ("ap-shanghai", "cvm.tencentcloudapi.com")):
        requests = list(spider.region_requests(region))
        assert {r.url for r in requests} == {f"https://{host}/"}, region
        assert {r.headers["Host"].decode() for r in requests} == {host}
        assert {r.headers["X-TC-Region"].decode() for r in requests} == {region}


def test_every_gpu_family_of_the_table_is_in_the_catalog():
    """GN8's Tesla P40 was missing: its offers would be stored under a raw name."""
    from gpuradar.core import gpus

    named = {family: gpus.lookup(name, memory) for family, (name, memory) in FAMILIES.items()
             if name is not None}
    assert [family for family, gpu in named.items() if gpu is None] == []
    assert named["GN8"].name == "P40"


def test_a_family_not_in_the_table_is_reported_with_its_type_name(tmp_path, caplog):
    """An unknown GPU family is uncatalogued, the warning naming it with Tencent's TypeName
    (or saying there is none)."""
    said = []
    for family, type_name in (("ZZ9", "GPU ZZ9 type"), ("ZZ8", None)):
        def edit(row: dict, family=family, type_name=type_name) -> None:
            row.update(InstanceFamily=family, InstanceType=f"{family}.2XLARGE32",
                       TypeName=type_name)
        path = edited_answer(tmp_path, "zone_instance_config_postpaid_gpu.json", edit)
        list(parse_files("tencent", [path], project_settings()))
        said += [r.getMessage() for r in caplog.records if f"{family}.2XLARGE32" in r.getMessage()]
    assert len(said) == 2
    assert "instance family ZZ9 (GPU ZZ9 type): its GPU is not in gpuradar's Tencent family" \
        in said[0]
    assert "instance family ZZ8 (no type name): its GPU is not" in said[1]


def test_the_families_option_is_asked_for_five_families_a_call():
    spider = callback_spider(TencentSpider, secret_id="AKIDtest", secret_key=SECRET_KEY,
                             families=["GN7", "GN10Xp", "GT4", "PNV4", "GN7vw", "PNV5b"],
                             charge_types=["POSTPAID_BY_HOUR"])
    asked = [json.loads(r.body)["Filters"] for r in spider.region_requests("ap-guangzhou")]
    assert asked == [[{"Name": "instance-charge-type", "Values": ["POSTPAID_BY_HOUR"]},
                      {"Name": "instance-family", "Values": values}]
                     for values in (["GN7", "GN10Xp", "GT4", "PNV4", "GN7vw"], ["PNV5b"])]


def test_h20_and_l20_families_are_named(tmp_path):
    """PNV6 / HCCPNV6 (8 x H20 96 GB) and PNV5b (L20 48 GB) were skipped: an `H20` rule never
    matched Tencent."""
    def rename(instance_type: str, count: float) -> Callable[[dict], None]:
        def edit(row: dict) -> None:
            row.update(InstanceFamily=instance_type.split(".")[0], InstanceType=instance_type,
                       GpuCount=count, Gpu=int(count))
        return edit

    got = {}
    for instance_type, count in (("PNV6.32XLARGE1280", 8.0), ("HCCPNV6.96XLARGE2304", 8.0),
                                 ("PNV5b.8XLARGE96", 1.0)):
        path = edited_answer(tmp_path, "zone_instance_config_postpaid_gpu.json",
                             rename(instance_type, count))
        offer = next(i for i in parse_files("tencent", [path], project_settings())
                     if i["instance_type"] == instance_type)
        got[instance_type] = (offer["gpu"], offer["gpu_count"], offer["gpu_memory_gb"])
    assert got == {"PNV6.32XLARGE1280": ("H20", 8.0, 96), "HCCPNV6.96XLARGE2304": ("H20", 8.0, 96),
                   "PNV5b.8XLARGE96": ("L20", 1.0, 48)}


def test_the_currency_is_the_sites_never_a_default(tmp_path):
    """An international account's answers are in USD: with `site: intl` the offer says USD;
    with no site the parse stops naming the setting instead of calling them CNY."""
    [t4] = [i for i in parsed("zone_instance_config_postpaid_gpu.json", site="intl")
            if (i["zone"], i["instance_type"]) == ("ap-guangzhou-3", "GN7.2XLARGE32")]
    assert (t4["price"], t4["currency"], t4["price_usd"]) == (8.68, "USD", 8.68)
    with pytest.raises(ParseFailed, match="sources.tencent.site"):
        list(parse_files("tencent", [FIX / "zone_instance_config_postpaid_gpu.json"],
                         spider_settings("tencent")))


def test_an_unknown_gpu_family_is_asked_and_named(tmp_path, provider_server, sqlite_url):
    """A GPU family gpuradar has no GPU for (HCCPNV5v here) is asked for (no family filter)
    and named with its instance type in the crawl's log, its result and `sources`, not only
    counted."""
    standard = serve_standard(provider_server)
    answer = json.loads((FIX / "zone_instance_config_postpaid_gpu.json").read_text())
    answer["Response"]["InstanceTypeQuotaSet"][0].update(
        InstanceFamily="HCCPNV5v", InstanceType="HCCPNV5v.64XLARGE1280", TypeName="高性能计算集群")
    postpaid = json.dumps(answer).encode()
    default = provider_server.routes[("POST", "/")]
    provider_server.route("POST", "/", lambda req: Reply(body=postpaid) if "POSTPAID_BY_HOUR"
                          in req.body.decode() else default(req))
    cfg = write_config(tmp_path / "config.yaml", endpoints=standard, scrapy=FAST,
                       sources={"tencent": {"secret_id": "AKIDtest", "secret_key": SECRET_KEY,
                                            "site": "china", "regions": ["ap-guangzhou"]}})
    proc = gpuradar("crawl", "tencent", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    assert result["uncatalogued"] == {"HCCPNV5v.64XLARGE1280": 1}
    assert "HCCPNV5v.64XLARGE1280 is not in gpuradar's catalog (instance family HCCPNV5v" \
        in proc.stderr
    [row] = [r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)
             if r["source"] == "tencent"]
    assert "HCCPNV5v.64XLARGE1280" in json.dumps(row["uncatalogued"])


def test_request_limit_exceeded_is_retried_not_a_region_lost(tmp_path, provider_server,
                                                             sqlite_url):
    """Tencent says RequestLimitExceeded in an HTTP 200 answer: the call is asked again after
    a pause (as the SDK's StandardRetryer does) and the region's offers are all stored."""
    standard = serve_standard(provider_server)
    default = provider_server.routes[("POST", "/")]
    limited: list[bytes] = []
    lock = threading.Lock()

    def throttled_once(req: Request) -> Reply:
        with lock:
            first = not limited
            limited.append(req.body)
        if first:
            return Reply(body=(FIX / "error_request_limit.json").read_bytes())
        return default(req)

    provider_server.route("POST", "/", throttled_once)
    cfg = write_config(tmp_path / "config.yaml", endpoints=standard,
                       scrapy={**FAST, "RETRY_BACKOFF_BASE": 0.0},
                       sources={"tencent": {"secret_id": "AKIDtest", "secret_key": SECRET_KEY,
                                            "site": "china", "regions": ["ap-guangzhou"]}})
    proc = gpuradar("crawl", "tencent", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 6, (result, proc.stderr)
    assert len(limited) == 3 and limited[0] in limited[1:]  # the refused call, asked again
