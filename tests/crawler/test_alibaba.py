"""Alibaba Cloud: RPC signing against Alibaba's worked example, the GPU family table, the CDN
price file (with version discovery) and the AccessKey path, each crawled from the fixture
server into storage."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from scrapy.settings import Settings

from gpuradar.core.clock import FakeClock
from gpuradar.crawler.parsing import ParseFailed, parse_files
from gpuradar.crawler.signing import alibaba_rpc_signature, alibaba_string_to_sign
from gpuradar.crawler.spiders.alibaba import AlibabaSpider, gpu_spec
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response, spider_settings
from tests.provider_server import Reply, serve_standard

FIX = FIXTURES / "alibaba"
SECRET = "alibaba-secret-never-shown-0123456789"
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}
DOC_PARAMS = {"Timestamp": "2016-02-23T12:46:24Z", "Format": "XML", "AccessKeyId": "testid",
              "Action": "DescribeRegions", "SignatureMethod": "HMAC-SHA1",
              "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf", "Version": "2014-05-26",
              "SignatureVersion": "1.0"}


def test_rpc_signature_matches_alibabas_worked_example():
    assert alibaba_string_to_sign("GET", DOC_PARAMS).startswith(
        "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML")
    assert "Timestamp%3D2016-02-23T12%253A46%253A24Z" in alibaba_string_to_sign("GET", DOC_PARAMS)
    assert alibaba_rpc_signature("GET", DOC_PARAMS, "testsecret") == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="


@pytest.mark.parametrize(("instance_type", "expected"), [
    ("ecs.gn6i-c4g1.xlarge", ("NVIDIA T4", 1, 16, 4)),
    ("ecs.gn6i-c24g1.24xlarge", ("NVIDIA T4", 4, 16, 96)),
    ("ecs.gn6v-c8g1.16xlarge", ("NVIDIA V100", 8, 16, 64)),
    ("ecs.gn6e-c12g1.3xlarge", ("NVIDIA V100", 1, 32, 12)),
    ("ecs.gn7-c13g1.26xlarge", ("NVIDIA A100", 8, 40, 104)),
    ("ecs.gn7i-2x.8xlarge", ("NVIDIA A10", 2, 24, 32)),
    ("ecs.gn5-c8g1.14xlarge", ("NVIDIA P100", 8, 16, 56)),
    ("ecs.gn5i-c2g1.large", ("NVIDIA P4", 1, 8, 2)),
    ("ecs.ebmgn7e.32xlarge", ("NVIDIA A100", 8, 80, 128)),
    ("ecs.gn8is.8xlarge", ("NVIDIA L20", 2, 48, 32)),
])
def test_gpu_family_table(instance_type, expected):
    assert gpu_spec(instance_type) == expected


@pytest.mark.parametrize("instance_type", [
    "ecs.g6.large", "ecs.sgn7i-vws-m2.xlarge", "ecs.gn6i-c6g1.xlarge", "ecs.gn8is.32xlarge"])
def test_not_a_gpu_or_unknown_size(instance_type):
    assert gpu_spec(instance_type) is None


def project_settings(**options) -> Settings:
    return spider_settings("alibaba", **options)


def test_parse_china_price_file():
    items = list(parse_files("alibaba", [FIX / "instancePrice_china_gpu.json"],
                             project_settings()))
    by_key = {(i["region"], i["instance_type"]): i for i in items}
    # vpc/linux/optimized GPU types only; the unknown size gn6i-c6g1 is skipped.
    assert set(by_key) == {
        ("cn-hangzhou", "ecs.gn6i-c4g1.xlarge"), ("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge"),
        ("cn-beijing", "ecs.gn7-c12g1.3xlarge"), ("cn-beijing", "ecs.gn7i-2x.8xlarge"),
        ("cn-wulanchabu", "ecs.ebmgn7e.32xlarge"), ("cn-shanghai", "ecs.gn8is.4xlarge"),
        ("cn-shanghai", "ecs.gn6v-c8g1.16xlarge")}
    # One offer per type: the Windows and classic-network prices of a type are not offers.
    assert len(items) == len(by_key)
    t4 = by_key[("cn-hangzhou", "ecs.gn6i-c4g1.xlarge")]
    assert (t4["price"], t4["currency"], t4["gpu"]) == (8.98, "CNY", "T4")
    assert t4["available"] is None and t4["attributes"]["price_file_version"] == "2.0.433"
    assert by_key[("cn-wulanchabu", "ecs.ebmgn7e.32xlarge")]["gpu"] == "A100-SXM-80GB"
    assert by_key[("cn-beijing", "ecs.gn7-c12g1.3xlarge")]["gpu"] == "A100-SXM-40GB"
    assert by_key[("cn-shanghai", "ecs.gn8is.4xlarge")]["gpu"] == "L20"


def test_reference_file_and_errors():
    # The real 2018 excerpt has no GPU type: parsed without error, nothing to show.
    assert list(parse_files("alibaba", [FIX / "reference_instancePrice_intl_cdn_excerpt_2018.json"],
                            project_settings(site="intl"))) == []
    with pytest.raises(ParseFailed, match="InvalidAccessKeyId.NotFound"):
        list(parse_files("alibaba", [FIX / "error_access_key_not_found.json"],
                         project_settings()))


def test_currency_is_the_files_own_else_the_sites(tmp_path):
    """The file names its currency: an international (USD) file parsed with the default China
    site stays in USD. A file without `currency` takes its site's (China CNY, intl USD)."""
    items = list(parse_files("alibaba", [FIX / "instancePrice_intl_gpu.json"], project_settings()))
    assert items and {i["currency"] for i in items} == {"USD"}
    for name, site, currency in (("instancePrice_china_gpu.json", "china", "CNY"),
                                 ("instancePrice_intl_gpu.json", "intl", "USD")):
        data = json.loads((FIX / name).read_text())
        del data["currency"]
        bare = tmp_path / name
        bare.write_text(json.dumps(data))
        items = list(parse_files("alibaba", [bare], project_settings(site=site)))
        assert items and {i["currency"] for i in items} == {currency}, site


