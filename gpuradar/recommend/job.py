"""The job: what the user wants to train or serve, and the small values it is given in
(model sizes, budgets, ages). Also which methods need which GPU software stack."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from datetime import timedelta

from gpuradar.core.units import SIGN_CURRENCY, parse_duration

TASKS = ("pretrain", "finetune", "lora", "qlora", "inference")
PRECISIONS = ("bf16", "fp8", "int4")
TRAINING = frozenset({"pretrain", "finetune", "lora", "qlora"})
DEFAULT_MFU = 0.40


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
    if not math.isfinite(value):  # 1e400, '1e300B': past a float
        raise RecommendError(f"{what} {text!r} is too large to compute with")
    if not found.group(2) and value < 1e6:
        raise RecommendError(f"{what} {text!r} needs a unit: {text}B? (K, M, B or T)")
    return value


def human_count(value: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:g}"


def parse_age(text: str, what: str = "age", examples: str = "30m, 12h, 2d") -> timedelta:
    """'2d', '12h', '30m' -> timedelta (a bare number is hours)."""
    value = f"{text}h" if str(text).strip().replace(".", "", 1).isdigit() else text
    try:
        return parse_duration(value)
    except ValueError as exc:
        why = f" ({exc})" if "limit" in str(exc) else ""  # too long: say so, not 'use e.g.'
        raise RecommendError(f"{what} {text!r}: use e.g. {examples}{why}") from None


def parse_share(text: str, what: str = "share") -> float:
    """'15%' -> 0.15, '0.15' -> 0.15, '0' -> 0.0 (a bare number above 1 needs the %)."""
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip())
    except ValueError:
        raise RecommendError(f"{what} {text!r}: use e.g. 15% or 0.15") from None
    if percent:
        value /= 100
    if not 0 <= value <= 10 or (not percent and value > 1):
        raise RecommendError(f"{what} {text!r}: use e.g. 15% or 0.15")
    return value


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
        if self.gpu_hours is not None and not 0 < self.gpu_hours < math.inf:
            # 0 would cost $0.00 in 0 min, inf print 'inf d': neither is a job
            raise RecommendError(f"--gpu-hours {self.gpu_hours:g} must be a positive, finite "
                                 "number")
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
        words = [human_count(self.params), self.task,
                 "NF4 weights + bf16 compute" if self.task == "qlora" else self.precision]
        words.append(f"seq {self.seq_len}")
        words.append(f"batch {self.batch}" + (" per GPU" if self.task in TRAINING else ""))
        if self.task in ("lora", "qlora"):
            words.append(f"rank {self.lora_rank}")
        if self.task in TRAINING:
            words.append("activation checkpointing" if self.checkpointing
                         else "no activation checkpointing")
        return ", ".join(words)



# -- methods that need a particular software stack -----------------------------------------
# QLoRA's 4-bit NF4 layers and paged optimizers come from bitsandbytes, a library of CUDA
# kernels. Its installation guide (huggingface.co/docs/bitsandbytes, "Installation Guide",
# read 2026-11-30): NVIDIA GPUs with compute capability 6.0+ throughout; AMD GPUs through a
# ROCm build, "experimental" up to v0.48 and officially supported from v0.50; no backend for
# Huawei Ascend NPUs.
_STACK_NOTES: dict[tuple[str, str], str] = {
    ("qlora", "AMD"): "QLoRA needs bitsandbytes, built for CUDA: on AMD only its ROCm build "
                      "(official from v0.50, experimental before)",
    ("qlora", "Huawei"): "QLoRA needs bitsandbytes, which runs on CUDA (and ROCm), not on "
                         "Ascend NPUs",
}


def stack_note(task: str, vendor: str) -> str | None:
    """Why a method may not run on a vendor's GPUs as on NVIDIA's (CUDA), or None."""
    return _STACK_NOTES.get((task, vendor))
