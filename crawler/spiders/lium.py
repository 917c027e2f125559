"""Lium: the public node feed (`GET https://lium.io/api/public/v1/nodes`, no key).

The feed is the whole book in one answer: `nodes[]`, one per machine, with its GPU model and
count, its price per GPU-hour, the GPUs free now (`available_gpu_count`), the fewest GPUs it
rents out (`min_rentable_gpu_count`), its tier and its place (country, region, city).

One offer per node, at its smallest rentable size: instance type `<node id> <N>x`, price the
per-GPU price x N, available when at least N GPUs are free. Nodes come and go as miners list
them, so offers of a node that left are closed by the next complete crawl, as on Vast.ai.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core import providers
from gpuradar.core.items import PriceItem
from gpuradar.core.providers.lium import TIERS
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require


class LiumSpider(GpuRadarSpider):
    facts = providers.lium.LIUM

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("nodes"), headers={"Accept": "application/json"})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        nodes = require(self.json_body(response), "nodes", src, url, list)
        if not nodes:  # an empty book must not close every offer
            raise ParseError(src, "nodes", url, "is empty: no nodes")
        # Every node is read before any offer leaves: a book that stops making sense halfway
        # fails the crawl whole, never half-stored.
        items = [item for i, node in enumerate(nodes)
                 if (item := self.offer(node, f"{url} nodes[{i}]")) is not None]
        yield from items

    def offer(self, node: Any, where: str) -> PriceItem | None:
        src = self.name
        node_id = require(node, "id", src, where, str)
        gpu = require(node, "gpu_model", src, where, (str, type(None)))
        count = require(node, "gpu_count", src, where, (int, type(None)))
        per_gpu = require(node, "price_per_gpu_hour", src, where, (int, float, type(None)))
        tier = require(node, "tier", src, where, str)
        pricing = TIERS.get(tier)
        if pricing is None:
            self.count("lium_unknown_tier")
            self.warn_once(f"tier:{tier}", "lium: tier %r is not known; its nodes are "
                           "skipped (counted in gpuradar/skipped/lium_unknown_tier)", tier)
            return None
        if not gpu or not count or count < 1:
            self.uncatalogued(node_id, "no GPU model or count in the feed")
            return None
        if per_gpu is None or per_gpu <= 0:  # a node listed without a price is no offer
            self.count("lium_unpriced_node")
            return None
        free = node.get("available_gpu_count")
        smallest = node.get("min_rentable_gpu_count") or count
        if not isinstance(smallest, int) or not 1 <= smallest <= count:
            raise ParseError(src, "min_rentable_gpu_count", where,
                             f"is {smallest!r}, expected 1..{count}")
        country, region = node.get("country_code"), node.get("region")
        place = "-".join(str(p) for p in (country, region) if p) or "unknown"
        return PriceItem(
            source=src, region=place, zone=node.get("city") or "",
            instance_type=f"{node_id} {smallest}x", pricing=pricing, gpu=gpu,
            gpu_count=smallest, gpu_memory_gb=node.get("gpu_memory_gb") or None,
            vcpus=_share(node.get("cpu_count"), smallest, count),
            memory_gb=_share(node.get("ram_gb"), smallest, count),
            price=round(per_gpu * smallest, 4), currency="USD",
            available=free >= smallest if isinstance(free, int) else None,
            available_count=free if isinstance(free, int) else None,
            url=node.get("rent_url") or "https://lium.io/",
            attributes={"price_per_gpu": per_gpu, "tier": tier, "node_gpus": count,
                        "country": node.get("country")},
        )


def _share(total: Any, part: int, whole: int) -> float | None:
    """A node's CPUs or RAM when the offer is the whole node; None for a part of it: the feed
    does not say how a node's CPUs and RAM are split between renters."""
    if part != whole or not isinstance(total, (int, float)) or total <= 0:
        return None
    return float(total)
