"""CoreWeave: the list prices of its public pricing page (coreweave.com/pricing)."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

COREWEAVE = Provider(
    name="coreweave",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"pricing": "https://www.coreweave.com/pricing"},
    notes=("Public pricing page: USD per instance-hour of whole GPU nodes per region "
           "(North America, Europe), on-demand and spot; 'Contact sales' rows unpriced; "
           "no stock on the page."),
    # The page gpu-index captured has 10 GPU rows in North America and 10 in Europe; fewer
    # than 4 is a changed page.
    min_rows=4,
)
