"""The records every spider yields.

`PriceItem` is the contract between spiders and the rest of gpuradar (see the design
document): one offer as observed, in the provider's own units and currency. The
pipeline fills the derived fields (`price_usd`, `price_per_gpu_usd`) and maps `gpu`
through the catalog; spiders fill the rest.

"GPU" in the field names is historical: `gpu`, `gpu_count`, `gpu_memory_gb` and
`price_per_gpu_usd` hold any accelerator of the catalog -- a GPU, a TPU chip, a Trainium or
Inferentia chip, a Gaudi card, an Ascend NPU. `gpu_count` counts those units (chips for a
TPU slice: v5litepod-8 is 8), and the price per accelerator-hour is the offer's price
divided by it, exactly as for GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from gpuradar.core.clock import SYSTEM
from gpuradar.core.pricing import PRICINGS, Pricing

__all__ = ["PRICINGS", "FxRateItem", "OfferKey", "PriceBatch", "PriceItem", "Pricing", "utcnow"]


def utcnow() -> datetime:
    """When an item is observed, unless its spider says: the system clock's now (a spider
    that knows its answer's time, a replay or a test passes `observed_at` instead)."""
    return SYSTEM.now()


class OfferKey(NamedTuple):
    """An offer's identity within its source: storage keeps one time series per key (its
    unique constraint with the source), and a crawl stores one observation per key."""

    region: str
    zone: str
    instance_type: str
    pricing: str


@dataclass
class PriceItem:
    source: str
    region: str
    instance_type: str
    pricing: str
    gpu: str  # the accelerator as the provider names it; the pipeline maps it to the catalog
    gpu_count: float  # accelerators in the offer (GPUs, TPU chips, NPUs); may be a fraction
    price: float | None
    currency: str
    zone: str = ""
    gpu_memory_gb: float | None = None
    vcpus: float | None = None
    memory_gb: float | None = None
    available: bool | None = None
    available_count: int | None = None
    observed_at: datetime = field(default_factory=utcnow)
    url: str = ""
    # Provider-specific extras kept with the offer (interruption band, tiered prices,
    # reliability, interconnect, "derived" flags, ...). Small, JSON-serialisable. An offer of
    # a reservation kind (gpuradar.core.pricing.RESERVED) keeps its terms under "terms":
    # block length in hours, start and end of the block, up-front fee, as the answer gives
    # them (a term the answer does not give is absent, never guessed).
    attributes: dict[str, Any] = field(default_factory=dict)
    # Filled by the pipeline.
    price_usd: float | None = None
    price_per_gpu_usd: float | None = None
    # Raw GPU string when it matched nothing in the catalog (then `gpu` is the raw string too).
    gpu_raw: str = ""

    @property
    def key(self) -> OfferKey:
        """The offer's identity within its source (see OfferKey)."""
        return OfferKey(self.region, self.zone, self.instance_type, self.pricing)


@dataclass
class FxRateItem:
    """A reference exchange rate: how many units of `currency` one EUR buys, on `rate_date`."""

    currency: str
    per_eur: float
    rate_date: str  # ISO date as published
    source: str = "fx"


@dataclass(slots=True)
class PriceBatch:
    """The offers one callback yielded, carried through Scrapy's item pipelines as one item
    (gpuradar.crawler.middlewares.PriceBatchMiddleware groups them; spiders yield PriceItems).
    Scrapy's per-item cost -- a task, two signals, the pipeline chain's awaitables -- is then
    paid once per batch instead of once per offer; each pipeline stage still judges every
    offer on its own, in order, exactly as if it had come alone."""

    items: list[PriceItem]

    def __len__(self) -> int:
        return len(self.items)
