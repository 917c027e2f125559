"""DigitalOcean: the GPU Droplet tables of
https://docs.digitalocean.com/products/droplets/details/pricing/ (server-rendered, no
JavaScript).

The tier is the section: the table after `<h2 id="on-demand-gpu-droplet-pricing">` is
on-demand, the one after `<h2 id="spot-gpu-droplet-pricing">` spot (public preview; its
prices may change daily). Each has the columns GPU and Price; a row is a Droplet: "NVIDIA
H100" is one GPU, "NVIDIA H100 (8x)" eight, priced "$N.NN per hour" for the whole Droplet.
The contract section ("Per contract after contacting sales") has no price and is not read.
A label's ", air-cooled" / ", liquid-cooled" names the cooling, kept as an attribute of the
same GPU. The page names no region and no stock: region `unspecified`, availability unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import scrapy
from parsel import Selector
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.digitalocean import DIGITALOCEAN
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

SECTIONS = (("on-demand-gpu-droplet-pricing", "on_demand"), ("spot-gpu-droplet-pricing", "spot"))
HEADER = ["GPU", "Price"]
_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?) per hour$")
_COUNT = re.compile(r"^(.+?)\s+\((\d+)x\)$")
_COOLING = re.compile(r",\s*(air-cooled|liquid-cooled)$")


class DigitaloceanSpider(GpuRadarSpider):
    facts = DIGITALOCEAN

    async def start(self):
        yield scrapy.Request(self.endpoint("pricing"), callback=self.parse)

    def table(self, response: Response, anchor: str) -> Selector:
        """The one table of the section `anchor`, with the expected columns."""
        heading = response.xpath(f"//h2[@id='{anchor}']")
        if len(heading) != 1:
            raise ParseError(self.name, f"<h2 id={anchor}>", response.url,
                             f"appears {len(heading)} times, expected once")
        table = heading.xpath("following::table[1]")
        if not table or table.xpath("preceding::h2[1]/@id").get() != anchor:
            raise ParseError(self.name, f"table after <h2 id={anchor}>", response.url,
                             "is missing")
        header = [" ".join(th.xpath(".//text()").getall()).strip()
                  for th in table.xpath(".//th")]
        if header != HEADER:
            raise ParseError(self.name, f"{anchor} header", response.url,
                             f"is {header}, expected {HEADER}")
        return table[0]

    def parse(self, response: Response) -> Iterator[PriceItem]:
        items: list[PriceItem]
        rows, items = 0, []
        for anchor, pricing in SECTIONS:
            for tr in self.table(response, anchor).xpath(".//tr[td]"):
                cells = [" ".join(" ".join(td.xpath(".//text()").getall()).split())
                         for td in tr.xpath("./td")]
                where = f"{response.url}#{anchor}"
                if len(cells) != 2:
                    raise ParseError(self.name, "row", where, f"is {cells}, expected 2 cells")
                rows += 1
                items += self.offer(cells[0], cells[1], pricing, where, response.url)
        self.expect_rows(rows, "GPU Droplet tables", response.url)
        yield from items  # all or nothing: a page read halfway is not stored

    def offer(self, label: str, cell: str, pricing: str, where: str,
              url: str) -> Iterator[PriceItem]:
        found = _PRICE.match(cell)
        if not found:
            if re.search(r"\d", cell):
                raise ParseError(self.name, "Price", f"{where} {label!r}",
                                 f"is {cell!r}, expected '$N.NN per hour'")
            self.count("digitalocean_unpriced")
            return
        sized = _COUNT.match(label)
        gpu, count = (sized.group(1), int(sized.group(2))) if sized else (label, 1)
        cooling = _COOLING.search(gpu)
        yield PriceItem(
            source=self.name, region="unspecified", instance_type=label, pricing=pricing,
            gpu=_COOLING.sub("", gpu), gpu_count=count, price=float(found.group(1)),
            currency="USD", available=None, url=url,
            attributes={"cooling": cooling.group(1)} if cooling else {})
