"""Alembic environment: runs on the engine handed over by storage.db (no alembic.ini needed).

On PostgreSQL the whole upgrade is one transaction holding an advisory lock: replicas that
start together on a new release migrate one after the other, and the later ones find the
schema already at head instead of colliding on the same tables."""

import logging
from typing import Any, Literal

from alembic import context
from sqlalchemy import text

from gpuradar.storage.leader import MIGRATION_LOCK_KEY
from gpuradar.storage.models import UTCDateTime, metadata

target_metadata = metadata
log = logging.getLogger("gpuradar.storage")


def render_item(kind: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """A new migration names the time columns' type as the earlier ones do
    (sqlmodel.sql.sqltypes.UTCDateTime, the same behaviour as storage.models.UTCDateTime),
    so that it imports nothing from gpuradar; everything else is rendered as Alembic does."""
    if kind == "type" and isinstance(obj, UTCDateTime):
        autogen_context.imports.add("import sqlmodel")
        return "sqlmodel.sql.sqltypes.UTCDateTime()"
    return False


def run_migrations_online() -> None:
    engine = context.config.attributes["engine"]
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            key = {"key": MIGRATION_LOCK_KEY}
            if not connection.execute(text("SELECT pg_try_advisory_xact_lock(:key)"),
                                      key).scalar():
                log.warning("another gpuradar is migrating this database; waiting for it")
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), key)
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            render_item=render_item,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
