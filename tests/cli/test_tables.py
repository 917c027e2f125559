"""Every command's tables at 80 and 120 columns, on the shipped real recordings (issue #35):
no cell holds a cut number, id or unit; identifying columns and prices are never left out;
what is left out is said (`--wide`); a column of numbers has one number of decimals.

The commands run in-process (Typer's CliRunner, COLUMNS set) wherever they do not start a
crawl; each table the renderer makes is recorded with its cells, and every word of every
cell it shows must be found whole in the output."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from gpuradar.cli import app, output
from tests.clirun import gpuradar

WIDTHS = (80, 120)
runner = CliRunner()


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """`demo --keep` (every shipped recording) and `demo --timeline --keep` (alerts)."""
    folder = tmp_path_factory.mktemp("tables")
    snap, timeline = folder / "demo.db", folder / "timeline.db"
    assert gpuradar("demo", "--keep", str(snap)).returncode == 0
    proc = gpuradar("demo", "--timeline", "--pace", "0", "--keep", str(timeline))
    assert proc.returncode == 0, proc.stderr
    return f"sqlite:///{snap}", f"sqlite:///{timeline}"


def run(monkeypatch, width: int, db: str, *args: str):
    """(output, [(cols, cells shown, kept keys)]) of `gpuradar ARGS` at `width` columns."""
    made = []
    real = output.table

    def recording(rows, columns, *a, **kw):
        out = real(rows, columns, *a, **kw)
        cols = [output._col(c) for c in columns]
        shown = {" ".join(str(c.header).split()) for c in out.columns}
        made.append((cols, rows, [c for c in cols if " ".join(c.header.split()) in shown]))
        return out

    monkeypatch.setattr(output, "table", recording)
    monkeypatch.setattr("gpuradar.cli.demo_cmd.table", recording, raising=False)
    result = runner.invoke(app, list(args), env={"COLUMNS": str(width), "GPURADAR_CONFIG": None,
                                                "GPURADAR_DATABASE_URL": db})
    assert result.exit_code in (0, 1), result.output
    return result.stdout, made


def whole(word: str, text: str) -> bool:
    return re.search(rf"(?<!\S){re.escape(word)}(?!\S)", text) is not None


def check(out: str, made: list, width: int) -> None:
    assert made, "no table was rendered"
    for line in out.splitlines():
        assert len(line) <= width, line
    assert "…" not in out
    flat = " ".join(out.split())  # the output's words, one space between them
    words = set(out.split())
    for cols, rows, kept in made:
        for c in cols:
            if c.priority == 0 and any(r.get(c.key) not in (None, "", "-") for r in rows):
                assert c in kept, f"{c.header} left out"
        for c in kept:
            for r in rows:
                value = r.get(c.key)
                if value in (None, ""):
                    continue
                short = output.ABBREVIATE.get(c.key, {}).get(str(value))
                if short and f"{short} = {value}" in out:  # abbreviated, and said so
                    value = short
                if re.search(rf" = {re.escape(str(value))}(;|$)", flat):
                    continue  # shortened in the table, whole in its caption (a UUID)
                prefix = "Standard_"  # Azure's sizes: left out when the table is too wide
                if f"{c.header} names without {prefix}" in flat:
                    value = str(value).removeprefix(prefix)
                for word in str(value).split():
                    number = output._NUMBER.match(word)
                    if number:  # shown with the column's decimals: the same number, whole
                        assert re.search(rf"(?<![\w.$¥€£]){re.escape(number['pre'])}"
                                         rf"{re.escape(number['int'])}(\.\d+)?"
                                         rf"{re.escape(number['post'] or '')}(?!\S)", out), word
                    else:
                        assert word in words or len(word) <= 1, (c.header, word)
        dropped = [c.header for c in cols if c not in kept
                   and any(r.get(c.key) not in (None, "", "-") for r in rows)]
        if dropped:
            assert "--wide" in out and all(h in flat for h in dropped)


COMMANDS = [("prices",), ("prices", "--gpu", "H100"), ("prices", "--limit", "0"),
            # the shipped captures are months old: recommend reads them with --max-age
            ("sources",), ("recommend", "-p", "7B", "-t", "qlora", "--max-age", "1000d"),
            ("recommend", "-p", "70B", "-t", "finetune", "--tokens", "2B", "--max-age", "1000d"),
            ("history", "gcp", "a2-highgpu-1g", "-r", "us-east1"),
            # these were wider than 80 columns (every column kept, long words in prose)
            ("prices", "--index"), ("config", "check")]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_tables_fit_and_cut_nothing(dbs, monkeypatch, width, args):
    out, made = run(monkeypatch, width, dbs[0], *args)
    check(out, made, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_alerts_table_fits_and_cuts_nothing(dbs, monkeypatch, width):
    out, made = run(monkeypatch, width, dbs[1], "alerts", "--all")
    check(out, made, width)
    assert re.search(r"\$1\.3867/GPU-h", out)  # the best price, whole with its unit


@pytest.mark.parametrize("width", WIDTHS)
def test_rules_test_table_fits_and_cuts_nothing(dbs, monkeypatch, width):
    """Its offers table was 87 wide at 80 columns: every column but two kept, and a column
    of numbers as wide as its header ("whole offer /h"), which may wrap instead."""
    out, made = run(monkeypatch, width, dbs[1], "rules", "test", "H100 under $2/h")
    assert "would fire: 4 offers" in out
    check(out, made, width)


def test_a_column_of_numbers_has_one_number_of_decimals(dbs, monkeypatch):
    out, _ = run(monkeypatch, 200, dbs[0], "prices", "--source", "gcp", "--limit", "0")
    # GCP's a2-highgpu-2g and -4g cost $7.3468 and $14.69 an hour: one column, 4 decimals,
    # nothing rounded
    assert "$7.3468" in out and "$14.6900" in out and not re.search(r"\$14\.69(?!\d)", out)


def test_wide_shows_every_column_and_a_narrow_table_says_what_it_left_out(dbs, monkeypatch):
    out, _ = run(monkeypatch, 80, dbs[0], "prices", "--gpu", "H100")
    assert re.search(r"\+\d columns? hidden \(.*mem/GPU.*\): --wide", " ".join(out.split()))
    wide, _ = run(monkeypatch, 80, dbs[0], "prices", "--gpu", "H100", "--wide")
    assert "mem/GPU" in wide and "hidden" not in wide
    assert max(len(line) for line in wide.splitlines()) > 80


def test_sources_keeps_the_freshness_at_80_columns(dbs, monkeypatch):
    """The shipped captures are months old: `sources` rates them STALE (README). At 80
    columns that column was the second to go, and a user saw no freshness at all."""
    out, _ = run(monkeypatch, 80, dbs[0], "sources")
    assert "freshness" in out and "STALE" in out, out


def test_piped_output_is_not_squeezed(dbs):
    """No COLUMNS and no terminal: every column at its full width, whatever the width."""
    proc = gpuradar("prices", "--limit", "0", db_url=dbs[0])
    assert proc.returncode == 0 and "hidden" not in proc.stdout and "…" not in proc.stdout
    assert "1x NVIDIA Quadro RTX 6000 24 GB" in proc.stdout  # one line, whole


@pytest.mark.parametrize("width", WIDTHS)
def test_demo_fits_and_cuts_nothing(dbs, width):
    from gpuradar.storage.db import open_database
    from gpuradar.storage.queries import OfferFilter, cheapest_per_gpu

    proc = gpuradar("demo", env={"COLUMNS": str(width)})
    assert proc.returncode == 0, proc.stderr
    assert all(len(line) <= width for line in proc.stdout.splitlines())
    assert "…" not in proc.stdout
    engine = open_database(dbs[0])
    for o in cheapest_per_gpu(engine, OfferFilter(pricing="on_demand")):
        assert all(whole(w, proc.stdout) for w in o["instance_type"].split()), o
        assert whole(f"{o['gpu_count']:g}x{output._GLUE}{o['gpu']}".replace(output._GLUE, " ")
                     .split()[1], proc.stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_an_offline_crawl_fits_names_every_host_whole_and_ends_with_one_line(tmp_path, width):
    proc = gpuradar("crawl", "aws", "azure", "runpod", db_url=f"sqlite:///{tmp_path}/c.db",
                    env={"COLUMNS": str(width)})
    assert proc.returncode == 1
    out = proc.stdout
    assert all(len(line) <= width for line in out.splitlines()) and "…" not in out
    for host in ("spot-bid-advisor.s3.amazonaws.com", "prices.azure.com", "api.runpod.io"):
        assert host in out  # never split across lines
    assert out.rstrip().splitlines()[-1].startswith("network unreachable: 0 of 3 sources") \
        or "network unreachable: 0 of 3 sources" in " ".join(out.split())
    assert proc.stderr == ""  # the table says it; no log line repeats it


def test_history_suggests_the_spelling_help_documents(dbs, monkeypatch):
    result = runner.invoke(app, ["history", "gcp", "a2-highgpu-1g"],
                           env={"GPURADAR_DATABASE_URL": dbs[0], "COLUMNS": "200"})
    assert result.exit_code == 2
    assert "us-east1 on-demand" in result.output and "on_demand" not in result.output


def test_an_empty_listing_names_only_the_filters_given(dbs, monkeypatch):
    result = runner.invoke(app, ["prices", "--gpu", "H100", "--vendor", "AMD", "--source", ""],
                           env={"GPURADAR_DATABASE_URL": dbs[0]})
    assert "no offer matches --gpu H100, --vendor AMD (other" in result.output
    assert "--region" not in result.output and "--source" not in result.output


def test_the_job_line_has_no_stray_comma(dbs, monkeypatch):
    out, _ = run(monkeypatch, 120, dbs[0], "recommend", "-p", "7B", "-t", "qlora", "--max-age",
                 "1000d")
    assert "Job: 7B, qlora, NF4 weights + bf16 compute, seq 2048" in out
    assert ", (" not in out



def test_prices_watch_refreshes_the_table_in_place(dbs, monkeypatch):
    import gpuradar.cli.prices_cmd as prices_cli

    calls = []
    real = output.watch_output

    def twice(show, interval, rounds=None):
        def counted():
            calls.append(interval)
            show()
        real(counted, interval, rounds=1)

    monkeypatch.setattr(prices_cli, "watch_output", twice)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    result = runner.invoke(app, ["prices", "--gpu", "H100", "--watch", "30"],
                           env={"GPURADAR_DATABASE_URL": dbs[0], "COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert calls == [30, 30]  # the first frame, then one refresh
    assert "148199:1xH100_SXM" in result.stdout and "every 30s, last" in result.stdout
    bad = runner.invoke(app, ["prices", "--watch", "30", "--json"],
                        env={"GPURADAR_DATABASE_URL": dbs[0]})
    assert bad.exit_code == 2 and "--watch refreshes a table" in bad.output


def test_recommend_says_why_nothing_fits_once_in_plain_words(dbs):
    """With the demo's months-old data nothing fits: the reasons were printed twice (a
    "not shown" line, then the warning) and read "16 accelerator is built for inference,
    not training", "7 accelerator qlora needs CUDA or ROCm"."""
    proc = gpuradar("recommend", "-p", "7B", "-t", "qlora", db_url=dbs[0])
    assert proc.returncode == 1
    assert "not shown" not in proc.stdout
    warning = next(line for line in proc.stderr.splitlines() if "no live offer fits" in line)
    assert re.search(r"\d+ on an accelerator built for inference, not training "
                     r"\(--framework\)", warning), warning
    assert re.search(r"\d+ on an accelerator without CUDA or ROCm, which qlora needs", warning)
    assert "accelerator is built" not in warning and "accelerator qlora" not in warning
    shown = gpuradar("recommend", "-p", "7B", "-t", "qlora", "--max-age", "1000d",
                     db_url=dbs[0]).stdout
    line = next(x for x in shown.splitlines() if x.startswith("not shown: "))
    assert " · " in line and re.search(r" · \d+ on an accelerator built for inference", line)
