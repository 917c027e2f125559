"""`gpuradar sources`: each source, enabled or not and why, and its last crawls."""


from datetime import datetime
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
    get_sources,
    missing_database,
    pick_format,
)
from gpuradar.cli.output import Col, Format, age, emit
from gpuradar.core.clock import SYSTEM
from gpuradar.core.logs import source_once
from gpuradar.core.units import format_duration


def uncatalogued_cell(names: dict[str, int], limit: int = 3) -> str:
    """'Standard_NC80adis_H100_v5 (2), ... +4 more': what the last crawl could not map."""
    parts = [f"{name} ({n})" for name, n in sorted(names.items())]
    more = f" +{len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def _success_cell(row: dict, now: datetime) -> str:
    """'4m ago', or for a replay 'replayed 4m ago, captured 2026-08-22': when the crawl ran
    and what date its data has."""
    if not row["last_success"]:
        return "never"
    ran = age(row["last_success"], now) + " ago"
    if row["replayed"]:
        return f"replayed {ran}, captured {row['captured'] or 'date unknown'}"
    return ran


def crawled(cfg) -> dict[str, dict]:
    """Each crawled source's row of storage.queries.sources (with its latest crawl's whole
    error and uncatalogued names), by name; none before anything was crawled, and no
    database made for that."""
    if missing_database(cfg) is not None:
        return {}
    from gpuradar.storage.queries import sources as crawled_sources

    return {r["source"]: r for r in crawled_sources(get_engine(cfg, existing=True),
                                                    whole=True)}


def source_rows(setup, crawls: dict[str, dict], now: datetime) -> list[dict]:
    """One row per source in force (every declared one): whether it runs and why, its
    interval, its latest crawl and the freshness of its data, what it reads."""
    from gpuradar.core import providers

    rows = []
    for name, plan in setup.schedule.items():
        enabled, reason = setup.status[name]
        last = crawls.get(name) or {}
        seen = last.get("observed_at")
        # Freshness is the data's age: a replay counts from its recording's capture time.
        stale = seen is None or (now - seen).total_seconds() > 3 * float(plan.interval)
        provider = providers.get(name)
        rows.append({"source": name, "enabled": enabled, "why": reason,
                     "interval_s": plan.interval, "last_status": last.get("status"),
                     "last_items": last.get("offers"), "last_error": last.get("last_error", ""),
                     "uncatalogued": last.get("uncatalogued", {}),
                     "last_success": last.get("last_success"), "observed_at": seen,
                     "replayed": last.get("replayed", False),
                     "captured": last.get("captured"),
                     "stale": stale if enabled else None,
                     "price_source": provider.price_source,
                     "spot_signal": provider.spot_signal, "notes": provider.notes})
    return rows


#: How `sources` names where a source's prices come from (Provider.price_source).
PRICE_SOURCE_CELL = {"api": "API", "list_page": "list page"}


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
            why: Annotated[bool, typer.Option(
                "--why", help="Add why each source is enabled or not, and what a key would "
                "add (always in --json and --csv).")] = False,
            ) -> None:
    """Each source: enabled or not and why, its interval in force, last crawl, staleness."""
    # the configuration as `gpuradar run` reads it; the status from the declarations, so
    # no spider and no Scrapy is loaded
    setup = get_sources(config, database_url)
    if check:
        from gpuradar.cli.check import run_check

        raise typer.Exit(run_check(setup.cfg, pick_format(fmt, as_json, as_csv), verbose))
    now = SYSTEM.now()
    rows = source_rows(setup, crawled(setup.cfg), now)
    table_rows = [{**r, "enabled": "yes" if r["enabled"] else "no",
                   "interval": format_duration(r["interval_s"]),
                   "last_success": _success_cell(r, now),
                   "stale": {True: "STALE", False: "fresh", None: ""}[r["stale"]],
                   "last_error": source_once(r["last_error"], r["source"]),
                   "uncatalogued": uncatalogued_cell(r["uncatalogued"]),
                   "price_source": PRICE_SOURCE_CELL[r["price_source"]],
                   "spot_signal": r["spot_signal"] or "no spot offers"} for r in rows]
    # the prose (a paragraph per source) only on request: on a screen it pushed the state
    # of the crawls (last success, items, interval) out of the table
    columns: list[Col | tuple]
    columns = [("source", "source"), ("enabled", "enabled"), ("interval", "interval", 4),
               ("last_status", "last crawl"), ("last_items", "items", 3),
               Col("last_success", "last success", 2, wrap=True), ("stale", "freshness", 1),
               ("uncatalogued", "uncatalogued", 5), ("price_source", "prices", 6),
               ("last_error", "last error"), ("spot_signal", "spot interruptions", 8),
               ("notes", "reads / cannot see", 7)]
    if why:
        columns.insert(2, ("why", "why"))
    emit(table_rows, columns, pick_format(fmt, as_json, as_csv), raw_rows=rows,
         caption=None if why else "why each is enabled or not, what a key adds: --why")
