"""Verda (formerly DataCrunch): the list prices its pricing page publishes as JSON-LD."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

VERDA = Provider(
    name="verda",
    spot_signal="no interruption signal published",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"pricing": "https://verda.com/pricing"},
    notes=("Pricing page's JSON-LD offers: USD per instance-hour, on-demand and spot "
           "instances and instant clusters; no region and no stock on the page."),
    # The page of 2026-08 held 32 priced GPU instance rows and about 80 cluster rows; fewer
    # than 10 GPU rows is a changed page.
    min_rows=10,
)
