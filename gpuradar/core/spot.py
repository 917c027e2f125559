"""Spot interruption signals as offers carry them (in their attributes), read one way for
every output: which signal, from what source, as of when, and what it says in numbers.

An AWS Spot Advisor band is "the rate at which Spot has reclaimed capacity during the
trailing month" (the Advisor's own definition), in five bands; its bounds are the bands'
labels. Alibaba's DescribeSpotAdvice gives the average release rate of the last 30 days per
instance type and zone, in four bands ("0-3%", "3-5%", "5-10%", "10-100%") beside the rate
itself; Azure Resource Graph's `SpotResources` an eviction-rate band per size and region
("0-5" ... "20+"), with no period stated, so it is shown and never turned into a monthly
rate. Each is stored the same way: `interruption` (the band as published),
`interruption_source`, `interruption_as_of`, and `interruption_window` where the provider
states one. A band gpuradar cannot read gives no rate (never a guessed one). Vast.ai's host
reliability is a score, not an interruption rate: it is shown, never turned into one.
Anything else is unknown, with why where gpuradar knows (`interruption_unknown`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuradar.core.pricing import SPOT

#: Spot Advisor band label -> share of capacity reclaimed in the trailing month, (low,
#: high); high None = no upper bound (">20%" reaches 100 %).
BAND_MONTHLY: dict[str, tuple[float, float | None]] = {
    "<5%": (0.0, 0.05), "5-10%": (0.05, 0.10), "10-15%": (0.10, 0.15),
    "15-20%": (0.15, 0.20), ">20%": (0.20, None)}

#: The default source of a band with none named: the first one gpuradar read.
AWS_ADVISOR = "AWS Spot Advisor"

_NUM = r"(\d+(?:\.\d+)?)"
_BELOW = re.compile(rf"^<\s*{_NUM}\s*%?$")
_SPAN = re.compile(rf"^{_NUM}\s*-\s*{_NUM}\s*%?$")
_ABOVE = re.compile(rf"^(?:>\s*{_NUM}|{_NUM}\s*\+)\s*%?$")


def band_bounds(label: object) -> tuple[float, float | None] | None:
    """A published band as shares, (low, high), high None = no upper bound: "<5%" (0, 0.05),
    "5-10%" and "5-10" (0.05, 0.10), "10-100%" (0.10, 1.0), ">20%" and "20+" (0.20, None).
    None for a label of any other form: it is shown as published, never given a rate."""
    text = str(label or "").strip()
    if m := _BELOW.match(text):
        high = float(m.group(1)) / 100
        return (0.0, high) if high <= 1 else None
    if m := _SPAN.match(text):
        low, high = float(m.group(1)) / 100, float(m.group(2)) / 100
        return (low, high) if low <= high <= 1 else None
    if m := _ABOVE.match(text):
        low = float(m.group(1) or m.group(2)) / 100
        return (low, None) if low <= 1 else None
    return None


def risk_of(monthly: tuple[float, float | None] | None) -> str:
    """How risky a band is for a long run: reaching at most 10 % low, 15 % medium, more
    high (the Spot Advisor's "<5%" and "5-10%" low, "10-15%" medium, the rest high)."""
    if monthly is None:
        return "unknown"
    high = monthly[1]
    if high is None or high > 0.15 + 1e-9:
        return "high"
    return "low" if high <= 0.10 + 1e-9 else "medium"


@dataclass(frozen=True)
class Signal:
    """What one spot offer says about being interrupted."""

    text: str                 # "interruption <5%/month", "host reliability 0.98", "none"
    source: str | None        # "AWS Spot Advisor", "Vast.ai"; None: nothing published
    as_of: str | None         # ISO day the signal describes; None when not stated
    #: Share of capacity reclaimed per month, (low, high); None when no rate is published.
    monthly: tuple[float, float | None] | None = None
    #: "interruption rate" (a band of a rate), "host reliability" (a score, not a rate),
    #: "unknown" (nothing published, or not read: `text` says which and why).
    kind: str = "unknown"
    band: str | None = None   # the band as the provider published it

    def note(self) -> str:
        """The form a table's "interruption" column takes: the label without that word,
        '<5%/month (AWS Spot Advisor, 2025-06-28)', 'unknown: ...'."""
        return self.label().removeprefix("interruption ")

    def label(self) -> str:
        """'interruption <5%/month (AWS Spot Advisor, 2025-06-28)'."""
        if self.source is None:
            return self.text
        return f"{self.text} ({self.source}{', ' + self.as_of if self.as_of else ''})"

    def record(self) -> dict[str, Any]:
        """The signal as the API, the Python API and the exports carry it: the same fields
        for every provider, None where nothing is known."""
        low, high = self.monthly if self.monthly is not None else (None, None)
        return {"kind": self.kind, "text": self.text, "band": self.band,
                "source": self.source, "as_of": self.as_of,
                "monthly_low": low, "monthly_high": high,
                "risk": risk_of(self.monthly) if self.kind == "interruption rate" else
                "unknown"}


NO_SIGNAL = Signal("no interruption signal published", None, None)
#: How a provider's `spot_signal` ends when it publishes a signal gpuradar does not read.
NOT_READ = "not read"


def signal_of(attributes: dict[str, Any] | None) -> Signal:
    """The interruption signal a spot offer's attributes carry (NO_SIGNAL when none)."""
    attrs = attributes or {}
    band = attrs.get("interruption")
    if band:
        source = attrs.get("interruption_source") or AWS_ADVISOR
        window = attrs.get("interruption_window") or ("month" if source == AWS_ADVISOR
                                                      else None)
        shown = str(band) if str(band).endswith("%") else f"{band}%"
        text = f"interruption {shown}" + (f"/{window}" if window else "")
        rate = attrs.get("interruption_rate")
        if isinstance(rate, int | float) and not isinstance(rate, bool):
            text += f" (average {rate:g}%)"
        # A band is a monthly share only where its provider states the period (AWS: the
        # trailing month, Alibaba: 30 days); Azure's states none, so it gives no rate.
        monthly = BAND_MONTHLY.get(str(band)) or (band_bounds(band) if window else None)
        return Signal(text, source, attrs.get("interruption_as_of"), monthly,
                      "interruption rate", str(band))
    reliability = attrs.get("reliability")
    if isinstance(reliability, int | float) and not isinstance(reliability, bool):
        # Read with the offer itself: its date is the offer's.
        return Signal(f"host reliability score {reliability:.2f}, not an interruption rate",
                      "Vast.ai", None, kind="host reliability")
    why = attrs.get("interruption_unknown")
    if why:
        return Signal(f"interruption unknown: {why}", None, None)
    if attrs.get("derived"):
        return Signal("spot price derived, no interruption data", None, None)
    return NO_SIGNAL


def offer_signal(source: str, pricing: str, attributes: dict[str, Any] | None
                 ) -> Signal | None:
    """The signal of one offer as every output shows it: None for an offer that is not
    spot; for a spot offer without one, why: its provider publishes a signal gpuradar
    cannot read (Alibaba, Azure: credentials), or one that does not name this offer."""
    if pricing != SPOT:
        return None
    signal = signal_of(attributes)
    if signal is NO_SIGNAL:
        from gpuradar.core.providers import BY_NAME  # the declarations, only when needed

        provider = BY_NAME.get(source)
        said = provider.spot_signal if provider is not None else None
        if said and said.endswith(NOT_READ):
            return Signal(said, None, None)
        if said and said != NO_SIGNAL.text:
            # The provider publishes a signal, read, that names no band for this offer (a
            # type newer than the feed, say): unknown, not "none published".
            return Signal("interruption unknown: not in its provider's published signal",
                          None, None)
    return signal
