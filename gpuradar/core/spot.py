"""Spot interruption signals as offers carry them (in their attributes), read one way for
every output: which signal, from what source, as of when, and what it says in numbers.

An AWS Spot Advisor band is "the rate at which Spot has reclaimed capacity during the
trailing month" (the Advisor's own definition), in five bands; its bounds are the bands'
labels. Vast.ai's host reliability is a score, not an interruption rate: it is shown, never
turned into one. Anything else is unknown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Spot Advisor band label -> share of capacity reclaimed in the trailing month, (low,
#: high); high None = no upper bound (">20%" reaches 100 %).
BAND_MONTHLY: dict[str, tuple[float, float | None]] = {
    "<5%": (0.0, 0.05), "5-10%": (0.05, 0.10), "10-15%": (0.10, 0.15),
    "15-20%": (0.15, 0.20), ">20%": (0.20, None)}


@dataclass(frozen=True)
class Signal:
    """What one spot offer says about being interrupted."""

    text: str                 # "interruption <5%/month", "host reliability 0.98", "none"
    source: str | None        # "AWS Spot Advisor", "Vast.ai"; None: nothing published
    as_of: str | None         # ISO day the signal describes; None when not stated
    #: Share of capacity reclaimed per month, (low, high); None when no rate is published.
    monthly: tuple[float, float | None] | None = None

    def note(self) -> str:
        """The short form a table's notes column takes: 'interrupt <5% (AWS Spot Advisor,
        2025-06-28)'."""
        return self.label().replace("interruption ", "interrupt ", 1).replace("/month", "", 1)

    def label(self) -> str:
        """'interruption <5%/month (AWS Spot Advisor, 2025-06-28)'."""
        if self.source is None:
            return self.text
        return f"{self.text} ({self.source}{', ' + self.as_of if self.as_of else ''})"


NO_SIGNAL = Signal("no interruption signal published", None, None)
#: How a provider's `spot_signal` ends when it publishes a signal gpuradar does not read.
NOT_READ = "not read"


def signal_of(attributes: dict[str, Any] | None) -> Signal:
    """The interruption signal a spot offer's attributes carry (NO_SIGNAL when none)."""
    attrs = attributes or {}
    band = attrs.get("interruption")
    if band:
        return Signal(f"interruption {band}/month", attrs.get("interruption_source")
                      or "AWS Spot Advisor", attrs.get("interruption_as_of"),
                      BAND_MONTHLY.get(str(band)))
    reliability = attrs.get("reliability")
    if isinstance(reliability, int | float) and not isinstance(reliability, bool):
        # Read with the offer itself: its date is the offer's.
        return Signal(f"host reliability {reliability:.2f}", "Vast.ai", None)
    if attrs.get("derived"):
        return Signal("spot price derived, no interruption data", None, None)
    return NO_SIGNAL


def offer_signal(source: str, pricing: str, attributes: dict[str, Any] | None
                 ) -> Signal | None:
    """The signal of one offer as every output shows it: None for an offer that is not
    spot; for a spot offer without one, why, when its provider publishes a signal gpuradar
    cannot read (Alibaba, Azure: credentials)."""
    from gpuradar.core.pricing import SPOT
    from gpuradar.core.providers import BY_NAME

    if pricing != SPOT:
        return None
    signal = signal_of(attributes)
    if signal is NO_SIGNAL:
        provider = BY_NAME.get(source)
        said = provider.spot_signal if provider is not None else None
        if said and said.endswith(NOT_READ):
            return Signal(said, None, None)
    return signal

