"""`gpuradar prices` and `gpuradar history`: what offers cost now and over time."""


import re
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer

from gpuradar.cli.common import (
    EXIT_FAILED,
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    WideOpt,
    app,
    complete_gpu,
    complete_pricing,
    complete_source,
    fail,
    finite,
    get_database,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import (
    Col,
    Format,
    age,
    console,
    emit,
    err_console,
    money,
    same_decimals,
    watch_output,
)
from gpuradar.core.clock import SYSTEM
from gpuradar.core.pricing import CHOICES as PRICING_CHOICES
from gpuradar.core.pricing import describe_terms, parse_pricing
from gpuradar.core.spot import offer_signal

WATCH_MAX = 86_400  # --watch: at most a day between refreshes (time.sleep overflows far past)


# -- prices ------------------------------------------------------------------------------
def resolve_gpus(query: str | None, engine) -> list[str]:
    """Canonical names for a family ('H100') or an exact name ('H100-SXM-80GB'); a name the
    catalog does not know matches the raw name a source reported, if any did."""
    from gpuradar.storage.dataset import UnknownGpu, resolve_gpus

    try:
        return resolve_gpus(engine, query)
    except UnknownGpu as exc:
        raise fail(str(exc)) from None


def pricing_option(text: str | None) -> str | None:
    """--pricing as stored, or the CLI's one-line error naming the word."""
    if not text:
        return None
    try:
        return parse_pricing(text)
    except ValueError as exc:
        raise fail(f"--{exc}") from None


def check_gpu_given(gpu: str | None) -> None:
    """--gpu '' (an unset shell variable) would silently mean every GPU."""
    if gpu is not None and not gpu.strip():
        raise fail("--gpu is empty: give a family (H100), a model or a kind, or leave it out")


def check_accelerator_filters(vendors: list[str], kinds: list[str]) -> None:
    """Reject a vendor or kind the catalog does not know (a typo would match nothing)."""
    from gpuradar.core import gpus

    for value in vendors:
        if not gpus.select(vendor=value):
            raise fail(f"unknown vendor {value!r}; known: {', '.join(gpus.VENDORS)}")
    for value in kinds:
        if not gpus.select(kind=value):
            raise fail(f"unknown accelerator kind {value!r}; known: {', '.join(gpus.KINDS)} "
                       "(ASIC = NPU)")


YES_NO = {True: "yes", False: "no", None: "?"}


REPLAYED_NOTE = "seen: a date is the capture date of replayed data"


def seen_cell(o: dict, now: datetime) -> str:
    """When an offer was seen: '3m ago' for a live crawl; for data replayed from a recording
    its capture date (never the minutes since it was replayed), which the caption names."""
    if o.get("replayed"):
        return o.get("captured") or "date unknown"
    return f"{age(o['observed_at'], now)} ago"


def offer_rows(offers: list[dict], now: datetime) -> list[dict]:
    rows = []
    for o in offers:
        avail = YES_NO[o["available"]]
        if o.get("available_count") is not None:
            avail += f" ({o['available_count']})"
        if not o["active"]:
            avail = "gone"
        extra = o.get("attributes") or {}
        notes = []
        if extra.get("savings_pct") is not None:
            notes.append(f"saves {extra['savings_pct']}%")
        if extra.get("avg_spot_price_pct") is not None:  # Alibaba DescribeSpotAdvice
            notes.append(f"30-day average {extra['avg_spot_price_pct']}% of on-demand")
        if extra.get("derived"):
            notes.append("derived")
        if extra.get("terms"):
            notes.append(describe_terms(extra["terms"]))
        memory = o.get("gpu_memory_gb")
        rows.append({
            "source": o["source"], "region": o["region"] + (f"/{o['zone']}" if o["zone"] else ""),
            "where": f"{o['source']} {o['region']}" + (f"/{o['zone']}" if o["zone"] else ""),
            "instance": o["instance_type"], "pricing": o["pricing"].replace("_", "-"),
            "gpu": f"{o['gpu_count']:g}x {o['gpu']}",
            "memory": f"{memory:g} GiB" if memory else None,
            "per_gpu": money(o["price_per_gpu_usd"]), "instance_usd": money(o["price_usd"]),
            "original": money(o["price"], o["currency"]) if o["currency"] != "USD" else "",
            "available": avail, "seen": seen_cell(o, now), "notes": ", ".join(notes),
            # a spot offer's interruption signal (or why unknown); empty when not spot
            "signal": signal.note() if (signal := offer_signal(
                o["source"], o["pricing"], extra)) is not None else "",
        })
    return rows


_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)


