"""The alert pass's stages, each alone (alerts.stages: match, transition, render, enqueue),
and the time passed in: the Evaluator and Delivery read a Clock, not the wall clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from gpuradar.alerts.alert_settings import parse_settings
from gpuradar.alerts.delivery import Delivery, SendOutcome
from gpuradar.alerts.engine import Evaluator, read_market
from gpuradar.alerts.market import Market, PoolSet
from gpuradar.alerts.messages import Renderer
from gpuradar.alerts.stages import (
    INDEX_KEY,
    Composer,
    Matcher,
    Outbox,
    RulePlan,
    rule_transition,
    source_transitions,
    starting_state,
)
from gpuradar.alerts.state import AlertState
from gpuradar.core.clock import FakeClock
from gpuradar.storage.db import open_database
from tests.alerts.test_alert_engine import T0, crawl, offer, outbox, rule

SETTINGS = parse_settings(None)


EVERY_OFFER = [offer("h100-a", 1.95), offer("h100-b", 1.87, region="us-west-1"),
               offer("h100-c", 2.40, region="us-south-1"),
               offer("a100-a", 1.10, gpu="A100-SXM4-80GB")]


@pytest.fixture
def market_engine(sqlite_url) -> Engine:
    """Two H100 offers under $2/GPU-h and one above, and an A100, crawled at T0."""
    engine = open_database(sqlite_url)
    crawl(engine, EVERY_OFFER)
    return engine


def plan_for(text: str, market: Market, **options) -> RulePlan:
    r = rule(text, **options)
    pools = PoolSet()
    pools.sync([r], SETTINGS, market)
    return RulePlan.of(r, SETTINGS, pools)


# -- 1. match ------------------------------------------------------------------------------
def test_the_matcher_lists_a_rules_offers_under_its_limit_cheapest_first(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market)
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, None)
    assert [o.instance_type for _, o in m.matches] == ["h100-b", "h100-a"]
    assert [v for v, _ in m.matches] == [1.87, 1.95]
    assert (m.count, m.best, m.limit) == (2, 1.87, 2.0)
    kept = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 1)
    assert (kept.count, len(kept.matches)) == (2, 1)   # counted all, listed the first


def test_a_history_that_could_not_be_read_fails_only_the_rules_that_need_it(market_engine):
    market = read_market(market_engine, T0)
    drop = plan_for("H100 drops 10% below its 7-day low", market)
    plain = plan_for("H100 under $2/h", market)
    matcher = Matcher(market, SETTINGS, {drop.rule.key: TimeoutError("statement timeout"),
                                         INDEX_KEY: {}})
    with pytest.raises(TimeoutError, match="statement timeout"):
        matcher.match(drop.rule, drop.pool, None)
    assert matcher.match(plain.rule, plain.pool, None).count == 2


# -- 2. transition -------------------------------------------------------------------------
def test_a_first_match_fires_and_the_same_match_again_sends_nothing(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market)
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 5)
    first = rule_transition(plan, starting_state(plan.rule, None), m, market, T0)
    assert (first.before.state, first.after.state, first.kind) == ("inactive", "firing",
                                                                   "firing")
    assert first.after.fired_at == T0 and first.after.notified_value == 1.87
    assert first.after.best["instance_type"] == "h100-b"
    assert first.targets == ("team",)
    later = T0 + timedelta(minutes=15)
    again = rule_transition(plan, starting_state(plan.rule, first.after), m, market, later)
    assert (again.after.state, again.kind) == ("firing", None)
    assert again.after.fired_at == T0


def test_a_rule_with_for_two_evaluations_is_pending_first(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market, **{"for": 2})
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 5)
    first = rule_transition(plan, starting_state(plan.rule, None), m, market, T0)
    assert (first.after.state, first.kind) == ("pending", None)
    second = rule_transition(plan, first.after, m, market, T0 + timedelta(minutes=1))
    assert (second.after.state, second.kind) == ("firing", "firing")


def test_a_changed_condition_starts_a_new_alert_and_a_reworded_one_keeps_it(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market)
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 5)
    fired = rule_transition(plan, starting_state(plan.rule, None), m, market, T0).after
    cheaper = rule("H100 under $1.90/h", name=plan.rule.name)
    assert starting_state(cheaper, fired).state == "inactive"       # a new alert
    reworded = replace(rule("H100 under $2/h", name=plan.rule.name),
                       text="h100 below 2 dollars")
    kept = starting_state(reworded, fired)
    assert (kept.state, kept.description) == ("firing", "h100 below 2 dollars")


def test_a_source_gone_stale_notifies_the_targets_of_the_rules_that_read_it(market_engine):
    crawl(market_engine, [], at=T0 + timedelta(minutes=5), status="failed")
    settings = parse_settings({"notify_stale": True, "stale_after_failures": 1})
    market = read_market(market_engine, T0 + timedelta(minutes=6), settings)
    assert market.stale == {"lambda"}
    rules = [rule("H100 under $2/h", notify=("team",)),
             rule("H100 under $2/h on vastai", name="elsewhere", notify=("other",))]
    (t,) = source_transitions(rules, {}, market, settings, T0 + timedelta(minutes=6))
    assert (t.key, t.kind, t.after.state, t.targets) == ("source:lambda", "stale", "firing",
                                                         ("team",))
    crawl(market_engine, EVERY_OFFER, at=T0 + timedelta(minutes=10))
    back = read_market(market_engine, T0 + timedelta(minutes=11), settings)
    assert back.stale == frozenset()
    (end,) = source_transitions(rules, {t.key: t.after}, back, settings,
                                T0 + timedelta(minutes=11))
    assert (end.kind, end.after.state, end.before.fired_at) == (
        "recovered", "inactive", T0 + timedelta(minutes=6))


# -- 3. render -----------------------------------------------------------------------------
def test_the_composer_renders_a_firing_and_a_resolved_message(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market, send_resolved=True)
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 5)
    fired = rule_transition(plan, starting_state(plan.rule, None), m, market, T0)
    composer = Composer(Renderer(None), market, SETTINGS)
    msg = composer.render(fired)
    assert "$1.87" in msg.title and msg.notify_type == "warning"
    assert "h100-b" in msg.markdown and "h100-a" in msg.markdown
    assert "h100-c" not in msg.markdown                       # $2.40: not under $2
    assert "<li" in msg.html and "h100-b" in msg.text

    crawl(market_engine, [offer("h100-a", 2.05), offer("h100-b", 2.10, region="us-west-1"),
                          offer("h100-c", 2.40, region="us-south-1"),
                          offer("a100-a", 1.10, gpu="A100-SXM4-80GB")],
          at=T0 + timedelta(hours=1))                         # none under $2 any more
    later = read_market(market_engine, T0 + timedelta(hours=1))
    plan_later = plan_for("H100 under $2/h", later, send_resolved=True, hysteresis="0%")
    gone = Matcher(later, SETTINGS, {}).match(plan_later.rule, plan_later.pool, 5)
    resolved = rule_transition(plan_later, fired.after, gone, later, T0 + timedelta(hours=1))
    assert resolved.kind == "resolved"
    text = Composer(Renderer(None), later, SETTINGS).render(resolved).markdown
    assert "$2.05" in text                                    # the cheapest there is now


# -- 4. enqueue ----------------------------------------------------------------------------
def test_the_outbox_queues_one_row_per_target_and_an_end_only_to_those_told(market_engine):
    market = read_market(market_engine, T0)
    plan = plan_for("H100 under $2/h", market, notify=("ops", "team", "ops"))
    m = Matcher(market, SETTINGS, {}).match(plan.rule, plan.pool, 5)
    fired = rule_transition(plan, starting_state(plan.rule, None), m, market, T0)
    msg = Composer(Renderer(None), market, SETTINGS).render(fired)
    asked: list[tuple] = []

    def announced(key, since):
        asked.append((key, since))
        return {"team"}

    box = Outbox(T0, announced)
    box.enqueue(fired, msg)
    assert [(r["target"], r["kind"], r["status"], r["created_at"]) for r in box.rows] == [
        ("ops", "firing", "pending", T0), ("team", "firing", "pending", T0)]
    assert box.rows[0]["title"] == msg.title and box.rows[0]["next_attempt_at"] == T0
    assert asked == []                                  # a start goes to every target

    ended = type(fired)(fired.key, fired.after, AlertState(fired.key, "rule", "x"),
                        "resolved", fired.targets, match=m, rule=plan.rule)
    box.enqueue(ended, msg)
    assert [r["target"] for r in box.rows[2:]] == ["team"]
    assert asked == [(plan.rule.key, T0)]               # told since it fired


# -- time passed in ------------------------------------------------------------------------
def test_the_evaluator_reads_the_time_from_its_clock(market_engine):
    clock = FakeClock(T0 + timedelta(minutes=1))
    evaluator = Evaluator(market_engine, clock)
    rules = [rule("H100 under $2/h", repeat="1h")]
    assert evaluator.evaluate(rules).fired == [rules[0].name]
    (row,) = outbox(market_engine)
    assert row["created_at"].replace(tzinfo=None) == clock.now().replace(tzinfo=None)
    clock.advance(timedelta(minutes=30))
    assert evaluator.evaluate(rules).notifications == 0       # not due yet
    clock.advance(timedelta(minutes=31))
    assert evaluator.evaluate(rules).notifications == 1       # the repeat, on the clock
    assert [r["kind"] for r in outbox(market_engine)] == ["firing", "repeat"]


def test_an_evaluator_owns_its_state(market_engine):
    """Two evaluators of one database do not share what they keep: a new one looks at
    every rule, the one that evaluated before only at what changed."""
    rules = [rule("H100 under $2/h"), rule("A100 under $1/h", name="a100")]
    first = Evaluator(market_engine, FakeClock(T0))
    assert first.evaluate(rules).evaluated == 2
    assert first.evaluate(rules).evaluated == 0
    assert Evaluator(market_engine, FakeClock(T0)).evaluate(rules).evaluated == 2


def test_delivery_reads_its_clock_and_keeps_its_own_stragglers(market_engine):
    clock = FakeClock(T0 + timedelta(minutes=1))
    Evaluator(market_engine, clock).evaluate([rule("H100 under $2/h")])
    delivery = Delivery(market_engine, clock)
    other = Delivery(market_engine, clock)
    sent: list[str] = []

    def sender(target, title, *args):
        sent.append(title)
        return SendOutcome(False, "timed out after 5 s", may_run_until=clock.monotonic() + 11)

    from gpuradar.alerts.loader import parse_targets

    targets = parse_targets({"team": "json://127.0.0.1:9/hook"})
    (result,) = delivery.deliver_pending(targets, sender=sender)
    assert result.status == "retry" and len(sent) == 1
    assert delivery.sends_may_run_until() == clock.monotonic() + 11
    assert other.sends_may_run_until() == 0.0           # state of its own, not the process's
    (row,) = outbox(market_engine)
    # the retry is scheduled from the clock's time, not the wall clock's
    assert row["next_attempt_at"].replace(tzinfo=None) == (
        clock.now() + timedelta(seconds=30)).replace(tzinfo=None)


def test_a_pool_updated_offer_by_offer_equals_one_built_afresh():
    """The match stage reads pools kept up to date change by change (a price moving within
    its list, offers appearing and leaving, equal prices ordered by id): after every change
    the lists are those a pool built from the market as it is then has (a seeded sequence,
    the same at every run)."""
    import random

    from gpuradar.alerts.market import Pool, PoolKey
    from gpuradar.storage.offers import OfferRow

    rng = random.Random(52)
    market = Market()
    market.now = T0
    key = PoolKey.of(rule("H100 under $5/h").condition)

    def row(oid: int, per_gpu: float) -> OfferRow:
        return OfferRow(oid, "lambda", "us-east-1", "", f"i-{oid}", "on_demand",
                        "H100-SXM-80GB", 8, 80, 208, 1800, per_gpu * 8, "USD", per_gpu * 8,
                        per_gpu, True, None, "")

    prices = [1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 4.5, 4.99, 5.5, 6.0]  # ties, and beyond the band
    market._load([row(i, rng.choice(prices)) for i in range(60)])
    kept = Pool(key, 5.0)
    kept.build(market)
    next_id = 60
    for _ in range(400):
        ids = sorted(market.offers)
        what = rng.random()
        if what < 0.6 and ids:          # a price changes (possibly to the same)
            before = market.offers[rng.choice(ids)]
            after = before._replace(price_per_gpu_usd=rng.choice(prices))
        elif what < 0.8 and ids:        # an offer leaves
            before, after = market.offers[rng.choice(ids)], None
        else:                           # an offer appears
            before, after = None, row(next_id, rng.choice(prices))
            next_id += 1
        if before is not None:
            del market.offers[before.id]
            del market.buckets[(before.gpu, before.pricing, before.source)][before.id]
        if after is not None:
            market.offers[after.id] = after
            market.buckets.setdefault((after.gpu, after.pricing, after.source), {})[
                after.id] = after
        touched = kept.update(before, after, market)
        in_band = [v for v in ((before and before.price_per_gpu_usd),
                               (after and after.price_per_gpu_usd)) if v and v <= 5.0]
        assert touched == (min(in_band) if in_band else None)
        fresh = Pool(key, 5.0)
        fresh.build(market)
        assert (kept.values, kept.ids) == (fresh.values, fresh.ids)
