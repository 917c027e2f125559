"""Latitude.sh: the `plansData` that https://www.latitude.sh/pricing embeds (an escaped JSON
copy in the page's flight data).

`plansData.servers` is a list of bare-metal plans: `attributes.slug`, `specs.gpu` (`count`,
`type`, `vram_per_gpu`; empty for CPU plans), and `regions`, each with `stock_level` (high,
medium, low, unavailable), the sites that have stock (`locations.in_stock`) and `pricing`
per currency (`hour`, `month`, `year`; null or 0 where the plan is not sold). One on-demand
offer per GPU plan and region at its USD hourly price (the BRL figure is the same server's
price in reais, not another offer); available unless the stock level is `unavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.latitude import LATITUDE, STOCK
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

MARKER = '"plansData":'


class LatitudeSpider(GpuRadarSpider):
    facts = LATITUDE

    async def start(self):
        yield scrapy.Request(self.endpoint("pricing"), callback=self.parse)

    def plans(self, response: Response) -> list[Any]:
        text = response.text.replace('\\"', '"')
        at = text.find(MARKER)
        if at < 0:
            raise ParseError(self.name, "plansData", response.url, "is missing")
        try:
            data, _ = json.JSONDecoder().raw_decode(text, at + len(MARKER))
        except ValueError as exc:
            raise ParseError(self.name, "plansData", response.url,
                             f"is not JSON ({exc})") from None
        return require(data, "servers", self.name, response.url, list)

    def parse(self, response: Response) -> Iterator[PriceItem]:
        rows, items = 0, []
        for plan in self.plans(response):
            attributes = require(plan, "attributes", self.name, response.url, dict)
            slug = require(attributes, "slug", self.name, response.url, str)
            where = f"{response.url} plan {slug!r}"
            specs = require(attributes, "specs", self.name, where, dict)
            gpu = specs.get("gpu") or {}
            if not gpu:
                self.count("latitude_cpu_plan")
                continue
            for region in require(attributes, "regions", self.name, where, list):
                rows += 1
                items += self.offer(slug, specs, gpu, region, where, response.url)
        self.expect_rows(rows, "GPU plan regions", response.url)
        yield from items  # all or nothing: a page read halfway is not stored

    def offer(self, slug: str, specs: dict[str, Any], gpu: dict[str, Any],
              region: dict[str, Any], where: str, url: str) -> list[PriceItem]:
        name = require(region, "name", self.name, where, str)
        where = f"{where} region {name!r}"
        usd = require(require(region, "pricing", self.name, where, dict), "USD", self.name,
                      where, dict)
        hour = usd.get("hour")
        if not hour:  # null or 0: the plan is not sold there
            self.count("latitude_unpriced_region")
            return []
        if not isinstance(hour, int | float):
            raise ParseError(self.name, "pricing.USD.hour", where, f"is {hour!r}, not a number")
        stock = region.get("stock_level")
        cpu = specs.get("cpu") or {}
        cores = cpu.get("cores", 0) * cpu.get("count", 0)  # physical cores, not vCPUs
        return [PriceItem(
            source=self.name, region=name, instance_type=slug, pricing="on_demand",
            gpu=require(gpu, "type", self.name, where, str),
            gpu_count=require(gpu, "count", self.name, where, int),
            gpu_memory_gb=gpu.get("vram_per_gpu"),
            memory_gb=(specs.get("memory") or {}).get("total"), price=float(hour),
            currency="USD", available=STOCK.get(stock) if stock else None, url=url,
            attributes={"stock_level": stock, **({"cpu_cores": cores} if cores else {}),
                        "in_stock": (region.get("locations") or {}).get("in_stock", []),
                        **({"interconnect_note": gpu["interconnect"]}
                           if gpu.get("interconnect") else {})})]
