"""One schema for the data everywhere (issue #48): the same offer read through
`prices --json`, `/api/v1/offers`, the Python API and the export (JSON Lines and CSV) has
the same field names, types and values, all stated once in storage.dataset.OFFER_SCHEMA."""

from __future__ import annotations

import csv
import dataclasses
import json
from datetime import datetime

import pytest

from gpuradar.core.units import utc_text
from gpuradar.storage.dataset import OFFER_FIELDS
from tests.clirun import gpuradar, gpuradar_json


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("schema") / "demo.db"
    assert gpuradar("demo", "--keep", str(path)).returncode == 0
    return f"sqlite:///{path}"


def plain(value):
    """A Python API value as JSON carries it."""
    if isinstance(value, datetime):
        return utc_text(value)
    return value


def test_the_same_offer_is_the_same_record_on_every_surface(demo, tmp_path):
    import gpuradar as api
    from gpuradar.storage.db import open_database
    from tests.scheduler.test_api import get, served

    cli = {o["id"]: o for o in gpuradar_json("prices", "--all", "--limit", "0", db_url=demo)}
    engine = open_database(demo)
    with served(lambda: engine) as base:
        status, _, body = get(f"{base}/api/v1/offers?all=true&limit=1000")
    assert status == 200
    http = {o["id"]: o for o in json.loads(body)["offers"]}
    python = {o.id: {k: plain(v) for k, v in dataclasses.asdict(o).items()}
              for o in api.open(demo).offers(include_inactive=True)}
    out = tmp_path / "export"
    assert gpuradar("export", str(out), "--format", "csv,jsonl", db_url=demo).returncode == 0
    jsonl = {o["id"]: o for o in map(json.loads, (out / "offers.jsonl").read_text()
                                     .splitlines())}
    with (out / "offers.csv").open(newline="") as f:
        table = {int(r["id"]): r for r in csv.DictReader(f)}
    assert set(cli) == set(http) == set(python) == set(jsonl) == set(table)
    for oid, want in cli.items():
        assert list(want) == list(OFFER_FIELDS)
        for surface in (http[oid], python[oid]):
            assert list(surface) == list(OFFER_FIELDS)
            assert surface == want and [type(v) for v in surface.values()] == [
                type(v) for v in want.values()], oid
        assert jsonl[oid] == want  # JSON Lines: keys sorted, the same values and types
        assert list(table[oid]) == list(OFFER_FIELDS)
        for k, v in want.items():  # CSV: the text of the same value (JSON for attributes)
            if isinstance(v, dict):
                assert json.loads(table[oid][k]) == v
                continue
            text = "" if v is None else ("true" if v else "false") if isinstance(v, bool) \
                else str(v)
            assert table[oid][k] == text, (oid, k)
    # prices --csv writes each offer as the export's CSV does (booleans true/false)
    proc = gpuradar("prices", "--all", "--limit", "0", "--csv", db_url=demo)
    for row in csv.DictReader(proc.stdout.splitlines()):
        exported = table[int(row["id"])]
        assert list(row) == list(OFFER_FIELDS)
        assert {k: v for k, v in row.items() if k != "attributes"} == {
            k: v for k, v in exported.items() if k != "attributes"}
        assert json.loads(row["attributes"]) == json.loads(exported["attributes"])
    # counts are integers, replayed data says so, times one UTC form
    h100 = next(o for o in cli.values() if o["source"] == "lambda" and o["gpu_count"] == 8)
    assert type(h100["gpu_count"]) is int and type(h100["vcpus"]) is int
    assert h100["replayed"] is True and h100["captured"] == "2026-08"
    assert h100["observed_at"] == "2026-08-01T00:00:00Z"


def test_to_pandas_gives_a_frame_of_the_declared_fields(demo):
    """For a notebook: offers, spans, the index and its closes as DataFrames, one column per
    field (also when nothing matches), counts integers, times aware UTC."""
    from datetime import UTC

    import gpuradar as api

    store = api.open(demo)
    offers = store.offers(gpu="H100").to_pandas()
    assert list(offers.columns) == list(OFFER_FIELDS) and len(offers) > 0
    assert str(offers["gpu_count"].dtype) == "int64"
    assert str(offers["observed_at"].dt.tz) == "UTC"
    best = store.offers(gpu="H100")[0]
    spans = store.history(best.id, days=3650).to_pandas()
    assert spans.loc[0, "price"] == pytest.approx(best.price, abs=1e-6)  # micro-dollars
    index = store.index(gpu="H100").to_pandas()
    assert set(index["status"]) <= {"market", "thin"} and "panel" in index.columns
    closes = store.index_closes("H100-SXM-80GB", "on-demand",
                                since=datetime(2026, 8, 21, tzinfo=UTC),
                                until=datetime(2026, 8, 23, tzinfo=UTC)).to_pandas()
    assert list(closes["status"])[0] == "gap" and closes["median"].notna().tolist() == [
        False, True]
    assert list(store.offers(gpu="H100", max_price=0.0001).to_pandas().columns) == list(
        OFFER_FIELDS)
