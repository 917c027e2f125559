"""`gpuradar demo`: the shipped recordings crawled into a throwaway database."""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from gpuradar.cli.common import (
    EXIT_FAILED,
    RECORDINGS,
    app,
    get_config,
    get_engine,
)
from gpuradar.cli.crawl import _crawl, _print_results
from gpuradar.cli.output import Format, console, emit
from gpuradar.cli.prices import offer_rows


# -- demo --------------------------------------------------------------------------------
@app.command()
def demo(keep: Annotated[Path | None, typer.Option(help="Keep the demo database here "
                                                   "instead of a temporary file.")] = None,
         verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    """Crawl the shipped recordings into a throwaway SQLite file and show the cheapest offer
    of every GPU: gpuradar offline, in seconds."""
    from gpuradar.storage.queries import current_offers

    workdir = Path(tempfile.mkdtemp(prefix="gpuradar-demo-"))
    db = keep or workdir / "demo.db"
    cfg = get_config(None, f"sqlite:///{db}")
    cfg.endpoints = {}
    try:
        sources_ = sorted(p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists())
        results = _crawl(cfg, sources_, None, RECORDINGS, verbose)
        _print_results(results, Format.table)
        offers = current_offers(get_engine(cfg), None)
        cheapest: dict[str, dict] = {}
        for o in offers:
            if o["price_per_gpu_usd"] is not None and o["available"] is not False:
                cheapest.setdefault(o["gpu"], o)
        rows = offer_rows(sorted(cheapest.values(), key=lambda o: o["price_per_gpu_usd"]),
                          datetime.now(UTC))
        emit(rows, [("gpu", "GPUs"), ("per_gpu", "$/GPU-h"), ("source", "source"),
                    ("region", "region"), ("instance", "instance"), ("pricing", "pricing"),
                    ("original", "quoted")], Format.table,
             title="cheapest offer per GPU (recorded demo data)")
        if keep:
            console.print(f"demo database kept at {keep}: try "
                          f"`gpuradar prices --database-url sqlite:///{keep} --gpu H100`")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(EXIT_FAILED)
