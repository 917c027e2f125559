"""Retention: drop history older than a cutoff without changing what it still answers.

`prune` keeps, for every offer, the change point in force at the cutoff, so the price of
any offer at any time from the cutoff on is what it was before pruning; only the earlier
change points go. The interruption-signal series (interruption_change) is pruned the same
way: each offer's signal in force at the cutoff stays. Crawl records older than the cutoff
go too, except each source's latest crawl and latest successful crawl (the end of every
open span, the failure streak and staleness are read from those). Delivered or failed
notifications older than the cutoff go; pending ones stay whatever their age.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, Table, and_, delete, exists, func, not_, select, text
from sqlalchemy.sql.elements import ColumnElement

from gpuradar.core.outcome import CrawlStatus
from gpuradar.storage.models import CHANGE, CRAWL, CRAWL_FINISHED, OUTBOX, SIGNAL
from gpuradar.storage.queries import newest_crawl_ids

CLOSED_NOTIFICATIONS = ("sent", "failed")


@dataclass
class PruneResult:
    """What `prune` deleted (or, with dry_run, would delete)."""

    cutoff: datetime
    price_changes: int
    crawls: int
    notifications: int
    signal_changes: int = 0
    dry_run: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"cutoff": self.cutoff.isoformat(), "dry_run": self.dry_run,
                "deleted": {"price_change": self.price_changes,
                            "interruption_change": self.signal_changes, "crawl": self.crawls,
                            "notification": self.notifications}}


def _superseded(series: Table, cutoff_ts: int) -> ColumnElement[bool]:
    """A series' change points (price_change, interruption_change: offer_id, at) before the
    cutoff that a later point of the same offer, also at or before the cutoff, replaced:
    everything older than the one in force at the cutoff."""
    later = series.alias("later")
    replaced = exists().where(later.c.offer_id == series.c.offer_id,
                              later.c.at > series.c.at, later.c.at <= cutoff_ts)
    return and_(series.c.at < cutoff_ts, replaced)


def _old_crawls(cutoff: datetime) -> ColumnElement[bool]:
    """Finished crawls started before the cutoff, except each source's latest crawl and
    latest successful crawl."""
    return and_(CRAWL.c.started_at < cutoff, CRAWL_FINISHED,
                not_(CRAWL.c.id.in_(newest_crawl_ids())),
                not_(CRAWL.c.id.in_(newest_crawl_ids(CRAWL.c.status == CrawlStatus.OK))))


def _old_notifications(cutoff: datetime) -> ColumnElement[bool]:
    return and_(OUTBOX.c.created_at < cutoff, OUTBOX.c.status.in_(CLOSED_NOTIFICATIONS))


def prune(engine: Engine, cutoff: datetime, *, dry_run: bool = False) -> PruneResult:
    """Delete history older than `cutoff` (UTC) in one transaction; count what goes."""
    if cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=UTC)
    cutoff_ts = int(cutoff.timestamp())
    parts = ((CHANGE, _superseded(CHANGE, cutoff_ts)), (SIGNAL, _superseded(SIGNAL, cutoff_ts)),
             (CRAWL, _old_crawls(cutoff)), (OUTBOX, _old_notifications(cutoff)))
    counts: list[int] = []
    with engine.begin() as conn:
        for table, where in parts:
            if dry_run:
                n = conn.execute(select(func.count()).select_from(table).where(where))
                counts.append(int(n.scalar_one()))
            else:
                counts.append(int(conn.execute(delete(table).where(where)).rowcount))
    changes, signals, crawls, notifications = counts
    return PruneResult(cutoff, changes, crawls, notifications, signal_changes=signals,
                       dry_run=dry_run)


def vacuum(engine: Engine) -> None:
    """Give the space of deleted rows back: SQLite rewrites the file (needs free disk about
    the size of the database); PostgreSQL marks it reusable and refreshes statistics."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("VACUUM")
        elif engine.dialect.name == "postgresql":
            conn.execute(text("VACUUM (ANALYZE) price_change, interruption_change, crawl, "
                              "notification"))
