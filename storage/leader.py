"""Who may act on a database: the leader lock on PostgreSQL, the instance lock on SQLite.

PostgreSQL: replicas of `gpuradar run` elect their leader with a session-level advisory lock
(`pg_try_advisory_lock`) held by a connection of its own, outside the engine's pool, so no
other work ever runs on the session that holds it (and the lock cannot be handed to another
pool user by mistake). The lock lives exactly as long as that session: it is released when
the process exits or is killed (the server sees the socket close), and, because the session
tells the server to drop it when it stays silent (`idle_session_timeout`, TCP keepalives),
also when the leader's host or network goes away.

The leader watches its lock session (`LeaderLock.watch`): the server speaks on an idle session
only to end it (`pg_terminate_backend`, `idle_session_timeout`: an ErrorResponse, then EOF),
and a dead network turns the socket into an error; either wakes a thread polling the socket,
which confirms the lock at once, so a lost lock is noticed in milliseconds, not at the next
periodic check.

SQLite has no such thing across processes, and a second daemon on one file would crawl and
notify twice: an exclusive `flock` on `<database>.lock` (holding the owner's pid) keeps it to
one `gpuradar run` per file.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import select
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

# One fixed 64-bit key for every gpuradar database: 3857066447160391644. pg_locks shows it
# as locktype 'advisory', classid 898043263, objid 2182264796, objsubid 1.
LOCK_KEY = int.from_bytes(hashlib.sha256(b"gpuradar").digest()[:8], "big") >> 1
_CLASSID, _OBJID = LOCK_KEY >> 32, LOCK_KEY & 0xFFFFFFFF
# Held, for one transaction, by whoever migrates the schema (storage/migrations/env.py).
MIGRATION_LOCK_KEY = int.from_bytes(hashlib.sha256(b"gpuradar migrate").digest()[:8],
                                    "big") >> 1
APPLICATION_NAME = "gpuradar lock"

# The session holding the lock, by pid and application name ("gpuradar lock <host>:<pid>").
# (Advisory locks are per database: gpuradar databases on one server do not compete.)
HOLDER_SQL = ("SELECT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a "
              "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = "
              f"{_CLASSID} AND l.objid = {_OBJID} AND l.objsubid = 1 AND l.granted AND "
              "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
# The other replicas: every lock session but this one (a standby keeps its own open).
_OTHERS_SQL = ("SELECT application_name FROM pg_stat_activity WHERE application_name LIKE "
               "'gpuradar lock %' AND pid <> pg_backend_pid() AND datname = current_database() "
               "ORDER BY backend_start")
_OWN_SQL = ("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid "
            f"= {_CLASSID} AND objid = {_OBJID} AND objsubid = 1 AND granted AND "
            "pid = pg_backend_pid())")


class LockUnavailable(RuntimeError):
    """The lock's database cannot be reached (or answered with an error): a one-line reason."""


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return first[:300]


