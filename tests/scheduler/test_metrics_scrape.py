"""/metrics stays cheap whatever is stored (scheduler/metrics.py): the series read from the
database are drawn once per data version, and a scrape that finds the version unchanged
reads no offer; what a crawl changes is in the very next scrape, as is an event counted in
memory; over HTTP, both exposition formats and gzip carry every series."""

from __future__ import annotations

import gzip
import urllib.request
from datetime import timedelta

from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from sqlalchemy import event

from tests.daemon_helpers import parse_metrics
from tests.storage.test_index import T0, crawl, item

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def stored(series: dict) -> dict:
    """The series that come from the database (not the process's own)."""
    return {k: v for k, v in series.items() if k[0].startswith("gpuradar_")
            and not k[0].startswith("gpuradar_build")}


def test_a_scrape_draws_the_stored_series_once_per_data_version(engine):
    from gpuradar.scheduler.metrics import Metrics

    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    metrics = Metrics(lambda: engine)
    first = parse_metrics(metrics.exposition(None)[0].decode())
    assert first[("gpuradar_offers", frozenset({("source", "azure"), ("pricing", "on_demand"),
                                                ("availability", "available")}))] == 1
    statements: list[str] = []
    listen = lambda conn, cursor, sql, *rest: statements.append(sql)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        again = parse_metrics(metrics.exposition(None)[0].decode())
        assert stored(again) == stored(first)
        assert statements and not any("FROM offer" in sql or "price_index.gpu" in sql
                                      for sql in statements), statements
        crawl(engine, "lambda", [item("lambda", "L", 1.0)], T0 + timedelta(hours=1))
        statements.clear()
        renewed = parse_metrics(metrics.exposition(None)[0].decode())
        assert any("FROM offer" in sql for sql in statements)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert renewed[("gpuradar_offers", frozenset({
        ("source", "lambda"), ("pricing", "on_demand"), ("availability", "available")}))] == 1
    # the registry (what tests and tools read) and the endpoint's text agree
    assert stored(parse_metrics(generate_latest(metrics.registry).decode())) == stored(renewed)


def test_the_endpoint_serves_every_series_in_both_formats_gzipped(engine):
    """Prometheus asks for OpenMetrics and gzip: one `# EOF` at the very end, every series
    once; the classic text format and a `name[]` selection (of the in-memory series, as
    before) answer too."""
    from gpuradar.scheduler.health import Health, make_app, serve
    from gpuradar.scheduler.metrics import Metrics

    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0)], T0)
    metrics = Metrics(lambda: engine)
    metrics.crawls.labels("azure", "ok").inc()
    httpd = serve("127.0.0.1", 0, make_app(metrics.registry, Health(lambda: engine), str,
                                           metrics.exposition))
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        ask = urllib.request.Request(base + "/metrics", headers={
            "Accept": OPENMETRICS, "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(ask, timeout=10) as reply:
            assert reply.headers["Content-Encoding"] == "gzip"
            assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
            text = gzip.decompress(reply.read()).decode()
        assert text.endswith("# EOF\n") and text.count("# EOF") == 1
        families = {f.name: f for f in openmetrics_families(text)}
        assert families["gpuradar_crawls"].samples[0].value == 1
        assert {s.labels["instance_type"] if "instance_type" in s.labels else s.labels.get(
            "source") for s in families["gpuradar_offers"].samples} == {"azure"}
        assert families["gpuradar_database_up"].samples[0].value == 1
        # an event between two scrapes is in the second (a family's text is kept only
        # while its samples are unchanged)
        metrics.crawls.labels("azure", "ok").inc()
        metrics.crawls.labels("lambda", "failed").inc()
        with urllib.request.urlopen(ask, timeout=10) as reply:
            text = gzip.decompress(reply.read()).decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in openmetrics_families(text) for s in f.samples}
        assert samples[("gpuradar_crawls_total", (("source", "azure"), ("status", "ok")))] == 2
        assert samples[("gpuradar_crawls_total", (("source", "lambda"),
                                                  ("status", "failed")))] == 1
        with urllib.request.urlopen(base + "/metrics", timeout=10) as reply:
            assert reply.headers["Content-Type"].startswith("text/plain")
            classic = parse_metrics(reply.read().decode())
        assert stored(classic) == stored(parse_metrics(generate_latest(
            metrics.registry).decode()))
        with urllib.request.urlopen(base + "/metrics?name[]=gpuradar_crawls_total",
                                    timeout=10) as reply:
            picked = parse_metrics(reply.read().decode())
        assert {k[0] for k in picked} == {"gpuradar_crawls_total"}
    finally:
        httpd.shutdown()
        httpd.server_close()
