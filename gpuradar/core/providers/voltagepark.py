"""Voltage Park (voltagepark.com): on-demand H100 bare metal, priced per location and network
by its dashboard's public locations API."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider, family

#: The locations API's price fields, per network: (price per GPU-hour, free GPUs).
NETWORKS = {
    "ethernet": ("gpu_price_ethernet", "gpu_count_ethernet"),
    "infiniband": ("gpu_price_infiniband", "gpu_count_infiniband"),
}

VOLTAGEPARK = Provider(
    name="voltagepark",
    kind="cloud",
    default_interval=3600,
    endpoints={"locations": "https://cloud-api.voltagepark.com/api/v1/bare-metal/locations"},
    notes=("Public bare-metal locations API (no key): price per GPU-hour per network "
           "(ethernet, InfiniBand); free GPUs per location."),
    # The API's own names for the two prices: nodes on Ethernet, or on InfiniBand (3200 Gb/s
    # per gpu-index's reading of the dashboard). Inside a node: the GPU's form factor.
    # fmt: off
    interconnect=(
        family(r" infiniband$", "", "infiniband", "node on InfiniBand"),
        family(r" ethernet$", "", None, "node on Ethernet"),
    ),
    # fmt: on
)
