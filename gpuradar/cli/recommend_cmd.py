"""`gpuradar recommend`: which live offers can run a given training or inference job."""


import math
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.markup import escape

from gpuradar.cli.common import (
    EXIT_FAILED,
    ConfigOpt,
    DbOpt,
    WideOpt,
    fail,
    get_config,
    get_engine,
)
from gpuradar.cli.output import Format, age, console, dump_json, emit, err_console, money
from gpuradar.core.clock import SYSTEM


def _split(values: list[str] | None) -> tuple[str, ...]:
    """Repeatable options that also take comma lists: --providers aws,gcp --providers oci."""
    return tuple(v.strip().lower() for raw in values or () for v in raw.split(",") if v.strip())


def _hours(h: float | None) -> str:
    if h is None:
        return "-"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} d"


def _gb(v: float) -> str:
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def _print_estimate(rec: Any, budget_text: str | None, fx_note: str | None) -> None:
    from gpuradar import recommend as rc

    est = rec.estimate
    job = est.job
    console.print(f"[bold]Job[/bold]: {escape(job.describe())}", highlight=False)
    console.print("[bold]Memory estimate[/bold] (GB = 10^9 bytes):", highlight=False)
    for (name, value), line in zip(est.parts.items(), est.formula, strict=False):
        shard = "" if name in est.shardable else "  [per GPU]"
        console.print(f"  {name:<12}{_gb(value):>9}   {line}{shard}", highlight=False,
                      markup=False)
    console.print(f"  {'total':<12}{_gb(est.total_gb):>9}   shardable over GPUs: "
                  f"{_gb(est.shardable_gb)}; held by every GPU: {_gb(est.per_gpu_fixed_gb)}",
                  highlight=False, markup=False)
    for note in est.assumptions:
        console.print(f"  - {note}", highlight=False, markup=False)
    groups: dict[int, list[float]] = {}
    for r in rec.hardware:
        if r["gpus"] is not None and r["gpus"] <= 128:
            groups.setdefault(r["gpus"], []).append(r["gpu_memory_gb"])
    if groups:
        shown = []
        for n in sorted(groups)[:8]:
            lo, hi = min(groups[n]), max(groups[n])
            if n == 1:
                shown.append(f"1x {lo:g}+ GB")
                continue
            text = f"{n}x {lo:g}" + (f"-{hi:g}" if hi > lo else "") + " GB"
            shown.append(text + (f" ({math.ceil(n / 8)} machines of 8)" if n > 8 else ""))
        console.print("[bold]Fits on[/bold]: " + "; ".join(shown), highlight=False)
        if max(groups) > 1:
            console.print("  - more than one GPU: " + (
                "state sharded (ZeRO-3/FSDP), so the GPUs need NVLink/NVSwitch; more than one "
                "machine also needs InfiniBand/EFA/RDMA between them"
                if job.task in rc.TRAINING else
                "weights sharded: NVLink, or PCIe with pipeline parallelism; several machines "
                "need InfiniBand/EFA/RDMA"), highlight=False)
    else:
        console.print("[bold]Fits on[/bold]: no GPU in the catalog (see warnings)",
                      highlight=False)
    if est.flops is not None:
        console.print(f"[bold]Compute[/bold]: {est.flops:.3g} FLOPs = {est.flops_formula} × "
                      f"{job.tokens:.3g} tokens, at {job.mfu:.0%} of each GPU's published "
                      "dense throughput (MFU)", highlight=False)
    elif job.gpu_hours is not None:
        console.print(f"[bold]Job size[/bold]: {job.gpu_hours:g} GPU-hours as measured on the "
                      "offered GPU (no speed adjustment; --tokens compares GPUs)",
                      highlight=False)
    if budget_text:
        scope = "per GPU" if budget_text.endswith("/GPU-h") else "for the whole configuration"
        console.print(f"[bold]Budget[/bold]: {budget_text} {scope}"
                      + (f" ({fx_note})" if fx_note else ""), highlight=False)


