"""Vast.ai: the public marketplace search (`POST /api/v0/bundles/`, no key needed).

Every listed offer is rentable right now, so listed = available and an offer that
disappears from a complete crawl is closed. Ask ids are ephemeral; the identity of an
offer is (machine, GPU, count). Storage: `dph_total` already contains the default disk's
storage cost (`search.diskHour`); the spot (interruptible) price is `min_bid` plus that same
storage cost, so on-demand and spot compare on the same basis.

Few, large searches (Vast limits the search to 10 requests a minute per IP and answers 429
without Retry-After when asked faster): one search for every GPU model of GPU_NAMES at once
(`gpu_name` `in` the list) and one for every other model (`notin`: how a GPU Vast starts
listing shows up, unknown to the catalog and counted). Vast cuts an answer short of `limit`
and says so (`truncated`); such a search is split (the model list in halves, then one model
by GPU count) until every answer is complete, and one that still is not is reported: the
crawl is then partial and closes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import scrapy
from gpuradar.crawler.spiders.base import GpuRadarSpider, require
from scrapy.http import Response

from gpuradar.core import providers
from gpuradar.core.items import PriceItem

# gpu_name values Vast uses for datacenter and popular consumer GPUs.
GPU_NAMES = (
    "B200", "H200", "H200 NVL", "H100 SXM", "H100 NVL", "H100 PCIE", "GH200 SXM", "A100 SXM4",
    "A100 PCIE", "A100X", "L40S", "L40", "L4", "A40", "A10", "RTX PRO 6000 WS", "RTX PRO 6000 S",
    "RTX 6000Ada", "RTX A6000", "RTX A5000", "RTX A4000", "RTX 5090", "RTX 4090", "RTX 3090",
    "Tesla V100", "Tesla T4", "Q RTX 8000", "MI300X",
)
# How a one-model search that is still truncated is split further: by GPUs per offer.
GPU_COUNTS: tuple[dict[str, int], ...] = (
    {"eq": 1}, {"eq": 2}, {"gte": 3, "lte": 4}, {"gte": 5, "lte": 8}, {"gt": 8})


class VastaiSpider(GpuRadarSpider):
    facts = providers.vastai.VASTAI
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}

    @property
    def limit(self) -> int:
        return int(self.option("limit", 1000))

    def query(self, names: list[str], mode: str = "in", gpus: dict[str, int] | None = None,
              limit: int | None = None) -> dict[str, Any]:
        """The search body: rentable on-demand offers of the models `names` (`mode` "in"),
        or of every other model ("notin"), cheapest first."""
        query: dict[str, Any] = {"gpu_name": {mode: list(names)}} if names else {}
        if gpus:
            query["num_gpus"] = dict(gpus)
        return query | {
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "type": "on-demand",
            "order": [["dph_total", "asc"]],
            "limit": limit or self.limit,
        }

    def search(self, names: list[str], mode: str = "in", gpus: dict[str, int] | None = None,
               limit: int | None = None) -> scrapy.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.option("api_key")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return scrapy.Request(self.endpoint("bundles"), method="POST", headers=headers,
                              body=json.dumps(self.query(names, mode, gpus, limit),
                                              sort_keys=True),
                              callback=self.parse, dont_filter=True,
                              cb_kwargs={"search": (tuple(names), mode, gpus)})

    async def start(self):
        names = [str(n) for n in self.option("gpu_names", GPU_NAMES)]
        yield self.search(names, "in")
        yield self.search(names, "notin")

    def probe_requests(self) -> list[tuple[str, scrapy.Request]]:
        """`sources --check`: one search for a single offer."""
        return [("search", self.search(["RTX 4090"], limit=1))]

    def narrower(self, names: tuple[str, ...], mode: str,
                 gpus: dict[str, int] | None) -> list[scrapy.Request]:
        """Searches that together cover one truncated search, or [] when it cannot be split."""
        if mode == "in" and len(names) > 1:
            half = len(names) // 2
            return [self.search(list(names[:half])), self.search(list(names[half:]))]
        if gpus is None:
            return [self.search(list(names), mode, count) for count in GPU_COUNTS]
        return []

    def parse(self, response: Response, search: tuple | None = None,
              **kwargs: Any) -> Iterator[PriceItem | scrapy.Request]:
        data = self.json_body(response)
        offers = require(data, "offers", self.name, response.url, list)
        if search is not None and (data.get("truncated") is True or len(offers) >= self.limit):
            names, mode, gpus = search
            split = self.narrower(names, mode, gpus)
            if split:  # the narrower searches carry these offers too: read them there
                self.count("truncated_search_split")
                yield from split
                return
            self.logger.error("vastai: the search for %s%s still stops at %d offers; the "
                              "rest are missing from this crawl", "other models than "
                              if mode == "notin" else ", ".join(names),
                              f" with num_gpus {gpus}" if gpus else "", len(offers))
        for i, offer in enumerate(offers):
            yield from self.parse_offer(offer, f"offers[{i}]")

    def parse_offer(self, offer: dict[str, Any], where: str) -> Iterator[PriceItem]:
        src = self.name
        machine = require(offer, "machine_id", src, where, int)
        gpu_name = require(offer, "gpu_name", src, where, str)
        num_gpus = require(offer, "num_gpus", src, where, (int, float))
        dph_total = require(offer, "dph_total", src, where, (int, float, type(None)))
        gpu_ram = offer.get("gpu_ram")
        geo = offer.get("geolocation") or ""
        country = geo.rsplit(",", 1)[-1].strip() or "unknown"
        cores, effective = offer.get("cpu_cores"), offer.get("cpu_cores_effective")
        ram = offer.get("cpu_ram")
        memory = None
        if ram and cores and effective:  # RAM is shared in proportion to the cores rented
            memory = round(ram * effective / cores / 1000, 1)
        disk_hour = (offer.get("search") or {}).get("diskHour")
        if disk_hour is None and dph_total is not None and offer.get("dph_base") is not None:
            disk_hour = dph_total - offer["dph_base"]
        common = dict(
            source=src, region=country,
            instance_type=f"{machine}:{num_gpus}x{gpu_name.replace(' ', '_')}",
            gpu=gpu_name, gpu_count=num_gpus,
            gpu_memory_gb=round(gpu_ram / 1024, 1) if gpu_ram else None,
            vcpus=effective, memory_gb=memory, currency="USD", available=True,
            url=f"https://cloud.vast.ai/?ask={offer.get('ask_contract_id', offer.get('id', ''))}",
            attributes={"reliability": offer.get("reliability2", offer.get("reliability")),
                        "verification": offer.get("verification"),
                        "datacenter": bool(offer.get("hosting_type")),
                        "storage_usd_per_hour": disk_hour, "location": geo.strip(", ")},
        )
        yield PriceItem(pricing="on_demand", price=dph_total, **common)
        min_bid = offer.get("min_bid")
        if min_bid:
            yield PriceItem(pricing="spot", price=min_bid + (disk_hour or 0.0), **common)
