"""What a whole run costs on spot: expected interruptions, lost hours, total cost and the
chance of finishing by a deadline, from an offer's interruption signal and the run's
checkpoint interval and restart time (the model and its sources: docs/recommend.md, "Spot").

A signal gives a range, never a point: an AWS Spot Advisor band is a range of monthly
interruption shares, and an offer without a published rate ranges from no interruption to
no bound at all. Every figure is therefore a (low, high) pair; high None = unbounded."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Hours in the Spot Advisor's "trailing month" (taken as 30 days).
MONTH_HOURS = 30 * 24.0

Range = tuple[float, float | None]


def hourly_rate(monthly: float | None) -> float | None:
    """Interruptions per machine-hour from the share of machines interrupted in a month,
    with interruptions a Poisson process: 1 - exp(-rate * month) = share. None = unbounded
    (a share of 100 % or no upper bound)."""
    if monthly is None or monthly >= 1:
        return None
    return -math.log1p(-monthly) / MONTH_HOURS


def poisson_cdf(k: int, mean: float) -> float:
    """P(N <= k) for N ~ Poisson(mean), term by term (stops once the terms are negligible)."""
    if k < 0:
        return 0.0
    if mean <= 0:
        return 1.0
    term = math.exp(-mean)
    total = term
    for i in range(1, k + 1):
        term *= mean / i
        total += term
        if i > mean and term < 1e-18 * total:  # past the peak, the rest is negligible
            break
    return min(1.0, total)


@dataclass(frozen=True)
class Outcome:
    """One interruption rate's run: expected figures (None where the run never ends)."""

    interruptions: float | None
    lost_hours: float | None
    wall_hours: float | None
    total_usd: float | None
    p_deadline: float | None  # None without a deadline


def outcome(rate: float | None, machines: int, work_hours: float, hourly_usd: float,
            checkpoint_hours: float, restart_hours: float,
            deadline_hours: float | None) -> Outcome:
    """The expected run at `rate` interruptions per machine-hour (None = unbounded).

    Any machine lost stops the job: the job's rate is machines x rate. Each interruption
    loses the work since the last checkpoint (half the interval on average) plus the
    restart; the lost time is itself exposed, so the expected wall time is
    T = W / (1 - rate_job * loss) (none when rate_job * loss >= 1). Billed for all of it."""
    loss = checkpoint_hours / 2 + restart_hours
    if rate is None:
        return Outcome(None, None, None, None, 0.0 if deadline_hours is not None else None)
    job_rate = machines * rate
    if job_rate * loss >= 1:
        return Outcome(None, None, None, None, 0.0 if deadline_hours is not None else None)
    wall = work_hours / (1 - job_rate * loss)
    chance = None
    if deadline_hours is not None:
        # In time when the interruptions before the deadline lose at most the spare time:
        # N(D) <= floor(spare / loss), N(D) ~ Poisson(rate_job * D). Counting every
        # interruption up to D (also those after an early finish) errs on the low side.
        spare = deadline_hours - work_hours
        if spare < 0:
            chance = 0.0
        elif loss <= 0:
            chance = 1.0
        else:
            chance = poisson_cdf(math.floor(spare / loss), job_rate * deadline_hours)
    return Outcome(job_rate * wall, wall - work_hours, wall, wall * hourly_usd, chance)


def spot_run(monthly: tuple[float, float | None] | None, machines: int, work_hours: float,
             hourly_usd: float, checkpoint_hours: float, restart_hours: float,
             deadline_hours: float | None) -> dict[str, Any]:
    """The range of outcomes a signal allows: its lowest rate gives the best case, its
    highest the worst; no published rate ranges from no interruption to unbounded."""
    low, high = monthly if monthly is not None else (0.0, None)
    args = (machines, work_hours, hourly_usd, checkpoint_hours, restart_hours, deadline_hours)
    best, worst = outcome(hourly_rate(low), *args), outcome(hourly_rate(high), *args)

    def pair(field: str, digits: int = 4) -> list[float | None]:
        out = []
        for o in (best, worst):
            v = getattr(o, field)
            out.append(None if v is None else round(v, digits))
        return out

    run: dict[str, Any] = {
        "interruptions": pair("interruptions"), "lost_hours": pair("lost_hours"),
        "wall_hours": pair("wall_hours"), "total_usd": pair("total_usd", 2),
        "basis": "signal" if monthly is not None else "unknown signal: no interruption "
                 "to unbounded",
        "checkpoint_hours": checkpoint_hours, "restart_hours": restart_hours,
    }
    if deadline_hours is not None:
        # The best case finishes in time most often: (worst, best) read low to high.
        run["p_deadline"] = [worst.p_deadline, best.p_deadline]
    return run