def _rows(rec: Any, now: datetime) -> list[dict[str, Any]]:
    from gpuradar import recommend as rc

    rows = []
    for i, fit in enumerate(rec.fits, 1):
        o = fit.offer
        count = f"{o.gpu_count:g}x {o.gpu}"
        if fit.nodes > 1:
            count = f"{fit.nodes} × {count}"
        notes = list(fit.flags)
        if fit.spot:
            notes.append(f"spot: {fit.spot['signal']}, risk {fit.spot['risk']}"
                         + (" (BAD IDEA, see below)" if rc.bad_idea(fit) else ""))
        if fit.also_in:
            notes.append(f"also {len(fit.also_in)} other region"
                         f"{'s' if len(fit.also_in) > 1 else ''}")
        rows.append({
            "rank": i, "source": o.source,
            "region": o.region + (f"/{o.zone}" if o.zone else ""),
            "instance": o.instance_type, "pricing": o.pricing.replace("_", "-"),
            "gpus": count,
            "memory": f"{_gb(fit.per_gpu_gb)}/{_gb(fit.usable_gb)}",
            "link": _link(fit.interconnect, o.gpu_count),
            "hourly": money(fit.hourly_usd),
            "quoted": money(fit.hourly_quoted, o.currency) if o.currency != "USD" else "",
            "wall": _hours(fit.wall_hours), "total": money(fit.total_usd),
            "rdma": ("-" if fit.nodes == 1 else
                     {True: "yes", False: "none stated", None: "unknown"}[fit.rdma]),
            "eff": f"{fit.efficiency:.0%}",
            "age": age(o.observed_at, now), "notes": "; ".join(notes),
        })
    return rows


def _link(info: dict[str, Any], gpu_count: float) -> str:
    """'nvswitch + infiniband', '-' for one GPU (nothing to link), 'unknown' where no source
    says how the GPUs of a multi-GPU offer are linked."""
    intra, inter = info.get("intra_node"), info.get("inter_node")
    text = intra or ("unknown" if float(gpu_count or 0) >= 2 else "-")
    return f"{text} + {inter}" if inter else text


# The panels of `recommend --help`: the job first, the model's details apart.
JOB, DETAILS, OFFERS, PLANS = ("Job", "Model details (default: from the size)", "Offers",
                                "Plans")


def _print_plan_assumptions(opts: Any, within: Any) -> None:
    from gpuradar.recommend import scaling

    console.print(f"[bold]Deadline[/bold]: {_hours(within.total_seconds() / 3600)}; plans of "
                  f"up to {opts.max_nodes} machines (--max-nodes), the fewest that finish "
                  "in time", highlight=False)
    console.print(f"  - scaling: x{scaling.PER_DOUBLING_FABRIC:g} per doubling of machines "
                  "over InfiniBand/EFA/RDMA; several machines need such a fabric; GPUs on "
                  f"PCIe x{scaling.INTRA_PCIE_DATA_PARALLEL:g} (data parallel); spot time "
                  f"+{opts.spot_overhead:.0%} (--spot-overhead); sources in docs/recommend.md",
                  highlight=False, markup=False)


# The options, by panel of `recommend --help`.
ParamsOpt = Annotated[str, typer.Option("--params", "-p", rich_help_panel=JOB,
                                        help="Model size: 7B, 70B, 1.5B, 350M.")]
TaskOpt = Annotated[str, typer.Option("--task", "-t", rich_help_panel=JOB,
                                      help="finetune | lora | qlora | pretrain | inference.")]
PrecisionOpt = Annotated[str, typer.Option(rich_help_panel=JOB, help="bf16 | fp8 | int4 (int4: "
                                           "inference; qlora is 4-bit anyway).")]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", rich_help_panel=JOB,
                                        help="Sequence length (tokens).", min=1)]
BatchOpt = Annotated[int, typer.Option(rich_help_panel=JOB, help="Micro-batch per GPU "
                                       "(training) or concurrent sequences (inference).",
                                       min=1)]
TokensOpt = Annotated[str | None, typer.Option(rich_help_panel=JOB, help="Job size in tokens "
                                               "(2B, 300B): ranks by total cost and wall "
                                               "time.")]
