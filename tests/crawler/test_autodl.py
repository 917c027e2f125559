"""AutoDL: machine-list parsing (per-GPU prices in 1/1000 CNY, idle GPUs), data-center stock
from the developer API, and a real crawl of both through the fixture server."""

from __future__ import annotations

import json

import pytest
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from gpuradar.crawler.parsing import ParseFailed, parse_files
from gpuradar.crawler.spiders.autodl import AutodlSpider
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response, spider_settings
from tests.provider_server import Reply, serve_standard

FIX = FIXTURES / "autodl"
WEB_TOKEN = "eyJhbGciOi-autodl-web-token-never-shown"
DEV_TOKEN = "autodl-dev-token-never-shown"
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}


def project_settings(**options) -> Settings:
    return spider_settings("autodl", **options)


def test_machine_list_page():
    items = {i["instance_type"]: i for i in parse_files(
        "autodl", [FIX / "machine_list_page1.json"], project_settings())}
    documented = items["2dd949a4cf"]  # the documented item: payg_price 2720 -> 2.72 CNY/GPU-h
    assert documented["price"] == 2.72 and documented["currency"] == "CNY"
    assert documented["gpu"] == "RTX-4090" and documented["gpu_count"] == 1
    assert documented["region"] == "west-B" and documented["attributes"]["region_name"] == "西北B区"
    assert documented["memory_gb"] == 90 and documented["available_count"] == 3
    assert documented["price_usd"] < documented["price"]
    member = items["5a1f0c9b2e"]
    assert member["attributes"]["member_price"] == 1.88 and member["price"] == 1.98
    busy = items["7c2d4e6f80"]
    assert busy["available"] is False and busy["available_count"] == 0


def test_ascend_machine_maps_to_the_catalog():
    items = list(parse_files("autodl", [FIX / "machine_list_page2.json"], project_settings()))
    ascend = next(i for i in items if i["instance_type"] == "c0ffee1234")
    assert ascend["gpu"] == "ASCEND-910B" and ascend["price"] == 7.5


def test_stock_file_without_prices_shows_dropped_offers():
    items = list(parse_files("autodl", [FIX / "gpu_stock_westDC2.json"], project_settings()))
    assert {i["instance_type"] for i in items} == {"stock:RTX 4090", "stock:RTX 3090", "stock:L20"}
    assert all(i["dropped"] == "no_price" for i in items)
    priced = list(parse_files("autodl", [FIX / "gpu_stock_westDC2.json"],
                              project_settings(prices={"RTX 4090": 1.98})))
    r4090 = next(i for i in priced if i["instance_type"] == "stock:RTX 4090")
    assert r4090["price"] == 1.98 and r4090["available_count"] == 12
    assert r4090["available"] is True and "dropped" not in r4090
    # No idle GPU of a model in the data center: its offer is unavailable, not dropped.
    r3090 = next(i for i in items if i["instance_type"] == "stock:RTX 3090")
    assert r3090["available"] is False and r3090["available_count"] == 0


def test_a_stock_count_below_zero_is_no_idle_gpu(tmp_path):
    """An idle count under zero (no real answer has one) never makes a model available."""
    body = {"code": "Success", "msg": "", "data": [
        {"RTX 4090": {"idle_gpu_num": -1, "total_gpu_num": 480}}]}
    path = tmp_path / "gpu_stock.json"
    path.write_text(json.dumps(body))
    [item] = parse_files("autodl", [path], project_settings(prices={"RTX 4090": 1.98}))
    assert item["instance_type"] == "stock:RTX 4090" and item["available"] is False


def test_expired_token_is_a_clear_error():
    with pytest.raises(ParseFailed, match="AuthorizeFailed"):
        list(parse_files("autodl", [FIX / "error_authorize_failed.json"], project_settings()))


def test_status_explains_both_tokens(monkeypatch):
    monkeypatch.delenv("AUTODL_WEB_TOKEN", raising=False)
    monkeypatch.delenv("AUTODL_DEV_TOKEN", raising=False)
    enabled, why = AutodlSpider.status(project_settings())
    assert not enabled
    assert "AUTODL_WEB_TOKEN" in why and "AUTODL_DEV_TOKEN" in why and "UNOFFICIAL" in why
    enabled, why = AutodlSpider.status(project_settings(dev_token="x", prices={"RTX 4090": 2}))
    assert enabled and "1 GPU price" in why and "web_token" not in why
    enabled, why = AutodlSpider.status(project_settings(web_token="x"))
    assert enabled and "machine list prices" in why and "dev_token" not in why


