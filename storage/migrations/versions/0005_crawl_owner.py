"""crawl owner: which process runs a crawl (host:pid:start), so a crawl left `running` by a
process that is gone is marked failed, and one still running elsewhere is not

Revision ID: 0005_crawl_owner
Revises: 0004_offers_trust
Create Date: 2026-12-01 10:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005_crawl_owner'
down_revision: str | None = '0004_offers_trust'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("crawl") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crawl") as batch:
        batch.drop_column("owner")
