"""DigitalOcean: the GPU Droplet price tables of its documentation's Droplet pricing page."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

DIGITALOCEAN = Provider(
    name="digitalocean",
    spot_signal="no interruption signal published",
    kind="page",
    default_interval=6 * 3600,
    price_source="list_page",
    endpoints={"pricing": "https://docs.digitalocean.com/products/droplets/details/pricing/"},
    notes=("Docs pricing page: USD per Droplet-hour, on-demand and spot (public preview) "
           "GPU Droplets of 1 or 8 GPUs; contract-only plans have no price; no region, no "
           "stock."),
    # The page of 2026-08-18 had 11 on-demand and 8 spot rows: fewer than 8 is a changed page.
    min_rows=8,
)
