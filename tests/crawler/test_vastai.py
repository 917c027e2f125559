"""Vast.ai bundles: the parser on a real capture, the few large searches (split when Vast
says an answer was truncated), one search at a time, and the crawl under Vast's limits as its
API reference (vast-ai/docs search_offers.yaml) documents them: 10 searches a minute, 429
without Retry-After when asked faster, a daily search quota (429 search_quota_exceeded with a
Retry-After of hours), `rented` not filtered by the server, a bad key answered 404."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from scrapy.utils.test import get_crawler

from gpuradar.core import providers
from gpuradar.core.clock import FakeClock
from gpuradar.crawler.spiders.base import ParseError
from gpuradar.crawler.spiders.vastai import GPU_NAMES, SERVER_CAP, VastaiSpider
from tests.clirun import gpuradar, write_config
from tests.helpers import FIXTURES, response
from tests.provider_server import Reply
from tests.routes.core import vastai_offers, vastai_search

FIX = FIXTURES / "vastai"
URL = "https://console.vast.ai/api/v0/bundles/"


def items(name: str):
    resp = response(FIX / name, URL)
    return list(VastaiSpider().parse(resp))


def test_real_capture_gives_on_demand_and_interruptible_offers():
    out = items("bundles_h100_sxm_real.json")
    assert len(out) == 4  # 2 offers x (on-demand, spot)
    od = next(i for i in out if i.pricing == "on_demand" and i.instance_type.startswith("148199"))
    assert od.instance_type == "148199:1xH100_SXM"  # machine, count, GPU: not the ask id
    assert od.price == pytest.approx(1.3867407407407408)  # dph_total, storage included
    assert od.region == "US" and od.available is True and od.currency == "USD"
    assert od.gpu_memory_gb == pytest.approx(79.6, abs=0.1)
    spot = next(i for i in out if i.pricing == "spot" and i.instance_type.startswith("148199"))
    # min_bid plus the same storage cost the on-demand price carries
    assert spot.price == pytest.approx(0.39999999999999997 + 7.407407407407407e-05)
    assert od.attributes["reliability"] == pytest.approx(0.9089707)
    city = next(i for i in out if i.instance_type.startswith("59380"))
    assert city.region == "US" and city.attributes["location"] == "Washington, US"


def spider(**options) -> VastaiSpider:
    crawler = get_crawler(VastaiSpider, {"GPURADAR_SOURCES": {"vastai": options}})
    return VastaiSpider.from_crawler(crawler)


def started(s: VastaiSpider) -> list:
    async def first():
        return [r async for r in s.start()]
    return asyncio.run(first())


def answer(s: VastaiSpider, request, offers) -> list:
    body = json.dumps(vastai_search(json.loads(request.body), offers)).encode()
    return list(request.callback(response(body, URL, request=request), **request.cb_kwargs))


def test_two_searches_cover_every_model_one_after_the_other():
    s = spider()
    (first,) = started(s)  # one search at a time: the answer sends the next
    known = json.loads(first.body)
    (second,) = [o for o in answer(s, first, vastai_offers()) if hasattr(o, "callback")]
    others = json.loads(second.body)
    assert known["gpu_name"] == {"in": list(GPU_NAMES)} and others["gpu_name"] == {
        "notin": list(GPU_NAMES)}
    assert known["rentable"] == {"eq": True} and known["order"] == [["dph_total", "asc"]]
    assert not [o for o in answer(s, second, vastai_offers()) if hasattr(o, "callback")]


def real_offers() -> list[dict]:
    return json.loads((FIX / "bundles_h100_sxm_real.json").read_text())["offers"]


def test_a_machine_you_hold_is_not_stored_as_unavailable_for_everyone():
    """`rented` is about the caller's own instances (Vast's CLI: "allow/disallow duplicates
    and potential conflicts with existing stopped instances"): with a key, a machine you
    hold came back `rented: true` and was stored as unavailable for everyone. Availability
    is `rentable`; `rented` is kept as `yours`. The real capture with one flag changed."""
    offers = real_offers()
    offers[0]["rented"] = True
    out = {(i.instance_type, i.pricing): i for i in
           VastaiSpider().parse(response({"offers": offers}, URL))}
    mine = out[("148199:1xH100_SXM", "on_demand")]
    assert mine.available is True and mine.attributes["yours"] is True
    assert out[("148199:1xH100_SXM", "spot")].available is True
    assert mine.price == pytest.approx(1.3867407407407408)
    other = out[("59380:1xH100_SXM", "on_demand")]
    assert other.available is True and other.attributes["yours"] is False
    offers[1]["rentable"] = False  # not rentable now: that is what "unavailable" means
    out = {(i.instance_type, i.pricing): i for i in
           VastaiSpider().parse(response({"offers": offers}, URL))}
    assert out[("59380:1xH100_SXM", "on_demand")].available is False


def test_an_offer_without_the_rentable_flag_has_unknown_availability(caplog):
    offers = real_offers()
    list(VastaiSpider().parse(response({"offers": offers}, URL)))
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # each states it
    del offers[1]["rentable"]
    out = {i.instance_type: i for i in VastaiSpider().parse(response({"offers": offers}, URL))}
    assert out["59380:1xH100_SXM"].available is None
    assert out["148199:1xH100_SXM"].available is True
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "vastai: offers without a `rentable` flag; their availability is stored as unknown"]


def test_the_search_still_asks_the_server_for_unrented_offers():
    # Harmless (the server drops it) and what Vast's CLI sends; the filter that counts is
    # the client's (above).
    assert json.loads(spider().search(["H100 SXM"]).body)["rented"] == {"eq": False}


def test_an_answer_stopping_at_the_observed_server_cap_is_narrowed():
    """Collectors saw Vast stop at 64 offers whatever `limit` asked; an answer of exactly 64
    without a `truncated` flag may be cut, so it is narrowed like a truncated one."""
    base = real_offers()[0]
    many = [base | {"machine_id": i, "id": i} for i in range(SERVER_CAP)]
    s = spider(limit=1000)
    out = list(s.parse(response({"offers": many}, URL), search=(("H100 SXM",), "in", None)))
    assert [json.loads(r.body)["num_gpus"] for r in out] == [{"eq": 1}]  # then 4 queued
    assert s.crawler.stats.get_value("gpuradar/skipped/server_cap_suspected") == 1
    # Vast saying the answer is complete is believed.
    s = spider(limit=1000)
    out = list(s.parse(response({"offers": many, "truncated": False}, URL),
                       search=(("H100 SXM",), "in", None)))
    assert not [o for o in out if hasattr(o, "callback")] and len(out) == 2 * SERVER_CAP


def test_searches_that_cannot_finish_in_the_crawl_budget_are_not_made(caplog):
    clock = FakeClock()
    crawler = get_crawler(VastaiSpider, {"CLOSESPIDER_TIMEOUT": 300, "DOWNLOAD_DELAY": 6})
    s = VastaiSpider.from_crawler(crawler)
    s.clock = clock
    (first,) = started(s)
    clock.advance(280)  # 20 s left: less than one interval plus an answer (6 + 6 s)... fits
    assert [o for o in answer(s, first, vastai_offers()) if hasattr(o, "callback")]
    s = VastaiSpider.from_crawler(get_crawler(
        VastaiSpider, {"CLOSESPIDER_TIMEOUT": 300, "DOWNLOAD_DELAY": 6}))
    s.clock = clock
    (first,) = started(s)
    clock.advance(290)  # 10 s left: the second search could not finish
    out = answer(s, first, vastai_offers())
    assert out and not [o for o in out if hasattr(o, "callback")]  # offers kept, no search
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "time budget of 300 s would run out before 1 more search(es) finish" in line
    assert "closes nothing" in line and "other models than" in line


@pytest.mark.parametrize(("left", "searched"), [(6.0, True), (5.0, False)])
def test_a_search_gets_at_least_5_s_of_the_budget_for_its_answer(left, searched):
    # With a short request interval (`request_interval: 1s`) the answer still needs time:
    # the next search goes ahead only if the interval plus 5 s are left.
    clock = FakeClock()
    s = VastaiSpider.from_crawler(get_crawler(VastaiSpider, {
        "CLOSESPIDER_TIMEOUT": 300, "GPURADAR_SOURCES": {"vastai": {"request_interval": 1}}}))
    s.clock = clock
    (first,) = started(s)
    clock.advance(300 - left)
    out = answer(s, first, vastai_offers())
    assert bool([o for o in out if hasattr(o, "callback")]) is searched


def test_truncated_search_is_split_until_complete():
    s = spider(limit=2, gpu_names=["H100 SXM", "RTX 4090", "A100 SXM4"])
    pending, offers, searches = [s.search(["H100 SXM", "RTX 4090", "A100 SXM4"])], [], []
    while pending:
        request = pending.pop()
        searches.append(json.loads(request.body))
        for out in answer(s, request, vastai_offers()):
            (pending if hasattr(out, "callback") else offers).append(out)
    # 7 offers of these models, at most 2 per answer: split by model, then 4090 by count.
    found = {o.instance_type for o in offers if o.pricing == "on_demand"}
    assert found == {"148199:1xH100_SXM", "59380:1xH100_SXM", "201001:1xRTX_4090",
                     "201002:4xRTX_4090", "201003:8xRTX_4090", "301001:8xA100_SXM4",
                     "301002:1xA100_SXM4"}
    assert any(q.get("num_gpus") == {"eq": 1} for q in searches)
    assert s.crawler.stats.get_value("gpuradar/skipped/truncated_search_split") >= 2


def test_missing_field_is_a_clear_error(tmp_path):
    data = json.loads((FIX / "bundles_h100_sxm_real.json").read_text())
    del data["offers"][1]["machine_id"]
    resp = response(data, "https://x/")
    with pytest.raises(ParseError, match=r"vastai.*'machine_id' is missing \(in offers\[1\]\)"):
        list(VastaiSpider().parse(resp))


class RateLimitedVast:
    """Vast's search under its request rate: a request sooner than `window` seconds after
    the one before the previous one answers 429 without Retry-After ("API requests too
    frequent"). Measured two requests back, a crawl that keeps its pace is never refused,
    however late the server's threads see its requests on a loaded machine: the crawl asks
    one search at a time, so the request two back was answered (and seen here) before the
    previous one was sent, and the next one leaves at least the crawl's interval after that.
    (Measured one request back, a request seen late narrows the gap to the next.)

    `burst`: the second request is refused as asked too soon, as a crawl without an interval
    sends it at once, whatever time the server took to see either."""

    def __init__(self, window: float, *, burst: bool = False) -> None:
        self.window = window
        self.burst = burst
        self.seen: list[float] = []
        self.lock = threading.Lock()
        self.answers: list[int] = []

    def __call__(self, req) -> Reply:
        with self.lock:
            self.seen.append(time.monotonic())
            n = len(self.seen)
            too_soon = (self.burst and n == 2) or (
                n > 2 and self.seen[-1] - self.seen[-3] < self.window)
            self.answers.append(429 if too_soon else 200)
        if too_soon:
            return Reply(429, b'{"detail": "API requests too frequent endpoint threshold=0.3"}')
        return Reply(body=json.dumps(vastai_search(req.json() or {}, vastai_offers())).encode())


def crawl_vast(tmp_path, server, db_url, **vastai):
    cfg = write_config(tmp_path / "c.yaml", sources={"vastai": vastai},
                       endpoints={"vastai.bundles": server.base + "/api/v0/bundles/"},
                       scrapy={"RETRY_BACKOFF_BASE": 0.1, "RETRY_TIMES": 3})
    proc = gpuradar("crawl", "vastai", "--json", config=cfg, db_url=db_url)
    return proc, json.loads(proc.stdout)[0]


def test_the_request_interval_keeps_the_crawl_under_the_rate_limit(tmp_path, provider_server,
                                                                   sqlite_url):
    # The server refuses a request sooner than 0.15 s after the one two back; the crawl
    # spaces them 0.2 s apart (without one, they come back to back).
    vast = RateLimitedVast(0.15)
    provider_server.route("POST", "/api/v0/bundles/", vast)
    # limit 3: every search is split, so the crawl makes many requests in a row.
    proc, result = crawl_vast(tmp_path, provider_server, sqlite_url, request_interval=0.2,
                              limit=3)
    assert result["status"] == "ok", (result, proc.stderr)
    assert len(vast.answers) > 6 and 429 not in vast.answers


def test_a_429_slows_the_whole_queue_not_one_request(tmp_path, provider_server, sqlite_url):
    vast = RateLimitedVast(0.08, burst=True)
    provider_server.route("POST", "/api/v0/bundles/", vast)
    # No interval configured: the second request is refused; the backoff (0.1 s: the base)
    # then spaces every later request of the queue, so the retry succeeds, nothing is refused
    # again and the crawl completes. A one-request pause would leave the later requests
    # back to back, refused again and again until the retries are spent.
    proc, result = crawl_vast(tmp_path, provider_server, sqlite_url, request_interval=0,
                              limit=3)
    assert result["status"] == "ok", (result, proc.stderr)
    assert result["items"] == 2 * 9  # 9 offers, on-demand and spot each
    assert vast.answers[:2] == [200, 429], vast.answers
    assert 429 not in vast.answers[2:] and len(vast.answers[2:]) > 5, vast.answers


def test_a_daily_quota_is_not_waited_out(tmp_path, provider_server, sqlite_url):
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(
        429, b'{"error": "search_quota_exceeded", "msg": "Daily search row quota exhausted"}',
        headers={"Retry-After": "36000"}))
    proc, result = crawl_vast(tmp_path, provider_server, sqlite_url, request_interval=0)
    assert result["status"] == "failed" and "HTTP 429" in result["error"]
    assert "asking to wait 36000 s (Retry-After); not retried" in proc.stderr
    assert "daily search quota is exhausted (HTTP 429 search_quota_exceeded, Retry-After " \
        "36000 s); the crawl stops here" in result["error"]
    assert len(provider_server.requests) == 1  # the second search is not spent on a refusal
    assert "Traceback" not in proc.stderr


def test_a_quota_hit_mid_crawl_keeps_what_was_read_and_closes_nothing(tmp_path, provider_server,
                                                                       sqlite_url):
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(
        body=json.dumps(vastai_search(req.json(), vastai_offers())).encode()))
    # limit 3: the searches are split, so the crawl makes several in a row.
    _, first = crawl_vast(tmp_path, provider_server, sqlite_url, request_interval=0, limit=3)
    assert first["status"] == "ok" and first["items"] == 2 * 9

    answered = []

    def quota_after_six_searches(req):
        if len(answered) >= 6:
            return Reply(429, b'{"error": "search_quota_exceeded", "msg": "Daily search row '
                              b'quota exhausted"}', headers={"Retry-After": "36000"})
        answered.append(req)
        return Reply(body=json.dumps(vastai_search(req.json(), vastai_offers())).encode())

    provider_server.route("POST", "/api/v0/bundles/", quota_after_six_searches)
    proc, second = crawl_vast(tmp_path, provider_server, sqlite_url, request_interval=0, limit=3)
    assert second["status"] == "partial", (second, proc.stderr)
    assert 0 < second["items"] < 2 * 9 and second["closed"] == 0  # the unread ones stay open
    assert "daily search quota is exhausted" in second["error"]
    assert "searches not made: " in second["error"]


def test_an_invalid_key_is_auth_failed_and_stops_the_crawl(tmp_path, provider_server,
                                                           sqlite_url):
    """Vast answers a bad key with HTTP 404 "Invalid user key" (its API reference):
    `sources --check` said http-error; it now says auth-failed, naming the setting, and a
    crawl stops after the first refusal with one line (partial: nothing closed)."""
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(
        404, (FIX / "error_invalid_user_key.json").read_bytes()))
    key = "vast-key-never-shown-42"
    others = {name: {"enabled": False} for name in providers.names() if name != "vastai"}
    cfg = write_config(tmp_path / "c.yaml", sources={**others, "vastai": {"api_key": key}},
                       endpoints={"vastai.bundles": provider_server.base + "/api/v0/bundles/"},
                       scrapy={"DOWNLOAD_DELAY": 0})
    check = gpuradar("sources", "--check", "--json", config=cfg, db_url=sqlite_url)
    [row] = [r for r in json.loads(check.stdout) if r["source"] == "vastai"]
    assert row["result"] == "auth-failed", row
    assert "Invalid user key" in row["detail"] and "VAST_API_KEY" in row["fix"]
    proc = gpuradar("crawl", "vastai", "--json", config=cfg, db_url=sqlite_url)
    [result] = json.loads(proc.stdout)
    assert result["status"] in ("partial", "failed") and result["closed"] == 0
    assert "Vast refused the API key: HTTP 404 Invalid user key" in result["error"]
    searches = [r for r in provider_server.requests if r.path == "/api/v0/bundles/"]
    assert len(searches) == 2  # the probe's and the crawl's first: no more after a refusal
    assert key not in check.stdout + check.stderr + proc.stdout + proc.stderr
