"""Hot Aisle: the plan cards of the public pricing page (https://hotaisle.xyz/pricing),
served as static HTML.

Each card has a kicker ("VM" or "Bare metal"), a plan name (Small, Medium, Large), the GPU
counts it is sold in and the chip ("1x" / "2x & 4x" / "8x", "MI300x") and its price
"$N.NN/GPU/hr". The page also repeats the prices in its hero cards, meta tags and prose (a
grandfathered rate for existing customers): only the plan cards are read.

One offer per VM card and GPU count, priced per GPU-hour x GPUs, region `global` (the page
names no place), availability unknown. Bare-metal cards (one-month minimum) are counted
(`gpuradar/skipped/hotaisle_monthly_commitment`), not stored: they have no on-demand price.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.hotaisle import COMMITTED_KICKERS, HOTAISLE, ON_DEMAND_KICKER
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

_PRICE = re.compile(r"^\$(\d+(?:\.\d+)?)/GPU/hr\b")
_COUNTS = re.compile(r"^\d+x(?:\s*&\s*\d+x)*$")
_KICKER = "p[contains(@class, 'uppercase')]"


class HotaisleSpider(GpuRadarSpider):
    facts = HOTAISLE

    async def start(self) -> Any:
        yield scrapy.Request(self.endpoint("pricing"))

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem]:
        src, url = self.name, response.url
        kickers = (ON_DEMAND_KICKER, *COMMITTED_KICKERS)
        cards = [c for c in response.xpath(f"//div[{_KICKER} and h2]")
                 if c.xpath(f"normalize-space({_KICKER})").get() in kickers]
        self.expect_rows(len(cards), "plan cards", url)
        items = [item for card in cards for item in self.offers(card, url)]
        if not items:
            raise ParseError(src, "VM plan cards", url, "are missing")
        yield from items

    def offers(self, card: Any, url: str) -> Iterator[PriceItem]:
        src = self.name
        kicker = card.xpath(f"normalize-space({_KICKER})").get()
        plan = card.xpath("normalize-space(h2)").get()
        where = f"{url} card {plan!r}"
        spans = [s.xpath("normalize-space(.)").get() for s in card.xpath("div/span")]
        prices = [p for p in card.xpath(".//p") if "/GPU/hr" in p.xpath("string(.)").get()]
        if len(spans) != 2 or not _COUNTS.match(spans[0]) or len(prices) != 1:
            raise ParseError(src, "plan card", where, f"has spans {spans!r} and "
                             f"{len(prices)} prices")
        counts, chip = [int(n) for n in re.findall(r"\d+", spans[0])], spans[1]
        text = prices[0].xpath("normalize-space(.)").get()
        found = _PRICE.match(text)
        if not found:
            raise ParseError(src, "price", where, f"is {text!r}, expected $N.NN/GPU/hr")
        if kicker != ON_DEMAND_KICKER:
            self.count("hotaisle_monthly_commitment")
            return
        per_gpu = float(found.group(1))
        for count in counts:
            yield PriceItem(
                source=src, region="global", instance_type=f"{count}x {chip} VM",
                pricing="on_demand", gpu=chip, gpu_count=count,
                price=round(per_gpu * count, 4), currency="USD", available=None, url=url,
                attributes={"price_per_gpu": per_gpu, "plan": plan,
                            "basis": "list price per GPU-hour (pricing page)"},
            )
