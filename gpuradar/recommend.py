"""From "what I want to train or serve" to the live offers that can run it.

Three steps, each a plain function so the CLI, the rule language and tests share them:

1. `estimate_memory(job)`: GPU memory the job needs, split into what can be sharded across
   GPUs (weights, gradients, optimizer states, LoRA adapters, KV cache) and what every GPU
   holds for itself (activations). The formulas and their sources are in `MemoryEstimate.
   formula` and docs/recommend.md; every constant below names where it comes from.
2. `fit_offer(offer, estimate)`: how many of the offer's GPUs (or how many machines) the job
   needs, and whether the links between them are fast enough for sharding
   (gpuradar.core.interconnect).
3. `recommend(offers, job, ...)`: the offers that fit, ranked by hourly price or, when the
   job size is known, by estimated total cost, with spot interruption signals and warnings.

The rule form (`cheapest fit for 7B finetune under $3/h`) parses to a `FitRequirement`;
`offer_fits(offer, requirement)` is what the alert engine asks of each offer.

Units: memory in GB = 10^9 bytes (the unit the published figures use); a GPU sold as "80 GB"
has 80 GiB (GPU vendors count memory in binary units), of which `USABLE_FRACTION` is counted
as available to the job.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FALLBACK_USD_PER_UNIT, FxTable
from gpuradar.core.interconnect import fast_inter, fast_intra, interconnect_for
from gpuradar.core.sources import is_mainland, price_sources
from gpuradar.core.units import SIGN_CURRENCY, parse_duration, region_matches

TASKS = ("pretrain", "finetune", "lora", "qlora", "inference")
PRECISIONS = ("bf16", "fp8", "int4")
TRAINING = frozenset({"pretrain", "finetune", "lora", "qlora"})
MAINLAND_KEYWORDS = frozenset({"cn-*", "cn*", "cn", "mainland", "china", "cn-mainland"})

GB = 1e9
GIB_IN_GB = 1.073741824
# Share of a GPU's memory a job can use: the CUDA context, cuBLAS/NCCL workspaces and
# allocator fragmentation take the rest (PyTorch typically reports ~0.5-2 GB reserved and
# unusable on 24-80 GB cards).
USABLE_FRACTION = 0.90
DEFAULT_MFU = 0.40

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


class RecommendError(ValueError):
    """Bad input to recommend (a size, task, budget or clause it cannot understand)."""


# -- parsing small values -------------------------------------------------------------------
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_count(text: str, what: str = "size") -> float:
    """'7B' -> 7e9, '350M' -> 3.5e8, '2T' -> 2e12, '7e9' -> 7e9."""
    found = _SIZE.match(str(text))
    if not found:
        raise RecommendError(f"{what} {text!r} is not a number with K/M/B/T, e.g. 7B or 2T")
    value = float(found.group(1)) * _SCALE[found.group(2).lower()]
    if value <= 0:
        raise RecommendError(f"{what} {text!r} must be positive")
    if not found.group(2) and value < 1e6:
        raise RecommendError(f"{what} {text!r} needs a unit: {text}B? (K, M, B or T)")
    return value


def human_count(value: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:g}"


def parse_age(text: str) -> timedelta:
    """'2d', '12h', '30m' -> timedelta (a bare number is hours)."""
    value = f"{text}h" if str(text).strip().replace(".", "", 1).isdigit() else text
    try:
        return parse_duration(value)
    except ValueError:
        raise RecommendError(f"age {text!r}: use e.g. 30m, 12h, 2d") from None


_PRICE = re.compile(
    r"^\s*(?P<pre>[$¥￥€£])?\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<cur>[$¥￥€£]|[a-z]{3}(?![a-z]))?"
    r"\s*(?:/\s*(?P<unit>h|hr|hour|gpu-?h|gpu-?hr|gpu-?hour)|(?P<per>per\s+gpu(?:-?hour)?))?"
    r"\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Budget:
    """An hourly price limit; for the whole configuration unless `per_gpu`."""

    amount: float
    currency: str = "USD"
    per_gpu: bool = False

    def text(self) -> str:
        sign = {"USD": "$", "CNY": "¥", "EUR": "€", "GBP": "£"}.get(self.currency)
        money = f"{sign}{self.amount:g}" if sign else f"{self.amount:g} {self.currency}"
        return money + ("/GPU-h" if self.per_gpu else "/h")


def parse_budget(text: str) -> Budget:
    """'2/h', '$2/h', '¥14/h', '14CNY/h', '14 CNY/h', '2', '$1.5/GPU-h', '2 per gpu'."""
    found = _PRICE.match(str(text))
    if not found:
        raise RecommendError(f"budget {text!r}: use e.g. 2/h, $2/h, ¥14/h or 14CNY/h")
    pre, cur = found.group("pre"), found.group("cur")
    if pre and cur and SIGN_CURRENCY.get(pre) != SIGN_CURRENCY.get(cur, cur.upper()):
        raise RecommendError(f"budget {text!r} names two currencies")
    code = SIGN_CURRENCY.get(pre or "") or (SIGN_CURRENCY.get(cur) if cur else None) or (
        cur.upper() if cur else "USD")
    unit = (found.group("unit") or "").lower()
    return Budget(float(found.group("num")), code,
                  per_gpu=unit.startswith("gpu") or bool(found.group("per")))


# -- the job ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What the user wants to run. `batch` is per GPU (the micro-batch each data-parallel
    rank holds activations for) in training, concurrent sequences in inference."""

    params: float
    task: str
    precision: str = "bf16"
    seq_len: int = 2048
    batch: int = 1
    grad_checkpointing: bool | None = None  # None: the task's usual choice (on for qlora)
    lora_rank: int = 16
    layers: int | None = None
    hidden: int | None = None
    tokens: float | None = None
    gpu_hours: float | None = None
    mfu: float = DEFAULT_MFU

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            hint = difflib.get_close_matches(self.task, TASKS, 1)
            raise RecommendError(f"task {self.task!r} is not one of {', '.join(TASKS)}"
                                 + (f"; did you mean {hint[0]}?" if hint else ""))
        if self.precision not in PRECISIONS:
            raise RecommendError(f"precision {self.precision!r} is not one of "
                                 f"{', '.join(PRECISIONS)}")
        if self.precision == "int4" and self.task not in ("inference", "qlora"):
            raise RecommendError("int4 is for inference (and qlora, which is 4-bit anyway); "
                                 f"{self.task} trains in bf16 or fp8")
        if self.task == "qlora" and self.precision == "fp8":
            raise RecommendError("qlora computes in bf16 on 4-bit weights; drop --precision fp8")
        if self.params <= 0 or self.seq_len <= 0 or self.batch <= 0 or self.lora_rank <= 0:
            raise RecommendError("params, seq-len, batch and lora-rank must be positive")
        if self.tokens is not None and self.gpu_hours is not None:
            raise RecommendError("give the job size as --tokens or --gpu-hours, not both")
        if not 0 < self.mfu <= 1:
            raise RecommendError(f"utilisation {self.mfu:g} must be in (0, 1]")

    @property
    def checkpointing(self) -> bool:
        if self.task == "inference":
            return False
        if self.grad_checkpointing is None:
            return self.task == "qlora"  # the QLoRA paper trains with it on
        return self.grad_checkpointing

    def describe(self) -> str:
        words = [human_count(self.params), self.task]
        if self.task == "qlora":
            words.append("(NF4 weights, bf16 compute)")
        else:
            words.append(self.precision)
        words.append(f"seq {self.seq_len}")
        words.append(f"batch {self.batch}" + (" per GPU" if self.task in TRAINING else ""))
        if self.task in ("lora", "qlora"):
            words.append(f"rank {self.lora_rank}")
        if self.task in TRAINING:
            words.append("activation checkpointing" if self.checkpointing
                         else "no activation checkpointing")
        return ", ".join(words)


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


