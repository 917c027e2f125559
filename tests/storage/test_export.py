"""Reproducible exports, on SQLite and on PostgreSQL: byte-identical twice, a manifest
whose digests `verify` recomputes, and files that read back as the store's data."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuradar.storage import queries
from gpuradar.storage.export import ExportError, export, read_table, verify
from tests.storage.test_index import T0, crawl, item
from tests.storage.test_signal_series import ADVISOR, P5, aws_items, moved, offer_id, signal_rows


def read_parquet(path: Path) -> Any:
    """A Parquet file as pyarrow's table (pyarrow imported here: every worker collects this
    module, and importing pyarrow costs each a quarter of a second)."""
    import pyarrow.parquet as pq

    return pq.read_table(path)


@pytest.fixture
def stored(engine):
    crawl(engine, "azure", [item("azure", "A", 2.0), item("azure", "B", 3.1),
                            item("azure", "S", 0.7, pricing="spot")], T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, "azure", [item("azure", "A", 2.5, at=t1), item("azure", "B", 3.1, at=t1)],
          t1)
    return engine


def test_the_same_database_exports_byte_identical_files(stored, tmp_path):
    one = export(stored, tmp_path / "one")
    two = export(stored, tmp_path / "two")
    assert one == two
    for entry in one["files"]:
        assert (tmp_path / "one" / entry["path"]).read_bytes() == \
            (tmp_path / "two" / entry["path"]).read_bytes()
    assert (tmp_path / "one" / "manifest.json").read_bytes() == \
        (tmp_path / "two" / "manifest.json").read_bytes()


def test_manifest_counts_rows_and_states_schema_and_time_range(stored, tmp_path):
    manifest = export(stored, tmp_path)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    assert manifest["schema_version"] == "0010_interruption_series"
    # three offers; 3 first change points + A's price change + S closed
    assert {t: v["rows"] for t, v in manifest["tables"].items()} == {
        "offers": 3, "price_changes": 5, "interruption_changes": 0, "fx_rates": 0,
        "index": 4, "crawls": 2}
    assert manifest["format_version"] == 4
    assert manifest["time_range"]["from"] == "2026-11-01T12:00:00Z"
    assert {f["path"] for f in manifest["files"]} == {
        f"{t}.{x}" for t in ("offers", "price_changes", "interruption_changes", "fx_rates",
                             "index", "crawls")
        for x in ("parquet", "csv", "jsonl")}


def test_the_interruption_signal_series_is_exported(engine, tmp_path):
    """Each stored change of a spot offer's published band is a row of
    interruption_changes, in every format, as `history --signals` reads it; the export
    stays byte-identical and verifiable."""
    t1 = T0 + timedelta(days=2)
    crawl(engine, "aws", aws_items(ADVISOR, "2025-06-28", T0), T0)
    crawl(engine, "aws", aws_items(moved(0), "2025-07-05", t1), t1)  # p5's band moves
    manifest = export(engine, tmp_path / "one")
    assert manifest == export(engine, tmp_path / "two")
    assert verify(tmp_path / "one") == []
    assert manifest["tables"]["interruption_changes"]["rows"] == signal_rows(engine) > 10

    p5 = offer_id(engine, "aws", *P5)
    stored = [(p["valid_from"], p["band"], p["rate"], p["period"], p["source"], p["as_of"])
              for p in queries.signal_changes(engine, p5)]
    assert [b for _, b, *_ in stored] == [">20%", "<5%"]
    lines = [json.loads(line) for line in (tmp_path / "one" / "interruption_changes.jsonl")
             .open()]
    assert [(r["at"], r["band"], r["as_of"]) for r in lines if r["offer_id"] == p5] == [
        ("2026-11-01T12:00:00Z", ">20%", "2025-06-28"),
        ("2026-11-03T12:00:00Z", "<5%", "2025-07-05")]
    table = read_parquet(tmp_path / "one" / "interruption_changes.parquet").to_pylist()
    with (tmp_path / "one" / "interruption_changes.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(table) == len(rows) == len(lines)
    assert [r["band"] for r in table] == [r["band"] for r in rows] == [r["band"] for r in lines]
    assert [(r["at"], r["band"], r["rate"], r["period"], r["source"], r["as_of"])
            for r in read_table(tmp_path / "one", "interruption_changes")
            if r["offer_id"] == p5] == stored


def test_every_format_holds_the_same_rows(stored, tmp_path):
    export(stored, tmp_path)
    table = read_parquet(tmp_path / "price_changes.parquet").to_pylist()
    with (tmp_path / "price_changes.csv").open() as f:
        rows = list(csv.DictReader(f))
    lines = [json.loads(line) for line in (tmp_path / "price_changes.jsonl").open()]
    assert len(table) == len(rows) == len(lines) == 5
    assert [r["price"] for r in table] == [16.0, 20.0, 24.8, 5.6, None]
    assert [r["price"] for r in rows] == ["16.0", "20.0", "24.8", "5.6", ""]
    assert [r["price"] for r in lines] == [16.0, 20.0, 24.8, 5.6, None]
    assert lines[1]["at"] == "2026-11-01T13:00:00Z"
    # each change with the currency its price is in
    assert [r["currency"] for r in lines] == ["USD"] * 5 and rows[0]["currency"] == "USD"
    index = read_parquet(tmp_path / "index.parquet").to_pylist()
    # one vote (azure's cheapest offer: A), thin below three providers
    assert [(r["pricing"], r["median"], r["offers"], r["status"]) for r in index] == [
        ("on_demand", 2.0, 2, "thin"), ("on_demand", 2.5, 2, "thin"), ("spot", 0.7, 1, "thin"),
        ("spot", None, 0, "none")]
    assert json.loads(index[0]["panel"])[0]["source"] == "azure"


def test_verify_recomputes_the_digests(stored, tmp_path):
    export(stored, tmp_path)
    assert verify(tmp_path) == []
    with (tmp_path / "offers.csv").open("a") as f:
        f.write("tampered\n")
    (tmp_path / "index.parquet").unlink()
    problems = verify(tmp_path)
    assert len(problems) == 2
    assert "offers.csv: sha256" in problems[0] and "does not match the manifest" in problems[0]
    assert problems[1].endswith("index.parquet: missing (listed in manifest.json)")
    assert verify(tmp_path / "nothing") == [
        f"{tmp_path / 'nothing' / 'manifest.json'}: no manifest (not a gpuradar export?)"]


def test_formats_are_chosen_and_checked(stored, tmp_path):
    manifest = export(stored, tmp_path, ["jsonl", "csv"])
    assert {f["format"] for f in manifest["files"]} == {"csv", "jsonl"}
    with pytest.raises(ExportError, match="unknown export format 'xlsx'"):
        export(stored, tmp_path, ["csv", "xlsx"])
