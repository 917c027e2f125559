"""Hyperbolic: the on-demand rental options (`GET https://api.hyperbolic.ai/v2/alpha/on-demand/
rental-options`), which answer without a key.

The answer is a bare list, one entry per option: GPU type and form factor, GPU count, region,
machine type (virtual machine or bare metal), network (`connectionType`, `ethernetVariant`),
the machine's CPUs, RAM and disk (`nodes[]`), and `costPerHourCents`, the price of the whole
option per hour in US cents. `totalAvailable` is there only for some options: where it is
missing availability is unknown, never zero.

The answer also carries Hyperbolic's own cost (`providerCostPerHourCents`): it is not a price a
user can pay, and is never read, stored or logged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.hyperbolic import HYPERBOLIC
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require


class HyperbolicSpider(GpuRadarSpider):
    facts = HYPERBOLIC

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("rental_options"),
                             headers={"Accept": "application/json"})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        options = self.json_body(response)
        if not isinstance(options, list):
            raise ParseError(src, "<list of options>", url,
                             f"is {type(options).__name__}, expected a list")
        self.expect_rows(len(options), "<list of options>", url)  # empty: closes nothing
        items = [self.offer(option, f"{url} [{i}]") for i, option in enumerate(options)]
        yield from items

    def offer(self, option: Any, where: str) -> PriceItem:
        src = self.name
        cents = require(option, "costPerHourCents", src, where, (int, float))
        if isinstance(cents, bool) or cents <= 0:
            raise ParseError(src, "costPerHourCents", where, f"is {cents!r}, not a price")
        count = require(option, "gpuCount", src, where, int)
        if isinstance(count, bool) or count < 1:
            raise ParseError(src, "gpuCount", where, f"is {count!r}, expected 1 or more")
        gpu_type = require(option, "gpuType", src, where, str)
        form = require(option, "gpuFormFactor", src, where, str)
        region = require(option, "region", src, where, str)
        machine = require(option, "machineType", src, where, str)
        network = require(option, "connectionType", src, where, str)
        variant = option.get("ethernetVariant")
        nodes = option.get("nodes") or []
        node = nodes[0] if len(nodes) == 1 and isinstance(nodes[0], dict) else {}
        free = option.get("totalAvailable")
        free = free if isinstance(free, int) and not isinstance(free, bool) else None
        link = f"{network} {variant}" if variant else network
        # The options have no id: the instance type is their words, spaced so that a narrow
        # table can wrap it ("1x h100 sxm5 virtual machine ethernet normal").
        return PriceItem(
            source=src, region=region,
            instance_type=f"{count}x {gpu_type} {form} {machine.replace('-', ' ')} {link}",
            pricing="on_demand", gpu=f"{gpu_type} {form}", gpu_count=count,
            vcpus=node.get("vcpuCount") or node.get("cpuCount"),
            memory_gb=node.get("ramGb"), price=round(cents / 100, 4), currency="USD",
            available=None if free is None else free > 0, available_count=free,
            url="https://app.hyperbolic.ai/",
            attributes={"machine_type": machine, "network": link,
                        "enabled": option.get("enabled"), "cpu": node.get("cpuModel"),
                        "storage_gb": node.get("storageGb")},
        )
