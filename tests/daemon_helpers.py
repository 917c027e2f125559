"""Helpers for the daemon tests: the daemon as a real subprocess, a real SMTP server
(aiosmtpd), a real HTTP webhook receiver, /metrics parsing and database invariants."""

from __future__ import annotations

import email
import email.policy
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.clirun import REAL_SUBPROCESS, ForkedProcess, note_process
from tests.helpers import free_port

REPO = Path(__file__).resolve().parent.parent
RECORDINGS = REPO / "gpuradar" / "recordings"
# What the `gpuradar` console script runs (`python -m gpuradar.cli` would import the CLI
# module twice, as __main__ and as gpuradar.cli).
GPURADAR = [sys.executable, "-c", "import sys; sys.argv[0] = 'gpuradar'; "
            "from gpuradar.__main__ import main; main()"]



def wait_for(pred: Callable[[], Any], timeout: float, what: str, every: float = 0.1,
              on_fail: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{on_fail()}" if on_fail else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{extra}")
        time.sleep(every)


# -- receivers -----------------------------------------------------------------------------
class SmtpSink:
    """A real SMTP server on loopback keeping every message it receives."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list[email.message.EmailMessage] = []
        sink = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802
                sink.messages.append(email.message_from_bytes(
                    envelope.content, policy=email.policy.default))
                return "250 OK"

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"mailto://127.0.0.1:{self.port}?from=gpuradar@example.com&to=ops@example.com"

    def subjects(self) -> list[str]:
        return [str(m["subject"]) for m in self.messages]

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.controller.stop()


class WebhookSink:
    """A real HTTP server receiving apprise json:// posts. With `hang` set it records the
    request, then keeps the sender waiting that many seconds (a delivery in flight); after
    `hold()` it keeps every sender waiting until `release()`."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.hang = 0.0
        self._open = threading.Event()
        self._open.set()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    sink.posts.append(json.loads(body))
                except ValueError:
                    sink.posts.append({"raw": body.decode("utf-8", "replace")})
                if sink.hang:
                    time.sleep(sink.hang)
                sink._open.wait(120)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def titles(self) -> list[str]:
        return [str(p.get("title", "")) for p in self.posts]

    def __enter__(self) -> WebhookSink:
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- configuration -------------------------------------------------------------------------
def all_source_names() -> list[str]:
    from gpuradar.core.config import Config
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes

    return list(spider_classes(scrapy_settings(Config(database_url="sqlite://"))))