GpuHoursOpt = Annotated[float | None, typer.Option("--gpu-hours", rich_help_panel=JOB,
                                                   help="Job size in GPU-hours (more than "
                                                   "0).")]
CheckpointOpt = Annotated[bool | None, typer.Option(
    "--grad-checkpointing/--no-grad-checkpointing", rich_help_panel=DETAILS,
    help="Recompute activations: less memory, ~33 % more compute (default: on for qlora "
    "only).")]
LoraRankOpt = Annotated[int, typer.Option("--lora-rank", rich_help_panel=DETAILS,
                                          help="LoRA/QLoRA rank.", min=1)]
LayersOpt = Annotated[int | None, typer.Option(rich_help_panel=DETAILS, help="Transformer "
                                               "layers (default: from the size).", min=1)]
HiddenOpt = Annotated[int | None, typer.Option(rich_help_panel=DETAILS, help="Hidden size "
                                               "(default: from the size).", min=1)]
MfuOpt = Annotated[float, typer.Option(rich_help_panel=DETAILS, help="Assumed share of the "
                                       "published dense throughput achieved (MFU).")]
BudgetOpt = Annotated[str | None, typer.Option(rich_help_panel=OFFERS, help="Max price of the "
                                               "whole configuration: 2/h (USD), $2/h, ¥14/h, "
                                               "14CNY/h; $1/GPU-h per GPU.")]
SpotOpt = Annotated[str, typer.Option(rich_help_panel=OFFERS,
                                      help="ok (include spot, marked) | no | only.")]
RegionOpt = Annotated[list[str] | None, typer.Option(
    "--region", "-r", rich_help_panel=OFFERS, help="Region or zone glob (us-*, eu-west-?), or "
    "mainland / overseas (China). Repeatable.")]
ProvidersOpt = Annotated[list[str] | None, typer.Option(
    "--providers", "-s", rich_help_panel=OFFERS,
    help="Only these providers (aws,gcp or repeated).")]
TopOpt = Annotated[int, typer.Option(rich_help_panel=OFFERS, help="Options to show (0: all).",
                                     min=0)]
MaxAgeOpt = Annotated[str, typer.Option("--max-age", rich_help_panel=OFFERS, help="Ignore "
                                        "sources not crawled successfully within this long.")]
CudaOpt = Annotated[str | None, typer.Option(rich_help_panel=OFFERS, help="CUDA the job needs "
                                             "(12.4): drops machines stated to support "
                                             "less.")]
FrameworkOpt = Annotated[list[str] | None, typer.Option(
    "--framework", rich_help_panel=OFFERS, help="Also runs on: jax (GPUs, TPUs), neuron "
    "(Trainium, Inferentia). Repeatable.")]
OnlyOpt = Annotated[bool, typer.Option("--only", rich_help_panel=OFFERS,
                                       help="Only the --framework(s) named.")]
MaxNodesOpt = Annotated[int | None, typer.Option(
    "--max-nodes", rich_help_panel=PLANS, help="Most machines in one plan (16; 64 with "
    "--deadline).", min=1)]
DeadlineOpt = Annotated[str | None, typer.Option(
    rich_help_panel=PLANS, help="Finish within (30d, 72h): the cheapest plans of N machines "
    "that do; needs --tokens or --gpu-hours.")]
SpotOverheadOpt = Annotated[str, typer.Option(
    "--spot-overhead", rich_help_panel=PLANS, help="Extra time on spot for interruptions and "
    "restarts.")]
CheckpointEveryOpt = Annotated[str, typer.Option(
    "--checkpoint-every", rich_help_panel=PLANS, help="Checkpoint interval (spot: work "
    "lost per interruption).")]
RestartTimeOpt = Annotated[str, typer.Option(
    "--restart-time", rich_help_panel=PLANS, help="Time to resume after an "
    "interruption.")]
AnyInterconnectOpt = Annotated[bool, typer.Option(
    "--any-interconnect", rich_help_panel=PLANS, help="Also show sharded configurations over "
    "PCIe or unknown links.")]
