"""The offers a rule watches, kept in memory between evaluations (alerts.market): priced at
the exchange rates of the evaluation that reads them."""

from __future__ import annotations

from datetime import date, timedelta

from gpuradar.alerts.engine import evaluate
from gpuradar.storage.queries import store_fx
from tests.alerts.test_alert_engine import T0, crawl, offer, outbox, rule


def test_an_offer_repriced_after_a_new_exchange_rate_is_priced_at_the_new_rate(engine):
    """A rule in yuan on a long-running evaluator: an offer whose price changes after the
    rate moved is compared at the new rate ($0.27 = ¥1.93 at 0.14), not at the rate of
    the evaluation before it (¥2.16 at 0.125)."""
    def vast(price: float, minutes: int) -> None:
        at = T0 + timedelta(minutes=minutes)
        crawl(engine, [offer("4090-v", price, source="vastai", gpu="RTX-4090", count=1,
                             at=at)], source="vastai", at=at)

    rules = [rule("4090 under ¥2/h")]
    store_fx(engine, {"CNY": 0.125}, date(2026, 11, 1))
    vast(0.30, 0)                                            # ¥2.40
    assert evaluate(engine, rules, now=T0).fired == []
    vast(0.29, 5)                                            # ¥2.32
    assert evaluate(engine, rules, now=T0 + timedelta(minutes=5)).fired == []
    store_fx(engine, {"CNY": 0.14}, date(2026, 11, 2))       # ¥2.07
    assert evaluate(engine, rules, now=T0 + timedelta(minutes=10)).fired == []
    vast(0.27, 15)                                           # ¥1.93
    assert evaluate(engine, rules, now=T0 + timedelta(minutes=15)).fired == ["4090-under-2"]
    (note,) = outbox(engine)
    assert note["title"] == "4090 under ¥2/h — 1 offer from ¥1.9286/GPU-h"
