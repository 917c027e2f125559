"""Alert state on real storage (SQLite and PostgreSQL): firing, de-duplication, improvement,
hysteresis, staleness, restarts, and the outbox written with the state."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import partial

import pytest
from sqlalchemy import Engine, event, select
from sqlalchemy.exc import OperationalError

from gpuradar.alerts.engine import evaluate, match_rules, read_market
from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.market import band_best
from gpuradar.core.items import PriceItem
from gpuradar.core.units import format_duration
from gpuradar.storage import alert_store as store
from gpuradar.storage.db import Engines
from gpuradar.storage.ingest import CrawlWriter
from gpuradar.storage.models import OUTBOX, STATE
from gpuradar.storage.queries import store_fx

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def offer(instance: str, per_gpu: float, *, source: str = "lambda", region: str = "us-east-1",
          gpu: str = "H100-SXM-80GB", count: float = 8, available: bool | None = True,
          pricing: str = "on_demand", currency: str = "USD", usd_rate: float = 1.0,
          at: datetime = T0) -> PriceItem:
    price = per_gpu * count
    return PriceItem(source=source, region=region, instance_type=instance, pricing=pricing,
                     gpu=gpu, gpu_count=count, price=price, currency=currency,
                     available=available, observed_at=at, price_usd=price * usd_rate,
                     price_per_gpu_usd=per_gpu * usd_rate, url=f"https://{source}.example/x")


def crawl(engine, items, *, source: str = "lambda", at: datetime = T0, status: str = "ok"):
    writer = CrawlWriter(engine, source, started_at=at)
    writer.add([i for i in items if i.source == source])
    return writer.finish(status)


def outbox(engine) -> list[dict]:
    with engine.connect() as conn:
        rows = conn.execute(select(OUTBOX).order_by(OUTBOX.c.id))
        return [dict(r._mapping) for r in rows]


@contextmanager
def refusing(engine: Engine, part: str, error: str) -> Iterator[None]:
    """Inside the block the database refuses every statement containing `part` (in any
    case) with `error`, as a full disk or a statement timeout would."""
    def refuse(conn, cursor, statement: str, *args) -> None:
        if part.upper() in statement.upper():
            raise OperationalError(statement, {}, Exception(error))

    event.listen(engine, "before_cursor_execute", refuse)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", refuse)


def rule(text: str, **options):
    options.setdefault("notify", ("team",))
    return parse_rule(text, **options)


def matched(engine: Engine, text: str, *, in_order: bool = False) -> list[str]:
    """The instance types a rule matches at T0, sorted (`in_order`: cheapest first, as
    alerts list them); the rule must evaluate without error."""
    (m,) = match_rules(engine, [rule(text)], now=T0)
    assert m.error == ""
    types = [o.instance_type for _, o in m.matches]
    return types if in_order else sorted(types)


def test_first_evaluation_fires_when_the_price_is_already_under(engine):
    crawl(engine, [offer("gpu_8x_h100", 1.87), offer("gpu_1x_h100", 2.49, count=1),
                   offer("gpu_8x_h100b", 1.95, region="us-west-1")])
    result = evaluate(engine, [rule("H100 under $2/h")], now=T0)
    assert (result.firing, result.notifications, result.fired) == (1, 1, ["h100-under-2"])
    (note,) = outbox(engine)
    assert note["title"] == "H100 under $2/h — 2 offers from $1.8700/GPU-h"
    assert note["target"] == "team" and note["kind"] == "firing" and note["status"] == "pending"
    # The cheapest first, with per-GPU and instance price, availability and a link.
    body = note["body_markdown"]
    assert body.index("us-east-1") < body.index("us-west-1")
    assert "**$1.8700/GPU-h** · $14.96/h for 8 GPUs" in body and "available: yes" in body
    assert "https://lambda.example/x" in body and "gpu_1x_h100" not in body
    assert "<b>lambda</b> us-east-1" in note["body_html"]
    assert "$1.8700/GPU-h · $14.96/h for 8 GPUs" in note["body_text"]
    assert store.firing_count(engine) == 1 and store.outbox_backlog(engine) == 1


def test_second_evaluation_sends_nothing_new(engine):
    crawl(engine, [offer("a", 1.87)])
    rules = [rule("H100 under $2/h")]
    evaluate(engine, rules, now=T0)
    crawl(engine, [offer("a", 1.87, at=T0 + timedelta(hours=1))], at=T0 + timedelta(hours=1))
    again = evaluate(engine, rules, now=T0 + timedelta(hours=1))
    assert (again.firing, again.notifications, again.fired) == (1, 0, [])
    assert len(outbox(engine)) == 1


def test_a_better_price_notifies_again_only_past_min_drop(engine):
    rules = [rule("H100 under $2/h", min_drop="5%")]
    crawl(engine, [offer("a", 1.90)])
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 1.85, at=t1)], at=t1)         # 2.6 % better: quiet
    assert evaluate(engine, rules, now=t1).notifications == 0
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("a", 1.70, at=t2)], at=t2)         # 10.5 % below the notified 1.90
    assert evaluate(engine, rules, now=t2).notifications == 1
    last = outbox(engine)[-1]
    assert last["kind"] == "improved"
    assert last["title"] == "H100 under $2/h — 1 offer from $1.7000/GPU-h (was $1.9000/GPU-h)"
    # The next improvement is measured from $1.70, not from the first $1.90.
    t3 = T0 + timedelta(hours=3)
    crawl(engine, [offer("a", 1.65, at=t3)], at=t3)
    assert evaluate(engine, rules, now=t3).notifications == 0


def test_resolution_has_hysteresis_and_is_sent_when_asked(engine):
    rules = [rule("H100 under $2/h", send_resolved=True)]
    crawl(engine, [offer("a", 1.99)])
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.01, at=t1)], at=t1)   # within the 2 % band: still firing
    r1 = evaluate(engine, rules, now=t1)
    assert (r1.firing, r1.resolved, r1.notifications) == (1, [], 0)
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("a", 1.98, at=t2)], at=t2)   # back under: no new "firing"
    assert evaluate(engine, rules, now=t2).notifications == 0
    t3 = T0 + timedelta(hours=3)
    crawl(engine, [offer("a", 2.35, at=t3)], at=t3)   # clearly above: resolved
    r3 = evaluate(engine, rules, now=t3)
    assert (r3.firing, r3.resolved, r3.notifications) == (0, ["h100-under-2"], 1)
    alert = store.load_states(engine)["rule:h100-under-2"]
    assert (alert["state"], alert["match_count"]) == ("inactive", 0)
    last = outbox(engine)[-1]
    assert last["kind"] == "resolved" and last["notify_type"] == "success"
    assert last["title"] == "RESOLVED: H100 under $2/h — cheapest now $2.3500/GPU-h"
    # Under again: a new firing episode notifies again.
    t4 = T0 + timedelta(hours=4)
    crawl(engine, [offer("a", 1.80, at=t4)], at=t4)
    assert evaluate(engine, rules, now=t4).fired == ["h100-under-2"]
    assert [n["kind"] for n in outbox(engine)] == ["firing", "resolved", "firing"]


def test_an_offer_exactly_at_the_top_of_the_band_keeps_the_alert_firing(engine):
    """Limit $2 with 25 % hysteresis: the band ends at $2.50, included."""
    rules = [rule("H100 under $2/h", hysteresis="25%")]
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, rules, now=T0).fired == ["h100-under-2"]
    for hours, price, firing in ((1, 2.5, 1), (2, 2.500001, 0)):
        at = T0 + timedelta(hours=hours)
        crawl(engine, [offer("a", price, at=at)], at=at)
        assert evaluate(engine, rules, now=at).firing == firing, price


def test_a_new_default_hysteresis_applies_from_the_next_evaluation(engine):
    """The `alerts:` defaults are read at every evaluation (a daemon reloads its config):
    widening the default hysteresis keeps firing an alert only the new band holds, and
    narrowing it again resolves the alert."""
    rules = [rule("H100 under $2/h")]
    crawl(engine, [offer("a", 1.5)])
    wide, narrow = {"hysteresis": "25%"}, {"hysteresis": "2%"}
    assert evaluate(engine, rules, now=T0, alert_settings=narrow).fired == ["h100-under-2"]
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.2, at=t1)], at=t1)     # outside 2 %, inside 25 %
    assert evaluate(engine, rules, now=t1, alert_settings=wide).firing == 1
    t2 = T0 + timedelta(hours=2)
    assert evaluate(engine, rules, now=t2, alert_settings=narrow).resolved == ["h100-under-2"]


def test_resolution_is_silent_without_send_resolved(engine):
    rules = [rule("H100 under $2/h")]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 3.0, at=t1)], at=t1)
    result = evaluate(engine, rules, now=t1)
    assert result.resolved == ["h100-under-2"] and result.notifications == 0


def test_unavailable_offers_and_vanished_offers_do_not_match(engine):
    crawl(engine, [offer("a", 1.5, available=False), offer("b", 2.5)])
    assert evaluate(engine, [rule("H100 under $2/h")], now=T0).firing == 0
    alert = store.load_states(engine)["rule:h100-under-2"]
    assert (alert["state"], alert["match_count"]) == ("inactive", 0)
    # An offer that disappears from a successful crawl resolves the alert.
    crawl(engine, [offer("c", 1.5, at=T0 + timedelta(hours=1)),
                   offer("b", 2.5, at=T0 + timedelta(hours=1))], at=T0 + timedelta(hours=1))
    rules = [rule("H100 under $2/h")]
    assert evaluate(engine, rules, now=T0 + timedelta(hours=1)).firing == 1
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("b", 2.5, at=t2)], at=t2)
    assert evaluate(engine, rules, now=t2).resolved == ["h100-under-2"]


def test_failing_source_neither_resolves_nor_fires_and_raises_one_stale_notice(engine):
    settings = {"stale_after_failures": 3, "notify_stale": True}
    rules = [rule("H100 under $2/h", send_resolved=True),
             rule("H100 under $2/h not on lambda", notify=("others",))]  # not told
    crawl(engine, [offer("a", 1.5)])
    crawl(engine, [offer("v", 3.0, source="vastai")], source="vastai")
    evaluate(engine, rules, now=T0, alert_settings=settings)
    for n in range(1, 5):                   # lambda's crawls fail from now on
        t = T0 + timedelta(hours=n)
        crawl(engine, [], at=t, status="failed")
        result = evaluate(engine, rules, now=t, alert_settings=settings)
        assert result.firing == 1 and result.resolved == []
    stale = [o for o in outbox(engine) if o["kind"] == "stale"]
    assert len(stale) == 1 and stale[0]["alert_key"] == "source:lambda"
    assert "lambda is stale (3 failed crawls" in stale[0]["title"]
    assert stale[0]["target"] == "team"
    # A cheap offer from a stale source does not make another rule fire.
    cheaper = [rule("H100 under $1.6/h", notify=("team",))]
    assert match_rules(engine, cheaper, now=T0 + timedelta(hours=5),
                       alert_settings=settings)[0].matched is False
    # It recovers, with a higher price: the rule resolves now, and "recovered" is sent.
    t = T0 + timedelta(hours=6)
    crawl(engine, [offer("a", 2.6, at=t)], at=t)
    result = evaluate(engine, rules, now=t, alert_settings=settings)
    assert result.resolved == ["h100-under-2"] and result.stale_sources == []
    assert [o["kind"] for o in outbox(engine)][-2:] == ["resolved", "recovered"]


def test_stale_notice_is_opt_in(engine):
    crawl(engine, [offer("a", 1.5)])
    for n in range(1, 5):
        crawl(engine, [], at=T0 + timedelta(hours=n), status="failed")
    result = evaluate(engine, [rule("H100 under $2/h")], now=T0 + timedelta(hours=5))
    assert result.stale_sources == ["lambda"] and result.notifications == 0
    assert result.firing == 0   # a stale source cannot make a rule fire
    # Turned on after it went stale, it sends no "recovered" for a "stale" never sent.
    t = T0 + timedelta(hours=6)
    crawl(engine, [offer("a", 2.5, at=t)], at=t)
    back = evaluate(engine, [rule("H100 under $2/h")], now=t,
                    alert_settings={"notify_stale": True})
    assert (back.stale_sources, back.notifications, outbox(engine)) == ([], 0, [])


def evaluate_after_restart(db_url: str, *rules: tuple[str, str]) -> list[int]:
    """Evaluate `rules` ((text, name) pairs, notifying "team") at T0 + 1 h as a restarted
    service does: a new engine of its own (nothing cached for the URL) and a new Evaluator
    (no state, market or pools in memory), everything read from the database. Returns
    [firing, notifications]."""
    from gpuradar.alerts.engine import Evaluator
    from gpuradar.storage.db import Engines

    engines = Engines()
    try:
        restarted = Evaluator(engines.open(db_url))
        result = restarted.evaluate([parse_rule(t, name=n, notify=("team",)) for t, n in rules],
                                    now=T0 + timedelta(hours=1))
    finally:
        engines.dispose()
    return [result.firing, result.notifications]


def test_a_restarted_service_sends_nothing_twice(engine, db_url):
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, [rule("H100 under $2/h")], now=T0).notifications == 1
    assert evaluate_after_restart(db_url, ("H100 under $2/h", "h100-under-2")) == [1, 0]
    assert len(outbox(engine)) == 1


def test_for_needs_consecutive_evaluations(engine):
    rules = [rule("H100 under $2/h", **{"for": 2})]
    crawl(engine, [offer("a", 1.5)])
    first = evaluate(engine, rules, now=T0)
    assert (first.firing, first.pending, first.notifications) == (0, 1, 0)
    second = evaluate(engine, rules, now=T0 + timedelta(minutes=5))
    assert (second.firing, second.notifications) == (1, 1)
    t1 = T0 + timedelta(hours=1)               # it resolves, then matches again:
    crawl(engine, [offer("a", 2.5, at=t1)], at=t1)
    assert evaluate(engine, rules, now=t1).resolved == ["h100-under-2"]
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("a", 1.5, at=t2)], at=t2)
    again = evaluate(engine, rules, now=t2)    # the two evaluations are counted afresh
    assert (again.firing, again.pending, again.notifications) == (0, 1, 0)
    assert evaluate(engine, rules, now=t2 + timedelta(minutes=5)).firing == 1


def test_pending_that_stops_matching_never_notifies(engine):
    rules = [rule("H100 under $2/h", **{"for": 3})]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.5, at=t1)], at=t1)
    evaluate(engine, rules, now=t1)
    stopped = store.load_states(engine)["rule:h100-under-2"]   # as `gpuradar alerts` lists it
    assert (stopped["state"], stopped["match_count"]) == ("inactive", 0)
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("a", 1.5, at=t2)], at=t2)
    assert evaluate(engine, rules, now=t2).pending == 1    # counting starts over
    assert evaluate(engine, rules, now=t2 + timedelta(minutes=5)).pending == 1  # 2 of 3
    assert outbox(engine) == []


def test_repeat_interval(engine):
    rules = [rule("H100 under $2/h", repeat="4h")]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)
    early = evaluate(engine, rules, now=T0 + timedelta(hours=3))
    assert (early.evaluated, early.notifications) == (0, 0)  # nothing changed, not yet due
    due = evaluate(engine, rules, now=T0 + timedelta(hours=4))
    assert (due.evaluated, due.notifications) == (1, 1)
    assert outbox(engine)[-1]["kind"] == "repeat"


def test_mute_until_holds_notifications_then_sends_once(engine):
    rules = [rule("H100 under $2/h", mute_until=T0 + timedelta(hours=2)),
             rule("H100 under $3/h", mute_until=T0 + timedelta(minutes=90))]
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, rules, now=T0).notifications == 0
    assert evaluate(engine, rules, now=T0 + timedelta(hours=1)).firing == 2
    ended = evaluate(engine, rules, now=T0 + timedelta(hours=2))  # one at its end, one after
    assert ended.notifications == 2
    assert evaluate(engine, rules, now=T0 + timedelta(hours=4)).notifications == 0


def test_cny_rule_compares_in_cny(engine):
    store_fx(engine, {"CNY": 0.14}, date(2026, 11, 1))
    crawl(engine, [offer("4090-a", 1.9, source="autodl", gpu="RTX-4090", count=1,
                         currency="CNY", usd_rate=0.14, region="beijing"),
                   offer("4090-b", 2.1, source="autodl", gpu="RTX-4090", count=1,
                         currency="CNY", usd_rate=0.14, region="beijing")], source="autodl")
    crawl(engine, [offer("4090-v", 0.25, source="vastai", gpu="RTX-4090", count=1)],
          source="vastai")  # $0.25 = ¥1.79 at 0.14
    (m,) = match_rules(engine, [rule("4090 under ¥2/h on autodl")], now=T0)
    assert [(o[4], round(v, 4)) for v, o in m.matches] == [("4090-a", 1.9)]
    (everywhere,) = match_rules(engine, [rule("4090 under ¥2/h")], now=T0)
    assert sorted(o[4] for _, o in everywhere.matches) == ["4090-a", "4090-v"]
    assert round(everywhere.best, 3) == round(0.25 / 0.14, 3)
    evaluate(engine, [rule("4090 under ¥2/h on autodl")], now=T0)
    note = outbox(engine)[0]
    assert note["title"] == "4090 under ¥2/h on autodl — 1 offer from ¥1.9000/GPU-h"


def test_an_offer_in_the_rules_currency_is_compared_as_quoted_others_at_the_stored_rate(
        engine):
    """The FX rate moved since the crawl (0.14 then, 0.125 stored now): a ¥ rule takes
    AutoDL's ¥1.90 as quoted; a $ rule takes the ¥ offer's dollar price ($0.266), a € rule
    that price at the stored euro rate. An offer in € whose dollar price could not be
    worked out (no rate then) is left out in ¥ and $, and taken as quoted in €."""
    store_fx(engine, {"CNY": 0.125, "EUR": 1.1}, date(2026, 11, 1))
    crawl(engine, [offer("4090-a", 1.9, source="autodl", gpu="RTX-4090", count=1,
                         currency="CNY", usd_rate=0.14, region="beijing"),
                   replace(offer("4090-e", 0.2, source="autodl", gpu="RTX-4090", count=1,
                                 currency="EUR", region="beijing"),
                           price_usd=None, price_per_gpu_usd=None)], source="autodl")
    in_cny, in_usd, in_eur = match_rules(engine, [
        rule("4090 under ¥2/h"), rule("4090 under $0.30/h"), rule("4090 under €0.30/h")],
        now=T0)
    assert [(o[4], round(v, 3)) for v, o in in_cny.matches] == [("4090-a", 1.9)]
    crawl(engine, [offer("4090-8", 1.9, source="autodl", gpu="RTX-4090", count=8,
                         currency="CNY", usd_rate=0.14, region="beijing")], source="autodl")
    whole, per_gpu = match_rules(engine, [rule("8x 4090 under ¥20/h"),        # per offer
                                          rule("8x 4090 under ¥2/h per GPU")], now=T0)
    assert [(o[4], round(v, 3)) for v, o in whole.matches] == [("4090-8", 15.2)]
    assert [(o[4], round(v, 3)) for v, o in per_gpu.matches] == [("4090-8", 1.9)]
    assert [(o[4], round(v, 3)) for v, o in in_usd.matches] == [("4090-a", 0.266)]
    assert [(o[4], round(v, 3)) for v, o in in_eur.matches] == [("4090-e", 0.2),
                                                               ("4090-a", 0.242)]
    assert in_cny.error == in_usd.error == in_eur.error == ""


def test_a_price_rule_and_a_drop_rule_on_the_same_offers_both_work(engine):
    now = datetime.now(UTC).replace(microsecond=0)
    crawl(engine, [offer("a", 1.8, at=now - timedelta(days=6))], at=now - timedelta(days=6))
    crawl(engine, [offer("a", 1.5, at=now - timedelta(hours=1))], at=now - timedelta(hours=1))
    result = evaluate(engine, [rule("H100 under $2/h"),
                               rule("H100 drops 10% below its 7-day low")], now=now)
    assert result.errors == {}
    assert result.fired == ["h100-under-2", "h100-drops-10pct-below-its-7-day-low"]


def test_a_stale_sources_offers_above_the_band_do_not_hold_a_firing_alert(engine):
    """Vast.ai's offer made the alert fire; Lambda's crawls fail (stale) with its last price
    far above the band; then Vast.ai's price rises above the band too: nothing fresh or
    stale is within the band, so the alert resolves."""
    settings = {"stale_after_failures": 2}
    rules = [rule("H100 under $2/h"), rule("H100 under $4/h")]  # one pool, up to $4.08
    crawl(engine, [offer("a", 3.0)])
    crawl(engine, [offer("v", 1.5, source="vastai")], source="vastai")
    assert evaluate(engine, rules, now=T0, alert_settings=settings).firing == 2
    for n in (1, 2):
        t = T0 + timedelta(hours=n)
        crawl(engine, [], at=t, status="failed")
    t = T0 + timedelta(hours=3)
    crawl(engine, [offer("v", 2.6, source="vastai", at=t)], source="vastai", at=t)
    result = evaluate(engine, rules, now=t, alert_settings=settings)
    assert result.stale_sources == ["lambda"] and result.resolved == ["h100-under-2"]


def test_filters_count_region_sources_pricing_availability_instance(engine):
    crawl(engine, [offer("8x-east", 2.9, count=8, region="us-east-1"),
                   offer("8x-eu", 2.0, count=8, region="eu-west-1", available=None),
                   offer("1x-east", 1.0, count=1, region="us-east-1"),
                   offer("spot-8x", 1.2, count=8, pricing="spot", region="us-west-2")])
    crawl(engine, [offer("v8", 2.5, source="vastai", count=8, region="us-texas")],
          source="vastai")

    names = partial(matched, engine)

    assert names("8x H100 under $21/h per instance region us-*") == ["spot-8x", "v8"]
    assert names("8x H100 on-demand under $21/h per instance region us-*") == ["v8"]
    assert names("8x H100 on-demand under $20/h per instance region us-*") == []  # strict
    assert names("H100 on-demand under $3/h not on vastai") == ["1x-east", "8x-east", "8x-eu"]
    assert names("H100 under $3/h available in eu-*") == []          # availability unknown
    assert names("H100 under $3/h in eu-*") == ["8x-eu"]
    assert names("H100 spot under 1.5 USD/h in lambda,aws") == ["spot-8x"]
    assert names("any 80GB+ GPU under $1.10/h") == ["1x-east"]
    assert names("any 90GB+ GPU under $5/h") == []
    assert names("H100 under $3/h with 640GB+ total GPU memory not region us-west-*") == [
        "8x-east", "8x-eu", "v8"]


def test_an_on_demand_rule_is_not_fired_by_a_cheaper_spot_offer(engine):
    """The evaluation keeps a rule's pricing: a spot offer under the price does not fire an
    on-demand rule, and an on-demand offer does not fire a spot rule."""
    crawl(engine, [offer("spot-8x", 1.2, pricing="spot"), offer("od-8x", 2.9)])
    result = evaluate(engine, [rule("H100 on-demand under $2/h", name="od"),
                               rule("H100 spot under $3/h", name="spot")], now=T0)
    assert result.fired == ["spot"]
    (note,) = outbox(engine)
    assert "spot-8x" in note["body_markdown"] and "od-8x" not in note["body_markdown"]


def test_drop_below_the_recent_low(engine):
    now = datetime.now(UTC).replace(microsecond=0)
    days = [now - timedelta(days=d) for d in (6, 4)]
    crawl(engine, [offer("a", 2.0, at=days[0]), offer("b", 2.2, at=days[0])], at=days[0])
    crawl(engine, [offer("a", 1.9, at=days[1]), offer("b", 2.2, at=days[1])], at=days[1])
    rules = [rule("H100 drops 15% below its 7-day low")]
    assert match_rules(engine, rules, now=now)[0].matched is False
    t = now - timedelta(hours=1)
    crawl(engine, [offer("a", 1.9, at=t), offer("b", 1.55, at=t)], at=t)   # 18 % under 1.90
    (m,) = match_rules(engine, rules, now=now)
    assert m.matched and m.reference == 1.9 and [o[4] for _, o in m.matches] == ["b"]
    assert evaluate(engine, rules, now=now).fired == ["h100-drops-15pct-below-its-7-day-low"]


def test_a_drop_is_measured_against_the_low_of_the_rules_own_pricing(engine):
    """An on-demand drop rule measures from the on-demand 7-day low: a spot price, lower
    all week, is not its reference."""
    now = datetime.now(UTC).replace(microsecond=0)
    week = now - timedelta(days=6)
    crawl(engine, [offer("a", 1.9, at=week), offer("b", 2.2, at=week),
                   offer("s", 1.0, pricing="spot", at=week)], at=week)
    t = now - timedelta(hours=1)
    crawl(engine, [offer("a", 1.9, at=t), offer("b", 1.55, at=t),
                   offer("s", 1.0, pricing="spot", at=t)], at=t)   # b: 18 % under 1.90
    result = evaluate(engine, [rule("H100 on-demand drops 15% below its 7-day low")], now=now)
    assert result.fired == ["h100-on-demand-drops-15pct-below-its-7-day-low"]
    assert "**$1.5500/GPU-h**" in outbox(engine)[0]["body_markdown"]


def test_changed_rule_is_a_new_alert_and_removed_rules_are_forgotten(engine):
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h", name="cheap")], now=T0)
    again = evaluate(engine, [rule("H100 under $1.8/h", name="cheap")], now=T0)
    assert again.fired == ["cheap"] and again.notifications == 1
    assert evaluate(engine, [], now=T0).state_writes == 1     # its state deleted
    assert store.load_states(engine) == {} and store.firing_count(engine) == 0


def test_a_rule_removed_while_the_service_was_down_is_forgotten(engine, db_url):
    """A rule taken out of the config before a restart: the restarted service, reading the
    states from the database, deletes that rule's state and keeps the others'."""
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h", name="kept"),
                      rule("H100 under $1.8/h", name="gone")], now=T0)
    evaluate_after_restart(db_url, ("H100 under $2/h", "kept"))
    assert set(store.load_states(engine)) == {"rule:kept"}


def test_no_targets_means_no_outbox_rows_but_state_is_kept(engine):
    crawl(engine, [offer("a", 1.5)])
    result = evaluate(engine, [parse_rule("H100 under $2/h")], now=T0)
    assert (result.firing, result.notifications) == (1, 0)
    assert outbox(engine) == []


def test_user_templates_override_the_built_in_ones(engine, tmp_path):
    (tmp_path / "title.txt.j2").write_text(
        "[gpu] {{ rule.text }}: {{ count }} at {{ best }}", encoding="utf-8")
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h")], now=T0,
             alert_settings={"templates": str(tmp_path)})
    (note,) = outbox(engine)
    assert note["title"] == "[gpu] H100 under $2/h: 1 at $1.5000"
    assert "**$1.5000/GPU-h**" in note["body_markdown"]      # the others stay built in


# -- the price basis ----------------------------------------------------------------------------
def test_a_count_rule_matches_whole_offers_of_exactly_that_count_under_the_price(engine):
    # p5.48xlarge on demand: $55.04/h for 8 GPUs, $6.88 per GPU-hour.
    crawl(engine, [offer("p5.48xlarge", 55.04 / 8, source="aws"),
                   offer("p5.48xlarge-spot", 23.67 / 8, source="aws", pricing="spot"),
                   offer("p4de.24xlarge", 2.5, source="aws", count=4),          # $10/h, 4 GPUs
                   offer("p5e.48xlarge", 25.0 / 8, source="aws")],              # exactly $25
          source="aws")

    names = partial(matched, engine, in_order=True)

    assert names("8x H100 under $25/h") == ["p5.48xlarge-spot"]        # $23.67 for 8 GPUs
    assert names("8x H100 under $25.01/h") == ["p5.48xlarge-spot", "p5e.48xlarge"]
    assert names("at least 4x H100 under $25/h") == ["p4de.24xlarge", "p5.48xlarge-spot"]
    # Per GPU-hour, as always, when the rule names no count, or says so.
    assert names("H100 under $3/h") == ["p4de.24xlarge", "p5.48xlarge-spot"]
    assert names("8x H100 under $3/GPU-h") == ["p5.48xlarge-spot"]
    assert names("8x H100 under $7/h per GPU") == ["p5.48xlarge-spot", "p5e.48xlarge",
                                                   "p5.48xlarge"]
    assert names("H100 under $24/h per instance") == ["p4de.24xlarge", "p5.48xlarge-spot"]


def test_messages_show_both_prices_with_their_units(engine):
    crawl(engine, [offer("p5.48xlarge-spot", 23.67 / 8, source="aws", pricing="spot")],
          source="aws")
    evaluate(engine, [rule("8x H100 under $25/h"), rule("H100 under $3/h")], now=T0)
    whole, per_gpu = outbox(engine)
    assert whole["title"] == "8x H100 under $25/h — 1 offer from $23.67/h"
    assert "**$23.67/h for 8 GPUs** · $2.9588/GPU-h" in whole["body_markdown"]
    assert "$23.67/h for 8 GPUs · $2.9588/GPU-h" in whole["body_text"]
    assert "Read as: whole offer, exactly 8x H100, under $25.00/h." in whole["body_text"]
    assert per_gpu["title"] == "H100 under $3/h — 1 offer from $2.9588/GPU-h"
    assert "**$2.9588/GPU-h** · $23.67/h for 8 GPUs" in per_gpu["body_markdown"]
    # No per-GPU price is ever written as a bare /h.
    for note in (whole, per_gpu):
        for body in (note["title"], note["body_markdown"], note["body_text"]):
            assert "$2.9588/h" not in body


def test_a_message_in_another_currency_converts_both_prices_at_the_stored_rate(engine):
    store_fx(engine, {"CNY": 0.14}, date(2026, 11, 1))
    crawl(engine, [offer("4090-v", 0.25, source="vastai", gpu="RTX-4090", count=2)],
          source="vastai")
    evaluate(engine, [rule("4090 under ¥2/h")], now=T0)
    (note,) = outbox(engine)  # $0.25 = ¥1.7857 at 0.14; the whole offer $0.50 = ¥3.5714
    assert "¥1.7857/GPU-h · ¥3.5714/h for 2 GPUs (quoted $0.5000/h)" in note["body_text"]
    best = store.load_states(engine)["rule:4090-under-2"]["best"]
    assert (round(best["per_gpu"], 4), round(best["instance"], 4)) == (1.7857, 3.5714)


def test_a_stored_rule_whose_meaning_changed_starts_afresh(engine):
    """`8x H100 under $25/h` was per GPU-hour before the basis was made explicit: its stored
    alert (firing, notified) belongs to another condition. `H100 under $2/h` means what it
    meant: its alert goes on, nothing is sent again."""
    crawl(engine, [offer("p5", 1.5)])
    rules = [rule("8x H100 under $25/h", name="big"), rule("H100 under $2/h", name="cheap")]
    old = {"big": "2a77ca9cfe90484a", "cheap": "8dfde82874ca01d1"}   # digests as stored then
    with engine.begin() as conn:
        for name, digest in old.items():
            conn.execute(STATE.insert().values(
                key=f"rule:{name}", kind="rule", name=name, rule_hash=digest, description="",
                state="firing", active_count=1, fired_at=T0, last_notified_at=T0,
                notified_value=1.5, best_value=1.5, currency="USD", match_count=1, best={},
                updated_at=T0))
    result = evaluate(engine, rules, now=T0 + timedelta(hours=1))
    assert result.fired == ["big"] and result.notifications == 1
    assert outbox(engine)[0]["alert_key"] == "rule:big"


# -- what a repeat does, and when nothing is sent ---------------------------------------------
def test_after_a_repeat_the_next_evaluations_send_nothing_until_the_next_interval(engine):
    rules = [rule("H100 under $2/h", repeat="4h")]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)
    sent = [evaluate(engine, rules, now=T0 + timedelta(hours=h)).notifications
            for h in (4, 5, 6, 7, 8)]
    assert sent == [1, 0, 0, 0, 1]
    assert [n["kind"] for n in outbox(engine)] == ["firing", "repeat", "repeat"]


# -- isolation of a failing rule -------------------------------------------------------------
def test_a_rule_that_raises_is_isolated_and_recovers(engine, tmp_path):
    # A user's title template that assumes every rule names a source (`... on SOURCE`):
    # rendering fails for a rule that does not.
    (tmp_path / "title.txt.j2").write_text(
        '{{ rule.text }} from {{ rule.text.split(" on ")[1] }}', encoding="utf-8")
    settings = {"templates": str(tmp_path)}
    crawl(engine, [offer("a", 1.5)])
    good, bad = rule("H100 under $2/h on lambda"), rule("H100 under $3/h")
    result = evaluate(engine, [good, bad], now=T0, alert_settings=settings)
    assert result.fired == ["h100-under-2-on-lambda"] and result.notifications == 1
    assert list(result.errors) == ["h100-under-3"]
    assert "UndefinedError" in result.errors["h100-under-3"]
    assert outbox(engine)[0]["title"] == "H100 under $2/h on lambda from lambda"
    states = store.load_states(engine)
    assert states["rule:h100-under-3"]["state"] == "error"
    assert "UndefinedError" in states["rule:h100-under-3"]["best"]["error"]
    assert sorted((a["name"], a["state"]) for a in store.alert_rows(engine)) == [
        ("h100-under-2-on-lambda", "firing"), ("h100-under-3", "error")]
    # Still failing at the next evaluation; once the template is fixed it fires once.
    again = evaluate(engine, [good, bad], now=T0 + timedelta(hours=1), alert_settings=settings)
    assert list(again.errors) == ["h100-under-3"] and again.notifications == 0
    fixed = evaluate(engine, [good, bad], now=T0 + timedelta(hours=2))
    assert fixed.errors == {} and fixed.fired == ["h100-under-3"] and fixed.notifications == 1
    assert store.load_states(engine)["rule:h100-under-3"]["best"]["source"] == "lambda"


# -- only what changed is looked at again ---------------------------------------------------
def test_a_crawl_reaches_only_the_rules_its_offers_can_change(engine):
    crawl(engine, [offer("a", 1.5)])
    crawl(engine, [offer("v", 0.35, source="vastai", gpu="RTX-4090", count=1)],
          source="vastai")
    rules = [rule("H100 under $2/h"), rule("4090 under $0.40/h"), rule("4090 under $0.30/h")]
    first = evaluate(engine, rules, now=T0)
    assert first.evaluated == 3 and first.fired == ["h100-under-2", "4090-under-0.40"]
    # Lambda crawls, its H100 price unchanged: no rule can have changed.
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [offer("a", 1.5, at=t1)], at=t1)
    assert evaluate(engine, rules, now=t1).evaluated == 0
    # Vast.ai's 4090 drops to $0.25: both 4090 rules, not the H100 one.
    t2 = T0 + timedelta(minutes=20)
    crawl(engine, [offer("v", 0.25, source="vastai", gpu="RTX-4090", count=1, at=t2)],
          source="vastai", at=t2)
    second = evaluate(engine, rules, now=t2)
    assert second.evaluated == 2 and second.fired == ["4090-under-0.30"]
    assert [n["kind"] for n in outbox(engine)] == ["firing", "firing", "improved", "firing"]


def test_rules_given_in_another_order_each_keep_their_own_offers(engine):
    """The same rules, reordered between evaluations (a user reorders the rules file), while
    one GPU's price moves at a time: each alert follows its own GPU's price."""
    h100, a100 = rule("H100 under $2/h"), rule("A100 under $2/h")
    prices = {"h": 1.5, "a": 1.2}
    for n in range(5):
        at = T0 + timedelta(minutes=10 * n)
        if n:
            prices["ha"[n % 2]] -= 0.1
        crawl(engine, [offer("h", prices["h"], at=at),
                       offer("a", prices["a"], gpu="A100-SXM-80GB", at=at)], at=at)
        evaluate(engine, [h100, a100] if n % 2 == 0 else [a100, h100], now=at)
        states = store.load_states(engine)
        for name, instance in (("h100", "h"), ("a100", "a")):
            best = states[f"rule:{name}-under-2"]["best"]
            assert (best["instance_type"], round(best["per_gpu"], 4)) == (
                instance, round(prices[instance], 4)), n


def test_equally_cheap_offers_are_listed_as_rules_test_lists_them(engine):
    """Offers at the same price are listed oldest first, whether the evaluation kept its
    pools from earlier evaluations or `rules test` builds them afresh: an older and a newer
    offer move to the price of a third; a new offer comes in between two others."""
    crawl(engine, [offer("a", 2.5), offer("b", 1.8), offer("c", 2.6), offer("d", 1.9)])
    rules = [rule("H100 under $1.88/h")]
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [offer(i, p, at=t1) for i, p in
                   [("a", 1.8), ("b", 1.8), ("c", 1.8), ("d", 1.9), ("e", 1.85)]], at=t1)
    evaluate(engine, rules, now=t1)
    (listed,) = match_rules(engine, rules, now=t1)
    assert [o[4] for _, o in listed.matches] == ["a", "b", "c", "e"]
    alert = store.load_states(engine)["rule:h100-under-1.88"]
    assert (alert["best"]["instance_type"], alert["match_count"]) == ("a", 4)
    t2 = T0 + timedelta(minutes=20)                  # b leaves the tie, from its middle
    crawl(engine, [offer(i, p, at=t2) for i, p in
                   [("a", 1.8), ("b", 1.7), ("c", 1.8), ("d", 1.9), ("e", 1.85)]], at=t2)
    evaluate(engine, rules, now=t2)
    alert = store.load_states(engine)["rule:h100-under-1.88"]
    assert (alert["best"]["instance_type"], alert["match_count"]) == ("b", 4)
    improved = outbox(engine)[-1]                  # $1.70 is 5 % under $1.80: notified
    assert improved["kind"] == "improved"
    assert re.findall(r"ago · (\w+) https", improved["body_text"]) == ["b", "a", "c", "e"]


def test_a_rule_added_later_does_not_see_offers_that_vanished_or_their_old_prices(engine):
    crawl(engine, [offer("a", 1.5), offer("b", 2.5), offer("c", 1.7)])
    evaluate(engine, [rule("H100 under $2/h")], now=T0)
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [offer("b", 2.5, at=t1), offer("c", 1.9, at=t1)], at=t1)  # a is gone
    evaluate(engine, [rule("H100 under $2/h")], now=t1)
    t2 = T0 + timedelta(minutes=20)
    added = rule("H100 under $3/h on lambda")       # a new pool, built from the market kept
    evaluate(engine, [rule("H100 under $2/h"), added], now=t2)
    best = store.load_states(engine)["rule:h100-under-3-on-lambda"]
    assert (best["match_count"], best["best"]["instance_type"], best["best_value"]) == (
        2, "c", 1.9)


def test_a_title_longer_than_1000_characters_is_cut_to_1000(engine):
    regions = ",".join(f"us-east-{i}" for i in range(1, 150))    # a rule of 1,300 characters
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule(f"H100 under $2/h region us-east-1,{regions}", name="long")],
             now=T0)
    (note,) = outbox(engine)
    assert len(note["title"]) == 1000 and note["title"].startswith("H100 under $2/h region")
    description = store.load_states(engine)["rule:long"]["description"]
    assert len(description) == 1000 and description.startswith("H100 under $2/h region")


def test_an_evaluation_whose_writes_fail_is_decided_again_by_the_next(engine):
    """The database refuses an evaluation's writes (the outbox row of a firing): nothing was
    recorded, so the next evaluation, with no new price to look at, fires and queues it."""
    crawl(engine, [offer("a", 2.5)])
    rules = [rule("H100 under $2/h")]
    assert evaluate(engine, rules, now=T0 - timedelta(minutes=10)).fired == []
    crawl(engine, [offer("a", 1.5)])

    with refusing(engine, "INSERT INTO notification", "database or disk is full"), \
            pytest.raises(OperationalError):
        evaluate(engine, rules, now=T0)
    again = evaluate(engine, rules, now=T0 + timedelta(minutes=1))
    assert (again.fired, again.notifications) == (["h100-under-2"], 1)
    assert [n["kind"] for n in outbox(engine)] == ["firing"]


def test_a_rule_sharing_its_offers_with_a_higher_one_stays_firing_within_its_band(engine):
    """`under $2/h` and `under $4/h` read one set of offers: the $2 alert keeps firing while
    its cheapest offer is within its own band ($2.01 with the default 2 %), whatever the
    dearer offers the $4 rule also sees."""
    rules = [rule("H100 under $2/h"), rule("H100 under $4/h")]
    crawl(engine, [offer("a", 1.5), offer("b", 3.5)])
    assert evaluate(engine, rules, now=T0).firing == 2
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.01, at=t1), offer("b", 3.5, at=t1)], at=t1)
    result = evaluate(engine, rules, now=t1)
    assert (result.firing, result.resolved) == (2, [])
    t2 = T0 + timedelta(hours=2)       # b moves within the $4 band, far above the $2 one
    crawl(engine, [offer("a", 2.01, at=t2), offer("b", 3.0, at=t2)], at=t2)
    assert evaluate(engine, rules, now=t2).evaluated == 1


def test_a_pending_rule_read_back_from_the_database_starts_over_when_it_stops_matching(
        engine, db_url):
    rules = [rule("H100 under $2/h", **{"for": 3})]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)
    evaluate(engine, rules, now=T0 + timedelta(minutes=5))         # pending, 2 of 3
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.5, at=t1)], at=t1)
    other = another_process(db_url)
    try:
        evaluate(other, rules, now=t1)
    finally:
        other.dispose()
    assert store.load_states(engine)["rule:h100-under-2"]["state"] == "inactive"


def test_hundreds_of_offers_take_a_new_dearest_one(engine):
    """A marketplace lists hundreds of offers under a rule's band; a new one dearer than all
    of them joins the rule's offers kept in memory at their end."""
    cheap = [offer(f"o{n}", 1.0 + n * 0.003) for n in range(300)]
    crawl(engine, cheap)
    rules = [rule("H100 under $2/h")]
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [replace(o, observed_at=t1) for o in cheap] + [offer("z", 1.95, at=t1)],
          at=t1)
    assert evaluate(engine, rules, now=t1).errors == {}
    assert store.load_states(engine)["rule:h100-under-2"]["match_count"] == 301
    t2 = T0 + timedelta(minutes=20)                    # the 300th offer becomes the cheapest
    crawl(engine, [replace(o, observed_at=t2) for o in cheap[:-1]]
          + [offer("o299", 0.9, at=t2), offer("z", 1.95, at=t2)], at=t2)
    assert evaluate(engine, rules, now=t2).errors == {}
    alert = store.load_states(engine)["rule:h100-under-2"]
    assert (alert["match_count"], alert["best"]["instance_type"]) == (301, "o299")


