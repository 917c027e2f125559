"""`gpuradar demo`: real prices from public captures, offline, in seconds.

The shipped recordings (gpuradar/recordings/<source>/) hold only real responses, each with a
`provenance.json` saying where and when it was captured. `demo` replays them into a
throwaway SQLite file and shows the cheapest offer per GPU, dated; `demo --timeline` plays a
day of one source's prices so that history fills and a rule fires, repeats and resolves.
"""


import json
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuradar.cli.common import (
    EXIT_FAILED,
    RECORDINGS,
    WideOpt,
    app,
    fail,
    get_config,
    get_engine,
)
from gpuradar.cli.crawl_cmd import crawl_sources, print_results
from gpuradar.cli.output import Col, Format, console, money, print_table, table
from gpuradar.cli.prices_cmd import YES_NO, print_gpu_history
from gpuradar.core.clock import SYSTEM
from gpuradar.core.outcome import CrawlStatus

if TYPE_CHECKING:
    from gpuradar.core.config import Config

TIMELINE = RECORDINGS / "timeline.json"


def provenance(source: str) -> dict[str, Any]:
    path = RECORDINGS / source / "provenance.json"
    return json.loads(path.read_text()) if path.exists() else {}


def recorded_sources() -> list[str]:
    return sorted(p.name for p in RECORDINGS.iterdir() if (p / "index.json").exists())


def _unsampled(cfg: "Config", recorded: list[str]) -> list[str]:
    """One line per kind of source without a public sample: what to do instead."""
    from gpuradar.core.providers import PROVIDERS

    need_keys: list[str]
    public: list[str]
    need_keys, public = [], []
    for provider in PROVIDERS:
        if provider.name in recorded or provider.kind == "fx":
            continue
        (need_keys if provider.requires_credentials else public).append(provider.name)
    lines = []
    if need_keys:
        lines.append(f"no public sample: {', '.join(need_keys)} (configure credentials to "
                     "crawl them)")
    if public:
        lines.append(f"no public sample: {', '.join(public)} (crawl "
                     f"{'them' if len(public) > 1 else 'it'} live: "
                     f"`gpuradar crawl {' '.join(public)}`)")
    return lines


def _offer_row(o: dict[str, Any], dates: dict[str, str]) -> dict[str, Any]:
    memory = o.get("gpu_memory_gb")
    return {"gpu": f"{o['gpu_count']:g}x {o['gpu']}", "memory": f"{memory:g} GiB" if memory
            else None, "per_gpu": money(o["price_per_gpu_usd"]), "source": o["source"],
            "instance": o["instance_type"],
            "available": YES_NO[o["available"]], "as_of": dates.get(o["source"], "?")}


# Priority 0: never left out; the others are left out highest first in a narrow terminal.
# GPUs may wrap between words: a product the catalog does not know keeps its provider's name.
OFFER_COLUMNS = [Col("gpu", "GPUs", wrap=True), Col("memory", "mem/GPU", 2),
                 Col("per_gpu", "$/GPU-h"), Col("source", "source"), Col("instance", "instance"),
                 Col("available", "avail", 1), Col("as_of", "as of")]


