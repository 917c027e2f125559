"""Shared fixtures: a real SQLite file and a real PostgreSQL database per test.

PostgreSQL runs on 127.0.0.1:5432 (user postgres). Where it is absent the PostgreSQL
variants are skipped, except when GPURADAR_REQUIRE_POSTGRES=1 (set by .ci/run): then they
fail, so CI never silently skips them."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

PG_ADMIN = os.environ.get("GPURADAR_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("GPURADAR_REQUIRE_POSTGRES") == "1"


def pg_url(name: str) -> str:
    """The SQLAlchemy URL of database `name` on the test server."""
    return PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + \
        f"/{name}"


def _pg_connect(dbname: str = "postgres"):
    import psycopg

    base = PG_ADMIN.rsplit("/", 1)[0]
    return psycopg.connect(f"{base}/{dbname}", autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_template():
    """A migrated template database; each test clones it (fast)."""
    try:
        conn = _pg_connect()
    except Exception as exc:  # noqa: BLE001
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL required but unreachable: {exc}")
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    name = f"gpuradar_tmpl_{uuid.uuid4().hex[:10]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    from gpuradar.storage.db import get_engine, upgrade

    url = pg_url(name)
    engine = get_engine(url)
    upgrade(engine)
    engine.dispose()
    yield name
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    from gpuradar.storage.db import get_engine, upgrade

    path = tmp_path_factory.mktemp("tmpl") / "template.db"
    engine = get_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


# The schema a clean test database has: tables, columns, indexes, sequences, constraints,
# functions, triggers and the Alembic version. A database whose test left this unchanged is
# emptied and used again; any other is dropped.
_SCHEMA = """
SELECT md5(concat_ws('|',
  (SELECT string_agg(c.relname || ':' || c.relkind::text || ':' || coalesce(
       (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' '
                          || a.attnotnull::text, ',' ORDER BY a.attnum)
          FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
           AND NOT a.attisdropped), ''), ';' ORDER BY c.relname)
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%'),
  (SELECT string_agg(conname || ':' || pg_get_constraintdef(oid), ';' ORDER BY conname)
     FROM pg_constraint WHERE connamespace = 'public'::regnamespace),
  (SELECT string_agg(proname, ';' ORDER BY proname) FROM pg_proc
    WHERE pronamespace = 'public'::regnamespace),
  (SELECT string_agg(tgname, ';' ORDER BY tgname) FROM pg_trigger WHERE NOT tgisinternal),
  (SELECT string_agg(nspname, ';' ORDER BY nspname) FROM pg_namespace),
  (SELECT string_agg(array_to_string(setconfig, ','), ';') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())),
  (SELECT string_agg(version_num, ';') FROM alembic_version)))
"""
_clean_databases: list[str] = []  # this worker's emptied databases, ready for the next test
_clean_schema: list[str] = []  # the template's _SCHEMA, read once


def _schema(conn) -> str:
    return conn.execute(_SCHEMA).fetchone()[0]


# Every table emptied and every sequence back at its start, as TRUNCATE ... RESTART IDENTITY
# does, at a third of its cost (TRUNCATE makes each table's files anew: 30 ms a database
# here): DELETE, foreign keys unchecked meanwhile (every table goes), except for a table
# the test had analyzed (a crawl's ANALYZE, autovacuum), which TRUNCATE leaves unanalyzed
# again, as the template's tables are (the planner's statistics are part of what a test sees).
_EMPTY = """
DO $$
DECLARE r record; analyzed text[] := '{}';
BEGIN
  SET LOCAL session_replication_role = replica;
  FOR r IN SELECT quote_ident(c.relname) AS t, c.reltuples >= 0 AS seen FROM pg_class c
            JOIN pg_tables p ON p.tablename = c.relname AND p.schemaname = 'public'
            WHERE c.relnamespace = 'public'::regnamespace
              AND c.relname <> 'alembic_version' LOOP
    IF r.seen THEN analyzed := analyzed || r.t; ELSE EXECUTE 'DELETE FROM ' || r.t; END IF;
  END LOOP;
  IF cardinality(analyzed) > 0 THEN
    EXECUTE 'TRUNCATE ' || array_to_string(analyzed, ', ') || ' CASCADE';
  END IF;
  FOR r IN SELECT quote_ident(sequencename) AS s, start_value FROM pg_sequences
            WHERE schemaname = 'public' LOOP
    PERFORM setval(r.s, r.start_value, false);
  END LOOP;
