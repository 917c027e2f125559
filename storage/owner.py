"""Which process runs a crawl, so that a crawl left `running` by a process that is gone can
be told from one that is still running.

A crawl records its owner: host name, pid and the process's start time (so a pid reused by
another process does not count as the owner). The rule, applied by every command that
opens the database (and by the daemon at start):

* a `running` crawl owned by a process of THIS host that no longer exists is failed
  (interrupted): it closed nothing;
* a `running` crawl of another host is left alone: it may be running (another `gpuradar
  crawl`, a replica of the daemon on PostgreSQL; the new leader marks its predecessor's
  crawls when it takes over) — unless it started more than STALE_AFTER ago, longer than
  any crawl runs (crawls end at their timeout), or records no owner and started more than
  STALE_AFTER ago.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from functools import cache

from sqlalchemy import Engine, and_, select, update

from gpuradar.core.clock import SYSTEM
from gpuradar.core.outcome import CrawlStatus
from gpuradar.storage.models import CRAWL, CRAWL_NOT_OK

STALE_AFTER = timedelta(days=1)


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            # the command name (field 2) may contain spaces: fields after the last ')'
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@cache
def process_owner() -> str:
    """'host:pid:start' of this process."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or ''}"


def is_alive(owner: str) -> bool | None:
    """Whether the owner process runs: True/False for this host, None for another host."""
    try:
        host, pid_text, ticks = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if ticks and os.path.isdir("/proc/self"):
        return _start_ticks(pid) == ticks
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_dead_crawls(engine: Engine, now: datetime | None = None, *,
                     unowned: bool = False) -> int:
    """Fail the crawls whose process is gone (the rule above); how many were marked.
    `unowned`: also those that record no owner (made before owners were recorded; the
    single daemon at its start knows they are not running)."""
    now = now or SYSTEM.now()
    old = now - STALE_AFTER
    with engine.begin() as conn:
        rows = conn.execute(select(CRAWL.c.id, CRAWL.c.owner, CRAWL.c.started_at)
                            .where(CRAWL.c.status == CrawlStatus.RUNNING, CRAWL_NOT_OK)).all()
        dead = []
        for crawl_id, owner, started in rows:
            started = started if started is None or started.tzinfo else started.replace(
                tzinfo=UTC)
            alive = is_alive(owner) if owner else (False if unowned else None)
            if alive is False and not owner:
                dead.append((crawl_id, "interrupted (process stopped during the crawl)"))
            elif alive is False:
                dead.append((crawl_id, f"interrupted (process {owner.rsplit(':', 1)[0]} is "
                                       "gone; stopped during the crawl)"))
            elif alive is None and started is not None and started < old:
                dead.append((crawl_id, "interrupted (still running after "
                                       f"{STALE_AFTER.days} day; its process is gone)"))
        for crawl_id, error in dead:
            conn.execute(update(CRAWL).where(and_(CRAWL.c.id == crawl_id,
                                                  CRAWL.c.status == CrawlStatus.RUNNING))
                         .values(status=CrawlStatus.FAILED, error=error, finished_at=now))
    return len(dead)


def mark_interrupted(engine: Engine, crawl_ids: list[int], why: str,
                     now: datetime | None = None) -> int:
    """Fail these crawls of this process (Ctrl-C, a database error): they close nothing."""
    if not crawl_ids:
        return 0
    with engine.begin() as conn:
        return conn.execute(update(CRAWL).where(and_(
            CRAWL.c.id.in_(crawl_ids), CRAWL.c.status == CrawlStatus.RUNNING))
            .values(status=CrawlStatus.FAILED, error=f"interrupted ({why})",
                    finished_at=now or SYSTEM.now())).rowcount