def test_changed_price_format_is_a_clear_error(tmp_path):
    data = json.loads((FIX / "instancePrice_china_gpu.json").read_text())
    data["pricingInfo"]["cn-hangzhou::ecs.gn6i-c4g1.xlarge::vpc::linux::optimized"]["hours"][0][
        "price"] = 8.98
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ParseFailed, match="'price' is float, expected str"):
        list(parse_files("alibaba", [bad], project_settings()))


def test_status_says_what_enables_what(monkeypatch):
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", raising=False)
    enabled, why = AlibabaSpider.status(project_settings())
    assert enabled and "EXPERIMENTAL" in why and "sources.alibaba.version" in why
    assert "ALIBABA_CLOUD_ACCESS_KEY_ID" in why and "CNY" in why
    read = json.loads('{"site": "intl"}')  # as a configuration file gives it, not a literal
    enabled, why = AlibabaSpider.status(project_settings(version="2.0.433", **read))
    assert "pinned price-file version 2.0.433" in why and "intl site in USD" in why


def crawl(tmp_path, server, db_url, **options):
    cfg = write_config(tmp_path / "config.yaml", endpoints=serve_standard(server), scrapy=FAST,
                       sources={"alibaba": options})
    proc = gpuradar("crawl", "fx", "alibaba", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    return cfg, {r["source"]: r for r in json.loads(proc.stdout)}["alibaba"], proc


def test_cdn_crawl_discovers_the_version(tmp_path, provider_server, db_url):
    cfg, result, _ = crawl(tmp_path, provider_server, db_url)
    assert result["status"] == "ok" and result["items"] == 7, result
    paths = [r.path for r in provider_server.requests]
    assert "/price/ecs/ecs-pricing/zh" in paths
    assert "/aliyun/ecs-price-info/2.0.433/price/download/instancePrice.json" in paths
    a10 = gpuradar_json("prices", "--gpu", "A10", "--source", "alibaba", config=cfg,
                        db_url=db_url)
    assert {o["instance_type"] for o in a10} == {"ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-2x.8xlarge"}
    two = next(o for o in a10 if o["instance_type"] == "ecs.gn7i-2x.8xlarge")
    assert two["price"] == 31.29 and two["currency"] == "CNY" and two["gpu_count"] == 2
    assert two["price_per_gpu_usd"] == pytest.approx(two["price_usd"] / 2)


def test_pinned_intl_version_and_discovery_fallback(tmp_path, provider_server, sqlite_url):
    _, result, _ = crawl(tmp_path, provider_server, sqlite_url, site="intl", version="2.0.421")
    assert result["status"] == "ok" and result["items"] == 2
    assert not any(r.path.startswith("/en/product") for r in provider_server.requests)
    # A pricing page without a version: warn and use the last known version.
    provider_server.route("GET", "/price/ecs/ecs-pricing/zh", lambda req: Reply(
        body=(FIX / "pricing_page_without_version.html").read_bytes(), content_type="text/html"))
    provider_server.route("GET", "/aliyun/ecs-price-info/2.0.211/price/download/"
                          "instancePrice.json", lambda req: Reply(
                              body=(FIX / "instancePrice_china_gpu.json").read_bytes()))
    cfg = write_config(tmp_path / "c2.yaml", endpoints={
        k: v for k, v in serve_standard(provider_server).items()}, scrapy=FAST)
    provider_server.route("GET", "/price/ecs/ecs-pricing/zh", lambda req: Reply(
        body=(FIX / "pricing_page_without_version.html").read_bytes(), content_type="text/html"))
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=sqlite_url)
    result = json.loads(proc.stdout)[0]
    assert result["status"] == "ok" and result["items"] == 7
    assert "using price-file version 2.0.211" in proc.stderr  # the China path's own


