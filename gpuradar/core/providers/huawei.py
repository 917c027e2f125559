"""Huawei Cloud: ECS ListFlavors and BSS list prices, with an AK/SK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from gpuradar.core.providers.base import Options, Provider, cn_prefixed_mainland, family


class Site(NamedTuple):
    """Where an account of one Huawei Cloud site is served: its IAM and BSS endpoints (names in
    HUAWEI.endpoints, each overridable under `endpoints:`), and the currency a BSS answer
    with an empty `currency` means."""

    label: str
    iam_domains: str
    iam: str
    bss: str
    empty_currency: str


#: `sources.huawei.site`, from Huawei's SDK region tables (huaweicloudsdk* 3.1.219): the China
#: site's BSS (huaweicloudsdkbss, bss.myhuaweicloud.com: "empty currency means CNY"); the
#: international site's (huaweicloudsdkbssintl AP_SOUTHEAST_1, bss-intl.myhuaweicloud.com:
#: "empty currency means USD"); the EU site (huaweicloud.eu, region eu-west-101): IAM at
#: iam.eu-west-101.myhuaweicloud.eu (huaweicloudsdkiam v3 EU_WEST_101), BSS at
#: bss.myhuaweicloud.eu (huaweicloudsdkbssintl EU_WEST_101, the international BSS API), ECS at
#: ecs.eu-west-101.myhuaweicloud.com like every region (huaweicloudsdkecs EU_WEST_101).
SITES = {
    "cn": Site("China site, CNY", "iam_domains", "iam", "bss", "CNY"),
    "intl": Site("international site, USD", "iam_domains", "iam", "bss_intl", "USD"),
    "eu": Site("EU site (huaweicloud.eu)", "iam_domains_eu", "iam_eu", "bss_eu", "USD"),
}


def site_of(opts: Options | Mapping[str, Any]) -> Site:
    """The configured site; the China site when none is given."""
    return SITES.get(str(opts.get("site") or "cn"), SITES["cn"])


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """No key-less source: an AK/SK is needed; the site decides the currency."""
    if not (opts.get("access_key") and opts.get("secret_key")):
        return False, ("needs HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (or "
                       "sources.huawei.access_key / secret_key): an AK/SK allowed to list "
                       "ECS flavors and query BSS prices; no key-less source is used")
    return True, f"AK/SK found; {site_of(opts).label}"


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
        # The EU site's own IAM and BSS hosts (SITES).
        "iam_domains_eu": "https://iam.eu-west-101.myhuaweicloud.eu/v3/auth/domains",
        "iam_eu": "https://iam.eu-west-101.myhuaweicloud.eu/v3/auth/projects",
        "bss_eu": "https://bss.myhuaweicloud.eu/v2/bills/ratings/on-demand-resources",
    },
    credentials={"access_key": "HUAWEICLOUD_SDK_AK", "secret_key": "HUAWEICLOUD_SDK_SK",
                 "domain_id": "HUAWEICLOUD_SDK_DOMAIN_ID"},
    requires_credentials=True,
    options={"site": str, "regions": list[str], "projects": dict[str, str], "region": str},
    notes=("ECS ListFlavors (GPU + Ascend) per region, sell status per AZ; hourly list "
           "price from BSS; CNY on the China site (option site: intl for USD, eu for the EU "
           "site's hosts); cannot see: "
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