class LeaderLock:
    """The leader lock of one replica, on a dedicated PostgreSQL connection.

    `session_timeout`: how long the server keeps a silent session (and so the lock) before
    dropping it; `io_timeout`: how long this side waits for the server before it gives the
    connection up. Methods block: call them from a thread, never from the event loop."""

    def __init__(self, engine: Engine, session_timeout: float, io_timeout: float) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("the leader lock needs PostgreSQL")
        self.session_timeout = session_timeout
        self.name = f"{APPLICATION_NAME} {socket.gethostname()[:30]}:{os.getpid()}"
        io = max(1, round(io_timeout))
        self._engine = create_engine(
            engine.url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
            connect_args={"application_name": self.name, "connect_timeout": max(2, io),
                          # this side notices a dead server or network within io_timeout
                          "keepalives": 1, "keepalives_idle": io, "keepalives_interval": 1,
                          "keepalives_count": 3, "tcp_user_timeout": io * 1000})
        self._conn: Connection | None = None
        self._mutex = threading.Lock()
        self._abandoned = False
        self.held = False

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._engine.connect()
            ms = max(1000, int(self.session_timeout * 1000))
            # the server drops this session (and the lock) once it has been silent for
            # session_timeout: a frozen process or a lost network cannot keep the lock
            for setting, value in (("idle_session_timeout", ms),         # PostgreSQL 14+
                                   ("tcp_keepalives_idle", max(1, ms // 3000)),
                                   ("tcp_keepalives_interval", max(1, ms // 6000)),
                                   ("tcp_keepalives_count", 2),
                                   ("tcp_user_timeout", ms)):
                try:
                    conn.execute(text(f"SET {setting} = {int(value)}"))
                except Exception as exc:  # noqa: BLE001 - an older server lacks a setting
                    log.debug("leader lock: cannot SET %s: %s", setting, _reason(exc))
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        """Close the connection (the server releases the lock with the session)."""
        conn, self._conn, self.held = self._conn, None, False
        if conn is not None:
            try:
                conn.invalidate()  # closes the DBAPI connection; nothing goes back to a pool
                conn.close()
            except Exception as exc:  # noqa: BLE001 - it is gone either way
                log.debug("leader lock: closing the connection: %s", _reason(exc))

    def _query(self, sql: str, reconnect: bool = False, **params: Any) -> Any:
        """One row from the dedicated connection; LockUnavailable (and the connection
        closed) when it fails. `reconnect`: a session the server dropped meanwhile (e.g.
        after idle_session_timeout) is replaced once. A call that answers after `abandon()`
        drops the connection."""
        with self._mutex:
            if self._abandoned:
                raise LockUnavailable("the leader lock was given up")
            for last in ((False, True) if reconnect and self._conn is not None else (True,)):
                try:
                    value = self._connection().execute(text(sql), params).first()
                    break
                except Exception as exc:
                    self._drop()
                    if last:
                        raise LockUnavailable(_reason(exc)) from None
            if self._abandoned:  # answered after the caller stopped waiting
                self._drop()
                raise LockUnavailable("the leader lock was given up")
            return value

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits for it."""
        self.held = bool(self._query("SELECT pg_try_advisory_lock(:key)", reconnect=True,
                                     key=LOCK_KEY)[0])
        return self.held

    def holder(self) -> str | None:
        """Who holds the lock now ('<application name> (backend pid N)'), if anyone."""
        row = self._query(HOLDER_SQL, reconnect=True)
        return f"{row.application_name or 'another session'} (backend pid {row.pid})" \
            if row else None

    def confirm(self) -> None:
        """Raise LockUnavailable unless this session still holds the lock: the connection
        answers and the server lists the lock as granted to this very session."""
        if not self.held:
            raise LockUnavailable("the leader lock is not held")
        if not self._query(_OWN_SQL)[0]:
            with self._mutex:
                self._drop()
            raise LockUnavailable("the server no longer lists the leader lock for this "
                                  "session")

    def others(self) -> list[str]:
        """The lock sessions of the other replicas on this database (their application
        names): who takes over when this one lets go."""
        with self._mutex:
            if self._conn is None or self._abandoned:
                raise LockUnavailable("the leader lock connection is gone")
            try:
                return [r[0] for r in self._conn.execute(text(_OTHERS_SQL))]
            except Exception as exc:
                self._drop()
                raise LockUnavailable(_reason(exc)) from None

    def watch(self, lost: Callable[[str], None]) -> None:
        """Call `lost(reason)` (from a thread of its own) as soon as the server ends the
        session holding the lock or the connection fails; the watch ends with the session."""
        conn = self._conn
        if conn is None:
            raise LockUnavailable("the leader lock connection is gone")
        dbapi = conn.connection.dbapi_connection  # None once the pool invalidated it
        if dbapi is None:
            raise LockUnavailable("the leader lock connection is gone")
        fd = dbapi.fileno()
        threading.Thread(target=self._watch, args=(conn, fd, lost), daemon=True,
                         name="leader-lock-watch").start()

    def _watch(self, conn: Connection, fd: int, lost: Callable[[str], None]) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        while self._conn is conn and not self._abandoned:
            # wake up now and then to see whether the session was replaced meanwhile
            if not poller.poll(1000):
                continue
            # readable: a reply to our own query (it is read under the mutex), or the
            # server speaking unprompted, which it only does to end the session
            with self._mutex:
                if self._conn is not conn or self._abandoned:
                    return
                if not select.select([fd], [], [], 0)[0]:
                    continue  # it was a reply, read meanwhile
            try:
                self.confirm()
            except LockUnavailable as exc:
                lost(str(exc))
                return

    def release(self) -> None:
        """Give the lock up at once (a clean handover) and close the connection."""
        with self._mutex:
            if self.held and self._conn is not None:
                try:
                    self._conn.execute(text("SELECT pg_advisory_unlock(:key)"),
                                       {"key": LOCK_KEY})
                except Exception as exc:  # noqa: BLE001 - closing releases it anyway
                    log.debug("leader lock: unlock: %s", _reason(exc))
            self._drop()

    def abandon(self) -> None:
        """Give the lock up without waiting for a call that may hang on the connection (a
        check that did not answer in time): that call closes the connection when it
        returns or fails (libpq's keepalives and TCP user timeout bound the wait); an idle
        connection is closed now."""
        self._abandoned = True
        self.held = False
        if self._mutex.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._mutex.release()


# -- SQLite ------------------------------------------------------------------------------------
class InstanceLocked(RuntimeError):
    """Another process holds the SQLite database's instance lock."""


class InstanceLock:
    """An exclusive flock on `<database>.lock`, holding the owner's pid, for as long as the
    process lives (the kernel releases it when the process dies, however it dies)."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise InstanceLocked naming the other process's pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+")  # not "w": the owner's pid must survive a failed attempt
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid = f.read().strip() or "unknown"
            f.close()
            raise InstanceLocked(
                f"{self.database} is in use by another `gpuradar run` (pid {pid}); SQLite "
                "allows one daemon per database file: stop that one, or use PostgreSQL to run "
                "replicas") from None
        except OSError as exc:
            f.close()
            raise InstanceLocked(f"cannot lock {self.path}: {exc.strerror or exc}") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        # the file stays: deleting it would let two processes lock two different files
        if self._file is not None:
            self._file.close()
            self._file = None


def sqlite_path(engine: Engine) -> Path | None:
    """The database file of a SQLite engine (None for an in-memory database)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or database in (None, "", ":memory:") or \
            str(database).startswith("file:"):
        return None
    return Path(database).expanduser().resolve()
