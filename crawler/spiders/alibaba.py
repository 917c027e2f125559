"""Alibaba Cloud ECS: GPU instance prices and, with an AccessKey, availability per zone.

Without credentials: the price file the ECS price calculator loads from Alibaba's CDN,
`https://g.alicdn.com/aliyun/ecs-price-info[-intl]/<version>/price/download/instancePrice.json`
(China site `ecs-price-info`: CNY; international site `ecs-price-info-intl`: USD; option
`site`, default china). Keys are `region::instance_type::network::os::io`, prices are strings;
the spider reads vpc / linux / optimized hourly prices of the GPU families in FAMILIES. The
`<version>` changes: pin it with the option `version`, otherwise it is looked for in the
ECS pricing page of the site (China: https://www.aliyun.com/price/ecs/ecs-pricing/zh, the page
public code reads it from, with a pattern that needs no trailing slash;
`discover_with_browser: true` renders the page with Chromium first). Discovery is
EXPERIMENTAL; when it finds none, the last version of that site's path seen in public
material is used and a warning says so.

With an AccessKey (`access_key_id` / `access_key_secret`, signed RPC calls):
`DescribeInstanceTypes` (GPU model, count and memory, authoritative), `DescribeRegions` (the
regions the account can use; the option `regions` names them instead), then per region
`DescribeAvailableResource` (WithStock / WithoutStock per zone, on-demand and spot),
`DescribePrice` (hourly list price of the instance: the `instanceType` line of
`DetailInfos`, since the total `OriginalPrice` includes the system disk) and
`DescribeSpotPriceHistory` (latest spot price per zone, every page: `Offset` from the answer's
`NextOffset`). The CDN file is not read then. Each
attempt of a call is signed afresh: Alibaba refuses a SignatureNonce it has seen.

Throttling: ECS limits each API per region and account; a throttled call answers a
`Throttling*` code (HTTP 400 or 403), and may be called again from the next minute on (ECS
"API throttling": https://www.alibabacloud.com/help/en/elastic-compute-service/latest/
api-throttling). Such an answer is retried after that minute turns (`throttle_pause`, read by
the backoff middleware), and the calls to one regional endpoint keep one second apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import scrapy
from scrapy.http import Response

from gpuradar.core import gpus
from gpuradar.core.items import PriceItem
from gpuradar.core.providers.alibaba import ADVICE_SOURCE, ALIBABA
from gpuradar.core.spot import band_bounds
from gpuradar.crawler.signing import alibaba_rpc_params, signing_credentials
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

# The last price-file version of each site's path seen in public material: the China path
# (ecs-price-info) 2.0.211, the international one (ecs-price-info-intl) 2.0.421.
FALLBACK_VERSIONS = {"china": "2.0.211", "intl": "2.0.421"}
_VERSION = re.compile(r"ecs-price-info(-intl)?/(\d+(?:\.\d+)+)")

# GPU instance family -> (GPU as Alibaba's GPUSpec names it, GB per GPU, GPUs per bare-metal
# instance or None). Alibaba's GPU-accelerated instance family pages.
FAMILIES: dict[str, tuple[str, float | None, int | None]] = {
    "gn5": ("NVIDIA P100", 16, None), "gn5i": ("NVIDIA P4", 8, None),
    "gn6v": ("NVIDIA V100", 16, None), "gn6e": ("NVIDIA V100", 32, None),
    "gn6i": ("NVIDIA T4", 16, None), "gn7": ("NVIDIA A100", 40, None),
    "gn7e": ("NVIDIA A100", 80, None), "gn7i": ("NVIDIA A10", 24, None),
    "gn8is": ("NVIDIA L20", 48, None),
    # gn8v: Alibaba's family page names no model, but gives 96 GB of HBM3 per GPU at 4 TB/s,
    # 900 GB/s NVLink and FP8 on 4th-generation Xeon hosts: NVIDIA's H20 (datasheet: 96 GB
    # HBM3, 4.0 TB/s, 900 GB/s NVLink), as public users of gn8v call it ("ecs.gn8v-2x.8xlarge
    # (2xH20)", "GPU TEE (vLLM + H20) ... ecs.gn8v-tee.4xlarge").
    "gn8v": ("NVIDIA H20", 96, None),
    "ebmgn6v": ("NVIDIA V100", 16, 8), "ebmgn6e": ("NVIDIA V100", 32, 8),
    "ebmgn6i": ("NVIDIA T4", 16, 4), "ebmgn7": ("NVIDIA A100", 40, 8),
    "ebmgn7e": ("NVIDIA A100", 80, 8), "ebmgn7ex": ("NVIDIA A100", 80, 8),
    "ebmgn7i": ("NVIDIA A10", 24, 4), "ebmgn8is": ("NVIDIA L20", 48, 8),
    "ebmgn8v": ("NVIDIA H20", 96, 8),
}
# Sizes whose GPU count the name does not say ("cXg1" = X vCPUs per GPU; "-Nx" = N GPUs).
SIZES: dict[str, int] = {
    "ecs.gn5-c8g1.14xlarge": 8, "ecs.gn8is.2xlarge": 1, "ecs.gn8is.4xlarge": 1,
    "ecs.gn8is.8xlarge": 2, "ecs.gn8is.16xlarge": 4,
    # gn8v's one-GPU sizes (Alibaba's gn8v table: "96 GB x 1")
    "ecs.gn8v.4xlarge": 1, "ecs.gn8v.6xlarge": 1,
}
_TYPE = re.compile(r"^ecs\.([a-z0-9]+)(?:-([a-z0-9]+))?\.(\d*)(x?large)$")
AVAILABLE = {"WithStock": True, "ClosedWithStock": True, "WithoutStock": False,
             "ClosedWithoutStock": False}


def size_vcpus(multiplier: str, size: str) -> int:
    """vCPUs of an ECS size: large 2, xlarge 4, Nxlarge 4N."""
    if size == "large":
        return 2
    return 4 * (int(multiplier) if multiplier else 1)


def gpu_spec(instance_type: str) -> tuple[str, float, float | None, int] | None:
    """(GPU, count, GB per GPU, vCPUs) of a GPU instance type by its name; None otherwise."""
    m = _TYPE.match(instance_type)
    if not m or m.group(1) not in FAMILIES:
        return None
    family, variant, multiplier, size = m.groups()
    gpu, memory, bare_metal = FAMILIES[family]
    vcpus = size_vcpus(multiplier, size)
    count: float | None = SIZES.get(instance_type) or bare_metal
    if count is None and variant:
        if re.fullmatch(r"\d+x", variant):
            count = int(variant[:-1])
        elif c := re.fullmatch(r"c(\d+)g1", variant):
            count = vcpus / int(c.group(1))
    if not count or count != int(count):
        return None
    return gpu, float(count), memory, vcpus


def api_gpu(spec: dict[str, Any]) -> str:
    """The GPU of a DescribeInstanceTypes entry: its `GPUSpec` where the catalog knows that
    name, else its family's GPU from FAMILIES (gn8v: the API's name is not a model name),
    else the raw `GPUSpec`, which the pipeline keeps as an unknown GPU."""
    raw = spec.get("GPUSpec") or ""
    if gpus.lookup(raw, spec.get("GPUMemorySize") or None) is not None:
        return raw
    family = str(spec.get("InstanceTypeFamily") or "").removeprefix("ecs.")
    return FAMILIES[family][0] if family in FAMILIES else raw


#: DescribeSpotAdviceRequest.instance_types (alibabacloud-ecs20140526): "You can specify up
#: to 10 instance types."
ADVICE_BATCH = 10


@dataclass
class SpotAdvice:
    """What DescribeSpotAdvice said in one region: (instance type, zone) -> the signal's
    attributes; `failed`, why a call of it was refused (then its types' signal is unknown)."""

    signals: dict[tuple[str, str], dict[str, Any]] = dataclass_field(default_factory=dict)
    failed: str | None = None

    def attributes(self, instance_type: str, zone: str) -> dict[str, Any]:
        """A spot offer's signal attributes (gpuradar.core.spot), or why it has none."""
        found = self.signals.get((instance_type, zone))
        if found is not None:
            return dict(found)
        return {"interruption_unknown": self.failed or "not in DescribeSpotAdvice's answer "
                "for this type and zone"}



def read_spot_advice(data: dict[str, Any], advice: SpotAdvice, day: str,
                     count: Any) -> None:
    """One DescribeSpotAdvice answer into `advice`: per zone (`AvailableSpotZones.
    AvailableSpotZone[].ZoneId`) and type (`AvailableSpotResources.AvailableSpotResource[]`:
    `InstanceType`, `InterruptRateDesc` "0-3%" / "3-5%" / "5-10%" / "10-100%",
    `InterruptionRate` in %, `AverageSpotDiscount` the 30-day average spot price as a % of
    the pay-as-you-go price, 1-100), as the SDK's DescribeSpotAdviceResponseBody has them.
    A band or number that cannot be read is counted (`count`) and left out: that offer's
    signal is unknown, never a default."""
    zones = (data.get("AvailableSpotZones") or {}).get("AvailableSpotZone")
    if not isinstance(zones, list):
        count("unreadable_spot_advice")
        return
    for z in zones:
        zone = z.get("ZoneId") if isinstance(z, dict) else None
        resources = ((z.get("AvailableSpotResources") or {}).get("AvailableSpotResource")
                     if isinstance(z, dict) else None)
        if not isinstance(zone, str) or not isinstance(resources, list):
            count("unreadable_spot_advice")
            continue
        for r in resources:
            instance_type = r.get("InstanceType") if isinstance(r, dict) else None
            if not isinstance(instance_type, str):
                count("unreadable_spot_advice")
                continue
            band = r.get("InterruptRateDesc")
            if band_bounds(band) is None:
                count("unreadable_interruption_band")
                advice.signals[(instance_type, zone)] = {
                    "interruption_unknown": f"DescribeSpotAdvice band {str(band)[:20]!r} "
                                            "not understood"}
                continue
            signal: dict[str, Any] = {
                "interruption": band, "interruption_source": ADVICE_SOURCE,
                "interruption_as_of": day, "interruption_window": "30 days"}
            rate = r.get("InterruptionRate")
            if _percent(rate, 0):
                signal["interruption_rate"] = float(rate)
            elif rate is not None:
                count("unreadable_interruption_rate")
            discount = r.get("AverageSpotDiscount")
            if _percent(discount, 1):
                signal["avg_spot_price_pct"] = discount
            elif discount is not None:
                count("unreadable_spot_discount")
            advice.signals[(instance_type, zone)] = signal


def _percent(value: Any, low: float) -> bool:
    """A number from `low` to 100 (a percentage the API documents)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and low <= value <= 100)


class AlibabaSpider(GpuRadarSpider):
    facts = ALIBABA

    @property  # an option decides it, where the base class has a plain attribute
    def renders_pages(self) -> bool:  # type: ignore[override]
        """The price file's version is discovered with a browser only when asked to."""
        return bool(self.option("discover_with_browser"))

    @property
    def site(self) -> str:
        return "intl" if self.option("site") == "intl" else "china"

    async def start(self):
        if self.option("access_key_id") and self.option("access_key_secret"):
            for request in self.instance_types_request(None):
                yield request
            return
        version = self.option("version")
        if version:
            yield self.price_file_request(str(version), "pinned")
            return
        # Optional: when the page cannot be reached, the fallback version is used.
        meta: dict[str, Any] = {"optional": True}
        if self.option("discover_with_browser"):
            meta["playwright"] = True
        yield scrapy.Request(self.endpoint(f"discovery_{self.site}"), callback=self.parse_discovery,
                             errback=self.discovery_failed, meta=meta, dont_filter=True)

    # -- key-less: the CDN price file --------------------------------------------------------
    def price_file_request(self, version: str, how: str) -> scrapy.Request:
        url = self.endpoint(f"price_file_{self.site}").format(version=version)
        return scrapy.Request(url, callback=self.parse, cb_kwargs={"version_source": how})

    def parse_discovery(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        want_intl = self.site == "intl"
        found = sorted({tuple(int(p) for p in m.group(2).split(".")) for m in
                        _VERSION.finditer(response.text) if bool(m.group(1)) == want_intl})
        if found:
            version = ".".join(str(p) for p in found[-1])
            self.logger.info("alibaba: price file version %s found on %s", version, response.url)
            yield self.price_file_request(version, "discovered")
            return
        yield from self.fallback(f"no price-file version on {response.url}")

    def discovery_failed(self, failure) -> Iterator[scrapy.Request]:
        yield from self.fallback(f"pricing page unreachable ({failure.getErrorMessage()})")

    def fallback(self, why: str) -> Iterator[scrapy.Request]:
        version = FALLBACK_VERSIONS[self.site]
        self.logger.warning("alibaba: %s; using price-file version %s (pin the current one "
                            "with sources.alibaba.version)", why, version)
        yield self.price_file_request(version, "fallback")

    def parse(self, response: Response, version_source: str = "file",
              **kwargs: Any) -> Iterator[PriceItem]:
        data = self.json_body(response)
        info = require(data, "pricingInfo", self.name, response.url, dict)
        currency = data.get("currency") or ("USD" if self.site == "intl" else "CNY")
        version = data.get("version")
        for key, prices in info.items():
            parts = key.split("::")
            if len(parts) != 5:
                raise ParseError(self.name, "pricingInfo key", response.url,
                                 f"{key!r} is not region::type::network::os::io")
            region, instance_type, network, os_type, io = parts
            if (network, os_type, io) != ("vpc", "linux", "optimized"):
                continue
            spec = gpu_spec(instance_type)
            if spec is None:
                if instance_type.startswith(("ecs.gn", "ecs.ebmgn")):
                    self.uncatalogued(instance_type, "GPU family or size not in gpuradar's "
                                      "Alibaba family table")
                continue
            hours = require(prices, "hours", self.name, key, list)
            if not hours:
                continue
            price = require(hours[0], "price", self.name, f"{key}.hours[0]", str)
            gpu, count, memory, vcpus = spec
            yield PriceItem(
                source=self.name, region=region, instance_type=instance_type,
                pricing="on_demand", gpu=gpu, gpu_count=count, gpu_memory_gb=memory,
                vcpus=vcpus, price=float(price), currency=currency, url=response.url,
                attributes={"price_file_version": version, "version_source": version_source,
                            "site": data.get("site")})

    # -- with an AccessKey: the ECS API ------------------------------------------------------
    def rpc(self, action: str, endpoint_region: str, params: dict[str, Any], callback,
            **cb_kwargs: Any) -> scrapy.Request | None:
        url = self.rpc_url(action, endpoint_region, params)
        if url is None:
            return None
        return scrapy.Request(url, method="POST", callback=callback,
                              cb_kwargs={"action": action, **cb_kwargs},
                              meta={"handle_httpstatus_list": [400, 403, 404],
                                    "alibaba_rpc": (action, endpoint_region, params)},
                              dont_filter=True)

    def rpc_url(self, action: str, endpoint_region: str, params: dict[str, Any]) -> str | None:
        """The signed URL of one call, with a fresh SignatureNonce and Timestamp."""
        creds = signing_credentials(self, ("access_key_id", "access_key_secret"))
        if creds is None:
            return None
        query = alibaba_rpc_params(action, {k: str(v) for k, v in params.items()},
                                   creds["access_key_id"], creds["access_key_secret"],
                                   now=self.clock.now())
        return self.endpoint("api").format(region=endpoint_region) + "?" + urlencode(query)

    def sign_again(self, request: scrapy.Request) -> scrapy.Request:
        """A retry with a new nonce (called by the retry middleware): Alibaba answers
        SignatureNonceUsed to a nonce it has already seen."""
        call = request.meta.get("alibaba_rpc")
        url = self.rpc_url(*call) if call else None
        return request.replace(url=url) if url else request

    def throttle_pause(self, response: Response) -> float | None:
        """Seconds to wait before retrying a throttled API answer; None for any other answer.
        Alibaba answers `Throttling`, `Throttling.User`, ... with HTTP 400 or 403 (429 on some
        products; Scrapy would retry none of the first two), and "an API operation throttled
        at minute T can be called again as of minute T+1" (ECS "API throttling"): the pause
        lasts until a second past the next minute, at most RETRY_BACKOFF_MAX."""
        if response.status not in (400, 403, 429) or b"Throttling" not in response.body:
            return None
        try:
            code = json.loads(response.text).get("Code")
        except (ValueError, AttributeError):
            return None
        if not str(code).startswith("Throttling"):
            return None
        pause = 60.0 - self.clock.now().timestamp() % 60.0 + 1.0
        return min(pause, self.settings.getfloat("RETRY_BACKOFF_MAX", 60.0))

    def api_body(self, response: Response, action: str) -> dict[str, Any] | None:
        try:
            data = json.loads(response.text)
        except ValueError:
            data = None
        if response.status >= 400 or not isinstance(data, dict) or "Code" in data:
            code = data.get("Code") if isinstance(data, dict) else response.status
            message = data.get("Message") if isinstance(data, dict) else ""
            self.logger.error("alibaba: %s failed: %s %s", action, code, message)
            return None
        return data

    def instance_types_request(self, token: str | None) -> Iterator[scrapy.Request]:
        # 100 a page: the API's maximum since 2023-11-15 (it was 1600 before).
        params: dict[str, Any] = {"MaxResults": 100}
        if token:
            params["NextToken"] = token
        request = self.rpc("DescribeInstanceTypes", self.option("home_region", "cn-hangzhou"),
                           params, self.parse_instance_types, specs={})
        if request is not None:
            yield request

    def parse_instance_types(self, response: Response, action: str,
                             specs: dict[str, dict[str, Any]]) -> Iterator[scrapy.Request]:
        data = self.api_body(response, action)
        if data is None:
            return
        types = require(require(data, "InstanceTypes", self.name, action, dict),
                        "InstanceType", self.name, action, list)
        for i, t in enumerate(types):
            type_id = require(t, "InstanceTypeId", self.name, f"InstanceType[{i}]", str)
            if (t.get("GPUAmount") or 0) > 0:
                specs[type_id] = t
        request: scrapy.Request | None
        token = data.get("NextToken")
        if token:
            for request in self.instance_types_request(token):
                request.cb_kwargs["specs"] = specs
                yield request
            return
        regions = self.option("regions")
        if regions:
            for region in regions:
                yield from self.region_requests(str(region), specs)
            return
        request = self.rpc("DescribeRegions", self.option("home_region", "cn-hangzhou"), {},
                           self.parse_regions, specs=specs)
        if request is not None:
            yield request

    def parse_regions(self, response: Response, action: str,
                      specs: dict[str, dict[str, Any]]) -> Iterator[scrapy.Request]:
        """The regions this account can use (DescribeRegions `Regions.Region[].RegionId`), each
        asked for availability and prices: a new region needs no release of gpuradar."""
        data = self.api_body(response, action)
        if data is None:
            return
        regions = require(require(data, "Regions", self.name, action, dict), "Region",
                          self.name, action, list)
        for i, r in enumerate(regions):
            yield from self.region_requests(
                require(r, "RegionId", self.name, f"{action} Region[{i}]", str), specs)

    def region_requests(self, region: str, specs: dict[str, dict[str, Any]]
                        ) -> Iterator[scrapy.Request]:
        for spot in (False, True):
            params = {"RegionId": region, "DestinationResource": "InstanceType",
                      "IoOptimized": "optimized", "InstanceChargeType": "PostPaid"}
            if spot:
                params["SpotStrategy"] = "SpotAsPriceGo"
            request = self.rpc("DescribeAvailableResource", region, params,
                               self.parse_available, region=region, spot=spot, specs=specs)
            if request is not None:
                yield request

    def parse_available(self, response: Response, action: str, region: str, spot: bool,
                        specs: dict[str, dict[str, Any]]) -> Iterator[scrapy.Request]:
        data = self.api_body(response, action)
        if data is None:
            return
        zones: dict[str, dict[str, bool | None]] = {}  # instance type -> zone -> available
        for z in require(require(data, "AvailableZones", self.name, action, dict),
                         "AvailableZone", self.name, action, list):
            zone = require(z, "ZoneId", self.name, "AvailableZone", str)
            for res in (z.get("AvailableResources") or {}).get("AvailableResource", []):
                for s in (res.get("SupportedResources") or {}).get("SupportedResource", []):
                    value = s.get("Value")
                    if value in specs:
                        available = AVAILABLE.get(s.get("StatusCategory") or "")
                        if s.get("Status") == "SoldOut":
                            available = False
                        zones.setdefault(value, {})[zone] = available
        if spot:
            # The interruption signal first (DescribeSpotAdvice, at most 10 types a call),
            # then each type's spot price history with it.
            types = sorted(zones)
            chunks = [types[i:i + ADVICE_BATCH] for i in range(0, len(types), ADVICE_BATCH)]
            yield from self.spot_advice(region, chunks, zones, specs, SpotAdvice())
            return
        # One call per instance type and region is the finest batch the API allows: the
        # InstanceType of DescribePrice and of DescribeSpotPriceHistory names one type
        # (alibabacloud-ecs20140526 DescribePriceRequest / DescribeSpotPriceHistoryRequest;
        # DescribePrice's InstanceTypeList is for elasticity assurances only, its Amount is a
        # count of one type); DescribeSpotPriceHistory without ZoneId answers every zone.
        for instance_type, by_zone in sorted(zones.items()):
            request = self.rpc("DescribePrice", region, {
                "RegionId": region, "ResourceType": "instance", "InstanceType": instance_type,
                "PriceUnit": "Hour", "SystemDisk.Category": "cloud_essd"},
                self.parse_price, region=region, spec=specs[instance_type], zones=by_zone)
            if request is not None:
                yield request

    # -- the interruption signal: DescribeSpotAdvice -----------------------------------------
    def spot_advice(self, region: str, chunks: list[list[str]],
                    zones: dict[str, dict[str, bool | None]], specs: dict[str, dict[str, Any]],
                    advice: SpotAdvice) -> Iterator[scrapy.Request]:
        """The next batch's DescribeSpotAdvice call (`InstanceTypes.N`, as its API reference
        names the list), or, once every batch has answered, the spot price histories."""
        if chunks:
            params: dict[str, Any] = {"RegionId": region}
            params.update({f"InstanceTypes.{i}": t for i, t in enumerate(chunks[0], 1)})
            request = self.rpc("DescribeSpotAdvice", region, params, self.parse_spot_advice,
                               region=region, chunks=chunks, zones=zones, specs=specs,
                               advice=advice)
            if request is not None:
                yield request
            return
        start = (self.clock.now() - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for instance_type, by_zone in sorted(zones.items()):
            request = self.spot_history_request(region, {
                "RegionId": region, "InstanceType": instance_type, "NetworkType": "vpc",
                "OSType": "linux", "StartTime": start}, specs[instance_type], by_zone, [],
                advice)
            if request is not None:
                yield request

    def parse_spot_advice(self, response: Response, action: str, region: str,
                          chunks: list[list[str]], zones: dict[str, dict[str, bool | None]],
                          specs: dict[str, dict[str, Any]], advice: SpotAdvice
                          ) -> Iterator[scrapy.Request]:
        """Keep one DescribeSpotAdvice answer's signal per (instance type, zone); then the
        next batch. A refused or unreadable answer costs the signal only, never a price: its
        offers say why their signal is unknown (one WARNING line, the crawl goes on)."""
        try:
            data = json.loads(response.text)
        except ValueError:
            data = None
        if response.status >= 400 or not isinstance(data, dict) or "Code" in data:
            code = data.get("Code") if isinstance(data, dict) else f"HTTP {response.status}"
            self.logger.warning("alibaba: %s in %s failed (%s): the spot offers there carry "
                                "no interruption signal", action, region, code)
            advice.failed = f"DescribeSpotAdvice failed ({code})"
        else:
            read_spot_advice(data, advice, self.answer_day(response), self.count)
        yield from self.spot_advice(region, chunks[1:], zones, specs, advice)

    def api_item(self, spec: dict[str, Any], region: str, zone: str, pricing: str,
                 price: float, currency: str, available: bool | None,
                 attributes: dict[str, Any]) -> PriceItem:
        return PriceItem(
            source=self.name, region=region, zone=zone, instance_type=spec["InstanceTypeId"],
            pricing=pricing, gpu=api_gpu(spec), gpu_count=float(spec["GPUAmount"]),
            gpu_memory_gb=spec.get("GPUMemorySize") or None, vcpus=spec.get("CpuCoreCount"),
            memory_gb=spec.get("MemorySize"), price=price, currency=currency,
            available=available, attributes=attributes)

    def parse_price(self, response: Response, action: str, region: str,
                    spec: dict[str, Any], zones: dict[str, bool | None]) -> Iterator[PriceItem]:
        data = self.api_body(response, action)
        if data is None:
            return
        price = require(require(data, "PriceInfo", self.name, action, dict), "Price",
                        self.name, action, dict)
        where = f"{action} {spec['InstanceTypeId']} PriceInfo.Price.DetailInfos"
        lines = require(require(price, "DetailInfos", self.name, where, dict), "DetailInfo",
                        self.name, where, list)
        # The total OriginalPrice includes the system disk: the instance's own line is the
        # price of the offer.
        instance = next((d for d in lines if isinstance(d, dict)
                         and d.get("Resource") == "instanceType"), None)
        if instance is None:
            raise ParseError(self.name, "DetailInfo[Resource=instanceType]", where, "is missing")
        original = float(require(instance, "OriginalPrice", self.name, where,
                                 (int, float, str)))
        trade = instance.get("TradePrice")
        for zone, available in sorted(zones.items()):
            yield self.api_item(spec, region, zone, "on_demand", original,
                                price.get("Currency") or "CNY", available,
                                {"trade_price": float(trade) if trade is not None else None,
                                 "total_with_system_disk": price.get("OriginalPrice")})

    def spot_history_request(self, region: str, params: dict[str, Any], spec: dict[str, Any],
                             zones: dict[str, bool | None], points: list[dict[str, Any]],
                             advice: SpotAdvice | None = None) -> scrapy.Request | None:
        return self.rpc("DescribeSpotPriceHistory", region, params, self.parse_spot,
                        region=region, spec=spec, zones=zones, query=params, points=points,
                        advice=advice)

    def parse_spot(self, response: Response, action: str, region: str,
                   spec: dict[str, Any], zones: dict[str, bool | None],
                   query: dict[str, Any] | None = None,
                   points: list[dict[str, Any]] | None = None,
                   advice: SpotAdvice | None = None) -> Iterator[Any]:
        """One page of a type's spot price history; the next page (`Offset` = the answer's
        `NextOffset`, as the SDK documents it) is asked before any offer is made, so the
        newest point of a zone is found whatever page it is on."""
        data = self.api_body(response, action)
        if data is None:
            return
        page = require(require(data, "SpotPrices", self.name, action, dict),
                       "SpotPriceType", self.name, action, list)
        points = [*(points or []), *page]
        next_offset = data.get("NextOffset")
        offset = int((query or {}).get("Offset") or 0)
        if next_offset and query is not None and page:
            if int(next_offset) <= offset:
                raise ParseError(self.name, "NextOffset", f"{action} {spec['InstanceTypeId']}",
                                 f"is {next_offset}, not past the page asked ({offset})")
            request = self.spot_history_request(region, {**query, "Offset": int(next_offset)},
                                                spec, zones, points, advice)
            if request is not None:
                yield request
            return
        latest: dict[str, dict[str, Any]] = {}
        for p in points:
            zone = p.get("ZoneId", "")
            if zone not in latest or p.get("Timestamp", "") >= latest[zone].get("Timestamp", ""):
                latest[zone] = p
        for zone, point in sorted(latest.items()):
            if point.get("NetworkType", "vpc") != "vpc" or zone not in zones:
                continue
            attributes = {"origin_price": point.get("OriginPrice"),
                          "observed": point.get("Timestamp")}
            if advice is not None:
                attributes.update(advice.attributes(spec["InstanceTypeId"], zone))
            yield self.api_item(spec, region, zone, "spot", point["SpotPrice"],
                                data.get("Currency") or "CNY", zones[zone], attributes)

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """CDN price files; the pricing page (version discovery: no offers, the version it
        names is logged); API answers are checked for shape (they need each other)."""
        if response.body.lstrip()[:1] not in (b"{", b"["):
            list(self.parse_discovery(response))  # logs the version found, or the fallback
            return iter(())
        data = json.loads(response.text)
        if isinstance(data, dict) and "pricingInfo" in data:
            return self.parse(response)
        if isinstance(data, dict) and "Code" in data:
            raise ParseError(self.name, "Code", response.url,
                             f"says {data['Code']}: {data.get('Message')}")
        for field in ("InstanceTypes", "AvailableZones", "PriceInfo", "SpotPrices", "Regions",
                      "AvailableSpotZones"):
            if isinstance(data, dict) and field in data:
                return iter(())
        raise ParseError(self.name, "pricingInfo", response.url, "is missing")
