"""Crusoe Cloud (crusoe.ai): list prices from its public pricing page; its API needs signed
keys and says nothing of prices."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: The GPU instances table's columns, in order, and the pricing kind each one quotes.
COLUMNS = (("On-demand", "on_demand"), ("Current spot", "spot"))
#: The table listed 9 GPU rows, 6 of them priced on demand, on 2026-08-22: fewer rows than
#: this is a changed page (a failed crawl), never a short table.
MIN_ROWS = 5
MIN_PRICED = 3

CRUSOE = Provider(
    name="crusoe",
    kind="cloud",
    # A list price on a marketing page: hourly is plenty, and polite.
    default_interval=3600,
    endpoints={"pricing": "https://www.crusoe.ai/cloud/pricing"},
    notes=("Public pricing page (list prices per GPU-hour, on-demand and spot columns; "
           "'Contact sales' cells are no price); availability unknown."),
)
