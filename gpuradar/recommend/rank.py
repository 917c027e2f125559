"""Ranking the offers a job fits on: the filters (budget, spot, region, providers, age),
spot interruption signals and warnings, and the options that are never better than another
one (dominated), which are left out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FxTable
from gpuradar.core.pricing import OPEN_MARKET, label
from gpuradar.core.spot import offer_signal, risk_of, signal_of
from gpuradar.core.units import MAINLAND_ALIASES, region_matches
from gpuradar.recommend.fit import Fit, fit_offer, price_in
from gpuradar.recommend.job import TRAINING, Budget, Job, RecommendError
from gpuradar.recommend.memory import MemoryEstimate, estimate_memory
from gpuradar.recommend.spot_cost import spot_run

if TYPE_CHECKING:  # the offers come from storage; recommending needs no database
    from gpuradar.storage.offers import OfferRow

DOMINATED = "dominated: same provider and GPU, as many GPUs or more, for more"
DOMINATED_SIZED = "dominated: same provider and GPU, slower and dearer in total"


def spot_signal(offer: OfferRow) -> dict[str, Any] | None:
    """The interruption signal a spot offer carries (gpuradar.core.spot), with its source
    and date, and the risk it means; None for on-demand offers."""
    signal = offer_signal(offer.source, offer.pricing, offer.attributes)
    if signal is None:
        return None
    out: dict[str, Any] = {"signal": signal.label(), "source": signal.source,
                           "as_of": signal.as_of, "risk": "unknown"}
    reliability = (offer.attributes or {}).get("reliability")
    if signal.kind == "interruption rate":
        out["risk"] = risk_of(signal.monthly)
    elif signal.source == "Vast.ai" and isinstance(reliability, int | float):
        out["risk"] = ("low" if reliability >= 0.99 else "medium" if reliability >= 0.95
                       else "high")
    return out


def spot_warnings(signal: dict[str, Any], job: Job, wall_hours: float | None, nodes: int,
                  resumable: bool) -> list[str]:
    """When spot is a bad idea, and what to do on spot otherwise."""
    out: list[str] = []
    run = f"~{wall_hours:.1f} h" if wall_hours is not None else "a run of unknown length"
    if job.task == "inference":
        out.append("serving on spot: keep on-demand fallback capacity")
    elif not resumable and (wall_hours is None or wall_hours > 1):
        out.append(f"bad idea: the job cannot resume and {run} restarts from zero on any "
                   "interruption (AWS gives 2 minutes' notice; marketplaces may give none)")
    elif signal["risk"] == "high" and (wall_hours is None or wall_hours > 24):
        out.append(f"long run ({run}) on a frequently interrupted offer: checkpoint at least "
                   "hourly, or use on-demand")
    else:
        out.append("checkpoint at least hourly")
    if nodes > 1:
        out.append(f"{nodes} spot machines: losing any one stops the whole job")
    return out


#: PyTorch as shipped for GPUs and NPUs: CUDA, ROCm, Ascend's CANN (torch_npu), Gaudi's
#: SynapseAI bridge. What `recommend` considers unless --only says otherwise.
DEFAULT_STACKS = ("CUDA", "ROCm", "CANN", "SynapseAI")
#: What code written for a framework runs on (the stacks of gpuradar.core.gpus.FRAMEWORKS).
#: JAX's installation guide (docs.jax.dev, "Supported platforms") lists NVIDIA GPUs (CUDA),
#: Google Cloud TPUs and AMD GPUs (ROCm); AWS Neuron (awsdocs-neuron) runs Trainium and
#: Inferentia. A stack's own name means that stack.
FRAMEWORK_STACKS: dict[str, tuple[str, ...]] = {
    "pytorch": DEFAULT_STACKS, "torch": DEFAULT_STACKS,
    "jax": ("CUDA", "ROCm", "XLA/JAX"),
    "xla": ("XLA/JAX",), "xlajax": ("XLA/JAX",), "tpu": ("XLA/JAX",),
    "neuron": ("Neuron",),
    "cuda": ("CUDA",), "rocm": ("ROCm",), "cann": ("CANN",), "synapseai": ("SynapseAI",),
}


def framework_stacks(words: Sequence[str], only: bool = False) -> tuple[str, ...]:
    """The stacks a job may run on: PyTorch's (DEFAULT_STACKS) plus those of each named
    framework (`jax` adds TPUs, `neuron` Trainium and Inferentia), or with `only` exactly the
    named frameworks' stacks."""
    out: list[str] = [] if only else list(DEFAULT_STACKS)
    for word in words:
        key = "".join(c for c in word.lower() if c.isalnum())
        stacks = FRAMEWORK_STACKS.get(key)
        if stacks is None:
            known = ", ".join(["pytorch", "jax", "neuron", *catalog.FRAMEWORKS])
            raise RecommendError(f"unknown framework {word!r}; known: {known}")
        out.extend(stacks)
    if only and not out:
        raise RecommendError("--only restricts to the frameworks named with --framework; "
                             "name at least one")
    return tuple(dict.fromkeys(out))


