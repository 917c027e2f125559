"""The tracking commands: crawl, sources, prices, history, parse, db upgrade, demo."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from gpuradar.cli.common import (
    EXIT_DATABASE,
    EXIT_FAILED,
    RECORDINGS,
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    app,
    db_app,
    fail,
    get_config,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import Format, age, console, emit, err_console, money
from gpuradar.core.config import Config, scrapy_settings


# -- crawl -------------------------------------------------------------------------------
def _crawl(cfg: Config, sources: list[str], record: Path | None, replay: Path | None,
           verbose: bool, quiet: bool = False):
    from rich.live import Live
    from rich.text import Text

    from gpuradar.crawler.runner import UnknownSource, resolve_sources, run_once

    settings = scrapy_settings(cfg, GPURADAR_RECORD_DIR=str(record) if record else None,
                               GPURADAR_REPLAY_DIR=str(replay) if replay else None,
                               LOG_LEVEL="INFO" if verbose else "WARNING",
                               # a recording answers at once: no politeness delay needed
                               DOWNLOAD_DELAY=0 if replay else None)
    try:
        names = resolve_sources(sources, settings)
    except UnknownSource as exc:
        raise fail(str(exc)) from None
    if replay:
        missing = [n for n in names if not (replay / n / "index.json").exists()]
        if sources and missing:
            raise fail(f"no recording of {', '.join(missing)} in {replay}")
        names = [n for n in names if n not in missing]
    if not names:
        raise fail("no source to crawl (all disabled?); see `gpuradar sources`")
    get_engine(cfg)  # fail fast, with one line, on a bad database
    counts = dict.fromkeys(names, 0)

    def bump(name: str) -> None:
        counts[name] += 1

    def render() -> Text:
        return Text("crawling " + "  ".join(f"{n}: {c}" for n, c in counts.items()))

    if quiet or not console.is_terminal:
        return run_once(names, settings, on_item=bump)
    with Live(render(), console=err_console, refresh_per_second=4, transient=True) as live:
        def bump_live(name: str) -> None:
            bump(name)
            live.update(render())
        return run_once(names, settings, on_item=bump_live)


def _print_results(results, fmt: Format) -> None:
    rows = []
    for r in results:
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(r.dropped.items())) or "-"
        rows.append({"source": r.source, "status": r.status, "items": r.items,
                     "new": r.new_offers, "changed": r.changed, "closed": r.closed,
                     "dropped": dropped, "unknown_gpus": ", ".join(r.unknown_gpus) or "-",
                     "duration": f"{r.duration_s:.1f}s", "error": r.error or "-"})
    raw = [{k: v for k, v in vars(r).items() if k != "changed_offer_ids"} for r in results]
    emit(rows, [("source", "source"), ("status", "status"), ("items", "items"), ("new", "new"),
                ("changed", "changed"), ("closed", "closed"), ("dropped", "dropped"),
                ("unknown_gpus", "unknown GPUs"), ("duration", "time"), ("error", "error")],
         fmt, title="crawl summary", raw_rows=raw)


@app.command()
def crawl(
    sources: Annotated[list[str] | None, typer.Argument(help="Sources to crawl (default: "
                                                        "every enabled source).")] = None,
    record: Annotated[Path | None, typer.Option(help="Save every response under DIR.")] = None,
    replay: Annotated[Path | None, typer.Option(help="Answer every request from a recording "
                                                "in DIR (no network).")] = None,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log Scrapy at INFO.")] = False,
) -> None:
    """Crawl sources once, store what changed, print a summary per source."""
    if record and replay:
        raise fail("--record and --replay exclude each other")
    if replay and not replay.is_dir():
        raise fail(f"recording directory {replay} does not exist")
    cfg = get_config(config, database_url)
    results = _crawl(cfg, sources or [], record, replay, verbose)
    _print_results(results, pick_format(fmt, as_json, as_csv))
    if any(r.status == "failed" for r in results):
        raise typer.Exit(EXIT_FAILED)


# -- prices ------------------------------------------------------------------------------
def resolve_gpus(query: str | None, engine) -> list[str]:
    """Canonical names for a family ('H100') or an exact name ('H100-SXM-80GB'); a name the
    catalog does not know matches the raw name a source reported, if any did."""
    from gpuradar.core import gpus
    from gpuradar.storage.queries import gpu_names

    if not query:
        return []
    found = [g.name for g in gpus.match_family(query)]
    if found:
        return found
    raw = [n for n in gpu_names(engine) if n.lower() == query.lower()]
    if raw:
        return raw
    hint = gpus.suggest(query)
    raise fail(f"unknown GPU {query!r}" + (f"; did you mean {hint}?" if hint else ""))


def offer_rows(offers: list[dict], now: datetime) -> list[dict]:
    rows = []
    for o in offers:
        avail = {True: "yes", False: "no", None: "?"}[o["available"]]
        if o.get("available_count") is not None:
            avail += f" ({o['available_count']})"
        if not o["active"]:
            avail = "gone"
        count = o["gpu_count"]
        count_text = f"{count:g}"
        extra = o.get("attributes") or {}
        notes = []
        if extra.get("interruption"):
            notes.append(f"interrupt {extra['interruption']}")
        if extra.get("savings_pct") is not None:
            notes.append(f"saves {extra['savings_pct']}%")
        if extra.get("derived"):
            notes.append("derived")
        rows.append({
            "source": o["source"], "region": o["region"] + (f"/{o['zone']}" if o["zone"] else ""),
            "instance": o["instance_type"], "pricing": o["pricing"].replace("_", "-"),
            "gpu": f"{count_text}x {o['gpu']}",
            "per_gpu": money(o["price_per_gpu_usd"]), "instance_usd": money(o["price_usd"]),
            "original": money(o["price"], o["currency"]) if o["currency"] != "USD" else "",
            "available": avail, "age": age(o["observed_at"], now), "notes": ", ".join(notes),
        })
    return rows


@app.command()
def prices(
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="GPU family (H100) or exact "
                                            "model (H100-SXM-80GB).")] = None,
    pricing: Annotated[str | None, typer.Option(help="on-demand or spot.")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", "-s", help="Only these "
                                                     "sources (repeatable).")] = None,
    region: Annotated[list[str] | None, typer.Option("--region", "-r", help="Region glob, "
                                                     "e.g. 'us-*' (repeatable).")] = None,
    max_price: Annotated[float | None, typer.Option(help="Max USD per GPU-hour.")] = None,
    min_gpus: Annotated[float | None, typer.Option(help="Min GPUs per offer.")] = None,
    min_gpu_memory: Annotated[float | None, typer.Option(help="Min GB per GPU.")] = None,
    available: Annotated[bool, typer.Option("--available", help="Hide offers known to be "
                                            "unavailable.")] = False,
    all_offers: Annotated[bool, typer.Option("--all", help="Include offers no longer "
                                             "listed.")] = False,
    limit: Annotated[int, typer.Option(help="Rows to show (0: all).")] = 50,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
) -> None:
    """Current offers, cheapest USD per GPU-hour first."""
    from gpuradar.storage.queries import OfferFilter, current_offers

    if pricing:
        pricing = pricing.replace("-", "_")
        if pricing not in ("on_demand", "spot"):
            raise fail(f"--pricing must be on-demand or spot, not {pricing!r}")
    cfg = get_config(config, database_url)
    engine = get_engine(cfg)
    flt = OfferFilter(gpus=resolve_gpus(gpu, engine), pricing=pricing, sources=source or [],
                      regions=region or [], max_price=max_price, min_gpus=min_gpus,
                      min_gpu_memory=min_gpu_memory, available_only=available,
                      include_inactive=all_offers)
    offers = current_offers(engine, flt, limit=limit or None)
    f = pick_format(fmt, as_json, as_csv)
    if f is Format.table and not offers:
        err_console.print("no offers match (crawl first: `gpuradar crawl`)")
        return
    now = datetime.now(UTC)
    emit(offer_rows(offers, now),
         [("source", "source"), ("region", "region"), ("instance", "instance"),
          ("pricing", "pricing"), ("gpu", "GPUs"), ("per_gpu", "$/GPU-h"),
          ("instance_usd", "$/h"), ("original", "quoted"), ("available", "avail"),
          ("age", "age"), ("notes", "notes")], f, raw_rows=offers)


# -- history -----------------------------------------------------------------------------
def _chart(series: list[tuple[datetime, float | None]], width: int = 60) -> list[str]:
    values = [v for _, v in series if v is not None]
    if not values:
        return ["(no data in this period)"]
    lo, hi = min(values), max(values)
    bars = "▁▂▃▄▅▆▇█"
    line = "".join(" " if v is None else bars[0 if hi == lo else
                                               round((v - lo) / (hi - lo) * (len(bars) - 1))]
                   for _, v in series)
    return [f"{money(hi):>10} ┤", f"{'':>10} │{line}", f"{money(lo):>10} ┤",
            f"{'':>10}  {series[0][0]:%Y-%m-%d %H:%M} … {series[-1][0]:%Y-%m-%d %H:%M} UTC"]


@app.command()
def history(
    source: Annotated[str | None, typer.Argument(help="Source of one offer.")] = None,
    instance_type: Annotated[str | None, typer.Argument(help="Its instance type / id.")] = None,
    region: Annotated[str | None, typer.Option("--region", "-r")] = None,
    pricing: Annotated[str | None, typer.Option(help="on-demand or spot.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="Cheapest price of this GPU "
                                            "over time instead of one offer.")] = None,
    days: Annotated[float, typer.Option(help="How far back (with --gpu).")] = 7.0,
    at: Annotated[datetime | None, typer.Option(help="Price of the offer at this time "
                                                "(UTC).")] = None,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
) -> None:
    """The spans of one offer, or the cheapest price of a GPU over time."""
    from gpuradar.storage import queries

    pricing = pricing.replace("-", "_") if pricing else None
    cfg = get_config(config, database_url)
    engine = get_engine(cfg)
    f = pick_format(fmt, as_json, as_csv)
    if gpu:
        names = resolve_gpus(gpu, engine)
        until = datetime.now(UTC)
        since = until - timedelta(days=days)
        series = queries.cheapest_series(engine, names, since, until, buckets=60, pricing=pricing)
        best = queries.cheapest_over(engine, names, since, until, pricing)
        if f is not Format.table:
            emit([], [], f, raw_rows=[{"from": t, "cheapest_usd_per_gpu_hour": v}
                                      for t, v in series])
            return
        console.print(f"cheapest {gpu} ({pricing or 'any pricing'}) per GPU-hour, last "
                      f"{days:g} days")
        for line in _chart(series):
            console.print(line, highlight=False)
        if best:
            console.print(f"lowest: {money(best['price_per_gpu_usd'])} at {best['source']} "
                          f"{best['region']} {best['instance_type']} ({best['pricing']}) from "
                          f"{best['valid_from']:%Y-%m-%d %H:%M}")
        return
    if not (source and instance_type):
        raise fail("give SOURCE and INSTANCE_TYPE of an offer, or --gpu")
    offers = queries.find_offer(engine, source, instance_type, region, pricing)
    if not offers:
        raise fail(f"no offer {source} {instance_type}" + (f" in {region}" if region else ""))
    if len(offers) > 1:
        choices = ", ".join(sorted({f"{o['region']} {o['pricing']}" for o in offers})[:10])
        raise fail(f"{len(offers)} offers match; narrow with --region/--pricing ({choices})")
    offer = offers[0]
    if at is not None:
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        span = queries.price_at(engine, offer["id"], at)
        if span is None:
            console.print(f"not listed (or not yet known) at {at:%Y-%m-%d %H:%M} UTC")
            raise typer.Exit(EXIT_FAILED)
        console.print(f"{money(span['price'], span['currency'])}/h "
                      f"({money(span['price_per_gpu_usd'])}/GPU-h), available: {span['available']}")
        return
    spans = queries.spans(engine, offer["id"])
    rows = [{"from": f"{s['valid_from']:%Y-%m-%d %H:%M}",
             "to": "now" if s["open"] else f"{s['valid_to']:%Y-%m-%d %H:%M}",
             "price": money(s["price"], s["currency"]), "per_gpu": money(s["price_per_gpu_usd"]),
             "available": s["available"]} for s in spans]
    emit(rows, [("from", "from"), ("to", "to"), ("price", "price/h"), ("per_gpu", "$/GPU-h"),
                ("available", "available")], f,
         title=f"{source} {offer['region']} {instance_type} {offer['pricing']}", raw_rows=spans)


# -- sources -----------------------------------------------------------------------------
@app.command()
def sources(config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
            as_json: JsonOpt = False, as_csv: CsvOpt = False) -> None:
    """Each source: enabled or not and why, last crawl, staleness."""
    from gpuradar.crawler.runner import spider_classes
    from gpuradar.storage.queries import last_crawls, last_success

    cfg = get_config(config, database_url)
    engine = get_engine(cfg)
    settings = scrapy_settings(cfg)
    latest, ok = last_crawls(engine), last_success(engine)
    now = datetime.now(UTC)
    rows = []
    for name, cls in spider_classes(settings).items():
        enabled, why = cls.status(settings)
        last = latest.get(name) or {}
        interval = cfg.source_options(name).get("interval", cls.default_interval)
        success = ok.get(name)
        stale = success is None or (now - success).total_seconds() > 3 * float(interval)
        rows.append({"source": name, "enabled": enabled, "why": why,
                     "interval_s": interval, "last_status": last.get("status"),
                     "last_items": last.get("items"), "last_error": last.get("error") or "",
                     "last_success": success, "stale": stale if enabled else None,
                     "notes": cls.notes})
    table_rows = [{**r, "enabled": "yes" if r["enabled"] else "no",
                   "last_success": age(r["last_success"], now) + " ago" if r["last_success"]
                   else "never", "stale": {True: "STALE", False: "fresh", None: ""}[r["stale"]],
                   "last_error": r["last_error"][:80]} for r in rows]
    emit(table_rows, [("source", "source"), ("enabled", "enabled"), ("why", "why"),
                      ("last_status", "last crawl"), ("last_items", "items"),
                      ("last_success", "last success"), ("stale", "freshness"),
                      ("last_error", "last error")], pick_format(fmt, as_json, as_csv),
         raw_rows=rows)


# -- parse -------------------------------------------------------------------------------
@app.command()
def parse(source: Annotated[str, typer.Argument(help="Source whose parser to run.")],
          files: Annotated[list[Path], typer.Argument(help="Saved responses.")],
          url: Annotated[str | None, typer.Option(help="URL the response came from.")] = None,
          config: ConfigOpt = None) -> None:
    """Run a source's parser on saved responses; print normalised items as JSON lines."""
    from gpuradar.crawler.parsing import ParseFailed, parse_files

    cfg = get_config(config)
    settings = scrapy_settings(cfg)
    try:
        for item in parse_files(source, files, settings, url=url):
            sys.stdout.write(json.dumps(item, default=str, ensure_ascii=False) + "\n")
    except ParseFailed as exc:
        raise fail(str(exc), EXIT_FAILED) from None


# -- db ----------------------------------------------------------------------------------
@db_app.command("upgrade")
def db_upgrade(config: ConfigOpt = None, database_url: DbOpt = None,
               revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Apply the schema migrations (also done on every start)."""
    from gpuradar.storage.db import DatabaseError, redact_url, upgrade
    from gpuradar.storage.db import get_engine as engine_for

    cfg = get_config(config, database_url)
    try:
        upgrade(engine_for(cfg.database_url), revision)
    except DatabaseError as exc:
        raise fail(str(exc), EXIT_DATABASE) from None
    console.print(f"database {redact_url(cfg.database_url)} is at {revision}")


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
