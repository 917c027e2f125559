"""Civo: the GPU tables of https://www.civo.com/pricing (server-rendered HTML).

Each GPU model has a table captioned "<model> GPU pricing" with the columns Size, RAM, vCPU,
Storage, Data Transfer, On-demand, Commitment. A row is an instance size whose detail line
says "<N> x NVIDIA <GPU> - <memory>"; its on-demand cell's hourly figure ("$3.49", USD per
instance-hour) is the offer's price, or "N/A" when the size is sold only on commitment (then
there is no on-demand offer). The commitment prices (6, 12, 24, 36 months) are kept as
attributes, per instance-hour. The page names no region and no stock: region `unspecified`,
availability unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import scrapy
from parsel import Selector
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.civo import CIVO
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

HEADER = ["Size", "RAM", "vCPU", "Storage", "Data Transfer", "On-demand", "Commitment"]
TERMS = ("6_months", "12_months", "24_months", "36_months")
_DETAIL = re.compile(r"^(\d+)\s*x\s+(.+?)\s+-\s+(\d+)\s*GB\b")
_PRICE = re.compile(r"^\$(\d[\d,]*(?:\.\d+)?)$")
_HOURLY = "div[@data-option='hourly']/text()"


def _text(node: Selector) -> str:
    return " ".join(" ".join(node.xpath(".//text()").getall()).split())


class CivoSpider(GpuRadarSpider):
    facts = CIVO

    async def start(self):
        yield scrapy.Request(self.endpoint("pricing"), callback=self.parse)

    def parse(self, response: Response) -> Iterator[PriceItem]:
        rows, items = 0, []
        tables = response.xpath("//table[contains(caption, 'GPU pricing')]")
        for table in tables:
            caption = _text(table.xpath("caption")[0])
            header = [_text(th) for th in table.xpath(".//th")]
            if header != HEADER:
                raise ParseError(self.name, f"{caption} header", response.url,
                                 f"is {header}, expected {HEADER}")
            for tr in table.xpath("./tbody/tr"):
                rows += 1
                items += self.offer(tr, f"{response.url} {caption!r}", response.url)
        self.expect_rows(rows, "GPU pricing tables", response.url)
        yield from items  # all or nothing: a page read halfway is not stored

    def price(self, text: str, where: str) -> float | None:
        """'$1,234.50' -> 1234.5; None for a cell without digits ('N/A')."""
        found = _PRICE.match(text.strip())
        if found:
            return float(found.group(1).replace(",", ""))
        if re.search(r"\d", text):
            raise ParseError(self.name, "price", where, f"is {text!r}, expected $N.NN or N/A")
        return None

    def offer(self, tr: Selector, where: str, url: str) -> list[PriceItem]:
        detail = _text(tr.xpath(".//div[@class='product-detail']")[0]) \
            if tr.xpath(".//div[@class='product-detail']") else ""
        found = _DETAIL.match(detail)
        if not found:
            raise ParseError(self.name, "product-detail", where,
                             f"is {detail!r}, expected '<N> x <GPU> - <memory>GB'")
        cells = {td.attrib.get("data-title"): td for td in tr.xpath("./td")}
        if "On-demand price" not in cells or "Size" not in cells:
            raise ParseError(self.name, "On-demand price", f"{where} {detail!r}", "is missing")
        size = " ".join(cells["Size"].xpath("./text()").get("").split())
        where = f"{where} {size!r}"
        price = self.price(cells["On-demand price"].xpath(_HOURLY).get(""), where)
        if price is None:
            self.count("civo_commitment_only")  # no on-demand sale of this size
            return []
        commitment = {}
        if "Commitment price" in cells:
            for term in TERMS:
                value = self.price(cells["Commitment price"].xpath(
                    f"div[@id='{term}']/{_HOURLY}").get(""), f"{where} {term}")
                if value is not None:
                    commitment[term] = value
        vcpus = re.match(r"\d+", _text(cells["vCPU"])) if "vCPU" in cells else None
        ram = re.match(r"(\d+)\s*GB$", _text(cells["RAM"])) if "RAM" in cells else None
        count, gpu, memory = int(found.group(1)), found.group(2), float(found.group(3))
        return [PriceItem(
            source=self.name, region="unspecified", instance_type=f"{detail} ({size})",
            pricing="on_demand", gpu=gpu, gpu_count=count, gpu_memory_gb=memory,
            vcpus=float(vcpus.group()) if vcpus else None,
            memory_gb=float(ram.group(1)) if ram else None, price=price, currency="USD",
            available=None, url=url,
            attributes={"commitment_per_hour": commitment} if commitment else {})]
