"""The command line: parse, demo, sources, history, db upgrade."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.provider_server import serve_standard

FIX = Path(__file__).parent / "fixtures"


def test_parse_prints_normalised_items_as_json_lines():
    proc = gpuradar("parse", "azure", str(FIX / "azure/prices_page1.json"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    nd = next(r for r in rows if r["instance_type"] == "Standard_ND96isr_H100_v5"
              and r["pricing"] == "on_demand" and r["region"] == "eastus")
    assert nd["gpu"] == "H100-SXM-80GB" and nd["price_per_gpu_usd"] == 12.29
    zero = next(r for r in rows if r["region"] == "westeurope")
    assert zero["dropped"] == "zero_price"
    proc = gpuradar("parse", "vastai", str(FIX / "vastai/bundles_h100_sxm_real.json"))
    assert {json.loads(line)["gpu"] for line in proc.stdout.splitlines()} == {"H100-SXM-80GB"}
    proc = gpuradar("parse", "fx", str(FIX / "fx/eurofxref-daily.xml"))
    cny = next(json.loads(x) for x in proc.stdout.splitlines() if '"CNY"' in x)
    assert cny["per_eur"] == 8.1871 and cny["rate_date"] == "2026-11-27"


def test_parse_reports_a_changed_page(tmp_path):
    bad = tmp_path / "page.json"
    bad.write_text('{"Items": [{"meterName": "x"}]}')
    proc = gpuradar("parse", "azure", str(bad))
    assert proc.returncode == 1
    assert "'armSkuName' is missing" in proc.stderr and str(bad) in proc.stderr


def test_demo_runs_offline_and_shows_cheapest_per_gpu():
    proc = gpuradar("demo")
    assert proc.returncode == 0, proc.stderr
    assert "cheapest offer per GPU" in proc.stdout
    assert "H100-SXM-80GB" in proc.stdout and "vastai" in proc.stdout


def test_sources_says_what_is_enabled_and_fx_converts(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0}, sources={"vastai": {"enabled": False}})
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["azure"]["enabled"] is True and rows["azure"]["last_status"] is None
    assert rows["vastai"]["enabled"] is False and "disabled" in rows["vastai"]["why"]
    # With no source named, only enabled sources are crawled.
    proc = gpuradar("crawl", "--json", config=cfg, db_url=sqlite_url)
    crawled = {r["source"] for r in json.loads(proc.stdout)}
    assert "vastai" not in crawled and {"azure", "fx"} <= crawled
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["azure"]["last_status"] == "ok" and rows["azure"]["stale"] is False


def test_history_of_an_offer_and_of_a_gpu(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0
    spans = gpuradar_json("history", "azure", "Standard_ND96isr_H100_v5", "--region", "eastus",
                          "--pricing", "on-demand", config=cfg, db_url=sqlite_url)
    assert len(spans) == 1 and spans[0]["price"] == 98.32 and spans[0]["open"] is True
    proc = gpuradar("history", "azure", "Standard_ND96isr_H100_v5", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 2 and "narrow with --region/--pricing" in proc.stderr
    proc = gpuradar("history", "--gpu", "H100", "--days", "1", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0 and "lowest: $4.916 at azure eastus" in proc.stdout


def test_db_upgrade(sqlite_url):
    proc = gpuradar("db", "upgrade", db_url=sqlite_url)
    assert proc.returncode == 0 and "is at head" in proc.stdout


def test_version():
    proc = gpuradar("--version")
    assert proc.returncode == 0 and proc.stdout.strip().startswith("gpuradar 0.")