END $$
"""


def _empty_for_reuse(name: str) -> bool:
    """Ends every session the test left on database `name` and empties its tables, if its
    schema is still the template's: a new database costs 0.5 s (most of a PostgreSQL
    test's time), emptying one 10 ms. False when it must be dropped instead."""
    with _pg_connect(name) as conn:
        # waits (up to 5 s each) until the session is gone, with its advisory locks
        conn.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        if _schema(conn) != _clean_schema[0]:
            return False
        conn.execute(_EMPTY)
    return True


def _new_name() -> str:
    return f"gpuradar_test_{uuid.uuid4().hex[:10]}"


_ADMIN: list[Any] = []  # this worker's connection to the server's `postgres` database


def _admin(sql: str) -> None:
    """Run `sql` (CREATE, ALTER or DROP DATABASE) over this worker's kept connection to the
    server's own database: a connection per test cost the server a backend's start each
    time. Connected again once if a test ended it (every session terminated)."""
    import psycopg

    for attempt in (1, 2):
        if not _ADMIN or _ADMIN[0].closed:
            _ADMIN[:] = [_pg_connect()]
        try:
            _ADMIN[0].execute(sql)
            return
        except psycopg.OperationalError:
            _ADMIN[0].close()
            if attempt == 2:
                raise


def _pg_database(request, pg_template):
    """A migrated, empty PostgreSQL database of the test's own, dropped or emptied after it."""
    if _clean_databases:
        name = _clean_databases.pop()
    else:
        name = _new_name()
        _admin(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
        # A test's commits need not wait for the disk (4 ms each here, 0.25 ms without):
        # what they assert on is what other connections and processes see, which is the
        # same.
        _admin(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        if not _clean_schema:
            with _pg_connect(name) as conn:
                _clean_schema.append(_schema(conn))
    url = pg_url(name)

    def release() -> None:
        import psycopg

        from gpuradar.storage.db import get_engine

        get_engine(url).dispose()
        try:
            if _empty_for_reuse(name):
                # under a new name: what a process keeps in memory per database URL (its
                # engine, the schema checked, the alert engine's state, a source's last
                # offers) never meets the next test
                fresh = _new_name()
                _admin(f'ALTER DATABASE "{name}" RENAME TO "{fresh}"')
                _clean_databases.append(fresh)
                return
        except psycopg.Error:  # gone already, or a session came back: dropped below
            pass
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    request.addfinalizer(release)
    return url


@pytest.fixture(scope="session", autouse=True)
def _drop_clean_databases():
    """The emptied databases go at the end of the session."""
    yield
    for name in _clean_databases:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if _ADMIN:
        _ADMIN[0].close()


def _sqlite_copy(folder: Path, sqlite_template: Path) -> str:
    """The URL of a copy of the migrated SQLite template in `folder`."""
    path = folder / "gpuradar.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


def _database(request, folder: Path, sqlite_template: Path) -> str:
    """A fresh, migrated database of the fixture's kind (its param), for as long as the
    fixture's scope: a SQLite file in `folder`, or a PostgreSQL database."""
    if request.param == "sqlite":
        return _sqlite_copy(folder, sqlite_template)
    return _pg_database(request, request.getfixturevalue("pg_template"))


@pytest.fixture(autouse=True)
def _engines_made_by_the_test_go_with_it():
    """The engines a test made (one per database URL) are forgotten after it: each keeps
    its compiled statements, which would otherwise pile up, test after test, in the
    worker's heap for the garbage collector to walk again at each full pass."""
    from gpuradar.storage.db import ENGINES

    before = ENGINES.urls()
    yield
    ENGINES.forget(ENGINES.urls() - before)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, sqlite_template) -> str:
    """A fresh, migrated database: a SQLite file, then a PostgreSQL database."""
    return _database(request, tmp_path, sqlite_template)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_db_url(request, tmp_path_factory, sqlite_template) -> str:
    """As db_url, one per module and database: for a module's tests that only read what
    their fixture stored (a server per test cost test_api_input a third of its time)."""
    return _database(request, tmp_path_factory.mktemp("module_db"), sqlite_template)


@pytest.fixture
def sqlite_url(tmp_path, sqlite_template) -> str:
    return _sqlite_copy(tmp_path, sqlite_template)


@pytest.fixture
def engine(db_url):
    from gpuradar.storage.db import open_database

    return open_database(db_url)


@pytest.fixture
def provider_server():
    from tests.provider_server import ProviderServer

    with ProviderServer() as server:
        yield server


# The files that take longest (on the 2-core CI machine, measured with the whole
# suite running): `make test` hands whole files to its workers (--dist loadfile), longest
# first, so that no worker is left with a long file while the others are done. Order only;
# a file missing here runs after these, in the usual order.
LONGEST_FILES = (
    # (wall s, CPU s of the worker and the processes it starts itself: not those forked by
    # the fork server, which the daemon tests' are), 2026-12-06 21:00 UTC, the whole
    # suite on 4 workers (158 s). Those that mostly wait (on a daemon's timers, a
    # timeout) go in two lanes (WAITING_LANES), beside those that use the CPU.
    "tests/scheduler/test_ha.py",  # 97, 5
    "tests/scheduler/test_crawl_stop.py",  # 16, 2
    "tests/scheduler/test_handover_crawls.py",  # 14, 0
    "tests/alerts/test_alert_engine.py",  # 30, 14
    "tests/alerts/test_delivery.py",  # 36, 4
    "tests/scheduler/test_daemon.py",  # 34, 1
    "tests/scheduler/test_handover.py",  # 23, 1
    "tests/crawler/test_mutation_pipelines.py",  # 17, 4
    "tests/scheduler/test_serve.py",  # 7, 1
    "tests/e2e/test_crawl_e2e.py",  # 12, 4
    "tests/scheduler/test_web_child.py",  # 3, 0
    "tests/scheduler/test_web.py",  # 18, 15 (with Chromium's)
    "tests/project/test_architecture.py",  # 9, 6 (the type checker: 15 s more without its cache)
    "tests/storage/test_offers_trust.py",  # 14, 9
    "tests/core/test_config.py",  # 13, 7
    "tests/storage/test_storage.py",  # 12, 7
    "tests/cli/test_terminal.py",  # 8, 6
    "tests/cli/test_startup_imports.py",  # 12, 9
    "tests/cli/test_tables.py",  # 6, 5
    "tests/scheduler/test_daemon_logic.py",  # 8, 5
    "tests/crawler/test_aws.py",  # 10, 6
    "tests/crawler/test_playwright.py",  # 10, 7
    "tests/crawler/test_alibaba.py",  # 5, 3
)

#: The files that mostly wait (on a daemon's timers, a send's timeout), in two lanes: each
#: lane is handed whole to one worker (pytest_xdist_make_scheduler below), so that at most
#: two of them run at once and the other workers keep both cores busy. Handed out file by
#: file, four of them ran side by side at times, both cores idle for seconds.
WAITING_LANES = {
    "tests/scheduler/test_ha.py": "waiting-1",
    "tests/scheduler/test_crawl_stop.py": "waiting-1",
    "tests/scheduler/test_handover_crawls.py": "waiting-1",
    "tests/alerts/test_delivery.py": "waiting-2",
    "tests/scheduler/test_daemon.py": "waiting-2",
    "tests/scheduler/test_handover.py": "waiting-2",
    "tests/crawler/test_mutation_pipelines.py": "waiting-2",
    "tests/scheduler/test_serve.py": "waiting-2",
    "tests/e2e/test_crawl_e2e.py": "waiting-2",
    "tests/scheduler/test_web_child.py": "waiting-2",
}


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadfile, each of WAITING_LANES handed out as one file."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Lanes(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return WAITING_LANES.get(path, path)

    return Lanes(config, log)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "process: starts a real process because the process is the subject "
        "(signals, kill -9, two replicas, a child's own reactor); the daemon's logic is "
        "tested in-process on a fake clock (tests/scheduler/harness.py)")
    # A worker runs ~900 tests in one process; the collector's full passes walked its whole
    # heap (0.5-1.5 million objects: the libraries, the test modules, what module fixtures
    # keep) 12-18 times, 5-10 s of CPU per worker, and its young passes ran 4,000-6,000
    # times. Now, as for a crawl (gpuradar.core.collector.for_crawls), the young generation
    # is collected after 10,000 allocations and full passes wait for 1,000 collections of
    # the middle one: cycles still die young (what outlives them waits for the process's
    # end: see pytest_unconfigure).
    gc.set_threshold(10_000, 10, 1000)
    if not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0):
        _start_shared_fork_server()