def test_the_database_stays_the_truth_for_the_state_kept_in_the_process(engine):
    crawl(engine, [offer("a", 1.5)])
    rules = [rule("H100 under $2/h")]
    assert evaluate(engine, rules, now=T0).notifications == 1
    with engine.begin() as conn:          # another process (an operator) clears the state
        conn.execute(STATE.delete())
    again = evaluate(engine, rules, now=T0 + timedelta(hours=1))
    assert again.fired == ["h100-under-2"] and again.notifications == 1


def test_a_new_exchange_rate_reprices_a_rule_in_another_currency(engine):
    store_fx(engine, {"CNY": 0.125}, date(2026, 11, 1))
    crawl(engine, [offer("4090-v", 0.25, source="vastai", gpu="RTX-4090", count=1)],
          source="vastai")                                   # $0.25 = ¥2.00 at 0.125
    rules = [rule("4090 under ¥2/h")]
    assert evaluate(engine, rules, now=T0).fired == []       # not under ¥2
    store_fx(engine, {"CNY": 0.14}, date(2026, 11, 2))       # the next day: ¥1.79
    assert len(evaluate(engine, rules, now=T0 + timedelta(minutes=5)).fired) == 1
    (note,) = outbox(engine)
    assert note["title"] == "4090 under ¥2/h — 1 offer from ¥1.7857/GPU-h"
    assert evaluate(engine, rules, now=T0 + timedelta(minutes=10)).evaluated == 0  # same rate


