"""RunPod: the public GraphQL API (`POST https://api.runpod.io/graphql`, no key needed).

`gpuTypes` gives each GPU type's secure-cloud and community-cloud price per GPU-hour (0: not
offered in that cloud) and its largest pod; `lowestPrice(input: {gpuCount: N, secureCloud:
...})` gives the stock for a pod of N GPUs: `stockStatus` High / Medium / Low, or null when
none is free, plus `maxUnreservedGpuCount`.

Places: the Secure Cloud runs in RunPod's data centers (`dataCenters`: id such as EU-RO-1 or
US-TX-3, `location`), which say per GPU type whether an N-GPU pod can be had there
(`gpuAvailability(input: {gpuCount: N})`: `available`, `stockStatus`). A secure offer is one
per data center that lists the GPU type: region = the data center, available as it says. The
Community Cloud is hosts of many owners at one price per GPU type and no place in the answer:
its offers are in region `global` (a price that holds everywhere, gpuradar.core.units), with
the cloud-wide stock of `lowestPrice`. `secure` / `community` is the attribute `cloud`, and
part of the instance type (`<N>x <GPU type id> (<cloud>)`), never a region. An answer without
`dataCenters` (a saved catalog) gives secure offers in region `global` too.

Batching: one request per GPU count, asking for every GPU type in both clouds at once through
two GraphQL aliases (`secure_<N>`, `community_<N>`); the aliases also make each saved answer
self-describing for `gpuradar parse`. The count-1 answer says how far to go.

No spot offers: RunPod ended spot ("interruptible") pods on 2026-09-11 and its remaining
`*SpotPrice` fields equal the on-demand prices, so they are not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.runpod import RUNPOD
from gpuradar.core.units import EVERYWHERE
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

CLOUDS = ("secure", "community")
_ALIAS = re.compile(r"^(secure|community)_(\d+)$")
_TYPE_FIELDS = ("id displayName manufacturer memoryInGb secureCloud communityCloud securePrice "
                "communityPrice maxGpuCount maxGpuCountSecureCloud maxGpuCountCommunityCloud")
_STOCK_FIELDS = ("stockStatus maxUnreservedGpuCount availableGpuCounts minVcpu minMemory "
                 "uninterruptablePrice")
_DC_FIELDS = "id name location listed"
_AVAILABILITY_FIELDS = "gpuTypeId available stockStatus"


def stock_query(count: int) -> str:
    """Every GPU type in both clouds, with the stock of an N-GPU pod, and each data center's
    stock of N-GPU pods: one request."""
    parts = [
        f"{cloud}_{count}: gpuTypes {{ {_TYPE_FIELDS} lowestPrice(input: {{gpuCount: {count}, "
        f"secureCloud: {'true' if cloud == 'secure' else 'false'}}}) {{ {_STOCK_FIELDS} }} }}"
        for cloud in CLOUDS
    ]
    parts.append(f"datacenters_{count}: dataCenters {{ {_DC_FIELDS} "
                 f"gpuAvailability(input: {{gpuCount: {count}}}) {{ {_AVAILABILITY_FIELDS} }} }}")
    return "query GpuStock { " + " ".join(parts) + " }"


class RunpodSpider(GpuRadarSpider):
    facts = RUNPOD

    def request(self, count: int) -> scrapy.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.option("api_key")
        if key:  # a header, never the URL: URLs end up in logs and recordings
            headers["Authorization"] = f"Bearer {key}"
        body = json.dumps({"query": stock_query(count)}, sort_keys=True)
        return scrapy.Request(self.endpoint("graphql"), method="POST", headers=headers,
                              body=body, callback=self.parse, cb_kwargs={"count": count})

    async def start(self):
        yield self.request(1)

    def parse(self, response: Response, count: int | None = None,
              **kwargs: Any) -> Iterator[PriceItem | scrapy.Request]:
        data = self.load(response)
        yield from self.offers(data, response.url)
        if count == 1:
            for n in range(2, self.max_count(data, response.url) + 1):
                yield self.request(n)

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """A saved answer: the aliases say which cloud and GPU count it holds; a plain
        `gpuTypes` catalog gives 1-GPU prices of both clouds, availability unknown."""
        yield from self.offers(self.load(response), response.url)

    def load(self, response: Response) -> dict[str, Any]:
        doc = self.json_body(response)
        if isinstance(doc, dict) and doc.get("errors"):
            first = doc["errors"][0]
            message = first.get("message") if isinstance(first, dict) else first
            raise ParseError(self.name, "errors", response.url, f"reported: {message}")
        return require(doc, "data", self.name, response.url, dict)

    def lists(self, data: dict[str, Any], url: str) -> Iterator[tuple[str, int, list, str, bool]]:
        """(cloud, GPU count, gpuTypes list, where, stock asked) for each GPU-type list in
        the answer: the aliases of the spider's own query, or a plain `gpuTypes` catalog.
        `dataCenters` / `datacenters_<N>` are read by data_centers(); other top-level data
        (`myself`, ...) is not needed and ignored."""
        found_any = False
        for key, types in data.items():
            found = _ALIAS.match(key)
            if found:
                clouds, count, stock = [found.group(1)], int(found.group(2)), True
            elif key == "gpuTypes":
                # A catalog answer: 1-GPU prices of both clouds. Whatever `lowestPrice` it
                # carries was asked for a cloud and count we do not know: not read.
                clouds, count, stock = list(CLOUDS), 1, False
            else:
                continue  # datacenters_<N> / dataCenters: read by data_centers()
            found_any = True
            if not isinstance(types, list):
                raise ParseError(self.name, f"data.{key}", url,
                                 f"is {type(types).__name__}, expected list")
            if not types:  # an empty answer must not close every offer
                raise ParseError(self.name, f"data.{key}", url, "is empty: no GPU types")
            for cloud in clouds:
                yield cloud, count, types, f"{url} data.{key}", stock
        if not found_any:
            raise ParseError(self.name, "data.gpuTypes", url, "is missing")

    def max_count(self, data: dict[str, Any], url: str) -> int:
        """The largest pod any GPU type offers in a cloud where it has a price."""
        best = 1
        for cloud, _, types, where, _ in self.lists(data, url):
            for i, gpu in enumerate(types):
                if self.gpu_price(gpu, cloud, f"{where}[{i}]"):
                    best = max(best, self.cloud_max(gpu, cloud) or 1)
        return min(best, int(self.option("max_gpus", 16)))

    def gpu_price(self, gpu: Any, cloud: str, where: str) -> float | None:
        """Per-GPU price in that cloud; None when RunPod does not offer the type there."""
        price = require(gpu, f"{cloud}Price", self.name, where, (int, float, type(None)))
        if not price or gpu.get(f"{cloud}Cloud") is False:
            return None
        return float(price)

    @staticmethod
    def cloud_max(gpu: dict[str, Any], cloud: str) -> int | None:
        return gpu.get(f"maxGpuCount{cloud.capitalize()}Cloud") or gpu.get("maxGpuCount")

    def data_centers(self, data: dict[str, Any], count: int, url: str
                     ) -> dict[str, list[tuple[str, dict[str, Any]]]] | None:
        """GPU type id -> [(data center id, its availability entry)] for N-GPU pods; None
        when the answer has no data centers for this count."""
        key = f"datacenters_{count}" if f"datacenters_{count}" in data else (
            "dataCenters" if count == 1 and "dataCenters" in data else None)
        if key is None:
            return None
        centers = data[key]
        if not isinstance(centers, list):
            raise ParseError(self.name, f"data.{key}", url,
                             f"is {type(centers).__name__}, expected list")
        where: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for i, dc in enumerate(centers):
            dwhere = f"{url} data.{key}[{i}]"
            dc_id = require(dc, "id", self.name, dwhere, str)
            if dc.get("listed") is False:  # not open to users
                continue
            for entry in require(dc, "gpuAvailability", self.name, dwhere, list) or []:
                gpu_id = require(entry, "gpuTypeId", self.name, f"{dwhere}.gpuAvailability",
                                 str)
                where.setdefault(gpu_id, []).append((dc_id, {**entry, "location":
                                                             dc.get("location")}))
        return where

    def offers(self, data: dict[str, Any], url: str) -> Iterator[PriceItem]:
        src = self.name
        for cloud, count, types, where, stock_asked in self.lists(data, url):
            centers = self.data_centers(data, count, url) if cloud == "secure" else None
            for i, gpu in enumerate(types):
                gwhere = f"{where}[{i}]"
                gpu_id = require(gpu, "id", src, gwhere, str)
                price = self.gpu_price(gpu, cloud, gwhere)
                if price is None:
                    continue
                largest = self.cloud_max(gpu, cloud)
                if largest is not None and count > largest:
                    continue
                attributes: dict[str, Any] = {"price_per_gpu": price, "cloud": cloud,
                                              "display_name": gpu.get("displayName")}
                available, vcpus, memory = None, None, None
                if stock_asked and "lowestPrice" in gpu:
                    stock = gpu["lowestPrice"] or {}
                    if not isinstance(stock, dict):
                        raise ParseError(src, "lowestPrice", gwhere,
                                         f"is {type(stock).__name__}, expected object")
                    level = stock.get("stockStatus")
                    available = level is not None
                    vcpus, memory = stock.get("minVcpu"), stock.get("minMemory")
                    attributes.update(stock=level,
                                      max_unreserved_gpus=stock.get("maxUnreservedGpuCount"),
                                      available_gpu_counts=stock.get("availableGpuCounts"))
                offer = PriceItem(
                    source=src, region=EVERYWHERE, instance_type=f"{count}x {gpu_id} ({cloud})",
                    pricing="on_demand", gpu=gpu_id, gpu_count=count,
                    gpu_memory_gb=gpu.get("memoryInGb") or None, vcpus=vcpus or None,
                    memory_gb=memory or None, price=round(price * count, 4), currency="USD",
                    available=available, url="https://www.runpod.io/pricing",
                    attributes=attributes,
                )
                if centers is None:
                    yield offer
                    continue
                # Secure Cloud: one offer per data center that lists the type (none listing
                # it: not offered in any data center now, no offer).
                for dc_id, entry in sorted(centers.get(gpu_id, []), key=lambda x: x[0]):
                    dc_available = entry.get("available")
                    yield replace(offer, region=dc_id, available=dc_available
                                  if isinstance(dc_available, bool) else None,
                                  attributes={**attributes, "stock": entry.get("stockStatus"),
                                              **({"location": entry["location"]}
                                                 if entry.get("location") else {})})
