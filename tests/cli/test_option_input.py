"""Option values a user can mistype or push to extremes: a usage error (exit 2) naming the
option, no traceback, never a silently wrong answer (a negative limit dropping a row, a zero
deadline meaning none, an 'inf d' plan, a typo'd source matching nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clirun import gpuradar
from tests.storage.test_index import T0, crawl, item


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A store with a live source's offers and one of a source since removed."""
    from gpuradar.storage.db import open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('opts') / 'db.sqlite'}"
    engine = open_database(url)
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.0)], T0)
    crawl(engine, "oldcloud", [item("oldcloud", "O", 1.0)], T0)
    engine.dispose()
    return url


def usage(proc) -> str:
    """The error of a usage mistake: exit 2, no traceback; its text on one line."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    return " ".join(proc.stderr.split())


@pytest.mark.parametrize(("args", "message"), [
    (["prices", "--limit", "-1"], "Invalid value for '--limit': Input should be greater than "
                                  "or equal to 0"),
    (["prices", "--max-price", "-1"], "Invalid value for '--max-price'"),
    (["prices", "--max-price", "nan"], "Invalid value for '--max-price'"),
    (["prices", "--min-gpus", "-3"], "Invalid value for '--min-gpus'"),
    (["prices", "--min-gpu-memory", "inf"], "Invalid value for '--min-gpu-memory': inf is not "
                                            "a finite number"),
    (["prices", "--watch", "1e30"], "Invalid value for '--watch': Input should be less than "
                                    "or equal to 86400"),
    (["prices", "--watch", "inf"], "Invalid value for '--watch'"),
    (["history", "--gpu", "H100", "--days", "-1"], "error: --days must be more than 0 and at "
                                                   "most 3660, not -1"),
    (["history", "--gpu", "H100", "--days", "inf"], "error: --days must be more than 0 and at "
                                                    "most 3660, not inf"),
    (["history", "--gpu", "H100", "--days", "1e30"], "error: --days must be more than 0 and "
                                                     "at most 3660, not 1e+30"),
    (["prices", "--source", "nosuch"], "error: unknown source 'nosuch' (--source); known: "
                                       "alibaba,"),
    (["prices", "--index", "--source", "azure"], "error: --index takes --gpu and --pricing, "
                                                 "not --source"),
    (["prices", "--index", "--max-price", "3"], "error: --index takes --gpu and --pricing, "
                                                "not --max-price"),
    (["prices", "--gpu", ""], "error: --gpu is empty: give a family (H100), a model or a "
                              "kind, or leave it out"),
    (["prices", "--gpu", " "], "error: --gpu is empty"),
    (["history", "--gpu", ""], "error: --gpu is empty"),
    (["alerts", "--limit", "-1"], "Invalid value for '--limit': Input should be greater than "
                                  "or equal to 0"),
])
def test_prices_and_history_refuse(db, args, message):
    assert message in usage(gpuradar(*args, db_url=db))


JOB = ["recommend", "-t", "finetune", "-p", "7B"]


@pytest.mark.parametrize(("args", "message"), [
    (["--tokens", "2B", "--deadline", "0d"], "error: --deadline '0d' must be longer than zero"),
    (["--tokens", "2B", "--deadline", "0"], "error: --deadline '0' must be longer than zero"),
    (["--tokens", "2B", "--deadline", "99999d"], "error: --deadline '99999d': use e.g. 30d or "
     "72h (duration '99999d' is longer than the limit of 3660 days)"),
    (["--max-age", "100000d"], "error: age '100000d': use e.g. 30m, 12h, 2d (duration "
     "'100000d' is longer than the limit of 3660 days)"),
    (["--gpu-hours", "0"], "error: --gpu-hours 0 must be a positive, finite number"),
    (["--gpu-hours", "-1"], "error: --gpu-hours -1 must be a positive, finite number"),
    (["--gpu-hours", "inf"], "error: --gpu-hours inf must be a positive, finite number"),
    (["--tokens", "1e400"], "error: tokens '1e400' is too large to compute with"),
    (["--tokens", "2B", "--checkpoint-every", "0"],
     "error: --checkpoint-every '0' must be longer than zero"),
    (["--tokens", "2B", "--restart-time", "soon"],
     "error: --restart-time 'soon': use e.g. 10m, 30m, 1h"),
])
def test_recommend_refuses(db, args, message):
    assert message in usage(gpuradar(*JOB, *args, db_url=db))


def test_recommend_refuses_a_model_size_past_a_float(db):
    proc = gpuradar("recommend", "-t", "inference", "-p", "1e400", db_url=db)
    assert "error: model size '1e400' is too large to compute with" in usage(proc)


def test_a_removed_source_with_stored_offers_is_still_a_filter(db):
    proc = gpuradar("prices", "--source", "oldcloud", "--json", db_url=db)
    assert proc.returncode == 0, proc.stderr
    assert '"instance_type": "O"' in proc.stdout or '"instance_type":"O"' in proc.stdout


def test_a_known_source_without_offers_still_says_nothing_matches(db):
    proc = gpuradar("prices", "--source", "aws", db_url=db)
    assert proc.returncode == 0
    assert "no offer matches --source aws" in proc.stderr


def test_demo_keep_refuses_a_store_with_live_crawls_and_leaves_it_unchanged(db, tmp_path):
    path = tmp_path / "mine.db"
    path.write_bytes(Path(db.removeprefix("sqlite:///")).read_bytes())
    before = path.read_bytes()
    line = usage(gpuradar("demo", "--keep", str(path)))
    assert line == (f"error: --keep {path} holds 2 live crawl(s): the demo would mix replayed "
                    "prices into that store; give a new file")
    assert path.read_bytes() == before


def test_demo_keep_may_name_an_earlier_demo(tmp_path):
    path = tmp_path / "demo.db"
    for _ in range(2):  # README: `gpuradar demo --keep demo.db`, run again
        proc = gpuradar("demo", "--keep", str(path))
        assert proc.returncode == 0, proc.stderr
        assert "demo database kept; try:" in proc.stdout and str(path) in proc.stdout


def test_a_blank_source_is_not_a_filter(db):
    """As in the API (?source=): --source '' is not given (tests/cli/test_tables.py)."""
    proc = gpuradar("prices", "--source", "", "--json", db_url=db)
    assert proc.returncode == 0, proc.stderr
    assert '"instance_type": "O"' in proc.stdout and '"instance_type": "A"' in proc.stdout
