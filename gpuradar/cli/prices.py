"""`gpuradar prices` and `gpuradar history`: what offers cost now and over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from gpuradar.cli.common import (
    EXIT_FAILED,
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    app,
    fail,
    get_config,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import Format, age, console, emit, err_console, money


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
