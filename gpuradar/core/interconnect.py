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

import re
from dataclasses import dataclass

from gpuradar.core import gpus

__all__ = ["INTER_FAST", "INTRA_FAST", "fast_inter", "fast_intra", "interconnect_for"]

# Links fast enough to shard a model across the GPUs of one machine.
INTRA_FAST = frozenset({"nvswitch", "nvlink", "infinity-fabric", "hccs"})
# GPU fabrics between machines (GPUDirect RDMA or equivalent).
INTER_FAST = frozenset({"infiniband", "efa", "rdma", "gpudirect-tcpx", "gpudirect-tcpxo"})


def fast_intra(info: dict | None) -> bool:
    return bool(info) and info.get("intra_node") in INTRA_FAST


def fast_inter(info: dict | None) -> bool:
    return bool(info) and info.get("inter_node") in INTER_FAST


@dataclass(frozen=True)
class _Family:
    pattern: re.Pattern[str]
    intra: str | None  # for 2+ GPUs; "" = decide from the form factor
    inter: str | None
    note: str


def _f(pattern: str, intra: str | None, inter: str | None, note: str) -> _Family:
    return _Family(re.compile(pattern, re.IGNORECASE), intra, inter, note)


# First match wins. One family per line reads as a table.
# fmt: off
_TABLE: dict[str, tuple[_Family, ...]] = {
    "aws": (
        _f(r"^p6e-gb\d00\.", "nvswitch", "efa", "GB200 NVL72 UltraServer, EFA"),
        _f(r"^p6-b\d00\.48xlarge$", "nvswitch", "efa", "HGX B200/B300 NVSwitch, EFA"),
        _f(r"^p5(e|en)?\.48xlarge$", "nvswitch", "efa", "HGX H100/H200 NVSwitch, 3200 Gbps EFA"),
        _f(r"^p5\.4xlarge$", None, None, "one H100"),
        _f(r"^p4de?\.24xlarge$", "nvswitch", "efa", "HGX A100 NVSwitch, 400 Gbps EFA"),
        _f(r"^p3dn\.24xlarge$", "nvlink", "efa", "V100 NVLink, 100 Gbps EFA"),
        _f(r"^p3\.", "nvlink", None, "V100 NVLink, no EFA"),
        _f(r"^(g\d\w*|gr\d\w*|p2)\.", "pcie", None, "PCIe GPUs"),
    ),
    "azure": (
        _f(r"_ND\w*GB[23]00", "nvswitch", "infiniband", "GB200/GB300 NVL72, InfiniBand"),
        _f(r"_ND\d+is?r_(H100|H200)_v5$", "nvswitch", "infiniband",
           "NVLink 4 via NVSwitch, 400 Gb/s InfiniBand per GPU"),
        _f(r"_ND\d+isr_MI300X_v5$", "infinity-fabric", "infiniband",
           "Infinity Fabric, 400 Gb/s InfiniBand per GPU"),
        _f(r"_ND\d+am?sr_(A100_)?v4$", "nvswitch", "infiniband",
           "NVLink 3 via NVSwitch, 200 Gb/s InfiniBand per GPU"),
        _f(r"_ND\d+rs_v2$", "nvlink", "infiniband", "V100 NVLink, 100 Gb/s InfiniBand"),
        _f(r"_NC\d+adis_H100_v5$", "nvlink", None, "H100 NVL pair with NVLink bridge"),
        _f(r"_NC\d+ads_A100_v4$", "pcie", None, "A100 PCIe"),
        _f(r"_NC\d+r\w*_v3$", "pcie", "infiniband", "V100 PCIe, RDMA InfiniBand"),
        _f(r"_N[CVDP]\w*$", "pcie", None, "PCIe GPUs"),
    ),
    "gcp": (
        _f(r"^a4x-", "nvswitch", "rdma", "GB200 NVL72, GPUDirect-RDMA (RoCE)"),
        _f(r"^a4-highgpu-8g$", "nvswitch", "rdma", "B200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        _f(r"^a3-ultragpu-8g$", "nvswitch", "rdma", "H200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        _f(r"^a3-megagpu-8g$", "nvswitch", "gpudirect-tcpxo", "H100 NVSwitch, GPUDirect-TCPXO"),
        _f(r"^a3-highgpu-8g$", "nvswitch", "gpudirect-tcpx", "H100 NVSwitch, GPUDirect-TCPX"),
        _f(r"^a3-(high|edge)gpu-", "nvswitch", None, "H100 NVSwitch"),
        _f(r"^a2-(high|mega|ultra)gpu-", "nvswitch", None, "A100 NVSwitch"),
        _f(r"^g\d-", "pcie", None, "PCIe GPUs"),
    ),
    "oci": (
        _f(r"^BM\.GPU\.GB[23]00", "nvswitch", "rdma", "NVL72 rack, RDMA cluster network"),
        _f(r"^BM\.GPU\.(H100|H200|B200|B300|A100-v2)\.8$", "nvswitch", "rdma",
           "HGX NVSwitch, RDMA cluster network"),
        _f(r"^BM\.GPU4\.8$", "nvswitch", "rdma", "HGX A100 NVSwitch, RDMA cluster network"),
        _f(r"^BM\.GPU\.MI3\d\dX\.8$", "infinity-fabric", "rdma",
           "Infinity Fabric, RDMA cluster network"),
        _f(r"^(BM|VM)\.GPU3\.", "nvlink", None, "V100 SXM2 NVLink"),
        _f(r"^(BM|VM)\.GPU\.(A10|L40S|RTXPRO)\.", "pcie", None, "PCIe GPUs"),
    ),
    "lambda": (
        _f(r"v100", "nvlink", None, "V100 NVLink"),
        _f(r"sxm", "nvswitch", None,
           "HGX SXM NVSwitch; InfiniBand only on 1-Click Clusters"),
        _f(r"pcie", "pcie", None, "PCIe GPUs"),
    ),
    "tencent": (
        _f(r"^HCC", "", "rdma", "HCC GPU cluster, RDMA network"),
        _f(r"^GT4\.", "nvswitch", None, "A100 NVSwitch"),
        _f(r"^GN10X", "nvlink", None, "V100 NVLink"),
        _f(r"^(PNV|GN\d|GI\d|GNV)", "pcie", None, "PCIe GPUs"),
    ),
    "alibaba": (
        _f(r"^ecs\.scc", "", "rdma", "SCC cluster, RDMA network"),
        _f(r"^ecs\.(ebm)?gn7e?[-.]", "nvswitch", None, "A100 NVSwitch"),
        _f(r"^ecs\.(ebm)?gn6[ve][-.]", "nvlink", None, "V100 NVLink"),
        _f(r"^ecs\.(ebm|s)?gn\d+i[s]?[-.]", "pcie", None, "PCIe GPUs"),
    ),
    "huawei": (
        _f(r"^k\w*\..*pod", "hccs", "rdma", "Ascend HCCS, RoCE pod network"),
        _f(r"^p2vs?\.", "nvlink", None, "V100 NVLink"),
        _f(r"^p3\.", "nvlink", None, "NVLink"),
        _f(r"^(p2s|pi\d\w*|g\d\w*)\.", "pcie", None, "PCIe GPUs"),
    ),
}
# fmt: on


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
    count = float(gpu_count or 0)
    for family in _TABLE.get(source.lower(), ()):
        if not family.pattern.search(instance_type or ""):
            continue
        if count < 2:
            intra = None
        elif family.intra == "":
            intra = _by_form_factor(gpu, count)[0]
        else:
            intra = family.intra
        return {"intra_node": intra, "inter_node": family.inter, "basis": "published",
                "note": family.note}
    if count < 2:
        return {"intra_node": None, "inter_node": None, "basis": "unknown",
                "note": "one GPU (or a share of one)"}
    intra, basis, note = _by_form_factor(gpu, count)
    return {"intra_node": intra, "inter_node": None, "basis": basis, "note": note}
