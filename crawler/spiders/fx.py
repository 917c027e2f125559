"""FX: the ECB's euro foreign exchange reference rates (published each working day)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse

from gpuradar.core.items import FxRateItem
from gpuradar.core.providers.fx import FX
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError

ECB_NS = {"e": "http://www.ecb.int/vocabulary/2002-08-01/eurofxref"}


class FxSpider(GpuRadarSpider):
    facts = FX

    async def start(self):
        yield scrapy.Request(self.endpoint("ecb"), callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[FxRateItem]:
        if not isinstance(response, TextResponse):  # only a text answer has a selector
            raise ParseError(self.name, "body", response.url, "is not XML text")
        response.selector.register_namespace("e", ECB_NS["e"])
        days = response.xpath("//e:Cube[@time]")
        if not days:
            raise ParseError(self.name, "Cube/@time", response.url, "is missing")
        for day in days:
            rate_date = day.attrib["time"]
            rates = day.xpath("e:Cube[@currency]")
            if not rates:
                raise ParseError(self.name, "Cube/@currency", response.url, "is missing")
            for cube in rates:
                try:
                    per_eur = float(cube.attrib["rate"])
                except (KeyError, ValueError):
                    raise ParseError(self.name, "Cube/@rate", response.url,
                                     f"is not a number for {cube.attrib.get('currency')}"
                                     ) from None
                yield FxRateItem(currency=cube.attrib["currency"], per_eur=per_eur,
                                 rate_date=rate_date)