def test_a_rule_with_a_higher_limit_added_beside_a_lower_one_sees_its_offers(engine):
    """Rules differing only in their limit share the offers the engine keeps in memory: the
    second, higher rule must still see the offers between the two limits."""
    crawl(engine, [offer("a", 2.5)])
    low = rule("H100 under $2/h")
    assert evaluate(engine, [low], now=T0).fired == []
    both = evaluate(engine, [low, rule("H100 under $3/h")], now=T0 + timedelta(minutes=5))
    assert both.fired == ["h100-under-3"]
    assert outbox(engine)[0]["title"] == "H100 under $3/h — 1 offer from $2.5000/GPU-h"


def test_the_recent_low_includes_prices_that_ended_within_the_window(engine):
    """The 7-day low counts a price that held four days ago and has since risen: a new price
    18 % under the current one but only 14 % under that low is not a 15 % drop."""
    now = datetime.now(UTC).replace(microsecond=0)
    days = [now - timedelta(days=d) for d in (6, 4)]
    crawl(engine, [offer("a", 1.8, at=days[0]), offer("b", 2.2, at=days[0])], at=days[0])
    crawl(engine, [offer("a", 1.9, at=days[1]), offer("b", 2.2, at=days[1])], at=days[1])
    t = now - timedelta(hours=1)
    crawl(engine, [offer("a", 1.9, at=t), offer("b", 1.55, at=t)], at=t)
    (m,) = match_rules(engine, [rule("H100 drops 15% below its 7-day low")], now=now)
    assert m.matched is False and m.reference == 1.8


