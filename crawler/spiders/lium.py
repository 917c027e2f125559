"""Lium: the public node feed (`GET https://lium.io/api/public/v1/nodes`, no key).

The feed is the whole book in one answer: `nodes[]`, one per machine, with its GPU model and
count, its price per GPU-hour, the GPUs free now (`available_gpu_count`), the fewest GPUs it
rents out (`min_rentable_gpu_count`), its tier and its place (country, region, city).

One offer per node, at its smallest rentable size: instance type `<node id's first 8
characters> <N>x` (the whole id in `attributes["node"]`), price the per-GPU price x N,
available when at least N GPUs are free. Nodes come and go as miners list them, so offers of
a node that left are closed by the next complete crawl, as on Vast.ai.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.lium import LIUM, TIERS
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

#: Characters of a node's id (a UUID) in its offers' instance type: the first group, unique
#: in a book of hundreds; nodes sharing it in one answer are named by their whole id.
SHORT_ID = 8


class LiumSpider(GpuRadarSpider):
    facts = LIUM

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("nodes"), headers={"Accept": "application/json"})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        nodes = require(self.json_body(response), "nodes", src, url, list)
        self.expect_rows(len(nodes), "nodes", url)  # an empty book closes nothing
        ids = [require(node, "id", src, f"{url} nodes[{i}]", str) for i, node in enumerate(nodes)]
        short = Counter(node_id[:SHORT_ID] for node_id in ids)
        # Every node is read before any offer leaves: a book that stops making sense halfway
        # fails the crawl whole, never half-stored.
        items = [item for i, (node, node_id) in enumerate(zip(nodes, ids, strict=True))
                 if (item := self.offer(node, node_id if short[node_id[:SHORT_ID]] > 1
                                        else node_id[:SHORT_ID], f"{url} nodes[{i}]"))
                 is not None]
        yield from items

    def offer(self, node: Any, name: str, where: str) -> PriceItem | None:
        src = self.name
        node_id = node["id"]
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
            instance_type=f"{name} {smallest}x", pricing=pricing, gpu=gpu,
            gpu_count=smallest, gpu_memory_gb=node.get("gpu_memory_gb") or None,
            vcpus=_share(node.get("cpu_count"), smallest, count),
            memory_gb=_share(node.get("ram_gb"), smallest, count),
            price=round(per_gpu * smallest, 4), currency="USD",
            available=free >= smallest if isinstance(free, int) else None,
            available_count=free if isinstance(free, int) else None,
            url=node.get("rent_url") or "https://lium.io/",
            attributes={"node": node_id, "price_per_gpu": per_gpu, "tier": tier,
                        "node_gpus": count,
                        "country": node.get("country")},
        )


def _share(total: Any, part: int, whole: int) -> float | None:
    """A node's CPUs or RAM when the offer is the whole node; None for a part of it: the feed
    does not say how a node's CPUs and RAM are split between renters."""
    if part != whole or not isinstance(total, (int, float)) or total <= 0:
        return None
    return float(total)
