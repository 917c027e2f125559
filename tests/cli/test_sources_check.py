"""`gpuradar sources --check` against local servers standing in for the providers: one line
per source and credential, each failure class named with its fix, nothing stored."""

from __future__ import annotations

import json
import re

from scrapy.settings import Settings

from gpuradar.crawler.runner import spider_classes
from tests.clirun import gpuradar, write_config
from tests.helpers import free_port
from tests.make_recordings import captures, serve_capture
from tests.provider_server import Reply, fixture, serve_standard

USED = {"fx", "vastai", "tencent", "autodl", "azure", "alibaba", "lambda", "huawei"}


def test_each_failure_class_is_one_line_with_its_fix(tmp_path, provider_server, sqlite_url):
    endpoints = serve_standard(provider_server)
    # vastai: throttled, as Vast answers when asked too often.
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(
        429, b'{"detail": "API requests too frequent endpoint threshold=1.0"}'))
    # tencent: a key Tencent refuses.
    provider_server.route("POST", "/", lambda req: Reply(
        body=fixture("tencent/error_signature.json")))
    # azure: an answer in a shape the parser does not know.
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(
        body=b'{"BillingCurrency": "USD", "Records": []}'))
    # lambda: the pricing page is gone.
    provider_server.routes.pop(("GET", "/pricing"))
    # alibaba: nothing listens.
    endpoints["alibaba.discovery_china"] = f"http://127.0.0.1:{free_port()}/price"
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    disabled = {name: {"enabled": False} for name in spider_classes(settings) if name not in USED}
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources={**disabled,
                                "tencent": {"secret_id": "AKIDx", "secret_key": "tc-secret-9",
                                            "site": "china"},
                                "huawei": {"access_key": "AKx", "secret_key": "hw-secret-9"},
                                "autodl": {"web_token": "autodl-token-9",
                                           "dev_token": "autodl-dev-9"}})
    # autodl: the web token has expired; the developer token works.
    provider_server.route("POST", "/api/v1/user/machine/list", lambda req: Reply(
        body=fixture("autodl/error_authorize_failed.json")))
    proc = gpuradar("sources", "--check", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1, proc.stderr
    rows = {(r["source"], r["check"]): r for r in json.loads(proc.stdout)}
    result = {key: row["result"] for key, row in rows.items()}
    assert result == {
        ("fx", "first request"): "ok",
        ("huawei", "first request"): "ok",
        ("vastai", "search"): "rate-limited",
        ("tencent", "first request"): "auth-failed",
        ("autodl", "web_token"): "auth-failed",
        ("autodl", "dev_token"): "ok",
        ("azure", "first request"): "not-understood",
        ("lambda", "first request"): "http-error",
        ("alibaba", "first request"): "unreachable",
    }
    assert "AuthFailure.SignatureFailure" in rows[("tencent", "first request")]["detail"]
    assert "TENCENTCLOUD_SECRET_ID" in rows[("tencent", "first request")]["fix"]
    assert "AUTODL_WEB_TOKEN" in rows[("autodl", "web_token")]["fix"]
    assert "'Items' is missing" in rows[("azure", "first request")]["detail"]
    # the source is named by its column, not again in the detail ("azure: unexpected ...")
    assert not any(row["detail"].startswith(f"{row['source']}:") for row in rows.values())
    assert "HTTP 404" in rows[("lambda", "first request")]["detail"]
    assert "endpoints.lambda.pricing" in rows[("lambda", "first request")]["fix"]
    assert "connection refused" in rows[("alibaba", "first request")]["detail"]
    assert "request_interval" in rows[("vastai", "search")]["fix"]
    assert rows[("fx", "first request")]["detail"].startswith("reachable, answer understood")
    # One cheap request each (autodl: one per token), nothing more.
    paths = [r.path for r in provider_server.requests]
    assert paths.count("/api/v0/bundles/") == 1 and paths.count("/api/retail/prices") == 1
    assert json.loads(next(r.body for r in provider_server.requests
                           if r.path == "/api/v0/bundles/"))["limit"] == 1
    assert json.loads(next(r.body for r in provider_server.requests
                           if r.path == "/api/v1/user/machine/list"))["page_index"] == 1
    for secret in ("tc-secret-9", "hw-secret-9", "autodl-token-9", "autodl-dev-9"):
        assert secret not in proc.stdout + proc.stderr
    # At 80 columns no table fits (azure's detail holds a 130-character URL): one line per
    # source and check, each whole, which the terminal wraps (it was a table 220 wide).
    narrow = gpuradar("sources", "--check", config=cfg, db_url=sqlite_url,
                      env={"COLUMNS": "80"})
    assert narrow.returncode == 1, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert lines[0] == "source check" and len(lines) == 1 + len(rows), narrow.stdout
    for (source, check), row in rows.items():
        line = next(x for x in lines if x.startswith(f"{source} ({check}): "))
        assert line == (f"{source} ({check}): {row['result']} — {row['detail']}"
                        + (f"; fix: {row['fix']}" if row["fix"] else "")), line
    # Nothing was stored.
    sources = json.loads(gpuradar("sources", "--json", config=cfg, db_url=sqlite_url).stdout)
    assert all(s["last_status"] is None for s in sources)


def test_all_ok_exits_zero_and_prints_a_table(tmp_path, provider_server, sqlite_url):
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    disabled = {name: {"enabled": False} for name in spider_classes(settings)
                if name not in {"fx", "vastai"}}
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0}, sources=disabled)
    proc = gpuradar("sources", "--check", config=cfg, db_url=sqlite_url,
                    env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()
            if line.split() and line.split()[0] in ("fx", "vastai")}
    assert set(rows) == {"fx", "vastai"} and all(" ok " in r for r in rows.values()), \
        proc.stdout
    # -v logs in gpuradar's format, as `crawl -v` does (Scrapy's own named a spider's
    # source twice: `[aws] WARNING: aws: ...`)
    verbose = gpuradar("sources", "--check", "-v", config=cfg, db_url=sqlite_url)
    assert verbose.returncode == 0, verbose.stderr
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO scrapy\.", verbose.stderr, re.M)
    assert not re.search(r"\] (INFO|WARNING|ERROR): ", verbose.stderr), verbose.stderr


def test_a_page_its_robots_txt_forbids_is_named_as_such_not_unreachable(
        tmp_path, provider_server, sqlite_url):
    # Verda's pricing page (its real capture) on a site whose robots.txt forbids it
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    disabled = {name: {"enabled": False} for name in spider_classes(settings) if name != "verda"}
    endpoints = serve_capture(provider_server, captures()["verda"])
    provider_server.route("GET", "/robots.txt", lambda req: Reply(
        body=b"User-agent: *\nDisallow: /\n", content_type="text/plain"))
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints, scrapy={"DOWNLOAD_DELAY": 0},
                       sources=disabled)
    proc = gpuradar("sources", "--check", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["source"], row["result"]) == ("verda", "robots-forbidden"), row
    assert row["detail"] == "the site's robots.txt forbids /pricing; not read"
    assert "network" not in row["fix"] and "disable sources.verda" in row["fix"], row
    assert "Traceback" not in proc.stderr
    # the page was not asked for: only the robots.txt
    assert [r.path for r in provider_server.requests] == ["/robots.txt"]
