"""Nebius: the "NVIDIA GPU Instances" table of https://nebius.com/prices.

The page is rendered on the server from an escaped JSON copy of its content blocks; the GPU
table is the `highlight-table-block` titled "NVIDIA GPU Instances", whose `table.content` is
a header row (Item, vCPUs, "RAM, GB", "Preemptible, GPU-hour", "On-demand, GPU-hour") and one
row per GPU product. Prices are per GPU-hour in USD; vCPUs and RAM are per GPU.

Each priced cell is one offer of one GPU: on-demand, and preemptible as spot. A "from $X"
cell is a floor (the cheapest host of a range), stored with `attributes.price_from`. A cell
without digits ("––", "Contact us") has no price and is counted; digits in any other shape
are a changed page. The page names no region and no stock: region `unspecified`,
availability unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.nebius import NEBIUS
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

TITLE = '"title":"NVIDIA GPU Instances"'
HEADER = ["Item", "vCPUs", "RAM, GB", "Preemptible, GPU-hour", "On-demand, GPU-hour"]
COLUMNS = ((4, "on_demand"), (3, "spot"))
_PRICE = re.compile(r"^(from )?\$(\d+(?:\.\d+)?)$")
# "NVIDIA L40S with Intel CPU": the GPU, then the host the row is for
_HOST = re.compile(r"\s+with\s+.+$")


class NebiusSpider(GpuRadarSpider):
    facts = NEBIUS

    async def start(self):
        yield scrapy.Request(self.endpoint("prices"), callback=self.parse)

    def table(self, response: Response) -> list[Any]:
        """The GPU table's rows, header first, from the page's escaped JSON."""
        text = response.text.replace('\\"', '"')
        at = text.find(TITLE)
        if at < 0 or text.find(TITLE, at + 1) >= 0:
            raise ParseError(self.name, "NVIDIA GPU Instances", response.url,
                             "is missing" if at < 0 else "is not the only GPU table")
        start = text.find('"content":', at)
        try:
            rows, _ = json.JSONDecoder().raw_decode(text, start + len('"content":'))
        except ValueError as exc:
            raise ParseError(self.name, "table.content", response.url,
                             f"is not a JSON table ({exc})") from None
        if not isinstance(rows, list) or not rows or rows[0] != HEADER:
            raise ParseError(self.name, "table.content[0]", response.url,
                             f"is {rows[0] if rows else None!r}, expected {HEADER}")
        return rows

    def parse(self, response: Response) -> Iterator[PriceItem]:
        items: list[PriceItem]
        rows, items = self.table(response)[1:], []
        for row in rows:
            if not (isinstance(row, list) and len(row) == len(HEADER)
                    and all(isinstance(c, str) for c in row)):
                raise ParseError(self.name, "table row", response.url,
                                 f"is {row!r:.120}, expected {len(HEADER)} texts")
            items += self.row_offers(row, response.url)
        self.expect_rows(len(rows), "NVIDIA GPU Instances", response.url)
        yield from items  # all or nothing: a page read halfway is not stored

    def row_offers(self, row: list[str], url: str) -> Iterator[PriceItem]:
        item, vcpus, ram = (c.strip() for c in row[:3])
        for column, pricing in COLUMNS:
            cell = row[column].strip()
            found = _PRICE.match(cell)
            if not found:
                if re.search(r"\d", cell):
                    raise ParseError(self.name, HEADER[column], f"{url} row {item!r}",
                                     f"is {cell!r}, expected $N.NN or from $N.NN")
                self.count("nebius_unpriced")
                continue
            yield PriceItem(
                source=self.name, region="unspecified", instance_type=item, pricing=pricing,
                gpu=_HOST.sub("", item), gpu_count=1, price=float(found.group(2)),
                currency="USD", vcpus=float(vcpus) if vcpus.isdigit() else None,
                memory_gb=float(ram) if ram.isdigit() else None, available=None, url=url,
                attributes={"basis": "list price per GPU-hour; vCPUs and RAM per GPU",
                            **({"price_from": True} if found.group(1) else {}),
                            **({"vcpus": vcpus, "ram_gb": ram}
                               if not vcpus.isdigit() else {})})
