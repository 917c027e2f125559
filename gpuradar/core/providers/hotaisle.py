"""Hot Aisle (hotaisle.xyz): AMD MI300X virtual machines, list prices from its public pricing
page; its API lists what a team can rent, with a key."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider

#: The plan cards' kickers: "VM" cards are sold by the minute (on-demand); "Bare metal" ones
#: only for a month or more -- no on-demand sale, and gpuradar has no kind for a monthly
#: commitment yet, so they are counted, never stored as on-demand.
ON_DEMAND_KICKER = "VM"
COMMITTED_KICKERS = ("Bare metal",)

HOTAISLE = Provider(
    name="hotaisle",
    kind="page",
    default_interval=3600,
    endpoints={"pricing": "https://hotaisle.xyz/pricing"},
    price_source="list_page",
    # Three plan cards (two VM, one bare metal) on 2026-08-22: fewer is a changed page.
    min_rows=3,
    notes=("Public pricing page (list price per GPU-hour of its MI300X VMs, 1x/2x/4x); "
           "bare metal is sold by the month and not stored; availability unknown."),
)