# -- what a rule asks of an offer ------------------------------------------------------------
def test_offers_short_of_what_the_rule_asks_for_do_not_match(engine):
    """Availability, vCPUs, RAM and GPU memory each keep out the offers that lack them."""
    specs = {"vcpus": 64.0, "memory_gb": 512.0}
    crawl(engine, [
        replace(offer("full", 1.5), **specs),
        replace(offer("maybe", 1.5, available=None), **specs),
        replace(offer("few-cpus", 1.5), vcpus=16.0, memory_gb=512.0),
        replace(offer("small-ram", 1.5), vcpus=64.0, memory_gb=128.0),
        offer("a100-80", 1.5, gpu="A100-SXM-80GB"),
        offer("a100-40", 1.2, gpu="A100-SXM-40GB"),
    ])

    names = partial(matched, engine)

    assert names("H100 under $3/h available") == ["few-cpus", "full", "small-ram"]
    assert names("H100 under $3/h with 32+ vCPUs") == ["full", "maybe", "small-ram"]
    assert names("H100 under $3/h with 64+ vCPUs") == ["full", "maybe", "small-ram"]
    assert names("H100 under $3/h with 256GB+ RAM") == ["few-cpus", "full", "maybe"]
    assert names("A100 with 80GB+ VRAM under $3/h") == ["a100-80"]
    assert names("A100 under $3/h") == ["a100-40", "a100-80"]


