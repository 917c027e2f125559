"""Tencent Cloud CVM: `DescribeZoneInstanceConfigInfos`, signed with TC3-HMAC-SHA256.

One call per region, charge type (`POSTPAID_BY_HOUR` = on-demand, `SPOTPAID` = spot) and
chunk of GPU instance families; each answer lists every (zone, instance type) with its price
and `Status` SELL / SOLD_OUT, which is the availability. Prices are per instance-hour in the
account site's currency (China site CNY, international site USD: option `currency`).

On-demand uses `Price.UnitPrice`, the list price of the first 96 hours; the cheaper second and
third steps (96-360 h, >360 h) are kept as attributes. For spot the price paid is
`UnitPriceDiscount` (the discount off the on-demand list price that spot means); the list
price is kept beside it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from gpuradar.crawler.signing import signing_credentials, tencent_tc3_headers
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require
from scrapy.http import Response
from scrapy.settings import BaseSettings

from gpuradar.core import gpus
from gpuradar.core.interconnect import family
from gpuradar.core.items import PriceItem

API_VERSION = "2017-03-12"
CHARGE_TYPES = {"POSTPAID_BY_HOUR": "on_demand", "SPOTPAID": "spot"}

# GPU instance families (Tencent's GPU instance-type pages) and the memory of their GPU where
# the GPU name alone is ambiguous ("NVIDIA A100" is sold as 40 and 80 GB). A family missing
# here is still crawled with the option `families: []` (all families, GPU ones kept).
FAMILIES: dict[str, float | None] = {
    "GN6": 8, "GN6S": 8, "GN7": 16, "GN7vi": 16, "GN7vw": 16, "GN8": 24, "GN10X": 32,
    "GN10Xp": 32, "GNV4": 24, "GNV4v": 24, "GT4": 40, "PNV4": 24, "PNV5b": None, "GI1": None,
    "GI3X": 16, "HCCPNV4h": 80, "HCCPNV5": 80, "HCCPNV5v": None, "HCCG5v": None,
    "HCCG5vm": None,
}
# At most this many values in one filter (Tencent's documented limit for CVM filters is 5
# for several actions; staying under it costs a few more calls).
CHUNK = 5


def region_of_zone(zone: str) -> str:
    """'ap-guangzhou-3' -> 'ap-guangzhou'."""
    return zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone


# Tencent regions in mainland China, by the city in their code (ap-<city>[-...]).
MAINLAND_CITIES = frozenset({
    "beijing", "shanghai", "guangzhou", "chengdu", "chongqing", "nanjing", "shenzhen",
    "tianjin", "hangzhou", "wuhan", "changsha", "xian", "jinan", "hefei", "fuzhou",
    "shijiazhuang", "zhengzhou", "qingyuan", "shenyang", "taiyuan", "xibei", "huhehaote"})

class TencentSpider(GpuRadarSpider):
    name = "tencent"
    endpoints = {"cvm": "https://cvm.tencentcloudapi.com/"}
    credentials = {"secret_id": "TENCENTCLOUD_SECRET_ID",
                   "secret_key": "TENCENTCLOUD_SECRET_KEY"}
    requires_credentials = True
    default_interval = 3600
    #: What links the GPUs of a multi-GPU offer, by instance family (first match wins):
    #: read by the pipeline and `recommend` (gpuradar.core.interconnect).
    # fmt: off
    interconnect = (
        family(r"^HCC", "", "rdma", "HCC GPU cluster, RDMA network"),
        family(r"^GT4\.", "nvswitch", None, "A100 NVSwitch"),
        family(r"^GN10X", "nvlink", None, "V100 NVLink"),
        family(r"^(PNV|GN\d|GI\d|GNV)", "pcie", None, "PCIe GPUs"),
    )
    # fmt: on
    has_mainland_regions = True

    @classmethod
    def is_mainland(cls, region: str) -> bool:
        """ap-guangzhou, ap-shanghai-fsi, ...: the city is the second part of the code."""
        parts = region.lower().split("-")
        return len(parts) >= 2 and parts[0] == "ap" and parts[1] in MAINLAND_CITIES
    notes = ("CVM DescribeZoneInstanceConfigInfos per region: on-demand and spot price, "
             "SELL/SOLD_OUT per zone; CNY by default (option currency).")

    @classmethod
    def describe_status(cls, settings: BaseSettings, opts: dict[str, Any]
                        ) -> tuple[bool, str]:
        if not (opts.get("secret_id") and opts.get("secret_key")):
            return False, ("needs TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (or "
                           "sources.tencent.secret_id / secret_key): an API key with read "
                           "access to CVM; no key-less source is used")
        currency = str(opts.get("currency", "CNY")).upper()
        regions = opts.get("regions") or "all regions (DescribeRegions)"
        return True, f"API key found; prices in {currency}; {regions}"

    # -- requests --------------------------------------------------------------------------
    def api_request(self, action: str, region: str | None, payload: dict[str, Any],
                    callback, cb_kwargs: dict[str, Any] | None = None) -> scrapy.Request | None:
        creds = signing_credentials(self, ("secret_id", "secret_key"))
        if creds is None:
            self.logger.error("tencent: no API key; set TENCENTCLOUD_SECRET_ID and "
                              "TENCENTCLOUD_SECRET_KEY")
            return None
        url = self.endpoint("cvm")
        body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        headers = tencent_tc3_headers(
            secret_id=creds["secret_id"], secret_key=creds["secret_key"], service="cvm",
            host=urlsplit(url).netloc, action=action, version=API_VERSION, region=region,
            payload=body, timestamp=int(time.time()))
        # The region travels in a header only: a recording must still tell regions apart.
        return scrapy.Request(url, method="POST", body=body, headers=headers,
                              callback=callback, cb_kwargs=cb_kwargs or {}, dont_filter=True,
                              meta={"record_key": f"{action}@{region}"})

    async def start(self):
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
        families = list(self.option("families", list(FAMILIES)))
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
            if info.get("RegionState", "AVAILABLE") == "AVAILABLE":
                yield from self.region_requests(region)

    def parse(self, response: Response, region: str | None = None,
              **kwargs: Any) -> Iterator[PriceItem]:
        try:
            body = self.body(response)
        except ParseError as exc:
            if region is None:  # `gpuradar parse`: say what is wrong with the file
                raise
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
        desc = (quota.get("Externals") or {}).get("GPUDesc") or ""
        parsed = gpus.parse_count_and_name(desc)
        count = quota.get("GpuCount") or (parsed[0] if parsed else quota.get("Gpu") or 0)
        if not count:
            return None  # not a GPU instance type
        gpu_name = parsed[1] if parsed else (quota.get("TypeName") or family)
        unit = price.get("ChargeUnit", "HOUR")
        if unit != "HOUR":
            raise ParseError(src, "Price.ChargeUnit", where, f"is {unit!r}, expected 'HOUR'")
        list_price = require(price, "UnitPrice", src, f"{where}.Price", (int, float))
        discounted = price.get("UnitPriceDiscount")
        value = discounted if pricing == "spot" and discounted else list_price
        status = quota.get("Status")
        attributes = {k: v for k, v in {
            "family": family, "type_name": quota.get("TypeName"), "gpu_desc": desc or None,
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
            gpu_memory_gb=FAMILIES.get(family), vcpus=quota.get("Cpu"),
            memory_gb=quota.get("Memory"), price=value,
            currency=str(self.option("currency", "CNY")).upper(),
            available={"SELL": True, "SOLD_OUT": False}.get(status or ""),
            attributes=attributes,
        )
