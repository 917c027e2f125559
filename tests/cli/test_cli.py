"""The command line: parse, demo, sources, history, db upgrade."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpuradar.core.units import money
from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import FIXTURES as FIX
from tests.provider_server import serve_standard


def test_parse_prints_normalised_items_as_json_lines():
    proc = gpuradar("parse", "azure", str(FIX / "azure/prices_page1.json"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    nd = next(r for r in rows if r["instance_type"] == "Standard_ND96isr_H100_v5"
              and r["pricing"] == "on_demand" and r["region"] == "eastus")
    assert nd["gpu"] == "H100-SXM-80GB" and nd["price_per_gpu_usd"] == 12.29
    zero = next(r for r in rows if r["region"] == "westeurope")
    assert zero["dropped"] == "zero_price"
    proc = gpuradar("parse", "vastai", str(FIX / "vastai/bundles_h100_sxm_real.json"))
    assert {json.loads(line)["gpu"] for line in proc.stdout.splitlines()} == {"H100-SXM-80GB"}
    proc = gpuradar("parse", "fx", str(FIX / "fx/eurofxref-daily.xml"))
    cny = next(json.loads(x) for x in proc.stdout.splitlines() if '"CNY"' in x)
    assert cny["per_eur"] == 8.1871 and cny["rate_date"] == "2026-11-27"


def test_parse_reports_a_changed_page(tmp_path):
    bad = tmp_path / "page.json"
    bad.write_text('{"Items": [{"meterName": "x"}]}')
    proc = gpuradar("parse", "azure", str(bad))
    assert proc.returncode == 1
    assert "'armSkuName' is missing" in proc.stderr and str(bad) in proc.stderr


def test_demo_runs_offline_and_shows_cheapest_per_gpu():
    proc = gpuradar("demo")
    assert proc.returncode == 0, proc.stderr
    assert "cheapest on-demand offer per GPU" in proc.stdout
    assert "H100-SXM-80GB" in proc.stdout and "vastai" in proc.stdout


def test_sources_says_what_is_enabled_and_fx_converts(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0}, sources={"vastai": {"enabled": False}})
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["azure"]["enabled"] is True and rows["azure"]["last_status"] is None
    assert rows["vastai"]["enabled"] is False and "disabled" in rows["vastai"]["why"]
    # With no source named, only enabled sources are crawled.
    proc = gpuradar("crawl", "--json", config=cfg, db_url=sqlite_url)
    crawled = {r["source"] for r in json.loads(proc.stdout)}
    assert "vastai" not in crawled and {"azure", "fx"} <= crawled
    rows = {r["source"]: r for r in gpuradar_json("sources", config=cfg, db_url=sqlite_url)}
    assert rows["azure"]["last_status"] == "ok" and rows["azure"]["stale"] is False


def test_history_of_an_offer_and_of_a_gpu(tmp_path, provider_server, sqlite_url):
    cfg = write_config(tmp_path / "c.yaml", endpoints=serve_standard(provider_server),
                       scrapy={"DOWNLOAD_DELAY": 0})
    assert gpuradar("crawl", "azure", config=cfg, db_url=sqlite_url).returncode == 0
    spans = gpuradar_json("history", "azure", "Standard_ND96isr_H100_v5", "--region", "eastus",
                          "--pricing", "on-demand", config=cfg, db_url=sqlite_url)
    assert len(spans) == 1 and spans[0]["price"] == 98.32 and spans[0]["open"] is True
    proc = gpuradar("history", "azure", "Standard_ND96isr_H100_v5", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 2 and "narrow with --region/--pricing" in proc.stderr
    proc = gpuradar("history", "--gpu", "H100", "--days", "1", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0 and "lowest: $4.9160 at azure eastus" in proc.stdout
    # one offer's spans and its price at a time say yes/no/? as `prices` does (Azure
    # publishes no availability: unknown)
    args = ("history", "azure", "Standard_ND96isr_H100_v5", "--region", "eastus",
            "--pricing", "on-demand")
    proc = gpuradar(*args, config=cfg, db_url=sqlite_url)
    assert re.search(r"\$12\.29\s+\?", proc.stdout) and "None" not in proc.stdout
    proc = gpuradar(*args, "--at", spans[0]["valid_from"], config=cfg, db_url=sqlite_url)
    assert proc.returncode == 0 and "available: ?" in proc.stdout, proc.stderr
    for when in ("yesterday", "2d", "2026-08-22", "2026-08-22 18:00"):
        proc = gpuradar(*args, "--at", when, config=cfg, db_url=sqlite_url)
        assert proc.returncode == 1 and "not listed (or not yet known)" in proc.stdout, when
    proc = gpuradar(*args, "--at", "last tuesday", config=cfg, db_url=sqlite_url)
    assert proc.returncode == 2 and "--at: not a time: 'last tuesday'" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- output that fits and reads the same everywhere ----------------------------------------------
REC = Path(__file__).parents[2] / "gpuradar" / "recordings"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A database holding the shipped (real) recordings."""
    url = f"sqlite:///{tmp_path_factory.mktemp('replayed') / 'db.sqlite'}"
    proc = gpuradar("crawl", "gcp", "lambda", "oci", "vastai", "--replay", str(REC),
                    db_url=url)
    assert proc.returncode == 0, proc.stderr
    return url


