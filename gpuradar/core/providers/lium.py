"""Lium (lium.io, Bittensor subnet 51): a GPU marketplace whose whole node book is a public
JSON feed, no key needed."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: Lium's own tier names -> gpuradar pricing kinds. "secure" nodes are rented until the renter
#: stops; "spot" nodes can be taken back. A tier not listed here is counted, never guessed.
TIERS = {"secure": "on_demand", "spot": "spot"}

LIUM = Provider(
    name="lium",
    spot_signal="no interruption signal published",
    kind="marketplace",
    # Miners list and delist nodes all day, as on Vast.ai.
    default_interval=600,
    endpoints={"nodes": "https://lium.io/api/public/v1/nodes"},
    notes=("Public node feed (API, no key): one offer per node at its smallest rentable "
           "size; price per GPU-hour x GPUs; free GPUs per node; secure = on-demand, "
           "spot = spot."),
)
