"""From "what I want to train or serve" to the live offers that can run it.

Four steps, each a module of plain functions so the CLI, the alert rules and tests share
them:

1. `job`: the job (`Job`), and the small values it is given in (sizes, budgets, ages);
2. `memory`: `estimate_memory(job)`, the GPU memory it needs, shardable or per GPU, with
   the formula and its sources (docs/recommend.md);
3. `fit`: `fit_offer(offer, estimate)`, how many of an offer's GPUs (or machines) the job
   needs, the number format it computes in there (`precision`, from the catalog's precision
   table), whether their links allow sharding, how many machines finish by a deadline
   (`scaling`: efficiency by interconnect), and the configuration's price (`price_in`);
4. `rank`: `recommend(offers, job, options, ...)`, the offers that fit, filtered and ranked
   by hourly price or, when the job size is known, by total cost, without dominated ones.

The alert rule `cheapest fit for 7B finetune under $3/h` (gpuradar.alerts) asks steps 2 and 3
of every offer.
"""

from gpuradar.recommend.fit import (
    Fit,
    fit_offer,
    gpu_memory_of,
    offer_interconnect,
    price_in,
    wall_hours,
)
from gpuradar.recommend.job import (
    PRECISIONS,
    TASKS,
    TRAINING,
    Budget,
    Job,
    RecommendError,
    human_count,
    parse_age,
    parse_budget,
    parse_count,
    parse_share,
    stack_note,
)
from gpuradar.recommend.memory import (
    MemoryEstimate,
    estimate_memory,
    lora_params,
    model_shape,
    usable_gb,
)
from gpuradar.recommend.precision import Compute, compute_precision
from gpuradar.recommend.rank import (
    DEFAULT_STACKS,
    DOMINATED,
    DOMINATED_SIZED,
    FRAMEWORK_STACKS,
    OVERSEAS_ALIASES,
    Options,
    Recommendation,
    bad_idea,
    cuda_fit,
    framework_stacks,
    hardware_table,
    parse_cuda,
    recommend,
    spot_signal,
)
from gpuradar.recommend.scaling import efficiency, inter_node_status

__all__ = ["DEFAULT_STACKS", "DOMINATED", "DOMINATED_SIZED", "FRAMEWORK_STACKS",
           "OVERSEAS_ALIASES", "PRECISIONS", "TASKS", "TRAINING", "Budget", "Compute", "Fit",
           "Job", "MemoryEstimate", "Options", "Recommendation", "RecommendError", "bad_idea",
           "compute_precision", "cuda_fit", "efficiency", "estimate_memory", "fit_offer",
           "framework_stacks", "gpu_memory_of", "hardware_table", "human_count",
           "inter_node_status", "lora_params", "model_shape", "offer_interconnect", "parse_age",
           "parse_budget", "parse_count", "parse_cuda", "parse_share", "price_in", "recommend",
           "spot_signal", "stack_note", "usable_gb", "wall_hours"]
