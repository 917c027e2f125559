"""The yardstick: a bare Scrapy spider that reads the bench's Azure-shaped pages with `json`
and yields each meter as a dict; no pipelines. Prints the item count when it closes.

    scrapy runspider bench/bare_spider.py -a url=http://127.0.0.1:PORT/api/retail/prices
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import scrapy


class BareSpider(scrapy.Spider):
    name = "bare"
    custom_settings = {"TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False}

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url, self.items = url, 0

    async def start(self):
        yield scrapy.Request(self.url)

    def parse(self, response) -> Iterator[Any]:
        page = json.loads(response.text)
        for item in page["Items"]:
            self.items += 1
            yield item
        if page.get("NextPageLink"):
            yield scrapy.Request(page["NextPageLink"])

    def closed(self, reason: str) -> None:
        print(self.items)
