"""Microsoft Azure: the public Retail Prices API; with credentials, the Resource SKUs API."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider, family

#: What an Azure spot offer's eviction-rate band is read from
#: (attributes["interruption_source"]).
EVICTION_SOURCE = "Azure Resource Graph"

# Pages cited below are Microsoft Learn's VM size pages,
# learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/<page>. An "r" in an N-series
# size marks its InfiniBand (RDMA, SR-IOV) sizes: Microsoft's InfiniBand driver extension
# pages (learn.microsoft.com/azure/virtual-machines/extensions/hpc-compute-infiniband-linux)
# install InfiniBand drivers on the "'r' sizes" of the H- and N-series; a size without the
# "r" has no InfiniBand. The 8-GPU NVIDIA ND sizes are HGX baseboards, whose NVLink goes
# through NVSwitch (NVIDIA Fabric Manager user guide, "NVSwitch-based HGX systems").
# A size no row matches (NV, NG, NC T4, new series) is decided by the GPU's form factor or
# stays unknown: never a catch-all row.
#: The regions whose prices are walked, one chain each: the programmatic names of Microsoft's
#: "Azure regions list" of the public cloud (MicrosoftDocs/reliability-docs,
#: articles/reliability/regions-list.md @ 01021ab80d1aebd1d8b5de481d80a9855b487954,
#: ms.date 2025-09-23; learn.microsoft.com/azure/reliability/regions-list), restricted-access
#: and coming-soon regions included (a region without GPU meters answers one empty page).
#: Without credentials nothing lists the regions: the Retail Prices API has no region list,
#: and ARM's Subscriptions - List Locations needs a token. A region opened since is read when
#: `sources.azure.regions` names it.
REGIONS = (
    "australiacentral", "australiacentral2", "australiaeast", "australiasoutheast",
    "austriaeast", "belgiumcentral", "brazilsouth", "brazilsoutheast", "canadacentral",
    "canadaeast", "centralindia", "centralus", "chilecentral", "denmarkeast", "eastasia",
    "eastus", "eastus2", "francecentral", "francesouth", "germanynorth",
    "germanywestcentral", "indonesiacentral", "israelcentral", "italynorth", "japaneast",
    "japanwest", "koreacentral", "koreasouth", "malaysiawest", "mexicocentral",
    "newzealandnorth", "northcentralus", "northeurope", "norwayeast", "norwaywest",
    "polandcentral", "qatarcentral", "southafricanorth", "southafricawest",
    "southcentralus", "southindia", "southeastasia", "spaincentral", "swedencentral",
    "switzerlandnorth", "switzerlandwest", "uaecentral", "uaenorth", "uksouth", "ukwest",
    "westcentralus", "westeurope", "westindia", "westus", "westus2", "westus3",
)


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Public prices always; all four credentials add the Resource SKUs API, and a partial
    set names what is missing."""
    missing = [f"{env} (or sources.azure.{name})"
               for name, env in provider.credentials.items() if not opts.get(name)]
    if not missing:
        return True, ("public Retail Prices API; Azure credentials found: GPU counts "
                      "missing from the size table come from the Resource SKUs API, spot "
                      "eviction rates from Azure Resource Graph")
    if any(opts.get(name) for name in provider.credentials):
        return True, ("public Retail Prices API; the Resource SKUs API and the spot "
                      "eviction rates (Resource Graph) are not used: "
                      + " and ".join(missing) + " missing")
    return True, ("public Retail Prices API; AZURE_TENANT_ID, AZURE_CLIENT_ID, "
                  "AZURE_CLIENT_SECRET and AZURE_SUBSCRIPTION_ID (or sources.azure."
                  "tenant_id, ...) add GPU counts from the Resource SKUs API for sizes "
                  "missing from the size table, and spot eviction rates (Resource Graph)")


