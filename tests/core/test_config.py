"""The configuration as an operator meets it: one schema checked by every command (`config
check`, `sources`, `rules check`, `crawl`, `run`), errors that name file, line and key,
`${VAR}` everywhere, one-line errors whatever the terminal, database failures (exit 3),
Ctrl-C (exit 130), partial crawls (exit 4), crawls left running by a dead process, replay
confined to its recording, and deploy/ kept true."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from gpuradar.core.config import Config, ConfigError, load_config
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import free_port
from tests.provider_server import Reply, serve_standard

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = REPO / "gpuradar" / "recordings"
FAST = {"DOWNLOAD_DELAY": 0, "RETRY_BACKOFF_BASE": 0.05, "RETRY_TIMES": 1}


def config_text(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line(stderr: str) -> str:
    """The error of a command that failed: exactly one line, no traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


# -- the mistakes of issue 14, through every command ---------------------------------------------
MISTAKES = [
    ("sources:\n  foo: {}\n", "config.yaml:2: unknown source 'foo' in sources"),
    ("sources:\n  vastai:\n    intervall: 5m\n",
     "config.yaml:3: unknown key 'intervall' in sources.vastai — did you mean 'interval'?"),
    ("sources:\n  azure:\n    enabeld: false\n",
     "config.yaml:3: unknown key 'enabeld' in sources.azure — did you mean 'enabled'?"),
    ("sources:\n  azure:\n    enabled: \"no\"\n",
     "config.yaml:3: sources.azure.enabled: must be true or false, got 'no'"),
    ("scrapy:\n  DOWNLOAD_TIMEOUT: soon\n",
     "config.yaml:2: scrapy.DOWNLOAD_TIMEOUT: must be a number, got 'soon'"),
    # issue 38: each of these passed `config check`, then broke every crawl
    ("scrapy:\n  DOWNLOAD_DELAY: 1.0e+308\n",
     "config.yaml:2: scrapy.DOWNLOAD_DELAY: must be less than or equal to 300, got 1e+308"),
    ("scrapy:\n  TWISTED_REACTOR: twisted.internet.epollreactor.EPollReactor\n",
     "config.yaml:2: scrapy.TWISTED_REACTOR: must be "
     "'twisted.internet.asyncioreactor.AsyncioSelectorReactor', got "
     "'twisted.internet.epollreactor.EPollReactor'"),
    ("scrapy:\n  DOWNLOAD_TIMEOUTT: 30\n",
     "config.yaml:2: unknown Scrapy setting 'DOWNLOAD_TIMEOUTT' in scrapy — did you mean "
     "'DOWNLOAD_TIMEOUT'?"),
]


@pytest.mark.parametrize("text, message", MISTAKES, ids=[m[1].split(": ", 1)[1][:40]
                                                          for m in MISTAKES])