def test_machine_list_pages_are_asked_with_the_token_and_paced():
    """Page 1 names the other pages (`max_page`): each is asked with the same console token,
    0.2 s apart as the public clients do; an empty answer (no machine matches the filters,
    `max_page` 0) asks for no other page."""
    settings = project_settings(web_token=WEB_TOKEN)
    crawler = get_crawler(AutodlSpider, settings.copy_to_dict())
    spider = crawler._create_spider()
    url = AutodlSpider.endpoints["machine_list"]
    out = list(spider.parse_machines(response(FIX / "machine_list_page1.json", url)))
    pages = [r for r in out if isinstance(r, Request)]
    assert [json.loads(r.body)["page_index"] for r in pages] == [2]
    assert pages[0].headers["Authorization"].decode() == WEB_TOKEN
    empty = {"code": "Success", "msg": "",
             "data": {"list": [], "page_index": 1, "page_size": 3, "max_page": 0}}
    assert list(spider.parse_machines(response(empty, url))) == []
    AutodlSpider.update_settings(settings)
    assert (settings.getfloat("DOWNLOAD_DELAY"), settings.getfloat("DOWNLOAD_DELAY_JITTER"),
            settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")) == (0.2, 0.0, 1)


def test_crawl_both_paths_into_storage(tmp_path, provider_server, db_url):
    cfg = write_config(tmp_path / "config.yaml", endpoints=serve_standard(provider_server),
                       scrapy=FAST, sources={"autodl": {
                           "web_token": WEB_TOKEN, "dev_token": DEV_TOKEN,
                           "prices": {"RTX 4090": 1.98, "L20": 2.48}}})
    proc = gpuradar("crawl", "fx", "autodl", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    result = {r["source"]: r for r in json.loads(proc.stdout)}["autodl"]
    # 6 machines over 2 pages + 2 priced GPUs of westDC2's stock (RTX 3090 has no price).
    assert result["status"] == "ok" and result["items"] == 8, result
    pages = [r for r in provider_server.requests if r.path == "/api/v1/user/machine/list"]
    assert sorted(r.json()["page_index"] for r in pages) == [1, 2]
    assert {r.headers.get("authorization") for r in pages} == {WEB_TOKEN}
    # AutoDL runs only in mainland China: the `mainland` region alias keeps all its offers.
    offers = gpuradar_json("prices", "--gpu", "4090", "--source", "autodl",
                           "--region", "mainland", config=cfg, db_url=db_url)
    assert {o["instance_type"] for o in offers} == {"2dd949a4cf", "5a1f0c9b2e", "stock:RTX 4090"}
    cheapest = offers[0]
    assert (cheapest["price"], cheapest["currency"]) == (1.98, "CNY")
    assert cheapest["price_per_gpu_usd"] == pytest.approx(cheapest["price_usd"])
    assert 0.2 < cheapest["price_usd"] < 0.35  # 1.98 CNY through the stored ECB rate
    stock = next(o for o in offers if o["instance_type"] == "stock:RTX 4090")
    assert stock["region"] == "westDC2" and stock["available_count"] == 12
    assert WEB_TOKEN not in proc.stdout + proc.stderr and DEV_TOKEN not in proc.stderr


def test_a_data_center_refusing_the_stock_query_is_named_and_the_others_kept(
        tmp_path, provider_server, sqlite_url):
    """One data centre answering an error costs only its own stock: the crawl is partial
    (it closes nothing), its error names the data centre, the others' offers are stored."""
    endpoints = serve_standard(provider_server)

    def stock(req) -> Reply:
        body = {"westDC2": "gpu_stock_westDC2.json",
                "westDC3": "error_authorize_failed.json"}.get(req.json()["region_sign"])
        return Reply(body=(FIX / body).read_bytes() if body
                     else b'{"code": "Success", "msg": "", "data": []}')

    provider_server.route("POST", "/api/v1/dev/machine/region/gpu_stock", stock)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"autodl": {"dev_token": DEV_TOKEN, "prices": {"RTX 4090": 1.98}}})
    proc = gpuradar("crawl", "autodl", "--json", config=cfg, db_url=sqlite_url)
    (result,) = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["closed"]) == ("partial", 1, 0)
    assert "AuthorizeFailed" in result["error"]
    assert result["error"].endswith("(data center westDC3)")


