"""offers trust: uncatalogued products and shrink-guard holds per crawl, unreadable offers

Revision ID: 0004_offers_trust
Revises: 0003
Create Date: 2026-11-30 14:00:00

* crawl.uncatalogued -- raw names (and offer counts) of products a source listed that the
  spider could not map to a GPU model or count: reported, never silently dropped.
* crawl.held -- offers a crawl left open because it listed far fewer offers than the
  source's last successful crawl (closed only when the next crawl confirms the drop).
* offer.unreadable_since -- the offer is listed with a price gpuradar cannot read or
  believe; it stays open with its last good price.
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0004_offers_trust'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('crawl', schema=None) as batch_op:
        batch_op.add_column(sa.Column('uncatalogued', sa.JSON(), nullable=False,
                                      server_default=sa.text("'{}'")))
        batch_op.add_column(sa.Column('held', sa.Integer(), nullable=False,
                                      server_default=sa.text('0')))
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.add_column(sa.Column('unreadable_since', sqlmodel.sql.sqltypes.UTCDateTime(),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_column('unreadable_since')
    with op.batch_alter_table('crawl', schema=None) as batch_op:
        batch_op.drop_column('held')
        batch_op.drop_column('uncatalogued')
