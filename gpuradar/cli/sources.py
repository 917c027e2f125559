"""`gpuradar sources`: each source, enabled or not and why, and its last crawls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from gpuradar.cli.common import (
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    WideOpt,
    app,
    get_engine,
    get_setup,
    pick_format,
)
from gpuradar.cli.output import Format, age, emit
from gpuradar.core.units import format_duration


def uncatalogued_cell(names: dict[str, int], limit: int = 3) -> str:
    """'Standard_NC80adis_H100_v5 (2), ... +4 more': what the last crawl could not map."""
    parts = [f"{name} ({n})" for name, n in sorted(names.items())]
    more = f" +{len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


# -- sources -----------------------------------------------------------------------------
@app.command()
def sources(config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
            as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
            check: Annotated[bool, typer.Option(
                "--check", help="Send one cheap request per enabled source (and credential): "
                "reachable, authenticated, answer understood, not rate-limited? Exit 1 on a "
                "problem.")] = False,
            verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                                  help="With --check: log Scrapy.")] = False,
            ) -> None:
    """Each source: enabled or not and why, its interval in force, last crawl, staleness."""
    from gpuradar.storage.queries import last_crawls, last_success

    setup = get_setup(config, database_url)  # the configuration as `gpuradar run` reads it
    if check:
        from gpuradar.cli.check import run_check

        raise typer.Exit(run_check(setup.cfg, pick_format(fmt, as_json, as_csv), verbose))
    engine = get_engine(setup.cfg)
    latest, ok = last_crawls(engine), last_success(engine)
    now = datetime.now(UTC)
    rows = []
    for name, cls in setup.classes.items():
        enabled, why = setup.status[name]
        last = latest.get(name) or {}
        interval = setup.schedule[name].interval
        success = ok.get(name)
        stale = success is None or (now - success).total_seconds() > 3 * float(interval)
        rows.append({"source": name, "enabled": enabled, "why": why,
                     "interval_s": interval, "last_status": last.get("status"),
                     "last_items": last.get("items"), "last_error": last.get("error") or "",
                     "uncatalogued": last.get("uncatalogued") or {},
                     "last_success": success, "stale": stale if enabled else None,
                     "notes": cls.notes})
    table_rows = [{**r, "enabled": "yes" if r["enabled"] else "no",
                   "interval": format_duration(r["interval_s"]),
                   "last_success": age(r["last_success"], now) + " ago" if r["last_success"]
                   else "never", "stale": {True: "STALE", False: "fresh", None: ""}[r["stale"]],
                   "last_error": r["last_error"],
                   "uncatalogued": uncatalogued_cell(r["uncatalogued"])} for r in rows]
    emit(table_rows, [("source", "source"), ("enabled", "enabled"), ("why", "why"),
                      ("interval", "interval", 4), ("last_status", "last crawl"),
                      ("last_items", "items", 3),
                      ("last_success", "last success", 1), ("stale", "freshness", 2),
                      ("uncatalogued", "uncatalogued", 5), ("last_error", "last error")],
         pick_format(fmt, as_json, as_csv),
         raw_rows=rows)
