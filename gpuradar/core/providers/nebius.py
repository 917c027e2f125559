"""Nebius: the list prices of its public price page (nebius.com/prices)."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

NEBIUS = Provider(
    name="nebius",
    spot_signal="no interruption signal published",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"prices": "https://nebius.com/prices"},
    notes=("Public price page: list prices per GPU-hour, on-demand and preemptible (spot); "
           "no region and no stock on the page."),
    # The capture of 2026-08 lists 9 GPU rows (7 priced); fewer than 5 is a changed page.
    min_rows=5,
)
