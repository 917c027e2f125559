"""Huawei Cloud ECS: GPU and Ascend flavors with per-AZ sell status, priced through BSS.

All calls are AK/SK signed (APIG "SDK-HMAC-SHA256", crawler/signing.py) with the headers
Huawei's own SDK adds: X-Domain-Id on the global services (IAM, BSS: Huawei's signing guide
requires it for AK/SK calls to them) and X-Project-Id on ECS.

0. IAM `GET /v3/auth/domains` (KeystoneListAuthDomains): the account's domain id, unless the
   option `domain_id` (or HUAWEICLOUD_SDK_DOMAIN_ID) gives it -- as the SDK does.
1. IAM `GET /v3/auth/projects` (KeystoneListAuthProjects): the project id of each region
   (skipped when the option `projects: {region: project_id}` gives them).
2. ECS `GET /v2.1/{project_id}/os-availability-zone` (NovaListAvailabilityZones, ECS API
   reference ecs_03_1801): the region's AZs, so that an AZ a flavor does not list can be
   named (step 3). If it fails, the flavors are still listed; the crawl is partial.
3. ECS `GET /v1/{project_id}/cloudservers/flavors` (ListFlavors) per region, paged by
   `limit` / `marker` (both in huaweicloudsdkecs 3.1's ListFlavorsRequest: "marker: start
   after this flavor_id"; a page that repeats, i.e. a server ignoring the marker, ends the
   paging and is reported: the crawl is partial), keeping flavors
   whose `ecs:performancetype` (`hws:performancetype` on flavors registered early, as
   huaweicloudsdkecs's FlavorExtraSpec says) is gpu or ascend, and sold by the hour:
   `cond:operation:charge` lists the charging modes a flavor is sold under (period:
   subscription, demand: on-demand; absent: both), so a subscription-only flavor gets no
   on-demand offer (counted `subscription_only`). GPU model and count come from `info:gpus` /
   `info:asic_accelerators` (JSON text), else `pci_passthrough:alias` ("nvidia-v100:1").
   Availability per AZ comes from `cond:operation:az` ("az(status),..."); an AZ it does not
   list -- every AZ, when it lists none -- takes the region-wide `cond:operation:status`,
   "normal" when absent (normal / promotion / obt: on sale, sellout / obt_sellout: sold out,
   abandon: not offered), as huaweicloudsdkecs's FlavorExtraSpec describes both fields. A
   flavor listing no AZ is one region-wide offer (zone ""); one listing some AZs is an offer
   per AZ, the unlisted AZs of the region included. The spot sell status per AZ
   (`cond:spot_block:operation:az`, or `cond:spot:operation:az`) is kept as an attribute:
   Huawei publishes no spot price API.
4. BSS `POST /v2/bills/ratings/on-demand-resources`, at most 100 flavors per call, one hour of
   `<flavor>.linux`: the list price is `official_website_amount` (`amount` is the account's
   discounted price). A flavor BSS does not know fails its whole batch (CBC.99006006 /
   CBC.6006), so a failed batch is split in halves and retried: one bad flavor costs itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.huawei import HUAWEI, Site, site_of
from gpuradar.crawler.signing import REPLAY_PLACEHOLDER, huawei_sign, signing_credentials
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

BATCH = 100
PAGE = 1000
GPU_TYPES = {"gpu", "ascend"}
# `cond:operation:charge`'s value for pay-per-use (huaweicloudsdkecs FlavorExtraSpec: "period"
# subscription, "demand" on-demand; not set: both).
ON_DEMAND_CHARGE = "demand"
ON_SALE = {"normal": True, "promotion": True, "obt": True, "sellout": False,
           "obt_sellout": False}
# Errors that mean "this product is unknown to BSS": split the batch and retry.
UNKNOWN_PRODUCT = {"CBC.99006006", "CBC.6006"}
_AZ = re.compile(r"\s*([^(),\s]+)\(([^)]*)\)\s*")
_ALIAS = re.compile(r"^\s*([^:,]+):(\d+)")


def az_status(text: str | None) -> dict[str, str]:
    """'cn-east-2a(normal),cn-east-2b(sellout)' -> {'cn-east-2a': 'normal', ...}."""
    return {m.group(1): m.group(2) for m in _AZ.finditer(text or "")}


def flavor_gpu(specs: dict[str, Any]) -> tuple[str, float, float | None] | None:
    """(GPU name, count, memory GB) of a flavor's extra specs, or None."""
    for key in ("info:gpus", "info:asic_accelerators"):
        raw = specs.get(key)
        if not raw:
            continue
        try:
            cards = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            continue
        if isinstance(cards, list) and cards and isinstance(cards[0], dict):
            card = cards[0]
            memory = card.get("memory_mb")
            count = sum(float(c.get("count") or 0) for c in cards)
            if card.get("name") and count > 0:
                return str(card["name"]), count, round(memory / 1024, 1) if memory else None
    match = _ALIAS.match(specs.get("pci_passthrough:alias") or "")
    if match and int(match.group(2)) > 0:
        return match.group(1), float(match.group(2)), None
    return None


