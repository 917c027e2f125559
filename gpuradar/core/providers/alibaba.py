"""Alibaba Cloud: the ECS calculator's CDN price file; with an AccessKey, the ECS API."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider, cn_prefixed_mainland, family

#: What an Alibaba spot offer's interruption band is read from
#: (attributes["interruption_source"]).
ADVICE_SOURCE = "Alibaba DescribeSpotAdvice"


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """The ECS API with an AccessKey, else the public price file (which version)."""
    site = "intl" if opts.get("site") == "intl" else "china"
    currency = "USD" if site == "intl" else "CNY"
    if opts.get("access_key_id") and opts.get("access_key_secret"):
        return True, (f"AccessKey found: ECS API ({currency}), on-demand and spot prices, "
                      "availability and spot interruption rates (DescribeSpotAdvice) per zone")
    version = (f"pinned price-file version {opts.get('version')}" if opts.get("version")
               else "price-file version discovered from the pricing page (EXPERIMENTAL; "
                    "pin it with sources.alibaba.version)")
    return True, (f"public CDN price file, {site} site in {currency}, on-demand only, no "
                  f"availability; {version}. ALIBABA_CLOUD_ACCESS_KEY_ID and "
                  "ALIBABA_CLOUD_ACCESS_KEY_SECRET (or sources.alibaba.access_key_id / "
                  "access_key_secret) add spot prices and availability per zone")


ALIBABA = Provider(
    name="alibaba",
    # Without an AccessKey there is no spot offer at all (the CDN file is on-demand only).
    spot_signal=("DescribeSpotAdvice release-rate band per instance type and zone, last 30 "
                 "days (with an AccessKey, as the spot prices)"),
    describe=describe_status,
    endpoints={
        "price_file_china": ("https://g.alicdn.com/aliyun/ecs-price-info/{version}/price/"
                             "download/instancePrice.json"),
        "price_file_intl": ("https://g.alicdn.com/aliyun/ecs-price-info-intl/{version}/price/"
                            "download/instancePrice.json"),
        "discovery_china": "https://www.aliyun.com/price/ecs/ecs-pricing/zh",
        "discovery_intl": "https://www.alibabacloud.com/en/product/ecs/pricing",
        "api": "https://ecs.{region}.aliyuncs.com/",
    },
    credentials={"access_key_id": "ALIBABA_CLOUD_ACCESS_KEY_ID",
                 "access_key_secret": "ALIBABA_CLOUD_ACCESS_KEY_SECRET"},
    options={"site": str, "version": str, "discover_with_browser": bool, "home_region": str,
             "regions": list[str]},
    # ECS API reference, "API throttling": probe a throttled API at 1 QPS, and poll at a fixed
    # 1-2 s interval; ECS publishes no per-API limit for the price calls (Quota Center only).
    request_interval=1.0,
    notes=("Key-less: CDN price file of the ECS calculator (CNY China site / USD intl), "
           "version discovery EXPERIMENTAL; with an AccessKey: ECS API prices, spot and "
           "availability per zone in every region of the account; cannot see: subscription "
           "prices, availability without a key, vGPU families."),
    # Alibaba Cloud ECS "GPU-accelerated compute-optimized instance families" (help.aliyun.com
    # /en/ecs/user-guide/gpu-accelerated-compute-optimized-and-vgpu-accelerated-instance-
    # families-1): gn7/gn7e/ebmgn7* A100 with NVSwitch, gn6v/gn6e V100 with NVLink; SCC
    # "Super Computing Cluster" instances on an RDMA network. The PCIe-card families (gn6i,
    # gn7i, gn8is, ...) have no row: the catalog's form factor answers for them.
    # fmt: off
    interconnect=(
        family(r"^ecs\.scc", "", "rdma", "SCC cluster, RDMA network"),
        family(r"^ecs\.(ebm)?gn7e?[-.]", "nvswitch", None, "A100 NVSwitch"),
        family(r"^ecs\.(ebm)?gn6[ve][-.]", "nvlink", None, "V100 NVLink"),
    ),
    # fmt: on
    mainland=cn_prefixed_mainland,
)
