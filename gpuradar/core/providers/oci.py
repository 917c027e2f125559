"""Oracle Cloud: the cost estimator's shapes and the public price list."""

from gpuradar.core.providers.base import Options, Provider, family

# The API-key settings the OCI CLI reads from its environment (as the SDK's ~/.oci/config
# keys tenancy, user, fingerprint, key_file, region).
API_KEY = {"tenancy": "OCI_CLI_TENANCY", "user": "OCI_CLI_USER",
           "fingerprint": "OCI_CLI_FINGERPRINT", "key_file": "OCI_CLI_KEY_FILE",
           "region": "OCI_CLI_REGION"}


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """Public prices either way; with an API key, the regions each shape is offered in."""
    missing = [f"{env} (or sources.oci.{opt})" for opt, env in API_KEY.items()
               if not opts.get(opt)]
    if not missing:
        return True, "credentials found: shapes placed in the tenancy's regions"
    return True, ("public endpoint (region 'global'); regions need OCI credentials: "
                  + ", ".join(missing))


OCI = Provider(
    name="oci",
    spot_signal="no interruption signal published",
    endpoints={
        "shapes": "https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json",
        "prices": "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/",
        # With an API key (oci SDK: IdentityClient.list_region_subscriptions on the home
        # region, ComputeClient.list_shapes per region; service endpoint templates).
        "region_subscriptions": ("https://identity.{region}.oci.oraclecloud.com/20160918/"
                                 "tenancies/{tenancy}/regionSubscriptions"),
        "compute_shapes": "https://iaas.{region}.oraclecloud.com/20160918/shapes",
    },
    credentials=API_KEY,
    options={"currency": str, "regions": list[str]},
    describe=describe_status,
    notes=("Cost-estimator shapes x public price list; same price in every region; spot = "
           "50 % of on-demand (derived); with an API key, each shape in the subscribed "
           "regions whose ListShapes lists it, else region 'global' (regions need OCI "
           "credentials); cannot see: availability."),
    # OCI Compute "Compute Shapes" page, GPU shapes (docs.oracle.com/iaas/Content/Compute/
    # References/computeshapes.htm#bm-gpu) and "Cluster networks" (RDMA cluster networks for
    # the bare-metal GPU shapes, docs.oracle.com/iaas/Content/Compute/Tasks/
    # managingclusternetworks.htm). PCIe-card shapes (A10, L40S, RTX PRO) have no row: the
    # catalog's form factor answers for them.
    # fmt: off
    interconnect=(
        family(r"^BM\.GPU\.GB[23]00", "nvswitch", "rdma", "NVL72 rack, RDMA cluster network"),
        family(r"^BM\.GPU\.(H100|H200|B200|B300|A100-v2)\.8$", "nvswitch", "rdma",
               "HGX NVSwitch, RDMA cluster network"),
        family(r"^BM\.GPU4\.8$", "nvswitch", "rdma", "HGX A100 NVSwitch, RDMA cluster network"),
        family(r"^BM\.GPU\.MI3\d\dX\.8$", "infinity-fabric", "rdma",
               "Infinity Fabric, RDMA cluster network"),
        family(r"^(BM|VM)\.GPU3\.", "nvlink", None, "V100 SXM2 NVLink"),
    ),
    # fmt: on
)