@dataclass
class Options:
    """Everything besides the job that decides which offers are shown."""

    budget: Budget | None = None
    spot: str = "ok"  # ok | no | only
    #: Globs; `mainland` = mainland China (units.region_matches); `overseas` = outside it.
    regions: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    max_age: timedelta | None = timedelta(days=2)
    any_interconnect: bool = False
    max_nodes: int = 16
    resumable: bool = True
    top: int = 10
    #: Software stacks the job can run on (framework_stacks; gpuradar.core.gpus.FRAMEWORKS).
    frameworks: tuple[str, ...] = DEFAULT_STACKS
    #: Finish within this long: plans of N machines (up to max_nodes), cheapest first.
    deadline: timedelta | None = None
    #: Extra time on spot for interruptions, restarts and checkpoints (0.10 = +10 %).
    spot_overhead: float = 0.10
    #: The run's checkpoint interval and restart time, hours: the spot run model's inputs
    #: (gpuradar.recommend.spot_cost). Assumptions the user states; defaults: hourly checkpoints
    #: (what the spot warnings advise) and 10 minutes to restart.
    checkpoint_hours: float = 1.0
    restart_hours: float = 10 / 60
    #: The CUDA version the job's software needs (e.g. "12.4"): offers whose provider states
    #: a lower highest-supported version are left out.
    cuda: str | None = None


# Methods built on CUDA-only libraries run on no other stack, whatever --framework says:
# QLoRA's 4-bit layers come from bitsandbytes (CUDA, and a ROCm build; see job.py).
METHOD_FRAMEWORKS: dict[str, frozenset[str]] = {"qlora": frozenset({"CUDA", "ROCm"})}
# Inference chips: AWS sells Inferentia for inference and Trainium for training
# (aws.amazon.com/ai/machine-learning/inferentia; awsdocs Neuron "Inferentia2 architecture").
INFERENCE_ONLY = frozenset({"INFERENTIA", "INFERENTIA2"})


def runs_on(offer: OfferRow, job: Job, opts: Options) -> str | None:
    """Why the job cannot run on the offer's accelerator, or None when it can: the
    accelerator's frameworks must meet the job's (an unknown accelerator is let through).
    The reason completes "on an accelerator ..." ("16 on an accelerator built for
    inference, not training")."""
    entry = catalog.CATALOG.get(offer.gpu)
    if entry is None or not entry.frameworks:
        return None
    if job.task in TRAINING and entry.name in INFERENCE_ONLY:
        return "built for inference, not training"
    stacks = set(entry.frameworks)
    method = METHOD_FRAMEWORKS.get(job.task)
    if method is not None and not stacks & method:
        return f"without {' or '.join(sorted(method))}, which {job.task} needs"
    if not stacks & set(opts.frameworks):
        return f"running {', '.join(entry.frameworks)}, not {', '.join(opts.frameworks)}"
    return None


@dataclass
class Recommendation:
    estimate: MemoryEstimate
    fits: list[Fit]
    excluded: dict[str, int]
    considered: int
    warnings: list[str]
    hardware: list[dict[str, Any]]
    #: The best on-demand option of all that fit (shown or not): what spot is weighed against.
    on_demand: Fit | None = None


