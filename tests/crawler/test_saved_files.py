"""`parse` and the demo timeline crawl saved files through the crawl service with the
pipelines of every crawl (issue #46): a source's own price range quarantines a price, and a
second listing of an offer is dropped as a duplicate, counted in the crawl's record, exactly
as `crawl` does. Before, they ran the parser alone: the default range, no duplicate drops.

Data: Vast.ai's recorded answer (gpuradar/recordings/vastai, 4 real offers: 0.400074 spot,
1.386741 on demand, 1.735556 on demand and spot, USD per GPU-hour; its provenance.json)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from gpuradar.crawler.parsing import crawl_files, parse_files
from tests.clirun import gpuradar
from tests.daemon_helpers import RECORDINGS, write_config
from tests.helpers import spider_settings

ANSWER = RECORDINGS / "vastai" / "0001-api-v0-bundles.json"
#: Only the 1.386741 offer lies inside: the other three are implausible for this source.
RANGE = [1.0, 1.5]


def _reasons(records: list[dict]) -> Counter:
    return Counter(r.get("dropped", "kept") for r in records)


def test_parse_applies_the_sources_price_range_and_drops_a_repeated_offer():
    records = list(parse_files("vastai", [ANSWER, ANSWER],
                               spider_settings("vastai", price_range=RANGE)))
    # the answer twice: its offer in range kept once, then dropped as a duplicate
    assert _reasons(records) == {"kept": 1, "implausible_price": 6, "duplicate_offer": 1}
    kept = [r for r in records if "dropped" not in r]
    assert [r["price_per_gpu_usd"] for r in kept] == [1.386741]
    # in the order read: the first answer's four offers, then the second's
    assert [r.get("dropped") for r in records[:4]].count(None) == 1


def _crawl_row(url: str) -> dict:
    with create_engine(url).connect() as conn:
        return dict(conn.execute(text(
            "SELECT status, items, dropped FROM crawl WHERE source = 'vastai'")).mappings().one())


def test_a_staged_crawl_of_saved_files_stores_only_what_the_pipelines_keep(sqlite_url):
    """The demo timeline's path: the same drops, counted in the crawl's record; only the
    offer in range stored."""
    at = datetime(2026, 8, 22, 12, tzinfo=UTC)
    settings = spider_settings("vastai", price_range=RANGE)
    settings.set("GPURADAR_DATABASE_URL", sqlite_url)
    settings.set("GPURADAR_STAGED", {"captured": "2026-08-22", "at": at})
    records, result = crawl_files("vastai", [ANSWER, ANSWER], settings)
    assert _reasons(records) == {"kept": 1, "implausible_price": 6, "duplicate_offer": 1}
    assert result.status == "ok" and result.dropped == {"implausible_price": 6,
                                                       "duplicate_offer": 1}
    row = _crawl_row(sqlite_url)
    assert row["status"] == "ok" and row["items"] == 1
    assert json.loads(row["dropped"]) == {"implausible_price": 6, "duplicate_offer": 1}
    with create_engine(sqlite_url).connect() as conn:
        prices = conn.execute(text("SELECT price FROM offer WHERE source = 'vastai'")).all()
    assert [p for (p,) in prices] == [pytest.approx(1.386741, abs=1e-6)]


def test_parse_drops_what_crawl_drops(tmp_path, sqlite_url):
    """The same configuration, the same recorded answer: `parse` reports the drops that
    `crawl --replay` counts in its record, and keeps what it stores."""
    shutil.copytree(RECORDINGS / "vastai", tmp_path / "rec" / "vastai")
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": sqlite_url, "sources": {"vastai": {"price_range": RANGE}}})
    proc = gpuradar("parse", "vastai", str(ANSWER), config=config)
    assert proc.returncode == 0, proc.stderr
    parsed = [json.loads(line) for line in proc.stdout.splitlines()]
    crawled = gpuradar("crawl", "vastai", "--replay", str(tmp_path / "rec"), "--json",
                       config=config)
    assert crawled.returncode == 0, crawled.stderr
    row = _crawl_row(sqlite_url)
    dropped = _reasons(parsed)
    kept = dropped.pop("kept")
    assert json.loads(row["dropped"]) == dict(dropped) == {"implausible_price": 3}
    assert row["items"] == kept == 1


def test_parse_of_a_file_its_parser_refuses_names_the_file(tmp_path):
    bad: Path = tmp_path / "bundles.json"
    bad.write_text('{"offers": "not a list"}')
    proc = gpuradar("parse", "vastai", str(ANSWER), str(bad))
    assert proc.returncode != 0
    assert str(bad) in proc.stderr and "Traceback" not in proc.stderr