def only_sources(wanted: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`sources:` scheduling exactly `wanted` (every other source disabled)."""
    out: dict[str, dict[str, Any]] = {n: {"enabled": False} for n in all_source_names()}
    out.update(wanted)
    return out


def copy_recordings(dest: Path, names: list[str]) -> Path:
    import shutil

    for n in names:
        shutil.copytree(RECORDINGS / n, dest / n)
    return dest


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# -- the daemon ----------------------------------------------------------------------------
def parse_metrics(text: str) -> dict[tuple[str, frozenset], float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


class Daemon:
    """`gpuradar run` in a subprocess, its logs in files, its endpoint over HTTP."""

    def __init__(self, workdir: Path, config: Path, *args: str, metrics_port: int,
                 env: dict[str, str] | None = None, real: bool = REAL_SUBPROCESS,
                 web_port: int | None = None) -> None:
        """`real`: a `python -m gpuradar run` of its own rather than a fork of the fork
        server, whose preloaded libraries (some a daemon never imports) would count in its
        memory: what bench/daemon.py measures."""
        self.workdir = workdir
        self.port = metrics_port
        # the page and the API (a process of their own): only for a test that reads them,
        # as their start competes with the daemon's first crawls for the machine
        self.web_port = web_port
        n = len(list(workdir.glob("daemon-*")))
        folder = workdir / f"daemon-{n}"  # its stdout, stderr (and exit code when forked)
        folder.mkdir()
        self.err_path = folder / "stderr"
        self.out_path = folder / "stdout"
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("GPURADAR_CONFIG", "GPURADAR_DATABASE_URL")}
        full_env |= {"GPURADAR_DATA_DIR": str(workdir / "data"), "PYTHONUNBUFFERED": "1",
                     "GPURADAR_WEB_PORT": str(web_port or 0),
                     "GPURADAR_WEB_ENABLED": "true" if web_port else "false"}
        full_env |= env or {}
        run_args = ["run", "--config", str(config), *args]
        self.proc: subprocess.Popen | ForkedProcess
        if real:
            note_process(run_args)
            self.proc = subprocess.Popen(
                [*GPURADAR, *run_args], cwd=workdir, env=full_env,
                stdout=self.out_path.open("wb"), stderr=self.err_path.open("wb"))
        else:  # a fresh process too, forked from one that has done the imports
            self.proc = ForkedProcess(run_args, full_env, workdir, folder)

    # endpoint ---------------------------------------------------------------------------
    def get(self, path: str, timeout: float = 5.0, port: int | None = None
            ) -> tuple[int, str]:
        """GET from the metrics endpoint (or `port`)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.port}{path}",
                                        timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def page(self, path: str, timeout: float = 30.0) -> tuple[int, str]:
        """GET from the page and API server (started with `web_port`): a child process of
        the daemon, whose first answer waits for its start (its connection waits in the
        port's backlog meanwhile: seconds on a loaded machine)."""
        assert self.web_port, "start the Daemon with web_port to read its page"
        return self.get(path, timeout, self.web_port)

    def metrics_text(self) -> str:
        return self.get("/metrics")[1]

    def metrics(self) -> dict[tuple[str, frozenset], float]:
        return parse_metrics(self.metrics_text())

    def value(self, name: str, default: float | None = 0.0, **labels: str) -> float | None:
        """The sum of the series of `name` whose labels include `labels` (as PromQL's
        `sum(name{labels})`), or `default` when there is none."""
        wanted = set(labels.items())
        found = [v for (n, have), v in self.metrics().items() if n == name and wanted <= have]
        return sum(found) if found else default

    def healthz(self) -> tuple[int, dict[str, Any]]:
        status, body = self.get("/healthz")
        return status, json.loads(body)

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n"
                                     f"{self.logs()[-3000:]}")
            try:
                return self.get("/healthz", timeout=2)[0] == 200
            except OSError:
                return False

        wait_for(ready, timeout, "the daemon's /healthz", every=0.2, on_fail=self.tail)

    def wait_metric(self, name: str, at_least: float, timeout: float = 30.0,
                    **labels: str) -> float:
        """Wait until the series `name{labels}` exists with a value >= at_least; the value
        seen. A scrape that gets no answer in time (a busy daemon on a loaded machine) is
        asked again until `timeout`, not an error."""
        seen: list[float] = []

        def reached() -> bool:
            try:
                v = self.value(name, None, **labels)
            except OSError:  # no answer within get()'s timeout: ask again
                return False
            if v is not None and v >= at_least:
                seen.append(v)
            return bool(seen)

        wait_for(reached, timeout, f"{name}{labels} >= {at_least}", every=0.2,
                 on_fail=self.tail)
        return seen[0]

    # process ----------------------------------------------------------------------------
    def logs(self) -> str:
        return self.err_path.read_text(errors="replace") + self.out_path.read_text(
            errors="replace")

    def tail(self, n: int = 4000) -> str:
        return "daemon log tail:\n" + self.logs()[-n:]

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"daemon did not stop within {timeout}s\n{self.tail()}"
                                 ) from None

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- the database ----------------------------------------------------------------------------
def query(db_url: str, sql: str, **params: Any) -> list[tuple]:
    from sqlalchemy import text

    from gpuradar.storage.db import get_engine

    with get_engine(db_url).connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]