@app.command()
def demo(keep: Annotated[Path | None, typer.Option(help="Keep the demo database here "
                                                   "instead of a temporary file.")] = None,
         timeline: Annotated[bool, typer.Option("--timeline", help="Play a day of price "
                                                "changes in about a minute: history fills, "
                                                "a rule fires, repeats and resolves.")] = False,
         pace: Annotated[float, typer.Option(help="Seconds per step of --timeline.", min=0)
                         ] = 6.0,
         verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log Scrapy's "
                                                "replay at INFO.")] = False,
         wide: WideOpt = False) -> None:
    """Replay real, dated prices captured from public sources into a throwaway SQLite file
    and show the cheapest offer per GPU: gpuradar offline, in seconds."""
    if keep is not None:
        _check_keep(keep)
    workdir = Path(tempfile.mkdtemp(prefix="gpuradar-demo-"))
    db = keep or workdir / "demo.db"
    cfg = get_config(None, f"sqlite:///{db}")
    cfg.endpoints = {}
    try:
        if timeline:
            _timeline(cfg, pace)
        else:
            _snapshot(cfg, verbose)
        if keep:
            # each command on a line of its own, never broken: it is there to be copied
            console.print("\ndemo database kept; try:", highlight=False)  # (the path is in them)
            url = f"sqlite:///{keep}"
            for command in [f"gpuradar prices --database-url {url} --gpu H100",
                            *([f"gpuradar history --gpu H100 --days 1 --database-url {url}"]
                              if timeline else [])]:
                console.print(f"  {command}", highlight=False, soft_wrap=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _check_keep(keep: Path) -> None:
    """--keep may name a new file or an earlier demo's; never a store with live crawls,
    which the demo's replayed prices would be mixed into."""
    from gpuradar.storage.dataset import live_crawls

    live = live_crawls(keep) if keep.is_file() else 0
    if live:
        raise fail(f"--keep {keep} holds {live} live crawl(s): the demo would mix replayed "
                   "prices into that store; give a new file")


def _snapshot(cfg: "Config", verbose: bool) -> None:
    from gpuradar.storage.queries import OfferFilter, cheapest_per_gpu

    sources = recorded_sources()
    # Its own data's known gaps (products the catalog lacks) are counted in the crawl
    # record, not warned about: -v shows them.
    results = crawl_sources(cfg, sources, None, RECORDINGS, verbose, log_level="ERROR")
    if any(r.status != CrawlStatus.OK for r in results):
        print_results(results, Format.table)
        raise typer.Exit(EXIT_FAILED)
    dates = {s: provenance(s).get("captured", "?") for s in sources}
    counts = {r.source: r.items for r in results}
    rows = [{"source": s, "captured": dates[s], "offers": counts.get(s, 0),
             "origin": "; ".join(dict.fromkeys(
                 o.get("repository", "").removeprefix("https://github.com/")
                 for o in provenance(s).get("origin", [])))}
            for s in sources]
    print_table(table(rows, [Col("source", "source"), Col("captured", "captured"),
                             Col("offers", "offers"), Col("origin", "public capture from")],
                        title="Real prices from public captures, replayed offline"))
    for line in _unsampled(cfg, sources):
        console.print(line, highlight=False)
    engine = get_engine(cfg)
    for pricing in ("on_demand", "spot"):
        best = cheapest_per_gpu(engine, OfferFilter(pricing=pricing))
        if best:
            console.print()
            print_table(table([_offer_row(o, dates) for o in best], OFFER_COLUMNS,
                                title=f"cheapest {pricing.replace('_', '-')} offer per GPU"))
    console.print("\nprices are as of each source's capture date, not today's; "
                  "see gpuradar/recordings/*/provenance.json", highlight=False)


# -- the time-lapse ---------------------------------------------------------------------
def _timeline(cfg: "Config", pace: float) -> None:
    """Replay the staged day of `timeline.json`: each step is one crawl of the source
    (the real capture's offers listed at that hour) stored at its simulated time, then one
    rule evaluation at that time; the notifications it queues are shown, not sent."""
    from gpuradar.alerts.engine import evaluate
    from gpuradar.alerts.loader import load_rules, load_targets
    from gpuradar.core import gpus
    from gpuradar.core.config import TargetSpec
    from gpuradar.storage.alert_store import notification_log

    spec = json.loads(TIMELINE.read_text())
    source = spec["source"]
    capture = json.loads((RECORDINGS / spec["capture"]).read_text())
    listed = {o["machine_id"]: o for o in capture["offers"]}
    # queued in the outbox, never delivered
    cfg.targets = {"demo": TargetSpec(url="json://localhost")}
    cfg.rules = [spec["rule"]]
    rules = load_rules(cfg, load_targets(cfg))
    engine = get_engine(cfg)
    until = SYSTEM.now().replace(second=0, microsecond=0)
    start = until - timedelta(hours=max(s["hour"] for s in spec["steps"]))
    console.print(f"[bold]A day of {source} prices in about a minute[/bold]", highlight=False)
    console.print(spec["derivation"], highlight=False)
    console.print(f"rule: {rules[0].name}: {rules[0].text} (repeat every "
                  f"{spec['rule']['repeat']}, resolved notice on)\n", highlight=False)
    seen = 0
    with tempfile.TemporaryDirectory() as tmp:
        for step in spec["steps"]:
            at = start + timedelta(hours=step["hour"])
            body = Path(tmp) / f"step-{step['hour']}.json"
            body.write_text(json.dumps({"offers": [listed[m] for m in step["listed"]]}))
            cheapest = _store_step(cfg, source, body, at, spec["captured"])
            evaluate(engine, rules, now=at)
            notes = [n for n in notification_log(engine, limit=20) if n["id"] > seen]
            seen = max([seen, *(n["id"] for n in notes)])
            what = ", ".join(f"[bold]{n['kind'].upper()}[/bold] "
                             + n["title"].rsplit(" — ", 1)[-1] for n in reversed(notes))
            console.print(f"{at:%m-%d %H:%M}  {len(step['listed'])} listed, cheapest "
                          f"{money(cheapest)}/GPU-h  {what}", highlight=False)
            if pace:
                time.sleep(pace)
    console.print()
    names = [g.name for g in gpus.match_family("H100")]
    # the chart's dates are the staged day's (ending now), not the capture's: said so
    print_gpu_history(engine, "H100", names, start, until, "on_demand", staged=(
        f"staged: the prices are {source}'s capture of {spec['captured']}; their times are the "
        f"staged day above, {start:%m-%d %H:%M} to {until:%m-%d %H:%M} UTC"))


def _store_step(cfg: "Config", source: str, body: Path, at: datetime,
                captured: str) -> float | None:
    """Crawl one step's answer with the source's own parser and the pipelines of every
    crawl, recorded at the staged time `at` as replayed from the capture of `captured` (the
    prices are that capture's; only their timing is staged); the cheapest on-demand price
    per GPU it kept."""
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.parsing import ParseFailed, crawl_files

    settings = scrapy_settings(cfg)
    settings.set("GPURADAR_STAGED", {"captured": captured, "at": at}, priority="cmdline")
    try:
        records, _result = crawl_files(source, [body], settings)
    except ParseFailed as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    prices = [r["price_per_gpu_usd"] for r in records
              if "dropped" not in r and r.get("pricing") == "on_demand"]
    return min(prices) if prices else None
