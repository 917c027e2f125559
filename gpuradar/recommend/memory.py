"""How much GPU memory a job needs, split into what can be sharded across GPUs (weights,
gradients, optimizer states, LoRA adapters, KV cache) and what every GPU holds for itself
(activations), with the formula and its sources; and the compute the job takes.

Units: memory in GB = 10^9 bytes (the unit the published figures use); a GPU sold as "80 GB"
has 80 GiB (GPU vendors count memory in binary units), of which `USABLE_FRACTION` is counted
as available to the job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpuradar.recommend.job import TRAINING, Job, human_count

GB = 1e9
GIB_IN_GB = 1.073741824
# Share of a GPU's memory a job can use: the CUDA context, cuBLAS/NCCL workspaces and
# allocator fragmentation take the rest (PyTorch typically reports ~0.5-2 GB reserved and
# unusable on 24-80 GB cards).
USABLE_FRACTION = 0.90

# -- bytes per parameter ------------------------------------------------------------------
# Mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights,
# Adam momentum and variance) = 16 bytes per parameter (ZeRO, Rajbhandari et al. 2020, §3.1:
# "K = 12", "16Ψ bytes").
MASTER_AND_ADAM = 12.0
# QLoRA (Dettmers et al. 2023): NF4 weights (4 bits) with double-quantized constants
# (0.127 bits per parameter, §3 "Double Quantization").
NF4_BITS = 4.0 + 0.127
# Weight-only int4 for inference (GPTQ/AWQ, group size 128, fp16 scale and zero per group).
INT4_BITS = 4.0 + 32 / 128
# LoRA adapters trained with Adam: PEFT keeps adapters in fp32 (4 weights + 4 gradients + 8
# Adam) = 16 bytes; the QLoRA reference code casts them to bf16 (2 + 2 + 8) = 12 bytes.
LORA_STATE_BYTES = 16.0
QLORA_STATE_BYTES = 12.0
# LoRA on every linear layer of a Llama-style block adds r·(in+out) parameters per matrix:
# attention 4·2h, SwiGLU MLP 3·(h + 2.6875h) -> ≈ 19·r·h per layer (Llama-2-7B, r=16: PEFT
# reports 39,976,960 trainable parameters; 19·16·4096·32 = 39.8M).
LORA_PARAMS_PER_RANK_H = 19.0
# Activations per layer in bytes, 16-bit, no parallelism (Korthikanti et al. 2022, "Reducing
# Activation Recomputation in Large Transformer Models", eq. 1): s·b·h·(34 + 5·a·s/h). Flash
# attention does not store the s×s attention matrices, which removes the 5·a·s/h term.
ACT_BYTES_PER_SBH = 34.0
# With full activation recomputation only each layer's input is kept: 2·s·b·h bytes per
# layer (same paper, §4), plus one layer's activations while it is recomputed.
CKPT_BYTES_PER_SBH = 2.0

# Published transformer shapes (params, layers, hidden): GPT-3 paper Table 2.1, LLaMA paper
# Table 2, Llama 3.1 405B. A size within 30 % of one of these uses its shape.
_SHAPES: tuple[tuple[float, int, int], ...] = (
    (125e6, 12, 768), (350e6, 24, 1024), (760e6, 24, 1536), (1.3e9, 24, 2048),
    (2.7e9, 32, 2560), (6.7e9, 32, 4096), (13e9, 40, 5120), (32.5e9, 60, 6656),
    (65.2e9, 80, 8192), (175e9, 96, 12288), (405e9, 126, 16384),
)




@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    source: str


def model_shape(params: float, layers: int | None = None, hidden: int | None = None) -> Shape:
    """Layers and hidden size: given, a published shape within 30 %, or 12·L·h² = N with
    the layers/hidden ratio of published models (h ≈ 128·L)."""
    if layers and hidden:
        return Shape(layers, hidden, "given")
    nearest = min(_SHAPES, key=lambda s: abs(math.log(params / s[0])))
    if abs(math.log(params / nearest[0])) <= math.log(1.3):
        shape = Shape(nearest[1], nearest[2], f"published shape of a {human_count(nearest[0])}"
                      " model")
    else:
        h = max(128, round((params * 128 / 12) ** (1 / 3) / 128) * 128)
        shape = Shape(max(1, round(params / (12 * h * h))), h, "12·L·h² = N, h ≈ 128·L")
    if hidden:
        return Shape(layers or max(1, round(params / (12 * hidden * hidden))), hidden, "given")
    if layers:
        return Shape(layers, max(128, round(math.sqrt(params / (12 * layers)))), "given")
    return shape


# -- memory -------------------------------------------------------------------------------
@dataclass
class MemoryEstimate:
    job: Job
    shape: Shape
    parts: dict[str, float]  # GB, in display order
    shardable: tuple[str, ...]
    formula: list[str]
    assumptions: list[str]
    flops: float | None = None  # total FLOPs when --tokens is given
    flops_per_token: float = 0.0
    flops_formula: str = ""

    @property
    def total_gb(self) -> float:
        return sum(self.parts.values())

    @property
    def shardable_gb(self) -> float:
        return sum(v for k, v in self.parts.items() if k in self.shardable)

    @property
    def per_gpu_fixed_gb(self) -> float:
        """What each GPU holds however many GPUs share the job (activations/workspace)."""
        return self.total_gb - self.shardable_gb

    def per_gpu_gb(self, gpus: int) -> float:
        return self.shardable_gb / max(1, gpus) + self.per_gpu_fixed_gb

    def gpus_needed(self, gpu_memory_gb: float) -> int | None:
        """Fewest GPUs of this size that hold the job; None if no number of them can (the
        per-GPU part alone does not fit)."""
        room = usable_gb(gpu_memory_gb) - self.per_gpu_fixed_gb
        if room <= 0:
            return None
        return max(1, math.ceil(self.shardable_gb / room - 1e-9))

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job.describe(), "params": self.job.params,
                "layers": self.shape.layers, "hidden": self.shape.hidden,
                "shape_from": self.shape.source,
                "parts_gb": {k: round(v, 2) for k, v in self.parts.items()},
                "total_gb": round(self.total_gb, 2),
                "shardable_gb": round(self.shardable_gb, 2),
                "per_gpu_fixed_gb": round(self.per_gpu_fixed_gb, 2),
                "formula": self.formula, "assumptions": self.assumptions,
                "flops": self.flops, "flops_per_token": self.flops_per_token,
                "flops_formula": self.flops_formula, "mfu": self.job.mfu,
                "usable_fraction": USABLE_FRACTION}


def usable_gb(gpu_memory_gb: float) -> float:
    """GB (10^9 bytes) a job can use on a GPU sold as `gpu_memory_gb` (binary) GB."""
    return gpu_memory_gb * GIB_IN_GB * USABLE_FRACTION


def lora_params(job: Job, shape: Shape) -> float:
    return LORA_PARAMS_PER_RANK_H * job.lora_rank * shape.hidden * shape.layers


@lru_cache(maxsize=256)
def estimate_memory(job: Job) -> MemoryEstimate:
    """GPU memory for `job`, by part, with the formula and assumptions spelled out."""
    n, s, b = job.params, job.seq_len, job.batch
    shape = model_shape(n, job.layers, job.hidden)
    L, h = shape.layers, shape.hidden
    sbh = s * b * h
    parts: dict[str, float] = {}
    formula: list[str] = []
    assumptions = [f"model shape: {L} layers, hidden {h} ({shape.source})",
                   "GB = 10^9 bytes; a GPU sold as M GB has M GiB, "
                   f"{USABLE_FRACTION:.0%} of it usable (CUDA context, workspaces, "
                   "fragmentation)"]
    if job.task in ("pretrain", "finetune"):
        parts["weights"] = 2 * n / GB
        parts["gradients"] = 2 * n / GB
        parts["optimizer"] = MASTER_AND_ADAM * n / GB
        formula += ["weights = 2 B × N (bf16)", "gradients = 2 B × N (bf16)",
                    "optimizer = 12 B × N (fp32 master + Adam m, v)  [ZeRO: 16 B/param]"]
        assumptions.append("mixed-precision AdamW; full state sharded across GPUs "
                           "(ZeRO-3/FSDP) when one GPU is not enough")
        if job.precision == "fp8":
            assumptions.append("fp8 training (Transformer Engine) keeps bf16 weights and "
                               "fp32 master/optimizer state: fp8 changes speed, not memory")
    elif job.task in ("lora", "qlora"):
        adapters = lora_params(job, shape)
        if job.task == "qlora":
            parts["weights"] = n * NF4_BITS / 8 / GB
            formula.append("weights = N × 4.127 bits (NF4 + double-quantized constants)")
            state = QLORA_STATE_BYTES
            formula.append(f"adapters = 19·r·h·L params × {state:g} B (bf16 weights + grads, "
                           "fp32 Adam)")
        else:
            per = 1 if job.precision == "fp8" else 2
            parts["weights"] = per * n / GB
            formula.append(f"weights = {per} B × N (frozen, {job.precision})")
            state = LORA_STATE_BYTES
            formula.append(f"adapters = 19·r·h·L params × {state:g} B (fp32 weights + grads "
                           "+ Adam)")
        parts["adapters"] = adapters * state / GB
        assumptions.append(f"LoRA rank {job.lora_rank} on every attention and MLP projection: "
                           f"{human_count(adapters)} trainable parameters")
    else:  # inference
        bits = {"bf16": 16.0, "fp8": 8.0, "int4": INT4_BITS}[job.precision]
        parts["weights"] = n * bits / 8 / GB
        formula.append(f"weights = N × {bits:g} bits ({job.precision})")
        kv_bytes = 1 if job.precision == "fp8" else 2
        parts["kv_cache"] = 2 * L * h * s * b * kv_bytes / GB
        formula.append(f"kv_cache = 2 (K,V) × L × h × seq × batch × {kv_bytes} B")
        parts["workspace"] = ACT_BYTES_PER_SBH * sbh / GB
        formula.append("workspace = 34·s·b·h B (one layer's activations at a time)")
        assumptions.append("KV cache for full multi-head attention: models with grouped-query "
                           "attention need (heads / KV heads) times less")
        if job.precision == "int4":
            assumptions.append("int4 is weight-only (GPTQ/AWQ, group size 128); matmuls run "
                               "in 16-bit")
    if job.task in TRAINING:
        if job.checkpointing:
            parts["activations"] = (CKPT_BYTES_PER_SBH * sbh * L + ACT_BYTES_PER_SBH * sbh) / GB
            formula.append("activations = 2·s·b·h·L + 34·s·b·h B (checkpointing keeps each "
                           "layer's input; one layer recomputed at a time)")
        else:
            parts["activations"] = ACT_BYTES_PER_SBH * sbh * L / GB
            formula.append("activations = 34·s·b·h·L B (Korthikanti et al. 2022, flash "
                           "attention: no s² term)")
        assumptions.append("activations are per GPU (each data-parallel rank holds its own "
                           "micro-batch); logits and framework buffers not counted")
    shardable = tuple(k for k in parts if k not in ("activations", "workspace"))
    estimate = MemoryEstimate(job, shape, parts, shardable, formula, assumptions)
    _add_compute(estimate)
    return estimate


def _add_compute(est: MemoryEstimate) -> None:
    """FLOPs per token: 6N to train all weights (2N forward, 4N backward), 4N with frozen
    weights (LoRA: no weight gradients for them), +2N when activations are recomputed, 2N
    for inference (Kaplan et al. 2020, §2.1)."""
    job, n = est.job, est.job.params
    if job.task == "inference":
        k, text = 2, "2·N per token (forward)"
    elif job.task in ("lora", "qlora"):
        k, text = 4, "4·N per token (forward + input gradients; frozen weights get none)"
    else:
        k, text = 6, "6·N per token (forward + backward)"
    if job.checkpointing:
        k += 2
        text += " + 2·N (activation recomputation)"
    est.flops_per_token = k * n
    est.flops_formula = text
    if job.tokens is not None:
        est.flops = k * n * job.tokens


