"""Google Cloud: Cloud Billing Catalog SKUs (Compute Engine and Cloud TPU), with an API key."""

from __future__ import annotations

from gpuradar.core.pricing import CALENDAR, FLEX_START, SPOT
from gpuradar.core.providers.base import Options, Provider, family

# How Google sells its largest GPU machines: machine type -> the pricing kinds it is sold as.
# None of them is sold on demand, although the catalog lists on-demand SKUs for their GPUs;
# a machine not named here is sold every way its SKUs price it. Google's "Accelerator-
# optimized machine family" page (cloud.google.com/compute/docs/accelerator-optimized-
# machines), the note of each machine type:
# - A4 (B200) and A3 Ultra (H200): "you must reserve capacity to create instances or
#   clusters, use Spot VMs, use Flex-start VMs, or create a resize request in a MIG"; the
#   reservation for a fixed time gpuradar can price is calendar mode, which AI Hypercomputer's
#   "Consumption options" (cloud.google.com/ai-hypercomputer/docs/consumption-models) offers
#   for "A4 or A3 Ultra".
# - A4X (GB200 NVL72): "you must reserve capacity"; A4X supports neither Spot nor Flex-start
#   VMs. Its blocks are quoted by Google: no SKU price gpuradar reads applies.
# - A3 High a3-highgpu-1g/2g/4g: "you must create instances by using Spot VMs or Flex-start
#   VMs" (also gpuhunt's maintainers, dstackai/gpuhunt#176).
SOLD_AS: dict[str, frozenset[str]] = {
    "a4-highgpu-8g": frozenset({SPOT, FLEX_START, CALENDAR}),
    "a3-ultragpu-8g": frozenset({SPOT, FLEX_START, CALENDAR}),
    "a4x-highgpu-4g": frozenset(),
    "a3-highgpu-1g": frozenset({SPOT, FLEX_START}),
    "a3-highgpu-2g": frozenset({SPOT, FLEX_START}),
    "a3-highgpu-4g": frozenset({SPOT, FLEX_START}),
}
# The documented terms of the reservation kinds (the SKUs carry only an hourly rate): a
# Flex-start VM runs at most seven days (Compute Engine "Provisioning models",
# cloud.google.com/compute/docs/instances/provisioning-models); a calendar-mode future
# reservation lasts up to 90 days (the consumption-options table above).
TERMS: dict[str, dict[str, float]] = {
    FLEX_START: {"max_hours": 7 * 24},
    CALENDAR: {"max_hours": 90 * 24},
}


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """An API key is needed; says whether the file or the environment gave it."""
    if not opts.get("api_key"):
        return False, ("needs a Google Cloud API key with the Cloud Billing API enabled: "
                       "set GCP_API_KEY or sources.gcp.api_key")
    configured_key = configured.get("api_key")
    return True, "API key from " + ("sources.gcp.api_key" if configured_key else "GCP_API_KEY")


GCP = Provider(
    name="gcp",
    spot_signal="no interruption signal published",
    describe=describe_status,
    endpoints={
        # Compute Engine (GPUs, machine cores and RAM, TPU v5e and newer) and Cloud TPU
        # (v2, v3, v4): read one after the other with the same key.
        "skus": "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus",
        "tpu_skus": "https://cloudbilling.googleapis.com/v1/services/E000-3F24-B8AA/skus",
    },
    credentials={"api_key": "GCP_API_KEY"},
    requires_credentials=True,
    options={"currency": str, "page_size": int},
    notes=("Cloud Billing Catalog SKUs: on-demand, spot, Flex-start and calendar-mode "
           "prices; machine prices assembled from core + RAM + GPU SKUs; N1 GPUs per GPU; "
           "TPU slices per chip-hour (Compute Engine and Cloud TPU services). Needs an API "
           "key. Cannot see: availability, future reservations for blocks of capacity "
           "(A4X, quoted by Google's sales), committed-use prices; A4, A3 Ultra and A3 High "
           "1/2/4g are not sold on demand."),
    # Compute Engine "GPU machine types" (cloud.google.com/compute/docs/gpus) and
    # "Accelerator-optimized machine family" (cloud.google.com/compute/docs/
    # accelerator-optimized-machines): A2/A3/A4 GPUs on NVSwitch; A3 High GPUDirect-TCPX,
    # A3 Mega GPUDirect-TCPXO, A3 Ultra and A4 GPUDirect-RDMA over RoCE; A4X GB200 NVL72.
    # G2 (L4 PCIe cards) has no row: the catalog's form factor answers for it.
    # fmt: off
    interconnect=(
        # A TPU slice's chips (and the hosts of a multi-host slice) are wired by ICI, the
        # inter-chip interconnect (cloud.google.com/tpu/docs/system-architecture-tpu-vm).
        family(r"^(v\d+[a-z]*(pod)?|tpu\d+[a-z]*)-\d+$", "ici", "ici",
               "TPU slice, inter-chip interconnect"),
        family(r"^a4x-", "nvswitch", "rdma", "GB200 NVL72, GPUDirect-RDMA (RoCE)"),
        family(r"^a4-highgpu-8g$", "nvswitch", "rdma", "B200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        family(r"^a3-ultragpu-8g$", "nvswitch", "rdma", "H200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        family(r"^a3-megagpu-8g$", "nvswitch", "gpudirect-tcpxo", "H100 NVSwitch, GPUDirect-TCPXO"),
        family(r"^a3-highgpu-8g$", "nvswitch", "gpudirect-tcpx", "H100 NVSwitch, GPUDirect-TCPX"),
        family(r"^a3-(high|edge)gpu-", "nvswitch", None, "H100 NVSwitch"),
        family(r"^a2-(high|mega|ultra)gpu-", "nvswitch", None, "A100 NVSwitch"),
    ),
    # fmt: on
)
