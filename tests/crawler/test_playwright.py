"""Pages that only render with JavaScript: scrapy-playwright as wired in crawler/settings.py,
with Debian's real Chromium, against a local page that builds its price table in JavaScript.

Each crawl runs in a subprocess (as `gpuradar crawl` does), so the asyncio reactor and the
browser never touch the test process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.provider_server import ProviderServer, Reply

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    if os.environ.get("GPURADAR_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{CHROMIUM} is required (GPURADAR_REQUIRE_CHROMIUM=1) but missing",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

pytestmark = pytest.mark.chromium

# The table is empty in the HTML; a script fills it after a short delay, like a price
# calculator that fetches its data first.
PAGE = b"""<!doctype html><html><head><title>GPU prices</title></head><body>
<table id="prices"><thead><tr><th>GPU</th><th>price</th></tr></thead><tbody></tbody></table>
<script>
setTimeout(function () {
  var rows = [["RTX 4090", "1.98"], ["A800", "9.60"], ["910B", "7.50"]];
  var body = document.querySelector("#prices tbody");
  rows.forEach(function (r) {
    var tr = document.createElement("tr");
    tr.innerHTML = "<td class='gpu'>" + r[0] + "</td><td class='price'>" + r[1] + "</td>";
    body.appendChild(tr);
  });
}, 150);
</script></body></html>"""

SCRIPT = textwrap.dedent('''
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings
    from scrapy_playwright.page import PageMethod

    base, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    render = mode in ("render", "undeclared")
    rows, plain, failures = [], [], []

    class PageSpider(scrapy.Spider):
        name = "page"
        if mode == "undeclared":  # a gpuradar spider that does not say it renders pages
            renders_pages = False

        async def start(self):
            yield scrapy.Request(base + "/plain.json", callback=self.parse_plain)
            if render:
                yield scrapy.Request(base + "/prices.html", callback=self.parse_page,
                                     errback=self.render_failed, meta={
                    "playwright": True,
                    "playwright_page_methods": [
                        PageMethod("wait_for_selector", "#prices td.price", timeout=10000)]})
            yield scrapy.Request(base + "/prices.html", callback=self.parse_static,
                                 dont_filter=True)

        def parse_plain(self, response):
            plain.append(json.loads(response.text))

        def parse_page(self, response):
            for tr in response.css("#prices tbody tr"):
                rows.append([tr.css("td.gpu::text").get(), tr.css("td.price::text").get()])

        def parse_static(self, response):
            plain.append({"static_rows": len(response.css("#prices tbody tr"))})

        def render_failed(self, failure):
            failures.append(type(failure.value).__name__)

    settings = get_project_settings()
    settings.set("LOG_LEVEL", "INFO")
    settings.set("ITEM_PIPELINES", {})
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(PageSpider)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, str))}
    json.dump({"rows": rows, "plain": plain, "stats": stats, "failures": failures,
               "loaded": "scrapy_playwright.handler" in sys.modules}, open(out, "w"))
''')


def crawl(tmp_path: Path, server: ProviderServer, mode: str) -> dict:
    script = tmp_path / "crawl_page.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"{mode}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    env["SCRAPY_SETTINGS_MODULE"] = "gpuradar.crawler.settings"
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    proc = subprocess.run([sys.executable, str(script), server.base, str(out), mode],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    result["log"] = proc.stderr
    return result


@pytest.fixture
def page_server(provider_server: ProviderServer) -> ProviderServer:
    provider_server.route("GET", "/prices.html",
                          lambda req: Reply(body=PAGE, content_type="text/html; charset=utf-8"))
    provider_server.route("GET", "/plain.json", lambda req: Reply(body=b'{"ok": true}'))
    return provider_server


def test_rendered_page_yields_the_table_javascript_built(tmp_path, page_server):
    result = crawl(tmp_path, page_server, "render")
    assert result["rows"] == [["RTX 4090", "1.98"], ["A800", "9.60"], ["910B", "7.50"]]
    # The same page fetched without Playwright has an empty table: the rows really came from
    # the browser, and plain requests in the same crawl still go through plain HTTP.
    assert {"static_rows": 0} in result["plain"] and {"ok": True} in result["plain"]
    assert result["stats"].get("playwright/browser_count") == 1
    assert result["stats"].get("playwright/page_count", 0) >= 1


def test_crawl_without_rendered_pages_starts_no_browser(tmp_path, page_server):
    result = crawl(tmp_path, page_server, "plain")
    assert {"ok": True} in result["plain"]
    assert result["rows"] == []
    assert "playwright/browser_count" not in result["stats"]
    assert not any(k.startswith("playwright/page_count") for k in result["stats"])
    # Neither Chromium nor Playwright's driver was started (the provider starts lazily).
    assert "Launching browser" not in result["log"]
    assert result["stats"]["downloader/response_status_count/200"] == 2


def test_spider_that_renders_no_page_never_loads_playwright(tmp_path, page_server):
    """A spider whose renders_pages is false (every gpuradar spider but Alibaba with
    discover_with_browser) gets Scrapy's plain handler: scrapy-playwright is not even
    imported, and a rendered page it asks for after all fails instead of coming back
    unrendered."""
    result = crawl(tmp_path, page_server, "undeclared")
    assert {"ok": True} in result["plain"] and {"static_rows": 0} in result["plain"]
    assert result["rows"] == [] and result["failures"] == ["NotSupported"]
    assert result["loaded"] is False


def test_other_spiders_still_get_the_rendering_handler(tmp_path, page_server):
    result = crawl(tmp_path, page_server, "plain")
    assert result["loaded"] is True and result["failures"] == []
