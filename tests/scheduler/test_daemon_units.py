"""The daemon's parts that need no running daemon: schedule planning, backoff, config
validation, log redaction and format, the metrics collector and the health endpoint."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuradar.core.config import Config, ConfigError
from gpuradar.core.logs import REDACT, JsonFormatter, Redactor, config_secrets, url_secrets
from gpuradar.scheduler.jobs import (
    backoff_delay,
    daemon_options,
    first_run,
    metrics_options,
    parse_duration,
    plan_source,
)
from tests.daemon_helpers import parse_metrics
from tests.helpers import free_port


def cfg(**kw) -> Config:
    return Config(database_url="sqlite://", path=Path("/etc/gpuradar.yaml"), **kw)


@pytest.mark.parametrize("value, seconds", [
    (300, 300), (2.5, 2.5), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1d", 86400),
    ("250ms", 0.25), (" 2 h ", 7200), ("5 minutes", 300), ("2 weeks", 1209600),
])
def test_durations(value, seconds):
    assert parse_duration(value, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "5 minutez", "-3", -1, True, None, "1h soon", "999999d"])
def test_bad_durations_name_the_key(value):
    with pytest.raises(ConfigError, match="daemon.grace_period"):
        parse_duration(value, "daemon.grace_period")


def test_interval_precedence():
    opts = daemon_options(cfg(daemon={"intervals": {"marketplace": "2m"}, "jitter": 0}))
    # spider default
    assert plan_source(cfg(), "azure", 3600, daemon_options(cfg())).interval == 3600
    # per kind beats the spider's default
    assert plan_source(cfg(daemon={"intervals": {"marketplace": "2m"}}), "vastai", 300,
                       opts).interval == 120
    # per source beats the kind
    c = cfg(sources={"vastai": {"interval": "1m", "jitter": "5s", "timeout": 30}},
            daemon={"intervals": {"marketplace": "2m"}})
    plan = plan_source(c, "vastai", 300, daemon_options(c))
    assert (plan.interval, plan.jitter, plan.timeout) == (60, 5, 30)
    # --interval beats everything; default jitter is 10 % capped at 5 min
    assert plan_source(c, "vastai", 300, daemon_options(c), interval_override=2).interval == 2
    assert plan_source(cfg(), "fx", 86400, daemon_options(cfg())).jitter == 300
    assert plan_source(cfg(), "vastai", 300, daemon_options(cfg())).jitter == 30
    # misfire grace: half the interval
    assert plan_source(cfg(), "azure", 3600, daemon_options(cfg())).misfire_grace == 1800


def test_timeout_defaults_to_scrapy_closespider_timeout():
    assert plan_source(cfg(), "azure", 3600, daemon_options(cfg()),
                       default_timeout=900).timeout == 900
    c = cfg(daemon={"crawl_timeout": "2m"})
    assert plan_source(c, "azure", 3600, daemon_options(c)).timeout == 120


def test_bad_daemon_and_metrics_sections():
    with pytest.raises(ConfigError, match="unknown key.*grace"):
        daemon_options(cfg(daemon={"grace": 3}))
    with pytest.raises(ConfigError, match="unknown kind 'gpu' in daemon.intervals"):
        daemon_options(cfg(daemon={"intervals": {"gpu": 3}}))
    with pytest.raises(ConfigError, match="sources.vastai.interval"):
        c = cfg(sources={"vastai": {"interval": 0}})
        plan_source(c, "vastai", 300, daemon_options(c))
    with pytest.raises(ConfigError, match="metrics.port"):
        metrics_options(cfg(metrics={"port": 70000}))
    with pytest.raises(ConfigError, match="unknown key"):
        metrics_options(cfg(metrics={"bind": "0.0.0.0"}))
    m = metrics_options(cfg(metrics={"port": 9200}), address="::1")
    assert (m.address, m.port, m.enabled) == ("::1", 9200, True)
    assert metrics_options(cfg()).address == "127.0.0.1"


def test_backoff_doubles_up_to_the_cap():
    assert [backoff_delay(60, n, 300) for n in range(0, 7)] == [60, 60, 120, 240, 300, 300, 300]
    # a source slower than the cap keeps its own interval
    assert backoff_delay(86400, 5, 3600) == 86400


def test_first_run():
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert first_run(None, 300, now) == now
    assert first_run(now - timedelta(seconds=301), 300, now) == now
    assert first_run(now - timedelta(seconds=100), 300, now) == now + timedelta(seconds=200)


# -- logs ----------------------------------------------------------------------------------
def test_redaction_of_config_secrets():
    c = cfg(targets={"slack": "slack://T0AAAAAAA/B0BBBBBBB/XXXXXXXXXXXXXXXXXXXXXXXX",
                     "mail": "mailtos://alerts:hunter2pw@smtp.example.com?to=a@b.c"},
            sources={"tencent": {"secret_id": "AKIDabcdef123", "secret_key": "s3cr3t-key"},
                     "vastai": {"interval": 300, "limit": 1000}})
    c.database_url = "postgresql://gpuradar:dbpass99@db/gpuradar"
    r = Redactor()
    r.set_secrets(config_secrets(c, ["env-token-123"]))
    text = ("posting to slack://T0AAAAAAA/B0BBBBBBB/XXXXXXXXXXXXXXXXXXXXXXXX failed; "
            "token XXXXXXXXXXXXXXXXXXXXXXXX, mail pw hunter2pw, AKIDabcdef123 s3cr3t-key "
            "dbpass99 env-token-123 https://u:other@host/x; interval 300")
    out = r(text)
    for secret in ("XXXXXXXXXXXXXXXXXXXXXXXX", "hunter2pw", "AKIDabcdef123", "s3cr3t-key",
                   "dbpass99", "env-token-123", "other"):
        assert secret not in out
    assert "interval 300" in out and "https://u:***@host/x" in out
    assert "127.0.0.1" not in url_secrets("json://127.0.0.1:8080/hook") - {
        "json://127.0.0.1:8080/hook"}


def test_json_log_lines_are_redacted():
    REDACT.set_secrets({"topsecretvalue"})
    try:
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter())
        logger = logging.getLogger("test.daemon.json")
        logger.addHandler(handler)
        logger.propagate = False
        try:
            raise RuntimeError("boom topsecretvalue")
        except RuntimeError:
            logger.exception("failed with %s", "topsecretvalue", extra={"source": "vastai"})
        line = json.loads(stream.getvalue())
    finally:
        REDACT.set_secrets(())
    assert line["level"] == "error" and line["source"] == "vastai"
    assert line["message"] == "failed with ***"
    assert "topsecretvalue" not in json.dumps(line) and "RuntimeError" in line["exc"]


# -- metrics and health ----------------------------------------------------------------------
def _offer(source: str, gpu: str, price: float, available: bool | None = True,
           region: str = "r1", instance: str = "i1", pricing: str = "on_demand") -> dict:
    now = datetime.now(UTC)
    return {"source": source, "region": region, "zone": "", "instance_type": instance,
            "pricing": pricing, "gpu": gpu, "gpu_count": 1, "price": price, "currency": "USD",
            "price_usd": price, "price_per_gpu_usd": price, "available": available,
            "attributes": {}, "first_seen": now, "changed_at": now, "active": True, "url": ""}


def test_database_collector_reads_current_state(engine):
    from sqlalchemy import insert, update

    from gpuradar.scheduler.metrics import Metrics
    from gpuradar.storage.models import OFFER

    table = OFFER
    with engine.begin() as conn:
        conn.execute(insert(table), [
            _offer("vastai", "H100-SXM-80GB", 1.9),
            _offer("vastai", "H100-SXM-80GB", 2.5, instance="i2"),
            _offer("vastai", "RTX 9090 Ti", 0.1, instance="i3"),     # not in the catalog
            _offer("azure", "A100-PCIE-80GB", 3.7, available=None, pricing="spot"),
            _offer("azure", "A100-PCIE-80GB", 1.0, available=False, instance="i4"),
        ])
    m = Metrics(lambda: engine)
    from prometheus_client import generate_latest

    series = parse_metrics(generate_latest(m.registry).decode())

    def get(name, **labels):
        return series.get((name, frozenset(labels.items())))

    assert get("gpuradar_database_up") == 1
    assert get("gpuradar_offers", source="vastai", pricing="on_demand",
               availability="available") == 3
    assert get("gpuradar_offers", source="azure", pricing="spot",
               availability="unknown") == 1
    assert get("gpuradar_cheapest_usd_per_gpu_hour", gpu="H100-SXM-80GB",
               pricing="on_demand", source="vastai") == pytest.approx(1.9)
    # unavailable offers are not "cheapest"; unknown GPU names are counted, not labelled
    assert get("gpuradar_cheapest_usd_per_gpu_hour", gpu="A100-PCIE-80GB",
               pricing="on_demand", source="azure") is None
    assert get("gpuradar_cheapest_usd_per_gpu_hour", gpu="RTX 9090 Ti", pricing="on_demand",
               source="vastai") is None
    assert get("gpuradar_uncatalogued_gpu_models", source="vastai") == 1
    assert get("gpuradar_build_info", version=__import__("gpuradar").__version__,
               python=__import__("platform").python_version(),
               scrapy=__import__("scrapy").__version__) == 1
    # an offer that vanished disappears at the scrape after the crawl that closed it (the
    # series are drawn again when the data version moves: a crawl started or ended)
    from gpuradar.storage.ingest import CrawlWriter

    writer = CrawlWriter(engine, "azure", started_at=datetime.now(UTC))
    with engine.begin() as conn:
        conn.execute(update(table).where(table.c.source == "azure").values(active=False))
    series = parse_metrics(generate_latest(m.registry).decode())
    assert not [k for k in series if ("source", "azure") in k[1]]
    writer.finish("failed")


def test_health_endpoint(sqlite_url, tmp_path):
    from prometheus_client import CollectorRegistry

    from gpuradar.scheduler.health import Health, make_app, serve
    from gpuradar.storage.db import get_engine

    running = {"value": True}
    broken = get_engine(f"postgresql://nobody@127.0.0.1:{free_port()}/nothing")
    engine = {"value": get_engine(sqlite_url)}
    health = Health(lambda: engine["value"], lambda: running["value"])
    port = free_port()
    httpd = serve("127.0.0.1", port, make_app(CollectorRegistry(), health, lambda s: s))
    try:
        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        status, body = get("/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        engine["value"] = broken
        status, body = get("/healthz")
        assert status == 503 and json.loads(body)["database"].startswith("error")
        engine["value"] = get_engine(sqlite_url)
        running["value"] = False
        status, body = get("/healthz")
        assert status == 503 and json.loads(body)["scheduler"] == "stopped"
        assert get("/metrics")[0] == 200
        assert get("/elsewhere")[0] == 404
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_metrics_port_in_use_is_a_clear_error():
    from gpuradar.scheduler.health import EndpointError, serve

    port = free_port()
    first = serve("127.0.0.1", port, lambda e, s: [])
    try:
        with pytest.raises(EndpointError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve("127.0.0.1", port, lambda e, s: [])
    finally:
        first.shutdown()
        first.server_close()


@pytest.mark.parametrize("config, code, message", [
    ({"rules": ["H10O under $2/h"]}, 2, "did you mean H100"),
    ({"daemon": {"grace": 3}}, 2, "unknown key 'grace' in daemon"),
    ({"sources": {"vastia": {"interval": 60}}}, 2,
     "unknown source 'vastia' in sources — did you mean 'vastai'?"),
    ({"sources": {"vastai": {"interval": "soon"}}}, 2, "sources.vastai.interval"),
    ({"database_url": "postgresql://u:sekretpw@127.0.0.1:{port}/x"}, 3, "cannot be reached"),
    ({"metrics": {"port": "{busy}"}}, 2, "cannot listen on 127.0.0.1:{busy}"),
])
def test_startup_errors_are_clear(tmp_path, sqlite_url, config, code, message):
    """What `gpuradar run` says (and exits with) before it starts anything."""
    import socket

    from gpuradar.scheduler.daemon import Daemon, RunOptions, StartupError
    from tests.daemon_helpers import write_config

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        fill = {"port": free_port(), "busy": busy.getsockname()[1]}
        config = json.loads(json.dumps(config).replace("{port}", str(fill["port"]))
                            .replace('"{busy}"', str(fill["busy"])))
        path = write_config(tmp_path / "gpuradar.yaml", {"database_url": sqlite_url, **config})
        with pytest.raises(StartupError) as caught:
            Daemon(RunOptions(config=path)).prepare()
    assert caught.value.code == code
    assert message.format(**fill) in str(caught.value)
    assert "sekretpw" not in str(caught.value)
