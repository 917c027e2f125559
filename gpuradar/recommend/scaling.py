"""How much of N nodes x G accelerators a training job really gets: a scaling efficiency
from the links inside a node and between nodes, each factor a stated assumption with its
source (docs/recommend.md, "Plans with a deadline").

The MFU the user states (default 40 %) is what one well-linked node reaches; the factors
here only take away what more GPUs and more nodes cost on top of it.
"""

from __future__ import annotations

import math
from typing import Any

from gpuradar.core.interconnect import fast_inter, fast_intra

# -- inside a node ----------------------------------------------------------------------------
# NVLink/NVSwitch, Infinity Fabric, HCCS, TPU ICI, NeuronLink: 1.0. Published MFUs (Megatron-LM,
# Narayanan et al. 2021: 44-52 % on DGX A100 nodes; PaLM, Chowdhery et al. 2022: 46 % on TPU
# v4 ICI) were measured on such nodes, so the user's MFU already includes these links.
INTRA_FAST = 1.0
# PCIe with the whole model on every GPU (data parallel): the gradients cross PCIe once per
# optimizer step (an all-reduce of 2 bytes x N), against 6 x N FLOPs for every token of the
# step, so with gradient accumulation the link is rarely the limit. No measurement was found:
# an assumption of 10 % loss.
INTRA_PCIE_DATA_PARALLEL = 0.9
# PCIe with the model sharded (ZeRO-3/FSDP; only with --any-interconnect): every micro-batch
# gathers the weights over a link 7x slower than NVLink (NVIDIA: NVLink 4 900 GB/s vs PCIe
# Gen5 x16 128 GB/s). No measurement was found: an assumption of half the throughput.
INTRA_PCIE_SHARDED = 0.5

# -- between nodes ----------------------------------------------------------------------------
# A GPU fabric (InfiniBand, EFA, RoCE RDMA, GPUDirect-TCPX/TCPXO, TPU ICI): 0.95 per doubling
# of nodes. NVIDIA's MLPerf Training v3.1 GPT-3 175B runs scaled from 3,584 to 10,752 H100s on
# Quantum-2 InfiniBand at 93 % efficiency (NVIDIA developer blog, "Setting New Records at
# Data Center Scale Using NVIDIA H100 GPUs and NVIDIA Quantum-2 InfiniBand", 2023-11): 0.955
# per doubling; MosaicML measured 14.4x on 16 nodes of 8 A100 (2022), 0.97 per doubling.
# RoCE: "near-linear scaling comparable to InfiniBand when properly configured" (SC25 INDIS,
# "Scaling LLM Training Using RDMA over Converged Ethernet").
PER_DOUBLING_FABRIC = 0.95
# Plain Ethernet (TCP sockets, no RDMA): PyTorch FSDP on 2-8 nodes of 8 H100 ran 26-57x
# slower than over InfiniBand (J. Zhang, "InfiniBand vs Ethernet for Multi-Node LLM
# Fine-Tuning", Azure ND H100 v5, 2026). The best case, 1/26, is applied on top of the
# fabric figure; such plans are only made with --any-interconnect.
ETHERNET_FACTOR = 1 / 26


def inter_node_status(info: dict[str, Any]) -> str:
    """"fabric" (a GPU fabric between machines), "none" (the provider's documentation for
    the instance family states none), or "unknown" (nobody says)."""
    if fast_inter(info):
        return "fabric"
    return "none" if info.get("basis") == "published" else "unknown"


def efficiency(info: dict[str, Any], nodes: int, gpus_per_node: int,
               sharded: bool) -> tuple[float, list[str]]:
    """The share of the per-GPU rate N nodes x G GPUs keep, and what was assumed."""
    notes: list[str] = []
    eff = 1.0
    if gpus_per_node > 1 and not fast_intra(info):
        eff *= INTRA_PCIE_SHARDED if sharded else INTRA_PCIE_DATA_PARALLEL
        if info.get("intra_node") != "pcie":
            notes.append("GPU links unknown: PCIe assumed")
    if nodes > 1:
        eff *= PER_DOUBLING_FABRIC ** math.log2(nodes)
        status = inter_node_status(info)
        if status != "fabric":
            eff *= ETHERNET_FACTOR
            notes.append("no RDMA between machines: Ethernet assumed" if status == "none"
                         else "fabric between machines unknown: Ethernet assumed")
    return eff, notes
