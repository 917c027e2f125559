"""Vast.ai prices a user relies on, pinned where mutation testing (issue #23) found the
suite silent: a multi-GPU offer's price is the whole offer's, the spot price carries the same
storage as on-demand, and a search that cannot be split further still yields its offers."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from scrapy.http import TextResponse
from scrapy.utils.test import get_crawler

from gpuradar.crawler.spiders.vastai import GPU_COUNTS, VastaiSpider

FIX = Path(__file__).parents[1] / "fixtures" / "vastai"
URL = "https://console.vast.ai/api/v0/bundles/"


def offers(name: str) -> list[dict]:
    return json.loads((FIX / name).read_text())["offers"]


def parse(data: dict, spider: VastaiSpider | None = None, **cb) -> list:
    resp = TextResponse(url=URL, body=json.dumps(data).encode(), encoding="utf-8")
    return list((spider or VastaiSpider()).parse(resp, **cb))


def spider(**options) -> VastaiSpider:
    crawler = get_crawler(VastaiSpider, {"GPURADAR_SOURCES": {"vastai": options}})
    return VastaiSpider.from_crawler(crawler)


def planned(s: VastaiSpider, out: list) -> list[dict]:
    """The searches an answer led to, in order: the one sent next, then those queued (the
    spider makes one search at a time)."""
    sent = [json.loads(r.body) for r in out if hasattr(r, "callback")]
    queued = [json.loads(s.search(list(n), m, g).body) for n, m, g in s._queue]
    return sent + queued


def test_an_8_gpu_offer_is_priced_as_the_whole_offer():
    eight = next(o for o in offers("bundles_a100_sxm4.json") if o["num_gpus"] == 8)
    od, spot = parse({"offers": [eight]})
    assert od.pricing == "on_demand" and spot.pricing == "spot"
    assert od.gpu_count == 8 and od.instance_type == "301001:8xA100_SXM4"
    assert od.price == eight["dph_total"]  # the whole machine, not one GPU
    assert spot.price == pytest.approx(eight["min_bid"] + eight["search"]["diskHour"])
    assert od.gpu_memory_gb == 80.0 and od.vcpus == 128.0
    assert od.memory_gb == 512.0  # all cores rented: all the RAM
    assert od.region == "US" and od.attributes["location"] == "Texas, US"
    assert od.attributes["datacenter"] is False


def test_rented_cores_get_their_share_of_ram():
    offer = copy.deepcopy(offers("bundles_a100_sxm4.json")[0])
    offer["cpu_cores_effective"] = 32.0  # a quarter of 128 cores
    od = parse({"offers": [offer]})[0]
    assert od.vcpus == 32.0 and od.memory_gb == 128.0


def test_storage_cost_without_the_search_block_comes_from_the_base_price():
    offer = copy.deepcopy(offers("bundles_a100_sxm4.json")[0])
    del offer["search"]
    od, spot = parse({"offers": [offer]})
    storage = offer["dph_total"] - offer["dph_base"]
    assert od.attributes["storage_usd_per_hour"] == pytest.approx(storage)
    assert spot.price == pytest.approx(offer["min_bid"] + storage)


def test_an_offer_without_a_bid_has_no_spot_price_and_no_place_is_unknown():
    offer = copy.deepcopy(offers("bundles_a100_sxm4.json")[0])
    offer["min_bid"] = None
    offer["geolocation"] = None
    (od,) = parse({"offers": [offer]})
    assert od.pricing == "on_demand" and od.region == "unknown"


def test_a_truncated_one_model_search_is_split_by_gpu_count():
    s = spider(limit=5)
    data = {"offers": offers("bundles_rtx_4090.json"), "truncated": True}
    out = parse(data, s, search=(("RTX 4090",), "in", None))
    bodies = planned(s, out)
    assert [b["num_gpus"] for b in bodies] == [dict(c) for c in GPU_COUNTS]
    assert all(b["gpu_name"] == {"in": ["RTX 4090"]} for b in bodies)


def test_a_search_that_cannot_be_split_still_yields_what_it_got():
    s = spider(limit=100)
    data = {"offers": offers("bundles_rtx_4090.json"), "truncated": True}
    out = parse(data, s, search=(("RTX 4090",), "in", {"eq": 1}))
    assert {i.instance_type for i in out} == {"201001:1xRTX_4090", "201002:4xRTX_4090",
                                              "201003:8xRTX_4090"}


def test_a_complete_answer_is_not_split():
    s = spider(limit=100)
    out = parse({"offers": offers("bundles_rtx_4090.json"), "truncated": False}, s,
                search=(("RTX 4090", "H100 SXM"), "in", None))
    assert out and all(not hasattr(i, "callback") for i in out)


def test_a_full_answer_counts_as_truncated_even_unflagged():
    s = spider(limit=3)
    out = parse({"offers": offers("bundles_rtx_4090.json")}, s,
                search=(("RTX 4090", "H100 SXM"), "in", None))
    names = [b["gpu_name"] for b in planned(s, out)]
    assert names == [{"in": ["RTX 4090"]}, {"in": ["H100 SXM"]}]


def test_the_api_key_is_sent_as_a_bearer_token():
    request = spider(api_key="k-123").search(["RTX 4090"])
    assert request.headers[b"Authorization"] == b"Bearer k-123"
    assert b"Authorization" not in spider().search(["RTX 4090"]).headers
    assert json.loads(spider().probe_requests()[0][1].body)["limit"] == 1


def test_the_daemon_crawls_the_marketplace_every_five_minutes():
    from gpuradar.core import sources

    assert sources.default_interval("vastai") == 300
    assert sources.source_kind("vastai") == "marketplace"


def test_a_bid_without_any_storage_figure_is_the_bid_alone():
    offer = copy.deepcopy(offers("bundles_a100_sxm4.json")[0])
    del offer["search"], offer["dph_base"]
    od, spot = parse({"offers": [offer]})
    assert spot.price == offer["min_bid"] and od.attributes["storage_usd_per_hour"] is None


def test_a_full_answer_of_the_default_size_is_split():
    # Vast answers at most `limit` offers; exactly `limit` means more may exist.
    base = offers("bundles_rtx_4090.json")[0]
    many = [base | {"machine_id": base["machine_id"] * 1000 + i} for i in range(300)]
    s = spider(limit=300)
    out = parse({"offers": many}, s, search=(("RTX 4090", "H100 SXM"), "in", None))
    assert [b["gpu_name"] for b in planned(s, out)] == [{"in": ["RTX 4090"]},
                                                         {"in": ["H100 SXM"]}]


def test_an_unsplittable_search_names_what_is_missing(caplog):
    s = spider(limit=3)
    data = {"offers": offers("bundles_rtx_4090.json"), "truncated": True}
    parse(data, s, search=(("RTX 4090",), "in", {"eq": 1}))
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "RTX 4090 with num_gpus {'eq': 1} still stops at 3 offers" in message
    caplog.clear()
    parse(data, s, search=(("RTX 4090",), "notin", {"eq": 2}))
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "other models than" in message and "num_gpus {'eq': 2}" in message


def test_memory_as_vast_shows_it_one_decimal():
    # The real capture: 64 of 256 cores rented get a quarter of 128902 MB of RAM.
    h100 = {i.instance_type: i for i in parse({"offers": offers("bundles_h100_sxm_real.json")})}
    shared = h100["59380:1xH100_SXM"]
    assert shared.memory_gb == 32.2 and shared.gpu_memory_gb == 79.6


@pytest.mark.parametrize("missing", ["cpu_ram", "cpu_cores", "cpu_cores_effective"])
def test_an_offer_without_cpu_figures_has_no_memory_and_is_still_priced(missing):
    offer = copy.deepcopy(offers("bundles_a100_sxm4.json")[0])
    del offer[missing]
    od, _ = parse({"offers": [offer]})
    assert od.memory_gb is None and od.price == offer["dph_total"]


def test_the_gpu_count_splits_cover_every_count_once():
    ops = {"eq": lambda a, b: a == b, "gt": lambda a, b: a > b, "gte": lambda a, b: a >= b,
           "lte": lambda a, b: a <= b}
    for n in range(1, 17):
        hits = [c for c in GPU_COUNTS if all(ops[op](n, v) for op, v in c.items())]
        assert len(hits) == 1, (n, hits)


def test_a_truncated_search_of_other_models_is_split_by_count_not_by_name():
    s = spider(limit=3)
    data = {"offers": offers("bundles_rtx_4090.json"), "truncated": True}
    out = parse(data, s, search=(("RTX 4090", "H100 SXM"), "notin", None))
    bodies = planned(s, out)
    assert [b["num_gpus"] for b in bodies] == [dict(c) for c in GPU_COUNTS]
    assert all(b["gpu_name"] == {"notin": ["RTX 4090", "H100 SXM"]} for b in bodies)


def test_a_truncated_search_without_names_is_split_by_count():
    s = spider(limit=3)
    data = {"offers": offers("bundles_rtx_4090.json"), "truncated": True}
    out = parse(data, s, search=((), "in", None))
    assert [b["num_gpus"] for b in planned(s, out)] == [dict(c) for c in GPU_COUNTS]


def test_the_default_search_asks_for_1000_rentable_unrented_offers():
    request = spider().search(["RTX 4090"])
    body = json.loads(request.body)
    assert body["limit"] == 1000 and body["rented"] == {"eq": False}
    assert body["rentable"] == {"eq": True} and body["type"] == "on-demand"
    # A stable body (sorted keys): a recording made once replays on every run.
    assert request.body == json.dumps(body, sort_keys=True).encode()


def test_the_crawl_stays_under_vasts_10_requests_a_minute():
    from scrapy.settings import Settings

    settings = Settings()
    VastaiSpider.update_settings(settings)
    assert settings.getfloat("DOWNLOAD_DELAY") == 6.0
    assert settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN") == 1


def refused(s: VastaiSpider, status: int, body: bytes, **headers: str) -> tuple[list, list]:
    """The first search of a crawl refused with `status`: what the spider does next, and the
    searches still queued."""
    import asyncio

    from scrapy.spidermiddlewares.httperror import HttpError
    from twisted.python.failure import Failure

    async def first():
        return [r async for r in s.start()]

    (request,) = asyncio.run(first())
    resp = TextResponse(url=URL, status=status, body=body, headers=headers, request=request)
    failure = Failure(HttpError(resp, "Ignoring non-200 response"))
    failure.request = request
    return list(s.failed(failure)), list(s._queue)


def test_the_daily_quota_stops_every_later_search(caplog):
    # Vast's API reference: 429 with error search_quota_exceeded and a Retry-After of hours.
    out, queued = refused(spider(), 429, b'{"error": "search_quota_exceeded"}',
                          **{"Retry-After": "36000"})
    assert out == [] and queued == []
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "daily search quota is exhausted (HTTP 429 search_quota_exceeded, Retry-After " \
        "36000 s)" in line and "searches not made: other models than" in line


def test_a_rate_limit_refusal_left_by_the_retries_stops_too(caplog):
    out, queued = refused(spider(), 429, b'{"detail": "API requests too frequent"}')
    assert out == [] and queued == []
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "still refuses searches as too frequent (HTTP 429)" in line


def test_a_refusal_with_an_unreadable_body_stops_as_too_frequent(caplog):
    # A refusal whose body is not Vast's JSON (empty here) names no quota: it is the
    # too-frequent case, and the crawl still stops with its line instead of failing.
    out, queued = refused(spider(), 429, b"")
    assert out == [] and queued == []
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "still refuses searches as too frequent (HTTP 429)" in line


def test_a_long_refusal_is_quoted_to_its_first_120_characters(caplog):
    """A 404 that is not the invalid-key one (a wrong endpoint) with a long `msg`: the error
    line gives Vast's words cut at 120 characters."""
    said = "no such endpoint: " + "x" * 300
    resp = TextResponse(url=URL, status=404, body=json.dumps({"msg": said}).encode())
    list(spider().parse(resp))
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line == (f"vastai: a search failed (HTTP 404 {said[:120]}, {URL}); its offers are "
                    "missing from this crawl")


def test_another_failed_search_is_reported_and_the_next_one_goes_ahead(caplog):
    out, queued = refused(spider(), 500, b"oops")
    assert [json.loads(r.body)["gpu_name"].keys() for r in out] == [{"notin": 0}.keys()]
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "a search failed (HTTP 500" in line
