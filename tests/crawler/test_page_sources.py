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