def test_memory_minimums_allow_3_percent_for_gb_and_gib_and_no_more(engine):
    """`100GB+` accepts 97 GB (a provider stating GiB, or rounding down) and not 96.99 GB:
    RAM, the memory of a GPU the catalog does not know, and the total over the GPUs."""
    crawl(engine, [
        replace(offer("ram-97", 1.5), memory_gb=97.0),
        replace(offer("ram-96.99", 1.5), memory_gb=96.99),
        replace(offer("gpu-97", 1.5, gpu="Blackwell Ultra X"), gpu_memory_gb=97.0),
        replace(offer("gpu-96.99", 1.5, gpu="Blackwell Ultra X"), gpu_memory_gb=96.99),
        replace(offer("gpu-unstated", 1.5, gpu="Unknown X"), gpu_memory_gb=None),
    ])

    names = partial(matched, engine)

    assert names("H100 under $3/h with 100GB+ RAM") == ["ram-97"]
    assert names("any 100GB+ GPU under $3/h") == ["gpu-97"]
    assert names("any GPU under $3/h with 776GB+ total GPU memory") == [
        "gpu-96.99", "gpu-97"]                                       # 8 x 97 = 776
    assert names("any GPU under $3/h with 800GB+ total GPU memory") == ["gpu-97"]


def test_a_source_crawled_for_the_first_time_is_seen_at_the_next_evaluation(engine):
    rules = [rule("H100 under $2/h")]
    crawl(engine, [offer("a", 2.5)])
    assert evaluate(engine, rules, now=T0).fired == []
    t1 = T0 + timedelta(minutes=5)
    crawl(engine, [offer("v", 1.8, source="vastai", at=t1)], source="vastai", at=t1)
    again = evaluate(engine, rules, now=t1)
    assert again.errors == {} and again.fired == ["h100-under-2"]
    assert outbox(engine)[0]["title"] == "H100 under $2/h — 1 offer from $1.8000/GPU-h"


def test_a_rule_of_a_new_kind_added_after_existing_ones_is_evaluated(engine):
    crawl(engine, [offer("a", 1.5), offer("b", 1.2, gpu="A100-SXM-80GB")])
    h100 = rule("H100 under $2/h")
    assert evaluate(engine, [h100], now=T0).fired == ["h100-under-2"]
    both = evaluate(engine, [h100, rule("A100 under $2/h")], now=T0 + timedelta(minutes=5))
    assert both.errors == {} and both.fired == ["a100-under-2"]


def test_a_rule_in_a_currency_whose_stored_rate_is_zero_matches_nothing_and_says_why(engine):
    """A zero rate is no rate: even offers priced in euros themselves are not compared."""
    store_fx(engine, {"EUR": 0.0}, date(2026, 11, 1))
    crawl(engine, [offer("eu", 1.5, currency="EUR", usd_rate=1.1)])
    (m,) = match_rules(engine, [rule("H100 under €2/h")], now=T0)
    assert (m.matched, m.note) == (False, "no exchange rate for EUR")


def test_a_rule_resolves_even_when_a_rule_with_a_higher_limit_shares_its_offers(engine):
    """The cheap rule's hysteresis band ends at $2.04, whatever the $3 rule keeps in view."""
    rules = [rule("H100 under $2/h", send_resolved=True), rule("H100 under $3/h")]
    crawl(engine, [offer("a", 1.9)])
    assert evaluate(engine, rules, now=T0).firing == 2
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 2.5, at=t1)], at=t1)
    r1 = evaluate(engine, rules, now=t1)
    assert (r1.firing, r1.resolved) == (1, ["h100-under-2"])
    assert outbox(engine)[-1]["title"] == "RESOLVED: H100 under $2/h — cheapest now $2.5000/GPU-h"


def test_the_cheapest_price_now_ignores_the_rules_limit(engine):
    """What `gpuradar alerts` shows as "cheapest now" for a resolved rule."""
    crawl(engine, [offer("a", 2.5), offer("b", 3.1)])
    assert band_best(rule("H100 under $2/h"), read_market(engine, T0)) == 2.5
    assert band_best(rule("A100 under $2/h"), read_market(engine, T0)) is None


def test_a_source_without_a_successful_crawl_for_stale_after_is_stale(engine):
    crawl(engine, [offer("a", 1.5)])
    rules = [rule("H100 under $2/h")]
    first = evaluate(engine, rules, now=T0 + timedelta(days=1))
    assert (first.stale_sources, first.fired) == ([], ["h100-under-2"])
    edge = evaluate(engine, rules, now=T0 + timedelta(days=2))   # exactly stale_after: not yet
    assert edge.stale_sources == []
    late = T0 + timedelta(days=2, hours=1)
    result = evaluate(engine, rules, now=late)      # stale: its offer keeps the rule firing
    assert (result.stale_sources, result.firing, result.resolved) == (["lambda"], 1, [])
    never = evaluate(engine, rules, now=late, alert_settings={"stale_after": "never"})
    assert (never.stale_sources, never.firing) == ([], 1)


