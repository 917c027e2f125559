"""Crusoe: the "GPU instances pricing" table of the public pricing page
(https://www.crusoe.ai/cloud/pricing), served as static HTML.

Each row of the table is a GPU: a heading ("NVIDIA H100"), two tags (memory "80GB", form
factor "HGX" / "SXM" / "PCIe", sometimes empty) and two cells, On-demand and Current spot,
each "$N.NN/GPU-hr" or "Contact sales". The page's other tables (CPU instances, inference,
managed deployments) repeat chip names at other prices and are never read: only rows under
the "GPU instances pricing" heading count, and only if its header still names the columns
in the order gpuradar reads them.

One offer per row and priced column, for one GPU (the page prices per GPU-hour and does not
list VM sizes); region `global` (the page names no place); availability unknown. A cell with
a number in another format fails the crawl; fewer rows than the declared `min_rows` too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.crusoe import COLUMNS, CRUSOE, MIN_PRICED
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?)/GPU-hr$")
_MEMORY = re.compile(r"^(\d+)\s*GB$", re.IGNORECASE)
_SECTION = ("//h3[normalize-space()='GPU instances pricing']"
            "/ancestor::div[contains(concat(' ', @class, ' '), ' pricing-dd ')][1]")


def _text(node: Any) -> str:
    return node.xpath("normalize-space(.)").get("")


class CrusoeSpider(GpuRadarSpider):
    facts = CRUSOE

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("pricing"))

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        section = response.xpath(_SECTION)
        if len(section) != 1:
            raise ParseError(src, "GPU instances pricing", url, f"found {len(section)} times")
        header = [_text(h) for h in section.xpath(".//div[contains(@class, 'pricing-heading')]")]
        if header != ["GPU model", *(name for name, _ in COLUMNS)]:
            raise ParseError(src, "table header", url, f"is {header!r}")
        rows = section.xpath(".//div[@role='listitem']")
        self.expect_rows(len(rows), "GPU instances table", url)
        items = [item for row in rows for item in self.offers(row, url)]
        priced = sum(i.pricing == "on_demand" for i in items)
        if priced < MIN_PRICED:  # every row "Contact sales" is a changed page, not a sale
            raise ParseError(src, "On-demand prices", url, f"found {priced}, expected "
                             f"{MIN_PRICED} or more")
        yield from items

    def offers(self, row: Any, url: str) -> Iterator[PriceItem]:
        src = self.name
        heading = _text(row.xpath(".//h4"))
        tags = [_text(t) for t in row.xpath(".//div[contains(concat(' ', @class, ' '), "
                                           "' pricing-tag ')]")]
        cells = [_text(c) for c in row.xpath(".//div[contains(@class, 'pricing-rich')]")]
        where = f"{url} row {heading!r}"
        if not heading or len(tags) != 2 or len(cells) != len(COLUMNS):
            raise ParseError(src, "GPU row", where, f"has tags {tags!r} and cells {cells!r}")
        memory, form = tags
        found = _MEMORY.match(memory)
        name = " ".join(p for p in (heading, memory, form) if p)
        for (column, pricing), cell in zip(COLUMNS, cells, strict=True):
            price = _PRICE.match(cell)
            if price is None:
                if re.search(r"\d", cell):
                    raise ParseError(src, column, where, f"is {cell!r}, expected $N.NN/GPU-hr")
                self.count("crusoe_unpriced_cell")  # "Contact sales": no price
                continue
            yield PriceItem(
                source=src, region="global", instance_type=name, pricing=pricing,
                gpu=" ".join(p for p in (heading, form) if p), gpu_count=1,
                gpu_memory_gb=float(found.group(1)) if found else None,
                price=float(price.group(1)), currency="USD", available=None, url=url,
                attributes={"basis": "list price per GPU-hour (pricing page)"},
            )