def test_stock_query_sends_no_cuda_or_price_filter(tmp_path, provider_server, sqlite_url):
    """AutoDL's documentation example of a gpu_stock request filters cuda_v_from 118 to
    cuda_v_to 125 and price 0 to 300. cuda_v_to is the highest CUDA version a host may need:
    sent as filters, every host needing CUDA 12.8+ (RTX 5090, RTX PRO 6000) counted as zero
    idle. Each data centre's query now sends its region_sign and the GPU names only; the
    default names include RTX PRO 6000."""
    documented = json.loads((FIX / "reference_dev_gpu_stock_request_docs_example.json")
                            .read_text())
    cfg = write_config(tmp_path / "config.yaml", endpoints=serve_standard(provider_server),
                       scrapy=FAST, sources={"autodl": {
                           "dev_token": DEV_TOKEN, "data_centers": ["westDC2", "beijingDC1"],
                           "prices": {"RTX 4090": 1.98}}})
    proc = gpuradar("crawl", "autodl", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok", (result, proc.stderr)
    bodies = [r.json() for r in provider_server.requests
              if r.path == "/api/v1/dev/machine/region/gpu_stock"]
    assert sorted(b["region_sign"] for b in bodies) == ["beijingDC1", "westDC2"]
    west = next(b for b in bodies if b["region_sign"] == "westDC2")
    assert set(west) == {"region_sign", "gpu_name_set"}
    assert not {"cuda_v_from", "cuda_v_to", "price_from", "price_to"} & set(west)
    assert set(documented["gpu_name_set"]) <= set(west["gpu_name_set"])
    assert {"RTX 5090", "RTX PRO 6000"} <= set(west["gpu_name_set"])


def test_blackwell_hosts_are_counted(tmp_path, provider_server, sqlite_url):
    """A stand-in for AutoDL that applies the filters as the documentation names them
    (cuda_v_to: the highest CUDA a host may need; the RTX 5090 and RTX PRO 6000 hosts need
    CUDA 12.8, "128"): with the example's 125 sent, their stock read as none; sent without it,
    the idle Blackwell GPUs are stored, priced from `sources.autodl.prices`."""
    stock = {"code": "Success", "msg": "", "data": [
        {"RTX 4090": {"idle_gpu_num": 12, "total_gpu_num": 480}},
        {"RTX 5090": {"idle_gpu_num": 7, "total_gpu_num": 40}},
        {"RTX PRO 6000": {"idle_gpu_num": 2, "total_gpu_num": 16}}]}
    blackwell = {"RTX 5090", "RTX PRO 6000"}

    def filtered(req):
        body = req.json() or {}
        cap = body.get("cuda_v_to")
        data = [e for e in stock["data"]
                if cap is None or cap >= 128 or not (set(e) & blackwell)]
        asked = set(body.get("gpu_name_set") or ())
        data = [e for e in data if set(e) & asked]
        return Reply(body=json.dumps({**stock, "data": data}).encode())

    endpoints = serve_standard(provider_server)
    provider_server.route("POST", "/api/v1/dev/machine/region/gpu_stock", filtered)
    cfg = write_config(tmp_path / "config.yaml", endpoints=endpoints, scrapy=FAST,
                       sources={"autodl": {"dev_token": DEV_TOKEN, "data_centers": ["westDC2"],
                                           "prices": {"RTX 4090": 1.98, "RTX 5090": 3.03,
                                                      "RTX PRO 6000": 5.98}}})
    proc = gpuradar("crawl", "autodl", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["items"] == 3, (result, proc.stderr)
    offers = gpuradar_json("prices", "--source", "autodl", config=cfg, db_url=sqlite_url)
    assert {(o["gpu"], o["available_count"]) for o in offers} == {
        ("RTX-4090", 12), ("RTX-5090", 7), ("RTX-PRO-6000", 2)}
