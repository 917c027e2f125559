"""Ranking the offers a job fits on: the filters (budget, spot, region, providers, age),
spot interruption signals and warnings, and the options that are never better than another
one (dominated), which are left out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FxTable
from gpuradar.core.units import MAINLAND_ALIASES, region_matches
from gpuradar.recommend.fit import Fit, fit_offer, price_in
from gpuradar.recommend.job import TRAINING, Budget, Job
from gpuradar.recommend.memory import MemoryEstimate, estimate_memory
from gpuradar.storage.offers import OfferRow

_BAND_RISK = {"<5%": "low", "5-10%": "low", "10-15%": "medium", "15-20%": "high",
              ">20%": "high"}
DOMINATED = "dominated: same provider and GPU, as many GPUs or more, for more"
DOMINATED_SIZED = "dominated: same provider and GPU, slower and dearer in total"


def spot_signal(offer: OfferRow) -> dict[str, Any] | None:
    """The interruption signal a spot offer carries: AWS Spot Advisor band, Vast.ai host
    reliability; None for on-demand offers."""
    if offer.pricing != "spot":
        return None
    attrs = offer.attributes or {}
    band = attrs.get("interruption")
    if band:
        return {"signal": f"interruption {band}/month (AWS Spot Advisor)",
                "risk": _BAND_RISK.get(str(band), "unknown")}
    reliability = attrs.get("reliability")
    if isinstance(reliability, int | float):
        risk = "low" if reliability >= 0.99 else "medium" if reliability >= 0.95 else "high"
        return {"signal": f"host reliability {reliability:.2f} (Vast.ai)", "risk": risk}
    if attrs.get("derived"):
        return {"signal": "spot price derived, no interruption data", "risk": "unknown"}
    return {"signal": "no interruption signal published", "risk": "unknown"}


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


@dataclass
class Options:
    """Everything besides the job that decides which offers are shown."""

    budget: Budget | None = None
    spot: str = "ok"  # ok | no | only
    regions: tuple[str, ...] = ()  # globs; `mainland` = mainland China (units.region_matches)
    providers: tuple[str, ...] = ()
    max_age: timedelta | None = timedelta(days=2)
    any_interconnect: bool = False
    max_nodes: int = 16
    resumable: bool = True
    top: int = 10
    #: Software stacks the job can run on (gpuradar.core.gpus.FRAMEWORKS). The default is
    #: PyTorch as shipped for GPUs and NPUs (CUDA, ROCm, Ascend's CANN through torch_npu,
    #: Gaudi's SynapseAI bridge); `--framework XLA/JAX` is needed for TPUs, `Neuron` for
    #: Trainium: code written for them, not for PyTorch on GPUs.
    frameworks: tuple[str, ...] = ("CUDA", "ROCm", "CANN", "SynapseAI")


# Methods built on CUDA-only libraries run on no other stack, whatever --framework says:
# QLoRA's 4-bit layers come from bitsandbytes (CUDA, and a ROCm build; see job.py).
METHOD_FRAMEWORKS: dict[str, frozenset[str]] = {"qlora": frozenset({"CUDA", "ROCm"})}
# Inference chips: AWS sells Inferentia for inference and Trainium for training
# (aws.amazon.com/ai/machine-learning/inferentia; awsdocs Neuron "Inferentia2 architecture").
INFERENCE_ONLY = frozenset({"INFERENTIA", "INFERENTIA2"})


def runs_on(offer: OfferRow, job: Job, opts: Options) -> str | None:
    """Why the job cannot run on the offer's accelerator, or None when it can: the
    accelerator's frameworks must meet the job's (an unknown accelerator is let through)."""
    entry = catalog.CATALOG.get(offer.gpu)
    if entry is None or not entry.frameworks:
        return None
    if job.task in TRAINING and entry.name in INFERENCE_ONLY:
        return "is built for inference, not training"
    stacks = set(entry.frameworks)
    method = METHOD_FRAMEWORKS.get(job.task)
    if method is not None and not stacks & method:
        return f"{job.task} needs {' or '.join(sorted(method))}"
    if not stacks & set(opts.frameworks):
        return f"runs {', '.join(entry.frameworks)}, not {', '.join(opts.frameworks)}"
    return None


@dataclass
class Recommendation:
    estimate: MemoryEstimate
    fits: list[Fit]
    excluded: dict[str, int]
    considered: int
    warnings: list[str]
    hardware: list[dict[str, Any]]


def hardware_table(est: MemoryEstimate, training: bool) -> list[dict[str, Any]]:
    """GPUs needed for each memory size in the catalog (what kind of machine fits)."""
    rows = []
    for memory in sorted({g.memory_gb for g in catalog.CATALOG.values() if g.memory_gb >= 16}):
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
    return bool(fit.spot) and any(w.startswith("bad idea") for w in fit.spot["warnings"])


def _rank_key(fit: Fit, sized: bool) -> tuple:
    """Cheapest first; spot offers that are a bad idea for this job after all others."""
    hourly = fit.hourly_usd if fit.hourly_usd is not None else math.inf
    if sized:
        total = fit.total_usd if fit.total_usd is not None else math.inf
        wall = fit.wall_hours if fit.wall_hours is not None else math.inf
        return (bad_idea(fit), total, wall, hourly)
    return (bad_idea(fit), hourly, -fit.gpus)


def recommend(offers: Sequence[OfferRow], job: Job, opts: Options, fx: FxTable,
              now: datetime) -> Recommendation:
    """Rank the offers the job fits on: the memory estimate, the configuration each offer
    gives (gpuradar.recommend.fit), the filters, then cheapest first without the options
    another one beats on every count (`_dominated`)."""
    est = estimate_memory(job)
    excluded: dict[str, int] = {}
    fits: list[Fit] = []

    def drop(reason: str, n: int = 1) -> None:
        excluded[reason] = excluded.get(reason, 0) + n

    mainland = any(p.lower() in MAINLAND_ALIASES for p in opts.regions)
    for offer in offers:
        if offer.available is False:
            drop("unavailable")
            continue
        if opts.providers and offer.source not in opts.providers:
            drop("other provider")
            continue
        if not region_matches(offer.region, offer.zone, opts.regions, offer.source):
            drop("outside mainland China" if mainland else "other region")
            continue
        if opts.spot == "no" and offer.pricing == "spot":
            drop("spot (--spot no)")
            continue
        if opts.spot == "only" and offer.pricing != "spot":
            drop("on-demand (--spot only)")
            continue
        unsupported = runs_on(offer, job, opts)
        if unsupported is not None:
            drop(f"accelerator {unsupported} (--framework)")
            continue
        seen = offer.observed_at
        if opts.max_age is not None and seen is not None and now - seen > opts.max_age:
            drop("stale (source not crawled recently)")
            continue
        fit, reason = fit_offer(offer, est, any_interconnect=opts.any_interconnect,
                                max_nodes=opts.max_nodes)
        if fit is None:
            drop(reason)
            continue
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
    for fit in fits:
        signal = spot_signal(fit.offer)
        if signal is not None:
            signal["warnings"] = spot_warnings(signal, job, fit.wall_hours, fit.nodes,
                                               opts.resumable)
            fit.spot = signal
    fits.sort(key=lambda f: _rank_key(f, sized))
    fits = _collapse_regions(fits)
    kept = _undominated(fits, sized)
    if len(kept) < len(fits):
        drop(DOMINATED_SIZED if sized else DOMINATED, len(fits) - len(kept))
    shown = kept[: opts.top] if opts.top else kept
    warnings = _warnings(est, kept, excluded, opts)
    # Said once for the options shown (each also carries it as a flag).
    warnings += sorted({f"{flag} (options flagged)" for f in shown for flag in f.flags
                        if "bitsandbytes" in flag})
    return Recommendation(est, shown, excluded, len(offers), warnings,
                          hardware_table(est, job.task in TRAINING))


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
    if any(x is None or y is None for x, y in pairs):
        return False
    # Prices and times are computed in floating point: equal within a part in 10^9.
    return (all(x <= y * (1 + 1e-9) for x, y in pairs)
            and any(x < y * (1 - 1e-9) for x, y in pairs))


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
            ": " + "; ".join(f"{n} {r}" for r, n in sorted(excluded.items(),
                                                              key=lambda kv: -kv[1])[:4])
            if excluded else " (crawl first: `gpuradar crawl`)"))
    if job.task == "inference" and job.tokens is not None:
        out.append("inference time assumes batched throughput at the stated utilisation; "
                   "single-stream decoding is memory-bandwidth bound and slower")
    return out