def test_access_key_crawl_has_spot_and_availability(tmp_path, provider_server, db_url):
    cfg, result, proc = crawl(tmp_path, provider_server, db_url, access_key_id="LTAItest",
                              access_key_secret=SECRET, regions=["cn-hangzhou", "cn-beijing"])
    # gn7i: on-demand in 2 zones + spot in 2 zones; gn7e: on-demand in 1 zone (sold out).
    assert result["status"] == "ok" and result["items"] == 5, result
    actions = [r.query["Action"][0] for r in provider_server.requests if r.path == "/"]
    assert actions.count("DescribeInstanceTypes") == 2  # NextToken followed
    # DescribeInstanceTypes pages hold at most 100 types since 2023-11-15 (its API reference).
    assert {r.query["MaxResults"][0] for r in provider_server.requests
            if r.query.get("Action") == ["DescribeInstanceTypes"]} == {"100"}
    # The spot history asked covers the last three hours: the newest point of each zone.
    starts = [datetime.strptime(r.query["StartTime"][0], "%Y-%m-%dT%H:%M:%SZ")
              .replace(tzinfo=UTC) for r in provider_server.requests
              if r.query.get("Action") == ["DescribeSpotPriceHistory"]]
    assert starts and all(abs(datetime.now(UTC) - timedelta(hours=3) - s) < timedelta(minutes=5)
                          for s in starts), starts
    assert not any(r.path.startswith("/aliyun/") for r in provider_server.requests)
    offers = gpuradar_json("prices", "--source", "alibaba", "--all", config=cfg, db_url=db_url)
    by_key = {(o["zone"], o["instance_type"], o["pricing"]): o for o in offers}
    spot = by_key[("cn-hangzhou-i", "ecs.gn7i-c8g1.2xlarge", "spot")]
    assert spot["price"] == 3.41 and spot["available"] is True  # the latest point
    assert by_key[("cn-hangzhou-k", "ecs.gn7i-c8g1.2xlarge", "spot")]["available"] is False
    od = by_key[("cn-hangzhou-k", "ecs.gn7i-c8g1.2xlarge", "on_demand")]
    # The instance's own DetailInfo line: the total (13.45) includes the system disk.
    assert od["price"] == 13.12 and od["available"] is True and od["gpu"] == "A10"
    assert od["attributes"]["total_with_system_disk"] == 13.45
    a100 = by_key[("cn-hangzhou-i", "ecs.gn7e-c16g1.4xlarge", "on_demand")]
    assert a100["available"] is False and a100["gpu"] == "A100-SXM-80GB"
    assert SECRET not in proc.stdout + proc.stderr


def test_parse_reads_the_recorded_pricing_page_without_error():
    """`gpuradar parse` on the page the version is discovered from: no offers, no error."""
    from pathlib import Path

    from tests.clirun import gpuradar

    page = Path(__file__).parents[1] / "fixtures/alibaba/pricing_page_with_version.html"
    proc = gpuradar("parse", "alibaba", str(page))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


def test_every_retry_is_signed_with_a_fresh_nonce(tmp_path, provider_server, sqlite_url):
    """The fixture server refuses a reused SignatureNonce (SignatureNonceUsed, as Alibaba
    does) and fails the first DescribePrice once: its retry must carry a new nonce."""
    endpoints = serve_standard(provider_server)
    answer = provider_server.routes[("POST", "/")]
    failed: list[str] = []

    def flaky(req):
        if req.query.get("Action") == ["DescribePrice"] and not failed:
            failed.append(req.query["SignatureNonce"][0])
            return Reply(503, b'{"Code": "ServiceUnavailable", "Message": "try again"}')
        return answer(req)

    provider_server.route("POST", "/", flaky)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST, sources={
        "alibaba": {"access_key_id": "LTAItest", "access_key_secret": SECRET,
                    "regions": ["cn-hangzhou"]}})
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    prices = [r for r in provider_server.requests if r.query.get("Action") == ["DescribePrice"]]
    nonces = [r.query["SignatureNonce"][0] for r in prices]
    assert failed and len(nonces) == len(set(nonces)) == 3  # 2 types + the retry
    assert "SignatureNonceUsed" not in proc.stderr


def test_version_found_without_a_trailing_slash(tmp_path):
    """Public code finds the version with `ecs-price-info/[0-9.]+` on the China pricing page:
    a URL that ends right after the version is found too."""
    spider = AlibabaSpider()
    spider.settings = project_settings()
    page = ('<a href="https://g.alicdn.com/aliyun/ecs-price-info/2.0.440">x</a>'
            '<script>var base="https://g.alicdn.com/aliyun/ecs-price-info-intl/2.0.500"</script>'
            '<script src="//g.alicdn.com/aliyun/ecs-price-info/2.0.99/price.js"></script>')
    [request] = list(spider.parse_discovery(
        response(page, "https://www.aliyun.com/price/ecs/ecs-pricing/zh", kind="html")))
    # The newest version the page names, compared as numbers (2.0.440 after 2.0.99).
    assert "/ecs-price-info/2.0.440/price/download/instancePrice.json" in request.url


def test_intl_site_takes_the_intl_version_only():
    """The pricing page names both paths' versions: the intl site takes its own (2.0.421),
    not the China path's higher 2.0.433."""
    spider = AlibabaSpider()
    spider.settings = project_settings(site="intl")
    page = response(FIX / "pricing_page_with_version.html",
                    "https://www.alibabacloud.com/en/product/ecs/pricing")
    [request] = list(spider.parse_discovery(page))
    assert request.url.endswith("/ecs-price-info-intl/2.0.421/price/download/instancePrice.json")


