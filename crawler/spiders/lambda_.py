"""Lambda (lambda.ai): the Cloud API with a key, the public pricing page without one.

With an API key (`LAMBDA_API_KEY` or `sources.lambda.api_key`), `GET /api/v1/instance-types`
gives every instance type with its price in US cents per instance-hour and the regions that
have capacity for it right now (`regions_with_capacity_available`) -- Lambda's live stock
signal, and the only place the answer names. One offer per instance type and region with
capacity, available. The API says nothing of a region without capacity: "sold out there" and
"never offered there" look the same, so no offer is invented for it. A region whose capacity
goes away is simply not listed, and storage closes its offer as unavailable after a
successful crawl (its history stays). A type with capacity nowhere is counted
(`no_capacity`), not stored under a made-up place. The option `regions` keeps only the
regions it names.

Without a key, the public pricing page: its "Instances pricing" tables (tabs 8x/4x/2x/1x,
price per GPU-hour), never the reserved 1-Click Cluster tables nor the escaped copies in the
page's scripts. Those offers have region `global` and unknown availability. The item price is
always per instance-hour: the page's per-GPU price times the tab's GPU count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.lambda_ import LAMBDA
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

GIB = 1.073741824  # GB per GiB

_COUNT = re.compile(r"^\s*(\d+)\s*x\s+(.+?)\s*$")
_TAB = re.compile(r"^(\d+)x$")
_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?)$")
_GB = re.compile(r"^(\d+(?:\.\d+)?)\s*(GB|GiB|TiB|TB)\b", re.IGNORECASE)
_PRICE_LABEL = "PRICE/GPU/HR"
_CELLS = ("VRAM/GPU", "vCPUs", "RAM", "STORAGE")


def _size_gb(text: str) -> float | None:
    """'1800 GiB' -> 1932.7, '80 GB' -> 80.0, '22 TiB SSD' -> GB; None if not a size."""
    found = _GB.match(text.strip())
    if not found:
        return None
    value, unit = float(found.group(1)), found.group(2).lower()
    factor = {"gb": 1.0, "gib": GIB, "tb": 1000.0, "tib": 1024 * GIB}[unit]
    return round(value * factor, 1)


class LambdaSpider(GpuRadarSpider):
    facts = LAMBDA
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}

    async def start(self):
        key = self.option("api_key")
        if key:
            yield scrapy.Request(self.endpoint("instance_types"), headers=self.auth(key),
                                 callback=self.parse_instance_types)
        else:
            yield scrapy.Request(self.endpoint("pricing"), callback=self.parse_pricing_page)

    @staticmethod
    def auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}", "Accept": "application/json"}

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """A saved instance-types answer or pricing page, told apart by content."""
        head = response.body.lstrip()[:1]
        if head in (b"{", b"["):
            data = self.json_body(response)
            entries = require(data, "data", self.name, response.url)
            if isinstance(entries, list):
                raise ParseError(self.name, "data", response.url, "is a list; give the "
                                 "instance-types answer")
            yield from self.api_offers(data, response.url)
        else:
            yield from self.parse_pricing_page(response)


    # -- the API ---------------------------------------------------------------------------
    def parse_instance_types(self, response: Response) -> Iterator[PriceItem]:
        yield from self.api_offers(self.json_body(response), response.url)

    def api_offers(self, data: Any, url: str) -> Iterator[PriceItem]:
        """One available offer per instance type and region with capacity."""
        src = self.name
        entries = require(data, "data", src, url, dict)
        if not entries:  # an empty answer must not close every offer
            raise ParseError(src, "data", url, "is empty: no instance types")
        wanted = {str(r) for r in self.option("regions", None) or ()}
        for key, entry in entries.items():
            where = f"{url} data[{key!r}]"
            itype = require(entry, "instance_type", src, where, dict)
            capacity = require(entry, "regions_with_capacity_available", src, where, list)
            names = {require(r, "name", src, f"{where}.regions_with_capacity_available", str)
                     for r in capacity}
            item = self.api_offer(itype, f"{where}.instance_type")
            if item is None:
                continue
            if wanted:
                names &= wanted
            if not names:
                self.count("no_capacity")
                continue
            for region in sorted(names):
                yield replace(item, region=region, url=url, available=True,
                              attributes=dict(item.attributes))

    def api_offer(self, itype: dict[str, Any], where: str) -> PriceItem | None:
        src = self.name
        name = require(itype, "name", src, where, str)
        description = require(itype, "description", src, where, str)
        cents = require(itype, "price_cents_per_hour", src, where, (int, float, str))
        specs = require(itype, "specs", src, where, dict)
        count = specs.get("gpus")
        gpu = itype.get("gpu_description")
        found = _COUNT.match(description)
        if found:
            count = count if count is not None else int(found.group(1))
            gpu = gpu or found.group(2)
        if not count or not gpu:  # CPU-only instance types
            return None
        try:
            price = float(cents) / 100
        except ValueError:
            raise ParseError(src, "price_cents_per_hour", where,
                             f"is {cents!r}, not a number") from None
        memory = specs.get("memory_gib")
        storage = specs.get("storage_gib")
        return PriceItem(
            source=src, region="", instance_type=name, pricing="on_demand", gpu=gpu,
            gpu_count=count, vcpus=specs.get("vcpus"), price=price, currency="USD",
            memory_gb=round(memory * GIB, 1) if memory else None,
            attributes={"description": description,
                        **({"storage_gb": round(storage * GIB)} if storage else {})},
        )

    # -- the pricing page ------------------------------------------------------------------
    def parse_pricing_page(self, response: Response) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        heading = response.xpath("//h2[normalize-space()='Instances pricing']")
        if not heading:
            raise ParseError(src, "<h2>Instances pricing</h2>", url, "is missing")
        tabs = heading[0].xpath("following::div[@role='tablist'][1]/*[@role='tab']")
        if not tabs:
            raise ParseError(src, "tablist", url, "is missing after 'Instances pricing'")
        rows = 0
        for tab in tabs:
            label = " ".join(tab.xpath("normalize-space(.)").getall()).strip()
            found = _TAB.match(label)
            if not found:
                raise ParseError(src, "tab label", url, f"is {label!r}, expected '<N>x'")
            count = int(found.group(1))
            panel_id = tab.attrib.get("aria-controls")
            panel = response.xpath(f"//div[@role='tabpanel'][@id='{panel_id}']")
            if not panel:  # keep the other tabs, but the crawl is incomplete: close nothing
                self.logger.error("lambda: %s: the %s tab's panel %r is missing", url, label,
                                  panel_id)
                continue
            for row in panel[0].xpath(".//tr[@data-plan]"):
                rows += 1
                item = self.page_offer(row, count, f"{url} tab {label}")
                if item is not None:
                    item.url = url
                    yield item
        if not rows:
            raise ParseError(src, "tr[@data-plan]", url, "no rows in the instances tables")

    def page_offer(self, row: Any, count: int, where: str) -> PriceItem | None:
        src = self.name
        plan = row.attrib["data-plan"].strip()
        where = f"{where} plan {plan!r}"
        cells = {c.attrib["data-label"]: c.xpath("normalize-space(.)").get("")
                 for c in row.xpath("./*[@data-label]")}
        price_label = next((k for k in cells if k.upper().startswith(_PRICE_LABEL)), None)
        for label in (*_CELLS, price_label or _PRICE_LABEL):
            if label not in cells:
                raise ParseError(src, f"<td data-label={label}>", where, "is missing")
        assert price_label is not None  # else _PRICE_LABEL was missing, and raised above
        price_text = cells[price_label].replace(",", "")
        found = _PRICE.match(price_text)
        if not found:
            if re.search(r"\d", price_text):
                raise ParseError(src, price_label, where, f"is {price_text!r}, expected $N.NN")
            self.count("lambda_unpriced_row")  # "Contact sales" and the like: no price
            return None
        vram = _size_gb(cells["VRAM/GPU"])
        try:
            vcpus = float(cells["vCPUs"])
        except ValueError:
            vcpus = None
        size = f" {cells['VRAM/GPU']}" if vram else ""
        return PriceItem(
            source=src, region="global", instance_type=f"{count}x {plan}{size}",
            pricing="on_demand", gpu=plan, gpu_count=count, gpu_memory_gb=vram, vcpus=vcpus,
            memory_gb=_size_gb(cells["RAM"]), price=round(float(found.group(1)) * count, 4),
            currency="USD", available=None,
            attributes={"price_per_gpu": float(found.group(1)), "storage": cells["STORAGE"],
                        "price_source": "list_page",
                        "basis": "pricing page, per GPU-hour x GPUs"},
        )
