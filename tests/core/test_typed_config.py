"""The configuration is checked once (issue 31): load_config returns each section as its
model, a Config built from plain data is checked the same way, and core words a refused
`scrapy:` key without loading Scrapy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuradar.core.config import (
    AlertsSection,
    Config,
    ConfigError,
    DaemonSection,
    MetricsSection,
    ScrapySection,
    SourceOptions,
    TargetSpec,
    load_config,
    source_model,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_loading_returns_each_section_as_its_model(tmp_path):
    cfg = load_config(write(tmp_path, """\
sources:
  vastai: {interval: 5m, limit: 200}
targets:
  ops: {url: "json://127.0.0.1:9/", tags: "a, b"}
alerts: {repeat: 1d}
metrics: {port: 9200}
daemon: {grace_period: 1m, stop_timeout: 2m}
scrapy: {DOWNLOAD_DELAY: 2}
"""), database_url="sqlite://")
    vast = cfg.sources["vastai"]
    assert isinstance(vast, source_model("vastai")) and isinstance(vast, SourceOptions)
    assert (vast.interval, vast.get("limit"), vast.written()) == (
        300, 200, {"interval": 300, "limit": 200})
    assert isinstance(cfg.targets["ops"], TargetSpec)
    assert cfg.targets["ops"].url_list() == ["json://127.0.0.1:9/"]
    assert cfg.targets["ops"].tag_list() == ["a", "b"]
    assert isinstance(cfg.alerts, AlertsSection) and cfg.alerts.repeat == "1d"
    assert isinstance(cfg.metrics, MetricsSection) and cfg.metrics.port == 9200
    assert isinstance(cfg.daemon, DaemonSection) and cfg.daemon.grace_period == 60
    assert cfg.daemon.stop_timeout == 120
    assert isinstance(cfg.scrapy, ScrapySection)
    assert cfg.scrapy.written() == {"DOWNLOAD_DELAY": 2}
    # a source the file leaves out has its defaults
    assert cfg.source_options("azure") == source_model("azure")()
    assert cfg.source_options("azure").enabled is True


def test_an_option_a_source_does_not_declare_is_a_key_error():
    opts = source_model("vastai")()
    assert opts.get("limit", 1000) == 1000
    with pytest.raises(KeyError, match="'nope' is not an option of this source"):
        opts.get("nope")


def test_a_config_built_from_plain_data_is_checked_like_the_file():
    cfg = Config(database_url="sqlite://", path=Path("/etc/gpuradar.yaml"),
                 sources={"vastai": {"interval": "2m"}}, alerts={"top": 3},
                 targets={"hook": "json://127.0.0.1:9/"})
    assert cfg.sources["vastai"].interval == 120 and cfg.alerts.top == 3
    assert cfg.targets["hook"].url_list() == ["json://127.0.0.1:9/"]
    with pytest.raises(ConfigError) as exc:
        Config(database_url="sqlite://", path=Path("/etc/gpuradar.yaml"),
               metrics={"port": 70000})
    assert exc.value.problems == ["/etc/gpuradar.yaml: metrics.port: must be less than or "
                                  "equal to 65535, got 70000"]


@pytest.mark.parametrize("setting, knows_scrapy, message", [
    ("ITEM_PIPELINES: {}", True, "Scrapy setting 'ITEM_PIPELINES' cannot be set in the config "
     "file (gpuradar relies on its own value; docs/configuration.md lists the settings that "
     "can be)"),
    ("ITEM_PIPELINES: {}", False, "Scrapy setting 'ITEM_PIPELINES' cannot be set in the "
     "config file (docs/configuration.md lists the settings that can be)"),
    ("DOWNLOAD_TIMEOUTT: 3", True, "unknown Scrapy setting 'DOWNLOAD_TIMEOUTT' in scrapy — did "
     "you mean 'DOWNLOAD_TIMEOUT'?"),
    ("DOWNLOAD_TIMEOUTT: 3", False, "unknown Scrapy setting 'DOWNLOAD_TIMEOUTT' in scrapy — "
     "did you mean 'DOWNLOAD_TIMEOUT'?"),
])
def test_a_refused_scrapy_setting_is_worded_with_or_without_scrapy(tmp_path, setting,
                                                                   knows_scrapy, message):
    """Core does not load Scrapy: the caller that does (the CLI, the daemon) passes its
    setting names; without them the wording stays true either way."""
    cfg = write(tmp_path, f"scrapy:\n  {setting}\n")
    names = (lambda: {"ITEM_PIPELINES", "DOWNLOAD_TIMEOUT"}) if knows_scrapy else None
    with pytest.raises(ConfigError) as exc:
        load_config(cfg, scrapy_names=names)
    assert exc.value.problems == [f"{cfg}:2: {message}"]