NotResumableOpt = Annotated[bool, typer.Option(
    "--not-resumable", rich_help_panel=PLANS, help="The job cannot resume from a checkpoint "
    "(no spot over an hour).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output: the estimate, "
                                       "hardware and ranked options.")]


def _read_options(job: Any, budget: str | None, max_age: str, spot_overhead: str,
                  framework: list[str] | None, only: bool, cuda: str | None,
                  deadline: str | None, spot: str, providers: list[str] | None,
                  region: list[str] | None, any_interconnect: bool, max_nodes: int | None,
                  not_resumable: bool, top: int, checkpoint_every: str = "1h",
                  restart_time: str = "10m") -> Any:
    """The offer and plan options, checked in the order a user reads them (each mistake one
    line naming the option); the budget stays in the currency it was given in."""
    from gpuradar import recommend as rc
    from gpuradar.core.sources import price_sources

    try:
        limit = rc.parse_budget(budget) if budget else None
        age_limit = rc.parse_age(max_age)
        overhead = rc.parse_share(spot_overhead, "--spot-overhead")
        stacks = rc.framework_stacks(_split(framework), only)
        if cuda:
            rc.parse_cuda(cuda)
    except rc.RecommendError as exc:
        raise fail(str(exc)) from None
    try:
        within = rc.parse_age(deadline, "--deadline", "30d or 72h") if deadline else None
        checkpoint = rc.parse_age(checkpoint_every, "--checkpoint-every", "30m, 1h, 2h")
        restart = rc.parse_age(restart_time, "--restart-time", "10m, 30m, 1h")
    except rc.RecommendError as exc:
        raise fail(str(exc)) from None
    if checkpoint <= timedelta(0):
        raise fail(f"--checkpoint-every {checkpoint_every!r} must be longer than zero")
    if within is not None and within <= timedelta(0):  # 0 would mean no deadline at all
        raise fail(f"--deadline {deadline!r} must be longer than zero: use e.g. 30d or 72h")
    if within is not None and job.tokens is None and job.gpu_hours is None:
        raise fail("--deadline needs the job size: --tokens or --gpu-hours")
    if spot not in ("ok", "no", "only"):
        raise fail(f"--spot must be ok, no or only, not {spot!r}")
    chosen = _split(providers)
    unknown = [p for p in chosen if p not in price_sources()]
    if unknown:
        raise fail(f"unknown provider {unknown[0]!r}; known: {', '.join(price_sources())}")
    return rc.Options(budget=limit, spot=spot, regions=tuple(region or ()), providers=chosen,
                      max_age=age_limit, any_interconnect=any_interconnect,
                      max_nodes=max_nodes or (64 if within else 16),
                      resumable=not not_resumable, top=top, frameworks=stacks,
                      deadline=within, spot_overhead=overhead, cuda=cuda,
                      checkpoint_hours=checkpoint.total_seconds() / 3600,
                      restart_hours=restart.total_seconds() / 3600)


def _fx_note(fx: Any, limit: Any) -> str | None:
    """How a budget in another currency compares (fails when no rate is stored for it)."""
    if limit is None:
        return None
    if not fx.knows(limit.currency):
        raise fail(f"no exchange rate for {limit.currency}; run `gpuradar crawl fx`")
    if limit.currency == "USD":
        return None
    return (f"≈ {money(fx.to_usd(limit.amount, limit.currency))}; offers quoted in "
            f"{limit.currency} compare as quoted, others through the stored rate")


def _location_warning(regions: tuple[str, ...]) -> str | None:
    """Which half of the data a mainland/overseas region choice leaves."""
    from gpuradar import recommend as rc
    from gpuradar.core.units import MAINLAND_ALIASES

    if any(r.lower() in MAINLAND_ALIASES for r in regions):
        return ("data location: mainland China only (alibaba, tencent, huawei, autodl; their "
                "mainland regions)")
    if any(r.lower() in rc.OVERSEAS_ALIASES for r in regions):
        return ("data location: outside mainland China only (the mainland regions of alibaba, "
                "tencent, huawei and autodl left out)")
    return None