#: The fork server this run's xdist controller started for its workers.
_SHARED_FORK_SERVER: list[subprocess.Popen] = []


def _start_shared_fork_server() -> None:
    """One fork server for every worker (tests/forkserver.py), started while they start:
    the workers inherit its socket's path from the environment."""
    from tests.clirun import SHARED_FORK_SERVER, start_fork_server

    server, os.environ[SHARED_FORK_SERVER] = start_fork_server()
    _SHARED_FORK_SERVER.append(server)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The worker's tests are done: what they left is frozen out of pytest's two last
    collections, which would walk the whole heap (up to 1.5 million objects, 1-2 s of CPU
    per worker as the suite ends) only to report a finalizer's exception as a warning. The
    controller stops the workers' fork server (its stdin closed)."""
    gc.freeze()
    for server in _SHARED_FORK_SERVER:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(30)


#: Tests outside tests/scheduler that start a real process because the process is their
#: subject (tests/README.md lists why), by name prefix, marked `process` here (None: the
#: whole file). The daemon's own are marked in their files.
PROCESS_TESTS: dict[str, tuple[str, ...] | None] = {
    "tests/core/test_config.py": ("test_ctrl_c_stops_at_once",
                                  "test_crawls_of_a_dead_process"),
    # what a new process imports (three of its tests read the command line in-process)
    "tests/cli/test_startup_imports.py": ("test_an_everyday", "test_version", "test_sources",
                                          "test_rules_check", "test_a_command_leaves",
                                          "test_a_crawl", "test_prices", "test_the_schema",
                                          "test_a_value"),
    # a pseudo-terminal is their subject; what a command says at 80 columns runs in-process
    "tests/cli/test_terminal.py": ("test_an_error", "test_a_usage_error", "test_watch",
                                   "test_prices_gpu_h100", "test_sources_shows",
                                   "test_history_note", "test_run_help",
                                   "test_demo_into_head"),
    "tests/crawler/test_playwright.py": ("test_rendered_page", "test_crawl_without_rendered"),
    "tests/project/test_deploy.py": ("test_image_entrypoint_and_healthcheck_run_the_daemon",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path, _, name = item.nodeid.partition("::")
        if path in PROCESS_TESTS and (PROCESS_TESTS[path] is None
                                      or name.startswith(PROCESS_TESTS[path])):
            item.add_marker(pytest.mark.process)
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
