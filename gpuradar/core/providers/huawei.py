"""Huawei Cloud: ECS ListFlavors and BSS list prices, with an AK/SK."""

from gpuradar.core.providers.base import Provider, cn_prefixed_mainland, family

HUAWEI = Provider(
    name="huawei",
    endpoints={
        "iam_domains": "https://iam.myhuaweicloud.com/v3/auth/domains",
        "iam": "https://iam.myhuaweicloud.com/v3/auth/projects",
        "ecs": "https://ecs.{region}.myhuaweicloud.com/v1/{project_id}/cloudservers/flavors",
        "ecs_zones": ("https://ecs.{region}.myhuaweicloud.com/v2.1/{project_id}/"
                      "os-availability-zone"),
        "bss": "https://bss.myhuaweicloud.com/v2/bills/ratings/on-demand-resources",
        "bss_intl": "https://bss-intl.myhuaweicloud.com/v2/bills/ratings/on-demand-resources",
    },
    credentials={"access_key": "HUAWEICLOUD_SDK_AK", "secret_key": "HUAWEICLOUD_SDK_SK",
                 "domain_id": "HUAWEICLOUD_SDK_DOMAIN_ID"},
    requires_credentials=True,
    options={"site": str, "regions": list[str], "projects": dict[str, str], "region": str},
    notes=("ECS ListFlavors (GPU + Ascend) per region, sell status per AZ; hourly list "
           "price from BSS; CNY on the China site (option site: intl for USD)."),
    # Huawei Cloud ECS "GPU-accelerated ECSs" (support.huaweicloud.com/intl/en-us/
    # productdesc-ecs/ecs_01_0045.html): P2v/P2vs V100 and P3 A100 with NVLink; "AI-accelerated
    # ECSs" (Ascend, ecs_01_0047.html): Kunpeng Ascend pods with HCCS and a RoCE network.
    # Other families (P2s, Pi, G) have no row: the catalog's form factor answers for
    # PCIe-only cards, anything else stays unknown.
    # fmt: off
    interconnect=(
        family(r"^k\w*\..*pod", "hccs", "rdma", "Ascend HCCS, RoCE pod network"),
        family(r"^p2vs?\.", "nvlink", None, "V100 NVLink"),
        family(r"^p3\.", "nvlink", None, "NVLink"),
    ),
    # fmt: on
    mainland=cn_prefixed_mainland,
)