def hardware_table(est: MemoryEstimate, training: bool) -> list[dict[str, Any]]:
    """GPUs needed for each memory size in the catalog (what kind of machine fits)."""
    rows = []
    # every size the catalog sells, the small ones too: "1x 16+ GB" over a ranking that
    # starts with 8 GB cards the job does fit on read as a contradiction
    for memory in sorted({g.memory_gb for g in catalog.CATALOG.values() if g.memory_gb}):
        needed = est.gpus_needed(memory)
        if needed is None:
            rows.append({"gpu_memory_gb": memory, "gpus": None, "link": "does not fit"})
            continue
        if needed == 1:
            link = "one GPU"
        elif needed <= 8:
            link = ("NVLink/NVSwitch" if training else "NVLink, or PCIe with pipeline "
                    "parallelism")
        else:
            link = (f"{math.ceil(needed / 8)} machines of 8: NVLink/NVSwitch + "
                    "InfiniBand/EFA/RDMA")
        rows.append({"gpu_memory_gb": memory, "gpus": needed, "link": link,
                     "per_gpu_gb": round(est.per_gpu_gb(needed), 1)})
    return rows


def bad_idea(fit: Fit) -> bool:
    """A spot configuration the warnings call a bad idea (the job cannot resume)."""
    if not fit.spot:
        return False
    return any(w.startswith("bad idea") for w in fit.spot["warnings"])


def _rank_key(fit: Fit, sized: bool) -> tuple:
    """Cheapest first; spot offers that are a bad idea for this job after all others."""
    hourly = fit.hourly_usd if fit.hourly_usd is not None else math.inf
    if sized:
        total = fit.total_usd if fit.total_usd is not None else math.inf
        wall = fit.wall_hours if fit.wall_hours is not None else math.inf
        return (bad_idea(fit), total, wall, hourly)
    return (bad_idea(fit), hourly, -fit.gpus)


#: `--region overseas`: outside mainland China (the opposite of `mainland`).
OVERSEAS_ALIASES = frozenset({"overseas", "outside-china", "non-mainland"})


def parse_cuda(text: str) -> tuple[int, ...]:
    """'12.4' -> (12, 4); a number as Vast.ai sends it (12.2) reads the same."""
    parts = str(text).strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise RecommendError(f"CUDA version {text!r}: use e.g. 12.4")
    return tuple(int(p) for p in parts)


def cuda_fit(offer: OfferRow, need: tuple[int, ...], text: str) -> tuple[str | None, str | None]:
    """(flag, refusal) for `--cuda`: the highest CUDA version the machine's driver supports,
    where the provider states it (attributes["cuda"]: Vast.ai's `cuda_max_good`, AutoDL's
    `highest_cuda_version`). Not stated: kept, flagged, not assumed."""
    entry = catalog.CATALOG.get(offer.gpu)
    if entry is not None and "CUDA" not in (entry.frameworks or ()):
        return None, "on an accelerator without CUDA (--cuda)"
    stated = (offer.attributes or {}).get("cuda")
    if stated in (None, ""):
        return f"highest CUDA not stated (needs {text})", None
    try:
        have = parse_cuda(str(stated))
    except RecommendError:
        return f"highest CUDA unreadable ({stated!r})", None
    if have < need:
        return None, f"driver supports CUDA below {text} (--cuda)"
    return None, None


def _screen(offer: OfferRow, job: Job, opts: Options, need_cuda: Any,
            now: datetime) -> tuple[str | None, str | None]:
    """Why `offer` is left out before any fitting (None: it goes on), and the CUDA note a
    kept offer carries. The first reason that applies is the one counted."""
    regions = opts.regions
    mainland = any(p.lower() in MAINLAND_ALIASES for p in regions)
    overseas = any(p.lower() in OVERSEAS_ALIASES for p in regions)
    globs = tuple(p for p in regions if p.lower() not in OVERSEAS_ALIASES)
    if offer.available is False:
        return "unavailable", None
    if offer.pricing not in OPEN_MARKET:
        # A block booked ahead for fixed hours is not a machine to start now by the hour.
        return f"sold by reservation ({label(offer.pricing)})", None
    if opts.providers and offer.source not in opts.providers:
        return "other provider", None
    if overseas and region_matches(offer.region, offer.zone, ("mainland",), offer.source):
        return "in mainland China (--region overseas)", None
    if not region_matches(offer.region, offer.zone, globs, offer.source):
        return ("outside mainland China" if mainland else "other region"), None
    if opts.spot == "no" and offer.pricing == "spot":
        return "spot (--spot no)", None
    if opts.spot == "only" and offer.pricing != "spot":
        return "on-demand (--spot only)", None
    unsupported = runs_on(offer, job, opts)
    if unsupported is not None:
        return f"on an accelerator {unsupported} (--framework)", None
    cuda_note = None
    if need_cuda is not None:
        cuda_note, refused = cuda_fit(offer, need_cuda, opts.cuda or "")
        if refused:
            return refused, None
    seen = offer.observed_at
    if opts.max_age is not None and seen is not None and now - seen > opts.max_age:
        return STALE, None
    return None, cuda_note