class HuaweiSpider(GpuRadarSpider):
    facts = HUAWEI

    # -- requests --------------------------------------------------------------------------
    def signed(self, method: str, url: str, callback, body: dict | None = None,
               headers: dict[str, str] | None = None, **kwargs: Any) -> scrapy.Request | None:
        creds = signing_credentials(self, ("access_key", "secret_key"))
        if creds is None:
            self.logger.error("huawei: no AK/SK; set HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK")
            return None
        data = json.dumps(body, sort_keys=True).encode() if body is not None else b""
        base = {"Content-Type": "application/json", **(headers or {})}
        meta = {**kwargs.pop("meta", {}), "huawei_headers": base}
        return scrapy.Request(url, method=method, body=data, callback=callback,
                              headers=self.sign(creds, method, url, base, data),
                              dont_filter=True, meta=meta, **kwargs)

    @staticmethod
    def sign(creds: dict[str, str], method: str, url: str, headers: dict[str, str],
             body: bytes) -> dict[str, str]:
        return huawei_sign(access_key=creds["access_key"], secret_key=creds["secret_key"],
                           method=method, url=url, headers=headers, body=body)

    def sign_again(self, request: scrapy.Request) -> scrapy.Request:
        """A retry carries a new X-Sdk-Date and signature (called by the retry middleware)."""
        creds = signing_credentials(self, ("access_key", "secret_key"))
        base = request.meta.get("huawei_headers")
        if creds is None or base is None:
            return request
        return request.replace(headers=self.sign(creds, request.method, request.url, base,
                                                 request.body))

    def global_headers(self) -> dict[str, str]:
        return {"X-Domain-Id": self.domain_id} if self.domain_id else {}

    @property
    def site(self) -> Site:
        """The account's site: which IAM and BSS hosts it is served by."""
        return site_of({"site": self.option("site")})

    async def start(self):
        self.domain_id = str(self.option("domain_id") or "")
        if not self.domain_id and self.settings.get("GPURADAR_REPLAY_DIR"):
            self.domain_id = REPLAY_PLACEHOLDER  # a recording answers without asking IAM
        request: scrapy.Request | None
        if self.domain_id:
            for request in self.after_domain():
                yield request
            return
        request = self.signed("GET", self.endpoint(self.site.iam_domains), self.parse_domains)
        if request is not None:
            yield request

    def parse_domains(self, response: Response) -> Iterator[scrapy.Request]:
        domains = require(self.json_body(response), "domains", self.name, response.url, list)
        if not domains:
            self.logger.error("huawei: IAM lists no domain for this AK/SK; set "
                              "sources.huawei.domain_id (HUAWEICLOUD_SDK_DOMAIN_ID), the "
                              "account id BSS price calls need")
            return
        self.domain_id = require(domains[0], "id", self.name, "domains[0]", str)
        yield from self.after_domain()

    def after_domain(self) -> Iterator[scrapy.Request]:
        projects = self.option("projects")
        if projects:
            for region, project_id in dict(projects).items():
                request = self.zones_request(str(region), str(project_id))
                if request is not None:
                    yield request
            return
        request = self.signed("GET", self.endpoint(self.site.iam), self.parse_projects,
                              headers=self.global_headers())
        if request is not None:
            yield request

    def zones_request(self, region: str, project_id: str) -> scrapy.Request | None:
        """The region's AZs (NovaListAvailabilityZones); its answer, or its failure, leads to
        the region's flavors."""
        url = self.endpoint("ecs_zones").format(region=region, project_id=project_id)
        return self.signed("GET", url, self.parse_zones, headers={"X-Project-Id": project_id},
                           cb_kwargs={"region": region, "project_id": project_id},
                           errback=self.zones_failed)

    def flavors_request(self, region: str, project_id: str, marker: str | None = None,
                        region_zones: frozenset[str] | None = None) -> scrapy.Request | None:
        url = self.endpoint("ecs").format(region=region, project_id=project_id)
        # `limit` and `marker` are the paging fields of huaweicloudsdkecs's ListFlavorsRequest
        # (limit: page size, default 1000; marker: the flavor_id to start after).
        query = {"limit": PAGE, **({"marker": marker} if marker else {})}
        return self.signed("GET", f"{url}?{urlencode(query)}", self.parse_flavors,
                           headers={"X-Project-Id": project_id},
                           cb_kwargs={"region": region, "project_id": project_id,
                                      "region_zones": region_zones})

    def rating_request(self, region: str, project_id: str,
                       flavors: list[dict[str, Any]]) -> scrapy.Request | None:
        body = {"project_id": project_id, "inquiry_precision": 1, "product_infos": [
            {"id": str(i), "cloud_service_type": "hws.service.type.ec2",
             "resource_type": "hws.resource.type.vm", "resource_spec": f"{f['id']}.linux",
             "region": region, "usage_factor": "Duration", "usage_value": 1,
             "usage_measure_id": 4, "subscription_num": 1} for i, f in enumerate(flavors)]}
        url = self.endpoint(self.site.bss)
        return self.signed("POST", url, self.parse_rating, body=body,
                           headers=self.global_headers(),
                           cb_kwargs={"region": region, "project_id": project_id,
                                      "flavors": flavors},
                           meta={"handle_httpstatus_list": [400]})

    # -- responses -------------------------------------------------------------------------

    def parse_projects(self, response: Response) -> Iterator[scrapy.Request]:
        data = self.json_body(response)
        wanted = {str(r) for r in self.option("regions") or []}
        for i, project in enumerate(require(data, "projects", self.name, response.url, list)):
            name = require(project, "name", self.name, f"projects[{i}]", str)
            project_id = require(project, "id", self.name, f"projects[{i}]", str)
            # Sub-projects are "<region>_<name>"; "MOS" and the like are not regions.
            if "_" in name or "-" not in name or project.get("enabled") is False:
                continue
            if wanted and name not in wanted:
                continue
            request = self.zones_request(name, project_id)
            if request is not None:
                yield request

    def parse_zones(self, response: Response, region: str, project_id: str,
                    **kwargs: Any) -> Iterator[scrapy.Request]:
        """`availabilityZoneInfo[].zoneName` with `zoneState.available` (ECS API reference,
        NovaListAvailabilityZones; huaweicloudsdkecs NovaAvailabilityZone): the AZs an
        unlisted flavor status can apply to. An AZ marked unavailable is left out."""
        data = self.json_body(response)
        zones = set()
        for i, zone in enumerate(require(data, "availabilityZoneInfo", self.name, response.url,
                                         list)):
            name = require(zone, "zoneName", self.name, f"availabilityZoneInfo[{i}]", str)
            state = zone.get("zoneState")
            if isinstance(state, dict) and state.get("available") is False:
                continue
            zones.add(name)
        request = self.flavors_request(region, project_id, region_zones=frozenset(zones))
        if request is not None:
            yield request

    def zones_failed(self, failure: Any) -> Iterator[scrapy.Request]:
        """Without the AZ list the flavors are still listed, but an AZ a flavor does not name
        cannot be offered: said as an error, so the crawl is partial and closes nothing."""
        request = failure.request
        region, project_id = request.cb_kwargs["region"], request.cb_kwargs["project_id"]
        self.logger.error("huawei: the AZ list of %s failed (%s); flavors that list only some "
                          "AZs are offered in those AZs alone", region, failure.value)
        flavors = self.flavors_request(region, project_id)
        if flavors is not None:
            yield flavors

    def parse_flavors(self, response: Response, region: str, project_id: str,
                      region_zones: frozenset[str] | None = None,
                      **kwargs: Any) -> Iterator[scrapy.Request]:
        flavors = require(self.json_body(response), "flavors", self.name, response.url, list)
        ids = tuple(str(f.get("id")) for f in flavors if isinstance(f, dict))
        pages = self.__dict__.setdefault("_pages", {}).setdefault(region, set())
        if ids and ids in pages:
            self.logger.error("huawei: ListFlavors in %s answered the same page again (the "
                              "marker was ignored); paging stopped", region)
            return
        pages.add(ids)
        if len(flavors) >= PAGE:
            last = require(flavors[-1], "id", self.name, "flavors[-1]", str)
            request = self.flavors_request(region, project_id, marker=last,
                                           region_zones=region_zones)
            if request is not None:
                yield request
        wanted = []
        for i, flavor in enumerate(flavors):
            info = self.flavor_info(flavor, f"flavors[{i}]", region_zones)
            if info is not None and (info["zones"] or info["region_status"] is not None):
                wanted.append(info)
        for start in range(0, len(wanted), BATCH):
            request = self.rating_request(region, project_id, wanted[start:start + BATCH])
            if request is not None:
                yield request

    def flavor_info(self, flavor: dict[str, Any], where: str,
                    region_zones: frozenset[str] | None = None) -> dict[str, Any] | None:
        """What the offers of one flavor need, or None when it is not a GPU flavor.
        `region_zones`: the region's AZs, when known (else only the AZs a flavor names)."""
        flavor_id = require(flavor, "id", self.name, where, str)
        specs = require(flavor, "os_extra_specs", self.name, where, dict)
        kind = specs.get("ecs:performancetype") or specs.get("hws:performancetype")
        if kind not in GPU_TYPES:
            return None
        charge = specs.get("cond:operation:charge")
        if charge and ON_DEMAND_CHARGE not in {c.strip() for c in str(charge).split(",")}:
            self.count("subscription_only")  # no on-demand sale: no on-demand offer
            return None
        gpu = flavor_gpu(specs)
        if gpu is None:
            self.count("gpu_not_described")
            return None
        # huaweicloudsdkecs FlavorExtraSpec: `cond:operation:status` is the region-level status
        # ("normal" when absent); an AZ missing from `cond:operation:az` takes it.
        status = ON_SALE.get(specs.get("cond:operation:status") or "normal")
        listed = az_status(specs.get("cond:operation:az"))
        zones = {az: ON_SALE[s] for az, s in listed.items() if s in ON_SALE}
        region_status = None
        if not listed:
            region_status = status  # every AZ alike: one region-wide offer
        elif status is not None:
            zones.update({az: status for az in region_zones or () if az not in listed})
        spot = az_status(specs.get("cond:spot_block:operation:az")
                         or specs.get("cond:spot:operation:az"))
        vcpus = flavor.get("vcpus")
        ram = flavor.get("ram")
        return {"id": flavor_id, "gpu": gpu[0], "count": gpu[1], "memory": gpu[2],
                "kind": kind, "zones": zones, "region_status": region_status,
                "spot": spot, "vcpus": float(vcpus) if vcpus not in (None, "") else None,
                "memory_gb": round(ram / 1024, 1) if isinstance(ram, int | float) else None,
                "cpu": specs.get("info:cpu:name")}

    def parse_rating(self, response: Response, region: str, project_id: str,
                     flavors: list[dict[str, Any]], **kwargs: Any) -> Iterator[Any]:
        data = self.json_body(response)
        if response.status == 400:
            # A handled answer, not a failed request: keep it out of the crawl's error count.
            stats = self.crawler.stats
            key = "downloader/response_status_count/400"
            if stats.get_value(key, 0) > 0:
                stats.inc_value(key, -1)
                if not stats.get_value(key):
                    stats.get_stats().pop(key, None)  # the collector's own dict
            stats.inc_value("gpuradar/bss_rejected_batches")
            code = data.get("error_code") if isinstance(data, dict) else None
            if code not in UNKNOWN_PRODUCT:
                self.logger.error("huawei: BSS rating in %s failed: %s %s", region, code,
                                  data.get("error_msg") if isinstance(data, dict) else "")
                return
            if len(flavors) == 1:
                stats.inc_value("gpuradar/skipped/not_priced_by_bss")
                self.logger.warning("huawei: BSS has no price for flavor %s in %s (%s)",
                                    flavors[0]["id"], region, code)
                return
            half = len(flavors) // 2
            for part in (flavors[:half], flavors[half:]):
                request = self.rating_request(region, project_id, part)
                if request is not None:
                    yield request
            return
        # Empty: CNY on the China site's BSS, USD on the international API (intl, EU).
        currency = data.get("currency") or self.site.empty_currency
        results = require(data, "product_rating_results", self.name, response.url, list)
        by_id = {str(require(r, "id", self.name, f"product_rating_results[{i}]")): r
                 for i, r in enumerate(results)}
        for i, flavor in enumerate(flavors):
            result = by_id.get(str(i))
            if result is None:
                continue
            where = f"product_rating_results[id={i}]"
            # The SDK models the amount as a decimal: a JSON number or a numeric string.
            amount = require(result, "official_website_amount", self.name, where,
                             (int, float, str))
            try:
                price = float(amount)
            except ValueError:
                raise ParseError(self.name, "official_website_amount", where,
                                 f"is {amount!r}, not a number") from None
            yield from self.offers(flavor, region, price, currency, result, response.url)

    def offers(self, flavor: dict[str, Any], region: str, price: float | None, currency: str,
               result: dict[str, Any], url: str) -> Iterator[PriceItem]:
        zones = flavor["zones"] or {"": flavor["region_status"]}
        for zone, available in sorted(zones.items()):
            attributes = {k: v for k, v in {
                "performance_type": flavor["kind"], "cpu": flavor["cpu"],
                "account_price": result.get("amount"),
                "spot_status": flavor["spot"].get(zone) if zone else flavor["spot"] or None,
            }.items() if v not in (None, "", {})}
            yield PriceItem(
                source=self.name, region=region, zone=zone, instance_type=flavor["id"],
                pricing="on_demand", gpu=flavor["gpu"], gpu_count=flavor["count"],
                gpu_memory_gb=flavor["memory"], vcpus=flavor["vcpus"],
                memory_gb=flavor["memory_gb"], price=price, currency=currency,
                available=available, url=urlsplit(url)._replace(query="").geturl(),
                attributes=attributes)

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """Flavors alone: the offers without a price (so `parse` shows them as dropped
        no_price); a BSS answer: checked, nothing to show without its flavors."""
        data = self.json_body(response)
        if isinstance(data, dict) and "error_code" in data:
            raise ParseError(self.name, "error_code", response.url,
                             f"says {data['error_code']}: {data.get('error_msg')}")
        if isinstance(data, dict) and "flavors" in data:
            for i, flavor in enumerate(data["flavors"]):
                info = self.flavor_info(flavor, f"flavors[{i}]")
                if info is not None:
                    # The region is not in a flavor; its self link names the regional host.
                    links = " ".join(str(link.get("href")) for link in flavor.get("links") or [])
                    host = re.search(r"ecs\.([a-z0-9-]+)\.myhuaweicloud", links)
                    region = self.option("region") or (host.group(1) if host else "?")
                    yield from self.offers(info, region, None, "CNY", {}, response.url)
            return
        if isinstance(data, dict) and ("projects" in data or "domains" in data
                                       or "availabilityZoneInfo" in data):
            return
        require(data, "product_rating_results", self.name, response.url, list)
