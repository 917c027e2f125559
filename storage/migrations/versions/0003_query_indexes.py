"""query indexes: what the per-scrape and per-evaluation reads need on a big database

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 16:30:00

Checked with EXPLAIN on PostgreSQL with a million change points (tests/storage/test_query_plans.py):

* ix_offer_cheapest -- "current cheapest per GPU" (storage.queries.cheapest_per_gpu, read at
  every Prometheus scrape) becomes an index-only scan already grouped by (gpu, pricing,
  source) instead of a scan of the wide offer rows (attributes JSON, URLs).
* ix_offer_counts -- the offers gauge (storage.queries.offer_counts), index-only likewise.
* ix_crawl_source_id -- the latest crawl per source and the failure streak of one source
  (last_crawls, crawl_versions, consecutive_failures): index-only, newest first.
* ix_crawl_status_source -- crawls by outcome per source (last_success, source_health):
  the failed/partial crawls since the last success are an index range.

"History of an offer" needs no new index: price_change's primary key (offer_id, at) is it.
Every column is a key column (no INCLUDE) so that SQLite gets the same covering indexes.
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ("ix_offer_cheapest", "offer", ["active", "gpu", "pricing", "source", "price_per_gpu_usd", "available"]),
    ("ix_offer_counts", "offer", ["active", "source", "pricing", "available"]),
    ("ix_crawl_source_id", "crawl", ["source", "id", "status"]),
    ("ix_crawl_status_source", "crawl", ["status", "source", "started_at", "id"]),
)


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for name, table, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
