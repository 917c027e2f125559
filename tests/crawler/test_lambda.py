"""Lambda: the Cloud API (with a key) and the public pricing page (without), on recorded
answers in Lambda's formats (the page from a real capture), and real crawls into storage."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.lambda_ import LambdaSpider, _size_gb
from gpuradar.storage.queries import OfferFilter, current_offers
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response
from tests.provider_server import Reply, serve_standard

FIX = FIXTURES / "lambda"
PAGE_URL = "https://lambda.ai/pricing"
API_URL = "https://cloud.lambda.ai/api/v1/instance-types"
KEY = "secret_lambda_key_0123456789"


def spider(**options: Any) -> LambdaSpider:
    s = LambdaSpider()
    s.settings = Settings({"GPURADAR_SOURCES": {"lambda": options}})
    return s


def page(html: str | None = None, name: str = "pricing.html") -> list[PriceItem]:
    body = html if html is not None else FIX / name
    return list(spider().parse_pricing_page(response(body, PAGE_URL, kind="html")))


def api(types: dict | None = None, **options: Any) -> list[PriceItem]:
    data = types or json.loads((FIX / "instance_types.json").read_text())
    return list(spider(**options).api_offers(data, API_URL))


# -- the pricing page ------------------------------------------------------------------------
def test_pricing_page_instances_tables_price_per_instance_hour():
    items = {i.instance_type: i for i in page()}
    assert len(items) == 22
    h100 = items["8x NVIDIA H100 SXM 80 GB"]
    # $3.99 per GPU-hour on the 8x tab (real capture) -> the 8-GPU instance costs $31.92/h.
    assert (h100.price, h100.gpu_count, h100.attributes["price_per_gpu"]) == (31.92, 8, 3.99)
    assert (h100.gpu, h100.gpu_memory_gb, h100.vcpus) == ("NVIDIA H100 SXM", 80, 208)
    assert h100.memory_gb == pytest.approx(1800 * 1.0737, abs=0.1)  # 1800 GiB
    assert h100.region == "global" and h100.available is None and h100.currency == "USD"
    # The same plan prices differently per tab: the tab's GPU count is part of the identity.
    assert [items[f"{n}x NVIDIA B200 SXM6 180 GB"].price for n in (8, 4, 2, 1)] == [
        53.52, 27.16, 13.78, 6.99]
    # Two A100 SXM rows in one tab, told apart by their memory.
    assert items["8x NVIDIA A100 SXM 40 GB"].price == pytest.approx(15.92)
    assert items["8x NVIDIA A100 SXM 80 GB"].price == pytest.approx(22.32)


def test_reserved_cluster_tables_and_escaped_copies_are_ignored():
    items = page()
    assert not any("HGX" in i.gpu or i.gpu == "NVIDIA H100" for i in items)  # 1-Click Clusters
    assert not any(i.attributes["price_per_gpu"] in (5.29, 2.69, 0.01) for i in items)
    assert "window.__islands" in (FIX / "pricing.html").read_text()


def test_real_capture_excerpt_parses_the_tabs_it_holds(caplog):
    items = page(name="pricing_excerpt_real.html")
    counts = sorted({i.gpu_count for i in items})
    assert counts == [1, 8] and len(items) == 11  # the excerpt kept the 8x and 1x panels
    assert {i.gpu for i in items if i.gpu_count == 1} == {
        "NVIDIA B200 SXM6", "NVIDIA GH200", "NVIDIA H100 SXM", "NVIDIA H100 PCIe", "NVIDIA A10",
        "NVIDIA Quadro RTX 6000"}
    # The 4x/2x panels were cut from the excerpt: reported as errors (crawl partial).
    assert "the 4x tab's panel" in caplog.text and "the 2x tab's panel" in caplog.text


def test_unpriced_row_is_skipped_and_a_changed_price_format_is_an_error():
    html = (FIX / "pricing.html").read_text()
    items = page(html.replace(">$0.69<", ">Contact sales<"))
    assert "1x NVIDIA Quadro RTX 6000 24 GB" not in {i.instance_type for i in items}
    assert len(items) == 21
    with pytest.raises(ParseError, match=r"lambda:.*'PRICE/GPU/HR\*' is '€3.99'.*8x"):
        page(html.replace(">$3.99<", ">€3.99<"))


def test_page_structure_changes_are_clear_errors():
    html = (FIX / "pricing.html").read_text()
    with pytest.raises(ParseError, match="'<h2>Instances pricing</h2>' is missing"):
        page(html.replace(">Instances pricing<", ">On-demand pricing<"))
    with pytest.raises(ParseError, match="'tab label' is 'Eight GPUs'"):
        page(html.replace('tab-button">8x<', 'tab-button">Eight GPUs<'))
    with pytest.raises(ParseError, match="'<td data-label=vCPUs>' is missing"):
        page(html.replace('data-label="vCPUs"', 'data-label="CPU cores"'))
    # A vCPU count that is no number leaves the count unknown, not the row unread.
    odd = {i.instance_type: i for i in page(html.replace(
        '<td data-label="vCPUs">208</td>', '<td data-label="vCPUs">varies</td>', 1))}
    assert odd["8x NVIDIA B200 SXM6 180 GB"].vcpus is None and len(odd) == 22
    # A later section with the same title (a FAQ, a footer) does not hide the tables.
    assert len(page(html.replace("</body>", "<h2>Instances pricing</h2><p>FAQ</p></body>"))) \
        == 22
    # Tables without rows (the rows renamed): an error, never an empty successful crawl.
    with pytest.raises(ParseError, match="no rows in the instances tables"):
        page(html.replace("data-plan=", "data-product="))


def test_requests_to_lambda_are_a_second_apart():
    """Lambda's API allows about one request per second per key: the crawl waits that long
    between requests, without jitter, unless `request_interval` says otherwise."""
    settings = Settings({"GPURADAR_SOURCES": {"lambda": {}}})
    LambdaSpider.update_settings(settings)
    assert (settings.getfloat("DOWNLOAD_DELAY"), settings.getfloat("DOWNLOAD_DELAY_JITTER"),
            settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")) == (1.0, 0.0, 1)
    slower = Settings({"GPURADAR_SOURCES": {"lambda": {"request_interval": 3}}})
    LambdaSpider.update_settings(slower)
    assert slower.getfloat("DOWNLOAD_DELAY") == 3.0


# -- the API ---------------------------------------------------------------------------------
def test_api_offers_one_per_region_where_the_type_has_capacity():
    """The API names a region only where a type has capacity: that is where it is offered.
    It used to store every type as unavailable in every region Lambda serves, so "never
    offered here" looked like "sold out here" and the offer count was inflated (11 x 10)."""
    items = api()
    assert sorted((i.instance_type, i.region) for i in items) == [
        ("gpu_1x_a10", "us-east-1"), ("gpu_1x_a10", "us-west-1"),
        ("gpu_1x_gh200", "us-east-3"), ("gpu_1x_gh200", "us-south-3"),
        ("gpu_1x_h100_pcie", "us-east-1"), ("gpu_1x_h100_pcie", "us-west-3"),
        ("gpu_1x_h100_sxm5", "us-south-2"), ("gpu_1x_rtx6000", "us-south-1"),
        ("gpu_8x_a100_80gb_sxm4", "us-midwest-1"), ("gpu_8x_b200_sxm6", "us-east-3")]
    assert all(i.available is True for i in items)
    by_key = {(i.instance_type, i.region): i for i in items}
    h100 = by_key[("gpu_1x_h100_sxm5", "us-south-2")]
    assert (h100.price, h100.gpu_count, h100.gpu, h100.vcpus) == (4.29, 1, "H100 (80 GB SXM5)", 26)
    assert h100.memory_gb == 241.6  # 225 GiB, to 0.1 GB
    assert not any(i.instance_type == "gpu_8x_h100_sxm5" for i in items)  # no capacity
    assert by_key[("gpu_8x_a100_80gb_sxm4", "us-midwest-1")].price == 22.32  # cents -> $
    assert [i.region for i in api(regions=["us-east-1"])] == ["us-east-1", "us-east-1"]