def first_requests(**options) -> list:
    """The requests a crawl starts with (start() is an async generator)."""
    spider = AlibabaSpider()
    spider.settings = project_settings(**options)

    async def collect():
        return [r async for r in spider.start()]
    return asyncio.run(collect())


def test_discovery_page_is_rendered_by_the_browser_only_when_asked():
    """`discover_with_browser`: the pricing page request goes to Chromium (scrapy-playwright,
    tested with the real browser in test_playwright.py); otherwise it is a plain download."""
    [rendered] = first_requests(discover_with_browser=True)
    assert rendered.url == "https://www.aliyun.com/price/ecs/ecs-pricing/zh"
    assert rendered.meta.get("playwright") is True and rendered.meta["optional"] is True
    [plain] = first_requests()
    assert not plain.meta.get("playwright")


def test_spider_renders_pages_only_with_the_option():
    """Its download handler loads scrapy-playwright only then (crawler/handlers.py): without
    it, a rendered request would fail."""
    for options, renders in (({"discover_with_browser": True}, True), ({}, False)):
        spider = AlibabaSpider()
        spider.settings = project_settings(**options)
        assert spider.renders_pages is renders


def api_spider() -> AlibabaSpider:
    """A spider with an AccessKey, for calling its ECS API callbacks without a crawl."""
    spider = AlibabaSpider()
    spider.settings = project_settings(access_key_id="LTAItest", access_key_secret=SECRET)
    return spider


def instance_types() -> dict[str, dict]:
    """The instance types of the first DescribeInstanceTypes page, by id (the shape the
    availability and price callbacks receive their `spec` in)."""
    page = json.loads((FIX / "describe_instance_types_page1.json").read_text())
    return {t["InstanceTypeId"]: t for t in page["InstanceTypes"]["InstanceType"]}


def test_instance_price_is_its_own_line_in_any_order():
    """DescribePrice's DetailInfo lines are picked by Resource, not position: with the system
    disk line first, the offer still costs the instance's 13.12, not the disk's 0.33."""
    spider = api_spider()
    data = json.loads((FIX / "describe_price_gn7i.json").read_text())
    data["PriceInfo"]["Price"]["DetailInfos"]["DetailInfo"].reverse()
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    [item] = list(spider.parse_price(response(data), action="DescribePrice", region="cn-hangzhou",
                                     spec=spec, zones={"cn-hangzhou-k": True}))
    assert (item.price, item.attributes["trade_price"]) == (13.12, 13.12)


@pytest.mark.parametrize("status", [400, 403, 404])
def test_api_error_answer_is_reported_with_its_code(tmp_path, provider_server, sqlite_url,
                                                    status):
    """Alibaba answers a refused call with an HTTP error status and its error body (Code,
    Message): the crawl reports that Code, not a bare HTTP status."""
    endpoints = serve_standard(provider_server)
    provider_server.route("POST", "/", lambda req: Reply(
        status, (FIX / "error_access_key_not_found.json").read_bytes()))
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST, sources={
        "alibaba": {"access_key_id": "LTAItest", "access_key_secret": SECRET,
                    "regions": ["cn-hangzhou"]}})
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["items"] == 0 and result["status"] != "ok", result
    assert ("DescribeInstanceTypes failed: InvalidAccessKeyId.NotFound Specified access key is "
            "not found.") in proc.stderr


def test_discovery_survives_a_redirect_back_to_the_page(tmp_path, provider_server, sqlite_url):
    """A pricing page that first redirects to itself (as a cookie-setting redirect does) is
    still read: the redirected request is not dropped as a duplicate."""
    endpoints = serve_standard(provider_server)
    page = provider_server.routes[("GET", "/price/ecs/ecs-pricing/zh")]
    redirected: list[bool] = []

    def once(req):
        if not redirected:
            redirected.append(True)
            return Reply(302, b"", content_type="text/html",
                         headers={"location": "/price/ecs/ecs-pricing/zh"})
        return page(req)

    provider_server.route("GET", "/price/ecs/ecs-pricing/zh", once)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST)
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 7, (result, proc.stderr)
    paths = [r.path for r in provider_server.requests]
    assert paths.count("/price/ecs/ecs-pricing/zh") == 2
    assert "/aliyun/ecs-price-info/2.0.433/price/download/instancePrice.json" in paths


def test_a_type_without_a_gpu_count_is_not_priced():
    """DescribeInstanceTypes lists every type; one whose answer has no GPUAmount is not a GPU
    type, so no availability or price is asked for it."""
    page = json.loads((FIX / "describe_instance_types_page2.json").read_text())
    plain = dict(page["InstanceTypes"]["InstanceType"][0], InstanceTypeId="ecs.g7.large")
    plain.pop("GPUAmount")
    page["InstanceTypes"]["InstanceType"].append(plain)
    out = list(api_spider().parse_instance_types(response(page), action="DescribeInstanceTypes",
                                                  specs={}))
    assert out and all(set(r.cb_kwargs["specs"]) == {"ecs.gn8is.4xlarge"} for r in out)


