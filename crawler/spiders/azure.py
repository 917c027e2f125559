"""Azure: the public Retail Prices API (no credentials).

One paginated chain over every region: `type eq 'Consumption'` VM meters of the N-series
(the GPU families), Linux only. A meter whose name ends in " Spot" is the spot price;
"Low Priority" meters are skipped: they belong to the retired low-priority VM offer, Spot
replaced them and would otherwise be stored twice under the spot key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import scrapy
from gpuradar.crawler.spiders.base import GpuRadarSpider, require
from scrapy.http import Response

from gpuradar.core.interconnect import family
from gpuradar.core.items import PriceItem

# Family (the part of the size name after the vCPU count, without "Standard_") -> GPU name
# as Azure documents it, and the GPUs per size keyed by vCPUs (None: one GPU per size).
# Fractional counts are the GPU partitions Azure sells (NVadsA10 v5: 1/6, 1/3, 1/2).
_FAMILIES: dict[str, tuple[str, float | None, dict[int, float]]] = {
    # family regex                      GPU          memory   vCPUs -> GPUs
    r"NC(\d+)r?$": ("K80", 12, {6: 1, 12: 2, 24: 4}),
    r"NC(\d+)r?s_v2$": ("P100", 16, {6: 1, 12: 2, 24: 4}),
    r"NC(\d+)r?s_v3$": ("V100", 16, {6: 1, 12: 2, 24: 4}),
    r"NC(\d+)as_T4_v3$": ("T4", 16, {4: 1, 8: 1, 16: 1, 64: 4}),
    r"NC(\d+)ads_A10_v4$": ("A10", 24, {8: 1, 16: 1, 32: 2}),
    r"NC(\d+)ads_A100_v4$": ("A100 PCIe", 80, {24: 1, 48: 2, 96: 4}),
    r"NC(\d+)a?d?i?s_H100_v5$": ("H100 NVL", 94, {40: 1, 80: 2}),
    r"NCC(\d+)ads_H100_v5$": ("H100 NVL", 94, {40: 1}),
    r"ND(\d+)r?s$": ("P40", 24, {6: 1, 12: 2, 24: 4}),
    r"ND(\d+)rs_v2$": ("V100", 32, {40: 8}),
    r"ND(\d+)asr_v4$": ("A100 SXM", 40, {96: 8}),
    r"ND(\d+)amsr_A100_v4$": ("A100 SXM", 80, {96: 8}),
    r"ND(\d+)isr_H100_v5$": ("H100 SXM", 80, {96: 8}),
    r"ND(\d+)isr_H200_v5$": ("H200", 141, {96: 8}),
    r"ND(\d+)isr_MI300X_v5$": ("MI300X", 192, {96: 8}),
    r"ND(\d+)isr_(?:NDR_)?GB200_v6$": ("GB200", 186, {128: 4}),
    r"NV(\d+)s_v3$": ("M60", 8, {12: 1, 24: 2, 48: 4}),
    r"NV(\d+)ad[m]?s_A10_v5$": ("A10", 24, {6: 1 / 6, 12: 1 / 3, 18: 1 / 2, 36: 1, 72: 2}),
    r"NV(\d+)ad[m]?s_V710_v5$": ("V710", 28, {4: 1 / 6, 8: 1 / 3, 12: 1 / 2, 24: 1, 28: 1}),
}
_COMPILED = [(re.compile(p), spec) for p, spec in _FAMILIES.items()]


def gpu_of(arm_sku_name: str) -> tuple[str, float | None, float, int] | None:
    """(GPU, memory GB, GPU count, vCPUs) of an Azure size; None when not a known GPU size.

    The number in an N-series size name is its vCPU count."""
    size = arm_sku_name.removeprefix("Standard_")
    for pattern, (gpu, memory, counts) in _COMPILED:
        m = pattern.match(size)
        if m:
            vcpus = int(m.group(1))
            count = counts.get(vcpus)
            return (gpu, memory, count, vcpus) if count else None
    return None


class AzureSpider(GpuRadarSpider):
    name = "azure"
    endpoints = {"prices": "https://prices.azure.com/api/retail/prices"}
    default_interval = 3600
    #: What links the GPUs of a multi-GPU offer, by instance family (first match wins):
    #: read by the pipeline and `recommend` (gpuradar.core.interconnect).
    # fmt: off
    interconnect = (
        family(r"_ND\w*GB[23]00", "nvswitch", "infiniband", "GB200/GB300 NVL72, InfiniBand"),
        family(r"_ND\d+is?r_(H100|H200)_v5$", "nvswitch", "infiniband",
               "NVLink 4 via NVSwitch, 400 Gb/s InfiniBand per GPU"),
        family(r"_ND\d+isr_MI300X_v5$", "infinity-fabric", "infiniband",
               "Infinity Fabric, 400 Gb/s InfiniBand per GPU"),
        family(r"_ND\d+am?sr_(A100_)?v4$", "nvswitch", "infiniband",
               "NVLink 3 via NVSwitch, 200 Gb/s InfiniBand per GPU"),
        family(r"_ND\d+rs_v2$", "nvlink", "infiniband", "V100 NVLink, 100 Gb/s InfiniBand"),
        family(r"_NC\d+adis_H100_v5$", "nvlink", None, "H100 NVL pair with NVLink bridge"),
        family(r"_NC\d+ads_A100_v4$", "pcie", None, "A100 PCIe"),
        family(r"_NC\d+r\w*_v3$", "pcie", "infiniband", "V100 PCIe, RDMA InfiniBand"),
        family(r"_N[CVDP]\w*$", "pcie", None, "PCIe GPUs"),
    )
    # fmt: on
    notes = "Retail Prices API, all regions, Linux, on-demand and Spot; no credentials."

    def first_url(self) -> str:
        flt = ("serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
               "and contains(armSkuName, 'Standard_N')")
        currency = self.option("currency", "USD")
        query = {"api-version": "2023-01-01-preview", "currencyCode": f"'{currency}'",
                 "$filter": flt}
        return f"{self.endpoint('prices')}?{urlencode(query)}"

    async def start(self):
        yield scrapy.Request(self.first_url(), callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem | scrapy.Request]:
        page = self.json_body(response)
        items = require(page, "Items", self.name, response.url, list)
        for i, meter in enumerate(items):
            item = self.parse_meter(meter, f"{response.url} Items[{i}]")
            if item is not None:
                item.url = response.url
                yield item
        next_link = page.get("NextPageLink")
        if next_link:
            yield response.follow(next_link, callback=self.parse)

    def parse_meter(self, meter: dict[str, Any], where: str) -> PriceItem | None:
        sku = require(meter, "armSkuName", self.name, where, str)
        meter_name = require(meter, "meterName", self.name, where, str)
        product = require(meter, "productName", self.name, where, str)
        if meter.get("type", "Consumption") != "Consumption":
            return None
        if "Windows" in product or "Low Priority" in meter_name:
            return None
        if meter.get("unitOfMeasure", "1 Hour") != "1 Hour":
            return None
        region = require(meter, "armRegionName", self.name, where, str)
        if not region or region.endswith("euap"):  # canary regions nobody can rent in
            return None
        spec = gpu_of(sku)
        if spec is None:
            self.count("not_a_gpu_size")
            return None
        gpu, memory, count, vcpus = spec
        spot = meter_name.endswith(" Spot") or meter.get("skuName", "").endswith(" Spot")
        price = meter.get("retailPrice", meter.get("unitPrice"))
        return PriceItem(
            source=self.name, region=region, instance_type=sku,
            pricing="spot" if spot else "on_demand", gpu=gpu, gpu_count=count,
            gpu_memory_gb=memory, vcpus=vcpus, price=price,
            currency=meter.get("currencyCode", "USD"),
            attributes={"meter": meter_name, "product": product},
        )