def test_api_description_gives_count_and_gpu_when_the_newer_fields_are_absent():
    data = {"data": {"gpu_1x_a100": {"instance_type": {
        "description": "1x RTX A100 (24 GB)", "name": "gpu_1x_a100",
        "price_cents_per_hour": "80", "specs": {"vcpus": 24, "memory_gib": 800,
                                                 "storage_gib": 512}},
        "regions_with_capacity_available": [{"description": "Austin, Texas",
                                             "name": "us-tx-1"}]}}}
    [item] = api(data)  # the OpenAPI example: price as a string, no gpu_description/gpus
    assert (item.gpu_count, item.gpu, item.price, item.region) == (1, "RTX A100 (24 GB)", 0.8,
                                                                    "us-tx-1")


def test_api_cpu_only_types_are_skipped_wherever_they_are_listed():
    data = json.loads((FIX / "instance_types.json").read_text())
    cpu = {"cpu_4x_general": {"instance_type": {
        "name": "cpu_4x_general", "description": "4x vCPU", "price_cents_per_hour": 12,
        "specs": {"vcpus": 4, "memory_gib": 16, "storage_gib": 128, "gpus": 0}},
        "regions_with_capacity_available": [{"name": "us-east-1"}]}}
    data["data"] = {**cpu, **data["data"]}  # listed first
    items = api(data)
    assert "cpu_4x_general" not in {i.instance_type for i in items}
    assert len({i.instance_type for i in items}) == 7  # the GPU types with capacity


