"""crawl replay: what time a crawl's data describes, and whether it came from a recording

Revision ID: 0007_crawl_replay
Revises: 0006_price_index
Create Date: 2026-12-01 16:00:00

* crawl.observed_at -- the moment the crawl's data describes: its start for a live crawl,
  the recording's capture time for a replayed one (NULL in rows written before: started_at).
* crawl.replayed -- answered from a recording (`--replay`, `gpuradar demo`).
* crawl.captured -- the capture date as the recording's provenance states it.
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0007_crawl_replay'
down_revision: str | None = '0006_price_index'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("crawl") as batch:
        batch.add_column(sa.Column("observed_at", sqlmodel.sql.sqltypes.UTCDateTime(),
                                   nullable=True))
        batch.add_column(sa.Column("replayed", sa.Boolean(), nullable=False,
                                   server_default=sa.text("false")))
        batch.add_column(sa.Column("captured", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crawl") as batch:
        batch.drop_column("captured")
        batch.drop_column("replayed")
        batch.drop_column("observed_at")
