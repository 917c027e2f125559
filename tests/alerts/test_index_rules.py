"""Rules on the market index (docs/index.md): `H100 index under $2.50/h` and `H100 spot
index drops 10% in 7 days`, read, evaluated on real storage, fired into the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuradar.alerts.engine import evaluate, match_rules
from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.rules import RuleError
from tests.alerts.test_alert_engine import T0, crawl, offer, outbox, rule


# -- reading ------------------------------------------------------------------------------
def test_index_rules_read_and_describe_themselves():
    r = parse_rule("H100 index under $2.50/h")
    assert r.condition.index and r.condition.max_price == 2.5
    assert r.reading() == ("the market index (median per GPU-hour) of each H100 model, "
                           "under $2.5000/GPU-h")
    drop = parse_rule("H100 spot index drops 10% in 7 days")
    c = drop.condition
    assert (c.index, c.drop_pct, c.drop_window, c.offers.pricing) == (
        True, 0.1, timedelta(days=7), "spot")
    assert drop.describe() == "H100 spot index drops 10% in 7 days"
    assert parse_rule(drop.describe()).condition == c
    # an index rule is another alert than the same words on offers
    assert r.condition.digest() != parse_rule("H100 under $2.50/h").condition.digest()


@pytest.mark.parametrize(("text", "message"), [
    ("H100 drops 10% in 7 days", "`drops N% in W` is for index rules"),
    ("8x H100 index under $25/h", "an index rule takes a GPU, a pricing"),
    ("H100 index under $2/h on aws", "an index rule takes a GPU, a pricing"),
    ("H100 index drops 10% below its 7-day low", "an index rule's drop reads"),
    ("H100 index drops 10% in soon", "a window is missing: write `drops 10% in 7 days`"),
])
def test_a_bad_index_rule_points_at_the_problem(text, message):
    with pytest.raises(RuleError, match=message):
        parse_rule(text)


# -- evaluating ---------------------------------------------------------------------------
SOURCES = ("lambda", "aws", "azure")


def market(engine, prices: list[float], at, pricing: str = "on_demand") -> None:
    """A crawl of each provider listing an 8-GPU H100 offer at these USD per GPU-hour (one
    price per provider: the index takes one vote from each)."""
    for source, p in zip(SOURCES, prices, strict=False):
        crawl(engine, [offer("i", p, pricing=pricing, at=at, source=source)], source=source,
              at=at)


def test_an_index_rule_fires_when_the_median_goes_under(engine):
    rules = [rule("H100 index under $2.50/h", send_resolved=True)]
    market(engine, [2.0, 3.0, 4.0], T0)                      # median 3.00
    result = evaluate(engine, rules, now=T0)
    assert (result.firing, result.notifications) == (0, 0)
    t1 = T0 + timedelta(hours=1)
    market(engine, [1.9, 2.2, 4.0], t1)                      # median 2.20; the cheapest 1.90
    result = evaluate(engine, rules, now=t1)
    assert (result.firing, result.fired) == (1, ["h100-index-under-2.50"])
    (note,) = outbox(engine)
    assert note["title"] == "H100 index under $2.50/h — index $2.2000/GPU-h"
    assert ("H100-SXM-80GB on-demand: median $2.2000/GPU-h (p10 $1.9600, p90 $3.6400), 3 offers "
            "from 3 providers\n") in note["body_text"]
    assert "**H100-SXM-80GB** on-demand · median **$2.2000/GPU-h**" in note["body_markdown"]
    t2 = T0 + timedelta(hours=2)
    market(engine, [2.6, 2.7, 4.0], t2)                      # median 2.70: resolved
    evaluate(engine, rules, now=t2)
    resolved = outbox(engine)[-1]
    assert resolved["kind"] == "resolved"
    assert resolved["body_text"] == ('Resolved: the market index no longer matches "H100 '
                                     'index under $2.50/h"; it is now $2.7000/GPU-h.')


def test_an_index_drop_rule_compares_with_the_window_high(engine):
    rules = [rule("H100 spot index drops 10% in 7 days")]
    market(engine, [2.0, 3.0, 4.0], T0, "spot")              # median 3.00
    t1 = T0 + timedelta(days=1)
    market(engine, [2.0, 2.9, 4.0], t1, "spot")              # 2.90: 3.3 % down, quiet
    assert evaluate(engine, rules, now=t1).firing == 0
    t2 = T0 + timedelta(days=2)
    market(engine, [2.0, 2.6, 4.0], t2, "spot")              # 2.60: 13.3 % below 3.00
    result = evaluate(engine, rules, now=t2)
    assert result.fired == ["h100-spot-index-drops-10pct-in-7-days"]
    (note,) = outbox(engine)
    assert "down from $3.0000/GPU-h in the window" in note["body_text"]


def test_an_index_drop_older_than_the_window_does_not_match(engine):
    market(engine, [3.0], T0, "spot")
    market(engine, [2.0], T0 + timedelta(days=1), "spot")
    (m,) = match_rules(engine, [rule("H100 spot index drops 10% in 7 days")],
                       now=T0 + timedelta(days=9))
    assert not m.matched and m.error == ""


def test_an_index_rule_ignores_other_pricings_and_models(engine):
    market(engine, [1.0], T0, "spot")
    crawl(engine, [offer("a100", 1.0, gpu="A100-SXM-80GB", source="runpod")], source="runpod")
    (m,) = match_rules(engine, [rule("H100 on-demand index under $2.50/h")], now=T0)
    assert not m.matched and m.note == "no index for these models yet"
    (m,) = match_rules(engine, [rule("H100 index under $2.50/h")], now=T0)
    assert m.matched and [f["pricing"] for _, f in m.figures] == ["spot"]


def test_a_thin_index_says_so_in_the_message(engine):
    """One provider's price is a price list, not the market: a rule may fire on it, and its
    message says the point is thin."""
    market(engine, [2.0], T0)
    result = evaluate(engine, [rule("H100 index under $2.50/h")], now=T0)
    assert result.firing == 1
    (note,) = outbox(engine)
    assert ("1 offers from 1 provider (thin: fewer providers than the minimum panel, not "
            "the market)") in note["body_text"]
