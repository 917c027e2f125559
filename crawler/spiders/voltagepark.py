"""Voltage Park: the dashboard's public bare-metal locations (`GET https://cloud-api.
voltagepark.com/api/v1/bare-metal/locations`, no key).

`results[]` holds one row per location: the node it rents (`specs_per_node`: GPU model and
count, CPUs, RAM, disk) and, per network, the price per GPU-hour as a decimal string
(`gpu_price_ethernet`, `gpu_price_infiniband`) and the GPUs free now (`gpu_count_*`).

One offer per location and network: an 8-GPU node, instance type `<N>x <gpu model> <network>`,
region the location's id (the API names no place), price the per-GPU price x N. A zero free
count is an unavailable offer, its price still published.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.voltagepark import NETWORKS, VOLTAGEPARK
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require


class VoltageparkSpider(GpuRadarSpider):
    facts = VOLTAGEPARK

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("locations"), headers={"Accept": "application/json"})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        data = self.json_body(response)
        rows = require(data, "results", src, url, list)
        total = require(data, "total_result_count", src, url, int)
        if data.get("has_next") or total != len(rows):
            # Pagination this spider does not follow: reading one page would close the rest.
            raise ParseError(src, "results", url, f"holds {len(rows)} of {total} locations")
        self.expect_rows(len(rows), "results", url)  # an empty answer closes nothing
        items = [item for i, row in enumerate(rows)
                 for item in self.offers(row, f"{url} results[{i}]")]
        yield from items

    def offers(self, row: Any, where: str) -> Iterator[PriceItem]:
        src = self.name
        location = require(row, "id", src, where, str)
        specs = require(row, "specs_per_node", src, where, dict)
        gpu = require(specs, "gpu_model", src, f"{where}.specs_per_node", str)
        count = require(specs, "gpu_count", src, f"{where}.specs_per_node", int)
        for network, (price_field, free_field) in NETWORKS.items():
            raw = require(row, price_field, src, where, (str, int, float))
            try:
                per_gpu = Decimal(str(raw))
            except InvalidOperation:
                raise ParseError(src, price_field, where, f"is {raw!r}, not a number") from None
            if not per_gpu.is_finite() or per_gpu <= 0:
                raise ParseError(src, price_field, where, f"is {raw!r}, not a price")
            free = row.get(free_field)
            free = free if isinstance(free, int) and not isinstance(free, bool) else None
            yield PriceItem(
                source=src, region=location, instance_type=f"{count}x {gpu} {network}",
                pricing="on_demand", gpu=gpu, gpu_count=count, vcpus=specs.get("cpu_count"),
                memory_gb=specs.get("ram_gb"), price=float(round(per_gpu * count, 4)),
                currency="USD", available=None if free is None else free >= count,
                available_count=free, url="https://dashboard.voltagepark.com/",
                attributes={"price_per_gpu": float(per_gpu), "network": network,
                            "cpu": specs.get("cpu_model"),
                            "storage_gb": specs.get("storage_gb")},
            )
