"""Which number format a job computes in on one accelerator, from the catalog's precision
table (gpuradar.core.gpus.precision_support, sourced per architecture).

A method asks for a format (bf16 mixed precision by default, fp8 with --precision fp8, bf16
compute for QLoRA) and has fallbacks that run the same method: fp16 mixed precision with
loss scaling (Micikevicius et al. 2018, "Mixed Precision Training": how V100 and T4 train)
and, for fp8, bf16. A chip that supports neither the format nor a fallback is never
proposed; a fallback is always named ("fp16 compute: bf16 unsupported on V100-16GB"); a
format no source confirms is flagged, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuradar.core import gpus as catalog
from gpuradar.recommend.job import Job


def wanted(job: Job) -> tuple[str, ...]:
    """The formats the job can compute in, preferred first."""
    if job.task == "qlora":
        # bitsandbytes' 4-bit layers compute in bnb_4bit_compute_dtype: bfloat16 in the QLoRA
        # paper, float16 where the GPU has no bf16 (its documentation's Linear4bit options).
        return ("bf16", "fp16")
    if job.precision == "fp8":
        return ("fp8", "bf16", "fp16")
    if job.precision == "int4":
        # Weight-only int4 (GPTQ/AWQ): the matmuls run in 16-bit, either format.
        return ("fp16", "bf16")
    return ("bf16", "fp16")


@dataclass(frozen=True)
class Compute:
    """The format the job runs in on a chip, and what the user must be told about it."""

    precision: str | None  # None: the chip cannot run the job (see `refused`)
    flag: str | None = None
    refused: str | None = None  # the reason, for "not shown"


def compute_precision(job: Job, gpu: str) -> Compute:
    """The format `job` computes in on accelerator `gpu` (a catalog name)."""
    formats = wanted(job)
    first = formats[0]
    if gpu not in catalog.CATALOG:
        return Compute(first, f"{first} support unknown: {gpu} is not in the catalog")
    support = {p: catalog.precision_support(gpu, p) for p in formats}
    if job.precision == "int4" and job.task == "inference":
        if any(support.values()):
            return Compute(next(p for p in formats if support[p]))
        if all(v is False for v in support.values()):
            return Compute(None, refused="no 16-bit compute (fp16/bf16) for int4 matmuls")
        return Compute(first, f"16-bit compute not confirmed on {gpu}")
    if support[first]:
        return Compute(first)
    for fallback in formats[1:]:
        if support[fallback]:
            said = "unsupported" if support[first] is False else "support not confirmed"
            return Compute(fallback, f"{fallback} compute: {first} {said} on {gpu}")
    if support[first] is None:
        return Compute(first, f"{first} support not confirmed on {gpu}")
    unknown = [p for p in formats[1:] if support[p] is None]
    if unknown:
        return Compute(unknown[0], f"{unknown[0]} compute (not confirmed): {first} "
                                   f"unsupported on {gpu}")
    return Compute(None, refused=f"{' and '.join(formats)} unsupported")
