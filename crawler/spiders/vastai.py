"""Vast.ai: the public marketplace search (`POST /api/v0/bundles/`, no key needed).

Every listed offer is rentable right now, so listed = available and an offer that
disappears from a complete crawl is closed. Ask ids are ephemeral; the identity of an
offer is (machine, GPU, count). Storage: `dph_total` already contains the default disk's
storage cost (`search.diskHour`); the spot (interruptible) price is `min_bid` plus that same
storage cost, so on-demand and spot compare on the same basis.

The API caps how many offers one search returns, so the spider searches per GPU model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import scrapy
from gpuradar.crawler.spiders.base import GpuRadarSpider, require
from scrapy.http import Response

from gpuradar.core.items import PriceItem

# gpu_name values Vast uses for datacenter and popular consumer GPUs.
GPU_NAMES = (
    "B200", "H200", "H200 NVL", "H100 SXM", "H100 NVL", "H100 PCIE", "GH200 SXM", "A100 SXM4",
    "A100 PCIE", "A100X", "L40S", "L40", "L4", "A40", "A10", "RTX PRO 6000 WS", "RTX PRO 6000 S",
    "RTX 6000Ada", "RTX A6000", "RTX A5000", "RTX A4000", "RTX 5090", "RTX 4090", "RTX 3090",
    "Tesla V100", "Tesla T4", "Q RTX 8000", "MI300X",
)


class VastaiSpider(GpuRadarSpider):
    name = "vastai"
    endpoints = {"bundles": "https://console.vast.ai/api/v0/bundles/"}
    credentials = {"api_key": "VAST_API_KEY"}
    default_interval = 300
    kind = "marketplace"
    notes = "Marketplace offers; listed = available; spot = min_bid (+ storage)."
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 1.0}

    def query(self, gpu_name: str | None) -> dict[str, Any]:
        """A search for one GPU model; with None, the cheapest offers of any model, which
        is how a GPU Vast starts listing shows up (unknown to the catalog, counted)."""
        query: dict[str, Any] = {"gpu_name": {"eq": gpu_name}} if gpu_name else {}
        return query | {
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "type": "on-demand",
            "order": [["dph_total", "asc"]],
            "limit": int(self.option("limit", 1000)),
        }

    async def start(self):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.option("api_key")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        for gpu_name in [*self.option("gpu_names", GPU_NAMES), None]:
            yield scrapy.Request(self.endpoint("bundles"), method="POST", headers=headers,
                                 body=json.dumps(self.query(gpu_name), sort_keys=True),
                                 callback=self.parse, cb_kwargs={"gpu_name": gpu_name})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        data = self.json_body(response)
        offers = require(data, "offers", self.name, response.url, list)
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
