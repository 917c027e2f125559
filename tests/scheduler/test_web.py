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
from datetime import datetime
from email.message import Message
from pathlib import Path

import pytest

from tests.clirun import gpuradar
from tests.daemon_helpers import RECORDINGS
from tests.scheduler.test_api import served

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    if os.environ.get("GPURADAR_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{CHROMIUM} is required (GPURADAR_REQUIRE_CHROMIUM=1) but missing",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} not installed", allow_module_level=True)

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def request(url: str, method: str = "GET") -> tuple[int, Message, str]:
    """Status, headers (names in any case, as HTTP has them) and body."""
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


@pytest.fixture(scope="module")
def site_engine(tmp_path_factory):
    """A database filled from the shipped real recordings as a user fills it: the
    time-lapse demo's day of Vast.ai (history, spot and on-demand, a firing alert), then
    every other recording replayed, dated at its capture."""
    from gpuradar.storage.db import open_database

    db = tmp_path_factory.mktemp("web") / "demo.db"
    proc = gpuradar("demo", "--timeline", "--pace", "0", "--keep", str(db))
    assert proc.returncode == 0, proc.stderr
    others = sorted(p.name for p in RECORDINGS.iterdir()
                    if (p / "index.json").exists() and p.name != "vastai")
    proc = gpuradar("crawl", *others, "--replay", str(RECORDINGS), "--database-url",
                    f"sqlite:///{db}", env={"GCP_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    return open_database(f"sqlite:///{db}")


@pytest.fixture(scope="module")
def site(site_engine):
    """The service's HTTP endpoint in-process over that database."""
    with served(lambda: site_engine) as base:
        yield base


@pytest.fixture(scope="module")
def artefacts() -> Path | None:
    """Where the screenshots go: $GPURADAR_TEST_ARTEFACTS/web when set (point it at a folder
    your CI keeps); unset, none is taken (tests/README.md): a full-page screenshot is a
    second of Chromium's CPU, and nobody would look at it."""
    root = os.environ.get("GPURADAR_TEST_ARTEFACTS")
    if not root:
        return None
    path = Path(root) / "web"
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot(page, artefacts: Path | None, name: str) -> None:
    """The whole page into `artefacts`/`name`, when screenshots are kept; a page drawn
    (more than 10 kB of PNG)."""
    if artefacts is not None:
        page.screenshot(path=str(artefacts / name), full_page=True)
        assert (artefacts / name).stat().st_size > 10_000, name


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
GPU, COUNT, PER_GPU, PER_HOUR, PRICING, SOURCE = range(6)  # the table's first columns


@pytest.fixture(scope="module")
def page(browser):
    """One 1280 px wide page, JavaScript on, for the module's tests (each goes to its own
    address first): a page of its own was a renderer process started per test, half a
    second of Chromium's CPU each."""
    page = browser.new_page(viewport=DESKTOP)
    yield page
    page.close()


@pytest.fixture(scope="module")
def page_without_js(browser):
    """As `page`, in a context with JavaScript off."""
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    yield context.new_page()
    context.close()


def follow(page, selector: str) -> None:
    """Click a link or a submit button and wait until the page it leads to has loaded: a
    click returns once the navigation starts, and reading the page before it ends reads
    an empty document."""
    with page.expect_navigation(wait_until="load"):
        page.click(selector)


def row_of(page, gpu: str) -> list[str]:
    return page.locator("#cheapest tbody tr").filter(
        has=page.locator(f"td:first-child:text-is('{gpu}')")).locator("td").all_inner_texts()


def test_page_renders_table_alerts_sources_and_chart_in_chromium(site, page, artefacts):
    requested: list[str] = []

    def note(request) -> None:
        requested.append(request.url)

    page.on("request", note)
    page.goto(site + "/")
    cells = row_of(page, "H100-SXM-80GB")
    # a spot offer's interruption signal under its pricing: Vast.ai's host reliability
    assert cells[PER_GPU] == "$0.4001" and cells[PRICING].splitlines()[:2] == [
        "spot", "host reliability score 0.91, not an interruption rate (Vast.ai)"]
    assert "vastai" in cells and "79.6 GiB" in cells
    first = page.locator("#cheapest tbody tr").first.locator("td").all_inner_texts()
    assert first[GPU] == "INFERENTIA" and first[PER_GPU] == "$0.0505"  # cheapest first
    assert page.locator("#alerts").inner_text().count("cheap-h100") == 1
    assert "H100 on-demand under $1.50/h on vastai" in page.locator("#alerts").inner_text()
    sources = page.locator("#sources tbody tr").all_inner_texts()
    recorded = [p for p in RECORDINGS.iterdir() if (p / "index.json").exists()]
    assert len(sources) == len(recorded) and all("ok," in s for s in sources)
    assert any(s.startswith("vastai") for s in sources)
    chart = page.locator("#history figure svg.chart").first
    box = chart.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100  # drawn, not an empty box
    path = chart.locator("path.line").first.get_attribute("d")
    assert path and path.count("L") >= 6  # a stepped line, not one dot
    labels = chart.locator("text").all_text_contents()
    assert "$/GPU-h" in labels and any(re.fullmatch(r"\$\d\.\d+", t) for t in labels)
    # every table fits: nothing hidden, no table scrolls sideways, the page neither
    assert page.locator("th:visible").count() == page.locator("th").count()
    assert page.evaluate("[...document.querySelectorAll('.scroll')]"
                         ".every(e => e.scrollWidth <= e.clientWidth)")
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"]
    screenshot(page, artefacts, "page-1280.png")
    page.goto(site + "/?gpu=H100&range=24h")  # the demo's day, spot and on-demand apart
    screenshot(page, artefacts, "page-1280-h100-24h.png")
    page.remove_listener("request", note)
    # everything came from the service itself: no CDN, no font, no script
    assert requested and all(u.startswith(site) for u in requested)


def test_spot_and_on_demand_are_separate_lines(site, page):
    """Issue #35: one line mixing both made a spot offer appearing look like an on-demand
    drop from $1.74 to $0.40. Each pricing is its own line and legend entry."""
    page.goto(site + "/?gpu=H100")
    figure = page.locator("#history figure[data-gpu='H100-SXM-80GB']")
    lines = figure.locator("path.line")
    assert sorted(lines.evaluate_all("ps => ps.map(p => p.dataset.pricing)")) == [
        "on_demand", "spot"]
    legend = figure.locator(".legend").inner_text()
    # each capture's price holds until the next observation: the other providers' older
    # captures are the line before Vast.ai's
    assert "on-demand $1.3867–$2.6900" in legend and "spot $0.4001–$1.6250" in legend
    # drawn apart: the on-demand line never comes down to the spot line's $0.40
    on_demand = figure.locator("path.line.on-demand").bounding_box()
    spot = figure.locator("path.line.spot").bounding_box()
    assert on_demand and spot
    assert on_demand["y"] + on_demand["height"] < spot["y"] + spot["height"] - 20
    assert figure.locator("path.line.spot").evaluate(
        "p => getComputedStyle(p).strokeDasharray") != "none"  # told apart without colour
    page.goto(site + "/?gpu=H100&pricing=on-demand")
    figure = page.locator("#history figure[data-gpu='H100-SXM-80GB']")
    assert figure.locator("path.line").evaluate_all(
        "ps => ps.map(p => p.dataset.pricing)") == ["on_demand"]
    assert "spot" not in figure.locator(".legend").inner_text()


def test_every_listed_gpu_has_a_chart_in_every_range(site, page):
    """Each listed GPU is charted whatever the range: a replayed capture's price holds until
    the next observation says otherwise (with months-old captures, 7 and 30 days charted
    none of them: "No chart for 30 of 30 GPUs")."""
    for query in ("/", "/?range=24h", "/?range=30d", "/?pricing=spot"):
        page.goto(site + query)
        listed = list(dict.fromkeys(page.locator("#cheapest tbody tr td:first-child")
                                    .all_inner_texts()))
        charted = page.locator("#history figure").evaluate_all(
            "fs => fs.map(f => f.dataset.gpu)")
        assert len(listed) > 12 and sorted(charted) == sorted(listed), query
        assert page.locator("#history figcaption").all_inner_texts() == charted
        assert page.locator("#uncharted").count() == 0


def test_range_links_choose_the_history_shown_without_javascript(site, page_without_js):
    page = page_without_js
    page.goto(site + "/?gpu=H100")
    assert page.locator("#range [aria-current=page]").inner_text() == "7 days"
    assert "Price history, last 7 days" in page.content()

    def axis_span() -> float:
        labels = page.locator("#history svg.chart text").all_text_contents()
        dates = [datetime.strptime(t, "%m-%d %H:%M") for t in labels if re.fullmatch(
            r"\d\d-\d\d \d\d:\d\d", t)]
        return (dates[-1] - dates[0]).total_seconds() / 3600 % (366 * 24)

    assert axis_span() == 7 * 24
    follow(page, "#range a:text-is('24 hours')")
    assert "range=24h" in page.url and "gpu=H100" in page.url  # the filter stays
    assert page.locator("#range [aria-current=page]").inner_text() == "24 hours"
    assert "Price history, last 24 hours" in page.content() and axis_span() == 24
    assert page.locator("#history figure[data-gpu='H100-SXM-80GB'] path.line").count() == 2
    follow(page, "#range a:text-is('30 days')")
    assert "range=30d" in page.url and axis_span() == 30 * 24
    page.select_option("select[name=pricing]", "spot")  # the filter form keeps the range
    follow(page, "button[type=submit]")
    assert "range=30d" in page.url and "pricing=spot" in page.url
    assert page.locator("#range [aria-current=page]").inner_text() == "30 days"
    page.goto(site + "/?range=1y")
    assert "range '1y' is not one of 24h, 7d, 30d, 90d, 365d, all: showing 7 days" in \
        page.locator("p.bad").inner_text()


def test_the_page_reloads_itself_and_works_without_javascript(site, page_without_js):
    page = page_without_js
    page.goto(site + "/?range=24h&gpu=H100")
    assert page.locator("meta[http-equiv=refresh]").get_attribute("content") == "300"
    assert "reloads itself every 5 minutes" in page.locator("body").inner_text()
    assert page.locator("script").count() == 0
    listed = set(page.locator("#cheapest tbody tr td:first-child").all_inner_texts())
    assert page.locator("#history svg.chart").count() == len(listed) > 0


def test_readable_on_a_phone_390_px_wide(site, browser, artefacts):
    """At 390 px nothing scrolls sideways, neither the page nor a table (the cheapest
    table scrolled and cut its pricing to "on-dema", the alerts table its "since"); every
    price, GPU, pricing and count is whole and on screen (the count, source, instance and
    when seen under the GPU's name); each chart fits with its newest point's dot whole."""
    page = browser.new_page(viewport=PHONE)
    page.goto(site + "/")
    width = PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator(".narrow").first.is_visible()
    assert page.evaluate("[...document.querySelectorAll('.scroll')]"
                         ".every(e => e.scrollWidth <= e.clientWidth)")

    def on_screen(box) -> bool:
        return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5

    # Every box read in one call (a locator's bounding_box is a round trip each: 5 s here).
    # A box is None where Playwright's would be: an element with no size or hidden.
    shown = page.evaluate("""() => {
      const box = e => { const r = e.getBoundingClientRect();
        return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'
          ? {x: r.x, width: r.width} : null; };
      const visible = sel => [...document.querySelectorAll(sel)].filter(e => box(e));
      return {
        rows: [...document.querySelectorAll('#cheapest tbody tr')].map(tr => {
          const cells = tr.querySelectorAll('td');
          return {cells: [...cells].map(c => ({box: box(c), text: c.innerText})),
                  sub: cells[0].querySelector('.sub').innerText}; }),
        since: (c => ({box: box(c), text: c.innerText}))(
          [...document.querySelectorAll('#alerts tbody td')].pop()),
        numbers: visible('#cheapest td.num, #alerts td.num, #sources td.num').map(box),
        charts: [...document.querySelectorAll('svg.chart')].map(svg => ({
          box: box(svg), dots: [...svg.querySelectorAll('circle.dot')].map(box)})),
      }; }""")
    rows = shown["rows"]
    assert len(rows) > 12
    for i, row in enumerate(rows):
        for col in (GPU, PER_GPU, PER_HOUR, PRICING):
            assert on_screen(row["cells"][col]["box"]), (i, row["cells"][col]["text"])
        assert re.match(r"\d+(\.\d+)?x, \w+ .+, (captured|\d)", row["sub"]), row["sub"]
    assert "on-demand" in page.locator("#cheapest").inner_text()
    since = shown["since"]
    assert on_screen(since["box"]) and re.fullmatch(
        r"\d{4}-\d\d-\d\d\s\d\d:\d\d", since["text"].strip())
    assert len(shown["numbers"]) > 2 * len(rows)
    assert all(on_screen(box) for box in shown["numbers"])
    # whole, not cut inside its cell
    assert page.evaluate("[...document.querySelectorAll('td')].filter(c => c.offsetParent)"
                         ".every(c => c.scrollWidth <= c.clientWidth)")
    charts = shown["charts"]
    assert len(charts) >= 3
    for chart in charts:
        box = chart["box"]
        assert on_screen(box) and box["width"] > 300
        for dot_box in chart["dots"]:  # the newest price, whole
            assert on_screen(dot_box) and dot_box["x"] + dot_box["width"] <= box["x"] + \
                box["width"] + 0.01
    screenshot(page, artefacts, "page-390.png")
    page.goto(site + "/?gpu=H100&range=24h")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, artefacts, "page-390-h100-24h.png")
    page.close()


def test_run_help_names_the_page():
    proc = gpuradar("run", "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "read-only web page" in text and "http://127.0.0.1:9109/" in text
    assert "Port of /metrics, /healthz and /readyz" in text and "gpuradar serve" in text


def test_filters_are_query_parameters_and_need_no_javascript(site, page_without_js):
    page = page_without_js
    page.goto(site + "/")
    page.select_option("select[name=pricing]", "on-demand")
    follow(page, "button[type=submit]")
    assert "pricing=on-demand" in page.url
    cells = row_of(page, "H100-SXM-80GB")
    assert cells[PER_GPU] == "$1.3867" and cells[PRICING] == "on-demand"
    page.fill("input[name=gpu]", "H20")  # no shipped capture sells one
    follow(page, "button[type=submit]")
    assert page.locator("#cheapest").count() == 0
    assert "No offer matches these filters." in page.content()
    page.goto(site + "/?region=mainland")
    assert "No offer matches these filters." in page.content()
    page.goto(site + "/?region=U%3F&source=vastai&gpu=H100")  # its spot and on-demand rows
    # (each pricing's first line: a spot offer's interruption signal follows it)
    assert [t.splitlines()[0] for t in page.locator(
        "#cheapest tbody tr td:nth-child(5)").all_inner_texts()] == ["spot", "on-demand"]


def test_the_page_is_read_only_and_escapes_what_it_echoes(site):
    for path in ("/", "/metrics", "/healthz"):
        status, headers, _ = request(site + path, "POST")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    for param in ("gpu", "range"):
        status, headers, body = request(site + f"/?{param}=%3Cscript%3Ealert(1)%3C/script%3E")
        assert status == 200 and "<script>" not in body and "&lt;script&gt;" in body
    status, _, body = request(site + "/?gpu=%22%3E%3Cb%3E&range=24h")  # into the range links
    assert status == 200 and "<b>" not in body and "gpu=%22%3E%3Cb%3E&amp;range=7d" in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]


def test_the_page_offers_every_pricing_kind_and_shows_a_capacity_block_apart(engine):
    """The pricing menu lists the reservation kinds; picked, the table shows only their
    offers, labelled as such; an unknown kind is said, with the choices."""
    from gpuradar.scheduler.web import render
    from tests.storage.test_index import T0, crawl, item

    crawl(engine, "aws", [item("aws", "p5.48xlarge", 4.9, pricing="capacity_block"),
                          item("aws", "p5.48xlarge", 6.9)], T0)
    page = render(engine, {"pricing": ["capacity-block"]}, now=T0)
    assert '<option value="capacity-block" selected>capacity-block</option>' in page
    for kind in ("flex-start", "calendar"):
        assert f'<option value="{kind}">{kind}</option>' in page
    table = page[page.index('<table id="cheapest">'):page.index("</table>")]
    assert '<td class="pricing">capacity-block</td>' in table and "on-demand" not in table
    bad = render(engine, {"pricing": ["reserved"]}, now=T0)
    assert ("pricing must be one of on-demand, spot, capacity-block, flex-start, calendar, "
            "not &#39;reserved&#39;") in bad


def test_what_the_page_shows_agrees_and_answers_bad_filters(site, site_engine, page,
                                                            artefacts, tmp_path):
    """Issue #50, the web page: both prices of a model (H100-SXM's on-demand $1.3867 was
    hidden behind its spot $0.40); ranges long enough for the captures, up to all the data,
    and a refused range said; a mistyped GPU gets the CLI's "did you mean", a bad pricing
    is said; stale sources in the sources table, not among the firing rules (which the
    metric gpuradar_rules_firing counts)."""
    from prometheus_client import generate_latest

    from gpuradar.alerts.engine import evaluate
    from gpuradar.alerts.grammar import parse_rule
    from gpuradar.scheduler.metrics import Metrics
    from gpuradar.storage.alert_store import alert_rows
    from gpuradar.storage.db import open_database
    from tests.daemon_helpers import parse_metrics

    page.goto(site + "/?gpu=H100")
    rows = page.locator("#cheapest tbody tr").all()
    # (the pricing's first line: a spot offer's interruption signal follows it)
    sxm = {r.locator("td").nth(PRICING).inner_text().splitlines()[0]:
           r.locator("td").nth(PER_GPU).inner_text()
           for r in rows if r.locator("td").first.inner_text() == "H100-SXM-80GB"}
    assert sxm == {"spot": "$0.4001", "on-demand": "$1.3867"}, sxm
    # the captures are months old, their prices carried forward: all the data charts them
    page.goto(site + "/?range=all")
    assert page.locator("#uncharted").count() == 0
    assert page.locator("#history figure").count() == len(set(
        page.locator("#cheapest tbody tr td:first-child").all_inner_texts()))
    screenshot(page, artefacts, "page-1280-all.png")
    page.goto(site + "/?range=365d")
    assert page.locator("#range [aria-current=page]").inner_text() == "365 days"
    assert page.locator("p.bad").count() == 0
    page.goto(site + "/?gpu=H10O")
    assert page.locator("p.bad").inner_text() == "unknown GPU 'H10O'; did you mean H100?"
    page.goto(site + "/?pricing=foo")
    assert page.locator("p.bad").inner_text() == (
        "pricing must be one of on-demand, spot, capacity-block, flex-start, calendar, not "
        "'foo': showing every pricing")
    # one story: the firing rules of the page are the metric's; stale sources are sources
    # (an evaluation judges the months-old captures stale, on a copy of the database)
    copy = tmp_path / "copy.db"
    shutil.copy(site_engine.url.database, copy)
    engine = open_database(f"sqlite:///{copy}")
    rules = [parse_rule(a["description"], name=a["name"])
             for a in alert_rows(engine) if a["kind"] == "rule"]
    evaluate(engine, rules, alert_settings={"stale_after": "2d"})
    with served(lambda: engine) as base:
        page.goto(base + "/")
        shown = page.locator("#alerts tbody tr td:first-child").all_inner_texts()
        freshness = dict(zip(page.locator("#sources tbody tr td:first-child").all_inner_texts(),
                             page.locator("#sources tbody tr td:nth-child(7)")
                             .all_inner_texts(), strict=True))
    firing_rules = [a["name"] for a in alert_rows(engine)
                    if a["kind"] == "rule" and a["state"] == "firing"]
    stale = [a["name"] for a in alert_rows(engine)
             if a["kind"] == "source" and a["state"] == "firing"]
    assert shown == firing_rules and not [s for s in shown if s in stale]
    series = parse_metrics(generate_latest(Metrics(lambda: engine).registry).decode())
    assert series[("gpuradar_rules_firing", frozenset())] == len(shown)
    assert stale and all(freshness[s].startswith("stale since ") for s in stale), freshness
    assert all(v == "-" for k, v in freshness.items() if k not in stale), freshness
