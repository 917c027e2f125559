"""One retry policy for every source (gpuradar.crawler.middlewares.BackoffRetryMiddleware):
a 429/503 with Retry-After (seconds or an HTTP date) is waited for whatever the source's
request interval, a longer one than RETRY_BACKOFF_MAX is reported with the cap, retries are
counted, a spider can say a response is throttling; and a body that is not what the spider
reads is one line. The waits are computed with a fake clock and recorded, never slept."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from gpuradar.core.clock import FakeClock
from gpuradar.crawler.middlewares import BackoffRetryMiddleware, retry_after_seconds
from gpuradar.crawler.runner import spider_classes as _spider_classes
from tests.clirun import gpuradar, write_config
from tests.provider_server import Reply, serve_standard

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def spider_classes() -> dict:
    """name -> spider class, as Scrapy's loader finds them in the project's settings."""
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    return _spider_classes(settings)


def middleware(spidercls, **settings):
    project = Settings()
    project.setmodule("gpuradar.crawler.settings", priority="project")
    project.setdict(settings, priority="cmdline")
    # the retry settings only: no reactor here, the coroutines run on asyncio.run
    values = {k: v for k, v in project.copy_to_dict().items()
              if k.startswith(("RETRY_", "GPURADAR_"))}
    crawler = get_crawler(spidercls, values)
    crawler.spider = crawler._create_spider()
    mw = BackoffRetryMiddleware(crawler)
    clock = FakeClock(NOW)

    async def sleep(seconds: float) -> None:  # records the wait and advances the clock
        clock.sleep(seconds)

    mw.clock, mw.sleep = clock, sleep
    return mw, clock


def answer(request: Request, status: int, **headers: str) -> TextResponse:
    return TextResponse(request.url, status=status, headers=headers, body=b"{}",
                        request=request)


@pytest.mark.parametrize("source", sorted(spider_classes()))
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_for_by_every_source(source, status):
    """azure and oci have no request interval: their 429 was retried at once, 4 times."""
    mw, clock = middleware(spider_classes()[source])
    first = Request("https://api.example.test/page1")
    retry = asyncio.run(mw.process_response(first, answer(first, status, **{
        "Retry-After": "10"})))
    assert isinstance(retry, Request) and retry.meta["retry_times"] == 1
    # the retry and every other request to that host wait the 10 s; another host does not
    asyncio.run(mw.process_request(retry))
    asyncio.run(mw.process_request(Request("https://api.example.test/page2")))
    asyncio.run(mw.process_request(Request("https://other.example.test/x")))
    assert clock.slept == [10.0]
    assert mw.crawler.stats.get_value("gpuradar/throttled") == 1


def test_retry_after_as_an_http_date():
    assert retry_after_seconds(format_datetime(NOW + timedelta(seconds=20), usegmt=True),
                               NOW) == 20.0
    assert retry_after_seconds(b"7", NOW) == 7.0
    assert retry_after_seconds(format_datetime(NOW - timedelta(hours=1), usegmt=True),
                               NOW) == 0.0
    assert retry_after_seconds("soon", NOW) is None and retry_after_seconds(None, NOW) is None
    mw, clock = middleware(spider_classes()["oci"])
    req = Request("https://oci.example.test/prices")
    retry = asyncio.run(mw.process_response(req, answer(req, 429, **{
        "Retry-After": format_datetime(NOW + timedelta(seconds=20), usegmt=True)})))
    asyncio.run(mw.process_request(retry))
    assert clock.slept == [20.0]


def test_a_retry_after_beyond_the_cap_is_reported_with_the_cap(caplog):
    mw, clock = middleware(spider_classes()["azure"], RETRY_BACKOFF_MAX=60)
    req = Request("https://prices.azure.example.test/api")
    with caplog.at_level(logging.ERROR):
        result = asyncio.run(mw.process_response(req, answer(req, 429, **{
            "Retry-After": "3600"})))
    assert result.status == 429 and clock.slept == []
    assert ("azure: prices.azure.example.test answered 429 asking to wait 3600 s "
            "(Retry-After); not retried in this crawl (waits are capped at RETRY_BACKOFF_MAX "
            "= 60 s)") in caplog.text


def test_without_retry_after_the_backoff_doubles_and_the_retries_are_counted():
    mw, clock = middleware(spider_classes()["azure"], RETRY_BACKOFF_BASE=2, RETRY_TIMES=3)
    req = Request("https://azure.example.test/api")
    waits = []
    for _ in range(3):
        req = asyncio.run(mw.process_response(req, answer(req, 429)))
        assert isinstance(req, Request)
        waits.append(mw.resume_at["azure.example.test"] - clock.monotonic())
        asyncio.run(mw.process_request(req))
    assert waits == [2.0, 4.0, 8.0] and clock.slept == [2.0, 4.0, 8.0]
    last = asyncio.run(mw.process_response(req, answer(req, 429)))
    assert last.status == 429  # RETRY_TIMES spent: the answer stands
    assert mw.crawler.stats.get_value("retry/max_reached") == 1


def test_a_spider_can_say_a_response_is_throttling():
    """The hook for answers that throttle with another status (Alibaba: HTTP 403 with Code
    Throttling.User, per its API error centre)."""

    class Throttled(spider_classes()["azure"]):
        def throttle_pause(self, response) -> float | None:
            return 7.0 if response.status == 403 and b"Throttling" in response.body else None

    mw, clock = middleware(Throttled)
    req = Request("https://ecs.example.test/")
    refused = TextResponse(req.url, status=403, body=b'{"Code": "Throttling.User"}',
                           request=req)
    retry = asyncio.run(mw.process_response(req, refused))
    assert isinstance(retry, Request)
    assert mw.resume_at["ecs.example.test"] == clock.monotonic() + 7.0  # the spider's pause holds
    forbidden = TextResponse(req.url, status=403, body=b'{"Code": "Forbidden"}', request=req)
    assert asyncio.run(mw.process_response(req, forbidden)) is forbidden


@pytest.fixture
def waits_file(tmp_path):
    path = tmp_path / "waits.txt"
    path.touch()
    return path


def crawl_recording_waits(tmp_path, waits_file, endpoints, *sources, db_url, options=None):
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       **({"sources": options} if options else {}))
    env = {"SCRAPY_SETTINGS_MODULE": "tests.crawler.retry_waits",
           "GPURADAR_TEST_WAITS": str(waits_file),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = gpuradar("crawl", *sources, "--json", config=cfg, db_url=db_url, env=env)
    waits = [float(line) for line in waits_file.read_text().split()]
    return proc, waits


@pytest.mark.parametrize("source, path, options, pages", [
    # One region (eastus: its 9 meters are 2 pages): every request after the 429 records
    # the rest of the 10 s as its wait, so a walk of all 56 regions would take long enough
    # in real time for the later waits to fall under 9 s.
    ("azure", "/api/retail/prices", {"azure": {"regions": ["eastus"]}}, 2),
    ("oci", "/a/ocom/docs/cloudestimator2/data/shapes.json", None, 1),
])
def test_a_crawl_waits_for_retry_after_end_to_end(tmp_path, provider_server, sqlite_url,
                                                   waits_file, source, path, options, pages):
    """Over real HTTP: the provider answers 429 Retry-After: 10 once; the crawl asks again
    after the 10 s (recorded, not slept) and completes."""
    endpoints = serve_standard(provider_server, [source])
    original = provider_server.routes[("GET", path)]
    calls = []

    def throttle_once(req):
        calls.append(req)
        if len(calls) == 1:
            return Reply(429, b"Too Many Requests", headers={"retry-after": "10"})
        return original(req)

    provider_server.route("GET", path, throttle_once)
    proc, waits = crawl_recording_waits(tmp_path, waits_file, endpoints, source,
                                        db_url=sqlite_url, options=options)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "ok"
    assert len(calls) == pages + 1  # the refused one, asked again once
    assert waits and all(9.0 < w <= 10.0 for w in waits), waits


def test_an_html_page_instead_of_json_is_one_line(tmp_path, provider_server, sqlite_url):
    endpoints = serve_standard(provider_server, ["azure"])
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(
        200, b"<html><body>Access denied</body></html>", content_type="text/html"))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0})
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "failed"
    assert result["error"].startswith(f"azure: unreadable response from {provider_server.base}"
                                      "/api/retail/prices?")
    assert result["error"].endswith("(HTTP 200, text/html): body is not JSON (Expecting "
                                    "value: line 1 column 1 (char 0))")
    lines = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert len(lines) == 1, proc.stderr
    verbose = gpuradar("crawl", "azure", "-v", config=cfg, db_url=sqlite_url)
    assert "azure: the response began with b'<html><body>Access denied</body></html>'" \
        in verbose.stderr
    assert "Traceback" not in verbose.stderr


def test_unreadable_response_middleware_passes_scrapy_exceptions():
    from scrapy.exceptions import CloseSpider

    from gpuradar.crawler.middlewares import UnreadableResponseMiddleware

    crawler = get_crawler(spider_classes()["azure"])
    crawler.spider = crawler._create_spider()
    mw = UnreadableResponseMiddleware(crawler)
    page = HtmlResponse("https://x.test/", body=b"<html/>", request=Request("https://x.test/"))
    assert mw.process_spider_exception(page, CloseSpider("done")) is None
    assert mw.process_spider_exception(page, KeyError("items")) == []


@pytest.mark.parametrize("source", ["azure", "vastai"])
def test_an_answer_cut_short_is_one_line_with_its_reason(tmp_path, provider_server, sqlite_url,
                                                         source):
    """HTTP 200 with Content-Length, the connection closed mid-body: was 60 lines of
    ResponseDataLossError tracebacks and an empty reason (issue 49, finding 7). Azure has no
    errback for its price pages, Vast.ai has one: the reason reaches both."""
    endpoints = serve_standard(provider_server, [source])
    for (method, path), handler in list(provider_server.routes.items()):
        provider_server.route(method, path, lambda req, h=handler: Reply(
            **{**vars(h(req)), "cut_after": 5}))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints,
                       scrapy={"DOWNLOAD_DELAY": 0, "RETRY_TIMES": 1})
    proc = gpuradar("crawl", source, "--json", config=cfg, db_url=sqlite_url)
    assert "Traceback" not in proc.stderr, proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "failed"
    assert "answer cut short (the connection closed before the whole body arrived)" in \
        result["error"], result["error"]
    assert "ResponseDataLossError" not in proc.stderr