def test_each_mistake_is_refused_by_check_crawl_and_run(tmp_path, sqlite_url, text, message):
    cfg = config_text(tmp_path, text)
    for command in (["config", "check"], ["crawl", "azure"], ["run"]):
        proc = gpuradar(*command, config=cfg, db_url=sqlite_url)
        assert proc.returncode == 2, (command, proc.stderr)
        assert message in proc.stderr, (command, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_sources_and_rules_check_refuse_what_run_refuses(tmp_path, sqlite_url):
    cfg = config_text(tmp_path, "sources:\n  vastai:\n    interval: soon\n")
    for command in (["sources"], ["rules", "check"], ["run"]):
        proc = gpuradar(*command, config=cfg, db_url=sqlite_url)
        assert proc.returncode == 2, (command, proc.stderr)
        assert f"{cfg}:3: sources.vastai.interval: not a duration: 'soon'" in proc.stderr


def test_config_check_lists_every_problem_with_its_line(tmp_path):
    cfg = config_text(tmp_path, """\
sources:
  azure:
    enabeld: false
  vastia: {}
  gcp:
    api_key: 12345
daemon:
  grace: 3
  intervals: {gpu: 5m}
alerts:
  send_resolved: "yes"
targets:
  hook: 7
endpoints:
  azure.price: http://127.0.0.1:9/
rules: [5]
""")
    proc = gpuradar("config", "check", str(cfg))
    assert proc.returncode == 2
    lines = [line.removeprefix("error: ") for line in proc.stderr.splitlines()]
    assert lines == [
        f"{cfg}:3: unknown key 'enabeld' in sources.azure — did you mean 'enabled'?",
        f"{cfg}:4: unknown source 'vastia' in sources — did you mean 'vastai'?",
        f"{cfg}:6: sources.gcp.api_key: must be text (quote it), got a number "
        "(value not shown)",
        f"{cfg}:8: unknown key 'grace' in daemon — did you mean 'grace_period'?",
        f"{cfg}:9: unknown kind 'gpu' in daemon.intervals; known kinds: marketplace, lambda, "
        "aws, cloud, page, fx",
        f"{cfg}:11: alerts.send_resolved: must be true or false, got 'yes'",
        f"{cfg}:13: targets.hook: must be an apprise URL, a list of them, or {{url: ..., "
        "tags: [...]}, got a number (value not shown)",
        f"{cfg}:15: unknown endpoint 'azure.price' in endpoints — did you mean "
        "'azure.prices'?",
        f"{cfg}:16: rules[1]: a rule is a text or a mapping, not int",
        "9 problems: the configuration is not valid",
    ]
    assert "12345" not in proc.stderr  # a credential is never echoed


def test_problems_found_beyond_the_schema_are_located_too(tmp_path):
    """Apprise URLs, rules and alert settings are checked by their owners, with the line."""
    cfg = config_text(tmp_path, """\
targets:
  ok: json://127.0.0.1:9/hook
  broken: "nosuchservice://user:hunter2secret@example.com"
""")
    proc = gpuradar("config", "check", str(cfg))
    assert proc.returncode == 2 and "hunter2secret" not in proc.stderr
    assert f"{cfg}:3: target 'broken': apprise cannot use the URL" in proc.stderr
    cfg = config_text(tmp_path, "targets: {ok: 'json://127.0.0.1:9/hook'}\n"
                                "rules:\n  - H100 under $2/h\n  - H10O under $2/h\n")
    proc = gpuradar("config", "check", str(cfg))
    assert proc.returncode == 2
    assert f"{cfg}:4: rules[2]: unknown GPU 'H10O'; did you mean H100?" in proc.stderr
    cfg = config_text(tmp_path, "alerts:\n  repeat: 1d\n  min_drop: lots\n")
    proc = gpuradar("config", "check", str(cfg))
    assert proc.returncode == 2 and f"{cfg}:3: alerts.min_drop:" in proc.stderr


def test_config_check_shows_what_is_in_force(tmp_path, monkeypatch):
    cfg = config_text(tmp_path, """\
database_url: "postgresql://gpuradar:${TEST_DB_PASSWORD}@db.example/gpuradar"
sources:
  vastai: {interval: 5 minutes}
  lambda: {enabled: false}
daemon:
  intervals: {cloud: 30m}
targets:
  slack: "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx"
rules:
  - H100 under $2/h
""")
    env = {"TEST_DB_PASSWORD": "dbpass-9876", "GCP_API_KEY": "gcp-key-secret-1"}
    proc = gpuradar("config", "check", str(cfg), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["database"] == "postgresql://gpuradar:***@db.example/gpuradar"
    src = {s["source"]: s for s in info["sources"]}
    assert (src["vastai"]["interval"], src["vastai"]["interval_from"]) == (
        "5m", "sources.vastai.interval")
    assert (src["azure"]["interval"], src["azure"]["interval_from"]) == (
        "30m", "daemon.intervals.cloud")
    assert (src["aws"]["interval"], src["aws"]["interval_from"]) == ("15m", "default")
    assert src["lambda"]["enabled"] is False
    assert src["gcp"]["enabled"] is True and src["gcp"]["credentials"] == \
        "api_key: from GCP_API_KEY"
    assert src["vastai"]["credentials"] == "api_key: not set (VAST_API_KEY)"
    assert info["targets"][0]["target"] == "slack" and info["targets"][0]["channel"] == "slack"
    assert info["rules"] == [{"name": "h100-under-2", "rule": "H100 under $2/h",
                              "notify": "slack"}]
    assert info["metrics"] == {"enabled": True, "address": "127.0.0.1", "port": 9108}
    for secret in ("dbpass-9876", "gcp-key-secret-1", "abcdefghijklmnopqrstuvwx"):
        assert secret not in proc.stdout
    table = gpuradar("config", "check", str(cfg), env=env)
    assert table.returncode == 0 and "configuration OK" in table.stdout
    # `interval: 5 minutes` is a duration for every command, `run` included
    from gpuradar.scheduler.setup import RunOptions, load_setup

    monkeypatch.setenv("TEST_DB_PASSWORD", "x")
    assert load_setup(RunOptions(config=cfg)).plans["vastai"].interval == 300


def test_sources_shows_the_interval_in_force(tmp_path, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", sources={"vastai": {"interval": "2m"}},
                       daemon={"intervals": {"cloud": "30m"}})
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["vastai"]["interval_s"] == 120 and rows["azure"]["interval_s"] == 1800
    assert rows["runpod"]["interval_s"] == 300 and rows["fx"]["interval_s"] == 86400
    table = gpuradar("sources", config=cfg, db_url=sqlite_url, env={"COLUMNS": "200"})
    assert re.search(r"vastai .* 2m ", table.stdout)


# -- ${VAR} ---------------------------------------------------------------------------------------
def test_env_variables_in_database_url(tmp_path, db_url):
    cfg = config_text(tmp_path, 'database_url: "${TEST_GPURADAR_URL}"\n')
    proc = gpuradar("prices", config=cfg)
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (
        f"error: {cfg}:1: database_url: environment variable TEST_GPURADAR_URL is not set "
        "(write ${TEST_GPURADAR_URL:-default} to give a default)")
    proc = gpuradar("db", "upgrade", config=cfg, env={"TEST_GPURADAR_URL": db_url})
    assert proc.returncode == 0 and "is at head" in proc.stdout, proc.stderr
    # a default, and the password part of a URL
    cfg = config_text(tmp_path, 'database_url: "${TEST_UNSET_URL:-sqlite:///'
                                f'{tmp_path}/d.db}}"\n')
    assert gpuradar("db", "upgrade", config=cfg).returncode == 0
    assert (tmp_path / "d.db").exists()


def test_env_variable_as_the_gcp_api_key(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", sources={"gcp": {"api_key": "${TEST_GCP_KEY}"}},
                       endpoints=serve_standard(provider_server, ["gcp", "fx"]), scrapy=FAST)
    for command in (["sources"], ["crawl", "gcp"], ["config", "check"]):
        proc = gpuradar(*command, config=cfg, db_url=sqlite_url)
        assert proc.returncode == 2, proc.stderr
        assert "sources.gcp.api_key: environment variable TEST_GCP_KEY is not set" in \
            proc.stderr
    env = {"TEST_GCP_KEY": "gcp-test-key-4242"}
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url,
                                                  env=env)}
    assert rows["gcp"]["enabled"] is True
    proc = gpuradar("crawl", "gcp", "--json", config=cfg, db_url=sqlite_url, env=env)
    assert proc.returncode == 0, proc.stderr
    keys = {r.headers.get("x-goog-api-key") for r in provider_server.requests
            if "/skus" in r.path}
    assert keys == {"gcp-test-key-4242"}