AZURE = Provider(
    name="azure",
    # With the credentials: Resource Graph's eviction-rate band per size and region; without,
    # the spot offers (Retail Prices, public) say this.
    spot_signal=("spot eviction rates (Azure Resource Graph) need AZURE_TENANT_ID, "
                 "AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_SUBSCRIPTION_ID, not read"),
    describe=describe_status,
    endpoints={
        "prices": "https://prices.azure.com/api/retail/prices",
        # With credentials: the OAuth 2.0 client-credentials token of Microsoft Entra ID
        # (learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow)
        # and the Resource SKUs list (azure-mgmt-compute ResourceSkusOperations.list).
        "token": "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
        "skus": ("https://management.azure.com/subscriptions/{subscription}/providers/"
                 "Microsoft.Compute/skus"),
        # Spot eviction rates: Azure Resource Graph (azure-mgmt-resourcegraph
        # ResourceGraphClient.resources), the `SpotResources` table.
        "resource_graph": ("https://management.azure.com/providers/Microsoft.ResourceGraph/"
                           "resources"),
    },
    # The variables azure-identity's EnvironmentCredential reads, and the one Azure's SDK
    # samples take the subscription from. All four or none: see crawler/spiders/azure.py.
    credentials={"tenant_id": "AZURE_TENANT_ID", "client_id": "AZURE_CLIENT_ID",
                 "client_secret": "AZURE_CLIENT_SECRET",
                 "subscription_id": "AZURE_SUBSCRIPTION_ID"},
    options={"currency": str, "regions": list[str]},
    notes=("Retail Prices API, walked per region (the regions of Microsoft's regions list, or "
           "sources.azure.regions), Linux, on-demand and Spot, primary meters, the "
           "price in effect; no credentials needed. With a service principal (tenant, "
           "client id and secret, subscription) the Resource SKUs API gives the GPU count "
           "of sizes missing from gpuradar's size table, and Resource Graph each spot "
           "size's eviction-rate band per region. Cannot see: reservations, savings "
           "plans, availability, a region missing from that list."),
    # fmt: off
    interconnect=(
        # nd-gb200-v6-series / nd-gb300-v6-series: NVLink 5 NVL72 rack, InfiniBand per GPU.
        family(r"_ND\w*GB[23]00", "nvswitch", "infiniband", "GB200/GB300 NVL72, InfiniBand"),
        # ndh100v5-series, nd-h200-v5-series: 8 GPUs with NVLink 4.0 inside the VM and a
        # dedicated 400 Gb/s InfiniBand connection per GPU (Standard_ND96isr_H100_v5).
        family(r"_ND\d+is?r_(H100|H200)_v5$", "nvswitch", "infiniband",
               "NVLink 4 via NVSwitch, 400 Gb/s InfiniBand per GPU"),
        # The same 8-GPU machines sold without the "r" (Standard_ND96is_H100_v5,
        # Standard_ND96is_noIB_H100_v5): NVSwitch inside, no InfiniBand.
        family(r"_ND\d+is(_noIB)?_(H100|H200)_v5$", "nvswitch", None,
               "NVLink 4 via NVSwitch, no InfiniBand"),
        # ndmi300xv5-series: Infinity Fabric between the 8 MI300X, 8x400 Gb/s NDR InfiniBand
        # (Standard_ND96isr_MI300X_v5); Standard_ND96is_MI300X_v5 without the "r".
        family(r"_ND\d+isr_MI300X_v5$", "infinity-fabric", "infiniband",
               "Infinity Fabric, 400 Gb/s InfiniBand per GPU"),
        family(r"_ND\d+is_MI300X_v5$", "infinity-fabric", None,
               "Infinity Fabric, no InfiniBand"),
        # ndasra100v4-series, ndma100v4-series: 8 A100 with NVLink 3.0 inside the VM and a
        # dedicated 200 Gb/s HDR InfiniBand connection per GPU (Standard_ND96asr_v4,
        # Standard_ND96amsr_A100_v4); without the "r" (Standard_ND96ams_A100_v4) no InfiniBand.
        family(r"_ND\d+am?sr_(A100_)?v4$", "nvswitch", "infiniband",
               "NVLink 3 via NVSwitch, 200 Gb/s InfiniBand per GPU"),
        family(r"_ND\d+am?s_(A100_)?v4$", "nvswitch", None,
               "NVLink 3 via NVSwitch, no InfiniBand"),
        # ndv2-series: 8 V100 connected by NVLink, 100 Gb/s EDR InfiniBand (Standard_ND40rs_v2).
        family(r"_ND\d+rs_v2$", "nvlink", "infiniband", "V100 NVLink, 100 Gb/s InfiniBand"),
        # nca100v4-series: "NVIDIA A100 PCIe GPU" cards.
        family(r"_NC\d+ads_A100_v4$", "pcie", None, "A100 PCIe"),
        # ncv3-series: Standard_NC24rs_v3 adds the low-latency InfiniBand network; the page
        # does not say how its V100s are linked, so the form factor decides.
        family(r"_NC\d+r\w*_v3$", "", "infiniband", "V100, RDMA InfiniBand"),
    ),
    # fmt: on
)
