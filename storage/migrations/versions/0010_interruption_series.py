"""interruption signals as a series: one change point per change of a spot offer's signal

Revision ID: 0010_interruption_series
Revises: 0009_index_v2
Create Date: 2026-12-06 09:00:00

Until now each offer kept only its current signal (in its attributes). The series starts
with that signal of every listed spot offer that carries a published band, dated at what
its source's last successful crawl observed: it is known to hold from then on, and nothing
is dated earlier than it was seen. The rule that reads a band from the attributes is the
one gpuradar.storage.signals had at this revision, copied here so that the migration does
not change with the code.
"""
from collections.abc import Sequence
from datetime import UTC

import sqlalchemy as sa
import sqlmodel
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
    _seed()


def _seed() -> None:
    """The current signals of listed spot offers, at their source's last observation."""
    conn = op.get_bind()
    utc = sqlmodel.sql.sqltypes.UTCDateTime()
    crawl = sa.table("crawl", sa.column("source"), sa.column("status"),
                     sa.column("started_at", utc), sa.column("observed_at", utc))
    offer = sa.table("offer", sa.column("id"), sa.column("source"), sa.column("pricing"),
                     sa.column("active"), sa.column("attributes", sa.JSON()))
    seen = dict(conn.execute(
        sa.select(crawl.c.source, sa.func.max(sa.func.coalesce(crawl.c.observed_at,
                                                               crawl.c.started_at)))
        .where(crawl.c.status == "ok").group_by(crawl.c.source)).all())
    rows = []
    for oid, source, attrs in conn.execute(
            sa.select(offer.c.id, offer.c.source, offer.c.attributes)
            .where(offer.c.pricing == "spot", offer.c.active == sa.true())):
        band = (attrs or {}).get("interruption")
        at = seen.get(source)
        if not band or at is None:  # unknown is not a value; never seen: no date
            continue
        rate = attrs.get("interruption_rate")
        period = attrs.get("interruption_window")
        as_of = attrs.get("interruption_as_of")
        rows.append({
            "offer_id": oid, "at": int((at if at.tzinfo else at.replace(tzinfo=UTC))
                                       .timestamp()),
            "band": str(band)[:32],
            "rate": float(rate) if isinstance(rate, int | float)
            and not isinstance(rate, bool) else None,
            "period": str(period)[:16] if period else None,
            "source": str(attrs.get("interruption_source") or "AWS Spot Advisor")[:64],
            "as_of": str(as_of)[:10] if as_of else None})
    if rows:
        table = sa.table("interruption_change", *(sa.column(c) for c in rows[0]))
        conn.execute(sa.insert(table), rows)


def downgrade() -> None:
    op.drop_table("interruption_change")
