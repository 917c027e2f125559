"""The one canonical accelerator catalog; every spider maps its GPU/TPU/NPU strings through here.

Accelerators, not only GPUs: Google's TPUs, AWS's Trainium and Inferentia, Intel's Gaudi and
Huawei's Ascend are rented beside GPUs and compared in the same unit (price per accelerator
per hour: a GPU, a TPU chip, a Trainium chip ...). Each entry says what it is (`vendor`,
`kind`: GPU, TPU or NPU -- NPU covers the other ML ASICs), its memory per chip and the
software stacks it runs (`frameworks`: CUDA, ROCm, XLA/JAX, Neuron, SynapseAI, CANN), which
is what decides whether a job can move to it at all. The class keeps its historical name
`Gpu`; `Accelerator` is the same class.

Why one module: GPU-name mapping is the most frequent bug class in price trackers. Each
provider spells the same card differently ("NVIDIA H100 80GB HBM3", "H100 SXM",
"nvidia-h100-80gb", "H100 (80 GB SXM5)"), and one card name can hide several variants that
differ in price and speed (A100 40 GB vs 80 GB, H100 SXM vs PCIe vs NVL). So:

* the catalog is data (`_GPUS`): one `Gpu` per variant, each listing the raw strings that
  providers really use for it (`aliases`);
* `lookup` normalises a raw string, matches it against those aliases, and uses the memory the
  provider reports to pick between variants. It never guesses: a string that matches nothing,
  or stays ambiguous, gives None and the caller keeps the raw name.

Conventions, in one place so spiders do not reinvent them:

* A bare name denotes a variant only where the providers that send it mean that variant:
  "H100" and "H200" are the SXM (HGX) boards on AWS, Azure ND, GCP and OCI, where PCIe and
  NVL cards are always labelled; "H800" and "A800" are the 8-GPU NVLink (SXM) servers Tencent
  and Alibaba sell (Tencent quotes its H800 at 1979 TFLOPS FP8, the SXM figure). AutoDL and
  Huawei do not say which board they use: a spider that knows it has a PCIe card must pass
  "... PCIe", which picks the PCIe variant.
* "A100", "V100" and "RTX 6000" need the memory: 40 vs 80 GB, 16 vs 32 GB, and Quadro RTX
  6000 (24 GB) vs RTX 6000 Ada (48 GB) vs RTX PRO 6000 (96 GB) are all real.
* Memory matches within +-10 %: providers report GiB, MiB, or usable rather than nominal
  memory (AWS reports the 24 GB L4 as 22.4 GiB; Vast.ai reports MB).
* TFLOPS are dense (not 2:4-sparse) figures from the vendor's datasheet or whitepaper; None
  when no dense figure is published (or, for fp8, when the GPU has no FP8).

Provider strings deliberately left unmatched (no public source says what they are):
Alibaba's internal GPUSpec names "GPU H", "L20N" and "G49" (Alibaba's instance-family pages
describe those GPUs by memory and TFLOPS only, never by model), Huawei's "nvidia-l2", and
AutoDL's "vGPU-32GB" (a slice of an unnamed card).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "CATALOG",
    "FRAMEWORKS",
    "KINDS",
    "MEMORY_TOLERANCE",
    "PRECISIONS",
    "VENDORS",
    "Accelerator",
    "Gpu",
    "families",
    "lookup",
    "match_family",
    "parse_count_and_name",
    "precision_support",
    "select",
    "suggest",
]

#: Who makes the chip.
VENDORS = ("NVIDIA", "AMD", "Google", "AWS", "Intel", "Huawei")
#: What it is: a GPU, a Google TPU, or another ML ASIC (Trainium, Inferentia, Gaudi, Ascend).
KINDS = ("GPU", "TPU", "NPU")
#: The software stacks a job must be written for: CUDA (NVIDIA), ROCm (AMD), XLA/JAX (TPU;
#: PyTorch/XLA and TensorFlow compile through XLA too), Neuron (AWS), SynapseAI (Gaudi),
#: CANN (Ascend).
FRAMEWORKS = ("CUDA", "ROCm", "XLA/JAX", "Neuron", "SynapseAI", "CANN")
_DEFAULT_FRAMEWORKS = {"NVIDIA": ("CUDA",), "AMD": ("ROCm",), "Google": ("XLA/JAX",),
                       "AWS": ("Neuron",), "Intel": ("SynapseAI",), "Huawei": ("CANN",)}
_DEFAULT_KIND = {"NVIDIA": "GPU", "AMD": "GPU", "Google": "TPU", "AWS": "NPU",
                 "Intel": "NPU", "Huawei": "NPU"}


@dataclass(frozen=True)
class Gpu:
    """One accelerator variant (a GPU, a TPU chip, an NPU): the unit prices are compared in."""

    name: str  # canonical id, e.g. "H100-SXM-80GB", "TPU-V5E"
    family: str  # what users type, e.g. "H100", "TPU-v5e"
    vendor: str  # one of VENDORS
    memory_gb: float  # per GPU / per chip
    architecture: str
    form_factor: str  # "SXM" | "PCIe" | "NVL" | "OAM" | "superchip" | "" (not tracked)
    bf16_tflops: float | None  # dense BF16 (FP16 tensor for pre-Ampere); None if unpublished
    fp8_tflops: float | None  # dense FP8; None if the chip has no FP8 or none is published
    aliases: tuple[str, ...] = ()  # raw strings providers really use for this variant
    kind: str = ""  # one of KINDS; "" = the vendor's usual kind
    frameworks: tuple[str, ...] | None = None  # None = the vendor's stack; () = none known

    def __post_init__(self) -> None:
        # Defaults by vendor keep the table short: every NVIDIA GPU runs CUDA, and so on.
        if not self.kind:
            object.__setattr__(self, "kind", _DEFAULT_KIND[self.vendor])
        if self.frameworks is None:
            object.__setattr__(self, "frameworks", _DEFAULT_FRAMEWORKS[self.vendor])


Accelerator = Gpu


# Memory reported by a provider matches a catalog entry within this fraction.
MEMORY_TOLERANCE = 0.10
# difflib ratio below which a "did you mean" suggestion is noise ('H10O' vs 'H100' is 0.75).
_SUGGEST_CUTOFF = 0.7

_NV, _AMD, _HW, _GOOGLE, _AWS, _INTEL = "NVIDIA", "AMD", "Huawei", "Google", "AWS", "Intel"

# Sources for the figures: NVIDIA datasheets (per-GPU figures for HGX/NVL72 systems are the
# system figure divided by the GPU count, halved to undo sparsity), NVIDIA Ampere/Ada/Blackwell
# whitepapers for GeForce and RTX cards (FP32-accumulate rates), AMD Instinct datasheets.
# One GPU per two lines reads as a table; the formatter would make it 600 lines.
# fmt: off
_GPUS: tuple[Gpu, ...] = (
    # -- NVIDIA Blackwell ---------------------------------------------------------------------
    Gpu("B200", "B200", _NV, 180, "Blackwell", "SXM", 2250, 4500,
        ("B200", "NVIDIA B200", "nvidia-b200", "NVIDIA B200 SXM6")),
    Gpu("B300", "B300", _NV, 288, "Blackwell Ultra", "SXM", 2250, 4500,
        ("B300", "NVIDIA B300", "NVIDIA B300 SXM6 AC")),
    Gpu("GB200", "GB200", _NV, 186, "Blackwell", "superchip", 2500, 5000,
        ("GB200", "NVIDIA GB200", "nvidia-gb200")),
    Gpu("GB300", "GB300", _NV, 288, "Blackwell Ultra", "superchip", 2500, 5000,
        ("GB300", "NVIDIA GB300", "nvidia-gb300")),
    # Server, Workstation and Max-Q editions share chip and memory: one entry. The datasheet
    # publishes only sparse FP4 "AI TOPS", so no dense BF16/FP8 figure.
    Gpu("RTX-PRO-6000", "RTX-PRO-6000", _NV, 96, "Blackwell", "PCIe", None, None,
        ("RTX PRO 6000", "RTX PRO 6000 WS", "RTX PRO 6000 S", "RTX PRO 6000 WK",
         "NVIDIA RTX PRO 6000 Blackwell Server Edition",
         "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
         "nvidia-rtx-pro-6000",  # GCP accelerator id
         "RTX 6000 96GB",  # GCP SKU description
         "RTXPRO",  # OCI shape GPU name; OCI sells only the RTX PRO 6000 under it
         "RTX 6000")),  # ambiguous: memory picks among the three "RTX 6000" cards
    # NVIDIA's MIG user guide ("Supported GPUs": RTX PRO 4500 Blackwell, GB203, 32GB) and
    # AWS's G7 page (32 GB per GPU). No dense BF16/FP8 figure was confirmed: None.
    Gpu("RTX-PRO-4500", "RTX-PRO-4500", _NV, 32, "Blackwell", "PCIe", None, None,
        ("RTX PRO 4500", "RTX PRO 4500 Blackwell",
         "NVIDIA RTX PRO 4500 Blackwell Server Edition", "NVIDIA RTX PRO 4500 Blackwell")),
    Gpu("RTX-5090", "RTX-5090", _NV, 32, "Blackwell", "PCIe", 209.5, None,
        ("RTX 5090", "NVIDIA GeForce RTX 5090")),
    # -- NVIDIA Hopper ------------------------------------------------------------------------
    Gpu("H200-SXM-141GB", "H200", _NV, 141, "Hopper", "SXM", 989.5, 1979,
        ("H200", "NVIDIA H200", "H200 SXM", "nvidia-h200-141gb", "Nvidia H200 141GB")),
    Gpu("H200-NVL-141GB", "H200", _NV, 141, "Hopper", "NVL", 835.5, 1670.5,
        ("H200 NVL", "NVIDIA H200 NVL")),
    # GCP's "H100 Mega" (a3-megagpu) and SKU "H100 80GB Plus" are this GPU in a machine with
    # more network; the GPU itself is the H100 SXM 80 GB.
    Gpu("H100-SXM-80GB", "H100", _NV, 80, "Hopper", "SXM", 989.5, 1979,
        ("H100", "NVIDIA H100", "H100 SXM", "H100 SXM5", "NVIDIA H100 SXM",
         "NVIDIA H100 80GB HBM3", "nvidia-h100-80gb", "Nvidia H100 80GB",
         "nvidia-h100-mega-80gb", "Nvidia H100 80GB Plus")),
    Gpu("H100-PCIE-80GB", "H100", _NV, 80, "Hopper", "PCIe", 756.5, 1513,
        ("H100 PCIE", "NVIDIA H100 PCIe")),
    Gpu("H100-NVL-94GB", "H100", _NV, 94, "Hopper", "NVL", 835.5, 1670.5,
        ("H100 NVL", "NVIDIA H100 NVL")),
    # Tencent's HCC H800 cluster is quoted at 1979 TFLOPS FP8 per GPU: the SXM figure.
    Gpu("H800-SXM-80GB", "H800", _NV, 80, "Hopper", "SXM", 989.5, 1979,
        ("H800", "NVIDIA H800", "nvidia-h800", "H800 SXM")),
    Gpu("H800-PCIE-80GB", "H800", _NV, 80, "Hopper", "PCIe", 756.5, 1513,
        ("H800 PCIE", "NVIDIA H800 PCIe")),
    Gpu("H20", "H20", _NV, 96, "Hopper", "SXM", 148, 296,
        ("H20", "NVIDIA H20")),
    Gpu("GH200-96GB", "GH200", _NV, 96, "Hopper", "superchip", 989.5, 1979,
        ("GH200", "NVIDIA GH200", "GH200 SXM")),
    # -- NVIDIA Ampere ------------------------------------------------------------------------
    # Bare "A100" is SXM4 on AWS, GCP, OCI, Lambda, Alibaba and Tencent; the memory picks
    # 40 vs 80 GB. GCP's "nvidia-tesla-a100" is always the 40 GB card (A2 standard).
    Gpu("A100-SXM-40GB", "A100", _NV, 40, "Ampere", "SXM", 312, None,
        ("A100", "NVIDIA A100", "nvidia-a100", "A100 SXM", "A100 SXM4", "NVIDIA A100 SXM",
         "NVIDIA A100-SXM4-40GB", "A100 SXM 40GB", "nvidia-tesla-a100", "Nvidia Tesla A100")),
    Gpu("A100-SXM-80GB", "A100", _NV, 80, "Ampere", "SXM", 312, None,
        ("A100", "NVIDIA A100", "nvidia-a100", "A100 SXM", "A100 SXM4", "NVIDIA A100 SXM",
         "NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb", "Nvidia A100 80GB",
         "A100-v2")),  # OCI BM.GPU.A100-v2.8
    Gpu("A100-PCIE-40GB", "A100", _NV, 40, "Ampere", "PCIe", 312, None,
        ("A100 PCIE", "NVIDIA A100-PCIE-40GB")),
    Gpu("A100-PCIE-80GB", "A100", _NV, 80, "Ampere", "PCIe", 312, None,
        ("A100 PCIE", "NVIDIA A100 80GB PCIe")),
    # A100 with an on-board BlueField-2 DPU (Vast.ai "A100X"): its own product, own family.
    Gpu("A100X", "A100X", _NV, 80, "Ampere", "PCIe", None, None,
        ("A100X",)),
    Gpu("A800-SXM-80GB", "A800", _NV, 80, "Ampere", "SXM", 312, None,
        ("A800", "NVIDIA A800", "nvidia-a800", "A800 SXM")),
    Gpu("A800-PCIE-80GB", "A800", _NV, 80, "Ampere", "PCIe", 312, None,
        ("A800 PCIE", "NVIDIA A800 80GB PCIe")),
    Gpu("A10", "A10", _NV, 24, "Ampere", "PCIe", 125, None,
        ("A10", "NVIDIA A10", "nvidia-a10")),
    Gpu("A10G", "A10G", _NV, 24, "Ampere", "PCIe", None, None,  # AWS-only; no datasheet
        ("A10G", "NVIDIA A10G")),
    Gpu("A40", "A40", _NV, 48, "Ampere", "PCIe", 149.7, None,
        ("A40", "NVIDIA A40")),
    Gpu("A16", "A16", _NV, 16, "Ampere", "PCIe", None, None,  # one of the board's four GPUs
        ("A16", "NVIDIA A16")),
    Gpu("A2", "A2", _NV, 16, "Ampere", "PCIe", 18, None,
        ("A2", "NVIDIA A2")),
    Gpu("RTX-A6000", "RTX-A6000", _NV, 48, "Ampere", "PCIe", 154.8, None,
        ("RTX A6000", "A6000", "NVIDIA RTX A6000")),
    Gpu("RTX-A5000", "RTX-A5000", _NV, 24, "Ampere", "PCIe", 111.1, None,
        ("RTX A5000", "A5000", "NVIDIA RTX A5000")),
    Gpu("RTX-A4000", "RTX-A4000", _NV, 16, "Ampere", "PCIe", 76.7, None,
        ("RTX A4000", "A4000", "NVIDIA RTX A4000")),
    Gpu("RTX-3090", "RTX-3090", _NV, 24, "Ampere", "PCIe", 71, None,
        ("RTX 3090", "NVIDIA GeForce RTX 3090")),
    Gpu("RTX-3080-TI", "RTX-3080-TI", _NV, 12, "Ampere", "PCIe", None, None,
        ("RTX 3080 Ti", "NVIDIA GeForce RTX 3080 Ti")),
    Gpu("RTX-3080", "RTX-3080", _NV, 10, "Ampere", "PCIe", 59.5, None,
        ("RTX 3080", "NVIDIA GeForce RTX 3080")),
    Gpu("RTX-3070", "RTX-3070", _NV, 8, "Ampere", "PCIe", 40.6, None,
        ("RTX 3070", "NVIDIA GeForce RTX 3070")),
    # -- NVIDIA Ada Lovelace ------------------------------------------------------------------
    Gpu("L40S", "L40S", _NV, 48, "Ada Lovelace", "PCIe", 362.05, 733,
        ("L40S", "NVIDIA L40S")),
    Gpu("L40", "L40", _NV, 48, "Ada Lovelace", "PCIe", 181.05, 362.1,
        ("L40", "NVIDIA L40")),
    # NVIDIA publishes no L20 datasheet outside China; figures from Alibaba's gn8is page.
    Gpu("L20", "L20", _NV, 48, "Ada Lovelace", "PCIe", 119, 237,
        ("L20", "NVIDIA L20")),
    Gpu("L4", "L4", _NV, 24, "Ada Lovelace", "PCIe", 121, 242.5,
        ("L4", "NVIDIA L4", "nvidia-l4")),
    Gpu("RTX-6000-ADA", "RTX-6000-ADA", _NV, 48, "Ada Lovelace", "PCIe", 364.2, 728.5,
        ("RTX 6000 Ada", "RTX 6000Ada", "NVIDIA RTX 6000 Ada Generation", "RTX 6000")),
    Gpu("RTX-4090", "RTX-4090", _NV, 24, "Ada Lovelace", "PCIe", 165.2, 330.3,
        ("RTX 4090", "NVIDIA GeForce RTX 4090")),
    # China-market cut-down 4090 (fewer SMs): not the same card, no published tensor figure.
    Gpu("RTX-4090D", "RTX-4090D", _NV, 24, "Ada Lovelace", "PCIe", None, None,
        ("RTX 4090D", "RTX 4090 D", "NVIDIA GeForce RTX 4090 D")),
    Gpu("RTX-4080", "RTX-4080", _NV, 16, "Ada Lovelace", "PCIe", 97.5, 194.9,
        ("RTX 4080", "NVIDIA GeForce RTX 4080")),
    # -- NVIDIA Turing and older (bf16 column holds the FP16 tensor figure; none if no tensor
    # cores) --------------------------------------------------------------------------------
    Gpu("QUADRO-RTX-6000", "QUADRO-RTX-6000", _NV, 24, "Turing", "PCIe", 130.5, None,
        ("Quadro RTX 6000", "Q RTX 6000", "NVIDIA Quadro RTX 6000", "RTX 6000")),
    Gpu("QUADRO-RTX-8000", "QUADRO-RTX-8000", _NV, 48, "Turing", "PCIe", 130.5, None,
        ("Quadro RTX 8000", "Q RTX 8000", "NVIDIA Quadro RTX 8000", "RTX 8000")),
    Gpu("T4", "T4", _NV, 16, "Turing", "PCIe", 65, None,
        ("T4", "Tesla T4", "NVIDIA T4", "nvidia-t4", "nvidia-tesla-t4", "Nvidia Tesla T4")),
    Gpu("T4G", "T4G", _NV, 16, "Turing", "PCIe", 65, None,  # AWS g5g (Graviton hosts)
        ("T4g", "NVIDIA T4G")),
    # V100 ships as SXM2 (125 TFLOPS) and PCIe (112); clouds rarely say which: not tracked.
    # GCP and Lambda sell only the 16 GB card, so their "Tesla V100" strings mean 16 GB.
    Gpu("V100-16GB", "V100", _NV, 16, "Volta", "", 125, None,
        ("V100", "Tesla V100", "NVIDIA V100", "nvidia-v100", "NVIDIA Tesla V100",
         "nvidia-tesla-v100", "Tesla V100-SXM2-16GB", "Tesla V100-PCIE-16GB")),
    Gpu("V100-32GB", "V100", _NV, 32, "Volta", "", 125, None,
        ("V100", "Tesla V100", "NVIDIA V100", "nvidia-v100", "Tesla V100-SXM2-32GB",
         "V100-32GB")),
    Gpu("P100", "P100", _NV, 16, "Pascal", "", None, None,
        ("P100", "Tesla P100", "NVIDIA P100", "nvidia-p100", "nvidia-tesla-p100",
         "Nvidia Tesla P100")),
    # Tesla P40 product brief (PB-08338-001): GP102, 24 GB GDDR5, PCIe, FP32 and INT8 rates.
    # Azure ND (v1) and Tencent GN8 sell it.
    Gpu("P40", "P40", _NV, 24, "Pascal", "PCIe", None, None,
        ("P40", "Tesla P40", "NVIDIA P40", "NVIDIA Tesla P40")),
    Gpu("P4", "P4", _NV, 8, "Pascal", "PCIe", None, None,
        ("P4", "Tesla P4", "NVIDIA P4", "nvidia-p4", "nvidia-tesla-p4", "Nvidia Tesla P4")),
    Gpu("K80", "K80", _NV, 12, "Kepler", "PCIe", None, None,  # one of the board's two GPUs
        ("K80", "Tesla K80", "NVIDIA K80")),
    Gpu("M60", "M60", _NV, 8, "Maxwell", "PCIe", None, None,  # one of the board's two GPUs
        ("M60", "Tesla M60", "NVIDIA M60")),
    # -- AMD ----------------------------------------------------------------------------------
    Gpu("MI355X", "MI355X", _AMD, 288, "CDNA4", "OAM", 2516.6, 5033.2,
        ("MI355X", "AMD Instinct MI355X")),
    # AMD Instinct MI350 series page: the MI350X is the air-cooled sibling of the MI355X,
    # 288 GB HBM3E; its exact dense BF16/FP8 rates were not confirmed here: None.
    Gpu("MI350X", "MI350X", _AMD, 288, "CDNA4", "OAM", None, None,
        ("MI350X", "AMD Instinct MI350X")),
    Gpu("MI325X", "MI325X", _AMD, 256, "CDNA3", "OAM", 1307.4, 2614.9,
        ("MI325X", "AMD Instinct MI325X")),
    Gpu("MI300X", "MI300X", _AMD, 192, "CDNA3", "OAM", 1307.4, 2614.9,
        ("MI300X", "AMD Instinct MI300X", "AMD Instinct MI300X OAM")),
    Gpu("MI250X", "MI250X", _AMD, 128, "CDNA2", "OAM", 383, None,
        ("MI250X", "AMD Instinct MI250X")),
    Gpu("MI250", "MI250", _AMD, 128, "CDNA2", "OAM", 362.1, None,
        ("MI250", "AMD Instinct MI250")),
    # AMD's ROCm GPU specifications (rocm.docs.amd.com, reference/gpu-specs): MI25 GCN5.0
    # (gfx900) 16 GiB, Radeon PRO V620 RDNA2 (gfx1030) 32 GiB. Azure NVv4 sells MI25 shares
    # and NGads V620 the V620. Which ROCm releases still run gfx900 was not checked: none
    # known.
    Gpu("MI25", "MI25", _AMD, 16, "GCN5", "PCIe", None, None,
        ("MI25", "Radeon Instinct MI25", "AMD Radeon Instinct MI25"), frameworks=()),
    Gpu("V620", "V620", _AMD, 32, "RDNA2", "PCIe", None, None,
        ("V620", "Radeon Pro V620", "AMD Radeon Pro V620", "Radeon PRO V620")),
    # A graphics (VDI) card: not on ROCm's list of supported GPUs.
    Gpu("V520", "V520", _AMD, 8, "RDNA", "PCIe", None, None,  # AWS g4ad
        ("Radeon Pro V520", "AMD Radeon Pro V520"), frameworks=()),
    Gpu("V710", "V710", _AMD, 28, "RDNA3", "PCIe", None, None,  # Azure NVv5-V710
        ("V710", "Radeon Pro V710", "AMD Radeon Pro V710")),
    # -- Huawei -------------------------------------------------------------------------------
    # 910B SKUs (B1..B4) differ in clocks, so there is no single published FP16 figure.
    Gpu("ASCEND-910B", "910B", _HW, 64, "Da Vinci", "", None, None,
        ("Ascend 910B", "Ascend-910B", "910B", "Huawei Ascend 910B", "昇腾910B", "华为昇腾910B")),
    Gpu("ASCEND-910", "910", _HW, 32, "Da Vinci", "", 256, None,  # FP16; no BF16
        ("Ascend 910", "Huawei Ascend 910")),
    # -- Google TPUs (per chip) ---------------------------------------------------------------
    # Google's TPU system-architecture pages (cloud.google.com/tpu/docs/v2 ... /v6e, 2025):
    # peak bf16 per chip and HBM per chip. v2/v3 are sold as 8-TensorCore devices of 4 chips
    # (v2-8: 64 GiB, v3-8: 128 GiB in total). "TpuV5e"-style words are the SKU descriptions'
    # spelling, "v5litepod" the accelerator type, "tpu-v5-lite-podslice" GKE's name.
    Gpu("TPU-V2", "TPU-v2", _GOOGLE, 16, "TPU v2", "", 45, None,
        ("TPU v2", "Cloud TPU v2", "Tpu-v2")),
    Gpu("TPU-V3", "TPU-v3", _GOOGLE, 32, "TPU v3", "", 123, None,
        ("TPU v3", "Cloud TPU v3", "Tpu-v3")),
    Gpu("TPU-V4", "TPU-v4", _GOOGLE, 32, "TPU v4", "", 275, None,
        ("TPU v4", "Cloud TPU v4", "Tpu-v4", "tpu-v4-podslice")),
    Gpu("TPU-V5E", "TPU-v5e", _GOOGLE, 16, "TPU v5e", "", 197, None,
        ("TPU v5e", "Cloud TPU v5e", "TpuV5e", "TPU v5 lite", "v5litepod",
         "tpu-v5-lite-podslice", "tpu-v5-lite-device")),
    Gpu("TPU-V5P", "TPU-v5p", _GOOGLE, 95, "TPU v5p", "", 459, None,
        ("TPU v5p", "Cloud TPU v5p", "TpuV5p", "tpu-v5p-slice")),
    Gpu("TPU-V6E", "TPU-v6e", _GOOGLE, 32, "TPU v6e (Trillium)", "", 918, None,
        ("TPU v6e", "Cloud TPU v6e", "TpuV6e", "Trillium", "tpu-v6e-slice")),
    # Google's TPU7x page (cloud.google.com/tpu/docs/tpu7x): 192 GiB HBM, 2307 BF16 and
    # 4614 FP8 TFLOPS per chip. "TPU7x" is the SKU's and JAX's device_kind spelling, "tpu7x"
    # GKE's accelerator name.
    Gpu("TPU-7X", "TPU7x", _GOOGLE, 192, "TPU7x (Ironwood)", "", 2307, 4614,
        ("TPU7x", "Cloud TPU7x", "TPU v7", "Ironwood", "TPU7x Ironwood")),
    # -- AWS Trainium / Inferentia (per chip) ---------------------------------------------------
    # AWS Neuron architecture guides (awsdocs-neuron.readthedocs-hosted.com, "Trainium",
    # "Trainium2", "Inferentia", "Inferentia2" architecture pages): device memory and dense
    # BF16 / FP8 per chip. Trainium and Inferentia2 run cFP8 at the BF16 rate.
    Gpu("TRAINIUM", "Trainium", _AWS, 32, "NeuronCore-v2", "", 190, 190,
        ("Trainium", "AWS Trainium", "Trainium1")),
    Gpu("TRAINIUM2", "Trainium2", _AWS, 96, "NeuronCore-v3", "", 667, 1299,
        ("Trainium2", "AWS Trainium2")),
    Gpu("INFERENTIA", "Inferentia", _AWS, 8, "NeuronCore-v1", "", 64, None,  # FP16/BF16
        ("Inferentia", "AWS Inferentia", "Inferentia1")),
    Gpu("INFERENTIA2", "Inferentia2", _AWS, 32, "NeuronCore-v2", "", 190, 190,
        ("Inferentia2", "AWS Inferentia2")),
    # -- Intel Gaudi ------------------------------------------------------------------------------
    # AWS DL1 (aws.amazon.com/ec2/instance-types/dl1): 8 Gaudi HL-205 cards with 32 GB HBM2
    # each. Habana publishes no dense BF16 figure for the HL-205.
    Gpu("GAUDI-HL205", "Gaudi", _INTEL, 32, "Gaudi", "", None, None,
        ("Gaudi", "Gaudi HL-205", "HL-205", "Habana Gaudi", "Intel Gaudi")),
)
# fmt: on

CATALOG: dict[str, Gpu] = {g.name: g for g in _GPUS}

# -- precision support --------------------------------------------------------------------------
#: Number formats a chip may compute in, widest first.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
_Y, _N, _U = True, False, None  # supported / not supported / no source says (unknown)

# What each architecture computes in: True where the vendor's datasheet or architecture
# whitepaper lists the format among those its tensor/matrix units (or, for fp32, its ALUs)
# compute in; False where the vendor's own documents show the format arrived in a later
# generation (TF32 and BF16 are "new" in NVIDIA's A100 whitepaper, FP8 in the H100 whitepaper,
# FP4 in the Blackwell brief; TF32 and FP8 are new in AMD's CDNA 3 whitepaper, FP4 in CDNA 4);
# None where no source confirms either way. A chip that differs from its architecture has a
# row in _CHIP_PRECISIONS. Columns: fp32, tf32, fp16, bf16, fp8, fp4.
# fmt: off
_ARCH_PRECISIONS: dict[str, tuple[bool | None, ...]] = {
    # NVIDIA "Blackwell Architecture Technical Brief" (2024) and "RTX Blackwell GPU
    # Architecture" (2025): 5th-generation Tensor Cores add FP4 (and FP6) to FP8/BF16/FP16/TF32.
    "Blackwell":       (_Y, _Y, _Y, _Y, _Y, _Y),
    "Blackwell Ultra": (_Y, _Y, _Y, _Y, _Y, _Y),
    # NVIDIA "H100 Tensor Core GPU Architecture" whitepaper (2022): FP8 Transformer Engine
    # (E4M3/E5M2), with FP16, BF16, TF32; no FP4.
    "Hopper":          (_Y, _Y, _Y, _Y, _Y, _N),
    # NVIDIA "Ada GPU Architecture" whitepaper (2022): 4th-generation Tensor Cores with FP8
    # (the Hopper Transformer Engine formats), FP16, BF16, TF32; no FP4.
    "Ada Lovelace":    (_Y, _Y, _Y, _Y, _Y, _N),
    # NVIDIA "A100 Tensor Core GPU Architecture" (2020) and "Ampere GA102 GPU Architecture"
    # (2020) whitepapers: 3rd-generation Tensor Cores add TF32 and BF16 to FP16 (A100, A10,
    # A40, RTX A-series, GeForce RTX 30); FP8 only from Hopper/Ada.
    "Ampere":          (_Y, _Y, _Y, _Y, _N, _N),
    # NVIDIA "Turing GPU Architecture" whitepaper (2018): Tensor Cores in FP16, INT8, INT4;
    # no BF16/TF32 (new in Ampere). T4, Quadro RTX 6000/8000.
    "Turing":          (_Y, _N, _Y, _N, _N, _N),
    # NVIDIA "Tesla V100 GPU Architecture" whitepaper (2017): Tensor Cores multiply FP16 and
    # accumulate in FP32; no BF16/TF32 (new in Ampere).
    "Volta":           (_Y, _N, _Y, _N, _N, _N),
    # NVIDIA "Tesla P100" whitepaper (2016): native FP16 at twice the FP32 rate (GP100); no
    # Tensor Cores. P4 (GP104) differs: see _CHIP_PRECISIONS.
    "Pascal":          (_Y, _N, _Y, _N, _N, _N),
    # K80 and M60 datasheets publish FP32/FP64 only: FP16 arithmetic not confirmed.
    "Maxwell":         (_Y, _N, _U, _N, _N, _N),
    "Kepler":          (_Y, _N, _U, _N, _N, _N),
    # AMD "CDNA 4 Architecture" whitepaper (2025): MI355X adds FP4/FP6 to FP8, BF16, FP16;
    # whether TF32 stays a matrix format is not confirmed here.
    "CDNA4":           (_Y, _U, _Y, _Y, _Y, _Y),
    # AMD "CDNA 3 Architecture" whitepaper (2023): MI300X/MI325X matrix cores in FP8 and
    # TF32 (both new), BF16, FP16; no FP4 (new in CDNA 4).
    "CDNA3":           (_Y, _Y, _Y, _Y, _Y, _N),
    # AMD "CDNA 2 Architecture" whitepaper (2021): MI250/MI250X matrix cores in FP64, FP32,
    # FP16, BF16, INT8; TF32 and FP8 arrive with CDNA 3.
    "CDNA2":           (_Y, _N, _Y, _Y, _N, _N),
    # AMD "RDNA" whitepaper (2019): packed FP16 math; nothing published on BF16 (V520).
    "RDNA":            (_Y, _U, _Y, _U, _U, _U),
    # AMD "Vega" (GCN5) and "RDNA 2" architecture whitepapers: packed FP16 math; nothing
    # found on BF16 (MI25, V620).
    "GCN5":            (_Y, _U, _Y, _U, _U, _U),
    "RDNA2":           (_Y, _U, _Y, _U, _U, _U),
    # AMD "RDNA3" instruction set reference (2023): WMMA instructions in FP16 and BF16 (V710).
    "RDNA3":           (_Y, _U, _Y, _Y, _U, _U),
    # Huawei Ascend 910 (first generation): Huawei publishes FP16 and INT8 rates only.
    "Da Vinci":        (_U, _U, _Y, _U, _U, _U),
    # Google Cloud TPU docs ("Cloud TPU system architecture"; "bfloat16: the secret to high
    # performance on Cloud TPUs"): the MXUs multiply in bfloat16, FP32 is supported (matrix
    # work in bf16 passes); nothing confirms FP16, TF32 or FP8 on v2-v6e.
    "TPU v2":          (_Y, _U, _U, _Y, _U, _U),
    "TPU v3":          (_Y, _U, _U, _Y, _U, _U),
    "TPU v4":          (_Y, _U, _U, _Y, _U, _U),
    "TPU v5e":         (_Y, _U, _U, _Y, _U, _U),
    "TPU v5p":         (_Y, _U, _U, _Y, _U, _U),
    "TPU v6e (Trillium)": (_Y, _U, _U, _Y, _U, _U),
    # Google's TPU7x page and "TPU7x (Ironwood) performance optimizations": BF16, and FP8 in
    # hardware (4614 TFLOPS per chip); nothing there on FP32, FP16, TF32 or FP4.
    "TPU7x (Ironwood)": (_U, _U, _U, _Y, _Y, _U),
    # AWS Neuron docs, "Data Types" and "NeuronCore-v2/v3 Architecture": NeuronCore-v1
    # (Inferentia) FP32, FP16, BF16; v2 (Trainium, Inferentia2) and v3 (Trainium2) Tensor
    # Engines cFP8, FP16, BF16, TF32, FP32; MXFP4 only from NeuronCore-v4 (Trainium3).
    "NeuronCore-v1":   (_Y, _N, _Y, _Y, _N, _N),
    "NeuronCore-v2":   (_Y, _Y, _Y, _Y, _Y, _N),
    "NeuronCore-v3":   (_Y, _Y, _Y, _Y, _Y, _N),
    # Habana "Gaudi Training Platform" whitepaper (2019) and Intel Gaudi docs: first-generation
    # Gaudi (HL-205) trains in BF16 and FP32; FP8 arrived with Gaudi 2; FP16 not confirmed.
    "Gaudi":           (_Y, _U, _U, _Y, _N, _U),
}
# Chips that differ from their architecture's row.
_CHIP_PRECISIONS: dict[str, tuple[bool | None, ...]] = {
    # Tesla P4 datasheet: FP32 and INT8 rates only (GP104 has no fast FP16 path).
    "P4":          (_Y, _N, _U, _N, _N, _N),
    # Tesla P40 product brief: FP32 and INT8 rates only (GP102, like the P4's GP104).
    "P40":         (_Y, _N, _U, _N, _N, _N),
    # Ascend 910B: Huawei's Ascend Extension for PyTorch (torch_npu) documents bf16 training
    # on the Atlas A2 training series (910B) beside FP16 and FP32.
    "ASCEND-910B": (_Y, _U, _Y, _Y, _U, _U),
}
# fmt: on


def precision_support(gpu: str, precision: str) -> bool | None:
    """Whether accelerator `gpu` (a canonical name) computes in `precision`: True, False, or
    None when no source says (and for a GPU the catalog does not know)."""
    entry = CATALOG.get(gpu)
    if entry is None or precision not in PRECISIONS:
        return None
    row = _CHIP_PRECISIONS.get(entry.name) or _ARCH_PRECISIONS.get(entry.architecture)
    return None if row is None else row[PRECISIONS.index(precision)]

# -- normalisation ----------------------------------------------------------------------------
# Chinese names AutoDL uses; everything else non-ASCII is a separator.
_CJK = (("华为", " huawei "), ("昇腾", " ascend "))
_SPLIT = re.compile(r"[^a-z0-9]+")
# "80GB", "80 GB", "141gb", "32GiB" -- but not the "4g" in "T4g" or the "gb" in "GB200".
_MEMORY = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)\s*gi?b(?![a-z0-9])")
# Leading brand words dropped when the rest is still a known alias. "Quadro" and "Radeon" are
# not here: without them "RTX 6000" is ambiguous, so their names are listed whole as aliases.
_PREFIXES = frozenset({"nvidia", "tesla", "geforce", "amd", "instinct", "huawei", "google",
                       "aws", "amazon", "intel", "habana"})
# Words that never distinguish two GPUs.
_NOISE = frozenset(
    {"hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7", "tensor", "core", "gpu"}
)
_FORM_FACTOR_WORDS = {
    "sxm": "SXM",
    "sxm2": "SXM",
    "sxm3": "SXM",
    "sxm4": "SXM",
    "sxm5": "SXM",
    "sxm6": "SXM",
    # NVIDIA HGX is the baseboard its SXM modules sit on (NVIDIA's HGX platform pages:
    # "HGX H100 ... SXM5"); Crusoe's price table tags its H100/H200/B200 rows "HGX".
    "hgx": "SXM",
    "pcie": "PCIe",
    "nvl": "NVL",
    "oam": "OAM",
}


def _clean(raw: str) -> str:
    text = raw.lower()
    for native, latin in _CJK:
        text = text.replace(native, latin)
    return text


def _tokens(text: str) -> list[str]:
    return [t for t in _SPLIT.split(text) if t]


def _key(raw: str) -> str:
    """Case, spaces and punctuation removed: 'NVIDIA A100-SXM4-80GB' -> 'nvidiaa100sxm480gb'."""
    return "".join(_tokens(_clean(raw)))


def _split_memory(text: str) -> tuple[float | None, str]:
    """The first memory size named in `text` (GB), and the text without any."""
    found = _MEMORY.search(text)
    return (float(found.group(1)) if found else None), _MEMORY.sub(" ", text)


def _without_prefixes(tokens: list[str]) -> Iterator[list[str]]:
    """The tokens, then with leading brand words dropped one at a time (never empty)."""
    while tokens:
        yield tokens
        if tokens[0] not in _PREFIXES:
            return
        tokens = tokens[1:]


def _memory_fits(gpu: Gpu, memory_gb: float) -> bool:
    return abs(memory_gb - gpu.memory_gb) <= MEMORY_TOLERANCE * gpu.memory_gb


def _build_aliases() -> dict[str, tuple[Gpu, ...]]:
    """Normalised alias (and canonical name) -> the variants it may denote."""
    index: dict[str, list[Gpu]] = {}
    for gpu in _GPUS:
        for key in {_key(gpu.name), *(_key(a) for a in gpu.aliases)}:
            index.setdefault(key, []).append(gpu)
    return {k: tuple(v) for k, v in index.items()}


def _build_families() -> dict[str, tuple[Gpu, ...]]:
    members: dict[str, list[Gpu]] = {}
    for gpu in _GPUS:
        members.setdefault(gpu.family, []).append(gpu)
    return {k: tuple(v) for k, v in members.items()}


_ALIASES = _build_aliases()
_FAMILIES = _build_families()
_CANONICAL_KEYS = {_key(g.name): g for g in _GPUS}


def _family_keys() -> dict[str, str]:
    """Normalised family -> family, plus the bare number for RTX cards ('4090', 'a6000')."""
    keys: dict[str, str] = {}
    for family in _FAMILIES:
        key = _key(family)
        keys[key] = family
        rest = key[3:]
        if key.startswith("rtx") and re.match(r"a?\d", rest):
            keys[rest] = family
    return keys


_FAMILY_KEYS = _family_keys()


# -- lookup -----------------------------------------------------------------------------------
def _narrow(
    candidates: tuple[Gpu, ...], memory_gb: float | None, form_factor: str | None
) -> Gpu | None:
    """The one candidate that fits the memory and form factor, else None."""
    fits = [
        g
        for g in candidates
        if (form_factor is None or g.form_factor in (form_factor, ""))
        and (memory_gb is None or _memory_fits(g, memory_gb))
    ]
    return fits[0] if len(fits) == 1 else None


def _resolve(key: str, memory_gb: float | None, form_factor: str | None) -> Gpu | None:
    candidates = _ALIASES.get(key)
    if not candidates:
        return None
    hit = _narrow(candidates, memory_gb, form_factor)
    if hit is not None or (memory_gb is None and form_factor is None):
        return hit
    # The string named a family and the memory or form factor picks the variant, e.g. "H100"
    # with 94 GB is the H100 NVL, "A800 PCIe" the A800 PCIe.
    named = {g.family for g in candidates}
    if len(named) != 1:
        return None
    return _narrow(_FAMILIES[named.pop()], memory_gb, form_factor)


@functools.lru_cache(maxsize=4096)
def lookup(raw: str, memory_gb: float | None = None) -> Gpu | None:
    """Map a provider's GPU string to the catalog; None if it matches nothing (never guess).

    Cached: a crawl asks about a few dozen distinct names, once per offer, and the catalog
    is fixed at import.

    `memory_gb` is the per-GPU memory the provider reports (GB or GiB; +-10 %); it picks the
    variant when the string alone does not ("A100" 40 vs 80, "V100" 16 vs 32). A memory size
    inside the string ("nvidia-a100-80gb", "H100 (80 GB SXM5)") counts the same; if it
    contradicts `memory_gb`, the answer is None. A zero or negative memory counts as unknown.
    """
    if not raw:  # also None; a blank string has no words, so it matches nothing below
        return None
    text = _clean(raw)
    named_memory, core_text = _split_memory(text)
    memory = memory_gb if memory_gb is not None and memory_gb > 0 else None
    if named_memory is not None:
        if memory is not None and abs(named_memory - memory) > MEMORY_TOLERANCE * max(
            named_memory, memory
        ):
            return None
        memory = memory if memory is not None else named_memory

    # 1. The whole string is a known alias ("nvidia-tesla-a100", "NVIDIA H100 80GB HBM3").
    for tokens in _without_prefixes(_tokens(text)):
        if hit := _resolve("".join(tokens), memory, None):
            return hit
    # 2. Without memory sizes and filler words; then with a form-factor word taken as a hint
    #    ("A100-SXM4-80GB" -> A100, SXM, 80 GB).
    core = [t for t in _tokens(core_text) if t not in _NOISE]
    for tokens in _without_prefixes(core):
        if hit := _resolve("".join(tokens), memory, None):
            return hit
        hints = {_FORM_FACTOR_WORDS[t] for t in tokens if t in _FORM_FACTOR_WORDS}
        base = [t for t in tokens if t not in _FORM_FACTOR_WORDS]
        if len(hints) == 1 and base and (hit := _resolve("".join(base), memory, hints.pop())):
            return hit
    return None


# -- what users type --------------------------------------------------------------------------
# A kind typed where a GPU is expected ("--gpu TPU"); "ASIC" is the other name of NPU here.
_KIND_WORDS = {"gpu": "GPU", "gpus": "GPU", "tpu": "TPU", "tpus": "TPU", "npu": "NPU",
               "npus": "NPU", "asic": "NPU", "asics": "NPU"}


def select(vendor: str | None = None, kind: str | None = None,
           framework: str | None = None) -> list[Gpu]:
    """Catalog entries of a vendor, kind and/or framework (case-insensitive; 'ASIC' = NPU), in
    catalog order; empty when a value names nothing."""
    if kind is not None:
        kind = _KIND_WORDS.get(_key(kind), kind.upper())
    return [g for g in _GPUS
            if (vendor is None or g.vendor.lower() == vendor.strip().lower())
            and (kind is None or g.kind == kind)
            and (framework is None
                 or _key(framework) in {_key(f) for f in g.frameworks or ()})]


def families() -> list[str]:
    """Sorted family names, the names users filter by."""
    return sorted(_FAMILIES)


def match_family(query: str) -> list[Gpu]:
    """What a user typed -> matching catalog entries, in catalog order.

    'H100', 'h100-sxm-80gb', 'A100-80GB', '4090', 'RTX 4090', '910B', 'TPU v5e': an exact
    canonical name gives that one GPU; a family gives all its variants; a family+memory like
    'A100-80GB' gives the 80 GB variants (a form factor, 'A100 PCIe', narrows likewise); a
    kind ('TPU', 'NPU', 'GPU') gives every accelerator of that kind.
    Case-insensitive. Empty list when nothing matches.
    """
    if not query:  # also None; a blank query has no words, so it matches nothing below
        return []
    kind = _KIND_WORDS.get(_key(query))
    if kind is not None:
        return select(kind=kind)
    exact = _CANONICAL_KEYS.get(_key(query))
    if exact is not None:
        return [exact]
    specific = lookup(query)
    memory, core_text = _split_memory(_clean(query))
    core = [t for t in _tokens(core_text) if t not in _NOISE]
    for tokens in _without_prefixes(core):
        hints = {_FORM_FACTOR_WORDS[t] for t in tokens if t in _FORM_FACTOR_WORDS}
        base = [t for t in tokens if t not in _FORM_FACTOR_WORDS]
        family = _FAMILY_KEYS.get("".join(base))
        if family is None or len(hints) > 1:
            continue
        if specific is not None and lookup("".join(base), memory) is None:
            # The words around the family name carried meaning: GCP's "nvidia-tesla-a100" is
            # the 40 GB A100 although "A100" alone is ambiguous.
            return [specific]
        form_factor = hints.pop() if hints else None
        return [
            g
            for g in _FAMILIES[family]
            if (form_factor is None or g.form_factor in (form_factor, ""))
            and (memory is None or _memory_fits(g, memory))
        ]
    # A provider-style string ("nvidia-h100-mega-80gb") still names one variant.
    return [specific] if specific is not None else []


def _one_typo(a: str, b: str) -> bool:
    """Whether `b` is `a` with at most one slip of the keyboard: a character left out, added,
    two swapped, or a letter typed for a look-alike digit ('o' for '0'). Replacing one letter
    by another or one digit by another names a different GPU (B100 is not A100)."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        if len(diff) == 1:
            x, y = a[diff[0]], b[diff[0]]
            return x.isdigit() != y.isdigit()
        return (len(diff) == 2 and diff[1] == diff[0] + 1
                and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def suggest(query: str) -> str | None:
    """The family/canonical name a typo meant ('H10O' -> 'H100'); None unless the query is
    one slip away from a known name (see _one_typo), then the closest such name."""
    key = _key(query or "")
    if not key:
        return None
    best, best_ratio = None, 0.0
    # Families first, so a tie goes to the short name users type.
    for name in [*sorted(_FAMILIES), *CATALOG]:
        if not _one_typo(key, _key(name)):
            continue
        ratio = difflib.SequenceMatcher(None, key, _key(name)).ratio()
        if ratio > best_ratio:
            best, best_ratio = name, ratio
    return best if best_ratio >= _SUGGEST_CUTOFF else None


_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:\s*/\s*(\d+))?\s*[*x×]\s*(\S.*?)\s*$", re.IGNORECASE)


def parse_count_and_name(desc: str) -> tuple[float, str] | None:
    """Split Tencent's 'N * NAME' GPU description: '8 * NVIDIA A100' -> (8.0, 'NVIDIA A100').

    N may be a fraction of one GPU: '1/4 * NVIDIA T4' -> (0.25, 'NVIDIA T4'). None when the
    text is not of that form or the count is not positive.
    """
    found = _COUNT.match(desc or "")
    if not found:
        return None
    count = float(found.group(1))
    if found.group(2) is not None:
        denominator = int(found.group(2))
        if denominator == 0:
            return None
        count /= denominator
    if count <= 0:
        return None
    return count, found.group(3)
