"""The market as data on the command line: `prices --index` and `export`, on the shipped
real captures (gpuradar/recordings), called in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.clirun import gpuradar

REC = Path(__file__).parents[2] / "gpuradar" / "recordings"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> str:
    """A database holding the shipped (real) recordings, as `gpuradar demo --keep` makes."""
    url = f"sqlite:///{tmp_path_factory.mktemp('replayed') / 'db.sqlite'}"
    proc = gpuradar("crawl", "gcp", "lambda", "oci", "vastai", "--replay", str(REC),
                    db_url=url)
    assert proc.returncode == 0, proc.stderr
    return url


def cli(*args: str, db_url: str):
    from gpuradar.cli import app

    result = CliRunner().invoke(app, [*args, "--database-url", db_url],
                                env={"COLUMNS": "160"})
    return result


def test_prices_index_shows_an_h100_row_per_pricing(replayed):
    result = cli("prices", "--index", "--gpu", "H100", db_url=replayed)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()
            if line.strip().startswith("H100-SXM-80GB")]
    assert sorted(r[1] for r in rows) == ["on-demand", "spot"]
    # the point in force is the latest capture's (vastai, 2026-08-22: 1.3867 and 1.7356);
    # lambda's and OCI's captures are more than 2 days older: one vote, thin
    od = next(r for r in rows if r[1] == "on-demand")
    assert od[2:4] == ["thin", "$1.3867"] and od[6:8] == ["1", "2"]  # 4 decimals


def test_prices_index_json_has_the_figures_and_excluded_offers(replayed):
    result = cli("prices", "--index", "--gpu", "H100", "--pricing", "spot", "--json",
                 db_url=replayed)
    assert result.exit_code == 0, result.output
    (spot,) = json.loads(result.output)
    assert spot["gpu"] == "H100-SXM-80GB" and spot["pricing"] == "spot"
    assert spot["offers"] == 2 and spot["providers"] == 1 and spot["excluded"] == []
    assert spot["p10"] <= spot["median"] <= spot["p90"]


def test_prices_index_says_when_there_is_none(replayed):
    result = cli("prices", "--index", "--gpu", "A10", "--pricing", "spot", db_url=replayed)
    assert result.exit_code == 0
    assert "no index for A10 spot yet" in result.output


def test_prices_index_lists_the_offers_the_screen_excluded(sqlite_url):
    from gpuradar.storage.db import open_database
    from tests.storage.test_index import T0, crawl, item

    engine = open_database(sqlite_url)
    for n, source in enumerate(("aws", "azure", "gcp", "lambda")):
        crawl(engine, source, [item(source, "A", 2.0 + n / 100)], T0)
    crawl(engine, "oci", [item("oci", "FAR", 40.0)], T0)
    result = cli("prices", "--index", db_url=sqlite_url)
    assert result.exit_code == 0, result.output
    assert "excluded from H100-SXM-80GB on-demand: oci offer 5 $40.00/GPU-h (outlier" \
        in result.output


# -- the Python API ----------------------------------------------------------------------
DOCS = Path(__file__).parents[2] / "docs"


def test_python_api_examples_in_the_docs_run(replayed):
    """docs/python-api.md's examples, run as doctests on the shipped captures."""
    import doctest

    path = DOCS / "python-api.md"
    # a code fence ends an example's expected output, as a blank line does
    text = "\n".join("" if line.startswith("```") else line
                     for line in path.read_text().splitlines())
    test = doctest.DocTestParser().get_doctest(text, {"url": replayed}, path.name, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    failures, tried = runner.summarize(verbose=False)
    assert tried >= 10 and failures == 0


def test_python_api_refuses_a_database_behind_the_schema(tmp_path):
    """Reading never migrates: a database at an older schema is refused, unchanged."""
    from alembic import command

    import gpuradar
    from gpuradar.storage.db import DatabaseError, alembic_config, get_engine, upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = get_engine(url)
    upgrade(engine, "0005_crawl_owner")
    with pytest.raises(DatabaseError, match="is at schema 0005_crawl_owner, this gpuradar "
                                            "reads 0010_interruption_series: run `gpuradar db "
                                            "upgrade"):
        gpuradar.open(url)
    command.upgrade(alembic_config(engine), "head")
    assert gpuradar.open(url).offers() == []


def test_python_api_rejects_bad_arguments(replayed):
    import gpuradar
    from gpuradar.storage.dataset import UnknownGpu

    store = gpuradar.open(replayed)
    with pytest.raises(UnknownGpu, match="unknown GPU 'H1OO'"):
        store.offers(gpu="H1OO")
    with pytest.raises(ValueError, match="pricing must be one of on-demand, spot, "
                       "capacity-block, flex-start, calendar, not 'reserved'"):
        store.index(pricing="reserved")
    with pytest.raises(ValueError, match="give offer_id"):
        store.history()


# -- export ------------------------------------------------------------------------------
def test_export_twice_gives_identical_digests_and_verify_passes(replayed, tmp_path):
    for name in ("one", "two"):
        result = cli("export", str(tmp_path / name), db_url=replayed)
        assert result.exit_code == 0, result.output
        assert "exported to" in result.output and "offers 35" in result.output
    one, two = (json.loads((tmp_path / n / "manifest.json").read_text()) for n in ("one", "two"))
    assert [f["sha256"] for f in one["files"]] == [f["sha256"] for f in two["files"]]
    # six tables (offers, price changes, interruption changes, exchange rates, index, crawls)
    # in three formats
    assert len(one["files"]) == 18
    assert {f["table"] for f in one["files"]} >= {"offers", "price_changes",
                                                    "interruption_changes"}
    runner = CliRunner()
    from gpuradar.cli import app

    result = runner.invoke(app, ["export", "--verify", str(tmp_path / "one")])
    assert result.exit_code == 0 and "every file matches manifest.json" in result.output


def test_export_verify_mismatch_is_one_line_and_exit_1(replayed, tmp_path):
    from gpuradar.cli import app

    assert cli("export", str(tmp_path), "--format", "csv", db_url=replayed).exit_code == 0
    with (tmp_path / "crawls.csv").open("a") as f:
        f.write("1,forged\n")
    result = CliRunner().invoke(app, ["export", "--verify", str(tmp_path)])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "crawls.csv: sha256" in line and "does not match the manifest" in line


def test_export_bad_format_is_a_usage_error(replayed, tmp_path):
    result = cli("export", str(tmp_path), "--format", "xlsx", db_url=replayed)
    assert result.exit_code == 2 and "unknown export format 'xlsx'" in result.output


def test_rules_test_reads_an_index_rule_on_the_captures(replayed):
    result = cli("rules", "test", "H100 index under $4/h", db_url=replayed)
    assert result.exit_code == 0, result.output
    assert "read as: the market index (median per GPU-hour) of each H100 model" in result.output
    assert ("would fire: index $0.4001/GPU-h (H100-SXM-80GB spot $0.4001, H100-SXM-80GB "
            "on-demand $1.3867)") in " ".join(
                result.output.split())
