"""`gpuradar patterns GPU`: volatility, weekly profile and trends of the stored history
(gpuradar.core.patterns computes them; docs/patterns.md defines each figure)."""


from datetime import timedelta
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
    complete_gpu,
    complete_pricing,
    fail,
    get_config,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import Format, console, emit, money
from gpuradar.cli.prices_cmd import check_gpu_given, pricing_option, resolve_gpus
from gpuradar.core.clock import SYSTEM
from gpuradar.core.pricing import CHOICES as PRICING_CHOICES

#: How far back `patterns` reads by default: the 90 days EC2's spot history back-fills.
DEFAULT_DAYS = 90.0


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _cells(p) -> dict[str, str]:
    """One table row of a Pattern: every figure, or what it lacks, in words."""
    span = (f"{p.samples:,} h, {p.first:%Y-%m-%d} to {p.last:%Y-%m-%d}" if p.first and p.last
            else "no hourly price")
    vol = (f"{p.volatility * 100:.2f}%/day ({p.volatility_changes} days)"
           if p.volatility is not None else "not enough history")
    if p.profile and len(p.cheapest_hours) == len(p.profile):
        cheapest = (f"every hour the same: {money(p.profile[0].mean)} ({p.weeks} weeks)")
    elif p.profile:
        hours = ", ".join(p.profile[h].label for h in p.cheapest_hours[:3])
        more = f" +{len(p.cheapest_hours) - 3}" if len(p.cheapest_hours) > 3 else ""
        cheapest = (f"{hours}{more} UTC: {money(p.profile[p.cheapest_hours[0]].mean)} "
                    f"({p.weeks} weeks)")
    else:
        cheapest = "not enough history"
    return {"gpu": p.gpu, "pricing": p.pricing.replace("_", "-"), "region": p.region,
            "history": span, "volatility": vol, "cheapest": cheapest,
            "trend_7d": _percent(p.trends.get(7)) if p.trends.get(7) is not None
            else "not enough history",
            "trend_30d": _percent(p.trends.get(30)) if p.trends.get(30) is not None
            else "not enough history"}


@app.command()
def patterns(
    gpu: Annotated[str, typer.Argument(help="A GPU family (H100) or model.",
                                       autocompletion=complete_gpu)],
    pricing: Annotated[str | None, typer.Option(help=f"{PRICING_CHOICES}.",
                                                autocompletion=complete_pricing)] = None,
    region: Annotated[list[str] | None, typer.Option("--region", "-r", help="Region glob, "
                                                     "repeatable (us-*).")] = None,
    days: Annotated[float, typer.Option(help="How much history to read, in days (at most "
                                        "3660).")] = DEFAULT_DAYS,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False, wide: WideOpt = False,
) -> None:
    """Per GPU, pricing and region, from stored history only: volatility (daily log
    changes), the hours of the week when the price is lowest (with the weeks they rest
    on) and the 7- and 30-day trends; "not enough history" where there is too little."""
    from gpuradar.core.patterns import compute_all
    from gpuradar.core.units import MAX_DURATION
    from gpuradar.storage.queries import pattern_spans

    check_gpu_given(gpu)
    pricing = pricing_option(pricing)
    if not 0 < days <= MAX_DURATION.days:
        raise fail(f"--days must be more than 0 and at most {MAX_DURATION.days}, not {days:g}")
    cfg = get_config(config, database_url)
    engine = get_engine(cfg, existing=True)
    f = pick_format(fmt, as_json, as_csv)
    names = resolve_gpus(gpu, engine)
    now = SYSTEM.now()
    found = compute_all(pattern_spans(engine, names, now - timedelta(days=days), now,
                                      pricing, region or []), now)
    if f is not Format.table:
        emit([], [], f, raw_rows=[p.as_dict() for p in found])
        return
    shown = [p for p in found if p.samples]
    if not shown:
        console.print(f"not enough history: no {gpu} price"
                      + (f" ({pricing.replace('_', '-')})" if pricing else "")
                      + f" observed for a whole hour in the last {days:g} days"
                      + (" (a replayed capture is dated at its capture: --days reaches "
                         "further back)" if found else ""), highlight=False)
        return
    emit([_cells(p) for p in shown],
         [("gpu", "GPU"), ("pricing", "pricing"), ("region", "region"),
          ("history", "hourly prices", 2), ("volatility", "volatility"),
          ("cheapest", "cheapest hours of the week"), ("trend_7d", "7-day trend"),
          ("trend_30d", "30-day trend", 1)], f,
         title=f"{gpu} patterns, last {days:g} days (docs/patterns.md)")
    if len(shown) < len(found):  # one line, not a row of "not enough history" each
        console.print(f"not enough history for {len(found) - len(shown)} more model, pricing "
                      f"and region series: no price observed for a whole hour in the last "
                      f"{days:g} days (--json lists them)", highlight=False)
