"""A spider gets its own section of the configuration through one typed setting
(GPURADAR_SOURCES holds the checked options), never a mapping it parses again."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from gpuradar.core.config import Config, ConfigError, source_model
from gpuradar.crawler.crawl_settings import scrapy_settings, source_options
from gpuradar.crawler.pipelines import price_range, shrink_guard
from gpuradar.crawler.spiders.vastai import VastaiSpider


def test_the_crawl_settings_carry_each_source_s_checked_options():
    cfg = Config(database_url="sqlite://", sources={"vastai": {
        "limit": 50, "interval": "5m", "shrink_guard": 0.25, "price_range": [0.1, 9]}})
    settings = scrapy_settings(cfg)
    opts = source_options(settings, "vastai")
    assert opts is cfg.sources["vastai"]  # the loaded model itself: nothing parsed again
    assert isinstance(opts, source_model("vastai"))
    assert VastaiSpider.options_from(settings).get("limit") == 50
    crawler = get_crawler(VastaiSpider, {"GPURADAR_SOURCES": settings["GPURADAR_SOURCES"]})
    assert (shrink_guard(crawler, "vastai"), price_range(crawler, "vastai")) == (0.25, (0.1, 9))
    # a source the file leaves out: its defaults
    assert source_options(settings, "azure") == source_model("azure")()


def test_a_plain_mapping_in_the_setting_is_checked_by_the_same_schema():
    """`scrapy crawl vastai -s GPURADAR_SOURCES=...` gives a mapping: checked once, with the
    file's error wording."""
    settings = Settings({"GPURADAR_SOURCES": {"vastai": {"limit": 10}}})
    assert source_options(settings, "vastai").get("limit") == 10
    with pytest.raises(ConfigError, match="sources.vastai.limit: must be a whole number"):
        source_options(Settings({"GPURADAR_SOURCES": {"vastai": {"limit": "many"}}}), "vastai")


def test_a_credential_from_the_environment_fills_only_what_the_file_leaves_out(monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", "from-env")
    plain = Settings({"GPURADAR_SOURCES": {}})
    assert VastaiSpider.options_from(plain).get("api_key") == "from-env"
    configured = Settings({"GPURADAR_SOURCES": {"vastai": {"api_key": "from-file"}}})
    assert VastaiSpider.options_from(configured).get("api_key") == "from-file"
