"""How the GPUs of an offer talk to each other: what providers publish per instance family.

Why this exists: a job whose model or optimizer state is sharded across GPUs (ZeRO-3/FSDP,
tensor parallelism) moves the whole model over the GPU-to-GPU link at every step. Over
NVLink/NVSwitch that is fine; over PCIe it is several times slower, and across machines it
needs InfiniBand, EFA or RDMA networking. Price listings rarely say which an offer has, so
this module reads what each provider publishes about its instance families, and falls back
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

Each provider's table lives in its declaration (gpuradar.core.providers.<provider>), every
row with a comment naming the provider page that states it. An instance type no row matches
is decided by the GPU's form factor (basis "form factor") or stays unknown (None, basis
"unknown"): a table never ends in a catch-all row, because a guess that looks published is
worse than "unknown" (an 8-GPU NVSwitch machine recorded as PCIe is ranked as one).
"""

from __future__ import annotations

import functools

from gpuradar.core import gpus
from gpuradar.core.providers import BY_NAME

__all__ = ["INTER_FAST", "INTRA_FAST", "fast_inter", "fast_intra", "interconnect_for"]

# Links fast enough to shard a model across the GPUs of one machine.
INTRA_FAST = frozenset({"nvswitch", "nvlink", "infinity-fabric", "hccs", "ici", "neuronlink"})
# GPU fabrics between machines (GPUDirect RDMA or equivalent).
INTER_FAST = frozenset({"infiniband", "efa", "rdma", "gpudirect-tcpx", "gpudirect-tcpxo",
                        "ici"})


def fast_intra(info: dict | None) -> bool:
    return info is not None and info.get("intra_node") in INTRA_FAST


def fast_inter(info: dict | None) -> bool:
    return info is not None and info.get("inter_node") in INTER_FAST


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
    provider = BY_NAME.get(source.lower())
    for fam in provider.interconnect if provider is not None else ():
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