def short_ids(rows: list[dict], key: str) -> dict[str, str]:
    """Cells of `key` holding a UUID (Voltage Park names its locations only so), each with
    the UUID's first group in its place: when the table is too narrow it shows that, and
    its caption the whole id (an abbreviation, said, as OD for on-demand)."""
    return {r[key]: _UUID.sub(r"\1", r[key]) for r in rows
            if r.get(key) and _UUID.search(r[key])}


def _counts(counts: list[float]) -> str:
    """'1-8x' for a run of whole counts, else '1,2,4x'."""
    whole = [int(c) for c in counts if float(c).is_integer()]
    if len(whole) == len(counts) > 2 and whole == list(range(whole[0], whole[-1] + 1)):
        return f"{whole[0]}-{whole[-1]}x"
    return ",".join(f"{c:g}" for c in counts) + "x"


def group_variants(offers: list[dict]) -> list[dict]:
    """One offer per product: the 1x...8x variants of an instance family with the same price
    per GPU (RunPod, Lambda, OCI list one offer per GPU count) become one row whose
    `gpu_counts` lists the counts; the cheapest row of each group stands for it."""
    groups: dict[tuple, dict] = {}
    for o in offers:
        key = (o["source"], o["region"], o["zone"], o["pricing"], o["gpu"],
               o["price_per_gpu_usd"], o["available"], o["active"])
        if key in groups:
            groups[key]["gpu_counts"].append(o["gpu_count"])
        else:
            groups[key] = {**o, "gpu_counts": [o["gpu_count"]]}
    out = list(groups.values())
    for g in out:
        g["gpu_counts"] = sorted(set(g["gpu_counts"]))
    return out


def nothing_matched(engine, filters: dict[str, object]) -> str:
    """Why a listing is empty: an empty database, or the filters (named)."""
    from gpuradar.storage.queries import gpu_names

    if not gpu_names(engine):
        from gpuradar.storage.leader import sqlite_path

        # named: a mistyped path or a shell without GPURADAR_DATABASE_URL opens another one
        path = sqlite_path(engine)
        if path is not None:
            where = str(path)
        elif engine.url.database in (None, "", ":memory:"):
            where = "an in-memory database"
        else:
            where = engine.url.render_as_string(hide_password=True)
        return (f"no offers stored yet in {where}: crawl first (`gpuradar crawl`, or try "
                "`gpuradar demo`)")
    given = ", ".join(k if v is True else f"{k} {v}" for k, v in filters.items()
                      if v not in (None, False, "", [], ()))
    return f"no offer matches {given or 'these filters'} (other offers are stored)"


def check_sources(engine, names: list[str]) -> None:
    """--source names a known or stored source: a typo is a usage error, not 'no offer
    matches'."""
    from gpuradar.core.sources import providers
    from gpuradar.storage.dataset import unknown_sources

    unknown = unknown_sources(engine, names)
    if unknown:
        raise fail(f"unknown source {unknown[0]!r} (--source); known: "
                   f"{', '.join(providers())}")