def test_prices_fit_80_columns_and_never_split_a_number(replayed):
    wide = gpuradar_json("prices", "--limit", "0", db_url=replayed)
    proc = gpuradar("prices", "--limit", "0", db_url=replayed, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # every price per GPU-hour is printed whole on its own row (with its column's decimals)
    shown = {float(x[1:].replace(",", "")) for x in re.findall(r"\$[\d,]+\.\d+", proc.stdout)}
    for offer in wide:
        assert float(money(offer["price_per_gpu_usd"])[1:].replace(",", "")) in shown
    assert "OD = on-demand" in proc.stdout  # abbreviated, and said so
    assert "quoted" not in proc.stdout  # an empty column takes no space


def test_prices_group_the_variants_of_one_product(replayed):
    proc = gpuradar("prices", "--source", "lambda", "--group", "--limit", "0",
                    db_url=replayed, env={"COLUMNS": "200"})
    rows = [line for line in proc.stdout.splitlines() if " lambda " in line]
    ungrouped = gpuradar_json("prices", "--source", "lambda", "--limit", "0", db_url=replayed)
    assert 0 < len(rows) <= len(ungrouped)
    grouped = gpuradar_json("prices", "--source", "lambda", "--group", "--limit", "0",
                            db_url=replayed)
    assert sum(len(g["gpu_counts"]) for g in grouped) == len(ungrouped)


def test_json_has_one_timestamp_form_and_integral_counts(replayed):
    offers = gpuradar_json("prices", db_url=replayed)
    for o in offers:
        for key in ("observed_at", "first_seen", "changed_at"):
            assert ISO.match(o[key]), (key, o[key])
        assert isinstance(o["gpu_count"], int)
    sources = gpuradar_json("sources", db_url=replayed)
    stamps = [v for s in sources for v in s.values()
              if isinstance(v, str) and re.match(r"^\d{4}-\d\d-\d\d[ T]\d", v)]
    assert stamps and all(ISO.match(v) for v in stamps)


def test_suggestions_only_for_near_misses(replayed):
    proc = gpuradar("prices", "--gpu", "B100", db_url=replayed)
    assert proc.returncode == 2 and "unknown GPU 'B100'" in proc.stderr
    assert "did you mean" not in proc.stderr
    proc = gpuradar("prices", "--gpu", "H10O", db_url=replayed)
    assert proc.returncode == 2 and "did you mean H100?" in proc.stderr


def test_nothing_matched_tells_a_filter_from_an_empty_database(replayed, sqlite_url):
    proc = gpuradar("prices", "--gpu", "MI300X", "--source", "lambda", db_url=replayed)
    assert proc.returncode == 0
    assert "no offer matches --gpu MI300X, --source lambda" in proc.stderr
    assert "crawl first" not in proc.stderr
    assert gpuradar("db", "upgrade", db_url=sqlite_url).returncode == 0
    proc = gpuradar("prices", db_url=sqlite_url)
    # which database is empty: a mistyped path, or a shell without GPURADAR_DATABASE_URL
    path = sqlite_url.removeprefix("sqlite:///")
    assert f"no offers stored yet in {path}: crawl first" in proc.stderr


def test_region_alias_mainland_in_prices(replayed):
    # none of the shipped captures runs in mainland China; a glob still matches, and so does
    # a price that holds in every region (region `global`), which mainland never matches
    assert gpuradar_json("prices", "--region", "mainland", db_url=replayed) == []
    assert {o["region"] for o in gpuradar_json("prices", "--region", "U?", db_url=replayed)
            } == {"US", "global"}


def test_help_is_not_wrapped_mid_sentence():
    proc = gpuradar("--help", env={"COLUMNS": "200"})
    assert "evaluate the rules after every crawl, deliver notifications" in proc.stdout
    assert "the hardware that fits, and the offers that provide it" in proc.stdout


def test_db_upgrade(sqlite_url):
    proc = gpuradar("db", "upgrade", db_url=sqlite_url)
    assert proc.returncode == 0 and "is at head" in proc.stdout


def test_version():
    proc = gpuradar("--version")
    assert proc.returncode == 0 and proc.stdout.strip().startswith("gpuradar 0.")


def test_a_crawl_failure_is_said_once_naming_its_source_once(tmp_path, sqlite_url):
    """README: "A failure is said once, in the summary (`-v` also shows Scrapy's log)". An
    unreadable answer was also logged above the table (`ERROR ...middlewares: aws:
    unreadable response ...`), and the table's error cell repeated the source beside the
    source column (`aws  failed ... aws: unreadable response ...`)."""
    rec = tmp_path / "rec"
    shutil.copytree(REC / "aws", rec / "aws")
    advisor = next((rec / "aws").glob("*spot-advisor-data-json.json"))
    advisor.write_text("not json")
    proc = gpuradar("crawl", "aws", "--replay", str(rec), db_url=sqlite_url)
    assert proc.returncode == 1, proc.stderr
    assert "unreadable response" not in proc.stderr, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.split()[:1] == ["aws"])
    assert "unreadable response from https://spot-bid-advisor" in row
    assert row.count("aws:") == 0, row
    last = gpuradar_json("sources", db_url=sqlite_url)
    assert next(s for s in last if s["source"] == "aws")["last_error"].startswith(
        "aws: unreadable response")  # stored as recorded; the table shows it once
    table = gpuradar("sources", "--wide", db_url=sqlite_url).stdout
    assert "aws: unreadable" not in table and "unreadable response from" in table
    verbose = gpuradar("crawl", "aws", "--replay", str(rec), "-v",
                       db_url=f"sqlite:///{tmp_path / 'v.db'}")
    assert "ERROR gpuradar.crawler.middlewares: aws: unreadable response" in verbose.stderr


