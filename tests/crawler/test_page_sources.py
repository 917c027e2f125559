"""A pricing page is a site, not an API: gpuradar names itself, obeys the site's robots.txt
and asks for an unchanged page conditionally. Checked over real HTTP on loopback with one
page source's real capture (Verda's, tests/fixtures/verda/SOURCE.md)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.make_recordings import captures, serve_capture
from tests.provider_server import ProviderServer, Reply, Request, fixture

PAGE = fixture("verda/pricing_jsonld_real.html")
ETAG = '"verda-2026-08"'


def _config(tmp_path: Path, server: ProviderServer, **scrapy: object) -> Path:
    return write_config(tmp_path / "c.yaml", endpoints=serve_capture(server, captures()["verda"]),
                        scrapy={"DOWNLOAD_DELAY": 0, **scrapy})


def _crawl(cfg: Path, db_url: str) -> dict:
    proc = gpuradar("crawl", "verda", "--json", config=cfg, db_url=db_url)
    (result,) = json.loads(proc.stdout)
    return result


def test_a_page_is_asked_for_with_the_user_agent_and_revalidated_when_unchanged(
        tmp_path, provider_server, sqlite_url):
    def page(req: Request) -> Reply:
        if req.headers.get("if-none-match") == ETAG:
            return Reply(304, b"", "text/html; charset=utf-8", headers={"etag": ETAG})
        return Reply(body=PAGE, content_type="text/html; charset=utf-8", headers={"etag": ETAG})

    cfg = _config(tmp_path, provider_server,
                  USER_AGENT="gpuradar-test (+https://example.org/contact)")
    provider_server.route("GET", "/pricing", page)
    first = _crawl(cfg, sqlite_url)
    assert first["status"] == "ok" and first["items"] == 32
    before = gpuradar_json("prices", "--source", "verda", "--limit", "0", db_url=sqlite_url)
    second = _crawl(cfg, sqlite_url)
    # the second ask is conditional, the 304 answers it from the cache: the same offers
    assert second["status"] == "ok" and second["items"] == 32 and second["closed"] == 0
    asks = [r for r in provider_server.requests if r.path == "/pricing"]
    assert [r.headers.get("if-none-match") for r in asks] == [None, ETAG]
    assert {r.headers["user-agent"] for r in asks} == {
        "gpuradar-test (+https://example.org/contact)"}
    assert [r.path for r in provider_server.requests].count("/robots.txt") == 2
    after = gpuradar_json("prices", "--source", "verda", "--limit", "0", db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]


def test_a_page_robots_txt_forbids_fails_the_crawl_and_closes_nothing(
        tmp_path, provider_server, sqlite_url):
    cfg = _config(tmp_path, provider_server)
    assert _crawl(cfg, sqlite_url)["status"] == "ok"
    before = gpuradar_json("prices", "--source", "verda", "--limit", "0", db_url=sqlite_url)
    provider_server.route("GET", "/robots.txt", lambda req: Reply(
        body=b"User-agent: *\nDisallow: /pricing\n", content_type="text/plain"))
    result = _crawl(cfg, sqlite_url)
    assert (result["status"], result["items"], result["closed"]) == ("failed", 0, 0)
    assert result["error"] == "1 page(s) forbidden by the site's robots.txt, not read"
    assert [r.path for r in provider_server.requests].count("/pricing") == 1  # the first crawl
    after = gpuradar_json("prices", "--source", "verda", "--limit", "0", db_url=sqlite_url)
    assert after == before


def test_lambda_reads_its_page_as_a_page_source_without_a_key_and_its_api_as_before_with_one(
        tmp_path, provider_server, sqlite_url):
    # Lambda's declaration is an API source; without a key it reads lambda.ai/pricing.
    from tests.routes.lambda_ import ROUTES

    def page(req: Request) -> Reply:
        if req.headers.get("if-none-match") == '"lambda-page"':
            return Reply(304, b"", "text/html; charset=utf-8", headers={"etag": '"lambda-page"'})
        reply = ROUTES["lambda.pricing"][2](req)
        return Reply(body=reply.body, content_type=reply.content_type,
                     headers={"etag": '"lambda-page"'})

    provider_server.route("GET", "/pricing", page)
    provider_server.route(*ROUTES["lambda.instance_types"][:3])
    base = provider_server.base
    endpoints = {"lambda.pricing": f"{base}/pricing",
                 "lambda.instance_types": f"{base}/api/v1/instance-types"}
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={"lambda": {"request_interval": 0}})
    crawl = ["crawl", "lambda", "--json"]
    first, second = (json.loads(gpuradar(*crawl, config=cfg, db_url=sqlite_url).stdout)[0]
                     for _ in range(2))
    assert first["status"] == second["status"] == "ok" and second["closed"] == 0
    paths = [r.path for r in provider_server.requests]
    assert paths.count("/robots.txt") == 2  # the page rules: robots.txt asked first
    asks = [r for r in provider_server.requests if r.path == "/pricing"]
    assert [r.headers.get("if-none-match") for r in asks] == [None, '"lambda-page"']
    # a robots.txt that forbids the page: not read, the crawl fails, nothing is closed
    provider_server.route("GET", "/robots.txt", lambda req: Reply(
        body=b"User-agent: *\nDisallow: /\n", content_type="text/plain"))
    forbidden = json.loads(gpuradar(*crawl, config=cfg, db_url=sqlite_url).stdout)[0]
    assert (forbidden["status"], forbidden["closed"]) == ("failed", 0)
    assert forbidden["error"] == "1 page(s) forbidden by the site's robots.txt, not read"
    # with a key the API is asked as before: an API, not a site (no robots.txt, no cache)
    before = len(provider_server.requests)
    keyed = json.loads(gpuradar(*crawl, config=cfg, db_url=sqlite_url,
                                env={"LAMBDA_API_KEY": "lambda-key-9"}).stdout)[0]
    # (partial: the shrink guard holds the page's 22 offers that the API's 10 do not list)
    assert keyed["items"] == 10 and keyed["closed"] == 0, keyed
    assert [r.path for r in provider_server.requests[before:]] == ["/api/v1/instance-types"]
