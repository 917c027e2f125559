"""Civo: the NVIDIA GPU tables of its public pricing page (civo.com/pricing)."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

CIVO = Provider(
    name="civo",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"pricing": "https://www.civo.com/pricing"},
    notes=("Pricing page: USD per instance-hour of 1-8 GPUs, on-demand; commitment (6-36 "
           "month) prices kept as attributes; no region, no stock."),
    # gpu-index counted 6 GPU tables with 17 rows on the live page of 2026-08-22; fewer than
    # 5 rows is a changed page.
    min_rows=5,
)
