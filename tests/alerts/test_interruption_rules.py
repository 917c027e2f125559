"""`interruptions under N%`: a spot rule that matches only offers whose published
interruption band (gpuradar.core.spot) reaches at most N % a month, in both rule forms, on
real storage (SQLite and PostgreSQL), including a band that changes at an unchanged price."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuradar.alerts.engine import evaluate, match_rules, read_market
from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.messages import Renderer
from gpuradar.alerts.rules import RuleError
from tests.alerts.test_alert_engine import T0, crawl, offer, rule

TEXT = "H100 spot under $2/h interruptions under 10%"


def test_the_readable_and_yaml_forms_are_one_rule_read_back_in_words():
    readable = parse_rule(TEXT)
    structured = rule_from_mapping({"gpu": "H100", "pricing": "spot", "under": "$2/h",
                                    "interruptions": "under 10%"})
    assert readable.condition == structured.condition
    assert readable.condition.offers.max_interruption == pytest.approx(0.10)
    assert structured.text == TEXT  # a structured rule is shown in its readable form
    assert readable.reading() == (
        "per GPU-hour, H100, any GPU count, under $2.0000/GPU-h; spot only; published "
        "interruption band at most 10%/month (its upper bound); an offer with no published "
        "signal, or an open-ended band, never matches")
    # The limit is part of what the alert is: another limit is another alert.
    assert readable.condition_hash() != parse_rule(TEXT.replace("10%", "5%")).condition_hash()
    assert parse_rule("H100 spot under $2/h").condition_hash() != readable.condition_hash()


@pytest.mark.parametrize(("text", "first_line", "caret"), [
    ("H100 under $2/h interruptions under 10%",
     "an interruption limit is for spot offers: add `spot` (YAML: `pricing: spot`)",
     "                ^^^^^^^^^^^^^"),
    ("H100 spot under $2/h interruptions under ten",
     "not an interruption limit: 'ten' (write e.g. `under 10%`)",
     "                                         ^^^"),
    ("H100 spot under $2/h interruptions under 0%",
     "an interruption limit is more than 0% and at most 100%, not 0%",
     "                                         ^^"),
])
def test_a_bad_interruption_clause_points_at_the_word(text, first_line, caret):
    with pytest.raises(RuleError) as err:
        parse_rule(text)
    lines = str(err.value).splitlines()
    assert lines[0] == first_line and lines[2] == "    " + caret


def test_a_bad_yaml_interruption_field_names_the_field():
    with pytest.raises(RuleError, match=r"^interruptions: not an interruption limit: '10'"):
        rule_from_mapping({"gpu": "H100", "pricing": "spot", "under": 2, "interruptions": 10})
    with pytest.raises(RuleError, match=r"^interruptions: an interruption limit is for spot"):
        rule_from_mapping({"gpu": "H100", "under": 2, "interruptions": "10%"})


def spot(instance: str, per_gpu: float, band: str | None, **kw):
    """A spot offer with the Spot Advisor band the AWS spider stores (None: none published)."""
    item = offer(instance, per_gpu, pricing="spot", source="aws", **kw)
    if band is not None:
        item.attributes.update(interruption=band, interruption_source="AWS Spot Advisor",
                               interruption_as_of="2025-06-28")
    return item


def test_only_offers_whose_band_reaches_at_most_the_limit_match(engine):
    crawl(engine, [spot("p5.low", 1.50, "<5%"), spot("p5.edge", 1.60, "5-10%"),
                   spot("p5.high", 1.10, "10-15%"), spot("p5.open", 1.00, ">20%"),
                   spot("p5.none", 0.90, None), spot("p5.dear", 2.50, "<5%")], source="aws")
    (m,) = match_rules(engine, [rule(TEXT)], now=T0)
    assert m.error == ""
    # The cheaper offers with a band above 10 %, an open-ended band or none do not match.
    assert [o.instance_type for _, o in m.matches] == ["p5.low", "p5.edge"]
    (plain,) = match_rules(engine, [rule("H100 spot under $2/h")], now=T0)
    assert plain.count == 5


def test_alibaba_bands_match_by_their_30_days_and_azure_bands_never(engine):
    """Alibaba's DescribeSpotAdvice band is a 30-day share: "0-3%" passes `under 10%`,
    the open-ended "10-100%" does not. Azure's eviction band states no period, so it is no
    rate and never matches, however low it reads."""
    def signalled(source: str, instance: str, per_gpu: float, attributes: dict):
        item = offer(instance, per_gpu, pricing="spot", source=source)
        item.attributes.update(attributes)
        return item

    advice = {"interruption_source": "Alibaba DescribeSpotAdvice",
              "interruption_as_of": "2026-12-06", "interruption_window": "30 days"}
    crawl(engine, [signalled("alibaba", "ecs.calm", 1.50, {**advice, "interruption": "0-3%"}),
                   signalled("alibaba", "ecs.busy", 1.20,
                             {**advice, "interruption": "10-100%"})], source="alibaba")
    crawl(engine, [signalled("azure", "Standard_low", 1.00, {
        "interruption": "0-5", "interruption_source": "Azure Resource Graph",
        "interruption_as_of": "2026-12-06"})], source="azure")
    (m,) = match_rules(engine, [rule(TEXT)], now=T0)
    assert m.error == ""
    assert [o.instance_type for _, o in m.matches] == ["ecs.calm"]
    (plain,) = match_rules(engine, [rule("H100 spot under $2/h")], now=T0)
    assert plain.count == 3


def test_a_band_that_rises_at_the_same_price_resolves_the_alert(engine):
    rules = [rule(TEXT, send_resolved=True)]
    crawl(engine, [spot("p5.a", 1.50, "5-10%")], source="aws")
    first = evaluate(engine, rules, now=T0)
    assert first.fired == ["h100-spot-under-2-interruptions-under-10pct"]
    t1 = T0 + timedelta(hours=1)
    crawl(engine, [spot("p5.a", 1.50, "15-20%", at=t1)], source="aws", at=t1)
    again = evaluate(engine, rules, now=t1)
    assert again.firing == 0 and again.resolved == [
        "h100-spot-under-2-interruptions-under-10pct"]


# -- under its W median by N% ------------------------------------------------------------
MEDIAN = "H100 spot under its 30-day median by 20%"


def test_the_median_rule_is_one_object_in_both_forms_and_says_how_it_reads():
    readable = parse_rule(MEDIAN)
    assert readable.condition == rule_from_mapping(
        {"gpu": "H100", "pricing": "spot", "median": {"percent": 20, "days": 30}}).condition
    assert readable.condition == rule_from_mapping(
        {"gpu": "H100", "pricing": "spot", "median": "30-day median by 20%"}).condition
    assert rule_from_mapping({"gpu": "H100", "pricing": "spot",
                              "median": {"percent": 20, "days": 30}}).text == MEDIAN
    assert readable.reading() == (
        "per GPU-hour, H100, any GPU count, 20% or more under the time-weighted median of its "
        "offers' prices over the last 30 days; no match without stored prices in that window; "
        "spot only")
    with pytest.raises(RuleError, match="one reference: a median or a low, not both"):
        parse_rule(MEDIAN + " drops 10% below its 7-day low")


def test_the_median_counts_only_the_window_and_never_an_unavailable_price(engine):
    """p5.a held $1.00 from 60 days ago until 22 days ago, then $3.00: of the last 30 days,
    $1.00 held 8 and $3.00 22, so the median is $3.00 (counted from the crawl 60 days back,
    $1.00 would hold 38 of 60 days and be the median). p5.b listed at $0.50 but unavailable
    the whole time: a price nobody could rent is no part of the median (with it, $0.50 would
    hold half of 60 offer-days)."""
    t60, t22 = T0 - timedelta(days=60), T0 - timedelta(days=22)
    crawl(engine, [spot("p5.a", 1.00, None, at=t60),
                   spot("p5.b", 0.50, None, at=t60, available=False)], source="aws", at=t60)
    for at in (t22, T0):  # the last crawl, unchanged, keeps the source fresh
        crawl(engine, [spot("p5.a", 3.00, None, at=at),
                       spot("p5.b", 0.50, None, at=at, available=False)], source="aws", at=at)
    (by10,) = match_rules(engine, [rule(MEDIAN.replace("20%", "10%"))], now=T0)
    assert by10.reference == pytest.approx(3.00) and by10.limit == pytest.approx(2.70)


def test_the_median_is_weighted_by_how_long_each_price_held(engine):
    """p5.a held $3.00 for 15 days then $2.00 for 5; p5.b held $2.50 for 20 days. Sorted
    with their days: 2.00 (5), 2.50 (20), 3.00 (15) -- 40 offer-days, half is 20, reached at
    2.50 (5 + 20 = 25): the median is $2.50, whatever the count of prices."""
    t20, t5 = T0 - timedelta(days=20), T0 - timedelta(days=5)
    crawl(engine, [spot("p5.a", 3.00, None, at=t20), spot("p5.b", 2.50, None, at=t20)],
          source="aws", at=t20)
    for at in (t5, T0):  # the last crawl, unchanged, keeps the source fresh
        crawl(engine, [spot("p5.a", 2.00, None, at=at), spot("p5.b", 2.50, None, at=at)],
              source="aws", at=at)
    (by10,) = match_rules(engine, [rule(MEDIAN.replace("20%", "10%"))], now=T0)
    assert by10.reference == pytest.approx(2.50) and by10.limit == pytest.approx(2.25)
    assert [o.instance_type for _, o in by10.matches] == ["p5.a"]
    assert evaluate(engine, [rule(MEDIAN.replace("20%", "10%"))], now=T0).fired == [
        "h100-spot-under-its-30-day-median-by-10pct"]
    message = Renderer(None).rule_message("firing", by10, read_market(engine, T0), 5)
    assert "cheapest $2.0000/GPU-h; the 30-day median was $2.5000/GPU-h." in message.text
    (by20,) = match_rules(engine, [rule(MEDIAN)], now=T0)  # $2.00 is not under $2.00
    assert by20.limit == pytest.approx(2.00) and by20.count == 0
    (none,) = match_rules(engine, [rule("H200 spot under its 30-day median by 20%")], now=T0)
    assert none.count == 0 and none.note == "no stored price in the window to take the median of"
