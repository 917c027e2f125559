"""Vast.ai: the marketplace's offer search."""

from gpuradar.core.providers.base import Provider

VASTAI = Provider(
    name="vastai",
    spot_signal="host reliability score per offer (read; a score, not an interruption rate)",
    kind="marketplace",
    default_interval=300,
    endpoints={"bundles": "https://console.vast.ai/api/v0/bundles/"},
    credentials={"api_key": "VAST_API_KEY"},
    options={"limit": int, "gpu_names": list[str]},
    notes=("Marketplace offers, region = the host's country; rentable = available (rented = "
           "held by you); spot = min_bid (+ storage); cannot see: reserved prices, exact "
           "host places."),
    # Vast's search allows 10 requests a minute per IP (x-rate-limit of POST /api/v0/bundles/
    # in Vast's API reference, vast-ai/docs search_offers.yaml, read 2026-11).
    request_interval=6.0,
)