# -- notifications and their messages --------------------------------------------------------
def test_a_reworded_rule_keeps_its_alert_and_shows_its_new_text(engine):
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h", name="cheap")], now=T0)
    again = evaluate(engine, [rule("H100 under 2 USD/h", name="cheap")],
                     now=T0 + timedelta(hours=1))
    assert (again.firing, again.fired, again.notifications) == (1, [], 0)
    assert store.load_states(engine)["rule:cheap"]["description"] == "H100 under 2 USD/h"


def test_templates_get_the_earlier_price_only_for_an_improvement(engine, tmp_path):
    """`previous` is what an improvement improved on, `cheapest_now` what a resolved alert's
    offers cost now: a user's template that prints them unconditionally shows nothing there
    for the other kinds."""
    (tmp_path / "title.txt.j2").write_text(
        "{{ kind }}: {{ best }} [{{ previous }}] [{{ cheapest_now }}]", encoding="utf-8")
    settings = {"templates": str(tmp_path)}
    rules = [rule("H100 under $2/h", repeat="4h", send_resolved=True)]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0, alert_settings=settings)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 1.2, at=t1)], at=t1)
    evaluate(engine, rules, now=t1, alert_settings=settings)
    evaluate(engine, rules, now=T0 + timedelta(hours=5), alert_settings=settings)
    t6 = T0 + timedelta(hours=6)
    crawl(engine, [offer("a", 2.6, at=t6)], at=t6)
    evaluate(engine, rules, now=t6, alert_settings=settings)
    assert [n["title"] for n in outbox(engine)] == [
        "firing: $1.5000 [] []", "improved: $1.2000 [$1.5000] []", "repeat: $1.2000 [] []",
        "resolved: [] [$2.6000]"]


@pytest.mark.parametrize(("min_drop", "default"), [("5%", "$0.50"), ("$0.10", "20%")])
def test_a_drop_of_exactly_min_drop_notifies(engine, min_drop, default):
    """The rule's own `min_drop` replaces the `alerts:` default, whichever unit each has."""
    rules = [rule("H100 under $2.50/h", min_drop=min_drop)]
    settings = {"min_drop": default}
    crawl(engine, [offer("a", 2.0)])
    evaluate(engine, rules, now=T0, alert_settings=settings)
    t_half = T0 + timedelta(minutes=30)
    crawl(engine, [offer("a", 1.95, at=t_half)], at=t_half)  # half of min_drop: quiet
    assert evaluate(engine, rules, now=t_half, alert_settings=settings).notifications == 0
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 1.9, at=t1)], at=t1)    # 5 %, $0.10 below the notified $2.00
    assert evaluate(engine, rules, now=t1, alert_settings=settings).notifications == 1
    last = outbox(engine)[-1]
    assert last["kind"] == "improved"
    assert last["title"] == "H100 under $2.50/h — 1 offer from $1.9000/GPU-h (was $2.0000/GPU-h)"


@pytest.mark.parametrize("min_drop", ["$0", "0%"])
def test_a_price_higher_by_a_rounding_error_is_no_improvement(engine, min_drop):
    """With `min_drop: $0` (or 0 %) every lower price notifies, but not the same one (when
    another offer changes) nor one that is higher."""
    rules = [rule("H100 under $2/h", min_drop=min_drop)]
    crawl(engine, [offer("a", 0.3)])
    evaluate(engine, rules, now=T0)
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 0.1 + 0.2, at=t1)], at=t1)    # 0.30000000000000004
    assert evaluate(engine, rules, now=t1).notifications == 0
    t_b = T0 + timedelta(hours=1, minutes=30)
    crawl(engine, [offer("a", 0.3, at=t_b), offer("b", 1.9, at=t_b)], at=t_b)
    assert (evaluate(engine, rules, now=t_b).notifications,
            store.load_states(engine)["rule:h100-under-2"]["match_count"]) == (0, 2)
    t2 = T0 + timedelta(hours=2)
    crawl(engine, [offer("a", 0.29, at=t2)], at=t2)
    assert evaluate(engine, rules, now=t2).notifications == 1


def test_rules_loaded_again_unchanged_are_not_looked_at_again(engine):
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h")], now=T0)
    again = evaluate(engine, [rule("H100 under $2/h")], now=T0 + timedelta(minutes=10))
    assert (again.evaluated, again.firing, again.notifications) == (0, 1, 0)
    both = [rule("H100 under $2/h"), rule("H100 under $4/h")]   # one more, then removed
    assert evaluate(engine, both, now=T0 + timedelta(minutes=20)).evaluated == 2  # rebuilt
    fewer = evaluate(engine, [rule("H100 under $2/h")], now=T0 + timedelta(minutes=30))
    assert (fewer.evaluated, fewer.firing) == (0, 1)


# -- state another process wrote -------------------------------------------------------------
def another_process(db_url: str) -> Engine:
    """An engine of its own, with nothing kept in memory yet, as another process has
    (`get_engine` keeps one engine per URL in a process)."""
    return Engines().get(db_url)


@pytest.mark.parametrize("mine,theirs", [("H100 under $2/h", "H100 under $3/h"),
                                         ("H100 under $3/h", "H100 under $2/h")])
def test_state_another_process_wrote_for_another_condition_is_replaced(engine, db_url, mine,
                                                                      theirs):
    """Another process (an older config) evaluated a rule of the same name but another
    condition: this process's next evaluation, with nothing else changed, stores its own."""
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule(mine, name="cheap")], now=T0)
    other = another_process(db_url)
    try:
        evaluate(other, [rule(theirs, name="cheap")], now=T0 + timedelta(minutes=5))
    finally:
        other.dispose()
    evaluate(engine, [rule(mine, name="cheap")], now=T0 + timedelta(minutes=10))
    assert store.load_states(engine)["rule:cheap"]["description"] == mine


def test_a_repeat_falls_due_for_state_another_process_wrote(engine, db_url):
    """The state comes back from the database (another process evaluated a larger rule
    set): the firing rule's repeat is still sent on time."""
    crawl(engine, [offer("a", 1.5)])
    rules = [rule("H100 under $2/h", repeat="4h")]
    assert evaluate(engine, rules, now=T0).notifications == 1
    other = another_process(db_url)
    evaluate(other, [*rules, rule("A100 under $2/h")], now=T0 + timedelta(hours=1))
    other.dispose()
    due = evaluate(engine, rules, now=T0 + timedelta(hours=4))
    assert (due.notifications, outbox(engine)[-1]["kind"]) == (1, "repeat")


def test_a_pending_rule_held_by_a_stale_source_counts_as_pending_after_a_restart(engine,
                                                                                  db_url):
    rules = [rule("H100 under $2/h", **{"for": 2})]
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, rules, now=T0).pending == 1
    for n in range(1, 4):                   # lambda's crawls fail: its offer is stale
        crawl(engine, [], at=T0 + timedelta(hours=n), status="failed")
    other = another_process(db_url)
    restarted = evaluate(other, rules, now=T0 + timedelta(hours=4))
    other.dispose()
    assert (restarted.stale_sources, restarted.pending, restarted.firing) == (["lambda"], 1, 0)


def test_state_another_process_wrote_for_another_version_of_a_rule_starts_afresh(engine,
                                                                                   db_url):
    """A process with an older rule file shares the database with one running a newer
    `cheap`: each evaluation sees that the stored alert belongs to another condition."""
    crawl(engine, [offer("a", 1.5)])
    mine = [rule("H100 under $2/h", name="cheap")]
    assert evaluate(engine, mine, now=T0).fired == ["cheap"]
    other = another_process(db_url)
    theirs = evaluate(other, [rule("H100 under $2.5/h", name="cheap")],
                      now=T0 + timedelta(hours=1))
    other.dispose()
    assert theirs.fired == ["cheap"]
    again = evaluate(engine, mine, now=T0 + timedelta(hours=2))
    assert (again.fired, again.notifications) == (["cheap"], 1)
    assert store.load_states(engine)["rule:cheap"]["description"] == "H100 under $2/h"


def test_a_job_rule_prices_the_whole_machine_the_job_needs(engine):
    """`cheapest fit for 7B finetune` needs two 80 GB GPUs: a 2x H100 machine at $5.38/h
    matches a $6/h rule, priced per machine; `per gpu` reads $2.69."""
    crawl(engine, [offer("2x", 2.69, count=2), offer("1x", 2.0, count=1)])
    (whole,) = match_rules(engine, [rule("cheapest fit for 7B finetune under $6/h")], now=T0)
    assert [(round(v, 2), o[4]) for v, o in whole.matches] == [(5.38, "2x")]
    (per_gpu,) = match_rules(engine, [rule("cheapest fit for 7B finetune under $3/h per gpu")],
                             now=T0)
    assert [(round(v, 2), o[4]) for v, o in per_gpu.matches] == [(2.69, "2x")]


def test_the_state_is_read_again_only_after_another_process_wrote_it(engine):
    """The process keeps the state it wrote: a database read per evaluation would cost every
    evaluation of a large rule set, so it reads only what someone else changed."""
    loads: list[str] = []

    def count_loads(conn, cursor, statement: str, *args) -> None:
        if "alert_state.rule_hash" in statement:     # every column: the whole state
            loads.append(statement)

    rules = [rule("H100 under $2/h")]
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, rules, now=T0)                 # inserts the alert
    event.listen(engine, "before_cursor_execute", count_loads)
    try:
        t1 = T0 + timedelta(hours=1)
        crawl(engine, [offer("a", 1.45, at=t1)], at=t1)
        assert evaluate(engine, rules, now=t1).state_writes == 1    # updates it
        evaluate(engine, rules, now=T0 + timedelta(hours=2))
        assert loads == []
        with engine.begin() as conn:                # another process (an operator) clears it
            conn.execute(STATE.delete())
        assert evaluate(engine, rules, now=T0 + timedelta(hours=3)).fired == ["h100-under-2"]
        assert len(loads) == 1
    finally:
        event.remove(engine, "before_cursor_execute", count_loads)


# -- state read back from the database behaves as the state kept in the process -------------
def test_a_firing_alert_read_back_after_a_restart_resolves_and_rewrites_nothing(engine,
                                                                                db_url):
    """After a restart the state comes from the database: an unchanged market writes
    nothing, and the offer's end resolves the alert (with its message)."""
    rules = [rule("H100 under $2/h", send_resolved=True)]
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, rules, now=T0).fired == ["h100-under-2"]
    other = another_process(db_url)
    try:
        quiet = evaluate(other, rules, now=T0 + timedelta(minutes=5))
        assert (quiet.evaluated, quiet.firing, quiet.state_writes) == (1, 1, 0)
        t1 = T0 + timedelta(hours=1)
        crawl(other, [offer("a", 2.6, at=t1)], at=t1)
        restarted = evaluate(another_process(db_url), rules, now=t1)
    finally:
        other.dispose()
    assert (restarted.resolved, restarted.firing) == (["h100-under-2"], 0)
    assert [n["kind"] for n in outbox(engine)] == ["firing", "resolved"]


