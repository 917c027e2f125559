"""A replay needs no credentials (issue #32): a source with a recording runs from it even
when its live API needs a key; a source the config file disables stays disabled."""

from __future__ import annotations

from pathlib import Path

from gpuradar.core.config import Config
from gpuradar.crawler.crawl_settings import scrapy_settings
from gpuradar.crawler.runner import enabled_sources, spider_classes

RECORDINGS = Path(__file__).parents[2] / "gpuradar" / "recordings"


def test_a_recorded_source_that_needs_a_key_live_runs_from_its_recording(monkeypatch):
    monkeypatch.delenv("GCP_API_KEY", raising=False)
    live = scrapy_settings(Config(database_url="sqlite://"))
    gcp = spider_classes(live)["gcp"]
    assert gcp.status(live)[0] is False  # live, it needs an API key
    replay = scrapy_settings(Config(database_url="sqlite://"),
                             GPURADAR_REPLAY_DIR=str(RECORDINGS))
    assert gcp.status(replay) == (True, f"replaying the recording in {RECORDINGS}")
    recorded = {p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists()}
    assert recorded <= set(enabled_sources(replay))


def test_a_source_disabled_in_the_config_file_is_not_replayed():
    cfg = Config(database_url="sqlite://", sources={"gcp": {"enabled": False}})
    replay = scrapy_settings(cfg, GPURADAR_REPLAY_DIR=str(RECORDINGS))
    assert spider_classes(replay)["gcp"].status(replay) == (False,
                                                             "disabled in the config file")
