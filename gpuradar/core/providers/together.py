"""Together AI (together.ai): GPU Clusters list prices from its public pricing page."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: The GPU Clusters table's heading, and the sentence under it that states the unit.
TABLE_HEADING = "On-demand hourly rates and reserved capacity"
PER_GPU_HOUR = "All prices are per GPU per hour."
#: Its header, in order: the hardware, the on-demand column, then four reservation terms.
#: The reservation prices are counted, not stored: gpuradar has no pricing kind for a
#: fixed-term reservation yet.
COLUMNS = ("Hardware", "ON-Demand", "Reserved", "Pay as you go", "7-30 days", "31-90 days",
           "91-180 days", "181+ days")
#: 3 of the 6 rows had an on-demand price on 2026-08-22: fewer is a changed page.
MIN_PRICED = 2

TOGETHER = Provider(
    name="together",
    kind="page",
    default_interval=3600,
    endpoints={"pricing": "https://www.together.ai/pricing"},
    price_source="list_page",
    # 6 hardware rows on 2026-08-22.
    min_rows=4,
    notes=("Public pricing page, GPU Clusters table (list price per GPU-hour, on-demand; "
           "reserved terms not stored); availability unknown."),
)
