"""Whether a job fits one offer: how many of its GPUs (or how many machines of it) the job
needs, whether the links between them are fast enough to shard over
(gpuradar.core.interconnect), what that configuration costs per hour, and how long the job
takes on it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FxTable
from gpuradar.core.interconnect import fast_intra, interconnect_for
from gpuradar.recommend.job import TRAINING, stack_note
from gpuradar.recommend.memory import MemoryEstimate, estimate_memory, usable_gb
from gpuradar.recommend.precision import compute_precision
from gpuradar.recommend.scaling import efficiency, inter_node_status

if TYPE_CHECKING:  # the offers come from storage; recommending needs no database
    from gpuradar.storage.offers import OfferRow


def offer_interconnect(offer: OfferRow) -> dict[str, Any]:
    """What the providers' tables say now. The pipeline's attributes["interconnect"] is a copy
    of the table's answer when the offer was stored, and an unchanged offer keeps its row:
    a copy written before a table was corrected (an ND96is_H100_v5 stored as PCIe by an old
    catch-all row) must not outlive the correction."""
    return interconnect_for(offer.source, offer.instance_type, offer.gpu, offer.gpu_count)


def gpu_memory_of(offer: OfferRow) -> float | None:
    """Nominal per-GPU memory: the catalog's (providers report GiB, MiB or usable memory),
    else what the provider reported."""
    entry = catalog.CATALOG.get(offer.gpu)
    if entry is not None:
        return entry.memory_gb
    return offer.gpu_memory_gb or None


def tflops_of(gpu: str, precision: str) -> tuple[float | None, str]:
    """Dense TFLOPS of `gpu` in the format the job computes in, and which figure it is. The
    catalog's bf16 column holds the FP16 tensor rate for chips without bf16 (Volta, Turing)."""
    entry = catalog.CATALOG.get(gpu)
    if entry is None:
        return None, "GPU not in the catalog"
    if precision == "fp8":
        if entry.fp8_tflops:
            return entry.fp8_tflops, "fp8"
        if entry.bf16_tflops:
            return entry.bf16_tflops, "bf16 (no published fp8 rate)"
        return None, "no published throughput"
    if entry.bf16_tflops:
        return entry.bf16_tflops, precision
    return None, "no published throughput"


@dataclass
class Fit:
    offer: OfferRow
    gpu_memory_gb: float
    gpus_needed: int
    nodes: int
    gpus: int
    per_gpu_gb: float
    usable_gb: float
    interconnect: dict[str, Any]
    sharded: bool
    hourly_usd: float | None
    hourly_quoted: float
    flags: list[str] = field(default_factory=list)
    tflops: float | None = None
    tflops_basis: str = ""
    wall_hours: float | None = None
    total_usd: float | None = None
    spot: dict[str, Any] | None = None
    also_in: list[str] = field(default_factory=list)
    precision: str | None = None  # the format it computes in (a fallback is flagged)
    efficiency: float = 1.0  # scaling efficiency of nodes x GPUs (gpuradar.recommend.scaling)
    spot_overhead: float = 0.0  # extra time on spot (interruptions, checkpoints)
    deadline_hours: float | None = None

    @property
    def per_gpu_hour_usd(self) -> float | None:
        return self.hourly_usd / self.gpus if self.hourly_usd is not None else None

    def as_dict(self) -> dict[str, Any]:
        o = self.offer
        return {
            "source": o.source, "region": o.region, "zone": o.zone,
            "instance_type": o.instance_type, "pricing": o.pricing, "gpu": o.gpu,
            "gpu_count": o.gpu_count, "nodes": self.nodes, "gpus": self.gpus,
            "gpu_memory_gb": self.gpu_memory_gb, "gpus_needed": self.gpus_needed,
            "per_gpu_need_gb": round(self.per_gpu_gb, 2),
            "usable_gb_per_gpu": round(self.usable_gb, 2), "sharded": self.sharded,
            "interconnect": self.interconnect, "hourly_usd": _round(self.hourly_usd),
            "hourly_quoted": _round(self.hourly_quoted), "currency": o.currency,
            "per_gpu_hour_usd": _round(self.per_gpu_hour_usd),
            "tflops_per_gpu": self.tflops, "tflops_basis": self.tflops_basis,
            "wall_hours": _round(self.wall_hours), "total_usd": _round(self.total_usd),
            "available": o.available, "available_count": o.available_count,
            "observed_at": o.observed_at, "spot": self.spot, "flags": self.flags,
            "also_in_regions": self.also_in, "url": o.url,
            "precision": self.precision, "scaling_efficiency": round(self.efficiency, 4),
            "inter_node": inter_node_status(self.interconnect) if self.nodes > 1 else None,
            "rdma": self.rdma, "spot_overhead": self.spot_overhead or None,
            "meets_deadline": None if self.deadline_hours is None or self.wall_hours is None
            else self.wall_hours <= self.deadline_hours + 1e-9,
        }

    @property
    def rdma(self) -> bool | None:
        """A GPU fabric between machines: True, False where the provider states none, None
        where nobody says."""
        status = inter_node_status(self.interconnect)
        return {"fabric": True, "none": False}.get(status)


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


