"""Shared fixtures: a real SQLite file and a real PostgreSQL database per test.

PostgreSQL runs on 127.0.0.1:5432 (user postgres). Where it is absent the PostgreSQL
variants are skipped, except when GPURADAR_REQUIRE_POSTGRES=1 (set by .ci/run): then they
fail, so CI never silently skips them."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

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


def _pg_database(request, pg_template):
    name = f"gpuradar_test_{uuid.uuid4().hex[:10]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
        # A test's commits need not wait for the disk (4 ms each here, 0.25 ms without):
        # what they assert on is what other connections and processes see, which is the same.
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    url = pg_url(name)

    def drop() -> None:
        from gpuradar.storage.db import get_engine

        get_engine(url).dispose()
        with _pg_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    request.addfinalizer(drop)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path, sqlite_template) -> str:
    """A fresh, migrated database: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        path = tmp_path / "gpuradar.db"
        shutil.copy(sqlite_template, path)
        return f"sqlite:///{path}"
    return _pg_database(request, request.getfixturevalue("pg_template"))


@pytest.fixture
def sqlite_url(tmp_path, sqlite_template) -> str:
    path = tmp_path / "gpuradar.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def engine(db_url):
    from gpuradar.storage.db import open_database

    return open_database(db_url)


@pytest.fixture
def provider_server():
    from tests.provider_server import ProviderServer

    with ProviderServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _warnings_as_in_a_fresh_process():
    """Each test is a new process for the once-per-process warnings (uncatalogued products,
    unknown GPU names): a test that expects a warning must not depend on test order."""
    from gpuradar.crawler.spiders import base

    base._warned_in_process.clear()
