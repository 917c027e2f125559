"""OCI (Oracle Cloud): the public cost estimator's shape list joined to the public price list.

Two unauthenticated JSON documents:

* `shapes.json` of the OCI Cost Estimator: every shape with its GPU count, GPU memory,
  OCPUs, memory, whether preemptible capacity exists, and the part numbers it is billed
  under (`products[{partNumber, qty, type}]`);
* the price list (`cetools/api/v1/products/?currencyCode=USD`): part number -> billing
  metric and PAY_AS_YOU_GO price.

A shape's hourly price is the sum of its parts: a "GPU Per Hour" part times the shape's GPU
count, an "OCPU Per Hour" part times its OCPUs, a "Gigabyte Per Hour" part times its memory.
The join goes through part numbers only, so the price list's look-alike rows (NVIDIA AI
Enterprise licences, VMware nodes, Cloud@Customer twins, monthly commits) never enter; a
shape that points at one of those is skipped with a warning.

OCI charges the same list price in every commercial region and publishes no availability
(`available` is None). Where a shape can be had is known only with an API key (tenancy,
user, key fingerprint, private key file, home region): the tenancy's subscribed regions
(Identity ListRegionSubscriptions on the home region), then per region the shapes the
tenancy can launch (Compute ListShapes, paged by `opc-next-page`), each request signed as
the `oci` SDK signs it. Each priced shape is then stored in every region that lists it.
Without a key the offers are keyed by one region, `global` (option `regions` repeats them
per region). Preemptible capacity is billed at 50 % of on-demand (OCI documentation;
no API publishes it): spot offers are computed, marked `attributes["derived"]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import scrapy
from scrapy.http import Response

from gpuradar.core import gpus
from gpuradar.core.items import PriceItem
from gpuradar.core.providers.oci import API_KEY, OCI
from gpuradar.crawler.signing import oci_headers
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

PRICE_MODEL = "PAY_AS_YOU_GO"
# Preemptible instances cost half the on-demand price (OCI docs, "Preemptible Instances").
PREEMPTIBLE_FACTOR = 0.5
# Billing metric -> which quantity of the shape it multiplies.
_METRICS = {"gpu per hour": "gpu", "ocpu per hour": "qty", "gigabyte per hour": "qty",
            "nvme terabyte per hour": "qty"}
# Price-list rows that look like GPU rentals but are not (licences, on-prem, VMware nodes).
_LOOKALIKES = ("AI Enterprise", "Cloud@Customer", "VMware", "Monthly Commit", "Roving Edge")

# Shape-name token -> the GPU string looked up in the catalog, where the name does not say it.
_GPU_TOKENS = {"GPU2": "P100", "GPU3": "V100", "GPU4": "A100"}
_SHAPE = re.compile(r"^(?:BM|VM)\.(GPU\d?)(?:\.([A-Za-z0-9-]+))?\.(\d+)$")
# OCPUs and memory (GB) the estimator lacks or gets wrong for the newest shapes, from the OCI
# compute shape documentation (GB200: two 72-core Grace CPUs, not the 128 OCPUs listed).
SHAPE_SPECS: dict[str, tuple[int, int]] = {
    "BM.GPU.GB200.4": (144, 960),
    "BM.GPU.GB300.4": (144, 960),
    "BM.GPU.B300.8": (128, 4096),
    "BM.GPU.RTXPRO.8": (144, 3072),
}
# Grace superchips have Arm cores: one vCPU per OCPU (x86 OCPUs are two hyperthreads).
_ARM_GPUS = ("GB200", "GB300", "GH200")


def shape_name(raw: str) -> str:
    """The Compute API name of a shape: 'BM.GPU.GB200.4 (NVL72)' -> 'BM.GPU.GB200.4'."""
    return re.sub(r"\s*\(.*\)\s*$", "", raw).strip()


def gpu_of_shape(name: str) -> str | None:
    """The GPU a shape name encodes ('VM.GPU3.2' -> 'V100', 'BM.GPU.H100.8' -> 'H100')."""
    found = _SHAPE.match(name)
    if found is None:
        return None
    return found.group(2) or _GPU_TOKENS.get(found.group(1))


class OciSpider(GpuRadarSpider):
    facts = OCI

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `gpuradar parse oci shapes.json products.json`: the two halves, in any order.
        self._shapes: dict[str, Any] | None = None
        self._prices: dict[str, Any] | None = None
        self._key_pem = b""  # the API key's PEM, read in start()

    def prices_url(self) -> str:
        return f"{self.endpoint('prices')}?{urlencode({'currencyCode': self.currency()})}"

    def currency(self) -> str:
        return str(self.option("currency", "USD")).upper()

    async def start(self):
        creds = self.api_key()
        if creds is not None:
            try:  # read once, up front: a bad key fails the crawl before anything is asked
                self._key_pem = Path(creds["key_file"]).expanduser().read_bytes()
                oci_headers(method="GET", url=self.endpoint("shapes"), tenancy="t", user="u",
                            fingerprint="f", private_key_pem=self._key_pem)
            except (OSError, ValueError, TypeError) as exc:
                reason = getattr(exc, "strerror", None) or type(exc).__name__
                self.logger.error("oci: cannot use the API key file (sources.oci.key_file or "
                                  "OCI_CLI_KEY_FILE): %s; nothing crawled", reason)
                return
        yield scrapy.Request(self.endpoint("shapes"), callback=self.parse_shapes)

    def parse_shapes(self, response: Response) -> Iterator[scrapy.Request]:
        shapes = self.json_body(response)
        require(shapes, "items", self.name, response.url, list)
        yield scrapy.Request(self.prices_url(), callback=self.parse_prices,
                             cb_kwargs={"shapes": shapes})

    def parse_prices(self, response: Response, shapes: dict[str, Any]
                     ) -> Iterator[PriceItem | scrapy.Request]:
        items = list(self.offers(shapes, self.json_body(response), response.url))
        creds = self.api_key()
        if creds is None:
            yield from items
            return
        url = self.endpoint("region_subscriptions").format(region=creds["region"],
                                                           tenancy=creds["tenancy"])
        yield self.signed(url, self.parse_regions, items=items)

    # -- places, with an API key ----------------------------------------------------------
    def api_key(self) -> dict[str, str] | None:
        """The API key's settings, or None unless all are given (a replay without them keeps
        the recording's public answers: no placeholder key to sign with)."""
        values = {name: self.option(name) for name in API_KEY}
        return {n: str(v) for n, v in values.items()} if all(values.values()) else None

    def signed(self, url: str, callback: Any, **cb_kwargs: Any) -> scrapy.Request:
        creds = self.api_key()
        assert creds is not None
        headers = oci_headers(method="GET", url=url, tenancy=creds["tenancy"],
                              user=creds["user"], fingerprint=creds["fingerprint"],
                              private_key_pem=self._key_pem)
        return scrapy.Request(url, headers=headers, callback=callback, cb_kwargs=cb_kwargs)

    def shapes_url(self, region: str, page: str | None = None) -> str:
        creds = self.api_key()
        assert creds is not None
        query = {"compartmentId": creds["tenancy"], **({"page": page} if page else {})}
        return f"{self.endpoint('compute_shapes').format(region=region)}?{urlencode(query)}"

    def parse_regions(self, response: Response, items: list[PriceItem]
                      ) -> Iterator[scrapy.Request]:
        """The tenancy's READY region subscriptions (oci.identity.models.RegionSubscription)."""
        regions = []
        for i, sub in enumerate(self.list_body(response)):
            where = f"{response.url} [{i}]"
            name = require(sub, "regionName", self.name, where, str)
            if require(sub, "status", self.name, where, str) == "READY":
                regions.append(name)
        if not regions:
            raise ParseError(self.name, "regionName", response.url, "no READY region")
        yield self.signed(self.shapes_url(regions[0]), self.parse_shapes_api, items=items,
                          regions=regions, found={})

    def list_body(self, response: Response) -> list[Any]:
        body = self.json_body(response)
        if not isinstance(body, list):
            raise ParseError(self.name, "[]", response.url, "is not a list")
        return body

    def parse_shapes_api(self, response: Response, items: list[PriceItem], regions: list[str],
                         found: dict[str, set[str]]) -> Iterator[PriceItem | scrapy.Request]:
        """One page of ListShapes (oci.core.models.Shape) for regions[0]; the next page, the
        next region, or (after the last) each offer in every region that lists its shape."""
        region = regions[0]
        names = found.setdefault(region, set())
        for i, shape in enumerate(self.list_body(response)):
            names.add(require(shape, "shape", self.name, f"{response.url} [{i}]", str))
        page = response.headers.get("opc-next-page")
        if page:
            yield self.signed(self.shapes_url(region, page.decode()), self.parse_shapes_api,
                              items=items, regions=regions, found=found)
        elif regions[1:]:
            yield self.signed(self.shapes_url(regions[1]), self.parse_shapes_api,
                              items=items, regions=regions[1:], found=found)
        else:
            yield from self.placed(items, found)

    def placed(self, items: list[PriceItem], found: dict[str, set[str]]) -> Iterator[PriceItem]:
        """Each offer once per region whose ListShapes lists its shape (same price)."""
        seen = set()
        for item in items:
            if (item.instance_type, item.pricing) in seen:
                continue
            seen.add((item.instance_type, item.pricing))
            for region, names in sorted(found.items()):
                if item.instance_type in names:
                    yield replace(item, region=region, attributes=dict(item.attributes))

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """A saved shapes.json or price list; offers once both halves have been read."""
        doc = self.json_body(response)
        items = require(doc, "items", self.name, response.url, list)
        first = items[0] if items else {}
        if isinstance(first, dict) and "partNumber" in first:
            self._prices = doc
        elif isinstance(first, dict) and ("products" in first or "gpuQty" in first):
            self._shapes = doc
        else:
            raise ParseError(self.name, "items[0]", response.url,
                             "is neither a cost-estimator shape nor a price-list part")
        if self._shapes is None or self._prices is None:
            missing = "price list" if self._prices is None else "shapes.json"
            self.logger.warning("oci: read %s; give the %s too to get offers", response.url,
                                missing)
            return
        yield from self.offers(self._shapes, self._prices, response.url)


    # -- the join -------------------------------------------------------------------------
    def price_table(self, doc: Any, where: str) -> dict[str, dict[str, Any]]:
        items = require(doc, "items", self.name, where, list)
        table = {}
        for i, part in enumerate(items):
            number = require(part, "partNumber", self.name, f"{where} items[{i}]", str)
            table[number] = part
        return table

    def unit_price(self, part: dict[str, Any], where: str) -> float | None:
        """The PAY_AS_YOU_GO price of a part in the requested currency (None: not priced)."""
        locs = require(part, "currencyCodeLocalizations", self.name, where, list)
        for j, loc in enumerate(locs):
            code = require(loc, "currencyCode", self.name, f"{where} localizations[{j}]", str)
            if code != self.currency():
                continue
            prices = require(loc, "prices", self.name, f"{where} localizations[{j}]", list)
            for price in prices:
                if isinstance(price, dict) and price.get("model") == PRICE_MODEL:
                    value = require(price, "value", self.name, where, (int, float))
                    return float(value)
        return None

    def skip(self, shape: str, why: str) -> None:
        self.logger.warning("oci: shape %s skipped: %s", shape, why)
        self.count("oci_shape")

    def offers(self, shapes: Any, prices: Any, url: str) -> Iterator[PriceItem]:
        table = self.price_table(prices, url)
        updated = prices.get("lastUpdated") if isinstance(prices, dict) else None
        regions = [str(r) for r in self.option("regions", None) or ["global"]]
        priced = 0
        for i, shape in enumerate(require(shapes, "items", self.name, url, list)):
            where = f"shapes items[{i}]"
            item = self.shape_offer(shape, table, where)
            if item is None:
                continue
            priced += 1
            item.url = url
            if updated:
                item.attributes["price_list_updated"] = updated
            preemptible = require(shape, "allowPreemptible", self.name, where,
                                  (bool, type(None)))
            for region in regions:
                yield replace(item, region=region, attributes=dict(item.attributes))
                if preemptible and item.price is not None:
                    yield replace(item, region=region, pricing="spot",
                                  price=round(item.price * PREEMPTIBLE_FACTOR, 6),
                                  attributes={**item.attributes, "derived": True,
                                              "derived_from": "50% of on-demand"})
        if not priced:  # an empty or foreign price list must not close every offer
            raise ParseError(self.name, "items", url, "priced no GPU shape (empty price list "
                             f"or no {self.currency()} prices?)")

    def shape_offer(self, shape: Any, table: dict[str, dict[str, Any]],
                    where: str) -> PriceItem | None:
        """The on-demand offer of one GPU shape (region filled in by the caller)."""
        src = self.name
        raw_name = require(shape, "name", src, where, str)
        name = shape_name(raw_name)
        where = f"{where} ({raw_name})"
        sub_type = require(require(shape, "subType", src, where, dict), "value", src, where)
        gpu_qty = require(shape, "gpuQty", src, where, (int, float, type(None)))
        if sub_type != "gpu" and not gpu_qty:
            return None
        if shape.get("hidden") or require(shape, "status", src, where) != "ACTIVE":
            return None
        gpu_raw = gpu_of_shape(name)
        if gpu_raw is None or not gpu_qty:
            self.uncatalogued(name, "GPU model not recognised from the shape name"
                              if gpu_raw is None else "the estimator gives no GPU count")
            return None
        ocpus, memory = SHAPE_SPECS.get(name, (None, None))
        total, parts = 0.0, []
        for j, product in enumerate(require(shape, "products", src, where, list)):
            pwhere = f"{where} products[{j}]"
            number = require(product, "partNumber", src, pwhere, str)
            qty = require(product, "qty", src, pwhere, (int, float, type(None)))
            kind = require(require(product, "type", src, pwhere, dict), "value", src, pwhere)
            if kind == "ocpu" and ocpus is None:
                ocpus = qty
            part = table.get(number)
            if part is None:
                self.skip(name, f"part {number} is not in the price list")
                return None
            display = str(part.get("displayName", ""))
            metric = str(require(part, "metricName", src, f"price list {number}", str))
            if any(word.lower() in display.lower() for word in _LOOKALIKES):
                self.skip(name, f"part {number} is {display!r}, not a rental")
                return None
            factor = _METRICS.get(metric.lower())
            if factor is None:
                self.skip(name, f"part {number} is billed per {metric!r}")
                return None
            unit = self.unit_price(part, f"price list {number}")
            if unit is None:
                self.skip(name, f"part {number} has no {PRICE_MODEL} {self.currency()} price")
                return None
            amount = gpu_qty if factor == "gpu" else qty
            if amount is None:
                self.skip(name, f"part {number} ({metric}) has no quantity")
                return None
            total += unit * amount
            parts.append({"part": number, "metric": metric, "unit_price": unit, "qty": amount})
        if not parts:
            self.skip(name, "no billed parts")
            return None
        if memory is None:
            memory = shape.get("bundleMemoryQty")
        gpu_memory = self.gpu_memory(gpu_raw, gpu_qty, shape.get("gpuMemoryQty"))
        arm = gpu_raw.upper() in _ARM_GPUS
        return PriceItem(
            source=src, region="global", instance_type=name, pricing="on_demand",
            gpu=gpu_raw, gpu_count=gpu_qty, gpu_memory_gb=gpu_memory,
            vcpus=ocpus * (1 if arm else 2) if ocpus else None,
            memory_gb=memory, price=round(total, 6), currency=self.currency(), available=None,
            attributes={"ocpus": ocpus, "parts": parts,
                        **({"shape_label": raw_name} if raw_name != name else {})},
        )

    @staticmethod
    def gpu_memory(gpu_raw: str, count: float, reported: float | None) -> float | None:
        """Per-GPU memory: the catalog's where the GPU is unambiguous (the estimator reports a
        total for most shapes but a per-GPU figure for some); else the estimator's total / count
        (or its figure as-is) picks the variant ('A100': 40 vs 80 GB)."""
        gpu = gpus.lookup(gpu_raw)
        if gpu is not None:
            return gpu.memory_gb
        if not reported:
            return None
        for guess in (reported / count, reported):
            gpu = gpus.lookup(gpu_raw, guess)
            if gpu is not None:
                return gpu.memory_gb
        return round(reported / count, 1)
