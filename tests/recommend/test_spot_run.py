"""The whole run on spot (gpuradar.recommend.spot_cost), recomputed by hand from the formulas of
docs/recommend.md: a band's range, an unknown signal's range, several machines, a deadline."""

from __future__ import annotations

import math

import pytest

from gpuradar.core.spot import BAND_MONTHLY
from gpuradar.recommend.spot_cost import spot_run


def test_a_band_gives_the_range_of_its_bounds_by_the_documented_formulas():
    # 5-10%/month, one machine, 100 h of work at $2/h, checkpoints hourly, 10 min restart
    run = spot_run(BAND_MONTHLY["5-10%"], 1, 100.0, 2.0, 1.0, 1 / 6, None)
    loss = 0.5 + 1 / 6
    for end, share in ((0, 0.05), (1, 0.10)):
        rate = -math.log(1 - share) / 720
        wall = 100 / (1 - rate * loss)
        assert run["wall_hours"][end] == pytest.approx(wall, abs=1e-4)
        assert run["interruptions"][end] == pytest.approx(rate * wall, abs=1e-4)
        assert run["lost_hours"][end] == pytest.approx(wall - 100, abs=1e-4)
        assert run["total_usd"][end] == pytest.approx(2 * wall, abs=0.01)
    assert 0 < run["interruptions"][0] < run["interruptions"][1]
    assert "p_deadline" not in run  # no deadline asked


def test_an_unknown_signal_is_a_range_from_no_interruption_to_unbounded():
    run = spot_run(None, 1, 10.0, 3.0, 1.0, 0.25, 24.0)
    assert run["interruptions"] == [0.0, None] and run["lost_hours"] == [0.0, None]
    assert run["total_usd"] == [30.0, None]
    assert run["p_deadline"] == [0.0, 1.0]  # worst case never finishes, best case surely
    # ">20%" has no upper bound either: at least the lower bound's figures
    band = spot_run(BAND_MONTHLY[">20%"], 1, 10.0, 3.0, 1.0, 0.25, None)
    assert band["interruptions"][0] > 0 and band["interruptions"][1] is None


def test_machines_multiply_the_rate_and_the_deadline_chance_is_poisson():
    share, machines, work, deadline = 0.15, 8, 200.0, 210.0
    run = spot_run((share, share), machines, work, 10.0, 2.0, 0.5, deadline)
    rate = machines * -math.log(1 - share) / 720
    loss = 1.0 + 0.5
    assert run["wall_hours"][0] == pytest.approx(work / (1 - rate * loss), abs=1e-4)
    # in time when at most floor((210 - 200) / 1.5) = 6 interruptions come by hour 210
    mean = rate * deadline
    chance = sum(math.exp(-mean) * mean ** k / math.factorial(k) for k in range(7))
    assert run["p_deadline"] == [pytest.approx(chance), pytest.approx(chance)]
    # a deadline shorter than the work is never met
    assert spot_run((share, share), 1, 10.0, 1.0, 1.0, 0.1, 9.0)["p_deadline"] == [0.0, 0.0]


def test_alibaba_and_azure_signals_read_as_documented():
    """Alibaba's DescribeSpotAdvice band is a 30-day share: 0-3% runs like p in [0, 0.03],
    low risk; 10-100% reaches a share of 1, so its worst case has no bound. Azure's eviction
    band states no period: shown with its source and date, risk unknown, no rate at all (the
    range of an unknown signal), never a guess."""
    from types import SimpleNamespace

    from gpuradar.core.spot import signal_of
    from gpuradar.recommend.rank import spot_signal

    alibaba = {"interruption": "0-3%", "interruption_source": "Alibaba DescribeSpotAdvice",
               "interruption_as_of": "2026-12-06", "interruption_window": "30 days",
               "interruption_rate": 1.2}
    read = signal_of(alibaba)
    assert read.monthly == (0.0, 0.03)
    assert read.label() == ("interruption 0-3%/30 days (average 1.2%) "
                            "(Alibaba DescribeSpotAdvice, 2026-12-06)")
    offer = SimpleNamespace(source="alibaba", pricing="spot", attributes=alibaba)
    assert spot_signal(offer)["risk"] == "low"
    run = spot_run(read.monthly, 1, 100.0, 2.0, 1.0, 1 / 6, None)
    rate = -math.log(1 - 0.03) / 720
    assert run["interruptions"][0] == 0.0
    assert run["wall_hours"][1] == pytest.approx(100 / (1 - rate * (0.5 + 1 / 6)), abs=1e-4)
    busy = signal_of({**alibaba, "interruption": "10-100%"})
    assert busy.monthly == (0.10, 1.0)
    assert spot_run(busy.monthly, 1, 100.0, 2.0, 1.0, 1 / 6, None)["wall_hours"][1] is None
    azure = {"interruption": "0-5", "interruption_source": "Azure Resource Graph",
             "interruption_as_of": "2026-12-06"}
    read = signal_of(azure)
    assert read.label() == "interruption 0-5% (Azure Resource Graph, 2026-12-06)"
    assert read.kind == "interruption rate" and read.monthly is None
    assert spot_signal(SimpleNamespace(source="azure", pricing="spot",
                                       attributes=azure))["risk"] == "unknown"
    assert spot_run(read.monthly, 1, 10.0, 3.0, 1.0, 0.25, None) == spot_run(
        None, 1, 10.0, 3.0, 1.0, 0.25, None)