# -- offers -------------------------------------------------------------------------------
def wants_mainland(patterns: Iterable[str]) -> bool:
    return any(p.lower() in MAINLAND_KEYWORDS for p in patterns)


def region_allowed(source: str, region: str, zone: str, patterns: Sequence[str]) -> bool:
    """No patterns: any. `cn-*` (or cn, mainland): a mainland provider's mainland region.
    Any other pattern: a glob on region or zone."""
    if not patterns:
        return True
    for p in patterns:
        if p.lower() in MAINLAND_KEYWORDS:
            if is_mainland(source, region):
                return True
        elif region_matches(region, zone, [p]):
            return True
    return False


def offer_interconnect(offer: dict[str, Any]) -> dict[str, Any]:
    """The pipeline's attributes["interconnect"] when present, else the table's answer."""
    stored = (offer.get("attributes") or {}).get("interconnect")
    if isinstance(stored, dict):
        return stored
    return interconnect_for(offer["source"], offer["instance_type"], offer["gpu"],
                            offer["gpu_count"])


def gpu_memory_of(offer: dict[str, Any]) -> float | None:
    """Nominal per-GPU memory: the catalog's (providers report GiB, MiB or usable memory),
    else what the provider reported."""
    entry = catalog.CATALOG.get(offer["gpu"])
    if entry is not None:
        return entry.memory_gb
    return offer.get("gpu_memory_gb") or None


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


