"""How the GPUs of an offer talk to each other: what providers publish per instance family.

Why this exists: a job whose model or optimizer state is sharded across GPUs (ZeRO-3/FSDP,
tensor parallelism) moves the whole model over the GPU-to-GPU link at every step. Over
NVLink/NVSwitch that is fine; over PCIe it is several times slower, and across machines it
needs InfiniBand, EFA or RDMA networking. Price listings rarely say which an offer has, so
this module keeps what each provider publishes about its instance families, and falls back
on what the GPU's form factor implies.

`interconnect_for(source, instance_type, gpu, gpu_count)` answers with

* ``intra_node``: ``"nvswitch"`` | ``"nvlink"`` | ``"infinity-fabric"`` (AMD xGMI) |
  ``"hccs"`` (Huawei Ascend) | ``"pcie"`` | None (single GPU, or not known);
* ``inter_node``: ``"infiniband"`` | ``"efa"`` | ``"rdma"`` (RoCE cluster networks) |
  ``"gpudirect-tcpx"`` / ``"gpudirect-tcpxo"`` (GCP A3 High / A3 Mega) | None (no GPU fabric
  between machines, or not published);
* ``basis``: ``"published"`` (the provider's instance documentation), ``"form factor"``
  (inferred from the catalog: SXM/OAM modules only exist on NVLink / Infinity Fabric
  baseboards, PCIe cards have no switch fabric) or ``"unknown"``;
* ``note``: a short human explanation.

Sources (provider instance-type documentation, 2024-2026): AWS EC2 accelerated computing
pages (P4d/P4de: NVSwitch, 400 Gbps EFA; P5/P5e/P5en: NVSwitch, 3200 Gbps EFA; P6-B200/B300:
NVLink 5 NVSwitch, EFA; P3dn: NVLink, 100 Gbps EFA; P3: NVLink, no EFA). Azure ND-series
pages (ND A100 v4 / ND H100 v5 / ND H200 v5: NVLink via NVSwitch plus InfiniBand per GPU; ND
MI300X v5: Infinity Fabric plus InfiniBand; NDv2: NVLink plus InfiniBand; an "r" in an NC size
means RDMA InfiniBand). GCP accelerator-optimized machines (A2/A3/A4: NVSwitch; A3 High
GPUDirect-TCPX, A3 Mega GPUDirect-TCPXO, A3 Ultra and A4 GPUDirect-RDMA over RoCE). OCI
bare-metal GPU shapes (RDMA cluster networks for BM.GPU4.8, A100-v2, H100, H200, B200, GB200,
MI300X). Lambda (8x SXM on-demand instances: NVSwitch; InfiniBand only on 1-Click
Clusters, which are not listed as offers). Tencent HCC families (RDMA cluster), GT4 (A100
NVSwitch), GN10X/GN10Xp (V100 NVLink). Alibaba gn6v/gn6e (V100 NVLink), gn7/gn7e/ebmgn7*
(A100 NVSwitch), scc* (RDMA cluster). Huawei p2v/p2vs/p3 (NVLink), p2s/pi* (PCIe).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gpuradar.core import gpus
from gpuradar.core.sources import spider_classes

__all__ = ["INTER_FAST", "INTRA_FAST", "Family", "family", "fast_inter", "fast_intra",
           "interconnect_for"]

# Links fast enough to shard a model across the GPUs of one machine.
INTRA_FAST = frozenset({"nvswitch", "nvlink", "infinity-fabric", "hccs", "ici", "neuronlink"})
# GPU fabrics between machines (GPUDirect RDMA or equivalent).
INTER_FAST = frozenset({"infiniband", "efa", "rdma", "gpudirect-tcpx", "gpudirect-tcpxo",
                        "ici"})


def fast_intra(info: dict | None) -> bool:
    return bool(info) and info.get("intra_node") in INTRA_FAST


def fast_inter(info: dict | None) -> bool:
    return bool(info) and info.get("inter_node") in INTER_FAST


@dataclass(frozen=True)
class Family:
    pattern: re.Pattern[str]
    intra: str | None  # for 2+ GPUs; "" = decide from the form factor
    inter: str | None
    note: str


def family(pattern: str, intra: str | None, inter: str | None, note: str) -> Family:
    """One row of a spider's `interconnect` table (first match wins)."""
    return Family(re.compile(pattern, re.IGNORECASE), intra, inter, note)




def _by_form_factor(gpu: str, count: float) -> tuple[str | None, str, str]:
    """(intra link, basis, note) inferred from the catalog's form factor."""
    entry = gpus.CATALOG.get(gpu)
    form = entry.form_factor if entry else ""
    if form in ("SXM", "superchip"):
        return "nvlink", "form factor", "SXM modules sit on an NVLink baseboard"
    if form == "OAM":
        return "infinity-fabric", "form factor", "OAM modules sit on an Infinity Fabric board"
    if form == "NVL":
        if count <= 2:
            return "nvlink", "form factor", "NVL cards are sold as NVLink-bridged pairs"
        return "pcie", "form factor", "NVLink bridges join pairs only; PCIe across pairs"
    if form == "PCIe":
        return "pcie", "form factor", "PCIe cards"
    return None, "unknown", "not published"


def interconnect_for(source: str, instance_type: str, gpu: str, gpu_count: float) -> dict:
    """What links the GPUs of one offer, and the machine to others (see the module doc)."""
    return dict(_interconnect(source, instance_type, gpu, gpu_count))


@functools.lru_cache(maxsize=8192)
def _interconnect(source: str, instance_type: str, gpu: str, gpu_count: float) -> dict:
    """interconnect_for, cached: a crawl asks about the same few instance types once per
    offer (the caller gets a copy, so the cached answer cannot be changed)."""
    count = float(gpu_count or 0)
    cls = spider_classes().get(source.lower())
    for fam in getattr(cls, "interconnect", ()):
        if not fam.pattern.search(instance_type or ""):
            continue
        if count < 2:
            intra = None
        elif fam.intra == "":
            intra = _by_form_factor(gpu, count)[0]
        else:
            intra = fam.intra
        return {"intra_node": intra, "inter_node": fam.inter, "basis": "published",
                "note": fam.note}
    if count < 2:
        return {"intra_node": None, "inter_node": None, "basis": "unknown",
                "note": "one GPU (or a share of one)"}
    intra, basis, note = _by_form_factor(gpu, count)
    return {"intra_node": intra, "inter_node": None, "basis": basis, "note": note}
