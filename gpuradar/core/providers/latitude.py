"""Latitude.sh: the bare-metal plans its pricing page embeds, with prices and stock per
region."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: `stock_level` of a plan in a region -> can it be deployed now.
STOCK = {"high": True, "medium": True, "low": True, "unavailable": False}

LATITUDE = Provider(
    name="latitude",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"pricing": "https://www.latitude.sh/pricing"},
    notes=("Pricing page's embedded plan data: USD per server-hour of bare-metal GPU plans "
           "per region, on-demand, with each region's stock level."),
    # The page of 2026-08-22 held GPU plans in at least 7 plan x region rows; fewer than 3
    # is a changed page.
    min_rows=3,
)
