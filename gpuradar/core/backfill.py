"""History from before the first crawl: what a provider's own history API says an offer
cost before gpuradar first saw it (AWS's DescribeSpotPriceHistory, 90 days).

A spider yields one `PriceHistory` per offer beside the offer's live `PriceItem`; the
storage pipeline hands them to the crawl writer, which stores them as change points at
their own times, before the offer's first stored observation (docs/patterns.md, "History
from the first crawl")."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuradar.core.items import OfferKey


@dataclass
class PriceHistory:
    """Back-dated prices of one offer of `source`: (epoch seconds, price of the whole offer
    in `currency`), in any order; `gpu_count` lets the pipeline judge each price per GPU
    as it judges a live one."""

    source: str
    key: OfferKey
    gpu_count: float
    currency: str
    points: list[tuple[int, float]]
    #: How far back the history was asked for, in days (for the crawl's summary).
    days: int = 0
    #: Prices of the answer that could not be read (no number, no time): counted only.
    unreadable: int = 0


@dataclass
class Backfilled:
    """What a crawl back-filled: change points stored, of which instance types, in which
    regions; points refused (an unreadable or implausible price: counted, never stored)."""

    days: int = 0
    points: int = 0
    types: set[str] = field(default_factory=set)
    regions: set[str] = field(default_factory=set)
    refused: int = 0

    def line(self) -> str:
        """The crawl summary's sentence."""
        text = (f"back-filled {self.days} days: {self.points:,} price point"
                f"{'s' if self.points != 1 else ''} for {len(self.types)} type"
                f"{'s' if len(self.types) != 1 else ''} in {len(self.regions)} region"
                f"{'s' if len(self.regions) != 1 else ''}")
        if self.refused:
            text += f" ({self.refused:,} unreadable or implausible, not stored)"
        return text

    def as_dict(self) -> dict[str, object]:
        return {"days": self.days, "points": self.points, "types": sorted(self.types),
                "regions": sorted(self.regions), "refused": self.refused}