def test_env_expansion_rules():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_text("metrics:\n  port: ${TEST_PORT:-9200}\n  enabled: ${TEST_ON:-true}\n"
                        "targets:\n  hook: 'json://127.0.0.1:9/$${literal}'\n"
                        "  quoted: '${TEST_PORT:-9300}'\n", encoding="utf-8")
        cfg = load_config(path, database_url="sqlite://")
        # a plain scalar is typed as YAML types it; a quoted one stays text
        assert cfg.metrics.written() == {"port": 9200, "enabled": True}
        assert {name: t.url_list() for name, t in cfg.targets.items()} == {
            "hook": ["json://127.0.0.1:9/${literal}"], "quoted": ["9300"]}
        os.environ["TEST_ON"] = "nope"
        try:
            # a value from the environment is not quoted: it may be a secret put under the
            # wrong key (issue 49)
            with pytest.raises(ConfigError, match=r"c.yaml:3: metrics.enabled: must be true or "
                                                  r"false, got text \(value not shown\)"):
                load_config(path, database_url="sqlite://")
        finally:
            del os.environ["TEST_ON"]
        path.write_text("sources:\n  vastai:\n    interval: 1m\n    interval: 2m\n")
        with pytest.raises(ConfigError, match=r"c.yaml:4: sources.vastai.interval: the key "
                                              r"appears twice \(also line 3\)"):
            load_config(path, database_url="sqlite://")


# -- errors are one line, whatever the terminal --------------------------------------------
def test_errors_are_one_line_in_a_narrow_terminal_and_a_long_path(tmp_path):
    deep = tmp_path.joinpath(*[f"a-rather-long-directory-name-{i}" for i in range(8)])
    deep.mkdir(parents=True)
    page = deep / "page.json"
    page.write_text('{"Items": [{"meterName": "x"}]}')
    for env in ({"COLUMNS": "40"}, {"COLUMNS": "40", "TERM": "xterm"}, {}):
        proc = gpuradar("parse", "azure", str(page), env=env)
        assert proc.returncode == 1
        assert str(page) in one_line(proc.stderr)
        cfg = config_text(deep, "sources:\n  azure:\n    enabeld: false\n")
        proc = gpuradar("sources", config=cfg, env=env)
        assert proc.returncode == 2
        assert one_line(proc.stderr).endswith(
            f"{cfg}:3: unknown key 'enabeld' in sources.azure — did you mean 'enabled'?")


def test_exit_codes_are_documented_in_help():
    from gpuradar.core.units import EXIT_CODES

    proc = gpuradar("--help", env={"COLUMNS": "300"})
    text = " ".join(proc.stdout.split())
    for code, meaning in EXIT_CODES.items():
        assert f"{code} {meaning}" in text
    readme = " ".join((REPO / "README.md").read_text().split())
    for code, meaning in EXIT_CODES.items():
        assert f"| `{code}` | {meaning} |" in readme