class _NoFit(Exception):
    """Why the job does not run on an offer: raised by a step of `fit_offer`, which returns
    it as its reason, so each step says no where it decides."""


def fit_offer(offer: OfferRow, est: MemoryEstimate, *, any_interconnect: bool = False,
              max_nodes: int = 16, deadline_hours: float | None = None,
              spot_overhead: float = 0.0) -> tuple[Fit | None, str]:
    """(Fit, "") when the job runs on this offer (or on several machines of it), else
    (None, the reason). The chip must compute in a format the job can use
    (gpuradar.recommend.precision). Sharding a training job needs NVLink-class links inside a
    machine; more than one machine needs a GPU fabric (InfiniBand, EFA, RDMA) between them.
    `any_interconnect` accepts slower links, flagged. With `deadline_hours` (and a job
    size), the fewest machines (up to `max_nodes`) that finish in time: the cheapest plan of
    this offer, since every machine more costs scaling efficiency. `spot_overhead` is the
    extra time a spot offer takes for interruptions and checkpoints."""
    try:
        memory = gpu_memory_of(offer)
        if not memory:
            raise _NoFit("GPU memory unknown")
        per_node = _gpus_per_machine(offer)
        est, precision, flags = _in_computed_format(est, offer.gpu)
        needed = _gpus_needed(est, memory)
        info = offer_interconnect(offer)
        nodes = _machines_for(needed, per_node, max_nodes)
        sharded = needed > 1
        flags += _sharding_flags(info, est, per_node, sharded, any_interconnect)
        spot = spot_overhead if offer.pricing == "spot" else 0.0
        tflops, basis = tflops_of(offer.gpu, precision)
        if deadline_hours is not None:
            nodes, reason = _plan_nodes(est, nodes, per_node, sharded, info, tflops,
                                        max_nodes, deadline_hours, spot, any_interconnect)
            if reason:
                raise _NoFit(reason)
        flags += _machines_flags(offer, info, nodes, any_interconnect)
    except _NoFit as no:
        return None, str(no)
    flags += _stack_flags(offer, est)
    gpus = nodes * per_node
    fit = Fit(offer=offer, gpu_memory_gb=memory, gpus_needed=needed, nodes=nodes, gpus=gpus,
              per_gpu_gb=est.per_gpu_gb(gpus if sharded else 1), usable_gb=usable_gb(memory),
              interconnect=info, sharded=sharded, hourly_usd=_times(offer.price_usd, nodes),
              hourly_quoted=offer.price * nodes, flags=flags, precision=precision,
              spot_overhead=spot, deadline_hours=deadline_hours)
    flags += _inferred_links_flags(info, sharded)
    _add_timing(fit, est, tflops, basis)
    return fit, ""


def _gpus_per_machine(offer: OfferRow) -> int:
    """Whole GPUs per machine: a share of one cannot be planned with."""
    count = float(offer.gpu_count or 0)
    if count < 1 or count != int(count):
        raise _NoFit("shared or fractional GPU")
    return int(count)


def _in_computed_format(est: MemoryEstimate, gpu: str,
                        ) -> tuple[MemoryEstimate, str, list[str]]:
    """The estimate in the format the job computes in on `gpu` (redone when that is a
    fallback from fp8: weights and, serving, the KV cache then take 16 bits), the format,
    and what the user must be told about it."""
    compute = compute_precision(est.job, gpu)
    if compute.precision is None:
        raise _NoFit(f"accelerator computes in {compute.refused}")
    if est.job.precision == "fp8" and compute.precision != "fp8":
        est = estimate_memory(replace(est.job, precision="bf16", mfu=est.job.mfu))
    return est, compute.precision, [compute.flag] if compute.flag else []


def _gpus_needed(est: MemoryEstimate, memory: float) -> int:
    needed = est.gpus_needed(memory)
    if needed is None:
        raise _NoFit(f"activations alone ({est.per_gpu_fixed_gb:.1f} GB) exceed one "
                     f"{memory:g} GB GPU")
    return needed


def _sharding_flags(info: dict[str, Any], est: MemoryEstimate, per_node: int, sharded: bool,
                    any_interconnect: bool) -> list[str]:
    """What sharding over this machine's GPU links means: nothing on NVLink-class links;
    slower links refuse training (unless `any_interconnect`) and are flagged otherwise."""
    if not sharded or per_node <= 1 or fast_intra(info):
        return []
    link = info.get("intra_node") or "unknown links"
    training = est.job.task in TRAINING
    if training and not any_interconnect:
        raise _NoFit("sharding needs NVLink/NVSwitch; " + (
            "GPUs linked by PCIe" if link == "pcie" else "GPU links not published"))
    return [f"sharded over {'PCIe' if link == 'pcie' else 'unpublished links'}: "
            + ("slow" if training else "use pipeline parallelism")]


def _machines_for(needed: int, per_node: int, max_nodes: int) -> int:
    """Machines of this offer that hold `needed` GPUs, at most `max_nodes`."""
    nodes = max(1, math.ceil(needed / per_node))
    if nodes > max_nodes:
        raise _NoFit(f"needs more than {max_nodes} machines")
    return nodes