@pytest.mark.parametrize("description, specs, gpu_description", [
    ("1x H100 (80 GB SXM5)", {"vcpus": 26, "gpus": 0}, "H100 (80 GB SXM5)"),  # no GPU counted
    ("Custom instance", {"vcpus": 26, "gpus": 1}, None),  # a GPU counted, but no model named
    ("Custom instance", {"vcpus": 26, "gpus": 1}, ""),
])
def test_api_type_without_both_a_gpu_count_and_a_gpu_model_gives_no_offer(
        description, specs, gpu_description):
    """An offer needs how many GPUs and which: a type with capacity that lacks either is
    skipped like a CPU-only one, not offered with 0 GPUs or with no GPU model."""
    itype = {"name": "gpu_odd", "description": description, "price_cents_per_hour": 300,
             "specs": specs}
    if gpu_description is not None:
        itype["gpu_description"] = gpu_description
    data = {"data": {"gpu_odd": {"instance_type": itype,
                                 "regions_with_capacity_available": [{"name": "us-east-1"}]}}}
    assert api(data) == []
    itype["specs"] = {**specs, "gpus": 1}
    itype["gpu_description"] = "H100 (80 GB SXM5)"
    [item] = api(data)  # with both, the same type is offered
    assert (item.instance_type, item.gpu_count, item.gpu) == ("gpu_odd", 1, "H100 (80 GB SXM5)")


