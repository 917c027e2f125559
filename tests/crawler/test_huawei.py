"""Huawei Cloud: APIG AK/SK signing against Huawei's worked example, flavor parsing (GPU and
Ascend, per-AZ sell status), and a real crawl where BSS rejects one flavor of a batch."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from scrapy.settings import Settings

from gpuradar.crawler.parsing import ParseFailed, parse_files
from gpuradar.crawler.signing import huawei_canonical_request, huawei_sign
from gpuradar.crawler.spiders.huawei import HuaweiSpider, az_status, flavor_gpu
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, callback_spider, response, spider_settings
from tests.provider_server import serve_standard

FIX = FIXTURES / "huawei"
SK = "huawei-secret-never-shown-0123456789"
DOMAIN = "d78cbac186b744899480f25bd022f468"  # iam_auth_domains.json
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}
DOC_URL = ("https://service.region.example.com/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs"
           "?limit=2&marker=13551d6b-755d-4757-b956-536f674975c0")


def test_signature_matches_huaweis_worked_example():
    headers = {"Content-Type": "application/json", "Host": "service.region.example.com",
               "X-Sdk-Date": "20191115T033655Z"}
    canonical, signed = huawei_canonical_request("GET", DOC_URL, headers, b"")
    assert signed == "content-type;host;x-sdk-date"
    assert canonical.splitlines()[1:3] == [
        "/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs/",
        "limit=2&marker=13551d6b-755d-4757-b956-536f674975c0"]
    out = huawei_sign(access_key="AKEXAMPLE", secret_key="MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc",
                      method="GET", url=DOC_URL, headers=headers)
    assert out["Authorization"] == (
        "SDK-HMAC-SHA256 Access=AKEXAMPLE, SignedHeaders=content-type;host;x-sdk-date, "
        "Signature=7be6668032f70418fcc22abc52071e57aff61b84a1d2381bb430d6870f4f6ebe")


def test_availability_and_gpu_fields():
    doc = json.loads((FIX / "reference_flavor_spot_availability_docs_example.json").read_text())
    specs = doc["os_extra_specs"]
    assert az_status(specs["cond:operation:az"]) == {
        "cn-east-2d": "sellout", "cn-east-2a": "normal", "cn-east-2b": "normal"}
    assert az_status(specs["cond:spot_block:operation:az"])["cn-east-2a"] == "sellout"
    assert flavor_gpu({"pci_passthrough:alias": "nvidia-p100:1"}) == ("nvidia-p100", 1.0, None)
    assert flavor_gpu({"info:asic_accelerators": json.dumps(
        [{"name": "Ascend-910B", "memory_mb": 65536, "count": 8}])}) == ("Ascend-910B", 8, 64.0)
    assert flavor_gpu({"pci_passthrough:gpu_specs": "m60:direct_graphics:1"}) is None
    # `info:gpus` lists cards; one without a count adds none.
    cards = [{"name": "nvidia-v100", "memory_mb": 32768, "count": 8}, {"name": "nvidia-v100"}]
    assert flavor_gpu({"info:gpus": json.dumps(cards)}) == ("nvidia-v100", 8, 32.0)
    # A field it cannot read costs only itself: the next one still names the GPU; a
    # passthrough alias of zero GPUs names none.
    ascend = json.dumps([{"name": "Ascend-910B", "memory_mb": 65536, "count": 8}])
    assert flavor_gpu({"info:gpus": "{not json", "info:asic_accelerators": ascend}) == (
        "Ascend-910B", 8, 64.0)
    assert flavor_gpu({"info:gpus": "[]", "pci_passthrough:alias": "nvidia-t4:1"}) == (
        "nvidia-t4", 1.0, None)
    assert flavor_gpu({"pci_passthrough:alias": "nvidia-t4:0"}) is None


def test_promotion_and_open_beta_zones_are_on_sale(tmp_path):
    """normal / promotion / obt all mean "on sale" in `cond:operation:az` (module docstring)."""
    page = {"flavors": [f for f in fixture_flavors("cn-north-4") if f["id"] == "p2s.2xlarge.8"]}
    page["flavors"][0]["os_extra_specs"]["cond:operation:az"] = (
        "cn-north-4a(promotion),cn-north-4b(obt),cn-north-4c(sellout)")
    path = tmp_path / "flavors.json"
    path.write_text(json.dumps(page))
    items = parse_files("huawei", [path], project_settings(region="cn-north-4"))
    assert {i["zone"]: i["available"] for i in items} == {
        "cn-north-4a": True, "cn-north-4b": True, "cn-north-4c": False}


def project_settings(**options) -> Settings:
    return spider_settings("huawei", **options)


def make_spider(**options: Any) -> HuaweiSpider:
    """A spider with an AK/SK (and `options`), for calling its callbacks without a crawl."""
    spider = callback_spider(HuaweiSpider, access_key="AKtest", secret_key=SK,
                             domain_id=DOMAIN, **options)
    spider.domain_id = DOMAIN  # what start() takes from the option before any request
    return spider


def fixture_flavors(region: str) -> list[dict[str, Any]]:
    return json.loads((FIX / f"flavors_{region}.json").read_text())["flavors"]


def east_gpu_flavors(spider: HuaweiSpider) -> list[dict[str, Any]]:
    """What the spider keeps of cn-east-3's GPU flavors (pi2.2xlarge.4, p3.2xlarge.8), as
    parse_flavors hands them to a rating request."""
    infos = (spider.flavor_info(f, "f") for f in fixture_flavors("cn-east-3"))
    return [f for f in infos if f is not None]


def test_a_flavors_file_read_without_a_region_takes_it_from_the_flavors_links():
    items = list(parse_files("huawei", [FIX / "flavors_cn-north-4.json"], project_settings()))
    assert items and {i["region"] for i in items} == {"cn-north-4"}


def test_parse_flavors_file_shows_offers_without_price():
    items = list(parse_files("huawei", [FIX / "flavors_cn-north-4.json"],
                             project_settings(region="cn-north-4")))
    by_key = {(i["instance_type"], i["zone"]): i for i in items}
    # Without BSS there is no price: `parse` shows the offers as dropped (raw GPU names; the
    # catalog mapping runs for stored offers, see the crawl test).
    assert all(i["dropped"] == "no_price" for i in items)
    assert ("ac6.12xlarge.2", "") not in by_key  # the real non-GPU flavor
    v100 = by_key[("p2s.2xlarge.8", "cn-north-4a")]
    assert v100["gpu"] == "nvidia-v100" and v100["gpu_memory_gb"] == 32
    assert v100["available"] is True
    assert by_key[("p2s.2xlarge.8", "cn-north-4b")]["available"] is False
    assert ("p2s.2xlarge.8", "cn-north-4c") not in by_key  # abandon: not offered there
    ascend = by_key[("kat2ne.48xlarge.8.ei.pod101", "cn-north-4a")]
    assert ascend["gpu"] == "Ascend-910B" and ascend["gpu_count"] == 8
    assert ascend["vcpus"] == 192 and ascend["memory_gb"] == 1536
    assert by_key[("p2s.16xlarge.8", "")]["available"] is False  # region-wide sellout
    assert by_key[("pi5e.2xlarge.4", "")]["gpu"] == "nvidia-l2"  # unknown: kept raw


def test_parse_errors_name_the_code_and_the_field(tmp_path):
    with pytest.raises(ParseFailed, match="CBC.99006006"):
        list(parse_files("huawei", [FIX / "bss_error_product_not_found.json"],
                         project_settings()))
    assert list(parse_files("huawei", [FIX / "bss_on_demand_rating_response.json"],
                            project_settings())) == []
    bad = tmp_path / "bss.json"
    bad.write_text('{"currency": "CNY", "results": []}')
    with pytest.raises(ParseFailed, match="'product_rating_results' is missing"):
        list(parse_files("huawei", [bad], project_settings()))


def test_status_without_keys_names_the_env_vars(monkeypatch):
    monkeypatch.delenv("HUAWEICLOUD_SDK_AK", raising=False)
    monkeypatch.delenv("HUAWEICLOUD_SDK_SK", raising=False)
    enabled, why = HuaweiSpider.status(project_settings())
    assert not enabled and "HUAWEICLOUD_SDK_AK" in why and "HUAWEICLOUD_SDK_SK" in why
    read = json.loads('{"site": "intl"}')  # as a configuration file gives it, not a literal
    enabled, why = HuaweiSpider.status(project_settings(access_key="a", secret_key="b", **read))
    assert (enabled, why) == (True, "AK/SK found; international site, USD")
    enabled, why = HuaweiSpider.status(project_settings(access_key="a", secret_key="b"))
    assert (enabled, why) == (True, "AK/SK found; China site, CNY")


def test_crawl_splits_a_rejected_batch_and_prices_the_rest(tmp_path, provider_server, db_url):
    cfg = write_config(tmp_path / "config.yaml", endpoints=serve_standard(provider_server),
                       scrapy=FAST, sources={"huawei": {"access_key": "AKtest", "secret_key": SK}})
    proc = gpuradar("crawl", "fx", "huawei", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    result = {r["source"]: r for r in json.loads(proc.stdout)}["huawei"]
    # The rejected flavor cost only itself, and the handled rejections do not make the
    # crawl partial.
    assert result["status"] == "ok" and result["items"] == 9, result
    assert "no price for flavor pi5e.2xlarge.4" in proc.stderr
    batches = [len(r.json()["product_infos"]) for r in provider_server.requests
               if r.path.startswith("/v2/bills")]
    assert sorted(batches) == [1, 1, 1, 2, 2, 2, 3, 5]  # north 5 -> 2+3 -> ...; east 2
    ascend = gpuradar_json("prices", "--gpu", "910B", config=cfg, db_url=db_url)
    assert {o["zone"] for o in ascend} == {"cn-north-4a", "cn-north-4b"}
    assert all(o["price"] == 52.8 and o["currency"] == "CNY" for o in ascend)
    assert all(0 < o["price_per_gpu_usd"] < 52.8 / 8 for o in ascend)
    everything = gpuradar_json("prices", "--source", "huawei", "--all", config=cfg,
                               db_url=db_url)
    assert {o["gpu"] for o in everything} == {"V100-32GB", "T4", "ASCEND-910B", "A100-SXM-80GB"}
    t4 = next(o for o in everything if o["region"] == "cn-east-3" and o["zone"] == "cn-east-3b")
    assert t4["available"] is False and t4["attributes"]["spot_status"] == "normal"
    assert t4["attributes"]["account_price"] == pytest.approx(4.392)
    assert SK not in proc.stdout + proc.stderr


def test_domain_id_from_iam_or_config_signs_every_bss_call(tmp_path, provider_server,
                                                           sqlite_url):
    """BSS refuses AK/SK calls without X-Domain-Id (as the fixture server does): the spider
    learns the id from IAM once, or takes it from the config and asks IAM nothing."""
    endpoints = serve_standard(provider_server)
    for options, domain_calls in (({}, 1), ({"domain_id": "d78cbac186b744899480f25bd022f468"},
                                           0)):
        provider_server.requests.clear()
        cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                           sources={"huawei": {"access_key": "AKtest", "secret_key": SK,
                                               **options}})
        proc = gpuradar("crawl", "huawei", "--json", config=cfg, db_url=sqlite_url)
        [result] = json.loads(proc.stdout)
        assert result["status"] == "ok" and result["items"] == 9, (result, proc.stderr)
        paths = [r.path for r in provider_server.requests]
        assert paths.count("/v3/auth/domains") == domain_calls
        bss = [r for r in provider_server.requests if r.path.startswith("/v2/bills")]
        assert bss and all("x-domain-id" in r.headers["authorization"] for r in bss)
        ecs = [r for r in provider_server.requests if r.path.endswith("/flavors")]
        assert all(r.headers["x-project-id"] == r.path.split("/")[2] for r in ecs)


def test_a_page_that_repeats_ends_the_paging(tmp_path, provider_server, sqlite_url):
    """A ListFlavors server that ignores `marker` answers the same full page forever: the
    spider stops at the repeat, and the crawl is partial (nothing closed)."""
    page = json.loads((FIX / "flavors_cn-east-3.json").read_text())
    # a general-purpose flavor: no GPU, so nothing of it is priced (no BSS calls)
    template = dict(page["flavors"][0], os_extra_specs={
        "ecs:performancetype": "normal", "ecs:generation": "c7",
        "cond:operation:status": "normal"})
    page["flavors"] = [dict(template, id=f"c7.{i}.xlarge", name=f"c7.{i}.xlarge")
                       for i in range(1000)]  # a full page of non-GPU flavors
    body = json.dumps(page).encode()
    endpoints = serve_standard(provider_server)
    from tests.provider_server import Reply

    provider_server.route("GET", "/v1/09a1c2e3f4b5a6978877665544332211/cloudservers/flavors",
                          lambda req: Reply(body=body))
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"huawei": {"access_key": "AKtest", "secret_key": SK}})
    proc = gpuradar("crawl", "huawei", "--json", config=cfg, db_url=sqlite_url, timeout=60)
    [result] = json.loads(proc.stdout)
    east = [r for r in provider_server.requests
            if r.path == "/v1/09a1c2e3f4b5a6978877665544332211/cloudservers/flavors"]
    # Page 2 was asked after the last flavor of page 1, and got page 1 again.
    assert len(east) == 2 and east[1].query["marker"] == ["c7.999.xlarge"]
    assert result["status"] == "partial", result
    assert "cn-east-3 answered the same page again" in result["error"]


def test_projects_keep_every_wanted_region_in_any_order():
    """IAM lists projects in no set order: a sub-project or "MOS" listed first, or a region
    left out by the option `regions`, skips only itself."""
    data = json.loads((FIX / "iam_auth_projects.json").read_text())
    url = HuaweiSpider.endpoints["iam"]

    def regions(spider: HuaweiSpider, projects: list[dict[str, Any]]) -> list[str]:
        out = spider.parse_projects(response(dict(data, projects=projects), url))
        return [r.cb_kwargs["region"] for r in out]

    backwards = data["projects"][::-1]  # MOS, cn-north-4_ml, cn-east-3, cn-north-4
    assert regions(make_spider(), backwards) == ["cn-east-3", "cn-north-4"]
    assert regions(make_spider(regions=["cn-east-3"]), data["projects"]) == ["cn-east-3"]


def test_gpu_flavors_are_rated_100_to_a_call_each_for_one_hour():
    """BSS rates at most 100 products a call: a page of 101 GPU flavors asks twice (100,
    then 1), each product for one instance for one hour (usage_value 1 of measure 4, hours),
    so the price is that of one machine-hour."""
    template = next(f for f in fixture_flavors("cn-east-3") if f["id"] == "p3.2xlarge.8")
    page = {"flavors": [dict(template, id=f"p3.{i}.xlarge.8") for i in range(101)]}
    spider = make_spider()
    out = list(spider.parse_flavors(response(page, "https://ecs.example/flavors"),
                                    region="cn-east-3", project_id="09a1c2e3"))
    calls = [json.loads(r.body)["product_infos"] for r in out if "/ratings/" in r.url]
    assert [len(c) for c in calls] == [100, 1]
    infos = calls[0] + calls[1]
    assert [i["resource_spec"] for i in infos] == [f"p3.{i}.xlarge.8.linux" for i in range(101)]
    assert {(i["usage_factor"], i["usage_value"], i["usage_measure_id"], i["subscription_num"])
            for i in infos} == {("Duration", 1, 4, 1)}


def test_rating_without_a_result_for_one_flavor_prices_the_others():
    """A product BSS leaves out of `product_rating_results` costs only its own offers."""
    spider = make_spider()
    flavors = east_gpu_flavors(spider)
    answer = json.loads((FIX / "bss_on_demand_rating_response.json").read_text())
    # BSS answers for product 1 (p3.2xlarge.8, at its list price) and not for product 0.
    list_price = json.loads((FIX / "bss_list_prices.json").read_text())["p3.2xlarge.8.linux"]
    answer["product_rating_results"][0].update(id="1", official_website_amount=list_price)
    items = list(spider.parse_rating(response(answer, HuaweiSpider.endpoints["bss"]),
                                     region="cn-east-3", project_id="09a1c2e3",
                                     flavors=flavors))
    assert [(i.instance_type, i.price) for i in items] == [("p3.2xlarge.8", 32.4)]


def test_a_handled_bss_rejection_leaves_no_http_400_count():
    """The split-and-retry 400 is taken back out of the downloader's count (it is an answer,
    not an error); with DOWNLOADER_STATS off there is no count to take, and none is made."""
    key = "downloader/response_status_count/400"
    error = FIX / "bss_error_product_not_found.json"
    for counted in (1, None):
        spider = make_spider()
        stats = spider.crawler.stats
        if counted:
            stats.set_value(key, counted)
        out = list(spider.parse_rating(
            response(error, HuaweiSpider.endpoints["bss"], status=400), region="cn-east-3",
            project_id="09a1c2e3", flavors=east_gpu_flavors(spider)))
        assert len(out) == 2  # the batch split in halves
        assert key not in stats.get_stats(), stats.get_stats()
        assert stats.get_value("gpuradar/bss_rejected_batches") == 1


def test_a_retry_is_signed_afresh():
    """APIG refuses a signature whose X-Sdk-Date is old: a retry is signed again."""
    spider = make_spider()
    url = HuaweiSpider.endpoints["iam"]
    request = spider.signed("GET", url, spider.parse_projects)
    stale = huawei_sign(access_key="AKtest", secret_key=SK, method="GET", url=url,
                        headers=request.meta["huawei_headers"],
                        now=datetime(2020, 1, 1, tzinfo=UTC))
    retry = spider.sign_again(request.replace(headers=stale))
    assert retry.headers["X-Sdk-Date"].decode() > "2020"  # signed now, not on 2020-01-01
    assert retry.headers["Authorization"].decode() != stale["Authorization"]


def test_a_flavor_sold_region_wide_keeps_its_spot_status_per_zone():
    """A flavor with no per-AZ sell status is one region-wide offer; its spot status, which
    Huawei still gives per AZ, is kept whole on that offer rather than dropped."""
    p3 = next(f for f in fixture_flavors("cn-east-3") if f["id"] == "p3.2xlarge.8")
    p3["os_extra_specs"]["cond:spot:operation:az"] = "cn-east-3a(normal),cn-east-3b(sellout)"
    spider = make_spider()
    info = spider.flavor_info(p3, "flavors[1]")
    [offer] = spider.offers(info, "cn-east-3", 32.4, "CNY", {}, HuaweiSpider.endpoints["bss"])
    assert (offer.zone, offer.available) == ("", True)
    assert offer.attributes["spot_status"] == {"cn-east-3a": "normal", "cn-east-3b": "sellout"}


def test_a_replayed_crawl_asks_iam_for_no_domain_id(tmp_path):
    """Replaying a recording needs no account: without a domain id the spider skips IAM's
    domain lookup (a recording answers without it); a configured id is still the one sent."""
    import asyncio

    def first_request(**options: Any) -> Any:
        spider = callback_spider(HuaweiSpider, settings={"GPURADAR_REPLAY_DIR": str(tmp_path)},
                                 **options)

        async def first() -> Any:
            async for request in spider.start():
                return request
        return asyncio.run(first())

    replayed = first_request()
    assert replayed.url == HuaweiSpider.endpoints["iam"]  # the projects, not the domains
    configured = first_request(domain_id=DOMAIN)
    assert configured.url == HuaweiSpider.endpoints["iam"]
    assert configured.headers["X-Domain-Id"].decode() == DOMAIN


def test_the_international_site_from_a_config_file_rates_in_usd():
    """`site: intl`, read from a configuration file, sends every price query to the
    international BSS endpoint (USD) instead of the China one (CNY)."""
    read = json.loads('{"site": "intl"}')  # as a configuration file gives it, not a literal
    flavors = east_gpu_flavors(make_spider())
    for options, endpoint in (({}, "bss"), (read, "bss_intl")):
        request = make_spider(**options).rating_request("cn-east-3", "09a1c2e3", flavors)
        assert request.url == HuaweiSpider.endpoints[endpoint]


def test_a_rejection_other_than_an_unknown_product_is_logged_with_its_message(caplog):
    """A BSS 400 that is not "product not found" is not split and retried: the batch is
    logged once with Huawei's code and message (a body in BSS's error shape; the code and
    message as public code using BSS shows them for a bad parameter)."""
    spider = make_spider()
    flavors = east_gpu_flavors(spider)
    body = {"error_code": "CBC.0100", "error_msg": "invalid parameter"}
    out = list(spider.parse_rating(response(body, HuaweiSpider.endpoints["bss"], status=400),
                                   region="cn-east-3", project_id="09a1c2e3", flavors=flavors))
    assert out == []
    assert ("huawei: BSS rating in cn-east-3 failed: CBC.0100 invalid parameter"
            in caplog.text)


def test_parse_reads_the_iam_and_az_answers_as_no_offers():
    """`gpuradar parse huawei` on a recorded IAM answer (domains or projects) or AZ list: no
    offers and no error, as for any answer of the crawl that carries no price."""
    for name in ("iam_auth_domains.json", "iam_auth_projects.json",
                 "reference_nova_availability_zones_docs_example.json"):
        assert list(parse_files("huawei", [FIX / name], project_settings())) == []


def test_a_rating_keeps_the_currency_bss_states():
    """BSS states the currency of its answer (USD on the international site): the offers are
    stored in it; an empty currency means CNY (the China site's)."""
    spider = make_spider()
    flavors = east_gpu_flavors(spider)[:1]
    answer = json.loads((FIX / "bss_on_demand_rating_response.json").read_text())
    currencies = []
    for stated in ("USD", ""):
        answer["currency"] = stated
        items = list(spider.parse_rating(response(answer, HuaweiSpider.endpoints["bss_intl"]),
                                         region="ap-southeast-1", project_id="09a1c2e3",
                                         flavors=flavors))
        currencies.append({i.currency for i in items})
    assert currencies == [{"USD"}, {"CNY"}]


def test_an_az_the_flavor_does_not_list_takes_the_region_status():
    """huaweicloudsdkecs FlavorExtraSpec: an AZ missing from `cond:operation:az` takes the
    region-level `cond:operation:status` ("normal" when absent). "normal, one AZ sold out"
    is on sale in every other AZ of the region (from NovaListAvailabilityZones); "abandon,
    some AZs listed" is offered in the listed ones alone (the SDK's own example)."""
    pi2 = next(f for f in fixture_flavors("cn-east-3") if f["id"] == "pi2.2xlarge.4")
    region = frozenset({"cn-east-3a", "cn-east-3b", "cn-east-3c"})
    spider = make_spider()

    def zones(status: str | None, listed: str) -> dict[str, bool]:
        specs = dict(pi2["os_extra_specs"], **{"cond:operation:az": listed})
        specs.pop("cond:operation:status")
        if status is not None:
            specs["cond:operation:status"] = status
        info = spider.flavor_info(dict(pi2, os_extra_specs=specs), "f", region)
        return {o.zone: o.available for o in spider.offers(info, "cn-east-3", 1.0, "CNY", {},
                                                           HuaweiSpider.endpoints["bss"])}

    assert zones("normal", "cn-east-3b(sellout)") == {
        "cn-east-3a": True, "cn-east-3b": False, "cn-east-3c": True}
    assert zones(None, "cn-east-3b(sellout)") == zones("normal", "cn-east-3b(sellout)")
    assert zones("sellout", "cn-east-3a(normal)") == {
        "cn-east-3a": True, "cn-east-3b": False, "cn-east-3c": False}
    assert zones("abandon", "cn-east-3a(normal),cn-east-3b(obt_sellout)") == {
        "cn-east-3a": True, "cn-east-3b": False}
    # An AZ listed as abandoned stays out whatever the region says.
    assert zones("normal", "cn-east-3c(abandon)") == {"cn-east-3a": True, "cn-east-3b": True}


def test_the_documented_az_list_names_the_regions_zones():
    """NovaListAvailabilityZones' documented answer (ECS API reference ecs_03_1801): the
    spider reads `zoneName`s and asks for the flavors with them; an AZ whose `zoneState`
    says unavailable is left out."""
    spider = make_spider()
    doc = json.loads((FIX / "reference_nova_availability_zones_docs_example.json").read_text())
    url = HuaweiSpider.endpoints["ecs_zones"].format(region="cn-east-2", project_id="p")
    [request] = spider.parse_zones(response(doc, url), region="cn-east-2", project_id="p")
    assert request.cb_kwargs["region_zones"] == {"cn-east-2a", "cn-east-2b"}
    assert "/cloudservers/flavors?" in request.url
    doc["availabilityZoneInfo"][1]["zoneState"]["available"] = False
    [request] = spider.parse_zones(response(doc, url), region="cn-east-2", project_id="p")
    assert request.cb_kwargs["region_zones"] == {"cn-east-2a"}
    # only an explicit false: a state that does not say (null) leaves the AZ listed
    doc["availabilityZoneInfo"][1]["zoneState"]["available"] = None
    [request] = spider.parse_zones(response(doc, url), region="cn-east-2", project_id="p")
    assert request.cb_kwargs["region_zones"] == {"cn-east-2a", "cn-east-2b"}


def test_crawl_offers_a_flavor_in_the_azs_it_does_not_list(tmp_path, provider_server,
                                                           sqlite_url):
    """Over HTTP: cn-east-3's pi2.2xlarge.4 is "normal" region-wide with one AZ listed as
    sold out; it is stored on sale in the region's other available AZs (3a, 3c; 3d is
    unavailable in the AZ list) and sold out in 3b."""
    page = json.loads((FIX / "flavors_cn-east-3.json").read_text())
    pi2 = next(f for f in page["flavors"] if f["id"] == "pi2.2xlarge.4")
    pi2["os_extra_specs"].update({"cond:operation:status": "normal",
                                  "cond:operation:az": "cn-east-3b(sellout)"})
    endpoints = serve_standard(provider_server)
    from tests.provider_server import Reply

    provider_server.route("GET", "/v1/09a1c2e3f4b5a6978877665544332211/cloudservers/flavors",
                          lambda req: Reply(body=json.dumps(page).encode()))
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"huawei": {"access_key": "AKtest", "secret_key": SK,
                                           "regions": ["cn-east-3"]}})
    proc = gpuradar("crawl", "huawei", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok", (result, proc.stderr)
    t4 = gpuradar_json("prices", "--source", "huawei", "--gpu", "T4", "--all", config=cfg,
                       db_url=sqlite_url)
    assert {(o["instance_type"], o["zone"]): o["available"] for o in t4} == {
        ("pi2.2xlarge.4", "cn-east-3a"): True, ("pi2.2xlarge.4", "cn-east-3b"): False,
        ("pi2.2xlarge.4", "cn-east-3c"): True}


def test_a_failed_az_list_still_lists_the_flavors_and_says_the_crawl_is_partial(
        tmp_path, provider_server, sqlite_url):
    """Without the AZ list, the AZs a flavor names are still offered, but the crawl is
    partial: an unnamed AZ it could not offer must not be closed as vanished."""
    endpoints = serve_standard(provider_server)
    from tests.provider_server import Reply

    provider_server.route("GET", "/v2.1/09a1c2e3f4b5a6978877665544332211/os-availability-zone",
                          lambda req: Reply(404, b'{"error": {"code": "Ecs.0001"}}'))
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"huawei": {"access_key": "AKtest", "secret_key": SK,
                                           "regions": ["cn-east-3"]}})
    proc = gpuradar("crawl", "huawei", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "partial", (result, proc.stderr)
    assert "AZ list of cn-east-3 failed" in result["error"]
    assert result["items"] == 3  # pi2 in its listed 3a, 3b; p3 region-wide


@pytest.mark.parametrize(("charge", "on_demand"), [
    (None, True), ("demand", True), ("period,demand", True), ("period", False)])
def test_a_subscription_only_flavor_gets_no_on_demand_offer(charge, on_demand):
    """`cond:operation:charge` (huaweicloudsdkecs FlavorExtraSpec: period = subscription,
    demand = on-demand, absent = both) was ignored: a subscription-only GPU or Ascend flavor
    got on-demand offers priced by BSS's on-demand rating."""
    pi2 = next(f for f in fixture_flavors("cn-east-3") if f["id"] == "pi2.2xlarge.4")
    specs = dict(pi2["os_extra_specs"])
    specs.pop("cond:operation:charge", None)
    if charge is not None:
        specs["cond:operation:charge"] = charge
    spider = make_spider()
    info = spider.flavor_info(dict(pi2, os_extra_specs=specs), "flavors[0]")
    assert (info is not None) is on_demand
    if not on_demand:
        assert spider.crawler.stats.get_value("gpuradar/skipped/subscription_only") == 1


def test_an_early_flavor_typed_by_hws_performancetype_is_read():
    """Flavors registered early carry `hws:performancetype`, not `ecs:performancetype`
    (huaweicloudsdkecs FlavorExtraSpec); they were dropped."""
    p3 = next(f for f in fixture_flavors("cn-east-3") if f["id"] == "p3.2xlarge.8")
    specs = dict(p3["os_extra_specs"])
    specs["hws:performancetype"] = specs.pop("ecs:performancetype")
    info = make_spider().flavor_info(dict(p3, os_extra_specs=specs), "flavors[0]")
    assert info is not None and info["kind"] == "gpu" and info["count"] >= 1


def test_the_eu_site_asks_its_own_iam_and_bss_hosts(tmp_path, provider_server, sqlite_url):
    """`site: eu`: IAM and BSS are asked at the EU site's endpoints (by default the
    EU_WEST_101 hosts of huaweicloudsdkiam v3 and huaweicloudsdkbssintl 3.1.219; here
    configured to loopback paths under /eu), never at the China site's; ECS at its regional
    host, as for any site (huaweicloudsdkecs EU_WEST_101 is ecs.eu-west-101.myhuaweicloud.com)."""
    from gpuradar.core.providers.huawei import HUAWEI

    assert HUAWEI.endpoints["iam_domains_eu"] == \
        "https://iam.eu-west-101.myhuaweicloud.eu/v3/auth/domains"
    assert HUAWEI.endpoints["iam_eu"] == "https://iam.eu-west-101.myhuaweicloud.eu/v3/auth/projects"
    assert HUAWEI.endpoints["bss_eu"] == \
        "https://bss.myhuaweicloud.eu/v2/bills/ratings/on-demand-resources"
    endpoints = serve_standard(provider_server)
    for china, eu, method in (("iam_domains", "iam_domains_eu", "GET"), ("iam", "iam_eu", "GET"),
                              ("bss", "bss_eu", "POST")):
        path = endpoints[f"huawei.{china}"].removeprefix(provider_server.base)
        provider_server.route(method, "/eu" + path, provider_server.routes[(method, path)])
        endpoints[f"huawei.{eu}"] = provider_server.base + "/eu" + path
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"huawei": {"access_key": "AKtest", "secret_key": SK,
                                           "site": "eu"}})
    proc = gpuradar("crawl", "huawei", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    asked = [r.path for r in provider_server.requests]
    global_calls = [p for p in asked if p.startswith(("/v3/", "/v2/bills", "/eu/"))]
    assert {p.split("/")[2] for p in global_calls} == {"v3", "v2"}, asked  # IAM and BSS
    assert all(p.startswith("/eu/") for p in global_calls), asked
    assert any(p.startswith("/v1/") for p in asked)  # ECS: the regional host
    assert json.loads(proc.stdout)[0]["items"] > 0


def test_an_empty_currency_is_the_sites_own():
    """An empty `currency` means CNY in the China site's BSS (huaweicloudsdkbss's
    ListOnDemandResourceRatingsResponse: "值为空代表人民币") and USD in the international BSS API
    that the intl and EU sites use (huaweicloudsdkbssintl's: "值为空代表美元")."""
    answer = json.loads((FIX / "bss_on_demand_rating_response.json").read_text())
    answer["currency"] = ""
    found = {}
    for site in ("cn", "intl", "eu"):
        spider = make_spider(site=site)
        items = list(spider.parse_rating(response(answer, spider.rating_request(
            "cn-east-3", "09a1c2e3", east_gpu_flavors(spider)[:1]).url),
            region="cn-east-3", project_id="09a1c2e3", flavors=east_gpu_flavors(spider)[:1]))
        found[site] = {i.currency for i in items}
    assert found == {"cn": {"CNY"}, "intl": {"USD"}, "eu": {"USD"}}
