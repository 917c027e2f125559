"""Pricing kinds: how an offer is sold, and the one reading of the words that name them.

On-demand and spot are bought by the hour whenever capacity is there. The reservation kinds
are sold for a fixed time, booked ahead: an AWS EC2 Capacity Block for ML, a GCP Flex-start
VM (Dynamic Workload Scheduler, up to seven days) or a GCP future reservation in calendar
mode. Their hourly price is a different market (paid up front, for a block of hours, at a
start date the provider picks), so every output, rule, index and plan keeps each kind apart,
and a rule or plan that names no kind means the open market only: on-demand and spot.

Stored values use underscores (`capacity_block`); users type dashes (`capacity-block`);
both, and the synonyms below, are read here and nowhere else.
"""

from __future__ import annotations

from typing import Any, Literal

from gpuradar.core.text import excerpt

Pricing = Literal["on_demand", "spot", "capacity_block", "flex_start", "calendar"]

ON_DEMAND = "on_demand"
SPOT = "spot"
CAPACITY_BLOCK = "capacity_block"
FLEX_START = "flex_start"
CALENDAR = "calendar"

#: Every kind, in the order outputs list them.
PRICINGS: tuple[str, ...] = (ON_DEMAND, SPOT, CAPACITY_BLOCK, FLEX_START, CALENDAR)
#: Bought by the hour when wanted: what a rule, an index query or a plan that names no kind
#: covers.
OPEN_MARKET: tuple[str, ...] = (ON_DEMAND, SPOT)
#: Sold for a fixed time, booked ahead; an offer of these kinds carries its `terms`.
RESERVED: tuple[str, ...] = (CAPACITY_BLOCK, FLEX_START, CALENDAR)

# Word (lower case) -> stored kind. Spot covers preemptible, interruptible, bid and
# low-priority capacity (the design's PriceItem contract).
WORDS: dict[str, str] = {
    "on-demand": ON_DEMAND, "ondemand": ON_DEMAND, "on_demand": ON_DEMAND,
    "spot": SPOT, "preemptible": SPOT, "interruptible": SPOT,
    "capacity-block": CAPACITY_BLOCK, "capacity_block": CAPACITY_BLOCK,
    "capacity-blocks": CAPACITY_BLOCK, "capacityblock": CAPACITY_BLOCK,
    "flex-start": FLEX_START, "flex_start": FLEX_START, "flexstart": FLEX_START,
    "calendar": CALENDAR, "calendar-mode": CALENDAR, "calendar_mode": CALENDAR,
}


def label(kind: str) -> str:
    """A stored kind as users write it: 'capacity_block' -> 'capacity-block'."""
    return kind.replace("_", "-")


#: The kinds as users write them, for help texts and error messages.
CHOICES = ", ".join(label(k) for k in PRICINGS)


def parse_pricing(text: str) -> str:
    """The stored kind a word names ('capacity-block', 'Spot', 'on_demand'); ValueError
    naming the word and the choices otherwise."""
    kind = WORDS.get(str(text).strip().lower())
    if kind is None:
        raise ValueError(f"pricing must be one of {CHOICES}, not {excerpt(text)}")
    return kind


def is_reserved(kind: str) -> bool:
    """True for a kind sold for a fixed time (see RESERVED)."""
    return kind in RESERVED


def describe_terms(terms: dict[str, Any]) -> str:
    """A reservation's terms in a few words: '24 h block, 2026-12-10 11:30 to 2026-12-11
    11:30 UTC, 943.92 USD up front'. Only what the offer states; empty when nothing."""
    words = []
    hours = terms.get("block_hours")
    if isinstance(hours, int | float):
        words.append(f"{hours:g} h block")
    elif terms.get("max_hours") is not None:
        words.append(f"up to {terms['max_hours']:g} h")
    start, end = terms.get("start"), terms.get("end")
    if start and end:
        words.append(f"{_minute(start)} to {_minute(end)} UTC")
    fee, currency = terms.get("upfront_fee"), terms.get("currency")
    if fee is not None:
        words.append(f"{fee:g} {currency or ''} up front".replace("  ", " "))
    return ", ".join(words)


def _minute(stamp: str) -> str:
    """'2026-12-10T11:30:00+00:00' -> '2026-12-10 11:30' (stored stamps are UTC)."""
    return str(stamp).replace("T", " ")[:16]
