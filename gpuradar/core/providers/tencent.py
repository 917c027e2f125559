"""Tencent Cloud: CVM DescribeZoneInstanceConfigInfos, with an API key."""

from __future__ import annotations

from gpuradar.core.providers.base import Options, Provider, family

# Tencent regions in mainland China, by the city in their code (ap-<city>[-...]).
MAINLAND_CITIES = frozenset({
    "beijing", "shanghai", "guangzhou", "chengdu", "chongqing", "nanjing", "shenzhen",
    "tianjin", "hangzhou", "wuhan", "changsha", "xian", "jinan", "hefei", "fuzhou",
    "shijiazhuang", "zhengzhou", "qingyuan", "shenyang", "taiyuan", "xibei", "huhehaote"})


def is_mainland(region: str) -> bool:
    """ap-guangzhou, ap-shanghai-fsi, ...: the city is the second part of the code."""
    parts = region.lower().split("-")
    return len(parts) >= 2 and parts[0] == "ap" and parts[1] in MAINLAND_CITIES


#: The currency each Tencent Cloud site bills in: the China site (cloud.tencent.com) in CNY,
#: the international site (tencentcloud.com) in USD. The API answers carry no currency.
SITE_CURRENCY = {"china": "CNY", "intl": "USD"}


def site_currency(opts: Options) -> str | None:
    """The currency the options state (`currency`, else `site`'s), or None: unknown."""
    currency = opts.get("currency") or SITE_CURRENCY.get(str(opts.get("site")))
    return str(currency).upper() if currency else None


def describe_status(provider: Provider, opts: Options, configured: Options
                    ) -> tuple[bool, str]:
    """No key-less source: an API key is needed, and the account's site, since Tencent's
    answers do not say which currency their prices are in."""
    if not (opts.get("secret_id") and opts.get("secret_key")):
        return False, ("needs TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (or "
                       "sources.tencent.secret_id / secret_key): an API key with read "
                       "access to CVM; no key-less source is used")
    currency = site_currency(opts)
    if currency is None:
        return False, ("needs sources.tencent.site: china (prices in CNY) or intl (USD), the "
                       "site of the account: Tencent's price answers do not name their "
                       "currency")
    regions = opts.get("regions") or "all regions (DescribeRegions)"
    return True, f"API key found; prices in {currency}; {regions}"


TENCENT = Provider(
    name="tencent",
    spot_signal="no interruption signal published",
    describe=describe_status,
    endpoints={"cvm": "https://cvm.tencentcloudapi.com/",
               # The financial regions' own hosts (see crawler/spiders/tencent.py).
               "cvm_financial": "https://cvm.{region}.tencentcloudapi.com/"},
    credentials={"secret_id": "TENCENTCLOUD_SECRET_ID",
                 "secret_key": "TENCENTCLOUD_SECRET_KEY"},
    requires_credentials=True,
    options={"site": str, "currency": str, "regions": list[str], "home_region": str,
             "families": list[str], "charge_types": list[str]},
    notes=("CVM DescribeZoneInstanceConfigInfos per region: on-demand and spot price, "
           "SELL/SOLD_OUT per zone; every GPU family asked; CNY or USD by the option site; "
           "cannot see: monthly (PREPAID) prices, the GPU of families not in its table."),
    # Tencent Cloud CVM "Instance Types", GPU computing families (cloud.tencent.com/document/
    # product/560/19701): HCC high-performance computing clusters on an RDMA network, GT4
    # (A100 with NVSwitch), GN10X/GN10Xp (V100 with NVLink). The PCIe-card families (GN7,
    # GN8, GNV4, PNV4, ...) have no row: the catalog's form factor answers for them.
    # fmt: off
    interconnect=(
        family(r"^HCC", "", "rdma", "HCC GPU cluster, RDMA network"),
        family(r"^GT4\.", "nvswitch", None, "A100 NVSwitch"),
        family(r"^GN10X", "nvlink", None, "V100 NVLink"),
    ),
    # fmt: on
    mainland=is_mainland,
)
