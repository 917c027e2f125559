"""Together AI: the GPU Clusters table of the public pricing page
(https://www.together.ai/pricing), served as static HTML.

The table is found by its heading ("On-demand hourly rates and reserved capacity") and the
sentence under it that states the unit ("All prices are per GPU per hour."); only then is
its header read, and only if it still names the columns in the order gpuradar reads them
(Hardware, ON-Demand, then four reservation terms). The page's other tables repeat the same
hardware at other prices (Dedicated Inference) or hide a copy (`class="hide"`): never read.

One offer per row with an on-demand price, for one GPU (the page prices per GPU-hour and
does not list cluster sizes), region `global` (the page names no place), availability
unknown. "—" means not sold on demand; "Contact us" is no price (counted); a reservation
price is counted, not stored. A cell with a number in another format fails the crawl, and so
do fewer rows than the declared `min_rows` or fewer on-demand prices than `MIN_PRICED`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.together import (
    COLUMNS,
    MIN_PRICED,
    PER_GPU_HOUR,
    TABLE_HEADING,
    TOGETHER,
)
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?)$")
_NOT_SOLD = "—"
_TERMS = len(COLUMNS) - 4  # after Hardware, ON-Demand, Reserved and Pay as you go


def _text(node: Any) -> str:
    return " ".join(node.xpath("normalize-space(.)").get("").split())


class TogetherSpider(GpuRadarSpider):
    facts = TOGETHER

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("pricing"))

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        heading = response.xpath(f"//p[normalize-space()='{TABLE_HEADING}']")
        if len(heading) != 1:
            raise ParseError(src, TABLE_HEADING, url, f"found {len(heading)} times")
        unit = heading.xpath(f"following::p[1][normalize-space()='{PER_GPU_HOUR}']")
        if not unit:
            raise ParseError(src, PER_GPU_HOUR, url, "is no longer under the table heading")
        table = heading.xpath("following::table[1]")
        header = [_text(c) for c in table.xpath("./thead//th")]
        if tuple(header) != COLUMNS:
            raise ParseError(src, "table header", url, f"is {header!r}")
        rows = table.xpath("./tbody//tr")
        self.expect_rows(len(rows), "GPU Clusters table", url)
        items = [item for row in rows if (item := self.offer(row, url)) is not None]
        if len(items) < MIN_PRICED:  # every row "Contact us" is a changed page, not a sale
            raise ParseError(src, "ON-Demand prices", url, f"found {len(items)}, expected "
                             f"{MIN_PRICED} or more")
        yield from items

    def offer(self, row: Any, url: str) -> PriceItem | None:
        src = self.name
        cells = row.xpath("./td")
        hardware = _text(cells[0]) if cells else ""
        where = f"{url} row {hardware!r}"
        spans = [int(c.attrib.get("colspan", 1)) for c in cells[2:]]
        if len(cells) < 2 or not hardware or sum(spans) != _TERMS:
            raise ParseError(src, "table row", where, f"has {len(cells)} cells")
        for cell in cells[2:]:
            if _PRICE.match(_text(cell)):
                self.count("together_reservation_price")  # no pricing kind for it yet
        on_demand = _text(cells[1])
        found = _PRICE.match(on_demand)
        if found is None:
            if re.search(r"\d", on_demand):
                raise ParseError(src, "ON-Demand", where, f"is {on_demand!r}, expected $N.NN")
            if on_demand != _NOT_SOLD:
                self.count("together_unpriced_row")  # "Contact us": no price
            return None
        return PriceItem(
            source=src, region="global", instance_type=hardware, pricing="on_demand",
            gpu=hardware, gpu_count=1, price=float(found.group(1)), currency="USD",
            available=None, url=url,
            attributes={"basis": "list price per GPU-hour (pricing page, GPU Clusters)"},
        )
