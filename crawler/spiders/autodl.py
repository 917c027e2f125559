"""AutoDL (autodl.com): China's GPU marketplace, per-GPU hourly prices in CNY.

AutoDL publishes no price API. Two token-based paths, each enabled by its own token:

* `web_token` (opt-in, UNOFFICIAL): the machine list the AutoDL market page itself loads,
  `POST https://www.autodl.com/api/v1/user/machine/list`, paginated by `page_index` up to
  `max_page`. The token is the logged-in console session's JWT (sent as `Authorization`, no
  Bearer); it expires and the interface may change without notice. One offer per machine: the
  price of one GPU for one hour (`payg_price`, in 1/1000 CNY), `gpu_idle_num` idle GPUs.
* `dev_token` (official developer token, console -> settings -> developer token; the
  elastic-deployment API needs a verified enterprise account): `POST
  https://api.autodl.com/api/v1/dev/machine/region/gpu_stock` per data center gives idle /
  total GPUs per GPU model, i.e. availability only. Those offers take their price from the
  option `prices` ({GPU name: CNY per GPU-hour}, copied from AutoDL's price list); a GPU with
  no configured price is skipped (counted) rather than stored without a price.

Nothing here calls an endpoint that creates, starts or pays for anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.autodl import AUTODL
from gpuradar.crawler.signing import REPLAY_PLACEHOLDER
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, require

# Data centers of the developer API (AutoDL's elastic-deployment documentation).
DATA_CENTERS = ("westDC2", "westDC3", "beijingDC1", "beijingDC2", "beijingDC3", "beijingDC4",
                "neimengDC1", "neimengDC3", "foshanDC1", "chongqingDC1", "yangzhouDC1")
# The GPU models asked for by default (gpu_name_set), as AutoDL's market names them; RTX PRO
# 6000 and RTX 5090 are its Blackwell cards.
GPU_NAMES = ("RTX 4090", "RTX 4090D", "RTX 5090", "RTX PRO 6000", "RTX 3090", "RTX 3080 Ti",
             "RTX A4000", "RTX A5000", "V100-32GB", "A800-80GB", "H800", "H20", "L20",
             "A100-SXM4-80GB")
GIB = 1024**3
# AutoDL's elastic-deployment API documentation (www.autodl.com/docs/esd_api_doc/) shows one
# gpu_stock request: region_sign, cuda_v_from 118, cuda_v_to 125, gpu_name_set, price_from 0,
# price_to 300. Those are the example's filter values, not defaults: cuda_v_to is the highest
# CUDA version a host may need, so 125 (CUDA 12.5) hides every host that needs 12.8+ (all
# Blackwell cards), and the unit of price_from / price_to is not documented. gpuradar wants
# every host, so it sends no cuda or price filter; public clients of the API send the query
# with region_sign alone or without the price fields, so the filters are optional.


class AutodlSpider(GpuRadarSpider):
    facts = AUTODL
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}

    def token(self, name: str) -> str | None:
        value = self.option(name)
        if not value and self.settings.get("GPURADAR_REPLAY_DIR"):
            return REPLAY_PLACEHOLDER
        return str(value) if value else None

    # -- requests --------------------------------------------------------------------------
    def post(self, url: str, token: str, payload: dict[str, Any], callback,
             **cb_kwargs: Any) -> scrapy.Request:
        return scrapy.Request(
            url, method="POST", body=json.dumps(payload, ensure_ascii=False, sort_keys=True),
            headers={"Authorization": token, "Content-Type": "application/json"},
            callback=callback, cb_kwargs=cb_kwargs, dont_filter=True)

    def list_payload(self, page: int) -> dict[str, Any]:
        """The body the AutoDL market page sends (field set as its public clients send it)."""
        return {"charge_type": "payg", "region_sign": "",
                "region_sign_list": list(self.option("regions", [])),
                "gpu_type_name": list(self.option("gpu_names", [])), "machine_tag_name": [],
                "gpu_idle_num": int(self.option("min_idle_gpus", 1)), "mount_net_disk": False,
                "instance_disk_size_order": "", "date_range": "", "date_from": "",
                "date_to": "", "page_index": page, "page_size": int(self.option("page_size", 100)),
                "pay_price_order": "", "gpu_idle_type": "", "default_order": True}

    async def start(self):
        web, dev = self.token("web_token"), self.token("dev_token")
        if not (web or dev):
            self.logger.error("autodl: no token; set AUTODL_WEB_TOKEN or AUTODL_DEV_TOKEN")
            return
        if web:
            yield self.post(self.endpoint("machine_list"), web, self.list_payload(1),
                            self.parse_machines)
        if dev:
            for dc in self.option("data_centers", DATA_CENTERS):
                yield self.post(self.endpoint("gpu_stock"), dev, self.stock_payload(dc),
                                self.parse_stock, data_center=dc)

    def stock_payload(self, data_center: str) -> dict[str, Any]:
        """One data centre's gpu_stock query: the data centre and the GPU models, no CUDA or
        price filter (see GPU_NAMES)."""
        return {"region_sign": data_center,
                "gpu_name_set": list(self.option("gpu_names", GPU_NAMES))}

    def probe_requests(self) -> list[tuple[str, scrapy.Request]]:
        """`sources --check`: one request per configured token."""
        out = []
        web, dev = self.token("web_token"), self.token("dev_token")
        if web:
            out.append(("web_token", self.post(self.endpoint("machine_list"), web,
                                               self.list_payload(1), self.parse_machines)))
        if dev:
            dc = list(self.option("data_centers", DATA_CENTERS))[0]
            out.append(("dev_token", self.post(self.endpoint("gpu_stock"), dev,
                                               self.stock_payload(dc), self.parse_stock,
                                               data_center=dc)))
        return out

    # -- responses -------------------------------------------------------------------------
    def data(self, response: Response) -> Any:
        body = self.json_body(response)
        code = require(body, "code", self.name, response.url)
        if code != "Success":
            raise ParseError(self.name, "code", response.url,
                             f"is {code!r} ({body.get('msg', '')}): the token may have expired")
        return require(body, "data", self.name, response.url)

    def parse_machines(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        try:
            data = self.data(response)
        except ParseError as exc:
            self.logger.error("%s", exc)
            return
        page = require(data, "list", self.name, response.url, list)
        index = int(data.get("page_index") or 1)
        if index == 1:
            web = self.token("web_token")
            for n in range(2, int(data.get("max_page") or 1) + 1):
                yield self.post(response.url, web or "", self.list_payload(n),
                                self.parse_machines)
        for i, machine in enumerate(page):
            item = self.machine_item(machine, f"data.list[{i}] (page {index})")
            if item is not None:
                yield item

    def machine_item(self, machine: dict[str, Any], where: str) -> PriceItem | None:
        src = self.name
        machine_id = require(machine, "machine_id", src, where, str)
        gpu = machine.get("gpu_name") or ""
        if not gpu or machine.get("payg") is False:
            return None
        price = require(machine, "payg_price", src, where, (int, float))
        idle = machine.get("gpu_idle_num")
        mem = machine.get("mem_per_gpu")
        member = None
        sku = machine.get("machine_sku_info") or []
        if sku and isinstance(sku[0], dict) and sku[0].get("level_config"):
            member = sku[0]["level_config"][-1].get("discounted_price")
        attributes = {k: v for k, v in {
            "machine_alias": machine.get("machine_alias"),
            "region_name": machine.get("region_name"), "gpus_total": machine.get("gpu_number"),
            "cuda": machine.get("highest_cuda_version"),
            "member_price": member / 1000 if isinstance(member, int | float) else None,
        }.items() if v not in (None, "")}
        return PriceItem(
            source=src, region=require(machine, "region_sign", src, where, str),
            instance_type=machine_id, pricing="on_demand", gpu=gpu, gpu_count=1.0,
            price=price / 1000, currency="CNY", vcpus=machine.get("cpu_per_gpu"),
            memory_gb=round(mem / GIB, 1) if isinstance(mem, int | float) else None,
            available=None if idle is None else idle > 0,
            available_count=idle, url="https://www.autodl.com/market/list",
            attributes=attributes)

    def parse_stock(self, response: Response, data_center: str | None = None,
                    **kwargs: Any) -> Iterator[PriceItem]:
        try:
            data = self.data(response)
        except ParseError as exc:
            if data_center is None:
                raise
            self.logger.error("%s (data center %s)", exc, data_center)
            return
        if not isinstance(data, list):
            raise ParseError(self.name, "data", response.url, "is not a list")
        prices = {str(k): float(v) for k, v in (self.option("prices") or {}).items()}
        region = data_center or self.option("data_center", "?")
        for i, entry in enumerate(data):
            if not isinstance(entry, dict):
                raise ParseError(self.name, f"data[{i}]", response.url, "is not an object")
            for gpu, stock in entry.items():
                idle = require(stock, "idle_gpu_num", self.name, f"data[{i}].{gpu}", int)
                total = stock.get("total_gpu_num")
                price = prices.get(gpu)
                if price is None and data_center is not None:
                    self.count("stock_without_price")
                    continue
                yield PriceItem(
                    source=self.name, region=region, instance_type=f"stock:{gpu}",
                    pricing="on_demand", gpu=gpu, gpu_count=1.0, price=price, currency="CNY",
                    available=idle > 0, available_count=idle,
                    url="https://www.autodl.com/market/list",
                    attributes={"gpus_total": total, "data_center": region,
                                "price_source": "sources.autodl.prices"})

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        body = json.loads(response.text)
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(data, list):
            return self.parse_stock(response)
        return (x for x in self.parse_machines_file(response))

    def parse_machines_file(self, response: Response) -> Iterator[PriceItem]:
        data = self.data(response)
        for i, machine in enumerate(require(data, "list", self.name, response.url, list)):
            item = self.machine_item(machine, f"data.list[{i}]")
            if item is not None:
                yield item