_BAND_RISK = {"<5%": "low", "5-10%": "low", "10-15%": "medium", "15-20%": "high",
              ">20%": "high"}


def spot_signal(offer: dict[str, Any]) -> dict[str, Any] | None:
    """The interruption signal a spot offer carries: AWS Spot Advisor band, Vast.ai host
    reliability; None for on-demand offers."""
    if offer.get("pricing") != "spot":
        return None
    attrs = offer.get("attributes") or {}
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


# -- fitting ------------------------------------------------------------------------------
@dataclass
class Fit:
    offer: dict[str, Any]
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
            "source": o["source"], "region": o["region"], "zone": o.get("zone", ""),
            "instance_type": o["instance_type"], "pricing": o["pricing"], "gpu": o["gpu"],
            "gpu_count": o["gpu_count"], "nodes": self.nodes, "gpus": self.gpus,
            "gpu_memory_gb": self.gpu_memory_gb, "gpus_needed": self.gpus_needed,
            "per_gpu_need_gb": round(self.per_gpu_gb, 2),
            "usable_gb_per_gpu": round(self.usable_gb, 2), "sharded": self.sharded,
            "interconnect": self.interconnect, "hourly_usd": _round(self.hourly_usd),
            "hourly_quoted": _round(self.hourly_quoted), "currency": o["currency"],
            "per_gpu_hour_usd": _round(self.per_gpu_hour_usd),
            "tflops_per_gpu": self.tflops, "tflops_basis": self.tflops_basis,
            "wall_hours": _round(self.wall_hours), "total_usd": _round(self.total_usd),
            "available": o.get("available"), "available_count": o.get("available_count"),
            "observed_at": o.get("observed_at"), "spot": self.spot, "flags": self.flags,
            "also_in_regions": self.also_in, "url": o.get("url", ""),
        }


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def fit_offer(offer: dict[str, Any], est: MemoryEstimate, *, any_interconnect: bool = False,
              max_nodes: int = 16) -> tuple[Fit | None, str]:
    """(Fit, "") when the job runs on this offer (or on several machines of it), else
    (None, the reason). Sharding a training job needs NVLink-class links inside a machine;
    more than one machine needs a GPU fabric (InfiniBand, EFA, RDMA) between them.
    `any_interconnect` accepts slower links, flagged."""
    memory = gpu_memory_of(offer)
    if not memory:
        return None, "GPU memory unknown"
    count = float(offer["gpu_count"] or 0)
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
        available = offer.get("available_count")
        flags.append(f"{nodes} machines" + (
            "" if available is not None and available >= nodes else " (capacity not checked)"))
    gpus = nodes * per_node
    price_usd = offer.get("price_usd")
    hourly_usd = price_usd * nodes if price_usd is not None else None
    fit = Fit(offer=offer, gpu_memory_gb=memory, gpus_needed=needed, nodes=nodes, gpus=gpus,
              per_gpu_gb=est.per_gpu_gb(gpus if sharded else 1), usable_gb=usable_gb(memory),
              interconnect=info, sharded=sharded, hourly_usd=hourly_usd,
              hourly_quoted=offer["price"] * nodes, flags=flags)
    if info.get("basis") == "form factor" and sharded:
        flags.append(f"{info.get('intra_node')} inferred from the form factor")
    _add_time(fit, est)
    return fit, ""


def _add_time(fit: Fit, est: MemoryEstimate) -> None:
    job = est.job
    precision = "bf16" if job.precision == "int4" or job.task == "qlora" else job.precision
    fit.tflops, fit.tflops_basis = tflops_of(fit.offer["gpu"], precision)
    if fit.tflops_basis.startswith("bf16 (no"):
        fit.flags.append("no fp8: bf16 rate")
    if job.gpu_hours is not None:
        fit.wall_hours = job.gpu_hours / fit.gpus
    elif est.flops is not None and fit.tflops:
        rate = fit.gpus * fit.tflops * 1e12 * job.mfu
        fit.wall_hours = est.flops / rate / 3600
    if fit.wall_hours is not None and fit.hourly_usd is not None:
        fit.total_usd = fit.wall_hours * fit.hourly_usd


