"""Measure gpuradar: `python -m bench` (quick, < 2 min), `python -m bench --full`, or
`python -m bench --alerting` (rule evaluation at every size, and notification latency).

Prints a table of figures against their targets and writes them to a JSON file so runs can
be compared. Speed is measured here, never in a test."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import alerting, storage

PG_ADMIN = os.environ.get("GPURADAR_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

# Rule evaluation at each size and its targets (bench/alerting.py). Quick mode runs the
# first size, full mode all of them.
EVALUATIONS = alerting.SIZES
QUICK = {"crawl_meters": 20_000, "ingest_offers": 20_000, "growth_offers": 20_000,
         "growth_crawls": 24,
         "evaluations": EVALUATIONS[:1], "daemon_cycles": 20, "daemon_runs": 2}
FULL = {"crawl_meters": 100_000, "ingest_offers": 100_000, "growth_offers": 20_000,
        "growth_crawls": 96,
        "evaluations": EVALUATIONS, "daemon_cycles": 200, "daemon_runs": 5}


class Figures:
    """Rows of (figure, SQLite, PostgreSQL, target, met?)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, figure: str, sqlite: Any, postgres: Any = None, target: str = "",
            met: bool | None = None, unit: str = "") -> None:
        self.rows.append({"figure": figure, "sqlite": sqlite, "postgres": postgres,
                          "unit": unit, "target": target, "met": met})