STALE = "stale (data older than --max-age)"


def _max_age_hint(offers: Sequence[OfferRow], job: Job, opts: Options, fx: FxTable,
                  now: datetime) -> str:
    """When only stale data would fit: the --max-age that makes the answer non-empty,
    found by ranking again without the age limit (the user need not guess)."""
    again = recommend(offers, job, replace(opts, max_age=None), fx, now)
    seen = [f.offer.observed_at for f in again.fits if f.offer.observed_at is not None]
    if not seen:
        return ""
    newest = max(seen)
    days = math.ceil((now - newest).total_seconds() / 86400)
    return (f"; --max-age {days}d answers (the newest data that fits was seen "
            f"{newest:%Y-%m-%d})")


def _attach_spot(fits: list[Fit], job: Job, opts: Options) -> None:
    """Each spot option's interruption signal, what it means for this job and, for a job
    of known size, the whole run's expected interruptions, lost hours and cost
    (gpuradar.recommend.spot_cost) from the work itself (without --spot-overhead)."""
    deadline = opts.deadline.total_seconds() / 3600 if opts.deadline else None
    for fit in fits:
        signal = spot_signal(fit.offer)
        if signal is not None:
            if fit.wall_hours is not None and fit.hourly_usd is not None:
                signal["run"] = spot_run(
                    signal_of(fit.offer.attributes).monthly, fit.nodes,
                    fit.wall_hours / (1 + fit.spot_overhead), fit.hourly_usd,
                    opts.checkpoint_hours, opts.restart_hours, deadline)
            signal["warnings"] = spot_warnings(signal, job, fit.wall_hours, fit.nodes,
                                               opts.resumable)
            read = signal_of(fit.offer.attributes)
            if read.kind == "interruption rate" and read.monthly is None:
                # Azure's eviction band: shown, but with no period it is not a rate
                signal["warnings"].append(
                    f"{read.source} states no period for its band: not a rate, so the run "
                    "ranges from no interruption to unbounded")
            if fit.spot_overhead and fit.wall_hours is not None:
                signal["warnings"].append(f"time includes +{fit.spot_overhead:.0%} for "
                                          "interruptions and checkpoints (--spot-overhead)")
            fit.spot = signal


def recommend(offers: Sequence[OfferRow], job: Job, opts: Options, fx: FxTable,
              now: datetime) -> Recommendation:
    """Rank the offers the job fits on: the memory estimate, the configuration each offer
    gives (gpuradar.recommend.fit), the filters, then cheapest first without the options
    another one beats on every count (`_dominated`)."""
    est = estimate_memory(job)
    if opts.deadline is not None and job.tokens is None and job.gpu_hours is None:
        raise RecommendError("--deadline needs the job size: --tokens or --gpu-hours")
    excluded: dict[str, int] = {}
    fits: list[Fit] = []

    def drop(reason: str, n: int = 1) -> None:
        excluded[reason] = excluded.get(reason, 0) + n

    need_cuda = parse_cuda(opts.cuda) if opts.cuda else None
    deadline_hours = opts.deadline.total_seconds() / 3600 if opts.deadline else None
    for offer in offers:
        reason, cuda_note = _screen(offer, job, opts, need_cuda, now)
        if reason is not None:
            drop(reason)
            continue
        fit, reason = fit_offer(offer, est, any_interconnect=opts.any_interconnect,
                                max_nodes=opts.max_nodes, deadline_hours=deadline_hours,
                                spot_overhead=opts.spot_overhead)
        if fit is None:
            drop(reason)
            continue
        if cuda_note:
            fit.flags.append(cuda_note)
        if fit.hourly_usd is None:
            drop("no USD price")
            continue
        if opts.budget is not None:
            price = price_in(fit, opts.budget.currency, fx, opts.budget.per_gpu)
            if price is None or price > opts.budget.amount + 1e-9:
                drop("over budget")
                continue
        fits.append(fit)
    sized = job.tokens is not None or job.gpu_hours is not None
    _attach_spot(fits, job, opts)
    fits.sort(key=lambda f: _rank_key(f, sized))
    fits = _collapse_regions(fits)
    kept = _undominated(fits, sized)
    if len(kept) < len(fits):
        drop(DOMINATED_SIZED if sized else DOMINATED, len(fits) - len(kept))
    shown = kept[: opts.top] if opts.top else kept
    warnings = _warnings(est, kept, excluded, opts)
    if not kept and excluded.get(STALE) and opts.max_age is not None:
        hint = _max_age_hint(offers, job, opts, fx, now)
        warnings = [w + hint if w.startswith("no live offer fits") else w for w in warnings]
    # Said once for the options shown (each also carries it as a flag).
    warnings += sorted({f"{flag} (options flagged)" for f in shown for flag in f.flags
                        if "bitsandbytes" in flag})
    on_demand = next((f for f in kept if f.offer.pricing == "on_demand"), None)
    return Recommendation(est, shown, excluded, len(offers), warnings,
                          hardware_table(est, job.task in TRAINING), on_demand)


