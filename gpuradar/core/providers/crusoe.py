"""Crusoe Cloud (crusoe.ai): list prices from its public pricing page; its API needs signed
keys and says nothing of prices."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: The GPU instances table's columns, in order, and the pricing kind each one quotes.
COLUMNS = (("On-demand", "on_demand"), ("Current spot", "spot"))
#: The table listed 9 GPU rows, 6 of them priced on demand, on 2026-08-22: fewer priced
#: cells than this is a changed page too (every row "Contact sales" is no sale).
MIN_PRICED = 3

CRUSOE = Provider(
    name="crusoe",
    spot_signal="no interruption signal published",
    kind="page",
    # A list price on a marketing page: hourly is plenty, and polite.
    default_interval=3600,
    endpoints={"pricing": "https://www.crusoe.ai/cloud/pricing"},
    price_source="list_page",
    # 9 GPU rows on 2026-08-22: fewer than 5 is a changed page (a failed crawl), never a
    # short table.
    min_rows=5,
    notes=("Public pricing page (list prices per GPU-hour, on-demand and spot columns; "
           "'Contact sales' cells are no price); availability unknown."),
)
