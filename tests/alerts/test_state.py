"""An alert's state between evaluations (alerts.state.transition), on real storage: what a
pending alert does when its offer leaves the limit."""

from __future__ import annotations

from datetime import timedelta

from gpuradar.alerts.engine import evaluate
from gpuradar.storage import alert_store as store
from tests.alerts.test_alert_engine import T0, crawl, offer, outbox, rule


def test_a_pending_alert_whose_offer_rises_into_the_band_starts_over(engine):
    """`for 2` counts evaluations in a row under the limit: one in the hysteresis band
    ($2.01 for a $2 limit, band 2 %) is not under it, so the count starts again and the
    next match is pending, not firing (the band holds only an alert already firing)."""
    rules = [rule("H100 under $2/h", **{"for": 2})]
    for hours, price, state in ((0, 1.90, "pending"), (1, 2.01, "inactive"),
                                (2, 1.90, "pending"), (3, 1.90, "firing")):
        at = T0 + timedelta(hours=hours)
        crawl(engine, [offer("a", price, at=at)], at=at)
        evaluate(engine, rules, now=at)
        assert store.load_states(engine)["rule:h100-under-2"]["state"] == state, hours
    assert [n["kind"] for n in outbox(engine)] == ["firing"]   # sent once, at the fourth


def test_an_alert_that_was_only_pending_never_shows_a_resolved_time(engine):
    """`alerts --all` dates an inactive alert from when it resolved: one that was pending
    and never fired has no such time, however its offer leaves the limit."""
    rules = [rule("H100 under $2/h", **{"for": 2})]
    for hours, price, state in ((0, 1.90, "pending"), (1, 2.60, "inactive"),
                                (2, 2.70, "inactive")):
        at = T0 + timedelta(hours=hours)
        crawl(engine, [offer("a", price, at=at)], at=at)
        evaluate(engine, rules, now=at)
        alert = store.load_states(engine)["rule:h100-under-2"]
        assert (alert["state"], alert["pending_since"], alert["resolved_at"]) == (
            state, T0 if state == "pending" else None, None), hours
    assert outbox(engine) == []