def test_api_storage_is_stored_in_gb_and_a_price_that_is_no_number_is_an_error():
    by_type = {i.instance_type: i for i in api()}
    assert by_type["gpu_1x_h100_pcie"].attributes["storage_gb"] == 1100  # 1024 GiB
    data = json.loads((FIX / "instance_types.json").read_text())
    data["data"]["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = "n/a"
    with pytest.raises(ParseError, match="'price_cents_per_hour' is 'n/a', not a number"):
        api(data)


def test_api_renamed_fields_are_clear_errors():
    data = json.loads((FIX / "instance_types.json").read_text())
    entry = data["data"]["gpu_1x_a10"]["instance_type"]
    entry["price_cents"] = entry.pop("price_cents_per_hour")
    with pytest.raises(ParseError, match=r"'price_cents_per_hour' is missing.*gpu_1x_a10"):
        api(data)
    data = json.loads((FIX / "instance_types.json").read_text())
    for entry in data["data"].values():
        entry["regions_with_capacity"] = entry.pop("regions_with_capacity_available")
    with pytest.raises(ParseError, match="'regions_with_capacity_available' is missing"):
        api(data)
    with pytest.raises(ParseError, match="'data' is empty"):
        api({"data": {}})


def test_key_selects_the_api_and_travels_only_in_a_header():
    async def first(s: LambdaSpider):
        return [r async for r in s.start()]

    [req] = asyncio.run(first(spider(api_key=KEY)))
    assert req.url == API_URL and req.headers["Authorization"] == f"Bearer {KEY}".encode()
    assert KEY not in req.url
    [req] = asyncio.run(first(spider()))
    assert req.url == PAGE_URL and b"Authorization" not in req.headers


def test_status_says_which_path_runs():
    no_key = LambdaSpider.status(Settings({"GPURADAR_SOURCES": {}}))
    assert no_key[0] is True and "pricing page" in no_key[1] and "LAMBDA_API_KEY" in no_key[1]
    with_key = LambdaSpider.status(Settings({"GPURADAR_SOURCES": {"lambda": {"api_key": KEY}}}))
    assert with_key == (True, "API key found: instance-types API, live availability per region")
    assert KEY not in with_key[1]


def test_gpuradar_parse_on_each_kind_of_answer(tmp_path):
    proc = gpuradar("parse", "lambda", str(FIX / "pricing.html"),
                    str(FIX / "instance_types.json"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    page_rows = [r for r in rows if r["region"] == "global"]
    api_rows = [r for r in rows if r["region"] != "global"]
    assert len(page_rows) == 22 and {r["gpu"] for r in page_rows} >= {
        "H100-SXM-80GB", "H100-PCIE-80GB", "A100-SXM-40GB", "A100-PCIE-40GB", "B200",
        "GH200-96GB", "V100-16GB", "QUADRO-RTX-6000", "RTX-A6000", "A10"}
    assert not any(r["gpu_raw"] for r in rows)  # every Lambda GPU string maps
    a10 = next(r for r in api_rows if r["instance_type"] == "gpu_1x_a10" and r["available"])
    assert a10["gpu"] == "A10" and a10["price_per_gpu_usd"] == 1.29
    images = gpuradar("parse", "lambda", str(FIX / "images.json"))
    assert images.returncode == 1 and "give the instance-types answer" in images.stderr


# -- real crawls -----------------------------------------------------------------------------
def test_crawl_page_then_api_into_storage(tmp_path, provider_server, db_url, engine):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "lambda", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"]) == ("ok", 22)
    proc = gpuradar("crawl", "lambda", "--json", "--verbose", config=cfg, db_url=db_url,
                    env={"LAMBDA_API_KEY": KEY})
    [result] = json.loads(proc.stdout)
    # The API replaces the page: its 10 offers (types x regions with capacity) are new; the
    # page's 22 are closed once the drop is confirmed (the shrink guard holds the first crawl
    # listing under half of the last one: nothing closed, the crawl partial).
    assert (result["status"], result["items"], result["closed"]) == ("partial", 10, 0)
    assert KEY not in proc.stdout + proc.stderr
    # the page as a page (its robots.txt first), the API as an API
    assert [r.path for r in provider_server.requests] == [
        "/robots.txt", "/pricing", "/api/v1/instance-types"]
    proc = gpuradar("crawl", "lambda", "--json", config=cfg, db_url=db_url,
                    env={"LAMBDA_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["closed"]) == ("ok", 10, 22)
    offers = current_offers(engine, OfferFilter(sources=["lambda"], available_only=True))
    assert sorted((o["instance_type"], o["region"]) for o in offers) == [
        ("gpu_1x_a10", "us-east-1"), ("gpu_1x_a10", "us-west-1"),
        ("gpu_1x_gh200", "us-east-3"), ("gpu_1x_gh200", "us-south-3"),
        ("gpu_1x_h100_pcie", "us-east-1"), ("gpu_1x_h100_pcie", "us-west-3"),
        ("gpu_1x_h100_sxm5", "us-south-2"), ("gpu_1x_rtx6000", "us-south-1"),
        ("gpu_8x_a100_80gb_sxm4", "us-midwest-1"), ("gpu_8x_b200_sxm6", "us-east-3")]


def test_a_region_whose_capacity_goes_is_closed_not_invented(tmp_path, provider_server,
                                                               sqlite_url):
    """A region that loses capacity is no longer listed: the next successful crawl closes
    its offer as unavailable, with its history; no region is made up for a type."""
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    env = {"LAMBDA_API_KEY": KEY}
    proc = gpuradar("crawl", "lambda", "--json", config=cfg, db_url=sqlite_url, env=env)
    assert json.loads(proc.stdout)[0]["items"] == 10, proc.stderr
    data = json.loads((FIX / "instance_types.json").read_text())
    for entry in data["data"].values():
        entry["regions_with_capacity_available"] = [
            r for r in entry["regions_with_capacity_available"] if r["name"] != "us-south-3"]
    provider_server.route("GET", "/api/v1/instance-types",
                          lambda req: Reply(body=json.dumps(data).encode()))
    proc = gpuradar("crawl", "lambda", "--json", config=cfg, db_url=sqlite_url, env=env)
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["closed"]) == ("ok", 9, 1), proc.stderr
    offers = gpuradar_json("prices", "--source", "lambda", "--gpu", "GH200", "--all",
                           config=cfg, db_url=sqlite_url)
    assert sorted((o["region"], o["available"]) for o in offers) == [
        ("us-east-3", True), ("us-south-3", False)]


@pytest.mark.parametrize(("text", "gb"), [("80 GB", 80.0), ("1800 GiB", 1932.7),
                                         ("2 TiB SSD", 2199.0), ("1.5 TB", 1500.0),
                                         ("22 tib", 24189.3), ("n/a", None)])
def test_sizes_in_each_unit_the_page_uses_become_gb(text, gb):
    """The page gives memory in GB or GiB and storage in TiB; all are stored in GB."""
    assert _size_gb(text) == gb
