"""From "what I want to train or serve" to the live offers that can run it.

Four steps, each a module of plain functions so the CLI, the alert rules and tests share
them:

1. `job`: the job (`Job`), and the small values it is given in (sizes, budgets, ages);
2. `memory`: `estimate_memory(job)`, the GPU memory it needs, shardable or per GPU, with
   the formula and its sources (docs/recommend.md);
3. `fit`: `fit_offer(offer, estimate)`, how many of an offer's GPUs (or machines) the job
   needs, whether their links allow sharding, and the configuration's price (`price_in`);
4. `rank`: `recommend(offers, job, options, ...)`, the offers that fit, filtered and ranked
   by hourly price or, when the job size is known, by total cost, without dominated ones.

The alert rule `cheapest fit for 7B finetune under $3/h` (gpuradar.alerts) asks steps 2 and 3
of every offer.
"""

from gpuradar.recommend.fit import Fit, fit_offer, gpu_memory_of, offer_interconnect, price_in
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
    stack_note,
)
from gpuradar.recommend.memory import (
    MemoryEstimate,
    estimate_memory,
    lora_params,
    model_shape,
    usable_gb,
)
from gpuradar.recommend.rank import (
    DOMINATED,
    DOMINATED_SIZED,
    Options,
    Recommendation,
    bad_idea,
    hardware_table,
    recommend,
    spot_signal,
)

__all__ = ["DOMINATED", "DOMINATED_SIZED", "PRECISIONS", "TASKS", "TRAINING", "Budget", "Fit",
           "Job", "MemoryEstimate", "Options", "Recommendation", "RecommendError", "bad_idea",
           "estimate_memory", "fit_offer", "gpu_memory_of", "hardware_table", "human_count",
           "lora_params", "model_shape", "offer_interconnect", "parse_age", "parse_budget",
           "parse_count", "price_in", "recommend", "spot_signal", "stack_note", "usable_gb"]
