"""`gpuradar.open(url)` and the Store's methods given what a caller can get wrong: a database
that cannot be read is gpuradar.storage.db.DatabaseError (one line, nothing created), a bad
argument is ValueError (TypeError for a wrong type) naming it, on a real SQLite file."""

from __future__ import annotations

import math
import sqlite3
from datetime import timedelta

import pytest

import gpuradar
from gpuradar.storage.db import DatabaseError
from tests.storage.test_index import T0, crawl, item


@pytest.fixture
def store(sqlite_url):
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0)], T0)
    engine.dispose()
    with gpuradar.open(sqlite_url) as opened:
        yield opened


def test_a_missing_file_is_refused_and_not_created(tmp_path):
    path = tmp_path / "nowhere" / "gpuradar.db"
    with pytest.raises(DatabaseError, match=f"no database file at {path} .reading creates "
                                            "none"):
        gpuradar.open(f"sqlite:///{path}")
    assert not path.parent.exists()


def test_a_file_that_is_not_a_database_is_a_database_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("this is not SQLite\n")
    with pytest.raises(DatabaseError, match="cannot be read: .*file is not a database"):
        gpuradar.open(f"sqlite:///{path}")
    assert path.read_text() == "this is not SQLite\n"


def test_a_newer_schema_asks_for_a_newer_gpuradar(sqlite_url):
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0042_from_the_future'")
    with pytest.raises(DatabaseError, match="is at schema 0042_from_the_future, this gpuradar "
                                            "reads .*: a newer gpuradar wrote it; upgrade "
                                            "gpuradar to read it"):
        gpuradar.open(sqlite_url)


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.offers(limit=-1), "limit must be a whole number from 0 to 2147483647, not -1"),
    (lambda s: s.crawls(limit=-5), "limit must be a whole number from 0 to 2147483647, not -5"),
    (lambda s: s.offers(max_price=math.nan), "max_price must be a finite number of at least 0"),
    (lambda s: s.offers(min_gpus=-1), "min_gpus must be a finite number of at least 0"),
    (lambda s: s.history(10**30), "offer_id must be a whole number from 0 to 2147483647"),
    (lambda s: s.history(1, days=1e30), "days 1e\\+30 reaches before the year 1"),
    (lambda s: s.history(1, days=math.inf), "days must be a finite number"),
    (lambda s: s.index_history(days=-1), "days must be a finite number of at least 0"),
    (lambda s: s.index_closes(cadence="week"), "cadence must be hour or day, not 'week'"),
    # '' meant every GPU (no filter) and a NUL reached PostgreSQL as its own error
    (lambda s: s.offers(gpu=""), "gpu must be names, not ''"),
    (lambda s: s.index(gpu="  "), "gpu must be names, not '  '"),
    (lambda s: s.offers(source="azure\x00"), r"source must be names, not 'azure\\x00'"),
    (lambda s: s.offers(region=["us-*", ""]), "region must be names, not ''"),
    (lambda s: s.crawls(source="\x00"), r"source must be names, not '\\x00'"),
])
def test_a_bad_argument_is_a_value_error_naming_it(store, call, message):
    with pytest.raises(ValueError, match=message):
        call(store)


@pytest.mark.parametrize(("call", "message"), [
    # issue 49, finding 12: each was an error that named nothing, or no error at all
    (lambda s: s.offers(min_gpus=10**400), "min_gpus must be a finite number of at least 0, "
                                            "not a whole number of about 401 digits"),
    (lambda s: s.offers(limit=10**400), "limit must be a whole number from 0 to 2147483647"),
    (lambda s: s.history(1, days=10**400), "days must be a finite number of at least 0"),
    (lambda s: s.history(1, since=T0, until=T0 - timedelta(days=1)),
     "since .2026-11-01T12:00:00.00:00. is after until"),
    (lambda s: s.offers(gpu="X" * 1_000_000), "unknown GPU 'XXXX.*'... .1,000,000 characters.: "
                                              "no model name is that long"),
])
def test_a_bad_value_is_a_value_error_naming_it(store, call, message):
    with pytest.raises(ValueError, match=message) as exc:
        call(store)
    assert len(str(exc.value)) < 200


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.offers(gpu=["H100"]), "gpu must be a str, not list"),
    (lambda s: s.offers(gpu=5), "gpu must be a str, not int"),
    (lambda s: s.offers(pricing=5), "pricing must be a str, not int"),
    (lambda s: s.offers(source=5), "source must be a str or a list of str, not int"),
    (lambda s: s.offers(source=b"aws"), "source must be a str or a list of str, not bytes"),
    (lambda s: s.offers(source={"aws": 1}), "source must be a str or a list of str, not dict"),
    (lambda s: s.offers(source=["aws", 5]), "source must be a str, not int"),
    (lambda s: s.crawls(source=["aws"]), "source must be a str, not list"),
])
def test_a_wrong_type_is_a_type_error_naming_it(store, call, message):
    with pytest.raises(TypeError, match=message):
        call(store)


def test_a_naive_time_is_utc_as_everywhere(store):
    naive = T0.replace(tzinfo=None)
    assert store.history(1, since=naive - timedelta(days=1), until=naive + timedelta(days=1)) \
        == store.history(1, since=T0 - timedelta(days=1), until=T0 + timedelta(days=1))


def test_a_time_that_is_not_a_datetime_is_a_type_error(store):
    with pytest.raises(TypeError, match="since must be a datetime, not str"):
        store.history(1, since="2d")


def test_good_arguments_still_answer(store):
    assert [o.instance_type for o in store.offers(limit=1)] == ["A"]
    assert len(store.offers(limit=0)) == 2  # 0: every row, as in the JSON API
    assert store.history(2**31 - 1, since=T0 - timedelta(days=1)) == []


def test_open_without_a_url_and_a_bad_configuration_is_a_config_error(tmp_path, monkeypatch):
    from gpuradar.core.config import ConfigError

    bad = tmp_path / "gpuradar.yaml"
    bad.write_text("database_url: [unclosed\n")
    monkeypatch.setenv("GPURADAR_CONFIG", str(bad))
    with pytest.raises(ConfigError, match="not valid YAML"):
        gpuradar.open()