def _dump(rec: Any, limit: Any, fx: Any) -> None:
    """`--json`: the estimate, the hardware and the ranked options."""
    dump_json({"estimate": rec.estimate.as_dict(), "hardware": rec.hardware,
               "budget": None if limit is None else {
                   "amount": limit.amount, "currency": limit.currency,
                   "per_gpu": limit.per_gpu, "usd": fx.to_usd(limit.amount, limit.currency)},
               "options": [dict(f.as_dict(), rank=i) for i, f in enumerate(rec.fits, 1)],
               "on_demand": rec.on_demand.as_dict() if rec.on_demand else None,
               "considered": rec.considered, "excluded": rec.excluded,
               "warnings": rec.warnings})


def _print_options(rec: Any, job: Any, within: Any, now: datetime) -> None:
    """The ranked table, then what it leaves out: spot caveats, exclusions, warnings."""
    if rec.fits:
        sized = job.tokens is not None or job.gpu_hours is not None
        columns = [("rank", "#"), ("source", "source"), ("region", "region", 1),
                   ("instance", "instance"), ("pricing", "pricing"),
                   ("gpus", "GPUs"), ("memory", "GB/GPU need/usable", 5),
                   ("link", "interconnect", 4)]
        if within is not None:
            columns += [("rdma", "RDMA", 4), ("eff", "scaling", 5)]
        columns += [("hourly", "$/h"), ("quoted", "quoted", 3), ("wall", "time", 2),
                    ("total", "total $"), ("age", "age", 2), ("notes", "notes", 6)]
        title = "cheapest by " + ("estimated total cost" if sized else "hourly price")
        if within is not None:
            title = f"plans that finish within {_hours(within.total_seconds() / 3600)}"\
                ", cheapest first"
        emit(_rows(rec, now), columns, Format.table, title=title,
             prefixes={"instance": "Standard_"})
    spot_notes: dict[str, list[str]] = {}
    for i, fit in enumerate(rec.fits, 1):
        for w in (fit.spot or {}).get("warnings", ()):
            spot_notes.setdefault(w, []).append(f"#{i}")
    for w, ranks in spot_notes.items():
        console.print(f"spot ({', '.join(ranks)}): {w}", highlight=False, markup=False)
    _print_spot_runs(rec, within)
    if rec.excluded and rec.fits:  # with none, the warning below gives the reasons
        # reasons hold commas and semicolons themselves
        console.print("not shown: " + " · ".join(
            f"{n} {r}" for r, n in sorted(rec.excluded.items(), key=lambda kv: -kv[1])),
            highlight=False, markup=False)
    for w in rec.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)


def _span(pair: list[float | None], fmt: Any) -> str:
    """'0.03-0.05', '0.03 or more' (no upper bound), or one figure when both ends agree."""
    low, high = pair
    if low is None:
        return "never finishes"
    if high is None:
        return f"{fmt(low)} or more"
    return fmt(low) if fmt(low) == fmt(high) else f"{fmt(low)}-{fmt(high)}"


