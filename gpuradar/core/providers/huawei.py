"""Huawei Cloud: ECS ListFlavors and BSS list prices, with an AK/SK."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider, cn_prefixed_mainland, family


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """No key-less source: an AK/SK is needed; the site decides the currency."""
    if not (opts.get("access_key") and opts.get("secret_key")):
        return False, ("needs HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (or "
                       "sources.huawei.access_key / secret_key): an AK/SK allowed to list "
                       "ECS flavors and query BSS prices; no key-less source is used")
    site = "international site, USD" if opts.get("site") == "intl" else "China site, CNY"
    return True, f"AK/SK found; {site}"


HUAWEI = Provider(
    name="huawei",
    spot_signal="no interruption signal published",
    describe=describe_status,
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
           "price from BSS; CNY on the China site (option site: intl for USD); cannot see: "
           "spot prices (none published), subscription-only flavors' prices."),
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