@app.command()
def prices(
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="Accelerator family (H100, "
                                            "'TPU v5e', Trainium), exact model "
                                            "(H100-SXM-80GB) or kind (TPU, NPU).",
                                            autocompletion=complete_gpu)] = None,
    vendor: Annotated[list[str] | None, typer.Option("--vendor", help="Only accelerators of "
                                                     "this vendor: NVIDIA, AMD, Google, AWS, "
                                                     "Intel, Huawei (repeatable).")] = None,
    kind: Annotated[list[str] | None, typer.Option("--kind", help="Only this kind of "
                                                   "accelerator: GPU, TPU or NPU (ASIC) "
                                                   "(repeatable).")] = None,
    pricing: Annotated[str | None, typer.Option(help=f"{PRICING_CHOICES}.",
                                                autocompletion=complete_pricing)] = None,
    source: Annotated[list[str] | None, typer.Option("--source", "-s", help="Only these "
                                                     "sources (repeatable).",
                                                     autocompletion=complete_source)] = None,
    region: Annotated[list[str] | None, typer.Option("--region", "-r", help="Region glob, "
                                                     "e.g. 'us-*', or 'mainland' for "
                                                     "mainland China (repeatable).")] = None,
    max_price: Annotated[float | None, typer.Option(help="Max USD per GPU-hour.", min=0,
                                                    callback=finite)] = None,
    min_gpus: Annotated[float | None, typer.Option(help="Min GPUs per offer.", min=0,
                                                   callback=finite)] = None,
    min_gpu_memory: Annotated[float | None, typer.Option(help="Min GiB of memory per GPU.", min=0,
                                                         callback=finite)] = None,
    available: Annotated[bool, typer.Option("--available", help="Hide offers known to be "
                                            "unavailable.")] = False,
    all_offers: Annotated[bool, typer.Option("--all", help="Include offers no longer "
                                             "listed.")] = False,
    group: Annotated[bool, typer.Option("--group", help="One row per product: its 1x...8x "
                                        "variants at the same price per GPU together.")
                     ] = False,
    limit: Annotated[int, typer.Option(help="Rows to show (0: all).", min=0)] = 50,
    index: Annotated[bool, typer.Option("--index", help="The market index instead of offers: "
                                        "median, p10 and p90 USD per GPU-hour of each model "
                                        "and pricing over fresh, available offers (see "
                                        "docs/index.md); --gpu and --pricing filter it.")
                     ] = False,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
    watch: Annotated[float | None, typer.Option(
        "--watch", metavar="SECONDS", min=1, max=WATCH_MAX, callback=finite,
        help="Refresh the table in place every SECONDS (Ctrl-C to stop).")] = None,
) -> None:
    """Current offers, cheapest USD per GPU-hour first (or, with --index, the market index)."""
    f = pick_format(fmt, as_json, as_csv)
    if watch:
        if f is not Format.table:
            raise fail("--watch refreshes a table; not with --json or --csv")
        again = {k: v for k, v in locals().items() if k not in ("watch", "f")}
        watch_output(lambda: prices(**again), watch)
        return
    pricing = pricing_option(pricing)
    check_gpu_given(gpu)
    check_accelerator_filters(vendor or [], kind or [])
    engine = get_engine(get_database(config, database_url), existing=True)
    if index:
        refuse_offer_filters_with_index({
            "--vendor": vendor, "--kind": kind, "--source": source, "--region": region,
            "--max-price": max_price, "--min-gpus": min_gpus,
            "--min-gpu-memory": min_gpu_memory, "--available": available, "--all": all_offers,
            "--group": group})
        print_index(engine, resolve_gpus(gpu, engine), pricing, f, gpu)
        return
    source = [s for s in source or [] if s.strip()]  # a blank one is not given, as in the API
    check_sources(engine, source)
    flt = offer_filter(engine, gpu=gpu, vendors=vendor or [], kinds=kind or [],
                       pricing=pricing, sources=source, regions=region or [],
                       max_price=max_price, min_gpus=min_gpus,
                       min_gpu_memory=min_gpu_memory, available_only=available,
                       include_inactive=all_offers)
    offers, more = listed_offers(engine, flt, group, limit)
    if f is Format.table and not offers:
        err_console.print(nothing_matched(engine, {
            "--gpu": gpu, "--vendor": ",".join(vendor or []), "--kind": ",".join(kind or []),
            "--pricing": pricing and pricing.replace("_", "-"),
            "--source": ",".join(source), "--region": ",".join(region or []),
            "--max-price": max_price, "--min-gpus": min_gpus,
            "--min-gpu-memory": min_gpu_memory, "--available": available}), highlight=False)
        return
    print_offers(offers, f, group, limit if more else None)