# -- budget, filters, ranking ----------------------------------------------------------------
def price_in(fit: Fit, currency: str, fx: FxTable, per_gpu: bool = False) -> float | None:
    """The configuration's hourly price in `currency`: as quoted when the offer is quoted in
    it (no FX error), else through USD with the stored rate."""
    divisor = fit.gpus if per_gpu else 1
    if fit.offer["currency"].upper() == currency.upper():
        return fit.hourly_quoted / divisor
    if fit.hourly_usd is None:
        return None
    usd_per_unit = fx.to_usd(1.0, currency)
    if not usd_per_unit:
        return None
    return fit.hourly_usd / usd_per_unit / divisor


@dataclass
class Options:
    """Everything besides the job that decides which offers are shown."""

    budget: Budget | None = None
    spot: str = "ok"  # ok | no | only
    regions: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    max_age: timedelta | None = timedelta(days=2)
    any_interconnect: bool = False
    max_nodes: int = 16
    resumable: bool = True
    top: int = 10


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


def recommend(offers: Sequence[dict[str, Any]], job: Job, opts: Options, fx: FxTable,
              now: datetime) -> Recommendation:
    """Rank the offers the job fits on (see the module doc)."""
    est = estimate_memory(job)
    excluded: dict[str, int] = {}
    fits: list[Fit] = []

    def drop(reason: str) -> None:
        excluded[reason] = excluded.get(reason, 0) + 1

    mainland = wants_mainland(opts.regions)
    for offer in offers:
        if offer.get("active") is False:
            drop("no longer listed")
            continue
        if offer.get("available") is False:
            drop("unavailable")
            continue
        if opts.providers and offer["source"] not in opts.providers:
            drop("other provider")
            continue
        if not region_allowed(offer["source"], offer["region"], offer.get("zone", ""),
                              opts.regions):
            drop("outside mainland China" if mainland else "other region")
            continue
        if opts.spot == "no" and offer["pricing"] == "spot":
            drop("spot (--spot no)")
            continue
        if opts.spot == "only" and offer["pricing"] != "spot":
            drop("on-demand (--spot only)")
            continue
        seen = offer.get("observed_at")
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
    for fit in fits:
        signal = spot_signal(fit.offer)
        if signal is not None:
            signal["warnings"] = spot_warnings(signal, job, fit.wall_hours, fit.nodes,
                                               opts.resumable)
            fit.spot = signal
    sized = job.tokens is not None or job.gpu_hours is not None
    fits.sort(key=lambda f: _rank_key(f, sized))
    fits = _collapse_regions(fits)
    warnings = _warnings(est, fits, excluded, opts)
    return Recommendation(est, fits[: opts.top] if opts.top else fits, excluded, len(offers),
                          warnings, hardware_table(est, job.task in TRAINING))


def _collapse_regions(fits: list[Fit]) -> list[Fit]:
    """One row per (source, instance type, pricing): the best region, the others listed."""
    kept: dict[tuple, Fit] = {}
    out: list[Fit] = []
    for fit in fits:
        o = fit.offer
        key = (o["source"], o["instance_type"], o["pricing"], o["gpu"], o["gpu_count"])
        first = kept.get(key)
        if first is None:
            kept[key] = fit
            out.append(fit)
        else:
            first.also_in.append(o["region"] + (f"/{o['zone']}" if o.get("zone") else ""))
    return out


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


# -- the rule form -----------------------------------------------------------------------
class FitClauseError(RecommendError):
    """A `... fit for ...` clause that cannot be understood; points at the word."""

    def __init__(self, message: str, text: str = "", start: int = -1, end: int = -1,
                 hint: str | None = None) -> None:
        self.message, self.text, self.start, self.end, self.hint = (message, text, start, end,
                                                                     hint)
        rendered = message + (f"; did you mean {hint}?" if hint else "")
        if text:
            rendered += f"\n    {text}"
            if start >= 0:
                rendered += "\n    " + " " * start + "^" * max(1, end - start)
        super().__init__(rendered)


