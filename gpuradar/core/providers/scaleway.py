"""Scaleway: the public Instance API's server-type catalog and stock, per zone."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider, family

#: Zones crawled unless `sources.scaleway.zones` says otherwise. On 2026-08-22 fr-par-2 listed
#: every GPU type Scaleway sells, at the prices of the other zones (gpu-index's probe of
#: fr-par-1, fr-par-2, nl-ams-1 and pl-waw-2, src/gpu_index/observatory/sources/scaleway.py).
ZONES = ("fr-par-2",)

#: `availability` of GET .../products/servers/availability -> can it be rented now.
#: "scarce" is few left, still deployable; "shortage" is none.
STOCK = {"available": True, "scarce": True, "shortage": False}

SCALEWAY = Provider(
    name="scaleway",
    default_interval=3600,
    endpoints={
        "servers": "https://api.scaleway.com/instance/v1/zones/{zone}/products/servers",
        "availability": ("https://api.scaleway.com/instance/v1/zones/{zone}/products/servers/"
                         "availability"),
    },
    options={"zones": list[str]},
    notes=("Instance API catalog (no key): EUR per instance-hour per zone; stock "
           "available/scarce/shortage per server type; on-demand only."),
    min_rows=1,
    # Scaleway's GPU instance page names its H100-SXM types as HGX boards (NVLink/NVSwitch);
    # H100-1/2-80G are PCIe cards.
    # fmt: off
    interconnect=(
        family(r"-SXM-", "nvswitch", None, "HGX SXM board"),
    ),
    # fmt: on
)