def refuse_offer_filters_with_index(given: dict[str, object]) -> None:
    """`prices --index` is over every source and region: a filter of offers given with it
    is refused (the first one named), not ignored."""
    ignored = [name for name, value in given.items() if value]
    if ignored:
        raise fail(f"--index takes --gpu and --pricing, not {ignored[0]}")


def offer_filter(engine, gpu: str | None, **given: Any):
    """The listing's filter: `--gpu` resolved to catalog names, the rest as given."""
    from gpuradar.storage.queries import OfferFilter

    return OfferFilter(gpus=resolve_gpus(gpu, engine), **given)


def listed_offers(engine, flt, group: bool, limit: int) -> tuple[list[dict], bool]:
    """The offers a listing shows (grouped with --group, at most `limit`; 0: all) and
    whether more matched than it shows."""
    from gpuradar.storage.queries import current_offers

    # one row more than shown: whether the table must say that it stops at --limit
    offers = current_offers(engine, flt, limit=None if group or not limit else limit + 1)
    if group:
        offers = group_variants(offers)
    more = bool(limit) and len(offers) > limit
    return offers[:limit or None], more


def print_offers(offers: list[dict], f: Format, group: bool, cut: int | None) -> None:
    """The offers as a table (what a person reads) or as JSON or CSV (their records);
    `cut`: the --limit that left out offers, said beside the data."""
    rows = offer_rows(offers, SYSTEM.now())
    if group:
        for row, o in zip(rows, offers, strict=True):
            row["gpu"] = f"{_counts(o['gpu_counts'])} {o['gpu']}"
            if len(o["gpu_counts"]) > 1:
                row["instance_usd"] = None  # one price per GPU, several instance prices
    notes = [REPLAYED_NOTE] if any(o.get("replayed") for o in offers) else []
    if cut:
        notes.append(f"the {cut} cheapest shown: --limit 0 for all")
    # JSON and CSV: an offer's declared fields (as the API, the Python API and the export
    # carry them), then what --group adds
    from gpuradar.storage.dataset import OFFER_FIELDS, offer_record

    raw = [{**offer_record(o), **{k: v for k, v in o.items() if k not in OFFER_FIELDS}}
           for o in offers]
    # Azure's sizes all start with Standard_ (its own portal lists them without it)
    emit(rows, PRICE_COLUMNS, f, raw_rows=raw, prefixes={"instance": "Standard_"},
         caption="; ".join(notes) or None, abbreviate={"where": short_ids(rows, "where")})
    if cut and f is not Format.table:  # said beside the data, not in it
        err_console.print(f"the {cut} cheapest offers only: --limit 0 for all",
                          highlight=False)


# (key, header, priority): the figures are never left out; in a narrow terminal the
# highest priority goes first (80 columns keep the excluded count, not its time).
INDEX_COLUMNS = [("gpu", "GPU"), ("pricing", "pricing"), ("status", "status"),
                 ("median", "median $/GPU-h"), ("p10", "p10"), ("p90", "p90"),
                 ("providers", "providers voted"), ("offers", "offers", 2),
                 ("excluded", "excluded", 1), ("since", "since (UTC)", 3)]


def print_index(engine, gpus: list[str], pricing: str | None, f: Format,
                query: str | None = None) -> None:
    """`prices --index`: the index of each model and pricing, what it is made of (one vote
    per provider, the minimum panel), then the votes the screens excluded (JSON and CSV:
    each figure with its panel and excluded votes)."""
    from gpuradar.storage.index import current_index

    figures = current_index(engine, gpus or None, pricing)
    if f is Format.table and not figures:
        what = " ".join(x for x in (query, pricing and pricing.replace("_", "-")) if x)
        err_console.print(f"no index{' for ' + what if what else ''} yet: it is computed "
                          "after each crawl from fresh, available offers", highlight=False)
        return
    rows = [{"gpu": x["gpu"], "pricing": x["pricing"].replace("_", "-"),
             "status": x["status"],
             "median": money(x["median"]), "p10": money(x["p10"]), "p90": money(x["p90"]),
             "offers": x["offers"], "providers": x["providers"],
             "excluded": len(x["excluded"]), "since": f"{x['since']:%Y-%m-%d %H:%M}"}
            for x in figures]
    emit(rows, INDEX_COLUMNS, f, raw_rows=[{k: v for k, v in x.items() if k != "until"}
                                           for x in figures],
         title="market index: USD per GPU-hour, one vote per provider (its cheapest fresh, "
               "available offer)")
    if f is Format.table:
        panel = figures[0]["params"].get("min_panel") if figures else None
        if panel:
            console.print(f"each provider votes once, with its cheapest offer; a point from "
                          f"fewer than {panel} providers is thin: a price list, not the "
                          "market (docs/index.md)", highlight=False)
        for x in figures:
            for v in x["excluded"]:
                console.print(f"excluded from {x['gpu']} {x['pricing'].replace('_', '-')}: "
                              f"{v['source'] or '?'} offer {v['offer_id']} "
                              f"{money(v['price'])}/GPU-h ({v['reason']}; docs/index.md)",
                              highlight=False)