def consistency_problems(db_url: str) -> list[str]:
    """What is wrong with the stored time series, if anything: crawls left running, offers
    without history, listed offers whose last change says "unlisted" and the reverse."""
    problems = []
    running = query(db_url, "SELECT id, source FROM crawl WHERE status = 'running'")
    if running:
        problems.append(f"crawls left running: {running}")
    latest = query(db_url, """
        SELECT o.id, o.active, c.price_micros FROM offer o
        LEFT JOIN price_change c ON c.offer_id = o.id
         AND c.at = (SELECT MAX(at) FROM price_change WHERE offer_id = o.id)""")
    no_history = [oid for oid, _, micros in latest if micros is None and not any(
        True for _ in query(db_url, "SELECT 1 FROM price_change WHERE offer_id = :i", i=oid))]
    if no_history:
        problems.append(f"offers without history: {no_history}")
    listed_closed = [oid for oid, active, micros in latest if active and micros is None
                     and oid not in no_history]
    if listed_closed:
        problems.append(f"listed offers whose history ends unlisted: {listed_closed}")
    closed_listed = [oid for oid, active, micros in latest if not active and micros is not None]
    if closed_listed:
        problems.append(f"closed offers whose history ends listed: {closed_listed}")
    return problems


# -- replicas on one PostgreSQL database (leader election) -------------------------------------
def role(daemon: Daemon) -> str | None:
    """The replica's role from /healthz (None while it does not answer)."""
    try:
        return daemon.healthz()[1].get("role")
    except (OSError, ValueError):
        return None


def leader_lock_holders(db_url: str) -> list[tuple[int, str]]:
    """(backend pid, application name) of the sessions holding gpuradar's leader lock; the
    application name ends with the daemon's own pid ("gpuradar lock <host>:<pid>")."""
    from gpuradar.storage.leader import HOLDER_SQL

    return query(db_url, HOLDER_SQL)


def holder_pid(db_url: str) -> int | None:
    """The pid of the daemon process holding the leader lock, if one does."""
    holders = leader_lock_holders(db_url)
    assert len(holders) <= 1, f"two sessions hold the leader lock: {holders}"
    return int(holders[0][1].rsplit(":", 1)[1]) if holders else None


def one_leader(db_url: str, *daemons: Daemon) -> Daemon | None:
    """The only replica that says it leads, when exactly one does, the others say standby,
    and its process holds the lock in the database; else None."""
    roles = [role(d) for d in daemons]
    if sorted(roles, key=str) != sorted(["leader"] + ["standby"] * (len(daemons) - 1)):
        return None
    leader = daemons[roles.index("leader")]
    return leader if holder_pid(db_url) == leader.proc.pid else None


class LockHolder:
    """An outsider session that queues for the leader lock (pg_advisory_lock waits), so it
    gets the lock the moment its holder loses it and no replica can take it meanwhile."""

    def __init__(self, db_url: str) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        self.db_url = db_url
        url = make_url(db_url).set(drivername="postgresql")
        self.conn = psycopg.connect(url.render_as_string(hide_password=False),
                                    autocommit=True)
        self.backend = self.conn.info.backend_pid
        self._thread = threading.Thread(target=self._take, daemon=True)
        self.error: BaseException | None = None

    def _take(self) -> None:
        from gpuradar.storage.leader import LOCK_KEY

        try:
            self.conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        except BaseException as exc:  # noqa: BLE001 - reported by `queued`/`held`
            self.error = exc

    def queue(self) -> None:
        self._thread.start()
        wait_for(lambda: query(self.db_url, "SELECT 1 FROM pg_locks WHERE pid = :p AND locktype = "
                               "'advisory' AND NOT granted", p=self.backend), 10,
                 "the outsider session to queue for the leader lock")

    def held(self) -> bool:
        return not self._thread.is_alive() and self.error is None

    def release(self) -> None:
        self.conn.close()