@pytest.mark.parametrize("status, body", [
    (200, b"<html><body>Service Unavailable</body></html>"),  # a proxy's page, not the API's
    (200, (FIX / "error_access_key_not_found.json").read_bytes()),  # an error body, status 200
])
def test_an_answer_that_is_not_the_apis_is_reported_not_read(status, body, caplog):
    spider = api_spider()
    answer = response(body, "https://ecs.cn-hangzhou.aliyuncs.com/", status=status)
    assert list(spider.parse_instance_types(answer, action="DescribeInstanceTypes",
                                            specs={})) == []
    assert "alibaba: DescribeInstanceTypes failed" in caplog.text


def test_the_newest_spot_point_wins_in_any_order():
    """DescribeSpotPriceHistory's points are not promised in time order: the spot offer takes
    the newest point of its zone, also when it is listed first."""
    data = json.loads((FIX / "describe_spot_price_history_gn7i.json").read_text())
    data["SpotPrices"]["SpotPriceType"].reverse()
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    items = list(api_spider().parse_spot(response(data), action="DescribeSpotPriceHistory",
                                         region="cn-hangzhou", spec=spec,
                                         zones={"cn-hangzhou-i": True}))
    assert [(i.zone, i.price, i.attributes["observed"]) for i in items] == [
        ("cn-hangzhou-i", 3.41, "2026-11-02T07:00:00Z")]


def test_a_spot_point_of_the_classic_network_is_no_offer_one_without_a_network_is_vpc():
    """Only VPC spot prices are offers: a zone whose points are all of the classic network
    (NetworkType "classic") gives none; a point that names no network is a VPC one."""
    data = json.loads((FIX / "describe_spot_price_history_gn7i.json").read_text())
    points = data["SpotPrices"]["SpotPriceType"]
    for p in points:
        if p["ZoneId"] == "cn-hangzhou-k":
            p["NetworkType"] = "classic"
        else:
            del p["NetworkType"]
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    items = list(api_spider().parse_spot(response(data), action="DescribeSpotPriceHistory",
                                         region="cn-hangzhou", spec=spec,
                                         zones={"cn-hangzhou-i": True, "cn-hangzhou-k": True}))
    assert [(i.zone, i.price) for i in items] == [("cn-hangzhou-i", 3.41)]


def test_a_type_without_an_hourly_price_costs_only_itself(tmp_path):
    """A price file entry with no hourly price (only monthly and yearly) is no offer; the
    types listed after it are still read."""
    data = json.loads((FIX / "instancePrice_china_gpu.json").read_text())
    first = next(iter(data["pricingInfo"]))
    data["pricingInfo"][first]["hours"] = []
    path = tmp_path / "instancePrice.json"
    path.write_text(json.dumps(data))
    items = list(parse_files("alibaba", [path], project_settings()))
    keys = {(i["region"], i["instance_type"]) for i in items}
    assert tuple(first.split("::")[:2]) not in keys and len(keys) == 6


def test_an_api_price_keeps_the_currency_alibaba_states():
    """DescribePrice states its currency (USD for an international account, CNY in China):
    the offer is stored in that currency, CNY only when none is stated."""
    data = json.loads((FIX / "describe_price_gn7i.json").read_text())
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    currencies = []
    for stated in ("USD", None):
        data["PriceInfo"]["Price"]["Currency"] = stated  # USD: as an intl account is answered
        [item] = api_spider().parse_price(response(data), action="DescribePrice",
                                          region="ap-southeast-1", spec=spec,
                                          zones={"ap-southeast-1a": True})
        currencies.append(item.currency)
    assert currencies == ["USD", "CNY"]


def test_a_spot_price_keeps_the_currency_alibaba_states():
    """DescribeSpotPriceHistory states its currency too: USD stays USD, CNY only when none
    is stated."""
    data = json.loads((FIX / "describe_spot_price_history_gn7i.json").read_text())
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    currencies = []
    for stated in ("USD", None):
        data["Currency"] = stated
        [item] = api_spider().parse_spot(response(data), action="DescribeSpotPriceHistory",
                                         region="cn-hangzhou", spec=spec,
                                         zones={"cn-hangzhou-i": True})
        currencies.append(item.currency)
    assert currencies == ["USD", "CNY"]


def test_a_sold_out_type_is_unavailable_whatever_its_category():
    """Status SoldOut marks the type unavailable in that zone even where its StatusCategory
    (a separate field) still says WithStock."""
    data = json.loads((FIX / "describe_available_resource_postpaid.json").read_text())
    zone_i = data["AvailableZones"]["AvailableZone"][0]
    resource = zone_i["AvailableResources"]["AvailableResource"][0]
    for s in resource["SupportedResources"]["SupportedResource"]:
        if s["Value"] == "ecs.gn7e-c16g1.4xlarge":
            s["StatusCategory"] = "WithStock"
    specs = instance_types()
    out = list(api_spider().parse_available(response(data), action="DescribeAvailableResource",
                                            region="cn-hangzhou", spot=False, specs=specs))
    zones = {r.cb_kwargs["spec"]["InstanceTypeId"]: r.cb_kwargs["zones"] for r in out}
    assert zones["ecs.gn7e-c16g1.4xlarge"] == {"cn-hangzhou-i": False}
    assert zones["ecs.gn7i-c8g1.2xlarge"] == {"cn-hangzhou-i": True, "cn-hangzhou-k": True}


