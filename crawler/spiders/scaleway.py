"""Scaleway: `GET /instance/v1/zones/{zone}/products/servers` (the server-type catalog with
`hourly_price` in EUR per instance, `gpu` count and `gpu_info`) and
`GET .../products/servers/availability` (each type's stock), both public, per zone.

One on-demand offer per GPU server type and zone; the catalog is paged (`per_page` 100) and
the next page is asked for only after a full one. A type with a MIG profile is a fraction of
a GPU whose count the catalog does not state: it is reported as uncatalogued, never divided.
When the stock answer fails, the offers are still stored with availability unknown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.scaleway import SCALEWAY, STOCK, ZONES
from gpuradar.crawler.spiders.base import GpuRadarSpider, require

PER_PAGE = 100
# GPU memory in GiB, as the type names say it ("H100-1-80G": 80 GiB, the catalog's 80 GB
# card); the instance's RAM in GB.
GIB = 1024 ** 3


class ScalewaySpider(GpuRadarSpider):
    facts = SCALEWAY

    async def start(self):
        for zone in self.option("zones") or ZONES:
            yield self.servers_request(zone, 1, {})

    def servers_request(self, zone: str, page: int, types: dict[str, Any]) -> scrapy.Request:
        url = self.endpoint("servers").format(zone=zone)
        return scrapy.Request(f"{url}?per_page={PER_PAGE}&page={page}",
                              callback=self.parse_servers,
                              cb_kwargs={"zone": zone, "page": page, "types": types})

    def parse_servers(self, response: Response, zone: str, page: int, types: dict[str, Any]
                      ) -> Iterator[scrapy.Request]:
        servers = require(self.json_body(response), "servers", self.name, response.url, dict)
        types.update(servers)
        if len(servers) >= PER_PAGE:
            yield self.servers_request(zone, page + 1, types)
            return
        url = self.endpoint("availability").format(zone=zone)
        yield scrapy.Request(f"{url}?per_page={PER_PAGE}", callback=self.parse_availability,
                             errback=self.availability_failed,
                             cb_kwargs={"zone": zone, "types": types, "url": response.url})

    def parse_availability(self, response: Response, zone: str, types: dict[str, Any],
                           url: str) -> Iterator[PriceItem]:
        stock = require(self.json_body(response), "servers", self.name, response.url, dict)
        yield from self.offers(types, zone, url, stock)

    def availability_failed(self, failure: Any) -> Iterator[PriceItem]:
        kwargs = failure.request.cb_kwargs
        self.logger.error("scaleway: stock of %s unavailable (%s); availability unknown",
                          kwargs["zone"], failure.getErrorMessage())
        yield from self.offers(kwargs["types"], kwargs["zone"], kwargs["url"], None)

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """A saved catalog page (zone from its URL when it has one, else unknown). A saved
        stock answer (`.../servers/availability`) lists no prices: it yields nothing."""
        if response.url.split("?")[0].endswith("/servers/availability"):
            return
        zone = response.url.split("/zones/")[1].split("/")[0] if "/zones/" in response.url \
            else "unknown"
        servers = require(self.json_body(response), "servers", self.name, response.url, dict)
        yield from self.offers(servers, zone, response.url, None)

    def offers(self, types: dict[str, Any], zone: str, url: str,
               stock: dict[str, Any] | None) -> Iterator[PriceItem]:
        rows, items = 0, []
        for name, spec in types.items():
            where = f"{url} servers[{name!r}]"
            count = require(spec, "gpu", self.name, where, (int, type(None)))
            if not count:
                self.count("cpu_only")
                continue
            rows += 1
            info = require(spec, "gpu_info", self.name, where, dict)
            if spec.get("mig_profile") is not None:
                self.uncatalogued(name, f"MIG profile {spec['mig_profile']!r}: GPU share unknown")
                continue
            price = require(spec, "hourly_price", self.name, where, (int, float))
            memory = info.get("gpu_memory")
            level = ((stock or {}).get(name) or {}).get("availability")
            items.append(PriceItem(
                source=self.name, region=zone.rsplit("-", 1)[0], zone=zone, instance_type=name,
                pricing="on_demand", gpu=require(info, "gpu_name", self.name, where, str),
                gpu_count=count, price=float(price), currency="EUR",
                gpu_memory_gb=round(memory / GIB, 1) if memory else None,
                vcpus=spec.get("ncpus"),
                memory_gb=round(spec["ram"] / 1e9, 1) if spec.get("ram") else None,
                available=STOCK.get(level) if level else None, url=url,
                attributes={"stock": level} if level else {}))
        self.expect_rows(rows, "servers", url)
        yield from items  # all or nothing: an answer read halfway is not stored

