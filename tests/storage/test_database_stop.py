"""Leftovers of a failed run (issue 38): a crawl stopped for a database error is recorded
failed with that error by the process that stopped it (on SQLite and PostgreSQL), and a run
on a read-only SQLite file leaves no `-shm`/`-wal` the owner cannot write."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
from sqlalchemy import text

from gpuradar.storage.db import get_engine
from tests.clirun import gpuradar, write_config
from tests.provider_server import serve_standard

SQLITE_TRIGGER = ("CREATE TRIGGER refuse_offers BEFORE INSERT ON offer BEGIN "
                  "SELECT RAISE(ABORT, 'offers refused by a test trigger'); END")
PG_TRIGGER = [
    "CREATE FUNCTION refuse_offers() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
    "'offers refused by a test trigger'; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER refuse_offers BEFORE INSERT ON offer FOR EACH ROW EXECUTE FUNCTION "
    "refuse_offers()",
]


def test_a_crawl_stopped_for_a_database_error_is_recorded_by_its_process(
        tmp_path, provider_server, db_url):
    """The database starts refusing the crawl's writes while it runs: the command stops
    with one line (exit 3) and the crawl is already recorded failed with that error, not
    left `running` for a later command to call "process gone"."""
    endpoints = serve_standard(provider_server, ["azure"])
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints,
                       scrapy={"DOWNLOAD_DELAY": 0, "GPURADAR_BATCH_SIZE": 1})
    original = provider_server.routes[("GET", "/api/retail/prices")]
    engine = get_engine(db_url)

    refusing = []

    def refuse_then_answer(req):
        if not refusing:  # the first page: the crawl is recorded and running
            refusing.append(req)
            with engine.begin() as conn:
                for statement in (PG_TRIGGER if engine.dialect.name == "postgresql"
                                  else [SQLITE_TRIGGER]):
                    conn.execute(text(statement))
        return original(req)

    provider_server.route("GET", "/api/retail/prices", refuse_then_answer)
    proc = gpuradar("crawl", "azure", config=cfg, db_url=db_url)
    assert proc.returncode == 3, proc.stderr
    assert "offers refused by a test trigger" in proc.stderr and "Traceback" not in proc.stderr
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, error FROM crawl WHERE source = 'azure'")).all()
    assert len(rows) == 1
    status, error = rows[0]
    assert status == "failed"
    assert error.startswith("interrupted (stopped: database ")
    assert "offers refused by a test trigger" in error


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_read_only_sqlite_file_leaves_no_read_only_shm():
    """As an ordinary user (nobody): a run on a 0444 database fails; once the owner makes the
    file writable again, the next run can write (the -shm left behind was 0444 before)."""
    with tempfile.TemporaryDirectory() as home:  # pytest's tmp_path is root's only
        os.chmod(home, 0o755)
        os.chown(home, 65534, 65534)
        _read_only_then_writable(home)


def _read_only_then_writable(home: str) -> None:
    script = textwrap.dedent(f"""
        import os, sqlite3
        from gpuradar.storage.db import (ENGINES, DatabaseError, check_writable, get_engine,
                                          upgrade)
        url = "sqlite:///{home}/x.db"
        engine = get_engine(url)
        upgrade(engine)
        engine.dispose()
        os.chown("{home}/x.db", 65534, 65534)
        os.setgid(65534)
        os.setuid(65534)
        os.chmod("{home}/x.db", 0o444)
        ENGINES.forget()
        try:
            check_writable(get_engine(url))
        except DatabaseError as exc:
            print("refused:", exc)
        get_engine(url).dispose()
        for name in sorted(os.listdir("{home}")):
            print(name, oct(os.stat(os.path.join("{home}", name)).st_mode & 0o777))
        os.chmod("{home}/x.db", 0o644)
        ENGINES.forget()
        check_writable(get_engine(url))
        print("writable again")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused: database ") and "is read-only" in lines[0]
    assert "x.db-shm 0o644" in lines and "x.db-wal 0o644" in lines
    assert lines[-1] == "writable again"
