"""Alembic environment: runs on the engine handed over by storage.db (no alembic.ini needed)."""

import gpuradar.storage.models  # noqa: F401  (registers the tables)
from alembic import context
from sqlmodel import SQLModel

target_metadata = SQLModel.metadata


def run_migrations_online() -> None:
    engine = context.config.attributes["engine"]
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
