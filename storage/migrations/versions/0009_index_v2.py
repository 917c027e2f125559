"""price index method v2: every point carries its method, parameters, panel and digest

Revision ID: 0009_index_v2
Revises: 0008_crawl_bookkeeping
Create Date: 2026-12-06 05:00:00

Method v2 (docs/index.md) votes one price per provider and publishes a point below the
minimum panel as `thin`. The points written before keep their figures and are marked
method 1; their status says what their provider count was (none: no offers, thin: fewer
than 3 providers, market: 3 or more), so no v1 point from one provider reads as the market.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009_index_v2'
down_revision: str | None = '0008_crawl_bookkeeping'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("method", "status", "params", "panel", "digest", "published", "corrects")


def upgrade() -> None:
    with op.batch_alter_table("price_index") as batch:
        batch.add_column(sa.Column("method", sa.Integer(), nullable=False,
                                   server_default="1"))
        batch.add_column(sa.Column("status", sa.String(length=16), nullable=False,
                                   server_default="market"))
        batch.add_column(sa.Column("params", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("panel", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("digest", sa.String(length=64), nullable=False,
                                   server_default=""))
        batch.add_column(sa.Column("published", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("corrects", sa.BigInteger(), nullable=True))
    op.execute("UPDATE price_index SET status = CASE WHEN offers = 0 THEN 'none' "
               "WHEN providers < 3 THEN 'thin' ELSE 'market' END")


def downgrade() -> None:
    with op.batch_alter_table("price_index") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