def test_parse_refuses_a_json_file_it_does_not_know(tmp_path):
    """`gpuradar parse alibaba` on JSON that is neither a price file nor an API answer says
    so, rather than reading it as no offers."""
    path = tmp_path / "other.json"
    path.write_text('{"RequestId": "0041D94C-FB92-4C49-B115-259DA1CE1923"}')
    with pytest.raises(ParseFailed, match="'pricingInfo' is missing"):
        list(parse_files("alibaba", [path], project_settings()))


THROTTLED = (FIX / "error_throttling_user.json").read_bytes()  # Alibaba's documented answer


def test_a_throttling_answer_waits_for_the_next_minute():
    """ECS "API throttling": a call throttled in minute T may be made again from minute T+1.
    Alibaba says so with HTTP 403 or 400 and a `Throttling*` code (not 429): the pause runs
    to a second past the next minute, capped by RETRY_BACKOFF_MAX; other refusals are no
    throttling and keep no pause."""
    spider = api_spider()
    spider.clock = FakeClock(datetime.fromtimestamp(60 * 29_000_000 + 45.0, UTC))  # hh:mm:45
    url = "https://ecs.cn-hangzhou.aliyuncs.com/"
    assert spider.throttle_pause(response(THROTTLED, url, status=403)) == 16.0
    body = json.loads(THROTTLED)
    assert spider.throttle_pause(response(dict(body, Code="Throttling"), url, status=400)) == 16.0
    denied = FIX / "error_access_key_not_found.json"
    assert spider.throttle_pause(response(denied, url, status=403)) is None
    assert spider.throttle_pause(response(body, url, status=200)) is None
    spider.settings = project_settings(access_key_id="LTAItest", access_key_secret=SECRET)
    spider.settings.set("RETRY_BACKOFF_MAX", 5.0)
    assert spider.throttle_pause(response(THROTTLED, url, status=403)) == 5.0


def throttled_crawl(tmp_path, provider_server, db_url, times: int):
    """A crawl of cn-hangzhou whose DescribePrice calls are throttled `times` times in all
    (HTTP 403 Throttling.User), and the requests the server saw."""
    endpoints = serve_standard(provider_server)
    answer = provider_server.routes[("POST", "/")]
    refused: list[str] = []

    def throttling(req):
        if req.query.get("Action") == ["DescribePrice"] and len(refused) < times:
            refused.append(req.query["SignatureNonce"][0])
            return Reply(403, THROTTLED)
        return answer(req)

    provider_server.route("POST", "/", throttling)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints,
                       scrapy={**FAST, "RETRY_BACKOFF_MAX": 0.05}, sources={
                           "alibaba": {"access_key_id": "LTAItest", "access_key_secret": SECRET,
                                       "regions": ["cn-hangzhou"]}})
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=db_url)
    [result] = json.loads(proc.stdout)
    prices = [r for r in provider_server.requests if r.query.get("Action") == ["DescribePrice"]]
    return result, proc, prices


def test_a_throttled_price_call_is_retried_signed_afresh(tmp_path, provider_server, sqlite_url):
    """One 403 Throttling.User is waited out and asked again with a new nonce: every offer is
    stored and the crawl is ok."""
    result, proc, prices = throttled_crawl(tmp_path, provider_server, sqlite_url, times=1)
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    nonces = [r.query["SignatureNonce"][0] for r in prices]
    assert len(nonces) == len(set(nonces)) == 3  # 2 types + the retry


def test_throttling_that_does_not_end_leaves_the_crawl_partial(tmp_path, provider_server,
                                                               sqlite_url):
    """Still throttled after RETRY_TIMES retries: the call is given up and named, and the
    crawl is partial (nothing closed)."""
    result, proc, prices = throttled_crawl(tmp_path, provider_server, sqlite_url, times=99)
    assert result["status"] == "partial", (result, proc.stderr)
    assert "DescribePrice failed: Throttling.User" in result["error"]
    assert len(prices) == 4  # 2 types, each asked twice (RETRY_TIMES 1)


@pytest.mark.parametrize(("instance_type", "count"), [
    ("ecs.gn8v.4xlarge", 1), ("ecs.gn8v-2x.8xlarge", 2), ("ecs.gn8v-8x.48xlarge", 8),
    ("ecs.ebmgn8v.48xlarge", 8)])
