"""The frame a new provider plugs into: its declaration module is found without a list kept
by hand, a page source is polite (hourly at most, robots.txt, conditional requests), every
offer says where its price was read, and an answer with too few GPU rows is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

from gpuradar.core import providers
from gpuradar.core.currency import FxTable
from gpuradar.core.items import PriceItem
from gpuradar.core.providers import Provider
from gpuradar.crawler.pipelines import normalize
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

PAGE = Provider(name="framepage", kind="page", price_source="list_page", min_rows=3,
                endpoints={"pricing": "https://example.invalid/pricing"})


class PageSpider(GpuRadarSpider):
    facts = PAGE


def test_a_new_module_is_a_new_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Dropping a declaration module into the package is all it takes for core to know it."""
    (tmp_path / "newcloud.py").write_text(
        "from gpuradar.core.providers.base import Provider\n"
        "NEWCLOUD = Provider(name='newcloud')\n")
    monkeypatch.setattr(providers, "__path__", [*providers.__path__, str(tmp_path)])
    try:
        found = [p.name for p in providers._discover()]
    finally:
        sys.modules.pop("gpuradar.core.providers.newcloud", None)
    assert "newcloud" in found and found == sorted(found)
    assert set(found) - {"newcloud"} == set(providers.names())


def test_a_module_without_exactly_one_declaration_stops(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "broken.py").write_text("X = 1\n")
    monkeypatch.setattr(providers, "__path__", [*providers.__path__, str(tmp_path)])
    try:
        with pytest.raises(ImportError, match="broken declares 0 Provider"):
            providers._discover()
    finally:
        sys.modules.pop("gpuradar.core.providers.broken", None)


def test_a_page_source_is_crawled_hourly_at_most():
    with pytest.raises(ValueError, match="page source's default interval is at least 3600"):
        Provider(name="eager", kind="page", price_source="list_page", default_interval=600)
    # its own interval group: `daemon.intervals.cloud: 10m` never speeds up a web site
    with pytest.raises(ValueError, match="is of kind 'page', and only such a source"):
        Provider(name="hidden", kind="cloud", price_source="list_page")
    with pytest.raises(ValueError, match="price_source 'scraped'"):
        Provider(name="odd", price_source="scraped")


def test_a_page_source_obeys_robots_and_revalidates_its_pages(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPURADAR_DATA_DIR", str(tmp_path))
    live = Settings()
    PageSpider.update_settings(live)
    assert live.getbool("ROBOTSTXT_OBEY") and live.getbool("HTTPCACHE_ENABLED")
    assert live.get("HTTPCACHE_POLICY") == "scrapy.extensions.httpcache.RFC2616Policy"
    assert live.get("HTTPCACHE_DIR") == str(tmp_path / "httpcache")
    replay = Settings({"GPURADAR_REPLAY_DIR": str(tmp_path)})
    PageSpider.update_settings(replay)
    assert not replay.getbool("ROBOTSTXT_OBEY") and not replay.getbool("HTTPCACHE_ENABLED")
    api = Settings()  # an API source is not a site: unchanged
    type("ApiSpider", (GpuRadarSpider,), {"facts": providers.get("vastai")}).update_settings(api)
    assert not api.getbool("ROBOTSTXT_OBEY") and not api.getbool("HTTPCACHE_ENABLED")


def _item(source: str, **attributes: str) -> PriceItem:
    return PriceItem(source=source, region="r", instance_type="t", pricing="on_demand",
                     gpu="H100 SXM", gpu_count=1, price=2.0, currency="USD",
                     attributes=dict(attributes))


def test_every_offer_says_where_its_price_was_read():
    api = _item("vastai")
    page = _item("lambda", price_source="list_page")  # the spider knows better: kept
    stranger = _item("nosuchsource")
    for item in (api, page, stranger):
        normalize(item, FxTable())
    assert api.attributes["price_source"] == "api"
    assert page.attributes["price_source"] == "list_page"
    assert "price_source" not in stranger.attributes  # unknown, not guessed


def test_too_few_gpu_rows_is_a_changed_page():
    spider = PageSpider()
    spider.expect_rows(3, "GPU table", "https://example.invalid/pricing")
    with pytest.raises(ParseError, match=r"framepage: .*'GPU table' has 2 GPU rows, expected "
                                         r"at least 3: the page or answer changed"):
        spider.expect_rows(2, "GPU table", "https://example.invalid/pricing")


def test_sources_says_a_page_source_reads_list_prices(tmp_path):
    from tests.clirun import gpuradar_json

    rows = {r["source"]: r for r in gpuradar_json("sources", "--json",
                                                   db_url=f"sqlite:///{tmp_path / 'db'}")}
    assert (rows["nebius"]["why"], rows["nebius"]["price_source"]) == (
        "public pricing page (list prices)", "list_page")
    assert rows["scaleway"]["price_source"] == "api"
