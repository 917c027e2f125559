"""Hyperbolic (hyperbolic.ai): its on-demand rental options, a public JSON API."""

from __future__ import annotations

from gpuradar.core.providers.base import Provider, family

HYPERBOLIC = Provider(
    name="hyperbolic",
    kind="marketplace",
    default_interval=600,
    endpoints={"rental_options":
               "https://api.hyperbolic.ai/v2/alpha/on-demand/rental-options"},
    notes=("Public on-demand rental options (API, no key): price per option-hour in US "
           "cents; availability only where an option states totalAvailable."),
    # Each option names its own link between machines (`connectionType`): only that is
    # read; the GPUs inside a machine are decided by the GPU's form factor.
    # fmt: off
    interconnect=(
        family(r"\binfiniband\b", "", "infiniband", "option's connectionType infiniband"),
        family(r"\brocev2\b", "", "rdma", "option's ethernetVariant rocev2 (RoCE)"),
        family(r"\bethernet\b", "", None, "option's connectionType ethernet"),
    ),
    # fmt: on
)
