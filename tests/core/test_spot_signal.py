"""What a spot offer's interruption column says when its attributes carry no band: it
depends on what its provider publishes (gpuradar.core.spot.offer_signal)."""

from gpuradar.core.spot import NO_SIGNAL, offer_signal


def test_an_offer_missing_from_a_published_feed_is_unknown_not_unpublished() -> None:
    # AWS publishes the Spot Advisor's bands; a type the feed does not name (p6-b200 in
    # the 2025-06-28 capture) has no band, which is not "no signal published".
    signal = offer_signal("aws", "spot", {"savings_pct": 70})
    assert signal is not None
    assert signal.text == "interruption unknown: not in its provider's published signal"
    assert signal.monthly is None


def test_a_provider_that_publishes_nothing_says_so() -> None:
    assert offer_signal("gcp", "spot", {}) is NO_SIGNAL


def test_a_signal_not_read_for_want_of_credentials_says_why() -> None:
    signal = offer_signal("azure", "spot", {})
    assert signal is not None and signal.text.endswith("not read")
    assert "AZURE_TENANT_ID" in signal.text


def test_an_on_demand_offer_has_no_signal() -> None:
    assert offer_signal("aws", "on-demand", {"interruption": "<5%"}) is None
