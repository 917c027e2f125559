"""price index: the market index per accelerator model and pricing, as change points

Revision ID: 0006_price_index
Revises: 0005_crawl_owner
Create Date: 2026-12-01 16:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006_price_index'
down_revision: str | None = '0005_crawl_owner'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "price_index",
        sa.Column("gpu", sa.String(length=64), nullable=False),
        sa.Column("pricing", sa.String(length=16), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("median_micros", sa.BigInteger(), nullable=True),
        sa.Column("p10_micros", sa.BigInteger(), nullable=True),
        sa.Column("p90_micros", sa.BigInteger(), nullable=True),
        sa.Column("offers", sa.Integer(), nullable=False),
        sa.Column("providers", sa.Integer(), nullable=False),
        sa.Column("excluded", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("gpu", "pricing", "at"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("price_index")