def _print_spot_runs(rec: Any, within: Any) -> None:
    """Each spot option's whole run, from its interruption signal (best to worst case of
    the signal), beside the best on-demand option (gpuradar.recommend.spot_cost)."""
    runs = [(i, f) for i, f in enumerate(rec.fits, 1) if (f.spot or {}).get("run")]
    if not runs:
        return
    first = runs[0][1].spot["run"]
    console.print(f"[bold]Spot runs[/bold] (checkpoint every "
                  f"{_hours(first['checkpoint_hours'])}, restart "
                  f"{_hours(first['restart_hours'])}; expected, from the signal's lowest to "
                  "its highest rate; model in docs/recommend.md):", highlight=False)
    for i, fit in runs:
        run = fit.spot["run"]
        line = (f"  #{i} {fit.offer.source} {fit.offer.instance_type}: "
                f"{_span(run['interruptions'], lambda v: f'{v:.2f}')} interruptions, "
                f"{_span(run['lost_hours'], _hours)} lost, "
                f"{_span(run['wall_hours'], _hours)} in all, "
                f"{_span(run['total_usd'], money)} total")
        if "p_deadline" in run:
            line += (f", finishes within {_hours(within.total_seconds() / 3600)}: "
                     f"{_span(run['p_deadline'], lambda v: f'{v:.0%}')}")
        line += f" — {fit.spot['signal']}"
        console.print(line, highlight=False, markup=False)
    od = rec.on_demand
    if od is None:
        console.print("  on-demand: no on-demand option fits", highlight=False, markup=False)
        return
    rank = next((f"#{i} " for i, f in enumerate(rec.fits, 1) if f is od), "")
    console.print(f"  on-demand: {rank}{od.offer.source} {od.offer.instance_type}: "
                  f"{_hours(od.wall_hours)}, {money(od.total_usd)} total, no interruptions",
                  highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    @app.command()
    def recommend(
        params: ParamsOpt, task: TaskOpt, precision: PrecisionOpt = "bf16",
        seq_len: SeqLenOpt = 2048, batch: BatchOpt = 1,
        grad_checkpointing: CheckpointOpt = None, lora_rank: LoraRankOpt = 16,
        layers: LayersOpt = None, hidden: HiddenOpt = None, tokens: TokensOpt = None,
        gpu_hours: GpuHoursOpt = None, mfu: MfuOpt = 0.4, budget: BudgetOpt = None,
        spot: SpotOpt = "ok", region: RegionOpt = None, providers: ProvidersOpt = None,
        top: TopOpt = 10, max_age: MaxAgeOpt = "2d", max_nodes: MaxNodesOpt = None,
        deadline: DeadlineOpt = None, spot_overhead: SpotOverheadOpt = "10%",
        checkpoint_every: CheckpointEveryOpt = "1h", restart_time: RestartTimeOpt = "10m",
        cuda: CudaOpt = None, any_interconnect: AnyInterconnectOpt = False,
        not_resumable: NotResumableOpt = False, framework: FrameworkOpt = None,
        only: OnlyOpt = False, config: ConfigOpt = None, database_url: DbOpt = None,
        as_json: JsonOpt = False, wide: WideOpt = False,
    ) -> None:
        """Which live offers can run a training or inference job, cheapest first: the GPU
        memory it needs (formula printed), the hardware that fits, and the offers that
        provide it, by hourly price or, with --tokens/--gpu-hours, by total cost."""
        from gpuradar import recommend as rc
        from gpuradar.core.currency import FxTable
        from gpuradar.storage.offers import live_offers, with_observed_at
        from gpuradar.storage.queries import last_observed, latest_fx

        try:
            job = rc.Job(params=rc.parse_count(params, "model size"), task=task.lower(),
                         precision=precision.lower(), seq_len=seq_len, batch=batch,
                         grad_checkpointing=grad_checkpointing, lora_rank=lora_rank,
                         layers=layers, hidden=hidden,
                         tokens=rc.parse_count(tokens, "tokens") if tokens else None,
                         gpu_hours=gpu_hours, mfu=mfu)
        except rc.RecommendError as exc:
            raise fail(str(exc)) from None
        opts = _read_options(job, budget, max_age, spot_overhead, framework, only, cuda,
                             deadline, spot, providers, region, any_interconnect, max_nodes,
                             not_resumable, top, checkpoint_every, restart_time)
        engine = get_engine(get_config(config, database_url), existing=True)
        fx = FxTable(latest_fx(engine))
        fx_note = _fx_note(fx, opts.budget)
        now = SYSTEM.now()
        # dated by what the data describes: a replay's capture time, not its replay
        seen = {source: o.at for source, o in last_observed(engine).items()}
        offers = with_observed_at(live_offers(engine, include_unavailable=True,
                                              with_attributes=True), seen)
        rec = rc.recommend(offers, job, opts, fx, now)
        location = _location_warning(opts.regions)
        if location:
            rec.warnings.insert(0, location)
        if as_json:
            _dump(rec, opts.budget, fx)
        else:
            limit = opts.budget
            _print_estimate(rec, limit.text() if limit else None, fx_note)
            if opts.deadline is not None:
                _print_plan_assumptions(opts, opts.deadline)
            _print_options(rec, job, opts.deadline, now)
        if not rec.fits:
            raise typer.Exit(EXIT_FAILED)
