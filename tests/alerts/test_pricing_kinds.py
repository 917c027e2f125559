"""Reservation kinds in rules: a Capacity Block, Flex-start or calendar-mode price is named
by its own word, and only a rule that names it sees it; a rule that names no kind watches
the open market (on-demand and spot)."""

from __future__ import annotations

import pytest

from gpuradar.alerts.grammar import parse_rule
from gpuradar.alerts.mapping import rule_from_mapping
from gpuradar.alerts.market import selector_filter
from gpuradar.alerts.rules import RuleError
from gpuradar.storage.offers import OfferRow


def offer(pricing: str, per_gpu: float) -> OfferRow:
    return OfferRow(1, "aws", "us-east-1", "us-east-1a", "p6-b200.48xlarge", pricing, "B200",
                    8, 180, None, None, per_gpu * 8, "USD", per_gpu * 8, per_gpu, True, None,
                    "")


@pytest.mark.parametrize(("text", "kind", "word"), [
    ("B200 capacity-block under $5/h", "capacity_block", "capacity-block"),
    ("B200 flex-start under $5/h", "flex_start", "flex-start"),
    ("H200 calendar under $5/h", "calendar", "calendar"),
])
def test_a_reservation_kind_is_named_in_a_rule_and_said_back(text, kind, word):
    rule = parse_rule(text)
    assert rule.condition.offers.pricing == kind
    assert word in rule.text
    structured = rule_from_mapping({"gpu": text.split()[0], "pricing": word,
                                    "under": "5 USD/h"})
    assert structured.condition.offers.pricing == kind


def test_a_structured_rule_with_an_unknown_pricing_names_the_choices():
    with pytest.raises(RuleError, match="on-demand, spot, capacity-block, flex-start, "
                                        "calendar, not 'reserved'"):
        rule_from_mapping({"gpu": "B200", "pricing": "reserved", "under": "5 USD/h"})


def test_only_a_rule_naming_capacity_blocks_sees_them():
    block, on_demand = offer("capacity_block", 4.9), offer("on_demand", 14.2)
    named = selector_filter(parse_rule("B200 capacity-block under $5/h").condition.offers)
    assert named(block) and not named(on_demand)
    # No kind named: on-demand and spot only, never a block booked ahead.
    any_kind = selector_filter(parse_rule("B200 under $50/h").condition.offers)
    assert any_kind(on_demand) and any_kind(offer("spot", 5.0)) and not any_kind(block)
    od = selector_filter(parse_rule("B200 on-demand under $50/h").condition.offers)
    assert od(on_demand) and not od(block)
