"""The daemon's own small HTTP endpoint: `/metrics` (prometheus-client's WSGI app),
`/healthz` and `/readyz`. The page and the JSON API are served apart (scheduler/server.py),
so that their readers never queue in front of a scrape or a health check.

It runs in a thread of its own, so a scrape never waits for the event loop, and the health
check can tell a wedged loop from a live one: the scheduler stamps a heartbeat from the
loop every few seconds, and /healthz answers 200 only when that heartbeat is recent, the
scheduler is running and the database answers a trivial query in time. A standby replica
(another one holds the leader lock, scheduler/leadership.py) is healthy too: it says so in
`role` and answers 200, so that load balancers and orchestrators keep it. A rule that fails
to evaluate makes it `degraded` (naming the rule), still 200: the crawler is healthy.

`/healthz` is liveness (restart me when it fails; also when the leader's scheduler has not
started a source's due crawls for `daemon.liveness_intervals` intervals in a row, beyond
what a crawl's time limit allows: a wedged replica that an orchestrator should restart);
`/readyz` is readiness (send me no traffic): 503 with the reason when the process is not
healthy, or when every scheduled source is failing or stale, so the prices it serves are not
current (see readiness()). Stale is the stale-source alert's judgement (`alerts.stale_after`
on the data's time, a replay's capture date; `alerts.stale_after_failures`), so /readyz, the
page's sources table and `gpuradar alerts` agree.
"""

from __future__ import annotations

import gzip
import json
import math
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, gzip_accepted
from sqlalchemy import Engine, text

from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.outcome import CrawlStatus

HEARTBEAT_EVERY = 5.0    # seconds between heartbeats from the loop
HEARTBEAT_STALE = 30.0   # a heartbeat older than this: the loop or scheduler is stuck
DB_TIMEOUT = 5.0         # the database must answer within this
# How often the metrics server's loop looks for a shutdown request (Python's default, 0.5 s,
# let a stop at the end of its budget overrun it: tests/scheduler/test_handover.py).
SHUTDOWN_POLL = 0.05
# /metrics gzipped for a scraper that takes it: level 1 packs the text about 8:1 in a tenth
# of the time prometheus-client's level 9 takes.
GZIP_LEVEL = 1


@dataclass
class Health:
    """State the loop updates and the HTTP thread reads."""

    engine_fn: Callable[[], Engine]
    scheduler_running: Callable[[], bool] = lambda: False
    role: Callable[[], str] = lambda: "leader"
    #: Where the heartbeat's age and readiness's staleness are read (the daemon's).
    clock: Clock = SYSTEM
    heartbeat: float = -1.0  # clock.monotonic() of the last beat (the start, at first)
    stopping: bool = False
    # Rules whose last evaluation failed: the service is degraded, not down (still 200).
    failing_rules: list[str] = field(default_factory=list)
    # The scheduled sources and their intervals in seconds, and the `alerts:` settings by
    # which readiness judges them stale.
    plans: Callable[[], dict[str, float]] = dict
    alert_settings: Callable[[], AlertSettings] = AlertSettings
    # The leader's sources whose due crawls have not run for too long, and why (the loop
    # sets it: see stalled()); liveness fails on any.
    stalled: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.heartbeat < 0:
            self.heartbeat = self.clock.monotonic()

    def beat(self) -> None:
        self.heartbeat = self.clock.monotonic()

    def _database(self) -> str | None:
        """None when the database answers, else why not."""
        outcome: list[str | None] = []

        def probe() -> None:
            try:
                with self.engine_fn().connect() as conn:
                    conn.execute(text("SELECT 1"))
                outcome.append(None)
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                outcome.append(str(exc).strip().splitlines()[0][:200] if str(exc) else
                               type(exc).__name__)

        t = threading.Thread(target=probe, daemon=True, name="healthz-db")
        t.start()
        t.join(DB_TIMEOUT)
        if not outcome:
            return f"no answer within {DB_TIMEOUT:g}s"
        return outcome[0]

    def check(self) -> tuple[bool, dict[str, Any]]:
        age = self.clock.monotonic() - self.heartbeat
        running = self.scheduler_running() and not self.stopping
        alive = running and age < HEARTBEAT_STALE
        db_error = self._database()
        body: dict[str, Any] = {
            "status": "ok" if alive and db_error is None else "unhealthy",
            "scheduler": ("stopping" if self.stopping else "running" if running
                          else "stopped"),
            "heartbeat_age_seconds": round(age, 1),
            "database": "ok" if db_error is None else f"error: {db_error}",
            "role": self.role(),
        }
        if running and not alive:
            body["scheduler"] = f"stuck (no heartbeat for {age:.0f}s)"
        elif not running and not self.stopping and body["role"] == "starting":
            # the endpoint is up a moment before the scheduler: not "unhealthy", not yet ok
            body["status"] = body["scheduler"] = "starting"
        stalled = dict(self.stalled)
        if stalled and body["role"] == "leader":
            body["status"] = "unhealthy"
            body["stalled_crawls"] = stalled
        failing = list(self.failing_rules)
        if failing:
            body["failing_rules"] = failing
            if body["status"] == "ok":
                body["status"] = "degraded"
        return body["status"] in ("ok", "degraded"), body