@dataclass(frozen=True)
class FitRequirement:
    """`cheapest fit for 7B finetune under $3/h` as data: the job, and the price limit for
    the whole configuration (all the GPUs the job needs) unless `per_gpu`."""

    job: Job
    max_price: float | None = None
    currency: str = "USD"
    per_gpu: bool = False
    pricing: str | None = None
    sources: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    text: str = ""

    def describe(self) -> str:
        words = ["cheapest fit for", human_count(self.job.params), self.job.task]
        if self.job.precision != "bf16":
            words.append(self.job.precision)
        if self.pricing:
            words.append(self.pricing.replace("_", "-"))
        if self.max_price is not None:
            words.append("under " + Budget(self.max_price, self.currency, self.per_gpu).text())
        if self.sources:
            words.append("on " + ",".join(self.sources))
        if self.regions:
            words.append("region " + ",".join(self.regions))
        if self.job.seq_len != Job.seq_len:  # the defaults are class attributes
            words.append(f"seq {self.job.seq_len}")
        if self.job.batch != Job.batch:
            words.append(f"batch {self.job.batch}")
        return " ".join(words)


_TASK_WORDS = {
    "finetune": "finetune", "fine-tune": "finetune", "finetuning": "finetune",
    "fine-tuning": "finetune", "full-finetune": "finetune", "sft": "finetune",
    "pretrain": "pretrain", "pre-train": "pretrain", "pretraining": "pretrain",
    "pre-training": "pretrain", "lora": "lora", "qlora": "qlora", "inference": "inference",
    "serve": "inference", "serving": "inference", "infer": "inference",
}
_CLAUSE_WORDS = ("cheapest", "fit", "for", "under", "below", "less", "spot", "on-demand", "in",
                 "on", "region", "seq", "batch", "per", "gpu", *_TASK_WORDS, *PRECISIONS)
_TOKEN = re.compile(r"\S+")


def parse_fit_clause(text: str) -> FitRequirement:
    """`[cheapest] fit for <size> <task> [bf16|fp8|int4] [spot|on-demand] [under <price>]
    [per gpu] [on <providers>] [in <providers or region globs>] [region <globs>] [seq N]
    [batch N]`, clauses after the size in any order. The price is for the whole
    configuration (every GPU the job needs) unless `per gpu`; "under" is strict."""
    toks = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text or "")]
    if not toks:
        raise FitClauseError("empty clause", text)
    i = 0

    def err(msg: str, k: int, hint: str | None = None) -> FitClauseError:
        if k >= len(toks):
            return FitClauseError(msg, text, len(text), len(text) + 1, hint)
        return FitClauseError(msg, text, toks[k][1], toks[k][2], hint)

    def low(k: int) -> str:
        return toks[k][0].lower() if k < len(toks) else ""

    if low(i) == "cheapest":
        i += 1
    if low(i) not in ("fit", "fits"):
        raise err("expected 'fit for <size> <task>'", i)
    i += 1
    if low(i) != "for":
        raise err("expected 'for' after 'fit'", i)
    i += 1
    spec: dict[str, Any] = {}

    def once(key: str, value: Any, k: int) -> None:
        if key in spec:
            raise err(f"{key} given twice", k)
        spec[key] = value

    while i < len(toks):
        word = low(i)
        if word in _TASK_WORDS:
            once("task", _TASK_WORDS[word], i)
            i += 1
        elif word in PRECISIONS:
            once("precision", word, i)
            i += 1
        elif word in ("spot", "on-demand", "ondemand"):
            once("pricing", "spot" if word == "spot" else "on_demand", i)
            i += 1
        elif word in ("under", "below", "<"):
            i = _clause_price(toks, i + 1, spec, err)
        elif word == "less" and low(i + 1) == "than":
            i = _clause_price(toks, i + 2, spec, err)
        elif word == "per":
            if low(i + 1) in ("gpu", "gpu-hour", "gpu-h"):
                spec["per_gpu"] = True
            elif low(i + 1) not in ("instance", "config", "configuration"):
                raise err("expected 'per gpu'", i + 1)
            i += 2
        elif word == "in" and i + 1 < len(toks) and not all(
                n in price_sources() for n in low(i + 1).split(",") if n):
            once("regions", tuple(r for r in toks[i + 1][0].split(",") if r), i)
            i += 2
        elif word in ("in", "on"):
            if i + 1 >= len(toks):
                raise err(f"'{word}' needs providers, e.g. {word} aws,gcp", i + 1)
            names = [n for n in low(i + 1).split(",") if n]
            for name in names:
                if name not in price_sources():
                    close = difflib.get_close_matches(name, price_sources(), 1)
                    raise err(f"unknown provider {name!r}", i + 1, close[0] if close else None)
            once("sources", tuple(names), i)
            i += 2
        elif word == "region":
            if i + 1 >= len(toks):
                raise err("'region' needs a glob, e.g. region us-*", i + 1)
            once("regions", tuple(r for r in toks[i + 1][0].split(",") if r), i)
            i += 2
        elif word in ("seq", "seq-len", "context", "batch"):
            key = "batch" if word == "batch" else "seq_len"
            if not low(i + 1).isdigit() or int(low(i + 1)) <= 0:
                raise err(f"'{word}' needs a positive whole number", i + 1)
            once(key, int(low(i + 1)), i)
            i += 2
        elif _SIZE.match(word) and re.search(r"[kmbt]$", word):
            try:
                once("params", parse_count(word, "model size"), i)
            except RecommendError as exc:
                raise err(str(exc), i) from None
            i += 1
        else:
            close = [c for c in difflib.get_close_matches(word, _CLAUSE_WORDS, 2, 0.7)
                     if c != word]
            raise err(f"unexpected word {toks[i][0]!r}", i, close[0] if close else None)
    if "params" not in spec:
        raise err("missing the model size, e.g. 7B", len(toks))
    if "task" not in spec:
        raise err(f"missing the task ({', '.join(TASKS)})", len(toks))
    try:
        job = Job(params=spec["params"], task=spec["task"],
                  precision=spec.get("precision", "bf16"), seq_len=spec.get("seq_len", 2048),
                  batch=spec.get("batch", 1))
    except RecommendError as exc:
        raise FitClauseError(str(exc), text) from None
    return FitRequirement(job=job, max_price=spec.get("max_price"),
                          currency=spec.get("currency", "USD"),
                          per_gpu=spec.get("per_gpu", False), pricing=spec.get("pricing"),
                          sources=spec.get("sources", ()), regions=spec.get("regions", ()),
                          text=text)