def test_gn8v_is_the_h20(tmp_path, instance_type, count):
    """gn8v (96 GB HBM3 per GPU) is NVIDIA's H20: it was kept under a raw name, so an `H20`
    rule never matched it."""
    data = json.loads((FIX / "instancePrice_china_gpu.json").read_text())
    key, prices = next(iter(data["pricingInfo"].items()))
    region = key.split("::")[0]
    data["pricingInfo"] = {f"{region}::{instance_type}::vpc::linux::optimized": prices}
    path = tmp_path / "instancePrice.json"
    path.write_text(json.dumps(data))
    [item] = parse_files("alibaba", [path], project_settings())
    assert (item["gpu"], item["gpu_count"], item["gpu_memory_gb"]) == ("H20", count, 96)


def test_gn8v_from_the_api_is_the_h20_whatever_its_gpuspec():
    """DescribeInstanceTypes' GPUSpec for gn8v is not a model name the catalog knows: the
    family names the GPU; a GPUSpec the catalog knows stays authoritative."""
    from gpuradar.crawler.spiders.alibaba import api_gpu

    gn8v = {"InstanceTypeId": "ecs.gn8v-2x.8xlarge", "InstanceTypeFamily": "ecs.gn8v",
            "GPUSpec": "NVIDIA GPU H", "GPUAmount": 2, "GPUMemorySize": 96}
    assert api_gpu(gn8v) == "NVIDIA H20"
    assert api_gpu(instance_types()["ecs.gn7i-c8g1.2xlarge"]) == "NVIDIA A10"
    unknown = {**gn8v, "InstanceTypeFamily": "ecs.gn9x"}
    assert api_gpu(unknown) == "NVIDIA GPU H"  # kept raw: stored as an unknown GPU


def test_an_unknown_gpu_family_in_the_price_file_is_named(tmp_path, caplog):
    """A GPU family gpuradar has no row for is reported with its instance type (crawl
    summary, `sources`, log), not only counted."""
    from tests.helpers import callback_spider

    data = json.loads((FIX / "instancePrice_china_gpu.json").read_text())
    key, prices = next(iter(data["pricingInfo"].items()))
    data["pricingInfo"][key.replace(key.split("::")[1], "ecs.gn9x-8x.64xlarge")] = prices
    spider = callback_spider(AlibabaSpider)
    items = list(spider.parse(response(data)))
    assert len(items) == 7  # the known ones
    names = spider.crawler.stats.get_value("gpuradar/uncatalogued_names")
    # the fixture's gn6i size with no known GPU count is named too
    assert names == {"ecs.gn9x-8x.64xlarge": 1, "ecs.gn6i-c6g1.xlarge": 1}
    assert "ecs.gn9x-8x.64xlarge is not in gpuradar's catalog" in caplog.text


def test_the_api_asks_every_region_the_account_can_use(tmp_path, provider_server, sqlite_url):
    """Without `regions`, DescribeRegions lists the account's regions and each is asked (it
    used to be 8 hard-coded ones: cn-guangzhou, ap-northeast-1, eu-central-1, ... missed)."""
    cfg, result, proc = crawl(tmp_path, provider_server, sqlite_url, access_key_id="LTAItest",
                              access_key_secret=SECRET)
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    asked = {r.query["RegionId"][0] for r in provider_server.requests
             if r.query.get("Action") == ["DescribeAvailableResource"]}
    assert asked == {"cn-hangzhou", "cn-guangzhou", "cn-chengdu", "ap-northeast-1",
                     "eu-central-1", "us-east-1"}


def test_spot_price_history_pages_are_followed():
    """A spot history answer with NextOffset is followed (Offset = NextOffset) before the
    offer is made: the newest point, on the second page here, is the price."""
    data = json.loads((FIX / "describe_spot_price_history_gn7i.json").read_text())
    points = data["SpotPrices"]["SpotPriceType"]
    first = {**data, "SpotPrices": {"SpotPriceType": [points[0]]}, "NextOffset": 1}
    second = {**data, "SpotPrices": {"SpotPriceType": points[1:]}}
    spec = instance_types()["ecs.gn7i-c8g1.2xlarge"]
    spider = api_spider()
    query = {"RegionId": "cn-hangzhou", "InstanceType": spec["InstanceTypeId"],
             "NetworkType": "vpc", "OSType": "linux"}
    [request] = spider.parse_spot(response(first), action="DescribeSpotPriceHistory",
                                  region="cn-hangzhou", spec=spec, zones={"cn-hangzhou-i": True},
                                  query=query, points=[])
    assert "Offset=1" in request.url and request.cb_kwargs["points"] == [points[0]]
    items = list(spider.parse_spot(response(second), **request.cb_kwargs))
    assert [(i.zone, i.price) for i in items] == [("cn-hangzhou-i", 3.41)]