# -- the database fails --------------------------------------------------------------------------
@contextlib.contextmanager
def read_only(path: Path):
    """Make a database file read-only for this process, even as root (immutable flag)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        undo = ["chattr", "-i", str(path)]
    else:
        path.chmod(0o444)
        path.parent.chmod(0o555)
        undo = None
    try:
        with pytest.raises(OSError):
            open(path, "r+b").close()  # noqa: SIM115 - proves the file cannot be written
        yield
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            path.parent.chmod(0o755)
            path.chmod(0o644)


def copy_recording(tmp_path: Path, *sources: str) -> Path:
    out = tmp_path / "rec"
    for source in sources:
        shutil.copytree(RECORDINGS / source, out / source)
    return out


def test_read_only_sqlite_is_one_line_exit_3(tmp_path, sqlite_url):
    rec = copy_recording(tmp_path, "oci")
    db = Path(sqlite_url.removeprefix("sqlite:///"))
    with read_only(db):
        proc = gpuradar("crawl", "oci", "--replay", str(rec), db_url=sqlite_url)
        assert proc.returncode == 3
        assert one_line(proc.stderr) == f"error: database {sqlite_url} is read-only: attempt " \
                                        "to write a readonly database"
        # reading still works
        assert gpuradar("prices", db_url=sqlite_url).returncode == 0
        proc = gpuradar("run", "--replay", str(rec), "--metrics-port", str(free_port()),
                        db_url=sqlite_url)
        assert proc.returncode == 3 and "is read-only" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_sqlite_locked_by_another_writer_is_one_line_exit_3(tmp_path, sqlite_url):
    rec = copy_recording(tmp_path, "oci")
    db = sqlite_url.removeprefix("sqlite:///")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing, for longer than busy_timeout
    url = sqlite_url + "?timeout=0.2"  # the wait for the lock (10 s by default)
    try:
        proc = gpuradar("crawl", "oci", "--replay", str(rec), db_url=url)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert proc.returncode == 3
    assert one_line(proc.stderr) == (
        f"error: database {url} is locked by another process (SQLite lets one process "
        "write at a time): database is locked")


def test_sqlite_locked_in_the_middle_of_a_crawl(tmp_path, provider_server, sqlite_url):
    """The lock is taken while the crawl waits for the provider: the crawl's first write
    fails after busy_timeout; one line, exit 3, nothing closed."""
    cfg = write_config(tmp_path / "c.yaml", scrapy=FAST,
                       endpoints=serve_standard(provider_server, ["azure"]))
    db = sqlite_url.removeprefix("sqlite:///")
    original = provider_server.routes[("GET", "/api/retail/prices")]
    holder: dict[str, sqlite3.Connection] = {}

    def lock_then_answer(req):
        if "$skip" in req.query and "conn" not in holder:
            conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            conn.execute("BEGIN IMMEDIATE")
            holder["conn"] = conn
        return original(req)

    provider_server.route("GET", "/api/retail/prices", lock_then_answer)
    url = sqlite_url + "?timeout=0.2"  # the wait for the lock (10 s by default)
    try:
        proc = gpuradar("crawl", "azure", config=cfg, db_url=url)
    finally:
        if "conn" in holder:
            holder["conn"].execute("ROLLBACK")
            holder["conn"].close()
    assert "conn" in holder
    assert proc.returncode == 3, proc.stderr
    assert one_line(proc.stderr).startswith(f"error: database {url} is locked by "
                                            "another process")


@pytest.mark.parametrize(("query", "waits_ms"), [("", 10000), ("?timeout=0.2", 200)])
def test_sqlite_waits_for_another_writer_ten_seconds_unless_the_url_says(sqlite_url, query,
                                                                         waits_ms):
    from gpuradar.storage.db import get_engine

    with get_engine(sqlite_url + query).connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == waits_ms


def test_postgres_gone_in_the_middle_of_a_crawl(tmp_path, provider_server, request):
    from tests.conftest import _pg_connect, _pg_database

    url = _pg_database(request, request.getfixturevalue("pg_template"))
    name = url.rsplit("/", 1)[1]
    cfg = write_config(tmp_path / "c.yaml", scrapy=FAST,
                       endpoints=serve_standard(provider_server, ["azure"]))
    original = provider_server.routes[("GET", "/api/retail/prices")]

    def drop_then_answer(req):
        if "$skip" in req.query:  # the crawl is recorded and running: the database goes
            with _pg_connect() as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return original(req)

    provider_server.route("GET", "/api/retail/prices", drop_then_answer)
    proc = gpuradar("crawl", "azure", config=cfg, db_url=url)
    assert proc.returncode == 3, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith(f"error: database {url} ")
    assert "does not exist" in line or "went away" in line


def test_postgres_unreachable_or_refusing_is_one_line_exit_3(tmp_path, pg_template):
    from tests.conftest import PG_ADMIN, _pg_connect

    url = f"postgresql://u:sekretpw@127.0.0.1:{free_port()}/x"
    for command in (["prices"], ["crawl", "azure"], ["sources"]):
        proc = gpuradar(*command, db_url=url)
        assert proc.returncode == 3, proc.stderr
        line = one_line(proc.stderr)
        assert line.startswith("error: database postgresql") and " cannot be reached: " in line
        assert "u:***@127.0.0.1" in line and "Connection refused" in line
        assert "sekretpw" not in proc.stderr
    # a login the server refuses (the test server trusts passwords; a NOLOGIN role it refuses)
    with _pg_connect() as conn:
        conn.execute("DROP ROLE IF EXISTS gpuradar_nologin")
        conn.execute("CREATE ROLE gpuradar_nologin NOLOGIN")
    try:
        base = PG_ADMIN.rsplit("/", 1)[0].replace("postgres@", "gpuradar_nologin:pw123456@")
        proc = gpuradar("prices", db_url=f"{base}/{pg_template}")
        assert proc.returncode == 3
        line = one_line(proc.stderr)
        assert " refused the login: " in line and "not permitted to log in" in line
        assert "pw123456" not in line
        proc = gpuradar("prices", db_url=PG_ADMIN.rsplit("/", 1)[0] + "/no_such_database_x")
        assert proc.returncode == 3 and " does not exist: " in one_line(proc.stderr)
    finally:
        with _pg_connect() as conn:
            conn.execute("DROP ROLE IF EXISTS gpuradar_nologin")


# -- Ctrl-C, partial crawls, crawls left running ------------------------------------------------
def _blocking_azure(provider_server) -> tuple[threading.Event, threading.Event]:
    """Azure answers its second page only once `release` is set; `arrived` says the crawl
    is waiting for it (so its record is `running`)."""
    arrived, release = threading.Event(), threading.Event()
    original = provider_server.routes[("GET", "/api/retail/prices")]

    def blocking(req):
        if "$skip" in req.query:
            arrived.set()
            release.wait(60)
        return original(req)

    provider_server.route("GET", "/api/retail/prices", blocking)
    return arrived, release


def _start(args: list[str], cfg: Path, db_url: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    env.update(GPURADAR_CONFIG=str(cfg), GPURADAR_DATABASE_URL=db_url,
               GPURADAR_DATA_DIR=str(cfg.parent / "data"))
    return subprocess.Popen([sys.executable, "-m", "gpuradar", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _crawls(db_url: str) -> list[tuple]:
    from sqlalchemy import text

    from gpuradar.storage.db import get_engine

    with get_engine(db_url).connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT source, status, error FROM crawl ORDER BY id"))]


def test_ctrl_c_stops_at_once_records_the_crawl_failed_and_exits_130(tmp_path, provider_server,
                                                                    db_url):
    cfg = write_config(tmp_path / "c.yaml", scrapy=FAST,
                       endpoints=serve_standard(provider_server, ["azure", "fx"]))
    arrived, release = _blocking_azure(provider_server)
    proc = _start(["crawl", "fx", "azure"], cfg, db_url)
    try:
        assert arrived.wait(60), "the crawl never asked for page 2"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)  # the provider still has not answered
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "ReactorNotRunning" not in err
    assert err.splitlines() == [
        "stopping… (Ctrl-C again to quit at once)",
        "error: interrupted: 1 crawl(s) stopped and recorded failed (azure); they closed "
        "nothing"]
    assert _crawls(db_url) == [("fx", "ok", ""), ("azure", "failed", "interrupted (Ctrl-C)")]


def test_crawls_of_a_dead_process_are_failed_and_live_ones_are_not(tmp_path, provider_server,
                                                                   sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", scrapy=FAST,
                       endpoints=serve_standard(provider_server, ["azure"]))
    arrived, release = _blocking_azure(provider_server)
    live = _start(["crawl", "azure"], cfg, sqlite_url)
    try:
        assert arrived.wait(60)
        # another command while the crawl runs: its crawl is left alone
        rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
        assert rows["azure"]["last_status"] == "running"
        live.kill()  # kill -9: nothing recorded by the crawl itself
        live.wait(30)
    finally:
        release.set()
    assert _crawls(sqlite_url) == [("azure", "running", "")]
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["azure"]["last_status"] == "failed"
    assert rows["azure"]["last_error"].startswith("interrupted (process ")
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0


def test_a_partial_crawl_exits_4(tmp_path, provider_server, sqlite_url):
    # Vast.ai's second search (every model the first did not name) fails: the offers of the
    # first are stored, nothing is closed, the crawl is partial.
    cfg = write_config(tmp_path / "c.yaml", scrapy=FAST,
                       endpoints=serve_standard(provider_server, ["vastai"]))
    original = provider_server.routes[("POST", "/api/v0/bundles/")]
    provider_server.route("POST", "/api/v0/bundles/", lambda req: Reply(500, b"oops")
                          if b"notin" in req.body else original(req))
    proc = gpuradar("crawl", "vastai", "--json", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "partial"


def test_a_component_setting_is_refused_before_any_crawl(tmp_path, sqlite_url):
    """Scrapy's component settings are gpuradar's own: refused by `config check` (they used to
    pass it and then stop every crawl)."""
    cfg = write_config(tmp_path / "c.yaml",
                       scrapy={"ITEM_PIPELINES": {"nosuchmodule.Pipeline": 300}})
    for command in (["config", "check"], ["crawl", "oci"]):
        proc = gpuradar(*command, config=cfg, db_url=sqlite_url)
        assert proc.returncode == 2
        assert one_line(proc.stderr.replace("1 problem: the configuration is not valid", "")) \
            == f"error: {cfg}:2: Scrapy setting 'ITEM_PIPELINES' cannot be set in the config " \
               "file (gpuradar relies on its own value; docs/configuration.md lists the " \
               "settings that can be)"


# -- every Scrapy setting the file can pass is checked (issue 38) --------------------------------
BAD_SCRAPY = [
    ("DOWNLOAD_TIMEOUT: -1", "scrapy.DOWNLOAD_TIMEOUT: must be greater than 0, got -1"),
    ("DOWNLOAD_TIMEOUT: 0", "scrapy.DOWNLOAD_TIMEOUT: must be greater than 0, got 0"),
    ('GPURADAR_PRICE_RANGE: ["a", "b"]', "scrapy.GPURADAR_PRICE_RANGE[1]: must be a number, "
                                         "got 'a'"),
    ("GPURADAR_PRICE_RANGE: [5]", "scrapy.GPURADAR_PRICE_RANGE: must be [low, high] in USD "
                                  "per GPU-hour with 0 < low < high, got [5.0]"),
    ("GPURADAR_PRICE_RANGE: [1000, 0.001]", "scrapy.GPURADAR_PRICE_RANGE: must be [low, high] "
                                            "in USD per GPU-hour with 0 < low < high, got "
                                            "[1000.0, 0.001]"),
    ("GPURADAR_PRICE_RANGE: [0, 5]", "with 0 < low < high, got [0.0, 5.0]"),
    ("GPURADAR_PRICE_RANGE: [1, .inf]", "with 0 < low < high, got [1.0, inf]"),
    ("GPURADAR_SHRINK_GUARD: 2", "scrapy.GPURADAR_SHRINK_GUARD: must be less than or equal "
                                 "to 1, got 2"),
    ("GPURADAR_CONNECT_ATTEMPTS: 0", "scrapy.GPURADAR_CONNECT_ATTEMPTS: must be greater than "
                                     "or equal to 1, got 0"),
    ("GPURADAR_CONNECT_ATTEMPTS: 1.5", "scrapy.GPURADAR_CONNECT_ATTEMPTS: must be a whole "
                                       "number, got 1.5"),
    ("DOWNLOAD_DELAY: null", "scrapy.DOWNLOAD_DELAY: must be a number, got null"),
    ("DOWNLOAD_DELAY: .nan", "scrapy.DOWNLOAD_DELAY: must be less than or equal to 300, "
                             "got nan"),
    ("CONCURRENT_REQUESTS: 0", "scrapy.CONCURRENT_REQUESTS: must be greater than or equal to "
                               "1, got 0"),
    ("RETRY_TIMES: true", "scrapy.RETRY_TIMES: must be a whole number, got true"),
    ("RETRY_HTTP_CODES: [429, 5000]", "scrapy.RETRY_HTTP_CODES[2]: must be less than or equal "
                                      "to 599, got 5000"),
    ("USER_AGENT: \"a\\nb\"", "scrapy.USER_AGENT: must be one line of text"),
    ("PLAYWRIGHT_BROWSER_TYPE: safari", "scrapy.PLAYWRIGHT_BROWSER_TYPE: must be 'chromium', "
                                        "'firefox' or 'webkit', got 'safari'"),
    ("PLAYWRIGHT_LAUNCH_OPTIONS: {headles: true}", "unknown key 'headles' in "
                                                   "scrapy.PLAYWRIGHT_LAUNCH_OPTIONS — did you "
                                                   "mean 'headless'?"),
    ("RANDOMIZE_DOWNLOAD_DELAY: false", "Scrapy setting 'RANDOMIZE_DOWNLOAD_DELAY' cannot be "
                                        "set in the config file; use DOWNLOAD_DELAY_JITTER"),
    ("GPURADAR_DATABASE_URL: sqlite://", "Scrapy setting 'GPURADAR_DATABASE_URL' cannot be set "
                                         "in the config file; use `database_url:` or "
                                         "--database-url"),
    ("RETRY_BACKOFF_BASE: 10\n  RETRY_BACKOFF_MAX: 5", "scrapy: RETRY_BACKOFF_BASE (10) must "
                                                      "not exceed RETRY_BACKOFF_MAX (5)"),
]


@pytest.mark.parametrize("setting, message", BAD_SCRAPY, ids=[b[0] for b in BAD_SCRAPY])
def test_a_bad_scrapy_setting_is_one_located_problem(tmp_path, setting, message):
    cfg = config_text(tmp_path, f"scrapy:\n  {setting}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    first = exc.value.problems[0]
    line = 1 if message.startswith("scrapy: ") else 2  # the section as a whole: its own line
    assert first.startswith(f"{cfg}:{line}: ") and message in first, exc.value.problems


def test_the_source_price_range_is_checked_like_the_setting(tmp_path):
    for value, shown in (("[1000, 0.001]", "[1000.0, 0.001]"), ("[5]", "[5.0]"),
                         ("[0, 5]", "[0.0, 5.0]")):
        cfg = config_text(tmp_path, f"sources:\n  azure:\n    price_range: {value}\n")
        with pytest.raises(ConfigError) as exc:
            load_config(cfg)
        assert exc.value.problems == [
            f"{cfg}:3: sources.azure.price_range: must be [low, high] in USD per GPU-hour "
            f"with 0 < low < high, got {shown}"]


def test_every_supported_scrapy_setting_is_a_real_one():
    """A name the section accepts is one Scrapy, gpuradar or scrapy-playwright reads."""
    import scrapy_playwright.handler as playwright_handler

    from gpuradar.core.config import ScrapySection
    from gpuradar.crawler.crawl_settings import scrapy_defaults

    source = Path(playwright_handler.__file__).read_text()
    for name in ScrapySection.model_fields:
        assert name in scrapy_defaults() or (name.startswith("PLAYWRIGHT_") and
                                             f'"{name}"' in source), name


def test_settings_at_their_limits_crawl_without_a_traceback(tmp_path, sqlite_url):
    """What passes `config check` runs: the supported settings at the ends of their ranges
    (a replayed crawl, so nothing waits)."""
    rec = copy_recording(tmp_path, "oci")
    cfg = write_config(tmp_path / "c.yaml", scrapy={
        "DOWNLOAD_DELAY": 0, "DOWNLOAD_DELAY_JITTER": 1, "CONCURRENT_REQUESTS": 1,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64, "CONCURRENT_ITEMS": 10_000,
        "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_TARGET_CONCURRENCY": 64,
        "DOWNLOAD_TIMEOUT": 3600, "CLOSESPIDER_TIMEOUT": 86_400, "DNS_TIMEOUT": 600,
        "RETRY_TIMES": 10, "RETRY_HTTP_CODES": [429], "RETRY_BACKOFF_BASE": 0,
        "RETRY_BACKOFF_MAX": 3600, "DOWNLOAD_MAXSIZE": 0, "USER_AGENT": "probe/1",
        "DEFAULT_REQUEST_HEADERS": {"Accept": "application/json"},
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
        "GPURADAR_PRICE_RANGE": [0.01, 5000], "GPURADAR_SHRINK_GUARD": 0,
        "GPURADAR_BATCH_SIZE": 1, "GPURADAR_CONNECT_ATTEMPTS": 10,
        "PLAYWRIGHT_BROWSER_TYPE": "chromium", "PLAYWRIGHT_MAX_CONTEXTS": 1,
        "PLAYWRIGHT_LAUNCH_OPTIONS": {"headless": True, "args": ["--no-sandbox"]}})
    assert gpuradar("config", "check", config=cfg).returncode == 0
    proc = gpuradar("crawl", "oci", "--replay", str(rec), "--json", config=cfg,
                    db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "ok"


def test_a_bad_settings_module_in_the_environment_is_one_line(tmp_path, sqlite_url):
    for command in (["config", "check"], ["prices"], ["crawl", "oci"]):
        proc = gpuradar(*command, db_url=sqlite_url,
                        env={"SCRAPY_SETTINGS_MODULE": "nope.settings"})
        assert proc.returncode == 2, (command, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines[0] == ("error: environment variable SCRAPY_SETTINGS_MODULE="
                            "'nope.settings': cannot be imported (ModuleNotFoundError: No "
                            "module named 'nope'); unset it to use gpuradar's settings "
                            "(gpuradar.crawler.settings)"), proc.stderr
        assert len(lines) <= 2 and "Traceback" not in proc.stderr


def test_a_settings_module_is_checked_like_the_section(tmp_path, monkeypatch):
    (tmp_path / "mysettings.py").write_text(
        "from gpuradar.crawler.settings import *  # noqa\nDOWNLOAD_DELAY = 1e308\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "mysettings")
    with pytest.raises(ConfigError) as exc:
        load_config(None)
    assert exc.value.problems == [
        "environment variable SCRAPY_SETTINGS_MODULE='mysettings' (module mysettings): "
        "DOWNLOAD_DELAY: must be less than or equal to 300, got 1e+308"]
    (tmp_path / "goodsettings.py").write_text(
        "from gpuradar.crawler.settings import *  # noqa\nDOWNLOAD_DELAY = 2\n")
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "goodsettings")
    load_config(None)  # gpuradar's own values (tuples included) pass


def test_each_default_is_stated_once_in_core():
    """The download timeout, crawl timeout, price range, shrink guard and send timeout come
    from gpuradar.core.defaults wherever they are used."""
    from scrapy.settings import Settings

    from gpuradar.alerts import delivery
    from gpuradar.core import defaults
    from gpuradar.core.config import AlertsSection
    from gpuradar.crawler import pipelines
    from gpuradar.scheduler import jobs
    from gpuradar.storage import ingest

    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    assert settings.getfloat("DOWNLOAD_TIMEOUT") == defaults.DOWNLOAD_TIMEOUT
    assert settings.getfloat("CLOSESPIDER_TIMEOUT") == defaults.CRAWL_TIMEOUT
    assert tuple(settings.getlist("GPURADAR_PRICE_RANGE")) == defaults.PRICE_RANGE
    assert settings.getfloat("GPURADAR_SHRINK_GUARD") == defaults.SHRINK_GUARD
    assert pipelines.PRICE_RANGE == defaults.PRICE_RANGE
    assert ingest.SHRINK_GUARD == defaults.SHRINK_GUARD
    assert jobs.DEFAULT_CRAWL_TIMEOUT == defaults.CRAWL_TIMEOUT
    assert AlertsSection().send_timeout == delivery.SEND_TIMEOUT == defaults.SEND_TIMEOUT
    # and no module states one of them again as a number
    for path in (REPO / "scheduler" / "setup.py", REPO / "crawler" / "settings.py",
                 REPO / "crawler" / "pipelines.py", REPO / "storage" / "ingest.py"):
        text = path.read_text()
        for literal in ("180.0", "900.0", "0.001, 1000", "= 0.5\n", "= 60\n"):
            assert literal not in text, (path, literal)


# -- replay stays inside its recording ------------------------------------------------------------
@pytest.mark.parametrize("escape", ["../../elsewhere.json", "/ABSOLUTE/elsewhere.json"])
def test_replay_refuses_an_entry_outside_the_recording(tmp_path, sqlite_url, escape):
    rec = copy_recording(tmp_path, "lambda")
    index = rec / "lambda" / "index.json"
    entries = json.loads(index.read_text())
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes((rec / "lambda" / entries[0]["file"]).read_bytes())
    entries[0]["file"] = escape.replace("/ABSOLUTE", str(tmp_path))
    index.write_text(json.dumps(entries))
    proc = gpuradar("crawl", "lambda", "--replay", str(rec), "--json", db_url=sqlite_url)
    assert proc.returncode == 1
    (result,) = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["items"] == 0
    assert f"recording entry {entries[0]['file']!r} in {index} resolves outside the " \
           "recording" in result["error"]
    assert gpuradar_json("prices", db_url=sqlite_url) == []


# -- the example configuration and deploy/ ---------------------------------------------------------
EXAMPLE = REPO / "deploy" / "config.example.yaml"


def test_example_config_matches_the_schema_defaults():
    """Every key of the schema is in the example with its default; each source's comment
    states the interval the code uses and only options the provider declares."""
    from gpuradar.alerts.engine import SETTING_KEYS
    from gpuradar.core.config import (
        AlertsSection,
        DaemonSection,
        MetricsSection,
        schema,
        source_option_types,
    )
    from gpuradar.core.sources import providers
    from gpuradar.core.units import format_duration, parse_duration

    raw = yaml.safe_load(EXAMPLE.read_text())
    text = EXAMPLE.read_text()
    assert set(raw) == {f.alias or n for n, f in schema().model_fields.items()}
    cfg = load_config(EXAMPLE, database_url="sqlite://")
    assert {f.alias or n for n, f in AlertsSection.model_fields.items()} == SETTING_KEYS
    for section, model in (("alerts", AlertsSection), ("metrics", MetricsSection),
                           ("daemon", DaemonSection)):
        assert set(raw[section]) == {f.alias or n for n, f in model.model_fields.items()}
        # as written, each value means the default
        assert model.model_validate(raw[section]) == model(), section
    for name, cls in providers().items():
        assert raw["sources"][name] == {"enabled": True}
        block = re.search(rf"^  {name}:.*?(?=^  \w+:|\Z)", text, re.M | re.S).group(0)
        every = re.search(r"every (\S+)", block.splitlines()[0]).group(1)
        assert parse_duration(every).total_seconds() == cls.default_interval, (name, every)
        assert every == format_duration(cls.default_interval)
        documented = set(re.findall(r"^    # (\w+):", block, re.M))
        assert documented <= set(source_option_types(cls)), (name, documented)
        for endpoint in cls.endpoints:
            assert f"{name}.{endpoint}" in text
    assert {n: o.written() for n, o in cfg.sources.items()} == {
        n: {"enabled": True} for n in providers()}
    # the kinds' comment says the right defaults too
    for kind_line in re.findall(r"^  #   (\w+): (\S+) +\((.*)\)$", text, re.M):
        kind, _, members = kind_line
        for member, value in re.findall(r"(\w+) (\d+[smhd])", members):
            assert providers()[member].kind == kind
            assert parse_duration(value).total_seconds() == providers()[
                member].default_interval


def test_every_source_option_a_spider_reads_is_declared():
    """A spider reads its options by name (self.option("x"), opts.get("x"), opts["x"]): each
    must be declared, or the schema would refuse a working configuration."""
    from gpuradar.core.config import source_option_types
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import spider_classes

    for name, cls in spider_classes(scrapy_settings(Config(database_url="sqlite://"))).items():
        tree = ast.parse(Path(sys.modules[cls.__module__].__file__).read_text())
        read: set[str] = set()
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("option", "get") and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and (node.func.attr == "option" or ast.unparse(node.func.value) == "opts")):
                read.add(node.args[0].value)
            if (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "opts"
                    and isinstance(node.slice, ast.Constant)):
                read.add(node.slice.value)
        declared = set(source_option_types(cls.facts)) | {"enabled", "interval", "jitter",
                                                          "timeout"}
        assert read <= declared, (name, read - declared)


def test_every_reference_in_deploy_exists():
    """`make <target>`, README sections and files named in deploy/ are real."""
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    headings = {re.sub(r"[`*]", "", h).strip().lower() for path in [REPO / "README.md",
                                                                   *REPO.glob("docs/*.md")]
                for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}
    checked = 0
    for path in sorted((REPO / "deploy").rglob("*")):
        if not path.is_file() or path.suffix in (".json", ".png"):
            continue
        text = path.read_text()
        for found in re.findall(r"`make ([\w-]+)`|Makefile's `([\w-]+)` target|"
                                r"^[#\s]*make ([\w-]+)\s*$", text, re.M):
            target = "".join(found)
            assert target in targets, f"{path}: make target {target!r} does not exist"
            checked += 1
        for section in re.findall(r"(?:README|docs/[\w.-]+)[^\n\"]*?\"([^\"]+)\"", text):
            for part in re.split(r"\s*[;:,]\s*", section):
                assert part.lower() in headings, f"{path}: section {part!r} does not exist"
                checked += 1
        for ref in re.findall(r"\b((?:docs|deploy)/[\w./-]+\.\w+)", text):
            assert (REPO / ref).exists(), f"{path}: {ref} does not exist"
            checked += 1
    assert checked >= 3


def test_config_check_accepts_the_example_and_the_readme_example(tmp_path):
    proc = gpuradar("config", "check", str(EXAMPLE))
    assert proc.returncode == 0, proc.stderr
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Configuration.*?```yaml\n(.*?)```", readme, re.S).group(1)
    cfg = config_text(tmp_path, block)
    env = {"PGPASSWORD": "pw", "GCP_API_KEY": "k", "SLACK_TOKEN": "T0000AAAA/B0000BBBB/"
           "abcdefghijklmnopqrstuvwx", "SMTP_PASSWORD": "smtp-pw"}
    proc = gpuradar("config", "check", str(cfg), env=env)
    assert proc.returncode == 0, proc.stderr
    proc = gpuradar("config", "check", str(cfg), env={**env, "PGPASSWORD": ""})
    assert proc.returncode == 0  # set but empty: the URL has an empty password
    del env["GCP_API_KEY"]
    proc = gpuradar("config", "check", str(cfg), env=env)
    assert proc.returncode == 2 and "GCP_API_KEY is not set" in proc.stderr


def test_an_absurd_request_interval_is_refused_like_download_delay(tmp_path):
    cfg = config_text(tmp_path, "sources:\n  azure:\n    request_interval: 100000\n")
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert exc.value.problems == [f"{cfg}:3: sources.azure.request_interval: must be at most "
                                  "300 seconds (5 minutes), got 100000"]
    assert load_config(config_text(tmp_path, "sources:\n  azure:\n    request_interval: 5m\n")
                       ).sources["azure"].request_interval == 300


def test_a_file_that_is_not_a_configuration_is_not_quoted_back(tmp_path):
    """A line of /etc/shadow or a credentials file given as --config by mistake parses as a
    YAML key: the error says where and how long it is, never what it holds."""
    hashed = "root:$6$Zq8Nv0b1sEcReThAsH$Vd0:19000:0:99999:7::"
    (tmp_path / "shadow").write_text(hashed + ":\n")
    proc = gpuradar("prices", "--config", str(tmp_path / "shadow"))
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (
        f"error: {tmp_path / 'shadow'}:1: unknown key ({len(hashed)} characters, not shown: "
        "not a key name; is this a gpuradar configuration file?) at the top level")
    assert "sEcReT" not in proc.stderr + proc.stdout


def test_a_settings_module_that_exits_is_one_line_not_a_silent_success(tmp_path,
                                                                       monkeypatch):
    """`sys.exit(0)` at import made `crawl` exit 0, print nothing and crawl nothing
    (issue 49, finding 13): every command loads the configuration through load_config."""
    (tmp_path / "exiting.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "exiting")
    with pytest.raises(ConfigError) as exc:
        load_config(None)
    assert str(exc.value) == (
        "environment variable SCRAPY_SETTINGS_MODULE='exiting': calls sys.exit(0) when "
        "imported; unset it to use gpuradar's settings (gpuradar.crawler.settings)")
