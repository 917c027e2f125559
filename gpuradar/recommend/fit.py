"""Whether a job fits one offer: how many of its GPUs (or how many machines of it) the job
needs, whether the links between them are fast enough to shard over
(gpuradar.core.interconnect), what that configuration costs per hour, and how long the job
takes on it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FxTable
from gpuradar.core.interconnect import fast_inter, fast_intra, interconnect_for
from gpuradar.recommend.job import TRAINING, stack_note
from gpuradar.recommend.memory import MemoryEstimate, usable_gb
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
    """Dense TFLOPS the job runs at on `gpu`, and which figure it is."""
    entry = catalog.CATALOG.get(gpu)
    if entry is None:
        return None, "GPU not in the catalog"
    if precision == "fp8":
        if entry.fp8_tflops:
            return entry.fp8_tflops, "fp8"
        if entry.bf16_tflops:
            return entry.bf16_tflops, "bf16 (no published fp8)"
        return None, "no published throughput"
    if entry.bf16_tflops:
        return entry.bf16_tflops, "bf16"
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
        }


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def fit_offer(offer: OfferRow, est: MemoryEstimate, *, any_interconnect: bool = False,
              max_nodes: int = 16) -> tuple[Fit | None, str]:
    """(Fit, "") when the job runs on this offer (or on several machines of it), else
    (None, the reason). Sharding a training job needs NVLink-class links inside a machine;
    more than one machine needs a GPU fabric (InfiniBand, EFA, RDMA) between them.
    `any_interconnect` accepts slower links, flagged."""
    memory = gpu_memory_of(offer)
    if not memory:
        return None, "GPU memory unknown"
    count = float(offer.gpu_count or 0)
    if count < 1 or count != int(count):
        return None, "shared or fractional GPU"
    per_node = int(count)
    needed = est.gpus_needed(memory)
    if needed is None:
        return None, (f"activations alone ({est.per_gpu_fixed_gb:.1f} GB) exceed a "
                      f"{memory:g} GB GPU")
    info = offer_interconnect(offer)
    flags: list[str] = []
    training = est.job.task in TRAINING
    nodes = max(1, math.ceil(needed / per_node))
    if nodes > max_nodes:
        return None, f"needs more than {max_nodes} machines"
    sharded = needed > 1
    if sharded and per_node > 1 and not fast_intra(info):
        link = info.get("intra_node") or "unknown links"
        if training and not any_interconnect:
            return None, "sharding needs NVLink/NVSwitch; " + (
                "GPUs linked by PCIe" if link == "pcie" else "GPU links not published")
        flags.append(f"sharded over {'PCIe' if link == 'pcie' else 'unpublished links'}: "
                     + ("slow" if training else "use pipeline parallelism"))
    if nodes > 1:
        if not fast_inter(info):
            if not any_interconnect:
                return None, "needs several machines; no InfiniBand/EFA/RDMA between them"
            flags.append("several machines without a published GPU fabric: slow")
        available = offer.available_count
        flags.append(f"{nodes} machines" + (
            "" if available is not None and available >= nodes else " (capacity not checked)"))
    entry = catalog.CATALOG.get(offer.gpu)
    note = stack_note(est.job.task, entry.vendor) if entry is not None else None
    if note:
        flags.append(note)
    gpus = nodes * per_node
    hourly_usd = offer.price_usd * nodes if offer.price_usd is not None else None
    fit = Fit(offer=offer, gpu_memory_gb=memory, gpus_needed=needed, nodes=nodes, gpus=gpus,
              per_gpu_gb=est.per_gpu_gb(gpus if sharded else 1), usable_gb=usable_gb(memory),
              interconnect=info, sharded=sharded, hourly_usd=hourly_usd,
              hourly_quoted=offer.price * nodes, flags=flags)
    if info.get("basis") == "form factor" and sharded:
        flags.append(f"{info.get('intra_node')} inferred from the form factor")
    _add_time(fit, est)
    return fit, ""


def _add_time(fit: Fit, est: MemoryEstimate) -> None:
    job = est.job
    precision = "bf16" if job.precision == "int4" or job.task == "qlora" else job.precision
    fit.tflops, fit.tflops_basis = tflops_of(fit.offer.gpu, precision)
    if fit.tflops_basis.startswith("bf16 (no"):
        fit.flags.append("no fp8: bf16 rate")
    if job.gpu_hours is not None:
        fit.wall_hours = job.gpu_hours / fit.gpus
    elif est.flops is not None and fit.tflops:
        rate = fit.gpus * fit.tflops * 1e12 * job.mfu
        fit.wall_hours = est.flops / rate / 3600
    if fit.wall_hours is not None and fit.hourly_usd is not None:
        fit.total_usd = fit.wall_hours * fit.hourly_usd


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