# -- DescribeSpotAdvice: the interruption signal of spot offers --------------------------------
def test_spot_offers_carry_describe_spot_advice_per_zone(tmp_path, provider_server, sqlite_url):
    """With an AccessKey, each spot offer carries its zone's DescribeSpotAdvice band, rate and
    average discount, named and dated, as `prices` shows them; on-demand offers carry none."""
    cfg, result, proc = crawl(tmp_path, provider_server, sqlite_url, access_key_id="LTAItest",
                              access_key_secret=SECRET, regions=["cn-hangzhou"])
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    [asked] = [r.query for r in provider_server.requests
               if r.query.get("Action") == ["DescribeSpotAdvice"]]
    assert asked["RegionId"] == ["cn-hangzhou"]
    assert asked["InstanceTypes.1"] == ["ecs.gn7i-c8g1.2xlarge"] and "InstanceTypes.2" not in asked
    offers = gpuradar_json("prices", "--source", "alibaba", "--all", config=cfg,
                           db_url=sqlite_url)
    by_key = {(o["zone"], o["pricing"]): o for o in offers
              if o["instance_type"] == "ecs.gn7i-c8g1.2xlarge"}
    today = datetime.now(UTC).date().isoformat()
    calm = by_key[("cn-hangzhou-i", "spot")]["attributes"]
    assert calm["interruption"] == "0-3%" and calm["interruption_rate"] == 1.2
    assert calm["interruption_source"] == "Alibaba DescribeSpotAdvice"
    assert calm["interruption_window"] == "30 days" and calm["avg_spot_price_pct"] == 26
    # dated by the answer (the server's Date header: today)
    assert abs(datetime.fromisoformat(calm["interruption_as_of"]).date()
               - datetime.now(UTC).date()) <= timedelta(days=1)
    busy = by_key[("cn-hangzhou-k", "spot")]["attributes"]
    assert busy["interruption"] == "10-100%" and busy["interruption_rate"] == 12.5
    assert "interruption" not in by_key[("cn-hangzhou-i", "on_demand")]["attributes"]
    wide = gpuradar("prices", "--source", "alibaba", "--pricing", "spot", "--wide",
                    config=cfg, db_url=sqlite_url, env={"COLUMNS": "250"})
    assert "0-3%/30 days (average 1.2%) (Alibaba DescribeSpotAdvice," in wide.stdout, wide.stdout
    assert "30-day average 26% of on-demand" in wide.stdout
    assert today[:4] in wide.stdout


def test_a_refused_spot_advice_leaves_the_signal_unknown_and_the_prices(tmp_path,
                                                                        provider_server,
                                                                        sqlite_url):
    """A DescribeSpotAdvice the account may not call (RAM) costs the signal alone: the spot
    prices are stored, the crawl is ok, and each spot offer says why its signal is unknown."""
    endpoints = serve_standard(provider_server)
    from tests.routes.china import alibaba_api_handler

    def refuse_advice(req):
        if req.query.get("Action") == ["DescribeSpotAdvice"]:
            return Reply(403, json.dumps({"Code": "Forbidden.RAM", "Message": "denied",
                                          "RequestId": "0"}).encode())
        return alibaba_api_handler(req)

    provider_server.route("POST", "/", refuse_advice)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST, sources={
        "alibaba": {"access_key_id": "LTAItest", "access_key_secret": SECRET,
                    "regions": ["cn-hangzhou"]}})
    proc = gpuradar("crawl", "alibaba", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 5, (result, proc.stderr)
    assert "DescribeSpotAdvice in cn-hangzhou failed (Forbidden.RAM)" in proc.stderr
    spot = gpuradar_json("prices", "--source", "alibaba", "--pricing", "spot", "--all",
                         config=cfg, db_url=sqlite_url)
    assert {o["attributes"]["interruption_unknown"] for o in spot} == {
        "DescribeSpotAdvice failed (Forbidden.RAM)"}
    assert all("interruption" not in o["attributes"] for o in spot)
    assert SECRET not in proc.stdout + proc.stderr


def test_an_unreadable_band_is_counted_and_unknown_never_guessed():
    """A band outside the documented forms gives no rate (counted); a number outside 0-100
    is left out (counted); a type the answer does not name is unknown, saying so."""
    from gpuradar.crawler.spiders.alibaba import SpotAdvice, read_spot_advice

    data = json.loads((FIX / "describe_spot_advice_gn7i.json").read_text())
    zones = data["AvailableSpotZones"]["AvailableSpotZone"]
    zones[0]["AvailableSpotResources"]["AvailableSpotResource"][0]["InterruptRateDesc"] = "low"
    zones[1]["AvailableSpotResources"]["AvailableSpotResource"][0]["InterruptionRate"] = 250
    counted: list[str] = []
    advice = SpotAdvice()
    read_spot_advice(data, advice, "2026-12-06", counted.append)
    assert counted == ["unreadable_interruption_band", "unreadable_interruption_rate"]
    odd = advice.attributes("ecs.gn7i-c8g1.2xlarge", "cn-hangzhou-i")
    assert odd == {"interruption_unknown": "DescribeSpotAdvice band 'low' not understood"}
    busy = advice.attributes("ecs.gn7i-c8g1.2xlarge", "cn-hangzhou-k")
    assert busy["interruption"] == "10-100%" and "interruption_rate" not in busy
    assert advice.attributes("ecs.gn7e-c16g1.4xlarge", "cn-hangzhou-i") == {
        "interruption_unknown": "not in DescribeSpotAdvice's answer for this type and zone"}
    # a saved DescribeSpotAdvice answer is an API answer `gpuradar parse` knows: no offers
    assert list(api_spider().parse_file(response(FIX / "describe_spot_advice_gn7i.json"))) == []