# 0 is never left out; in a narrow terminal the highest priority goes first. What tells two
# offers apart (source and region in one column that wraps between the two, the instance,
# the pricing, the GPUs) stays; the whole offer's $/h (GPUs x $/GPU-h) goes first, when each
# was seen last (at 80 columns it stays for `--gpu H100` and the default listing; the whole
# demo market's longest ids and regions together leave it no room).
PRICE_COLUMNS = [Col("where", "source region", wrap=True),
                 Col("instance", "instance", wrap=True),  # between words, an id stays whole
                 Col("pricing", "pricing"), Col("gpu", "GPUs", split_count=True),
                 Col("memory", "mem/GPU", 5), Col("per_gpu", "$/GPU-h"),
                 Col("instance_usd", "$/h", 2), Col("original", "quoted", 4),
                 Col("available", "avail", 3), Col("seen", "seen", 1),
                 Col("signal", "interruption", 5, wrap=True), Col("notes", "notes", 6)]

# -- history -----------------------------------------------------------------------------
def chart(series: list[tuple[datetime, float | None]], until: datetime, width: int = 60,
          height: int = 8) -> list[str]:
    """A step chart of a price series in text: a labelled price axis ($/GPU-h), the time
    axis over the whole period (ticks with UTC dates), gaps where nothing was listed."""
    values = [v for _, v in series if v is not None]
    if not values:
        return ["(no data in this period)"]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo * 0.95, hi * 1.05 or 1.0
    rows = [[" "] * len(series) for _ in range(height)]
    prev: int | None = None
    for col, (_, v) in enumerate(series):
        if v is None:
            prev = None
            continue
        r = round((v - lo) / (hi - lo) * (height - 1))
        if prev is None or prev == r:
            rows[r][col] = "─"
        else:
            up = r > prev
            rows[prev][col] = "┘" if up else "┐"
            rows[r][col] = "┌" if up else "└"
            for mid in range(min(r, prev) + 1, max(r, prev)):
                rows[mid][col] = "│"
        prev = r
    ticks = {0: money(lo), height - 1: money(hi), (height - 1) // 2:
             money(lo + (hi - lo) * ((height - 1) // 2) / (height - 1))}
    # one number of decimals on the axis, as in a table column ('$10.0000' over '$0.4001')
    rows_of_labels = [[label] for label in ticks.values()]
    same_decimals(rows_of_labels, 0)
    ticks = dict(zip(ticks, (label for [label] in rows_of_labels), strict=True))
    label_w = max(len(t) for t in ticks.values())
    out = [f"{'$/GPU-h':>{label_w}}"]
    for r in range(height - 1, -1, -1):
        label = ticks.get(r, "")
        out.append(f"{label:>{label_w}} {'┤' if label else '│'}{''.join(rows[r])}")
    n = len(series)
    marks = sorted({0, n // 2, n - 1})
    out.append(" " * label_w + " └" + "".join("┬" if c in marks else "─" for c in range(n)))
    start, middle = series[0][0], series[n // 2][0]
    left, centre, right = (f"{start:%m-%d %H:%M}", f"{middle:%m-%d %H:%M}",
                           f"{until:%m-%d %H:%M} UTC")
    axis = [" "] * (n + 2 + len(right))
    for pos, text in ((0, left), (max(n // 2 - len(centre) // 2, len(left) + 1), centre),
                      (max(n - len(right), n // 2 + len(centre)), right)):
        axis[pos:pos + len(text)] = text
    out.append(" " * (label_w + 2) + "".join(axis).rstrip())
    return out


def print_gpu_history(engine, gpu: str, names: list[str], since: datetime, until: datetime,
                      pricing: str | None, staged: str | None = None) -> None:
    """What `history --gpu` prints: a title, the chart, the lowest price of the period, and
    where the data is from (`staged`: what a staged replay says instead of capture dates,
    its times being staged, not captured)."""
    from gpuradar.storage import queries

    width = console.width
    buckets = max(20, min(width - 14, 120))  # room for the price labels
    series = queries.cheapest_series(engine, names, since, until, buckets=buckets,
                                     pricing=pricing)
    best = queries.cheapest_over(engine, names, since, until, pricing)
    days = (until - since).total_seconds() / 86400
    console.print(f"cheapest {gpu} {(pricing or 'any pricing').replace('_', '-')} per "
                  f"GPU-hour, {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC "
                  f"({days:g} day{'s' if days != 1 else ''})\n", highlight=False)
    for line in chart(series, until):
        console.print(line, highlight=False, soft_wrap=True)
    if best:
        console.print(f"lowest: {money(best['price_per_gpu_usd'])} at {best['source']} "
                      f"{best['region']} {best['instance_type']} "
                      f"({best['pricing'].replace('_', '-')}) from "
                      f"{best['valid_from']:%Y-%m-%d %H:%M} UTC", highlight=False)
    replayed = queries.replayed_sources(engine, names, pricing)
    if staged:
        console.print(staged, highlight=False)
    elif replayed:
        console.print("replayed from recordings, each price carried forward from its "
                      "capture: " + ", ".join(
            f"{s} (captured {c or 'date unknown'})" for s, c in sorted(replayed.items())),
            highlight=False)  # wrapped between words by the console, never mid-word


@app.command()
def history(
    source: Annotated[str | None, typer.Argument(help="Source of one offer.",
                                                            autocompletion=complete_source)] = None,
    instance_type: Annotated[str | None, typer.Argument(help="Its instance type / id.")] = None,
    region: Annotated[str | None, typer.Option("--region", "-r", help="Region (or zone) of "
                                               "the offer, when it is listed in several.")
                      ] = None,
    pricing: Annotated[str | None, typer.Option(help=f"{PRICING_CHOICES}.",
                                                autocompletion=complete_pricing)] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="Cheapest price of this GPU "
                                            "over time instead of one offer.",
                                            autocompletion=complete_gpu)] = None,
    days: Annotated[float, typer.Option(help="How far back (with --gpu), at most 3660.")
                    ] = 7.0,
    at: Annotated[str | None, typer.Option(help="Price of the offer at this time: "
                                           "yesterday, 2d (ago), 2026-08-22, "
                                           "'2026-08-22 18:00' (UTC unless an offset is "
                                           "given).")] = None,
    signals: Annotated[bool, typer.Option("--signals", help="The offer's interruption signal "
                                          "over time (each change of the band, rate or "
                                          "source its provider published) instead of its "
                                          "prices.")] = False,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
) -> None:
    """The spans of one offer, or the cheapest price of a GPU over time."""
    from gpuradar.core.units import MAX_DURATION, parse_when
    from gpuradar.storage import queries

    pricing = pricing_option(pricing)
    check_gpu_given(gpu)
    if not 0 < days <= MAX_DURATION.days:  # a negative period drew a range backwards
        raise fail(f"--days must be more than 0 and at most {MAX_DURATION.days}, not {days:g}")
    when = None
    if at is not None:
        try:
            when = parse_when(at)
        except ValueError as exc:
            raise fail(f"--at: {exc}") from None
    cfg = get_database(config, database_url)
    engine = get_engine(cfg, existing=True)
    f = pick_format(fmt, as_json, as_csv)
    if gpu:
        names = resolve_gpus(gpu, engine)
        until = SYSTEM.now()
        since = until - timedelta(days=days)  # days checked: 0 < days <= 3660
        if f is not Format.table:
            series = queries.cheapest_series(engine, names, since, until, buckets=60,
                                             pricing=pricing)
            emit([], [], f, raw_rows=[{"from": t, "cheapest_usd_per_gpu_hour": v}
                                      for t, v in series])
            return
        print_gpu_history(engine, gpu, names, since, until, pricing)
        return
    if not (source and instance_type):
        raise fail("give SOURCE and INSTANCE_TYPE of an offer, or --gpu")
    offers = queries.find_offer(engine, source, instance_type, region, pricing)
    if not offers and region:  # a zone names one per-zone offer (us-east-1a)
        offers = queries.find_offer(engine, source, instance_type, None, pricing, zone=region)
    if not offers:
        raise fail(f"no offer {source} {instance_type}" + (f" in {region}" if region else ""))
    if len(offers) > 1:
        choices = ", ".join(sorted({f"{o['region']} {o['pricing'].replace('_', '-')}"
                                    for o in offers})[:10])
        raise fail(f"{len(offers)} offers match; narrow with --region/--pricing ({choices})")
    offer = offers[0]
    title = (f"{source} {offer['region']} {instance_type} "
             f"{offer['pricing'].replace('_', '-')}")
    if signals:
        print_signal_changes(engine, offer, f, title)
        return
    if when is not None:
        span = queries.price_at(engine, offer["id"], when)
        if span is None:
            console.print(f"not listed (or not yet known) at {when:%Y-%m-%d %H:%M %Z}")
            raise typer.Exit(EXIT_FAILED)
        console.print(f"{money(span['price'], span['currency'])}/h "
                      f"({money(span['price_per_gpu_usd'])}/GPU-h), available: "
                      f"{YES_NO[span['available']]}", highlight=False)
        if span["carried"]:  # a price holds until an observation says otherwise
            last = span["seen_until"]
            seen = (f"its capture of {span.get('captured') or f'{last:%Y-%m-%d}'}"
                    if span.get("replayed") else
                    f"its last observation of {last:%Y-%m-%d %H:%M} UTC")
            console.print(f"carried forward from {seen}", highlight=False)
        return
    spans = queries.spans(engine, offer["id"])
    rows = [{"from": f"{s['valid_from']:%Y-%m-%d %H:%M}",
             "to": (f"{s['seen_until']:%Y-%m-%d %H:%M} (replayed)" if s.get("replayed")
                    else "now") if s["open"] else f"{s['valid_to']:%Y-%m-%d %H:%M}",
             "price": money(s["price"], s["currency"]), "per_gpu": money(s["price_per_gpu_usd"]),
             "available": YES_NO[s["available"]]} for s in spans]
    emit(rows, [("from", "from (UTC)"), ("to", "to"), ("price", "price/h"),
                ("per_gpu", "$/GPU-h"), ("available", "available", 1)], f,
         title=title, raw_rows=spans)
    if f is Format.table and offer["pricing"] == "spot":  # beside the prices: the signal
        print_signal_changes(engine, offer, f, f"{title}: interruption signal")


def print_signal_changes(engine, offer: dict[str, Any], f: Format, title: str) -> None:
    """An offer's interruption signal over time (queries.signal_changes), or, in a table,
    that none is stored: unknown, never a default."""
    from gpuradar.storage import queries

    points = queries.signal_changes(engine, offer["id"])
    if f is Format.table and not points:
        signal = offer_signal(offer["source"], offer["pricing"], offer.get("attributes"))
        if signal is None:
            said = "none (not a spot offer)"
        elif signal.kind == "host reliability":  # a score, not a published rate
            said = f"not kept as a series ({signal.label()})"
        else:
            said = "none stored (unknown)"
        console.print(f"{title}: {said}", highlight=False)
        return
    rows = [{"from": f"{p['valid_from']:%Y-%m-%d %H:%M}",
             "to": f"{p['valid_to']:%Y-%m-%d %H:%M}" if p["valid_to"] else "latest",
             "signal": p["text"], "risk": p["risk"]} for p in points]
    emit(rows, [("from", "from (UTC)"), ("to", "to"), ("signal", "interruption signal"),
                ("risk", "risk", 1)], f, title=title, raw_rows=points)
