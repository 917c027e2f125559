"""The one reading of pricing words, and how a reservation's terms are said."""

from __future__ import annotations

import pytest

from gpuradar.core.pricing import OPEN_MARKET, PRICINGS, describe_terms, parse_pricing


@pytest.mark.parametrize(("word", "kind"), [
    ("on-demand", "on_demand"), ("OnDemand", "on_demand"), ("Spot", "spot"),
    ("preemptible", "spot"), ("capacity-block", "capacity_block"),
    ("capacity_block", "capacity_block"), ("flex-start", "flex_start"),
    ("calendar-mode", "calendar")])
def test_every_spelling_users_type_is_one_stored_kind(word, kind):
    assert parse_pricing(word) == kind and kind in PRICINGS


def test_an_unknown_word_names_the_choices():
    with pytest.raises(ValueError, match="pricing must be one of on-demand, spot, "
                                         "capacity-block, flex-start, calendar, not 'reserved'"):
        parse_pricing("reserved")
    assert OPEN_MARKET == ("on_demand", "spot")


def test_terms_say_only_what_the_offer_states():
    assert describe_terms({"block_hours": 24, "start": "2024-12-10T11:30:00.000Z",
                           "end": "2024-12-11T11:30:00.000Z", "upfront_fee": 943.92,
                           "currency": "USD"}) == (
        "24 h block, 2024-12-10 11:30 to 2024-12-11 11:30 UTC, 943.92 USD up front")
    assert describe_terms({"max_hours": 168}) == "up to 168 h"
    assert describe_terms({}) == ""
