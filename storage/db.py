"""Engines, connection settings and schema migrations.

SQLite (WAL) is the embedded default; PostgreSQL is selected by URL. The schema is owned by
Alembic: `upgrade()` runs on start and through `gpuradar db upgrade`. A database whose
stored revision is already the newest migration's (the usual start) is not handed to
Alembic at all: importing it (and Mako, Pygments) costs more than a short command's work.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import weakref
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from alembic.config import Config
    from sqlalchemy.engine import Connection
    from sqlalchemy.sql import Select

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
#: Seconds a SQLite connection waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT = 10.0


class DatabaseError(RuntimeError):
    """A database that cannot be used: bad URL, unreachable server, failed migration."""


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable database URL>"


def json_dumps(value) -> str:
    # orjson: JSON columns (offer attributes) are read for every offer of every crawl.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    files = [row[2] for row in cur.execute("PRAGMA database_list") if row[1] == "main"]
    cur.close()
    if files and files[0]:
        writable_sidecars(Path(files[0]))


def writable_sidecars(database: Path) -> None:
    """SQLite creates the `-wal` and `-shm` files with the database file's permissions: a run
    on a read-only (0444) file leaves a 0444 `-shm` behind, and the database stays read-only
    after its owner fixes the file's mode. These files are only ever written (readers need
    write access to `-shm` too), so ours are made writable by their owner at once."""
    for suffix in ("-wal", "-shm"):
        side = database.with_name(database.name + suffix)
        try:
            st = side.stat()
            if st.st_uid == os.geteuid() and not st.st_mode & stat.S_IWUSR:
                side.chmod(stat.S_IMODE(st.st_mode) | stat.S_IWUSR)
        except OSError:  # absent, or not ours to change: nothing to do
            continue




def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL; None for another database, an in-memory one or a
    malformed URL (get_engine says what is wrong with it)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:") \
            or str(parsed.database).startswith("file:"):
        return None
    return Path(parsed.database).expanduser()


def _new_engine(url: str) -> Engine:
    """A new engine for `url`; raises DatabaseError with a one-line reason."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"malformed database URL {url!r}: {exc}") from None
    if parsed.drivername.startswith("postgresql") and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    path = sqlite_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    # SQLite waits this long for another writer's lock (sqlite3's busy timeout); the URL's
    # own `?timeout=SECONDS` (SQLAlchemy passes it to sqlite3.connect) wins.
    connect_args = {"timeout": SQLITE_BUSY_TIMEOUT} if parsed.drivername.startswith(
        "sqlite") and "timeout" not in parsed.query else {}
    try:
        engine = create_engine(parsed, pool_pre_ping=True, json_serializer=json_dumps,
                               json_deserializer=orjson.loads, connect_args=connect_args)
    except Exception as exc:  # unknown driver, missing DBAPI, bad options
        raise DatabaseError(f"cannot use database {redact_url(url)}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    elif engine.dialect.name == "postgresql":
        from gpuradar.storage.models import with_postgresql_options

        with_postgresql_options()  # the partial index's PostgreSQL condition
    return engine


class Engines:
    """The engines of a process, one per URL (a pool is made once and shared by every
    command step, crawl and thread), and the URLs whose schema was found at head (a daemon
    opens its database for every crawl: checked once). `ENGINES` is the process's; a test
    that needs a process's first open (nothing cached) makes its own."""

    def __init__(self) -> None:
        self._by_url: dict[str, Engine] = {}
        self._at_head: set[str] = set()
        self._lock = threading.Lock()

    def get(self, url: str) -> Engine:
        """The engine of `url`, made at its first use; DatabaseError with a one-line reason."""
        with self._lock:
            engine = self._by_url.get(url)
            if engine is None:
                engine = self._by_url[url] = _new_engine(url)
            return engine

    def open(self, url: str) -> Engine:
        """The engine of `url` with the schema at head (see open_database)."""
        engine = self.get(url)
        if url not in self._at_head:
            if not at_head(engine):
                upgrade(engine)
            self._at_head.add(url)
        return engine

    def dispose(self) -> None:
        """Close the pooled connections of every engine, now rather than when the
        interpreter's last garbage collection would (SQLite then checkpoints its WAL and
        removes the -wal and -shm files). The engines stay usable (a new pool)."""
        with self._lock:
            engines = list(self._by_url.values())
        for engine in engines:
            engine.dispose()

    def urls(self) -> set[str]:
        """The URLs an engine was made for."""
        with self._lock:
            return set(self._by_url)

    def forget(self, urls: Iterable[str] | None = None) -> None:
        """Dispose of the engines of `urls` (of every one by default) and forget them and
        what was checked: the next use starts as a new process would. An engine keeps its
        compiled statements until then (a test suite's thousand databases would keep a
        million objects for the garbage collector to walk)."""
        with self._lock:
            named = list(self._by_url) if urls is None else [u for u in urls
                                                             if u in self._by_url]
            gone = [self._by_url.pop(u) for u in named]
            self._at_head.difference_update(named)
        for engine in gone:
            engine.dispose()
            for store in list(_PER_ENGINE):
                store.drop(engine)


#: The engines of this process.
ENGINES = Engines()


_T = TypeVar("_T")


class PerEngine(Generic[_T]):
    """One object per engine, made by `make` at the engine's first use and kept until the
    engine is forgotten (Engines.forget) or gone: what one-off callers (the CLI, tests)
    share for one database, such as the alert Evaluator and Delivery (a daemon makes and
    keeps its own). An object that holds its engine would keep it alive in a weak mapping
    alone: forgetting the engine drops it."""

    def __init__(self, make: Callable[[Engine], _T]) -> None:
        self._make = make
        self._made: weakref.WeakKeyDictionary[Engine, _T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        _PER_ENGINE.add(self)

    def get(self, engine: Engine) -> _T:
        with self._lock:
            found = self._made.get(engine)
            if found is None:
                found = self._made[engine] = self._make(engine)
            return found

    def drop(self, engine: Engine) -> None:
        """Forget the object made for `engine`, if one was."""
        with self._lock:
            self._made.pop(engine, None)


#: Every PerEngine, told when an engine is forgotten.
_PER_ENGINE: weakref.WeakSet[PerEngine[Any]] = weakref.WeakSet()


def get_engine(url: str) -> Engine:
    """One engine per URL and process (`ENGINES`); raises DatabaseError with a one-line
    reason."""
    return ENGINES.get(url)


def dispose_engines() -> None:
    """Close the pooled connections of every engine of this process (Engines.dispose)."""
    ENGINES.dispose()


def dialect_insert(dialect: str, table: Any) -> Any:
    """The INSERT of `dialect` ("postgresql" or "sqlite"), which has ON CONFLICT DO UPDATE.
    Only that dialect's module is imported (PostgreSQL's costs a SQLite command time)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)


def driver_rows(conn: Connection, q: Select[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of `q` as the database driver returns them: plain tuples without
    SQLAlchemy's per-row processing (a large market is read in a third less time), a batch
    at a time (the rows of 100,000 offers never wait in memory all at once: the memory they
    held would stay with the process). No type conversion: Booleans may come as 0/1 and
    times as the driver's (SQLite: text); callers read or normalise such columns."""
    result = conn.execute(q)
    cursor = result.cursor
    assert cursor is not None  # a SELECT's result has one
    try:
        while batch := cursor.fetchmany(2000):
            yield from batch
    finally:
        result.close()


def check_connection(engine: Engine) -> None:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        # the cause in a few words (unreachable, login refused, does not exist) + the driver's
        where = engine.url.render_as_string(hide_password=True)
        raise DatabaseError(database_problem(exc, where) or str(exc)) from None


# Why a database cannot be used, from the driver's message (SQLite, psycopg): the cause an
# operator can act on, in a few words.
_CAUSES = (
    (("readonly database", "read-only", "read only"), "is read-only"),
    (("database is locked", "database table is locked"),
     "is locked by another process (SQLite lets one process write at a time)"),
    (("unable to open database file",), "cannot be opened (missing directory or permissions)"),
    (("password authentication failed", "authentication failed", "no pg_hba.conf entry",
      "role \""), "refused the login"),
    (("permission denied",), "refused the operation"),
    (("does not exist",), "does not exist"),
    (("connection refused", "could not connect", "connection failed", "timeout expired",
      "could not translate host name", "name or service not known", "no route to host",
      "network is unreachable"), "cannot be reached"),
    (("server closed the connection", "terminating connection", "connection is closed",
      "connection already closed", "ssl connection has been closed", "consuming input failed",
      "the connection is lost", "server conn crashed", "connection reset"),
     "went away (the connection was lost)"),
    (("database or disk is full", "no space left"), "is out of disk space"),
)


def database_problem(exc: BaseException, url: str | None = None) -> str | None:
    """One line saying why the database cannot be used, or None when `exc` is not a
    database error: '<url> is read-only (attempt to write a readonly database)'."""
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DatabaseError):
        return str(exc).splitlines()[0] if str(exc) else "database error"
    if not isinstance(exc, SQLAlchemyError) and type(exc).__module__.split(".")[0] not in (
            "sqlite3", "psycopg", "psycopg2"):
        return None
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    detail = " ".join(str(orig).split())[:300] or type(orig).__name__
    where = f"database {redact_url(url)}" if url else "the database"
    lowered = detail.lower()
    for needles, cause in _CAUSES:
        if any(n in lowered for n in needles):
            return f"{where} {cause}: {detail}"
    return f"{where} cannot be used: {detail}"


def check_writable(engine: Engine) -> None:
    """Fail now, with the cause, when this process cannot write (read-only file, another
    writer holding SQLite's lock past busy_timeout) rather than in the middle of a crawl."""
    if engine.dialect.name != "sqlite":
        return  # PostgreSQL: the connection check is the test; permissions are per table
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            # a write SQLite must really do (BEGIN alone passes on a read-only file)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
            conn.exec_driver_sql("ROLLBACK")
    except OperationalError as exc:
        raise DatabaseError(database_problem(exc, engine.url.render_as_string(
            hide_password=True)) or str(exc)) from None


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (applied on start; idempotent)."""
    from alembic import command

    check_connection(engine)
    try:
        command.upgrade(alembic_config(engine), revision)
    except OperationalError as exc:
        raise DatabaseError(f"migration failed: {str(exc.orig or exc).splitlines()[0]}") from None


# `revision: str = '0007_crawl_replay'` and `down_revision: str | None = '0006_...'` in the
# migration files (Alembic's own template)
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]",
                            re.MULTILINE)


@cache
def head_revision() -> str | None:
    """The newest migration's revision, read from the migration files without Alembic: the
    one revision no other names as its down_revision. None when that is not one revision
    (branches, a form this does not read): then Alembic decides, as it always may."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = {m[1]: m[2] for m in _REVISION_LINE.finditer(path.read_text("utf-8"))}
        if "revision" not in found:
            return None
        revisions.add(found["revision"])
        if "down_revision" in found:
            parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def at_head(engine: Engine) -> bool:
    """Whether the database's stored schema revision is the newest migration's, asked with
    one query (no Alembic). False when it is not, or when there is no schema yet; a
    database that cannot be reached is a DatabaseError naming the cause, as in upgrade()."""
    head = head_revision()
    if head is None:
        return False
    try:
        with engine.connect() as conn:
            try:
                stored = conn.execute(text("SELECT version_num FROM alembic_version")
                                      ).scalars().all()
            except SQLAlchemyError:  # no alembic_version table: a new database
                return False
    except OperationalError as exc:
        where = engine.url.render_as_string(hide_password=True)
        raise DatabaseError(database_problem(exc, where) or str(exc)) from None
    return list(stored) == [head]


def open_database(url: str) -> Engine:
    """Engine for `url` with the schema at head: what every command and crawl starts with.
    Checked once per process and URL (a daemon opens its database for every crawl); Alembic
    runs only when the stored revision is not the newest migration's."""
    return ENGINES.open(url)