@pytest.mark.parametrize("restarted", [False, True])
def test_a_rule_that_failed_recovers_without_firing_twice(engine, db_url, tmp_path, restarted):
    """A firing rule whose evaluation starts to fail (its repeat cannot be rendered) goes
    on from `firing` once it works again, in the same process or a new one: the repeat is
    sent, not a second "firing" for the same episode."""
    (tmp_path / "title.txt.j2").write_text('{{ rule.text.split(" on ")[1] }}',
                                           encoding="utf-8")
    rules = [rule("H100 under $2/h", repeat="1h")]
    crawl(engine, [offer("a", 1.5)])
    assert evaluate(engine, rules, now=T0).fired == ["h100-under-2"]
    broken = evaluate(engine, rules, now=T0 + timedelta(hours=1),
                      alert_settings={"templates": str(tmp_path)})
    assert list(broken.errors) == ["h100-under-2"]
    assert (broken.firing, broken.notifications) == (0, 0)  # failing is not firing
    other = another_process(db_url) if restarted else engine
    try:
        fixed = evaluate(other, rules, now=T0 + timedelta(hours=2))
    finally:
        if restarted:
            other.dispose()
    assert (fixed.errors, fixed.fired, fixed.firing, fixed.notifications) == ({}, [], 1, 1)
    assert [n["kind"] for n in outbox(engine)] == ["firing", "repeat"]


def test_a_stale_source_recovers_with_its_notice_after_a_restart(engine, db_url):
    settings = {"stale_after_failures": 2, "notify_stale": ["ops"]}
    rules = [rule("H100 under $2/h")]
    crawl(engine, [offer("a", 1.5)])
    for n in (1, 2):
        crawl(engine, [], at=T0 + timedelta(hours=n), status="failed")
    assert evaluate(engine, rules, now=T0 + timedelta(hours=2),
                    alert_settings=settings).stale_sources == ["lambda"]
    t = T0 + timedelta(hours=3)
    crawl(engine, [offer("a", 1.5, at=t)], at=t)
    other = another_process(db_url)
    try:
        back = evaluate(other, rules, now=t, alert_settings=settings)
    finally:
        other.dispose()
    assert back.stale_sources == []
    notices = [(n["kind"], n["target"]) for n in outbox(engine)
               if n["alert_key"] == "source:lambda"]
    assert notices == [("stale", "ops"), ("recovered", "ops")]
    # Later evaluations leave it recovered since then (`gpuradar alerts` shows that time).
    later = T0 + timedelta(hours=4)
    crawl(engine, [offer("a", 1.5, at=later)], at=later)
    evaluate(engine, rules, now=later, alert_settings=settings)
    source = store.load_states(engine)["source:lambda"]
    assert (source["state"], source["resolved_at"]) == ("inactive", t)


# -- rule sets, logs and what one crawl can reach -------------------------------------------
def test_a_rule_after_two_rules_of_the_same_name_is_still_evaluated(engine, caplog):
    crawl(engine, [offer("a", 1.5), offer("x", 1.2, gpu="A100-SXM-80GB")])
    rules = [rule("H100 under $2/h", name="cheap"), rule("H100 under $3/h", name="cheap"),
             rule("A100 under $2/h")]
    result = evaluate(engine, rules, now=T0)
    assert result.fired == ["cheap", "a100-under-2"]
    assert "two rules are named 'cheap'; only the first is evaluated" in caplog.text


def test_the_evaluation_log_line_says_how_long_it_took_and_what_failed(engine, caplog,
                                                                       tmp_path):
    """One INFO line per evaluation; a failing rule's error is logged on one line of at
    most 300 characters (the whole text stays in the result and the state)."""
    attribute = "a" * 600
    (tmp_path / "title.txt.j2").write_text(f"{{{{ rule.{attribute}() }}}}", encoding="utf-8")
    crawl(engine, [offer("a", 1.5)])
    caplog.set_level("INFO", logger="gpuradar.alerts.engine")
    started = time.perf_counter()
    result = evaluate(engine, [rule("H100 under $2/h")], now=T0,
                      alert_settings={"templates": str(tmp_path)})
    assert 0 < result.seconds <= time.perf_counter() - started
    (why,) = result.errors.values()
    assert len(why) > 300 and attribute in why
    (failure,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert failure.getMessage() == f"rule 'h100-under-2' failed: {why.splitlines()[0][:300]}"
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("evaluated")]
    assert line == (f"evaluated 1 rules (1 looked at again) in {format_duration(result.seconds)}"
                    ": 0 firing, 0 notifications queued, 1 failed")
    assert store.load_states(engine)["rule:h100-under-2"]["best"]["error"] == why[:500]


def test_a_crawl_that_lowers_several_prices_reaches_the_rule_its_cheapest_one_matches(engine):
    """What a crawl can change is judged by the cheapest price it touched, whatever the
    order of its changes: the $1.60 rule sees the $1.50 offer though $1.90 and $1.95 came
    in the same crawl."""
    crawl(engine, [offer("a", 3.0), offer("b", 3.0), offer("c", 3.0)])
    rules = [rule("H100 under $2/h"), rule("H100 under $1.60/h")]
    assert evaluate(engine, rules, now=T0).fired == []
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [offer("a", 1.9, at=t1), offer("b", 1.5, at=t1), offer("c", 1.95, at=t1)],
          at=t1)
    assert evaluate(engine, rules, now=t1).fired == ["h100-under-2", "h100-under-1.60"]


def test_a_rule_for_at_most_n_gpus_includes_offers_of_exactly_n(engine):
    crawl(engine, [offer("8x", 1.5, count=8), offer("16x", 1.4, count=16),
                   offer("1x", 1.9, count=1)])
    (m,) = match_rules(engine, [rule("H100 under $2/h with at most 8 GPUs")], now=T0)
    assert [o[4] for _, o in m.matches] == ["8x", "1x"]


def test_the_low_before_a_drop_ignores_prices_that_appeared_with_the_drop(engine):
    """The reference low is what held before the current cheapest price appeared: another
    offer's price from that same crawl is not part of 'before'."""
    now = datetime.now(UTC).replace(microsecond=0)
    before = now - timedelta(days=3)
    crawl(engine, [offer("a", 3.0, at=before), offer("b", 3.0, at=before)], at=before)
    t = now - timedelta(hours=1)
    crawl(engine, [offer("a", 1.5, at=t), offer("b", 2.5, at=t)], at=t)  # 50 % under 3.00
    (m,) = match_rules(engine, [rule("H100 drops 45% below its 7-day low")], now=now)
    assert m.matched and m.reference == 3.0


def test_a_rule_held_for_a_duration_fires_once_it_has_matched_that_long(engine):
    """`for: 30m` counts from the first evaluation that matched, not from the latest."""
    rules = [rule("H100 under $2/h", **{"for": "30m"})]
    crawl(engine, [offer("a", 1.5)])
    for minutes in (0, 10, 20):
        step = evaluate(engine, rules, now=T0 + timedelta(minutes=minutes))
        assert (step.pending, step.firing, step.notifications) == (1, 0, 0)
    due = evaluate(engine, rules, now=T0 + timedelta(minutes=30))
    assert (due.fired, due.notifications) == (["h100-under-2"], 1)
    longer = [rule("H100 under $3/h", **{"for": "30m"})]    # evaluated past its 30 minutes
    evaluate(engine, longer, now=T0)
    late = evaluate(engine, longer, now=T0 + timedelta(minutes=45))
    assert late.fired == ["h100-under-3"]


def test_a_low_that_ended_before_the_window_is_not_the_recent_low(engine):
    """A price that held 13 to 9 days ago is not part of the 7-day low the drop is measured
    from, though the history read reaches back far enough to see it."""
    now = datetime.now(UTC).replace(microsecond=0)
    early, later = now - timedelta(days=13), now - timedelta(days=9)
    crawl(engine, [offer("a", 1.5, at=early), offer("b", 2.2, at=early)], at=early)
    crawl(engine, [offer("a", 2.0, at=later), offer("b", 2.2, at=later)], at=later)
    t = now - timedelta(hours=1)
    crawl(engine, [offer("a", 2.0, at=t), offer("b", 1.6, at=t)], at=t)   # 20 % under 2.00
    (m,) = match_rules(engine, [rule("H100 drops 15% below its 7-day low")], now=now)
    assert m.matched and m.reference == 2.0


def test_a_drop_alert_resolves_once_the_drop_is_older_than_its_window(engine):
    now = datetime.now(UTC).replace(microsecond=0)
    start, drop = now - timedelta(days=6), now - timedelta(hours=1)
    crawl(engine, [offer("a", 1.8, at=start)], at=start)
    crawl(engine, [offer("a", 1.5, at=drop)], at=drop)
    rules = [rule("H100 drops 15% below its 7-day low")]
    assert evaluate(engine, rules, now=now).fired == ["h100-drops-15pct-below-its-7-day-low"]
    later = now + timedelta(days=7)                 # the same price, now 7 days old
    crawl(engine, [offer("a", 1.5, at=later)], at=later)
    assert evaluate(engine, rules, now=later).resolved == [
        "h100-drops-15pct-below-its-7-day-low"]


def test_a_spot_drop_is_measured_from_spot_prices_only(engine):
    """The on-demand offer was cheaper all week: a spot rule's low is the spot low."""
    now = datetime.now(UTC).replace(microsecond=0)
    start, drop = now - timedelta(days=6), now - timedelta(hours=1)
    crawl(engine, [offer("s", 1.8, pricing="spot", at=start), offer("o", 1.0, at=start)],
          at=start)
    crawl(engine, [offer("s", 1.5, pricing="spot", at=drop), offer("o", 1.0, at=drop)],
          at=drop)
    (m,) = match_rules(engine, [rule("H100 spot drops 15% below its 7-day low")], now=now)
    assert m.matched and m.reference == 1.8
    assert [o[4] for _, o in m.matches] == ["s"]