def fmt(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def run(full: bool, with_pg: bool) -> Figures:
    size = FULL if full else QUICK
    figs = Figures()
    kinds = ["sqlite"] + (["postgres"] if with_pg else [])
    with tempfile.TemporaryDirectory() as tmp:
        ingest: dict[str, dict] = {}
        growth: dict[str, dict] = {}
        for kind in kinds:
            with storage.database(kind, Path(tmp), PG_ADMIN) as engine:
                ingest[kind] = storage.ingest_figures(engine, size["ingest_offers"])
            with storage.database(kind, Path(tmp), PG_ADMIN) as engine:
                growth[kind] = storage.growth_figures(engine, size["growth_offers"],
                                                      size["growth_crawls"])
        pg = ingest.get("postgres", {})
        s = ingest["sqlite"]
        figs.add(f"ingest, unchanged prices ({s['observations']:,} obs/crawl)",
                 s["unchanged_obs_per_s"], pg.get("unchanged_obs_per_s"), ">= 50,000 obs/s",
                 s["unchanged_obs_per_s"] >= 50_000, "obs/s")
        figs.add("  new change rows written by the unchanged crawl", s["unchanged_new_rows"],
                 pg.get("unchanged_new_rows"), "0", s["unchanged_new_rows"] == 0)
        figs.add("ingest, 2 % of prices changed", s["changed_obs_per_s"],
                 pg.get("changed_obs_per_s"), ">= 30,000 obs/s",
                 s["changed_obs_per_s"] >= 30_000, "obs/s")
        g, gp = growth["sqlite"], growth.get("postgres", {})
        figs.add(f"storage growth, 2 % change, {g['offers']:,} offers, {g['crawls']} crawls",
                 g["bytes_per_obs"], gp.get("bytes_per_obs"), "<= 0.5 B/obs (SQLite)",
                 g["bytes_per_obs"] <= 0.5, "B/obs")
        figs.add("  naive one-row-per-observation store, same crawls", g["naive_bytes_per_obs"],
                 gp.get("naive_bytes_per_obs"), "(for the ratio)", None, "B/obs")
        figs.add("  ratio naive / gpuradar", g["naive_bytes_per_obs"] / g["bytes_per_obs"],
                 (gp["naive_bytes_per_obs"] / gp["bytes_per_obs"]) if gp else None, "", None, "x")
        figs.add("  market index series (price_index), same crawls", g["index_bytes_per_obs"],
                 gp.get("index_bytes_per_obs"), "printed", None, "B/obs")
    alerting_figures(figs, size)
    for measure in EXTRA:
        measure(figs, {**size, "with_pg": with_pg})
    from bench.parsing import parse_figures
    from gpuradar.core.config import load_config
    from gpuradar.crawler.crawl_settings import scrapy_settings

    for source, r in parse_figures(scrapy_settings(load_config(None))).items():
        if "error" in r:
            figs.add(f"parse {source}: recording unreadable: {r['error']}", None, None,
                     "printed", False)
            continue
        figs.add(f"parse {source} ({r['items_per_round']:.0f} items in {r['bytes']:,} B)",
                 r["items_per_s"], None, "printed", None, "items/s")
    return figs


def alerting_figures(figs: Figures, size: dict) -> None:
    """Rule evaluation at each size (each in a fresh process), and notification latency."""
    alerting.add_figures(figs, size["evaluations"], PG_ADMIN)


def daemon_figures(figs: Figures, size: dict) -> None:
    """The real daemon in a subprocess, replaying the shipped recordings."""
    from bench.daemon import latency, memory

    with tempfile.TemporaryDirectory() as tmp:
        mem = memory(size["daemon_cycles"], Path(tmp))
        lat = latency(size["daemon_runs"], Path(tmp))
    figs.add(f"daemon RSS over {mem['cycles']} replayed crawl cycles (peak)",
             mem["rss_peak_mb"], None, "<= 150 MB", mem["rss_peak_mb"] <= 150, "MB")
    figs.add(f"  start {mem['rss_start_mb']} MB, end {mem['rss_end_mb']} MB; trend over the "
             "second half", mem["trend_mb_per_100_cycles_second_half"], None, "printed",
             None, "MB/100 cycles")
    figs.add(f"daemon: end of crawl -> webhook received (median of {lat['runs']})",
             lat["median_s"] * 1000, None, "< 2,000 ms", lat["median_s"] < 2, "ms")


def crawl_path_figures(figs: Figures, size: dict) -> None:
    """`gpuradar crawl` end to end against a bare Scrapy spider on the same pages."""
    from bench.crawl import add_figures

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        pg_url = None
        if size.get("with_pg"):
            engine = stack.enter_context(storage.database("postgres", Path(tmp), PG_ADMIN))
            pg_url = engine.url.render_as_string(hide_password=False)
        add_figures(figs, size["crawl_meters"], Path(tmp), pg_url)


#: Start-up targets in ms, per data directory (bench/startup.py): a new database, and the
#: demo data (every shipped recording, as `gpuradar demo` stores it; issue #54).
STARTUP_TARGETS = {"empty": {"gpuradar --version": 250, "gpuradar prices": 600},
                   "demo": {"gpuradar prices": 300, "gpuradar sources": 400}}


def startup_figures(figs: Figures, size: dict) -> None:
    """Wall time of the everyday commands, each a new process (bench/startup.py), beside
    `python -c pass`; CPU time in the label, as it depends far less on the machine's load.
    On a new database, then on the demo data; --full adds each command's instructions on
    the demo data (callgrind: the same count whatever the load)."""
    from bench.startup import PYTHON, instructions, startup_times

    full = all(size.get(k) == v for k, v in FULL.items())
    runs = 15 if full else 5  # --full: 15 runs
    for data, targets in STARTUP_TARGETS.items():
        times = startup_times(runs, data)
        base = times.pop(PYTHON)
        where = "" if data == "empty" else ", demo data"
        for label, t in times.items():
            target = targets.get(label)
            figs.add(f"start-up: {label} (python -c pass: {base['wall_ms']:.0f} ms; CPU "
                     f"{t['cpu_ms']:.0f} ms; median of {runs}{where})", t["wall_ms"],
                     None, f"<= {target} ms" if target else "printed",
                     t["wall_ms"] <= target if target else None, "ms")
    if full:
        counts = instructions("demo", ["gpuradar prices", "gpuradar sources",
                                       "gpuradar rules check"])
        for label, n in counts.items():
            figs.add(f"start-up instructions: {label} (callgrind, demo data)", n / 1e6, None,
                     "printed", None, "M instr")


def serving_figures(figs: Figures, size: dict) -> None:
    """The page and API under load from three servers side by side, and the daemon's
    /metrics meanwhile (bench/serving.py)."""
    from bench.serving import add_figures

    add_figures(figs, size)


EXTRA: list[Callable[[Figures, dict], None]] = [crawl_path_figures, daemon_figures,
                                                startup_figures, serving_figures]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--full", action="store_true", help="the sizes of the targets")
    ap.add_argument("--no-postgres", action="store_true", help="SQLite only")
    ap.add_argument("--alerting", action="store_true",
                    help="only the alerting figures, at every size (about 3 minutes)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/latest.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.alerting:
        figs = Figures()
        alerting_figures(figs, FULL)
    else:
        figs = run(args.full, not args.no_postgres)
    mode = "alerting" if args.alerting else "full" if args.full else "quick"
    table = Table(title=f"gpuradar benchmark ({mode}) — {machine()}")
    for col in ("figure", "SQLite", "PostgreSQL", "target", "met"):
        table.add_column(col)
    for r in figs.rows:
        met = {True: "yes", False: "MISSED", None: ""}[r["met"]]
        table.add_row(r["figure"], fmt(r["sqlite"], r["unit"]), fmt(r["postgres"], r["unit"]),
                      r["target"], met)
    Console(width=140).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"when": datetime.now(UTC).isoformat(), "machine": machine(),
                                    "full": args.full, "mode": mode,
                                    "seconds": time.perf_counter() - t0,
                                    "figures": figs.rows}, indent=1))
    print(f"written to {args.out} in {time.perf_counter() - t0:.0f}s")
    return 0 if all(r["met"] is not False for r in figs.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
