"""The read-only web page at `/` of the service's metrics port, in Debian's real Chromium.

The page is served by the service's own HTTP endpoint (scheduler/health.py), in-process
against a database the time-lapse demo replayed (offers, history, a firing alert), and by a
real `gpuradar run --replay` subprocess."""

from __future__ import annotations

import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.clirun import gpuradar
from tests.daemon_helpers import RECORDINGS, Daemon, copy_recordings, write_config
from tests.helpers import free_port

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    if os.environ.get("GPURADAR_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{CHROMIUM} is required (GPURADAR_REQUIRE_CHROMIUM=1) but missing",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def request(url: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The service's HTTP endpoint in-process, over the time-lapse demo's database."""
    from gpuradar.scheduler.health import Health, make_app, serve
    from gpuradar.storage.db import open_database
    from prometheus_client import CollectorRegistry

    db = tmp_path_factory.mktemp("web") / "demo.db"
    proc = gpuradar("demo", "--timeline", "--pace", "0", "--keep", str(db))
    assert proc.returncode == 0, proc.stderr
    engine = open_database(f"sqlite:///{db}")
    httpd = serve("127.0.0.1", free_port(), make_app(CollectorRegistry(), Health(lambda: engine),
                                                     lambda text: text))
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


def test_page_renders_table_alerts_sources_and_chart_in_chromium(site, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(site + "/")
    cells = page.locator("#cheapest tbody tr").first.locator("td").all_inner_texts()
    assert cells[0] == "H100-SXM-80GB" and cells[3] == "$0.4001" and cells[5] == "spot"
    assert "vastai" in cells and "79.6 GB" in cells
    assert page.locator("#alerts").inner_text().count("cheap-h100") == 1
    assert "H100 on-demand under $1.50/h on vastai" in page.locator("#alerts").inner_text()
    sources = page.locator("#sources tbody tr").all_inner_texts()
    assert len(sources) == 1 and sources[0].startswith("vastai") and "ok," in sources[0]
    chart = page.locator("figure svg.chart").first
    box = chart.bounding_box()
    assert box and box["width"] > 400 and box["height"] > 100  # drawn, not an empty box
    path = chart.locator("path.line").get_attribute("d")
    assert path and path.count("L") >= 6  # a stepped line, not one dot
    labels = chart.locator("text").all_text_contents()
    assert "$/GPU-h" in labels and any(re.fullmatch(r"\$\d\.\d+", t) for t in labels)
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert (tmp_path / "page.png").stat().st_size > 10_000
    # everything came from the service itself: no CDN, no font, no script
    assert requested and all(u.startswith(site) for u in requested)


def test_filters_are_query_parameters_and_need_no_javascript(site, browser):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(site + "/")
    page.select_option("select[name=pricing]", "on-demand")
    page.click("button[type=submit]")
    assert "pricing=on-demand" in page.url
    cells = page.locator("#cheapest tbody tr").first.locator("td").all_inner_texts()
    assert cells[3] == "$1.3867" and cells[5] == "on-demand"
    page.fill("input[name=gpu]", "MI300X")
    page.click("button[type=submit]")
    assert page.locator("#cheapest").count() == 0
    assert "No offer matches these filters." in page.content()
    page.goto(site + "/?region=mainland")
    assert "No offer matches these filters." in page.content()
    page.goto(site + "/?region=U%3F&source=vastai&gpu=H100")
    assert page.locator("#cheapest tbody tr").count() == 1
    context.close()


def test_the_page_is_read_only_and_escapes_what_it_echoes(site):
    for path in ("/", "/metrics", "/healthz"):
        status, headers, _ = request(site + path, "POST")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, body = request(site + "/?gpu=%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 200 and "<script>" not in body and "&lt;script&gt;" in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]


def test_the_running_service_serves_the_page(tmp_path, sqlite_template):
    """`gpuradar run --replay` on every shipped real recording, without any credential
    (gcp's needs an API key live), crawls each ok and answers `/` with its offers, dated at
    their capture and marked replayed (issue #32)."""
    recorded = sorted(p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists())
    recordings = copy_recordings(tmp_path / "recordings", recorded)
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": f"sqlite:///{tmp_path / 'gpuradar.db'}",
        "sources": {name: {"interval": 600, "jitter": 0} for name in recorded}})
    port = free_port()
    daemon = Daemon(tmp_path, config, "--replay", str(recordings), "--metrics-port", str(port),
                    metrics_port=port, env={"GCP_API_KEY": "", "VAST_API_KEY": ""})
    try:
        daemon.wait_ready()
        for name in recorded:
            daemon.wait_metric("gpuradar_crawls_total", 1, source=name, status="ok")
        status, body = daemon.get("/")
        assert status == 200 and "<table id=\"cheapest\">" in body
        assert "H100-SXM-80GB" in body and "$0.4001" in body
        assert "Cheapest live" not in body and "Replayed from recordings, not live" in body
        assert "vastai captured 2026-08-22" in body and "gcp captured 2023-03-24" in body
        assert "captured 2026-08-22 (replayed)" in body and " ago</td></tr>" not in body
        assert request(f"http://127.0.0.1:{port}/", "POST")[0] == 405
    finally:
        assert daemon.stop() == 0