def stalled(skipped: int, interval: float, time_limit: float, intervals: int) -> str | None:
    """Why a source's crawls count as stalled, or None. `skipped`: its due crawls skipped in
    a row (the previous one still held its one slot, or the scheduler missed them). A crawl
    may run up to `time_limit` (its stop and abandon included), so that many skips are
    allowed on top of `intervals` (`daemon.liveness_intervals`)."""
    allowed = max(intervals, math.ceil(time_limit / interval))
    if skipped <= allowed:
        return None
    return (f"{skipped} due crawls in a row did not start (its previous crawl still holds "
            f"its slot, or the scheduler missed them; allowed: {allowed})")


def source_states(engine: Engine, plans: dict[str, float], now: datetime,
                  settings: AlertSettings) -> dict[str, str]:
    """Each scheduled source: 'ok', 'pending' (not crawled yet), 'failing: <error>' (its
    last crawl failed) or 'stale: ...', judged as its stale alert and the page judge it
    (AlertSettings.stale: a replay's data is as old as its capture)."""
    from gpuradar.storage.queries import last_crawls, source_health

    latest, health = last_crawls(engine), source_health(engine)
    out = {}
    for name in sorted(plans):
        last = latest.get(name)
        at, failures = health.get(name, (None, 0))
        if last is None:
            out[name] = "pending"
        elif last["status"] == CrawlStatus.FAILED:
            out[name] = f"failing: {(last.get('error') or 'no detail').splitlines()[0][:200]}"
        elif at is None:
            out[name] = "stale: never crawled successfully"
        elif settings.stale(at, failures, now):
            out[name] = (f"stale: data as of {at:%Y-%m-%d %H:%M} UTC"
                         + (f", {failures} failed crawls since" if failures else ""))
        else:
            out[name] = "ok"
    return out


def readiness(health: Health, now: datetime | None = None) -> tuple[bool, dict[str, Any]]:
    """(ready, body) of /readyz: not ready when /healthz fails, or when every scheduled
    source is failing or stale (none pending or ok), with the reason."""
    alive, body = health.check()
    out: dict[str, Any] = {"status": "ready", "health": body["status"]}
    if not alive:
        out |= {"status": "not ready", "reason": f"unhealthy: {json.dumps(body)}"}
        return False, out
    try:
        states = source_states(health.engine_fn(), health.plans(), now or health.clock.now(),
                               health.alert_settings())
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        out |= {"status": "not ready", "reason": f"cannot read the crawls: {exc}"[:300]}
        return False, out
    out["sources"] = states
    bad = [n for n, s in states.items() if s.startswith(("failing", "stale"))]
    if states and len(bad) == len(states):
        out |= {"status": "degraded",
                "reason": f"every scheduled source is failing or stale ({', '.join(bad)})"}
        return False, out
    return True, out


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """A request refused before the app sees it (a URL over 64 KiB, too many headers,
        no HTTP at all) answers one line of JSON, as the API's errors do, not HTML."""
        text = message or self.responses.get(code, ("error",))[0]
        body = json.dumps({"error": text}).encode() + b"\n"
        self.send_response(code, text)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def make_app(registry: CollectorRegistry, health: Health, redact: Callable[[str], str],
             exposition: Callable[[str | None], tuple[bytes, str]] | None = None
             ) -> Callable:
    """/healthz, /readyz and /metrics: `registry` rendered by prometheus-client, or by
    `exposition` (Metrics.exposition: the database's series rendered once per data version)
    for a scrape of every series."""
    from gpuradar.scheduler import web

    whole = make_wsgi_app(registry)

    def metrics_app(environ: dict[str, Any], start_response: Callable) -> list[bytes]:
        if exposition is None or "name[]" in (environ.get("QUERY_STRING") or ""):
            return whole(environ, start_response)  # a selection: prometheus-client's way
        body, content_type = exposition(environ.get("HTTP_ACCEPT"))
        headers = [("Content-Type", content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING") or ""):
            body = gzip.compress(body, GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", [*headers, ("Content-Length", str(len(body)))])
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]

    def app(environ: dict[str, Any], start_response: Callable) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/healthz":
            ok, body = health.check()
            payload = redact(json.dumps(body)).encode() + b"\n"
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "application/json"),
                            ("Cache-Control", "no-store")])
            return [payload]
        if path == "/readyz":
            ready, body = readiness(health)
            start_response("200 OK" if ready else "503 Service Unavailable",
                           [("Content-Type", "application/json"),
                            ("Cache-Control", "no-store")])
            return [redact(json.dumps(body)).encode() + b"\n"]
        if path == "/metrics":
            return metrics_app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; try /metrics, /healthz or /readyz (the web page and the JSON "
                b"API have a port of their own: web.port)\n"]

    return web.read_only(app)


class EndpointError(OSError):
    """The metrics endpoint cannot listen where it was told to."""


def serve(address: str, port: int, app: Callable) -> ThreadingWSGIServer:
    """Listen on address:port (IPv4 or IPv6) and serve `app` from a daemon thread."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EndpointError(f"cannot resolve metrics address {address!r}: {exc}") from None
    family, _, _, _, sockaddr = infos[0]

    class Server(ThreadingWSGIServer):
        address_family = family
        allow_reuse_address = True
        # connections waiting to be accepted: the default 5 resets the 6th client of a burst
        # (50 requests at once from a dashboard or a prober), /healthz among them
        request_queue_size = 128

    try:
        httpd = make_server(str(sockaddr[0]), port, app, Server, handler_class=_QuietHandler)
    except OSError as exc:
        raise EndpointError(f"cannot listen on {address}:{port} for metrics: "
                            f"{exc.strerror or exc}") from None
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL},
                     daemon=True, name="metrics-http").start()
    return httpd