def _collapse_regions(fits: list[Fit]) -> list[Fit]:
    """One row per (source, instance type, pricing): the best region, the others listed."""
    kept: dict[tuple, Fit] = {}
    out: list[Fit] = []
    for fit in fits:
        o = fit.offer
        key = (o.source, o.instance_type, o.pricing, o.gpu, o.gpu_count)
        first = kept.get(key)
        if first is None:
            kept[key] = fit
            out.append(fit)
        else:
            first.also_in.append(o.region + (f"/{o.zone}" if o.zone else ""))
    return out


def _beats(a: Fit, b: Fit, sized: bool) -> bool:
    """Whether `a` is at least as good as `b` on everything the user asked about and better
    on one. Without a job size that is the price and the GPUs to manage (more GPUs buy
    nothing when no throughput is asked for); with one, total cost and wall time."""
    if set(a.flags) - set(b.flags) or (bad_idea(a) and not bad_idea(b)):
        return False
    if sized:
        pairs = [(a.total_usd, b.total_usd), (a.wall_hours, b.wall_hours)]
    else:
        pairs = [(a.hourly_usd, b.hourly_usd), (float(a.gpus), float(b.gpus))]
    known = [(x, y) for x, y in pairs if x is not None and y is not None]
    if len(known) < len(pairs):  # a figure unknown on either side: no comparison
        return False
    # Prices and times are computed in floating point: equal within a part in 10^9.
    return (all(x <= y * (1 + 1e-9) for x, y in known)
            and any(x < y * (1 - 1e-9) for x, y in known))


def _undominated(fits: list[Fit], sized: bool) -> list[Fit]:
    """The fits no other fit of the same provider, GPU model and pricing beats (`_beats`):
    "2x MI300X for $7/h" is never better than "1x MI300X for $3.50/h" when no throughput
    target is given. Other providers stay: where to rent is the user's choice."""
    groups: dict[tuple[str, str, str], list[Fit]] = {}
    for fit in fits:
        groups.setdefault((fit.offer.source, fit.offer.gpu, fit.offer.pricing), []).append(fit)
    losers = {id(b) for group in groups.values() for b in group
              if any(a is not b and _beats(a, b, sized) for a in group)}
    return [f for f in fits if id(f) not in losers]


def _warnings(est: MemoryEstimate, fits: list[Fit], excluded: dict[str, int],
              opts: Options) -> list[str]:
    out = []
    job = est.job
    if job.task in TRAINING and not job.checkpointing and est.per_gpu_fixed_gb > 20:
        out.append(f"activations take {est.per_gpu_fixed_gb:.0f} GB per GPU: "
                   "--grad-checkpointing cuts them to "
                   f"{estimate_memory(replace(job, grad_checkpointing=True)).per_gpu_fixed_gb:.1f}"
                   " GB for ~33 % more compute")
    if not fits:
        out.append("no live offer fits" + (
            ": " + " · ".join(f"{n} {r}" for r, n in sorted(excluded.items(),
                                                              key=lambda kv: -kv[1]))
            if excluded else " (crawl first: `gpuradar crawl`)"))
    if job.task == "inference" and job.tokens is not None:
        out.append("inference time assumes batched throughput at the stated utilisation; "
                   "single-stream decoding is memory-bandwidth bound and slower")
    return out
