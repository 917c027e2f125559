"""A saved file its parser refuses, in `gpuradar parse`: said once, in one line naming the
file (SavedFilesMiddleware logs the failure as part of the outcome, gpuradar.core.logs.
IN_OUTCOME; neither Scrapy's traceback nor the unreadable-response line repeats it).

Data: Vast.ai's recorded answer (gpuradar/recordings/vastai, real offers; its
provenance.json), and a copy of it whose `offers` is not a list (a changed API)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gpuradar.core.logs import IN_OUTCOME
from gpuradar.core.units import EXIT_FAILED
from gpuradar.crawler.parsing import ParseFailed, crawl_files
from gpuradar.storage.db import get_engine
from gpuradar.storage.queries import last_crawls
from tests.clirun import gpuradar
from tests.daemon_helpers import RECORDINGS
from tests.helpers import spider_settings

ANSWER = RECORDINGS / "vastai" / "0001-api-v0-bundles.json"


def refused(tmp_path: Path) -> Path:
    """The recorded answer with `offers` changed from a list to a string."""
    answer = json.loads(ANSWER.read_bytes())
    answer["offers"] = "not a list"
    bad = tmp_path / "bundles.json"
    bad.write_text(json.dumps(answer))
    return bad


def test_parse_says_a_refused_file_once(tmp_path):
    bad = refused(tmp_path)
    proc = gpuradar("parse", "vastai", str(ANSWER), str(bad))
    assert proc.returncode == EXIT_FAILED
    assert proc.stderr.splitlines() == [
        f"error: {bad}: vastai: unexpected response shape: field 'offers' is str, expected "
        f"list (in {bad.resolve().as_uri()})"]
    assert proc.stdout == ""  # a parse that failed prints no half of its items


def test_the_failure_record_is_part_of_the_outcome(tmp_path, caplog):
    """One ERROR record names the file and is marked IN_OUTCOME (shown only at DEBUG: the
    command says it) and still fails the crawl; where the parser stopped is a DEBUG record
    with the traceback."""
    bad = refused(tmp_path)
    caplog.set_level(logging.DEBUG)
    settings = spider_settings("vastai")
    # a store of its own: the crawl is recorded there, whatever the test process ran before
    store = f"sqlite:///{tmp_path / 'store.db'}"
    settings.set("GPURADAR_DATABASE_URL", store)
    with pytest.raises(ParseFailed, match="field 'offers' is str"):
        crawl_files("vastai", [bad], settings)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [(str(bad) in r.getMessage(), getattr(r, IN_OUTCOME, False)) for r in errors] == [
        (True, True)]
    [where] = [r for r in caplog.records if "where the parser stopped" in r.getMessage()]
    assert where.levelno == logging.DEBUG and where.exc_info is not None
    # and the crawl it ended is recorded failed, so it closes none of the source's offers
    [crawl] = last_crawls(get_engine(store)).values()
    assert (crawl["source"], crawl["status"], crawl["items"]) == ("vastai", "failed", 0)
