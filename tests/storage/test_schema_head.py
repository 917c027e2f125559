"""open_database hands a database to Alembic only when its schema is not the newest: the
newest revision is read from the migration files without Alembic, and must be the one
Alembic itself finds; a database at an older revision is still migrated (SQLite and
PostgreSQL), a new one created."""

from __future__ import annotations

import pytest
from sqlalchemy import text


def stored_revision(engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


def test_the_newest_revision_read_from_the_files_is_alembics_head():
    from alembic.script import ScriptDirectory

    from gpuradar.storage.db import alembic_config, head_revision

    script = ScriptDirectory.from_config(alembic_config(None))  # type: ignore[arg-type]
    assert head_revision() == script.get_current_head()
    assert head_revision() is not None


def test_an_older_schema_is_still_migrated(db_url):
    from alembic import command

    from gpuradar.storage import db

    engine = db.get_engine(db_url)
    command.downgrade(db.alembic_config(engine), "0005_crawl_owner")
    assert stored_revision(engine) == ["0005_crawl_owner"]
    assert not db.at_head(engine)
    db.open_database(db_url)
    assert stored_revision(engine) == [db.head_revision()]
    assert db.at_head(engine)


def test_a_new_database_is_created_at_the_newest_schema(tmp_path):
    from gpuradar.storage import db

    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert not db.at_head(db.get_engine(url))  # no alembic_version table at all
    assert stored_revision(db.open_database(url)) == [db.head_revision()]


def test_an_unreachable_database_is_one_line_naming_the_cause():
    from gpuradar.storage.db import DatabaseError, open_database

    # a port nothing listens on: refused at once
    with pytest.raises(DatabaseError, match=r"^database postgresql\+psycopg://postgres@127"
                                            r"\.0\.0\.1:9/gpuradar cannot be reached"):
        open_database("postgresql://postgres@127.0.0.1:9/gpuradar")