def test_prices_says_when_the_table_stops_at_the_limit(replayed):
    """`prices` showed its first 50 offers (the default --limit) and said nothing: a user
    could not tell the table from the whole list."""
    every = gpuradar_json("prices", "--limit", "0", db_url=replayed)
    assert len(every) > 3
    proc = gpuradar("prices", "--limit", "3", db_url=replayed)
    assert proc.returncode == 0, proc.stderr
    assert "the 3 cheapest shown: --limit 0 for all" in proc.stdout
    machine = gpuradar("prices", "--limit", "3", "--json", db_url=replayed)
    assert len(json.loads(machine.stdout)) == 3
    assert machine.stderr.strip() == "the 3 cheapest offers only: --limit 0 for all"
    assert gpuradar("prices", "--limit", "0", "--csv", db_url=replayed).stderr == ""
    for whole in (["--limit", "0"], ["--limit", str(len(every))]):
        assert "cheapest shown" not in gpuradar("prices", *whole, db_url=replayed).stdout
    grouped = gpuradar("prices", "--group", "--limit", "2", db_url=replayed).stdout
    assert "the 2 cheapest shown: --limit 0 for all" in grouped


def test_the_history_chart_labels_share_one_number_of_decimals():
    """The price axis read "$10.00" over "$4.5143" over "$0.4001" (`history --gpu H100
    --days 200` on the demo): money()'s 2 decimals above $10, 4 below."""
    from datetime import UTC, datetime, timedelta

    from gpuradar.cli.prices_cmd import chart

    start = datetime(2026, 8, 1, tzinfo=UTC)
    series = [(start + timedelta(days=i), v) for i, v in enumerate([10.0, None, 0.4001])]
    labels = [line.split()[0] for line in chart(series, start + timedelta(days=3))
              if "┤" in line]
    assert labels == ["$10.0000", "$4.5143", "$0.4001"], labels


@pytest.mark.parametrize("days", ["-1", "0", "nan", "1e9", "3661"])
def test_history_refuses_a_period_it_cannot_draw_in_one_line(replayed, days):
    """`--days -1` drew the range backwards ("2026-12-03 to 2026-12-02 (-1 days)", exit 0),
    `--days 1e9` ended in a traceback (OverflowError)."""
    proc = gpuradar("history", "--gpu", "H100", "--days", days, db_url=replayed)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip() == (f"error: --days must be more than 0 and at most 3660, "
                                   f"not {float(days):g}"), proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(("args", "error"), [
    (["-p", "1e300B", "-t", "qlora"],
     "error: model size '1e300B' is too large to compute with"),
    (["-p", "7B", "-t", "finetune", "--tokens", "1e309"],
     "error: tokens '1e309' is too large to compute with")])
def test_recommend_refuses_a_size_too_large_to_compute_in_one_line(replayed, args, error):
    """`recommend -p 1e300B` ended in a traceback (OverflowError in the model shape)."""
    proc = gpuradar("recommend", *args, db_url=replayed)
    assert proc.returncode == 2 and proc.stderr.strip() == error, proc.stderr


