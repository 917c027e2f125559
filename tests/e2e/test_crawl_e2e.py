"""End to end: the real `gpuradar` command crawls a real HTTP server that answers with
recorded provider responses, then lists what it stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.provider_server import ProviderServer, Reply, serve_standard

FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 2}


#: Azure walked in one region: eastus, whose 9 meters are 2 pages (tests/routes/core.py).
EASTUS = {"azure": {"regions": ["eastus"]}}


def config_for(tmp_path: Path, server: ProviderServer, sources: dict | None = None,
               **scrapy) -> Path:
    return write_config(tmp_path / "config.yaml", endpoints=serve_standard(server),
                        scrapy={**FAST, **scrapy}, **({"sources": sources} if sources else {}))


def summary(proc) -> dict[str, dict]:
    return {r["source"]: r for r in json.loads(proc.stdout)}


def test_crawl_then_prices(tmp_path, provider_server, db_url):
    cfg = config_for(tmp_path, provider_server)
    proc = gpuradar("crawl", "fx", "azure", "vastai", "--json", config=cfg, db_url=db_url)
    assert proc.returncode == 0, proc.stderr
    result = summary(proc)
    assert result["azure"]["status"] == "ok" and result["azure"]["items"] == 13
    assert result["azure"]["dropped"] == {"zero_price": 1}
    assert result["vastai"]["status"] == "ok"
    assert result["vastai"]["unknown_gpus"] == ["RTX 9090 Ti"]
    assert "matches nothing in the catalog" in proc.stderr

    h100 = gpuradar_json("prices", "--gpu", "H100", config=cfg, db_url=db_url)
    sources = {(o["source"], o["pricing"]) for o in h100}
    assert {("azure", "on_demand"), ("azure", "spot"), ("vastai", "on_demand"),
            ("vastai", "spot")} <= sources
    assert all(o["gpu"].startswith("H100") for o in h100)
    per_gpu = [o["price_per_gpu_usd"] for o in h100]
    assert per_gpu == sorted(per_gpu)
    nd = next(o for o in h100 if o["instance_type"] == "Standard_ND96isr_H100_v5"
              and o["pricing"] == "on_demand")
    assert nd["gpu_count"] == 8 and nd["price_per_gpu_usd"] == pytest.approx(98.32 / 8)
    # The zero-priced meter was dropped, never stored as 0.
    assert not any(o["region"] == "westeurope" and o["gpu"].startswith("H100") for o in h100)
    unknown = gpuradar_json("prices", "--gpu", "RTX 9090 Ti", config=cfg, db_url=db_url)
    assert [o["gpu"] for o in unknown] == ["RTX 9090 Ti", "RTX 9090 Ti"]
    csv_out = gpuradar("prices", "--source", "azure", "--pricing", "spot", "--csv", config=cfg,
                       db_url=db_url)
    assert csv_out.stdout.splitlines()[0].startswith("id,source,region")
    assert len(csv_out.stdout.splitlines()) == 1 + 4


def test_failing_source_closes_nothing_and_spares_the_others(tmp_path, provider_server,
                                                           sqlite_url):
    cfg = config_for(tmp_path, provider_server)
    assert gpuradar("crawl", "fx", "azure", "vastai", config=cfg, db_url=sqlite_url).returncode == 0
    before = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)

    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(500, b"oops"))
    # Vast: one H100 offer is no longer listed: it must close.
    from tests.routes.core import vastai_offers, vastai_search

    remaining = [o for o in vastai_offers() if o["machine_id"] != 59380]
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(
        body=json.dumps(vastai_search(req.json() or {}, remaining)).encode()))
    proc = gpuradar("crawl", "azure", "vastai", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1  # a crawl failed
    result = summary(proc)
    assert result["azure"]["status"] == "failed"
    assert "HTTP 500" in result["azure"]["error"]
    assert result["vastai"]["status"] == "ok" and result["vastai"]["closed"] == 2  # od + spot
    after = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]
    src = {s["source"]: s for s in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert src["azure"]["last_status"] == "failed" and src["vastai"]["last_status"] == "ok"


def test_429_is_retried_with_backoff(tmp_path, provider_server, sqlite_url):
    cfg = config_for(tmp_path, provider_server, EASTUS)
    original = provider_server.routes[("GET", "/api/retail/prices")]
    calls = []

    def throttled_twice(req):
        calls.append(req)
        return Reply(429, b"Too Many Requests") if len(calls) <= 2 else original(req)

    provider_server.route("GET", "/api/retail/prices", throttled_twice)
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    # eastus: 6 offers of its 9 meters (4 sizes, on-demand and spot)
    assert summary(proc)["azure"]["status"] == "ok" and summary(proc)["azure"]["items"] == 6
    assert len(calls) == 4  # 2 throttled + page 1 + page 2


def test_429_storm_and_timeout_fail_the_crawl_and_close_nothing(tmp_path, provider_server,
                                                               sqlite_url):
    cfg = config_for(tmp_path, provider_server, DOWNLOAD_TIMEOUT=1, RETRY_TIMES=1)
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(429, b"slow down"))
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 1
    assert summary(proc)["azure"]["status"] == "failed"
    assert len(gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)) == 13
    provider_server.route("GET", "/api/retail/prices", lambda req: Reply(200, b"{}", delay=2.5))
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    assert summary(proc)["azure"]["status"] == "failed"
    assert len(gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)) == 13


def test_unexpected_shape_names_source_and_field(tmp_path, provider_server, sqlite_url):
    cfg = config_for(tmp_path, provider_server)
    provider_server.route("GET", "/api/retail/prices",
                          lambda req: Reply(body=b'{"BillingCurrency": "USD", "Records": []}'))
    proc = gpuradar("crawl", "azure", "--json", config=cfg, db_url=sqlite_url)
    result = summary(proc)["azure"]
    assert result["status"] == "failed"
    # one line: the source, the URL, the status and content type, then the field
    assert result["error"].startswith("azure: unreadable response from http://")
    assert "(HTTP 200, application/json): unexpected response shape: field 'Items' is " \
           "missing" in result["error"]


def test_record_then_replay_without_network(tmp_path, provider_server, sqlite_url):
    cfg = config_for(tmp_path, provider_server, EASTUS)
    rec = tmp_path / "rec"
    proc = gpuradar("crawl", "fx", "azure", "--record", str(rec), config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    assert (rec / "azure" / "index.json").exists()
    entries = json.loads((rec / "azure" / "index.json").read_text())
    assert len(entries) == 2 and entries[0]["status"] == 200  # eastus: 2 pages
    # Replay into a fresh database with the default (unreachable) endpoints; the same
    # regions (the default ones would ask for pages the recording does not hold).
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    replay_cfg = write_config(tmp_path / "replay.yaml", sources=EASTUS)
    proc = gpuradar("crawl", "fx", "azure", "--replay", str(rec), "--json", config=replay_cfg,
                    db_url=fresh)
    assert proc.returncode == 0, proc.stderr
    assert summary(proc)["azure"]["items"] == 6
    replayed = gpuradar_json("prices", "--source", "azure", db_url=fresh)
    original = gpuradar_json("prices", "--source", "azure", db_url=sqlite_url)
    assert [(o["instance_type"], o["price"]) for o in replayed] == [
        (o["instance_type"], o["price"]) for o in original]
    # The recording is dated when it was recorded; the replay's offers carry that date and
    # say they were replayed, the live ones do not (issue #32).
    captured = json.loads((rec / "azure" / "provenance.json").read_text())["captured"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", captured)
    at = captured  # machine output's one timestamp form is the recording's: ...Z
    assert all(o["replayed"] is True and o["captured"] == at and o["observed_at"] == at
               for o in replayed)
    assert all(o["replayed"] is False and o["captured"] is None for o in original)
    # a second replay of the same recording changes nothing and is refused nothing
    again = gpuradar("crawl", "azure", "--replay", str(rec), "--json", config=replay_cfg,
                     db_url=fresh)
    assert again.returncode == 0 and summary(again)["azure"]["changed"] == 0


def test_bad_database_urls_are_one_clear_line(tmp_path):
    proc = gpuradar("prices", db_url="notadb://what")
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr and "database" in proc.stderr
    proc = gpuradar("prices", db_url="postgresql://postgres:secretpw@127.0.0.1:1/nope")
    assert proc.returncode == 3
    assert "cannot be reached" in proc.stderr and "secretpw" not in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 3


def test_bad_config_is_a_clear_error(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("sources:\n  azure: [1, 2\n")
    proc = gpuradar("sources", config=cfg)
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr and str(cfg) in proc.stderr
    cfg.write_text("databse_url: sqlite:///x.db\n")
    proc = gpuradar("sources", config=cfg)
    assert proc.returncode == 2
    assert f"{cfg}:1: unknown key 'databse_url' at the top level — did you mean " \
        "'database_url'?" in proc.stderr


def test_unknown_source_and_bad_gpu_are_usage_errors(sqlite_url):
    proc = gpuradar("crawl", "nosuch", db_url=sqlite_url)
    assert proc.returncode == 2 and "unknown source(s) 'nosuch'; known: alibaba," in proc.stderr
    proc = gpuradar("crawl", "", db_url=sqlite_url)  # an empty name is seen, not blank
    assert proc.returncode == 2 and "unknown source(s) ''; known: alibaba," in proc.stderr
    proc = gpuradar("prices", "--gpu", "H10O", db_url=sqlite_url)
    assert proc.returncode == 2 and "did you mean H100" in proc.stderr
