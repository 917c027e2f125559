"""interruption signals as a series: one change point per change of a spot offer's signal

Revision ID: 0010_interruption_series
Revises: 0009_index_v2
Create Date: 2026-12-06 09:00:00

Until now each offer kept only its current signal (in its attributes). The table starts
empty: the current signals of stored offers are written at their next crawl, dated then
(nothing is back-dated that was not observed).
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010_interruption_series'
down_revision: str | None = '0009_index_v2'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "interruption_change",
        sa.Column("offer_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("band", sa.String(length=32), nullable=False),
        sa.Column("rate", sa.Float(), nullable=True),
        sa.Column("period", sa.String(length=16), nullable=True),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("as_of", sa.String(length=10), nullable=True),
        sa.ForeignKeyConstraint(["offer_id"], ["offer.id"]),
        sa.PrimaryKeyConstraint("offer_id", "at"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("interruption_change")