def test_parse_of_a_directory_and_upgrade_to_an_unknown_revision_are_one_line(tmp_path,
                                                                              sqlite_url):
    """Both ended in a traceback (IsADirectoryError; alembic's CommandError)."""
    proc = gpuradar("parse", "azure", str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"error: {tmp_path}: a directory; give the saved responses "
                                   f"in it (e.g. {tmp_path}/*.json)"), proc.stderr
    proc = gpuradar("db", "upgrade", "--revision", "nosuch", db_url=sqlite_url)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --revision nosuch: Can't locate revision identified "
                                   "by 'nosuch'"), proc.stderr


@pytest.mark.parametrize("args", [["prices"], ["crawl", "oci"], ["db", "upgrade"]])
def test_a_database_folder_that_cannot_be_made_is_one_line_exit_3(tmp_path, args):
    """A SQLite path under a file (or under /proc, or GPURADAR_DATA_DIR there) ended in a
    FileExistsError / FileNotFoundError traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    url = f"sqlite:///{blocker}/gpuradar.db"
    proc = gpuradar(*args, db_url=url)
    assert proc.returncode == 3, proc.stderr
    if args == ["prices"]:  # a command that only reads: there is no database to read
        assert proc.stderr.strip().startswith(f"error: no database at {blocker}/gpuradar.db "
                                              "(a command that only reads creates none)")
        return
    assert proc.stderr.strip() == (f"error: database {url} cannot be opened: File exists: "
                                   f"{blocker}"), proc.stderr


def test_a_reading_command_on_a_missing_database_says_so_and_creates_nothing(tmp_path):
    """`prices --database-url sqlite:///nonexistent/dir/x.db` made the folders and an empty
    database (so did the quick start's relative sqlite:///demo.db from another folder)."""
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    for args in (["prices"], ["history", "--gpu", "H100"], ["alerts"],
                 ["recommend", "-p", "7B", "-t", "qlora"], ["rules", "test", "H100 under $2/h"]):
        proc = gpuradar(*args, db_url=f"sqlite:///{missing}")
        assert proc.returncode == 3, proc.stderr
        [line] = proc.stderr.strip().splitlines()  # one line, naming the path
        assert line.startswith(f"error: no database at {missing} (a command that only reads "
                               "creates none)"), line
        assert not (tmp_path / "nonexistent").exists(), args
    proc = gpuradar("sources", db_url=f"sqlite:///{missing}")
    assert proc.returncode == 0 and "never" in proc.stdout, proc.stdout
    assert not (tmp_path / "nonexistent").exists()


def test_crawl_record_into_a_path_it_cannot_create_is_refused_before_crawling(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = gpuradar("crawl", "oci", "--record", str(blocker / "rec"),
                    db_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip() == f"error: cannot record into {blocker / 'rec'}: Not a directory"


def test_replay_of_a_file_and_a_bad_log_level_say_what_is_wrong(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("")
    for command in ("crawl", "run"):
        proc = gpuradar(command, "--replay", str(afile), db_url=f"sqlite:///{tmp_path}/d.db")
        assert proc.returncode == 2
        # it said "does not exist" of a file that exists
        assert proc.stderr.strip() == f"error: recording directory {afile} is not a directory"
    proc = gpuradar("run", "--log-level", "nosuch")
    assert proc.returncode == 2 and "Value error" not in proc.stderr  # pydantic's prefix
    assert "'nosuch' is not one of 'debug', 'info', 'warning', 'error'" in proc.stderr


def test_sources_says_what_each_source_cannot_see(tmp_path):
    """Without AWS credentials `sources` says Capacity Blocks need them; the notes say what
    AWS and GCP cannot see, and which machines are not sold on demand."""
    from tests.crawler.test_aws import NO_AWS

    cfg = write_config(tmp_path / "c.yaml")
    rows = {r["source"]: r for r in gpuradar_json(
        "sources", config=cfg, db_url=f"sqlite:///{tmp_path}/s.db",
        env=NO_AWS)}
    assert "(capacity blocks need credentials)" in rows["aws"]["why"]
    assert "Cannot see: capacity blocks without credentials" in rows["aws"]["notes"]
    assert "(p5e, trn2.48xlarge) and the UltraServers are not sold on demand" in rows["aws"][
        "notes"]
    assert "Flex-start and calendar-mode" in rows["gcp"]["notes"]
    assert "A4, A3 Ultra and A3 High 1/2/4g are not sold on demand" in rows["gcp"]["notes"]
    wide = gpuradar("sources", "--wide", config=cfg, db_url=f"sqlite:///{tmp_path}/s.db")
    assert "cannot see" in wide.stdout