def test_a_pending_rule_that_failed_counts_its_evaluations_from_the_start_again(engine):
    """`for: 3` evaluations: two matched, the third failed (its history could not be read):
    the streak is broken, so the rule fires only after three more."""
    now = datetime.now(UTC).replace(microsecond=0)
    crawl(engine, [offer("a", 1.8, at=now - timedelta(days=6))], at=now - timedelta(days=6))
    crawl(engine, [offer("a", 1.5, at=now - timedelta(hours=1))], at=now - timedelta(hours=1))
    rules = [rule("H100 drops 10% below its 7-day low", **{"for": 3})]

    steps = []
    for n in range(6):
        with (refusing(engine, "FROM price_change", "statement timeout") if n == 2
              else nullcontext()):
            r = evaluate(engine, rules, now=now + timedelta(minutes=n))
        steps.append("error" if r.errors else "firing" if r.firing else
                     "pending" if r.pending else "inactive")
    assert steps == ["pending", "pending", "error", "pending", "pending", "firing"]


DAY, HOUR = timedelta(days=1), timedelta(hours=1)


@pytest.mark.parametrize("crawls, low", [
    pytest.param([(6 * DAY, {"a": 1.8, "b": 1.7, "c": (1.0, False)}),
                  (2 * DAY, {"a": 1.8, "b": 2.2, "c": 2.5}),
                  (HOUR, {"a": 1.5, "b": 2.2, "c": 2.5})], 1.7,
                 id="every offer's low (b's, after a's current price), none while unavailable"),
    pytest.param([(6 * DAY, {"a": 1.8, "u": (1.6, None)}), (HOUR, {"a": 1.3, "u": (2.2, None)})],
                 1.6, id="a price of unknown availability counts, as in matching"),
    pytest.param([(8 * DAY + HOUR, {"a": 1.8, "b": 1.0}), (7 * DAY + HOUR, {"a": 1.8, "b": 2.2}),
                  (HOUR, {"a": 1.5, "b": 2.2})], 1.8,
                 id="a price that ended exactly when the window began is not in it"),
    pytest.param([(8 * DAY, {"a": 1.8}), (7 * DAY, {"a": 1.5}), (HOUR, {"a": 1.5})], 1.8,
                 id="a drop exactly a window ago is still within it"),
    pytest.param([(6 * DAY, {"a": 1.8, "b": 2.2}), (2 * HOUR, {"a": 1.5, "b": 2.2}),
                  (HOUR, {"a": 1.5, "b": 1.6})], 1.8,
                 id="prices after the drop are not the low it is measured from"),
    pytest.param([(9 * DAY + 12 * HOUR, {"a": 1.8, "b": 1.6}), (8 * DAY, {"a": 1.8, "b": 2.2}),
                  (2 * DAY, {"a": 1.4, "b": 2.2}), (HOUR, {"a": 1.4, "b": 2.2})], 1.6,
                 id="the window is the 7 days before the drop, not before now"),
])
def test_the_low_a_drop_is_measured_from(engine, crawls, low):
    """`drops 10% below its 7-day low`: Lambda's crawls, so long ago, with each offer's price
    (and availability when not true); the low the cheapest offer's drop is measured from."""
    now = datetime.now(UTC).replace(microsecond=0)
    for age, prices in crawls:
        at = now - age
        crawl(engine, [offer(i, *p[:1], available=p[1], at=at) if isinstance(p, tuple)
                       else offer(i, p, at=at) for i, p in prices.items()], at=at)
    (m,) = match_rules(engine, [rule("H100 drops 10% below its 7-day low")], now=now)
    assert m.matched and m.reference == low


def test_a_gpu_the_catalog_does_not_know_matches_a_memory_rule_by_its_stated_memory(engine):
    """A GPU too new for the catalog is stored under the provider's name with the memory the
    provider states: an any-GPU memory rule judges it by that memory."""
    crawl(engine, [replace(offer("new", 1.0, gpu="Blackwell Ultra X", count=1),
                           gpu_memory_gb=96.0),
                   replace(offer("small", 0.5, gpu="Tiny Accelerator", count=1),
                           gpu_memory_gb=16.0)])
    (m,) = match_rules(engine, [rule("any 80GB+ GPU under $2/h")], now=T0)
    assert [o[4] for _, o in m.matches] == ["new"]


def test_a_drop_rule_whose_history_cannot_be_read_fails_alone(engine):
    """The price history a drop rule needs is one more query (on PostgreSQL it can hit a
    statement timeout): when it fails, that rule reports the error and the others fire."""
    now = datetime.now(UTC).replace(microsecond=0)
    crawl(engine, [offer("a", 1.5, at=now - timedelta(hours=1))], at=now - timedelta(hours=1))
    rules = [rule("H100 drops 10% below its 7-day low"), rule("H100 under $2/h")]

    with refusing(engine, "FROM price_change", "canceling statement due to statement timeout"):
        result = evaluate(engine, rules, now=now)
        drop, under = match_rules(engine, rules, now=now)     # `gpuradar rules test`
    assert result.fired == ["h100-under-2"]
    assert list(result.errors) == ["h100-drops-10pct-below-its-7-day-low"]
    assert "statement timeout" in result.errors["h100-drops-10pct-below-its-7-day-low"]
    assert "statement timeout" in drop.error and not drop.matched
    assert under.error == "" and under.matched


def test_a_reworded_rule_shows_its_new_text_whichever_sorts_first(engine):
    crawl(engine, [offer("a", 1.5)])
    evaluate(engine, [rule("H100 under $2/h", name="cheap")], now=T0)
    again = evaluate(engine, [rule("H100 below $2/h", name="cheap")],
                     now=T0 + timedelta(hours=1))
    assert (again.firing, again.fired, again.notifications) == (1, [], 0)
    assert store.load_states(engine)["rule:cheap"]["description"] == "H100 below $2/h"


def test_a_change_far_above_a_rules_limit_does_not_look_at_the_rule_again(engine):
    """Only a price within the limit plus hysteresis (2 %) can move a rule: a crawl that
    moves an offer from $3.00 to $2.90 leaves `H100 under $2/h` alone."""
    crawl(engine, [offer("a", 3.0)])
    rules = [rule("H100 under $2/h")]
    assert evaluate(engine, rules, now=T0).evaluated == 1
    t1 = T0 + timedelta(minutes=10)
    crawl(engine, [offer("a", 2.9, at=t1)], at=t1)
    assert evaluate(engine, rules, now=t1).evaluated == 0
    t2 = T0 + timedelta(minutes=20)
    crawl(engine, [offer("a", 2.03, at=t2)], at=t2)            # within the band: looked at
    assert evaluate(engine, rules, now=t2).evaluated == 1


def test_an_offer_whose_gpu_is_corrected_moves_from_the_old_models_rules_to_the_new(engine):
    """The same listing at the same price, its GPU model corrected by the next crawl: the
    rule on the model it no longer is resolves, the rule on the model it is fires."""
    crawl(engine, [offer("a", 1.5, gpu="A100-SXM-80GB")])
    rules = [rule("A100 under $2/h"), rule("H100 under $2/h")]
    assert evaluate(engine, rules, now=T0).fired == ["a100-under-2"]
    later = T0 + timedelta(hours=1)
    crawl(engine, [offer("a", 1.5, gpu="H100-SXM-80GB", at=later)], at=later)
    again = evaluate(engine, rules, now=later + timedelta(minutes=1))
    assert again.fired == ["h100-under-2"] and again.resolved == ["a100-under-2"]


def test_an_offer_in_yuan_repriced_in_dollars_by_the_next_crawl_reaches_a_dollar_rule(engine):
    """The quoted price stays, the exchange rate of the next crawl moves its USD price under
    a dollar rule's limit: the rule fires on it."""
    cny = partial(offer, "a", 14.0, source="autodl", currency="CNY")
    crawl(engine, [cny(usd_rate=0.14)], source="autodl")        # $1.96/GPU-h
    rules = [rule("H100 under $1.90/h")]
    assert evaluate(engine, rules, now=T0).firing == 0
    later = T0 + timedelta(hours=1)
    crawl(engine, [cny(usd_rate=0.13, at=later)], source="autodl", at=later)  # $1.82
    again = evaluate(engine, rules, now=later + timedelta(minutes=1))
    assert again.fired == ["h100-under-1.90"]
    assert "$1.8200/GPU-h" in outbox(engine)[-1]["body_markdown"]


def test_an_evaluation_leaves_the_garbage_collector_as_the_program_had_it(engine):
    """Evaluation holds Python's collector off while it runs, for speed: afterwards it is on
    again, or still off when the program had turned it off, also when the evaluation
    failed."""
    import gc

    crawl(engine, [offer("a", 1.5)])
    rules = [rule("H100 under $2/h")]
    was = gc.isenabled()
    try:
        gc.enable()
        assert evaluate(engine, rules, now=T0).fired == ["h100-under-2"]
        assert gc.isenabled()
        gc.disable()
        evaluate(engine, rules, now=T0 + timedelta(minutes=5))
        assert not gc.isenabled()
        gc.enable()
        with refusing(engine, "alert_state", "disk I/O error"), pytest.raises(OperationalError):
            evaluate(engine, rules, now=T0 + timedelta(minutes=10))
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_only_targets_told_of_a_firing_hear_of_its_resolution(engine):
    """A "resolved" notice went to targets that never heard the alert fire: one added to
    the rule since, one whose firing notice was given up on, and (already right, kept so)
    every target when the alert fired while muted or with no target at all."""
    from sqlalchemy import update

    later = T0 + timedelta(hours=3)

    def episode(before: dict, after: dict, give_up: str | None = None) -> list[tuple]:
        crawl(engine, [offer("a", 1.5)])
        evaluate(engine, [rule("H100 under $2/h", send_resolved=True, **before)], now=T0)
        if give_up:  # delivery gave up on this target's firing notice
            with engine.begin() as conn:
                conn.execute(update(OUTBOX).where(OUTBOX.c.target == give_up)
                             .values(status="failed"))
        crawl(engine, [offer("a", 2.5, at=later)], at=later)
        evaluate(engine, [rule("H100 under $2/h", send_resolved=True, **after)], now=later)
        sent = [(n["kind"], n["target"]) for n in outbox(engine)]
        with engine.begin() as conn:
            conn.execute(OUTBOX.delete())
            conn.execute(STATE.delete())
        return sent

    assert episode({"notify": ("a",)}, {"notify": ("a", "b")}) == [
        ("firing", "a"), ("resolved", "a")]  # b was added after the firing
    assert episode({"notify": ("a", "b")}, {"notify": ("a", "b")}, give_up="b") == [
        ("firing", "a"), ("firing", "b"), ("resolved", "a")]
    assert episode({"notify": ("a",), "mute_until": T0 + timedelta(hours=2)},
                   {"notify": ("a",), "mute_until": T0 + timedelta(hours=2)}) == []
    assert episode({"notify": ()}, {"notify": ("a",)}) == []