def _clause_price(toks: list[tuple[str, int, int]], i: int, spec: dict[str, Any], err) -> int:
    if i >= len(toks):
        raise err("'under' needs a price, e.g. under $3/h", i)
    if "max_price" in spec:
        raise err("price given twice", i)
    words = toks[i][0]
    used = 1
    # "14 CNY/h", "3 $/h": a bare number, then a currency word.
    unit = re.match(r"^([$¥￥€£]|[a-z]{3})(/\S+)?$", toks[i + 1][0] if i + 1 < len(toks) else "",
                    re.IGNORECASE)
    if re.match(r"^\d+(\.\d+)?$", words) and unit and (
            unit.group(1) in SIGN_CURRENCY or unit.group(1).upper() in FALLBACK_USD_PER_UNIT):
        words += " " + toks[i + 1][0]
        used = 2
    try:
        budget = parse_budget(words)
    except RecommendError:
        raise err(f"{toks[i][0]!r} is not a price, e.g. $3/h or ¥20/h", i) from None
    if budget.currency not in FALLBACK_USD_PER_UNIT:
        raise err(f"unknown currency {budget.currency}", i)
    spec["max_price"], spec["currency"] = budget.amount, budget.currency
    if budget.per_gpu:
        spec["per_gpu"] = True
    return i + used


def fit_price(offer: dict[str, Any], requirement: FitRequirement,
              fx: FxTable | None = None) -> float | None:
    """The hourly price, in the requirement's currency (per GPU-hour if it says so), of the
    configuration `offer` provides for the requirement's job; None when the offer does not
    fit (listed, not unavailable, the filters, memory, interconnect, price limit)."""
    if offer.get("active") is False or offer.get("available") is False:
        return None
    if requirement.pricing and offer.get("pricing") != requirement.pricing:
        return None
    if requirement.sources and offer["source"] not in requirement.sources:
        return None
    if not region_allowed(offer["source"], offer.get("region", ""), offer.get("zone", ""),
                          requirement.regions):
        return None
    fit, _ = fit_offer(offer, estimate_memory(requirement.job))
    if fit is None:
        return None
    price = price_in(fit, requirement.currency, fx or FxTable(), requirement.per_gpu)
    if price is None:
        return None
    if requirement.max_price is not None and not price < requirement.max_price - 1e-12:
        return None  # "under" is strict, as in the rest of the rule language
    return price


def offer_fits(offer: dict[str, Any], requirement: FitRequirement,
               fx: FxTable | None = None) -> bool:
    """Whether `offer` can run the requirement's job within its price limit."""
    return fit_price(offer, requirement, fx) is not None
