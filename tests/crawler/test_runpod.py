"""RunPod: GraphQL gpuTypes + lowestPrice stock on recorded answers in the API's format (built
from a real capture), the batched requests, and a real crawl into storage."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from scrapy import Request
from scrapy.settings import Settings
from sqlalchemy import text

from gpuradar.core.items import PriceItem
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.runpod import RunpodSpider, stock_query
from gpuradar.storage.db import open_database
from gpuradar.storage.queries import OfferFilter, current_offers
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES, response
from tests.provider_server import Reply, serve_standard

FIX = FIXTURES / "runpod"
URL = "https://api.runpod.io/graphql"


def spider(**options: Any) -> RunpodSpider:
    s = RunpodSpider()
    s.settings = Settings({"GPURADAR_SOURCES": {"runpod": options}})
    return s


def place(o: PriceItem) -> tuple[str, str]:
    """(the cloud where the offer has no place of its own, else its data center, the
    instance type without its cloud): `("secure", "4x NVIDIA H100 80GB HBM3")`,
    `("EU-RO-1", "1x NVIDIA B200")`."""
    name = o.instance_type.rsplit(" (", 1)[0]
    return (o.attributes["cloud"] if o.region == "global" else o.region), name


def parse(name: str, count: int | None = None) -> tuple[dict[tuple[str, str], PriceItem],
                                                         list[Request]]:
    out = list(spider().parse(response(FIX / name, URL), count=count))
    items = {place(o): o for o in out if isinstance(o, PriceItem)}
    return items, [o for o in out if isinstance(o, Request)]


def test_secure_offers_are_per_data_center_and_community_ones_hold_everywhere():
    """The Secure Cloud's place is its data center (the real dataCenters answer: id, listed,
    gpuAvailability); the region used to be `secure`/`community`, which is no place. The
    Community Cloud has no place in the answer: region `global`, the cloud an attribute."""
    out = list(spider().parse(response(FIX / "stock_1.json", URL), count=1))
    h100s = sorted((o.region, o.instance_type, o.available, o.attributes["stock"])
                   for o in out if isinstance(o, PriceItem) and o.gpu == "NVIDIA H100 80GB HBM3")
    assert h100s == [
        ("AP-IN-1", "1x NVIDIA H100 80GB HBM3 (secure)", True, "Low"),
        ("EU-NL-1", "1x NVIDIA H100 80GB HBM3 (secure)", False, None),  # listed, none free
        ("global", "1x NVIDIA H100 80GB HBM3 (community)", True, "Medium")]
    # AP-IN-2 lists H100 but is not listed for users; US-TX-6 (B200) likewise.
    assert not any(o.region in ("AP-IN-2", "US-TX-6") for o in out if isinstance(o, PriceItem))
    assert {o.attributes["cloud"] for o in out if isinstance(o, PriceItem)} == {
        "secure", "community"}
    assert not {"secure", "community"} & {o.region for o in out if isinstance(o, PriceItem)}


def test_one_offer_per_gpu_type_and_cloud_with_stock_level():
    items, _ = parse("stock_4.json", count=4)
    h100 = items[("secure", "4x NVIDIA H100 80GB HBM3")]
    assert (h100.price / 4, h100.gpu_count, h100.gpu, h100.gpu_memory_gb) == (
        3.29, 4, "NVIDIA H100 80GB HBM3", 80)
    assert h100.available is True
    assert h100.pricing == "on_demand" and h100.currency == "USD"
    items, _ = parse("stock_1.json")
    assert items[("community", "1x NVIDIA H100 80GB HBM3")].price == 2.69
    assert items[("community", "1x NVIDIA H200")].attributes["stock"] == "Low"
    # stockStatus null: listed with a price but none free.
    b200 = items[("community", "1x NVIDIA B200")]
    assert b200.available is False and b200.attributes["stock"] is None and b200.price == 5.98


def test_a_zero_price_means_not_offered_in_that_cloud():
    items, _ = parse("stock_2.json", count=2)
    assert ("secure", "2x NVIDIA A100-SXM4-40GB") not in items  # securePrice 0 (real capture)
    assert ("community", "2x NVIDIA A100-SXM4-40GB") in items
    assert ("secure", "2x NVIDIA GeForce RTX 3070") not in items


def test_multi_gpu_offers_multiply_the_per_gpu_price_up_to_the_cloud_maximum():
    items, requests = parse("stock_4.json", count=4)
    h100 = items[("secure", "4x NVIDIA H100 80GB HBM3")]
    assert h100.price == pytest.approx(4 * 3.29) and h100.gpu_count == 4
    assert (h100.vcpus, h100.memory_gb) == (80, 500)  # lowestPrice minVcpu/minMemory
    assert items[("community", "4x NVIDIA L40S")].attributes["stock"] == "Low"
    assert requests == []  # only the count-1 answer fans out
    items5, _ = parse("stock_5.json", count=5)
    # L40S and RTX 3070 go up to 4 GPUs in community cloud (maxGpuCountCommunityCloud).
    assert ("community", "5x NVIDIA L40S") not in items5
    assert ("secure", "5x NVIDIA L40S") in items5
    assert ("community", "5x NVIDIA GeForce RTX 3070") not in items5


def test_queries_are_batched_one_request_per_gpu_count():
    _, requests = parse("stock_1.json", count=1)
    assert [r.cb_kwargs["count"] for r in requests] == list(range(2, 9))
    body = json.loads(requests[0].body)
    assert body == {"query": stock_query(2)}
    assert re.findall(r"(\w+): gpuTypes", body["query"]) == ["secure_2", "community_2"]
    assert re.findall(r"gpuCount: (\d+), secureCloud: (\w+)", body["query"]) == [
        ("2", "true"), ("2", "false")]
    assert all(r.method == "POST" and r.url == URL for r in requests)
    fanned = [r for r in spider(max_gpus=3).parse(response(FIX / "stock_1.json", URL),
                                                   count=1)
              if isinstance(r, Request)]
    assert [r.cb_kwargs["count"] for r in fanned] == [2, 3]


def test_no_spot_offers_even_where_spot_prices_are_listed():
    out = list(spider().parse_file(response(FIX / "gputypes_real.json", URL)))
    assert out and {i.pricing for i in out} == {"on_demand"}


def test_real_gputypes_capture_gives_one_gpu_prices_without_stock():
    out = {place(i): i for i in spider().parse_file(
        response(FIX / "gputypes_real.json", URL))}
    assert out[("secure", "1x NVIDIA B200")].price == 6.79
    assert out[("community", "1x NVIDIA B200")].price == 5.98
    assert out[("community", "1x NVIDIA GeForce RTX 3070")].price == 0.13
    assert ("secure", "1x NVIDIA GeForce RTX 3070") not in out
    assert {i.available for i in out.values()} == {None}
    assert len(out) == 16


def test_graphql_errors_and_renamed_fields_are_clear_errors():
    err = (b'{"errors": [{"message": "Cannot query field \\"maxGpuCountSecureCloud\\" on type '
           b'\\"GpuType\\"."}], "data": null}')
    with pytest.raises(ParseError, match="runpod.*'errors' reported: Cannot query field "
                                         "\"maxGpuCountSecureCloud\""):
        list(spider().parse(response(err, URL), count=1))
    two = (b'{"errors": [{"message": "Something went wrong"}, {"message": "and more"}], '
           b'"data": null}')  # the first error is the one reported
    with pytest.raises(ParseError, match="'errors' reported: Something went wrong"):
        list(spider().parse(response(two, URL), count=1))
    data = json.loads((FIX / "stock_1.json").read_text())
    for gpu in data["data"]["secure_1"]:
        gpu["secureCost"] = gpu.pop("securePrice")
    with pytest.raises(ParseError, match=r"'securePrice' is missing.*data.secure_1\[0\]"):
        list(spider().parse(response(data, URL), count=1))
    with pytest.raises(ParseError, match="'data.gpuTypes' is missing"):
        list(spider().parse(response(b'{"data": {}}', URL), count=1))
    with pytest.raises(ParseError, match="'data.secure_1' is empty"):
        list(spider().parse(response(b'{"data": {"secure_1": []}}', URL), count=1))


def test_status_needs_no_key():
    assert RunpodSpider.status(Settings({"GPURADAR_SOURCES": {}})) == (
        True, "public endpoint, no key needed")


def test_gpuradar_parse_on_each_kind_of_answer():
    proc = gpuradar("parse", "runpod", str(FIX / "stock_8.json"), str(FIX / "gputypes_real.json"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not any(r["gpu_raw"] for r in rows)  # every RunPod id maps through the catalog
    h100 = next(r for r in rows if r["instance_type"] == "8x NVIDIA H100 80GB HBM3 (secure)"
                and r["region"] == "global")
    assert h100["gpu"] == "H100-SXM-80GB" and h100["price_per_gpu_usd"] == 3.29
    assert h100["attributes"]["stock"] == "Low"
    assert {r["gpu"] for r in rows} >= {"MI300X", "RTX-4090", "A100-PCIE-80GB", "B300",
                                        "A100-SXM-40GB"}


def test_crawl_into_storage(tmp_path, provider_server, db_url, engine):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "runpod", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert (result["status"], result["items"], result["unknown_gpus"]) == ("ok", 138, [])
    posts = [r for r in provider_server.requests if r.path == "/graphql"]
    assert sorted(re.findall(r"gpuCount: (\d+)", r.json()["query"])[0] for r in posts) == [
        str(n) for n in range(1, 9)]
    h100 = current_offers(engine, OfferFilter(sources=["runpod"], gpus=["H100-SXM-80GB"]))
    by_key = {(o["region"], o["instance_type"]): o for o in h100}
    # 8 counts x 2 clouds, the 1-GPU secure pod in each of the two listed data centers
    assert len(by_key) == 17
    assert by_key[("global", "2x NVIDIA H100 80GB HBM3 (community)")]["available"] is True
    assert by_key[("global", "3x NVIDIA H100 80GB HBM3 (community)")]["available"] is False
    eight = by_key[("global", "8x NVIDIA H100 80GB HBM3 (secure)")]
    assert eight["price_usd"] == pytest.approx(26.32) and eight["attributes"]["stock"] == "Low"
    assert by_key[("AP-IN-1", "1x NVIDIA H100 80GB HBM3 (secure)")]["available"] is True
    assert by_key[("EU-NL-1", "1x NVIDIA H100 80GB HBM3 (secure)")]["available"] is False
    assert {o["pricing"] for o in h100} == {"on_demand"}


def test_stock_running_out_is_a_new_span_and_a_failed_count_closes_nothing(
        tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 0})
    assert gpuradar("crawl", "runpod", config=cfg, db_url=sqlite_url).returncode == 0
    # As if that crawl ran a minute ago: change points are dated to the second, and two
    # crawls within one second keep only the later state of an offer.
    with open_database(sqlite_url).begin() as conn:
        conn.execute(text("UPDATE price_change SET at = at - 60"))
    original = provider_server.routes[("POST", "/graphql")]

    def sold_out_h100_and_broken_count_8(req):
        if "gpuCount: 8" in req.json()["query"]:
            return Reply(500, b"oops")
        data = json.loads(original(req).body)
        for types in data["data"].values():
            for gpu in types:
                if gpu["id"] == "NVIDIA H100 80GB HBM3":
                    gpu["lowestPrice"]["stockStatus"] = None
        return Reply(body=json.dumps(data).encode())

    provider_server.route("POST", "/graphql", sold_out_h100_and_broken_count_8)
    proc = gpuradar("crawl", "runpod", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    # The 8-GPU offers were not seen (HTTP 500) but stay listed: the crawl was partial.
    assert result["status"] == "partial" and result["closed"] == 0
    assert "HTTP 500" in result["error"]
    h100 = gpuradar_json("history", "runpod", "2x NVIDIA H100 80GB HBM3 (community)",
                         "--region", "global", config=cfg, db_url=sqlite_url)
    assert [s["available"] for s in h100] == [True, False]
    community = [o for o in gpuradar_json("prices", "--source", "runpod", "--region", "global",
                                          "--gpu", "4090", config=cfg, db_url=sqlite_url)
                 if o["attributes"]["cloud"] == "community"]
    assert [o["instance_type"] for o in community] == [
        f"{n}x NVIDIA GeForce RTX 4090 (community)" for n in range(1, 9)]  # same $/GPU-h
    assert {o["attributes"]["stock"] for o in community} >= {"High", "Medium", "Low"}
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["runpod"]["why"] == "public endpoint, no key needed"
    assert rows["runpod"]["last_status"] == "partial" and rows["runpod"]["last_items"] == 122


def test_real_answer_with_other_top_level_data_parses():
    """A real capture whose answer carries `dataCenters` beside `gpuTypes`, aliased
    sub-queries and fields the spider never asked for: everything needed is there."""
    out = {place(i): i for i in spider().parse_file(
        response(FIX / "gputypes_datacenters_real.json", URL))}
    assert out[("community", "1x NVIDIA H200")].price == 3.59
    # secureCloud false / communityCloud false: not offered there, whatever the price says.
    assert ("community", "1x AMD Instinct MI300X OAM") not in out
    # The secure offers are in the listed data centers that have the type: MI300X in
    # EU-RO-1 (with its stock), H200 in none (no secure offer).
    mi300x = out[("EU-RO-1", "1x AMD Instinct MI300X OAM")]
    assert mi300x.price == 2.39 and mi300x.attributes["cloud"] == "secure"
    assert not [k for k in out if k[1] == "1x NVIDIA H200" and k[0] != "community"]
    assert not [k for k in out if k[0] in ("secure", "US-TX-6", "AP-IN-2")]
    # The catalog's lowestPrice was asked for a cloud and count we do not know: not read.
    assert {i.available for i in out.values() if i.region == "global"} == {None}


def test_extra_top_level_data_beside_the_spiders_own_aliases_is_ignored():
    data = json.loads((FIX / "stock_1.json").read_text())
    real = json.loads((FIX / "gputypes_datacenters_real.json").read_text())
    data["data"]["dataCenters"] = real["data"]["dataCenters"]
    data["data"]["myself"] = {"id": "user-1"}
    items, requests = parse_body(json.dumps(data).encode(), count=1)
    assert len(items) == 20 and len(requests) == 7
    # ... wherever it comes in the answer: before the aliases too.
    data["data"] = {"myself": {"id": "user-1"}, **data["data"]}
    items, requests = parse_body(json.dumps(data).encode(), count=1)
    assert len(items) == 20 and len(requests) == 7


def test_a_needed_field_of_the_wrong_type_still_fails_loudly():
    data = json.loads((FIX / "gputypes_datacenters_real.json").read_text())
    data["data"]["gpuTypes"][6]["securePrice"] = "3.29"
    with pytest.raises(ParseError, match=r"'securePrice' is str, expected int/float/NoneType.*"
                                         r"gpuTypes\[6\]"):
        list(spider().parse_file(response(data, URL)))
    with pytest.raises(ParseError, match="'data.gpuTypes' is missing"):
        list(spider().parse(response(b'{"data": {"dataCenters": []}}', URL), count=1))


def parse_body(body: bytes, count: int | None = None):
    out = list(spider().parse(response(body, URL), count=count))
    return ([o for o in out if isinstance(o, PriceItem)],
            [o for o in out if isinstance(o, Request)])


def test_a_key_is_sent_as_a_bearer_header_and_only_when_set():
    with_key = spider(api_key="rp-secret-1").request(1)
    assert with_key.headers["Authorization"] == b"Bearer rp-secret-1"
    assert "rp-secret-1" not in with_key.url and b"rp-secret-1" not in with_key.body
    assert b"Authorization" not in spider().request(1).headers
    assert RunpodSpider.status(Settings({"GPURADAR_SOURCES": {"runpod": {
        "api_key": "rp-secret-1"}}})) == (
        True, "public endpoint; RUNPOD_API_KEY found (sent, not needed for prices)")


@pytest.mark.parametrize("largest", [1, None])
def test_no_larger_pods_are_asked_for_when_no_gpu_type_offers_them(largest):
    """Every GPU type of the count-1 answer goes up to one GPU (or says nothing of a
    maximum): the crawl asks for no 2-GPU or larger pods."""
    doc = json.loads((FIX / "stock_1.json").read_bytes())
    for types in doc["data"].values():
        for gpu in types:
            for key in ("maxGpuCount", "maxGpuCountSecureCloud", "maxGpuCountCommunityCloud"):
                gpu[key] = largest
    out = list(spider().parse(response(json.dumps(doc).encode(), URL), count=1))
    assert [o for o in out if isinstance(o, Request)] == []
    assert {o.gpu_count for o in out if isinstance(o, PriceItem)} == {1}


def test_pods_are_asked_for_up_to_16_gpus_unless_configured():
    """A GPU type offered in pods of up to 20 GPUs: the crawl asks for every size up to 16
    (the default `max_gpus`), or up to the configured maximum."""
    doc = json.loads((FIX / "stock_1.json").read_bytes())
    doc["data"]["secure_1"][0]["maxGpuCountSecureCloud"] = 20
    answer = json.dumps(doc).encode()
    counts = [r.cb_kwargs["count"] for r in spider().parse(response(answer, URL), count=1)
              if isinstance(r, Request)]
    assert counts == list(range(2, 17))
    capped = [r.cb_kwargs["count"] for r in spider(max_gpus=12).parse(
        response(answer, URL), count=1) if isinstance(r, Request)]
    assert capped == list(range(2, 13))


def test_a_pod_price_is_the_per_gpu_price_times_the_count_to_the_hundredth_cent():
    doc = json.loads((FIX / "stock_4.json").read_bytes())
    gpu = next(g for g in doc["data"]["secure_4"] if g["id"] == "NVIDIA H100 80GB HBM3")
    gpu["securePrice"] = 2.4943  # a price in hundredths of a cent
    items = {place(o): o for o in spider().parse(
        response(json.dumps(doc).encode(), URL), count=4) if isinstance(o, PriceItem)}
    h100 = items[("secure", "4x NVIDIA H100 80GB HBM3")]
    assert h100.price == 9.9772 and h100.attributes["price_per_gpu"] == 2.4943
    gpu["securePrice"] = 2.49433  # finer than that: the pod price is rounded to it
    items = {place(o): o for o in spider().parse(
        response(json.dumps(doc).encode(), URL), count=4) if isinstance(o, PriceItem)}
    assert items[("secure", "4x NVIDIA H100 80GB HBM3")].price == 9.9773
