"""CoreWeave: the "On-demand GPU instances" tables of https://www.coreweave.com/pricing.

The page (server-rendered Webflow) holds one table per region, each a `section-content`
headed "REGION: NORTH AMERICA" / "REGION: EUROPE": a header row of column names ("GPU
Model", "GPU Count", ..., "On-Demand Price (Per Hour)", "Spot Price (Per Hour)", and in
North America an inference column) and one `listitem` per GPU node type, whose direct
`table-v2-cell`s follow the header. A price is USD per instance-hour of the whole node
(`GPU Count` GPUs, "4^1" a count with footnote 1). A "Contact sales" or "N/A" cell has no
price and is counted; digits in another shape are a changed page. The page says nothing of
stock: availability unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import scrapy
from parsel import Selector
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.coreweave import COREWEAVE
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

COLUMNS = {"On-Demand Price (Per Hour)": "on_demand", "Spot Price (Per Hour)": "spot"}
NEEDED = ("GPU Model", "GPU Count", "vCPUs", "System RAM (GB)", *COLUMNS)
_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?)$")
_COUNT = re.compile(r"^(\d+)(?:\^\d+)?$")  # "4^1": four GPUs, footnote 1
_CELLS = "./div[contains(@class, 'w-embed')]/div[@class='table-grid']" \
         "/div[contains(concat(' ', @class, ' '), ' table-v2-cell ')]"


def _text(node: Selector) -> str:
    return " ".join(" ".join(node.xpath(".//text()").getall()).split())


class CoreweaveSpider(GpuRadarSpider):
    facts = COREWEAVE

    async def start(self):
        yield scrapy.Request(self.endpoint("pricing"), callback=self.parse)

    def parse(self, response: Response) -> Iterator[PriceItem]:
        items: list[PriceItem]
        rows, items = 0, []
        for section in response.xpath("//div[contains(@class, 'section-content')]"
                                      "[.//div[contains(@class, 'gpu-pricing')]]"):
            heading = _text(section.xpath("./h5")[0]) if section.xpath("./h5") else ""
            if not heading.startswith("REGION: "):
                raise ParseError(self.name, "region heading", response.url,
                                 f"is {heading!r}, expected 'REGION: <name>'")
            region = heading.removeprefix("REGION: ").strip().lower().replace(" ", "-")
            header = [_text(h) for h in section.xpath(
                ".//div[@class='table-v2-header']//div[@class='table-header-text']")]
            missing = [name for name in NEEDED if name not in header]
            if missing:
                raise ParseError(self.name, "table header", f"{response.url} {region}",
                                 f"lacks {missing}; it is {header}")
            for row in section.xpath(".//div[@role='listitem']"):
                cells = [_text(c) for c in row.xpath(_CELLS)]
                if len(cells) != len(header):
                    raise ParseError(self.name, "table row", f"{response.url} {region}",
                                     f"has {len(cells)} cells, the header {len(header)}")
                rows += 1
                items += self.row_offers(dict(zip(header, cells, strict=True)), region,
                                         response.url)
        self.expect_rows(rows, "On-demand GPU instances", response.url)
        yield from items  # all or nothing: a page read halfway is not stored

    def row_offers(self, row: dict[str, str], region: str, url: str) -> Iterator[PriceItem]:
        name, where = row["GPU Model"], f"{url} {region} row {row['GPU Model']!r}"
        count = _COUNT.match(row["GPU Count"])
        if not count:
            raise ParseError(self.name, "GPU Count", where,
                             f"is {row['GPU Count']!r}, expected a number")
        for column, pricing in COLUMNS.items():
            found = _PRICE.match(row[column])
            if not found:
                if re.search(r"\d", row[column]):
                    raise ParseError(self.name, column, where,
                                     f"is {row[column]!r}, expected $N.NN")
                self.count("coreweave_unpriced")  # "Contact sales", "N/A"
                continue
            yield PriceItem(
                source=self.name, region=region, instance_type=name, pricing=pricing,
                gpu=name, gpu_count=int(count.group(1)), price=float(found.group(1)),
                currency="USD", vcpus=_number(row["vCPUs"]),
                memory_gb=_number(row["System RAM (GB)"]), available=None, url=url,
                attributes={"basis": "list price per instance-hour of the whole node"})


def _number(text: str) -> float | None:
    """"2,048" -> 2048.0; anything else is not known."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
