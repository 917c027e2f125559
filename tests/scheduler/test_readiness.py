"""/readyz: readiness, beside the liveness of /healthz. Not ready (503, with the reason) when
every scheduled source is failing or stale; a source not crawled yet keeps it ready."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.core.config import AlertsSection
from gpuradar.scheduler.health import Health, make_app, readiness, serve
from gpuradar.storage.ingest import CrawlWriter

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def crawled(engine, source: str, status: str, at: datetime, error: str = "") -> None:
    CrawlWriter(engine, source, started_at=at).finish(status, error=error)


def health_of(engine, plans: dict[str, float]) -> Health:
    return Health(lambda: engine, lambda: True, plans=lambda: plans)


def test_ready_while_one_source_is_fresh(engine):
    crawled(engine, "azure", "failed", NOW - timedelta(minutes=5), "cannot reach x (DNS)")
    crawled(engine, "vastai", "ok", NOW - timedelta(minutes=5))
    ready, body = readiness(health_of(engine, {"azure": 3600, "vastai": 300}), NOW)
    assert ready and body["status"] == "ready"
    assert body["sources"] == {"azure": "failing: cannot reach x (DNS)", "vastai": "ok"}


def test_degraded_when_every_source_is_failing_or_stale(engine):
    crawled(engine, "azure", "failed", NOW - timedelta(minutes=5), "cannot reach x (DNS)")
    crawled(engine, "vastai", "ok", NOW - timedelta(days=2, hours=2))  # past stale_after: 2d
    ready, body = readiness(health_of(engine, {"azure": 3600, "vastai": 300}), NOW)
    assert not ready and body["status"] == "degraded"
    assert body["reason"] == "every scheduled source is failing or stale (azure, vastai)"
    assert body["sources"]["vastai"] == "stale: data as of 2026-11-28 10:00 UTC"


def test_readyz_judges_staleness_as_the_stale_source_alert_does(engine):
    """#50 item 21: the page listed sources as stale (their alert: a replay's data is as old
    as its capture, `alerts.stale_after`) while /readyz said every source was ok (it counted
    from when the replay ran, by 3 intervals). One judgement now: the alert engine's."""
    from gpuradar.alerts.engine import evaluate
    from gpuradar.storage.ingest import Replay

    capture = Replay("2026-08-22", datetime(2026, 8, 22, tzinfo=UTC))
    CrawlWriter(engine, "vastai", started_at=NOW - timedelta(minutes=5),
                replay=capture).finish("ok")
    crawled(engine, "azure", "ok", NOW - timedelta(days=1))  # 288 of its 5-minute intervals
    plans = {"azure": 300, "vastai": 300}
    ready, body = readiness(health_of(engine, plans), NOW)
    alerts = evaluate(engine, [], now=NOW)
    assert alerts.stale_sources == ["vastai"]
    assert body["sources"] == {"azure": "ok", "vastai": "stale: data as of 2026-08-22 00:00 UTC"}
    assert ready  # azure's day-old data is within stale_after (2d)
    # the configured alerts: settings, as the daemon hands them over
    never = Health(lambda: engine, lambda: True, plans=lambda: plans,
                   alert_settings=lambda: AlertSettings(AlertsSection(stale_after="never")))
    assert readiness(never, NOW)[1]["sources"] == {"azure": "ok", "vastai": "ok"}
    assert evaluate(engine, [], now=NOW, alert_settings={"stale_after": "never"}
                    ).stale_sources == []


def test_a_source_not_crawled_yet_is_pending_not_failing(engine):
    crawled(engine, "azure", "failed", NOW - timedelta(minutes=5), "boom")
    ready, body = readiness(health_of(engine, {"azure": 3600, "runpod": 300}), NOW)
    assert ready and body["sources"]["runpod"] == "pending"


def test_readyz_answers_503_with_the_reason_and_healthz_stays_200(engine):
    crawled(engine, "azure", "failed", datetime.now(UTC), "cannot reach prices.azure.com")
    health = health_of(engine, {"azure": 3600})
    httpd = serve("127.0.0.1", 0, make_app(CollectorRegistry(), health, lambda s: s))
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as reply:
            assert reply.status == 200  # alive: restarting it would not help
        try:
            urllib.request.urlopen(base + "/readyz", timeout=5)
            raise AssertionError("/readyz answered 200")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            body = json.loads(exc.read())
        assert body["status"] == "degraded" and "azure" in body["reason"]
    finally:
        httpd.shutdown()


def test_a_lone_sqlite_daemon_says_starting_until_it_leads(sqlite_url):
    """For its first instants a lone SQLite daemon answered /healthz 503 with
    "role": "standby": no replica waits here, it is starting."""
    import asyncio

    from gpuradar.core.config import Config
    from gpuradar.scheduler.jobs import daemon_options
    from gpuradar.scheduler.leadership import Leadership
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    leadership = Leadership(engine, daemon_options(Config(database_url=sqlite_url)))
    running = {"scheduler": False}
    health = Health(lambda: engine, lambda: running["scheduler"],
                    role=lambda: leadership.role)
    httpd = serve("127.0.0.1", 0, make_app(CollectorRegistry(), health, lambda s: s))
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    def healthz() -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=5) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    try:
        status, body = healthz()
        assert status == 503, body
        assert body["status"] == "starting" and body["role"] == "starting", body

        async def lead_then_check() -> tuple[int, dict]:
            leadership.claim()
            leadership.start(lambda: running.update(scheduler=True), lambda: None)
            try:
                return await asyncio.to_thread(healthz)
            finally:
                await leadership.release()

        status, body = asyncio.run(lead_then_check())
        assert status == 200 and body["role"] == "leader" and body["status"] == "ok", body
    finally:
        httpd.shutdown()
