"""Verda (formerly DataCrunch): the schema.org `Offer` nodes of https://verda.com/pricing.

The page carries one `<script type="application/ld+json">` whose `@graph` holds an `Offer`
per price: `name` "<N>x <GPU> <tier>", `description` naming the product and tier, `price`
and `priceCurrency` (repeated in `priceSpecification`, unit "hour"). The description is the
tier: on-demand and spot instance prices, and instant clusters (on demand, N GPUs).
Serverless containers (billed per container, not an instance) and storage are not offers;
rows without a GPU model (Verda's CPU instances) are skipped and counted.

The price is the whole instance's per hour (for N GPUs). "CC" (confidential computing) is a
mode of the same GPU: kept in `attributes.confidential_computing`. The page names no region
and no stock: region `unspecified`, availability unknown. Two rows with the same name and
price (two hardware variants of the 1x H100) are one offer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.verda import VERDA
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

#: Offer description -> (pricing, product); a description not here is a product gpuradar
#: does not read (counted).
TIERS = {
    "Hourly on-demand instance price": ("on_demand", "instance"),
    "Hourly spot instance price": ("spot", "instance"),
    "Hourly instant cluster price": ("on_demand", "instant cluster"),
}
NOT_OFFERS = ("Hourly serverless container price", "Hourly serverless spot container price",
              "Monthly storage price per GiB")
_SUFFIX = re.compile(r"\s+(on-demand|spot|instant cluster)$")
_COUNT = re.compile(r"^(\d+)x\s+(.+)$")
_CC = re.compile(r"\s+CC\b")


class VerdaSpider(GpuRadarSpider):
    facts = VERDA

    async def start(self):
        yield scrapy.Request(self.endpoint("pricing"), callback=self.parse)

    def offers(self, response: Response) -> list[dict[str, Any]]:
        nodes: list[Any] = []
        for block in response.xpath('//script[@type="application/ld+json"]/text()').getall():
            try:
                data = json.loads(block)
            except ValueError as exc:
                raise ParseError(self.name, "application/ld+json", response.url,
                                 f"is not JSON ({exc})") from None
            nodes += data.get("@graph", []) if isinstance(data, dict) else data
        return [n for n in nodes if isinstance(n, dict) and n.get("@type") == "Offer"]

    def parse(self, response: Response) -> Iterator[PriceItem]:
        url, seen, rows, items = response.url, set(), 0, []
        for node in self.offers(response):
            description = node.get("description")
            if description in NOT_OFFERS:
                self.count("verda_not_an_instance")
                continue
            if description not in TIERS:
                self.warn_once(f"tier:{description}", "verda: offer description %r is not "
                               "one gpuradar reads; skipped", description)
                self.count("verda_unknown_tier")
                continue
            pricing, product = TIERS[description]
            where = f"{url} {node.get('@id', '')}"
            name = require(node, "name", self.name, where, str)
            label = _SUFFIX.sub("", name).strip()
            if not label:
                self.count("verda_cpu_instance")  # Verda's CPU rows have no model name
                continue
            found = _COUNT.match(label)
            if not found:
                raise ParseError(self.name, "name", where, f"is {name!r}, expected '<N>x <GPU>'")
            rows += 1
            price, currency = self.price(node, where)
            if (label, pricing, price) in seen:
                continue
            seen.add((label, pricing, price))
            model = found.group(2)
            items.append(PriceItem(
                source=self.name, region="unspecified", instance_type=label, pricing=pricing,
                gpu=_CC.sub("", model), gpu_count=int(found.group(1)), price=price,
                currency=currency, available=None, url=url,
                attributes={"product": product,
                            **({"confidential_computing": True} if _CC.search(model) else {})}))
        self.expect_rows(rows, "Offer", url)
        yield from items  # all or nothing: a page read halfway is not stored

    def price(self, node: dict[str, Any], where: str) -> tuple[float, str]:
        """The price and currency, which the offer states twice; a disagreement between
        the two is a page gpuradar no longer understands."""
        price = require(node, "price", self.name, where, (int, float))
        currency = require(node, "priceCurrency", self.name, where, str)
        spec = node.get("priceSpecification") or {}
        if spec and (spec.get("price") != price or spec.get("priceCurrency") != currency
                     or spec.get("unitText") != "hour"):
            raise ParseError(self.name, "priceSpecification", where,
                             f"is {spec!r}, not {price} {currency} per hour")
        return float(price), currency