def _machines_flags(offer: OfferRow, info: dict[str, Any], nodes: int,
                    any_interconnect: bool) -> list[str]:
    """What running on `nodes` machines means: several need a GPU fabric between them
    (slower ones refused unless `any_interconnect`, then flagged), and capacity for them."""
    if nodes <= 1:
        return []
    flags = []
    fabric = inter_node_status(info)
    if fabric != "fabric":
        if not any_interconnect:
            raise _NoFit("needs several machines; no InfiniBand/EFA/RDMA between them"
                         if fabric == "none" else
                         "needs several machines; fabric between them unknown")
        flags.append("several machines without a published GPU fabric: slow")
    available = offer.available_count
    flags.append(f"{nodes} machines" + (
        "" if available is not None and available >= nodes else " (capacity not checked)"))
    return flags


def _stack_flags(offer: OfferRow, est: MemoryEstimate) -> list[str]:
    """The software-stack caveat of the GPU's vendor for this task, if any."""
    entry = catalog.CATALOG.get(offer.gpu)
    note = stack_note(est.job.task, entry.vendor) if entry is not None else None
    return [note] if note else []


def _inferred_links_flags(info: dict[str, Any], sharded: bool) -> list[str]:
    """A sharded job's links guessed from the GPU's form factor (no table names them)."""
    if info.get("basis") == "form factor" and sharded:
        return [f"{info.get('intra_node')} inferred from the form factor"]
    return []


def _times(price: float | None, nodes: int) -> float | None:
    return price * nodes if price is not None else None


def _add_timing(fit: Fit, est: MemoryEstimate, tflops: float | None, basis: str) -> None:
    """The fit's throughput, scaling efficiency, wall time and total cost, with the
    assumptions they rest on flagged."""
    fit.tflops, fit.tflops_basis = tflops, basis
    if basis.startswith("bf16 (no"):
        fit.flags.append("no published fp8 rate: bf16 rate")
    fit.efficiency, assumed = efficiency(fit.interconnect, fit.nodes, fit.gpus // fit.nodes,
                                         fit.sharded)
    fit.flags.extend(a for a in assumed if a not in fit.flags)
    fit.wall_hours = wall_hours(est, fit.gpus, tflops, fit.efficiency, fit.spot_overhead)
    if fit.wall_hours is not None and fit.hourly_usd is not None:
        fit.total_usd = fit.wall_hours * fit.hourly_usd


def wall_hours(est: MemoryEstimate, gpus: int, tflops: float | None, eff: float,
               spot_overhead: float = 0.0) -> float | None:
    """Hours the job takes on `gpus` accelerators of `tflops` at scaling efficiency `eff`,
    plus the spot overhead; None without a job size (or a throughput for --tokens)."""
    job = est.job
    if job.gpu_hours is not None:
        hours = job.gpu_hours / gpus / eff
    elif est.flops is not None and tflops:
        hours = est.flops / (gpus * tflops * 1e12 * job.mfu * eff) / 3600
    else:
        return None
    return hours * (1 + spot_overhead)


def _plan_nodes(est: MemoryEstimate, first: int, per_node: int, sharded: bool,
                info: dict[str, Any], tflops: float | None, max_nodes: int,
                deadline_hours: float, spot: float, any_interconnect: bool) -> tuple[int, str]:
    """The fewest machines, from `first` (what the memory needs), that finish within the
    deadline; (0, reason) when none up to `max_nodes` does."""
    if est.job.tokens is None and est.job.gpu_hours is None:
        return 0, "a deadline needs the job size (--tokens or --gpu-hours)"
    fabric = inter_node_status(info)
    for nodes in range(first, max_nodes + 1):
        if nodes > 1 and fabric != "fabric" and not any_interconnect:
            if nodes == first:  # the memory alone needs them: fit_offer says why not
                return first, ""
            return 0, ("misses the deadline on one machine; " + (
                "no InfiniBand/EFA/RDMA between machines" if fabric == "none"
                else "fabric between machines unknown"))
        eff, _ = efficiency(info, nodes, per_node, sharded)
        hours = wall_hours(est, nodes * per_node, tflops, eff, spot)
        if hours is None:
            return 0, "no published throughput: cannot plan for the deadline"
        if hours <= deadline_hours + 1e-9:
            return nodes, ""
    return 0, f"misses the deadline on up to {max_nodes} machines (--max-nodes)"


def price_in(fit: Fit, currency: str, fx: FxTable, per_gpu: bool = False) -> float | None:
    """The configuration's hourly price in `currency`: as quoted when the offer is quoted in
    it (no FX error), else through USD with the stored rate."""
    divisor = fit.gpus if per_gpu else 1
    if fit.offer.currency.upper() == currency.upper():
        return fit.hourly_quoted / divisor
    if fit.hourly_usd is None:
        return None
    usd_per_unit = fx.to_usd(1.0, currency)
    if not usd_per_unit:
        return None
    return fit.hourly_usd / usd_per_unit / divisor
