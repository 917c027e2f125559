"""Tencent Cloud CVM: `DescribeZoneInstanceConfigInfos`, signed with TC3-HMAC-SHA256.

One call per region, charge type (`POSTPAID_BY_HOUR` = on-demand, `SPOTPAID` = spot) and
(with the option `families`) chunk of instance families; each answer lists every (zone,
instance type) with its price and `Status` SELL / SOLD_OUT, which is the availability. By
default no family filter is sent: every family is asked, and a GPU family the table below does
not know is reported by name (`uncatalogued`), never left unasked. Prices are per
instance-hour in the account site's currency; the answer does not name it (the SDK's ItemPrice
has no currency field), so the option `site` (china: CNY, intl: USD) or `currency` says it.

`RequestLimitExceeded` (and its `.UinLimitExceeded`, ... forms) comes as an HTTP 200 error
body; it is retried with backoff like a 429 (`throttle_pause`), as the SDK's StandardRetryer
retries exactly these codes with 2**n second waits.

On-demand uses `Price.UnitPrice`, the list price of the first 96 hours; the cheaper second and
third steps (96-360 h, >360 h) are kept as attributes. For spot the price paid is
`UnitPriceDiscount` (the discount off the on-demand list price that spot means); the list
price is kept beside it.

Calls go to the nearest-region host `cvm.tencentcloudapi.com`, except for the financial
regions (`ap-shanghai-fsi`, `ap-shenzhen-fsi`): financial and other regions are isolated, and
a call whose Region is financial must go to that region's own host,
`cvm.<region>.tencentcloudapi.com` (CVM API reference, "Request Structure" / 请求结构,
"1. Service address", cloud.tencent.com/document/api/213/15690).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.tencent import TENCENT, site_currency
from gpuradar.crawler.signing import signing_credentials, tencent_tc3_headers
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

API_VERSION = "2017-03-12"
CHARGE_TYPES = {"POSTPAID_BY_HOUR": "on_demand", "SPOTPAID": "spot"}

# GPU instance families: the GPU and its memory (the memory tells the variants of one name
# apart: "NVIDIA A100" is sold as 40 and 80 GB). The answer itself names no GPU model: the SDK's
# InstanceTypeQuotaItem has GpuCount and Gpu only (its Externals model has no GPU field), so
# the family decides. Sources: Tencent's GPU instance-type page (cloud.tencent.com/document/
# product/560/19700) for the older families; PNV6 and HCCPNV6 are 8 x H20 96 GB in the TKE
# guide's Tencent GPU table (imroc/tke-guide, content/ai/sglang-deepseek-v4.md, which links
# 560/19700#PNV6 and 1646/81562#HCCPNV6); PNV5b.8XLARGE96 is "1x L20 48GB" in a public TKE
# qGPU walkthrough on the international console. A GPU family not listed here (PNV5, PNV5i,
# HCCPNV5v, HCCPNV5vp, HCCPNV5x, HCCG5v, GC49, GN10S, GI1, ... : no public source at hand
# names their GPU and memory) is reported as uncatalogued with its instance type, never
# guessed.
FAMILIES: dict[str, tuple[str, float]] = {
    "GN6": ("NVIDIA P4", 8), "GN6S": ("NVIDIA P4", 8), "GN7": ("NVIDIA T4", 16),
    "GN7vi": ("NVIDIA T4", 16), "GN7vw": ("NVIDIA T4", 16), "GN8": ("NVIDIA P40", 24),
    "GN10X": ("NVIDIA V100", 32), "GN10Xp": ("NVIDIA V100", 32), "GNV4": ("NVIDIA A10", 24),
    "GNV4v": ("NVIDIA A10", 24), "GT4": ("NVIDIA A100", 40), "PNV4": ("NVIDIA A10", 24),
    "GI3X": ("NVIDIA T4", 16), "HCCPNV4h": ("NVIDIA A100", 80),
    "HCCPNV5": ("NVIDIA H800", 80), "PNV5b": ("NVIDIA L20", 48), "PNV6": ("NVIDIA H20", 96),
    "HCCPNV6": ("NVIDIA H20", 96),
}
# Tencent's common error codes for a caller over its request rate (the SDK's StandardRetryer
# retries RequestLimitExceeded, .UinLimitExceeded and .GlobalRegionUinLimitExceeded).
REQUEST_LIMIT = "RequestLimitExceeded"
# The regions DescribeZoneInstanceConfigInfos answers in ("This API only supports: ..." in
# Tencent Cloud's API reference of the action, updated 2025-11-13); any other region answers
# UnsupportedRegion. Regions DescribeRegions lists beyond these are skipped (counted); the
# option `regions` asks exactly the regions it names.
SUPPORTED_REGIONS = frozenset({
    "ap-bangkok", "ap-beijing", "ap-chengdu", "ap-chongqing", "ap-guangzhou", "ap-hongkong",
    "ap-jakarta", "ap-nanjing", "ap-seoul", "ap-shanghai", "ap-shanghai-fsi", "ap-shenzhen-fsi",
    "ap-singapore", "ap-tokyo", "eu-frankfurt", "na-ashburn", "na-siliconvalley",
    "sa-saopaulo"})
# Tencent's financial regions end so (ap-shanghai-fsi, ap-shenzhen-fsi: CVM "Request
# Structure"); each is reached at its own host.
FINANCIAL_SUFFIX = "-fsi"
# Tencent's common error for an action called in a region it does not serve.
UNSUPPORTED_REGION = "UnsupportedRegion"
# At most this many values in one filter (Tencent's documented limit for CVM filters is 5
# for several actions; staying under it costs a few more calls).
CHUNK = 5


def region_of_zone(zone: str) -> str:
    """'ap-guangzhou-3' -> 'ap-guangzhou'."""
    return zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone


class TencentSpider(GpuRadarSpider):
    facts = TENCENT

    # -- requests --------------------------------------------------------------------------
    def api_url(self, region: str | None) -> str:
        """The nearest-region host, or a financial region's own host (CVM "Request
        Structure": its domain table lists cvm.ap-shanghai-fsi and cvm.ap-shenzhen-fsi, and
        the nearest-region domain serves "only non-financial regions")."""
        if region and region.endswith(FINANCIAL_SUFFIX):
            return self.endpoint("cvm_financial").format(region=region)
        return self.endpoint("cvm")

    def api_request(self, action: str, region: str | None, payload: dict[str, Any],
                    callback, cb_kwargs: dict[str, Any] | None = None) -> scrapy.Request | None:
        url = self.api_url(region)
        body = json.dumps(payload)  # serialised as Tencent's SDK does: the bytes are signed
        headers = self.sign(url, action, region, body)
        if headers is None:
            self.logger.error("tencent: no API key; set TENCENTCLOUD_SECRET_ID and "
                              "TENCENTCLOUD_SECRET_KEY")
            return None
        # The region travels in a header only: a recording must still tell regions apart.
        return scrapy.Request(url, method="POST", body=body, headers=headers,
                              callback=callback, cb_kwargs=cb_kwargs or {}, dont_filter=True,
                              meta={"record_key": f"{action}@{region}",
                                    "tencent_call": (action, region)})

    def sign(self, url: str, action: str, region: str | None, body: str
             ) -> dict[str, str] | None:
        creds = signing_credentials(self, ("secret_id", "secret_key"))
        if creds is None:
            return None
        return tencent_tc3_headers(
            secret_id=creds["secret_id"], secret_key=creds["secret_key"], service="cvm",
            host=urlsplit(url).netloc, action=action, version=API_VERSION, region=region,
            payload=body, timestamp=int(self.clock.now().timestamp()))

    def sign_again(self, request: scrapy.Request) -> scrapy.Request:
        """A retry carries a new X-TC-Timestamp and signature (Tencent refuses signatures
        older than five minutes); called by the retry middleware."""
        call: tuple[str, str | None] | None = request.meta.get("tencent_call")
        headers = self.sign(request.url, *call, request.body.decode()) if call else None
        return request.replace(headers=headers) if headers else request

    async def start(self):
        request: scrapy.Request | None
        regions = self.option("regions")
        if regions:
            for region in regions:
                for request in self.region_requests(str(region)):
                    yield request
            return
        request = self.api_request("DescribeRegions", self.option("home_region", "ap-guangzhou"),
                                   {}, self.parse_regions)
        if request is not None:
            yield request

    def region_requests(self, region: str) -> Iterator[scrapy.Request]:
        families = list(self.option("families") or [])
        chunks = [families[i:i + CHUNK] for i in range(0, len(families), CHUNK)] or [[]]
        for charge in self.option("charge_types", list(CHARGE_TYPES)):
            for chunk in chunks:
                filters = [{"Name": "instance-charge-type", "Values": [charge]}]
                if chunk:
                    filters.append({"Name": "instance-family", "Values": chunk})
                request = self.api_request("DescribeZoneInstanceConfigInfos", region,
                                           {"Filters": filters}, self.parse, {"region": region})
                if request is not None:
                    yield request

    def throttle_pause(self, response: Response) -> float | None:
        """Seconds to wait before asking again after `RequestLimitExceeded` (an HTTP 200
        answer, which Scrapy's retry would not retry): RETRY_BACKOFF_BASE * 2**attempt, at most
        RETRY_BACKOFF_MAX, as the SDK's StandardRetryer waits 2**n s. None for any other
        answer (read by the backoff middleware)."""
        if response.status != 200 or REQUEST_LIMIT.encode() not in response.body:
            return None
        try:
            error = (json.loads(response.text).get("Response") or {}).get("Error") or {}
        except (ValueError, AttributeError):
            return None
        if not str(error.get("Code", "")).startswith(REQUEST_LIMIT):
            return None
        attempt = response.meta.get("retry_times", 0) if response.request else 0
        return min(self.settings.getfloat("RETRY_BACKOFF_BASE", 1.0) * 2 ** attempt,
                   self.settings.getfloat("RETRY_BACKOFF_MAX", 60.0))

    def currency(self) -> str:
        """The account site's currency (the answers never name it; the status keeps a source
        without `site` or `currency` from running)."""
        currency = site_currency(self.options_from(self.settings))
        if currency is None:
            raise ParseError(self.name, "currency", "sources.tencent",
                             "is unknown: set sources.tencent.site (china or intl)")
        return currency

    # -- responses -------------------------------------------------------------------------
    def body(self, response: Response) -> dict[str, Any]:
        """`Response` of an API 3.0 answer; an API error is a ParseError naming its code."""
        data = self.json_body(response)
        body = require(data, "Response", self.name, response.url, dict)
        error = body.get("Error")
        if error:
            raise ParseError(self.name, "Response.Error", response.url,
                             f"says {error.get('Code')}: {error.get('Message')}")
        return body

    def parse_regions(self, response: Response) -> Iterator[scrapy.Request]:
        try:
            body = self.body(response)
        except ParseError as exc:
            self.logger.error("%s", exc)
            return
        regions = require(body, "RegionSet", self.name, response.url, list)
        for i, info in enumerate(regions):
            region = require(info, "Region", self.name, f"RegionSet[{i}]", str)
            if info.get("RegionState", "AVAILABLE") != "AVAILABLE":
                continue
            if region not in SUPPORTED_REGIONS:
                self.count("region_without_config_api")
                self.logger.info("tencent: %s is not among the regions "
                                 "DescribeZoneInstanceConfigInfos supports; skipped", region)
                continue
            yield from self.region_requests(region)

    def parse(self, response: Response, region: str | None = None,
              **kwargs: Any) -> Iterator[PriceItem]:
        try:
            body = self.body(response)
        except ParseError as exc:
            if region is None:  # `gpuradar parse`: say what is wrong with the file
                raise
            if UNSUPPORTED_REGION in str(exc):
                # Documented behaviour, not a failure: the region has nothing to list.
                self.count("region_without_config_api")
                self.warn_once(f"unsupported:{region}", "tencent: %s does not serve "
                               "DescribeZoneInstanceConfigInfos (UnsupportedRegion); no "
                               "offers from it", region)
                return
            # One region failing (not enabled for the account, throttled) must not stop the
            # others; the ERROR marks the crawl partial, so nothing is closed.
            self.logger.error("%s (region %s)", exc, region)
            return
        quotas = require(body, "InstanceTypeQuotaSet", self.name, response.url, list)
        for i, quota in enumerate(quotas):
            item = self.parse_quota(quota, f"InstanceTypeQuotaSet[{i}]", region)
            if item is not None:
                item.url = response.url
                yield item

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        data = json.loads(response.text)
        if "RegionSet" in (data.get("Response") or {}):
            return iter(())
        return self.parse(response)

    def parse_quota(self, quota: dict[str, Any], where: str,
                    region: str | None) -> PriceItem | None:
        src = self.name
        zone = require(quota, "Zone", src, where, str)
        if region is not None and region_of_zone(zone) != region:
            return None  # never attribute a zone to another region
        instance_type = require(quota, "InstanceType", src, where, str)
        charge = require(quota, "InstanceChargeType", src, where, str)
        pricing = CHARGE_TYPES.get(charge)
        if pricing is None:
            return None
        price = require(quota, "Price", src, where, dict)
        family = quota.get("InstanceFamily") or instance_type.split(".")[0]
        count = quota.get("GpuCount") or quota.get("Gpu") or 0
        if not count:
            return None  # not a GPU instance type
        if family not in FAMILIES:
            self.uncatalogued(instance_type, f"instance family {family}"
                              f" ({quota.get('TypeName') or 'no type name'}): its GPU is not "
                              "in gpuradar's Tencent family table")
            return None
        gpu_name, gpu_memory = FAMILIES[family]
        unit = price.get("ChargeUnit", "HOUR")
        if unit != "HOUR":
            raise ParseError(src, "Price.ChargeUnit", where, f"is {unit!r}, expected 'HOUR'")
        list_price = require(price, "UnitPrice", src, f"{where}.Price", (int, float))
        discounted = price.get("UnitPriceDiscount")
        value = discounted if pricing == "spot" and discounted else list_price
        status = quota.get("Status")
        attributes = {k: v for k, v in {
            "family": family, "type_name": quota.get("TypeName"),
            "unit_price_second_step": price.get("UnitPriceSecondStep"),
            "unit_price_third_step": price.get("UnitPriceThirdStep"),
            "unit_price_discount": discounted if pricing == "on_demand" else None,
            "on_demand_unit_price": list_price if pricing == "spot" else None,
            "sold_out_reason": quota.get("SoldOutReason") or None,
            "cpu_type": quota.get("CpuType"),
        }.items() if v not in (None, "")}
        return PriceItem(
            source=src, region=region or region_of_zone(zone), zone=zone,
            instance_type=instance_type, pricing=pricing, gpu=gpu_name, gpu_count=float(count),
            gpu_memory_gb=gpu_memory, vcpus=quota.get("Cpu"),
            memory_gb=quota.get("Memory"), price=value,
            currency=self.currency(),
            available={"SELL": True, "SOLD_OUT": False}.get(status or ""),
            attributes=attributes,
        )
