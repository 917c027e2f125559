"""Oracle Cloud: the cost estimator's shapes and the public price list."""

from gpuradar.core.providers.base import Provider, family

OCI = Provider(
    name="oci",
    spot_signal="no interruption signal published",
    endpoints={
        "shapes": "https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json",
        "prices": "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/",
    },
    options={"currency": str, "regions": list[str]},
    notes=("Cost-estimator shapes x public price list; same price in every region "
           "(region 'global'); spot = 50 % of on-demand (derived); cannot see: where a "
           "shape is offered (needs the Compute API with credentials), availability."),
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
