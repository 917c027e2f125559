"""GCP Compute Engine: the Cloud Billing Catalog API (needs an API key).

Google prices resources, not machines: a vCPU-hour ("A2 Instance Core"), a GiB-hour of RAM
("A2 Instance Ram") and a GPU-hour ("Nvidia Tesla A100 GPU"), per region, on demand and as
Spot ("Preemptible"). So machine prices are assembled:

* accelerator-optimised machine types (a2, a3, g2) = vCPUs x core SKU + GiB x RAM SKU +
  GPUs x GPU SKU of that family and region (table `MACHINES` below);
* A4 (B200) is billed as one SKU per "1 gpu slice" that already covers the machine, so its
  price is GPUs x that SKU;
* GPUs that attach to N1 machines (T4, V100, P100, P4) and GPUs without a machine table here
  (RTX PRO 6000) are offered per GPU, `instance_type` the accelerator id
  ("nvidia-tesla-t4"), marked `price_basis: gpu_only`: the N1 VM is billed on top.

Skipped: commitments, reservations, sole tenancy, premium/custom, DWS/calendar-mode SKUs. A
GPU SKU whose description matches no known GPU (a renamed or new SKU) is counted and logged
once. A machine whose core or RAM SKU is missing in a region is not priced (counted).

The SKU list is paged (`nextPageToken`); only a small index of the relevant unit prices is
kept across pages, and offers are assembled when the last page has arrived.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import scrapy
from gpuradar.crawler.spiders.base import GpuRadarSpider, require
from scrapy.http import Response
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from gpuradar.core.interconnect import family
from gpuradar.core.items import PriceItem

PRICING_PAGE = "https://cloud.google.com/compute/gpus-pricing"


@dataclass(frozen=True)
class GpuSku:
    """What a GPU SKU description names: the GPU and how it is sold."""

    gpu: str  # the name given to the catalog
    memory_gb: float
    accelerator: str  # GCP accelerator id, the instance_type of per-GPU offers
    machines: tuple[tuple[str, int, int, float], ...] = ()  # (type, GPUs, vCPUs, RAM GiB)
    host: str | None = None  # core/RAM SKU family; None: per-GPU or bundled offers
    bundled: bool = False  # the GPU SKU covers the whole machine (A4 "gpu slice")


_A2 = (("a2-highgpu-1g", 1, 12, 85), ("a2-highgpu-2g", 2, 24, 170),
       ("a2-highgpu-4g", 4, 48, 340), ("a2-highgpu-8g", 8, 96, 680),
       ("a2-megagpu-16g", 16, 96, 1360))
_A2_ULTRA = (("a2-ultragpu-1g", 1, 12, 170), ("a2-ultragpu-2g", 2, 24, 340),
             ("a2-ultragpu-4g", 4, 48, 680), ("a2-ultragpu-8g", 8, 96, 1360))
_A3_HIGH = (("a3-highgpu-1g", 1, 26, 234), ("a3-highgpu-2g", 2, 52, 468),
            ("a3-highgpu-4g", 4, 104, 936), ("a3-highgpu-8g", 8, 208, 1872),
            ("a3-edgegpu-8g", 8, 208, 1872))
_G2 = (("g2-standard-4", 1, 4, 16), ("g2-standard-8", 1, 8, 32), ("g2-standard-12", 1, 12, 48),
       ("g2-standard-16", 1, 16, 64), ("g2-standard-24", 2, 24, 96),
       ("g2-standard-32", 1, 32, 128), ("g2-standard-48", 4, 48, 192),
       ("g2-standard-96", 8, 96, 384))

# Normalised description stem (words other than nvidia/tesla/gpu, lower case) -> GPU.
GPU_SKUS: dict[str, GpuSku] = {
    "t4": GpuSku("Nvidia Tesla T4", 16, "nvidia-tesla-t4"),
    "p4": GpuSku("Nvidia Tesla P4", 8, "nvidia-tesla-p4"),
    "v100": GpuSku("Nvidia Tesla V100", 16, "nvidia-tesla-v100"),
    "p100": GpuSku("Nvidia Tesla P100", 16, "nvidia-tesla-p100"),
    "k80": GpuSku("Nvidia Tesla K80", 12, "nvidia-tesla-k80"),
    "a100": GpuSku("Nvidia Tesla A100", 40, "nvidia-tesla-a100", _A2, "A2"),
    "a100 80gb": GpuSku("Nvidia A100 80GB", 80, "nvidia-a100-80gb", _A2_ULTRA, "A2"),
    "h100 80gb": GpuSku("Nvidia H100 80GB", 80, "nvidia-h100-80gb", _A3_HIGH, "A3"),
    "h100 80gb plus": GpuSku("Nvidia H100 80GB Plus", 80, "nvidia-h100-mega-80gb",
                             (("a3-megagpu-8g", 8, 208, 1872),), "A3PLUS"),
    "h200 141gb": GpuSku("Nvidia H200 141GB", 141, "nvidia-h200-141gb",
                         (("a3-ultragpu-8g", 8, 224, 2952),), "A3ULTRA"),
    "l4": GpuSku("Nvidia L4", 24, "nvidia-l4", _G2, "G2"),
    "a4 b200 1 slice": GpuSku("NVIDIA B200", 180, "nvidia-b200",
                              (("a4-highgpu-8g", 8, 224, 3968),), None, bundled=True),
    "rtx 6000 96gb": GpuSku("RTX 6000 96GB", 96, "nvidia-rtx-pro-6000"),
}
# Other spellings Google has used for the same SKUs.
GPU_SKUS["h100 80gb mega"] = GPU_SKUS["h100 mega 80gb"] = GPU_SKUS["h100 80gb plus"]

# "A2 Instance Core", "A3Plus Instance Ram", "G2 Instance Core" (after the Spot prefix).
_HOST = re.compile(r"^(A2|A3|A3Plus|A3Mega|A3Ultra|A3Edge|A4|A4X|G2|G4)\s+(?:Instance\s+)?"
                   r"(Core|Cpu|Ram)\b", re.IGNORECASE)
_SKIP_WORDS = ("sole tenancy", "commitment", "reserved", "reservation", "premium", "custom",
               "dws", "calendar mode", "flex-start", "suspended", "virtual workstation")
_UNITS = {"core": "h", "ram": "GiBy.h", "gpu": "h"}


def stem_of(description: str) -> str:
    """'Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas' ->
    'Nvidia Tesla T4 GPU': the resource, without pricing mode and location."""
    stem = re.sub(r"^spot preemptible\s+", "", description.strip(), flags=re.IGNORECASE)
    stem = re.sub(r"\s+attached to\s.*$", "", stem, flags=re.IGNORECASE)
    return re.sub(r"\s+running in\s.*$", "", stem, flags=re.IGNORECASE).strip()


def gpu_key(stem: str) -> str:
    words = re.findall(r"[a-z0-9]+", stem.lower())
    return " ".join(w for w in words if w not in ("nvidia", "tesla", "gpu"))


def unit_price(sku: dict[str, Any]) -> tuple[float | None, str, str]:
    """(price per unit, currency, usage unit) of the list-price tier; price None when the
    SKU carries no usable number (absent, not numeric, NaN, negative)."""
    infos = sku.get("pricingInfo") or []
    expression = (infos[0] if infos else {}).get("pricingExpression") or {}
    rates = expression.get("tieredRates") or []
    rate = next((r for r in rates if not r.get("startUsageAmount")), rates[0] if rates else {})
    price = rate.get("unitPrice") or {}
    currency = str(price.get("currencyCode") or "")
    try:
        value = float(price.get("units") or 0) + float(price.get("nanos") or 0) / 1e9
    except (TypeError, ValueError):
        return None, currency, str(expression.get("usageUnit") or "")
    if not price or math.isnan(value) or math.isinf(value) or value < 0:
        return None, currency, str(expression.get("usageUnit") or "")
    return round(value, 9), currency, str(expression.get("usageUnit") or "")


@dataclass
class SkuIndex:
    """The unit prices that matter, by (what, region, spot): small, kept across pages."""

    # ("core"|"ram", host family, region, spot) -> (regions the SKU covers, price, currency)
    host: dict[tuple[str, str, str, bool], tuple[int, float | None, str]] = field(
        default_factory=dict)
    # (gpu key, region, spot) -> (regions the SKU covers, price, currency)
    gpu: dict[tuple[str, str, bool], tuple[int, float | None, str]] = field(default_factory=dict)
    skus: int = 0

    @staticmethod
    def _keep(table: dict, key: tuple, value: tuple[int, float | None, str]) -> None:
        # A region's own SKU wins over one that covers several regions ("... in Americas").
        if key not in table or value[0] <= table[key][0]:
            table[key] = value


class GcpSpider(GpuRadarSpider):
    name = "gcp"
    endpoints = {"skus": "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"}
    credentials = {"api_key": "GCP_API_KEY"}
    requires_credentials = True
    default_interval = 3600
    #: What links the GPUs of a multi-GPU offer, by instance family (first match wins):
    #: read by the pipeline and `recommend` (gpuradar.core.interconnect).
    # fmt: off
    interconnect = (
        family(r"^a4x-", "nvswitch", "rdma", "GB200 NVL72, GPUDirect-RDMA (RoCE)"),
        family(r"^a4-highgpu-8g$", "nvswitch", "rdma", "B200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        family(r"^a3-ultragpu-8g$", "nvswitch", "rdma", "H200 NVSwitch, GPUDirect-RDMA (RoCE)"),
        family(r"^a3-megagpu-8g$", "nvswitch", "gpudirect-tcpxo", "H100 NVSwitch, GPUDirect-TCPXO"),
        family(r"^a3-highgpu-8g$", "nvswitch", "gpudirect-tcpx", "H100 NVSwitch, GPUDirect-TCPX"),
        family(r"^a3-(high|edge)gpu-", "nvswitch", None, "H100 NVSwitch"),
        family(r"^a2-(high|mega|ultra)gpu-", "nvswitch", None, "A100 NVSwitch"),
        family(r"^g\d-", "pcie", None, "PCIe GPUs"),
    )
    # fmt: on
    notes = ("Cloud Billing Catalog SKUs; machine prices assembled from core + RAM + GPU SKUs; "
             "N1 GPUs per GPU. Needs an API key.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = SkuIndex()
        self.tokens: set[str] = set()
        self.done = False

    @classmethod
    def describe_status(cls, settings: BaseSettings, opts: dict[str, Any]
                        ) -> tuple[bool, str]:
        if not opts.get("api_key"):
            return False, ("needs a Google Cloud API key with the Cloud Billing API enabled: "
                           "set GCP_API_KEY or sources.gcp.api_key")
        configured = (settings.getdict("GPURADAR_SOURCES").get(cls.name) or {}).get("api_key")
        return True, "API key from " + ("sources.gcp.api_key" if configured else "GCP_API_KEY")

    # -- requests ------------------------------------------------------------------------
    def page_request(self, token: str | None = None) -> scrapy.Request:
        query = {"currencyCode": self.option("currency", "USD"),
                 "pageSize": int(self.option("page_size", 5000))}
        if token:
            query["pageToken"] = token
        headers = {"Accept": "application/json"}
        key = self.option("api_key")
        if key:  # a header, not `key=` in the URL: URLs end up in logs and recordings
            headers["X-Goog-Api-Key"] = str(key)
        return scrapy.Request(f"{self.endpoint('skus')}?{urlencode(query)}", headers=headers,
                              callback=self.parse, errback=self.page_failed,
                              meta={"handle_httpstatus_list": [400, 401, 403]})

    async def start(self):
        if not self.option("api_key") and not self.settings.get("GPURADAR_REPLAY_DIR"):
            self.logger.error("gcp: no API key; set GCP_API_KEY or sources.gcp.api_key")
            return
        yield self.page_request()

    def page_failed(self, failure: Failure) -> Iterator[PriceItem]:
        self.logger.error("gcp: SKU page failed (%s); offers from the pages read so far are "
                          "kept, nothing is closed", failure.getErrorMessage())
        yield from self.assemble()

    # -- parsing -------------------------------------------------------------------------
    def parse(self, response: Response, **kwargs: Any) -> Iterator[PriceItem | scrapy.Request]:
        if response.status >= 400:
            try:
                message = json.loads(response.text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            self.logger.error("gcp: Cloud Billing API refused the request (HTTP %d): %s",
                              response.status, message)
            yield from self.assemble()
            return
        page = self.json_body(response)
        self.read_page(page, response.url)
        token = page.get("nextPageToken")
        if token and token not in self.tokens:
            self.tokens.add(token)
            yield self.page_request(token)
            return
        if token:
            self.logger.error("gcp: the API returned page token %r twice; stopping", token[:12])
        yield from self.assemble()

    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """One saved SKU page, assembled on its own (`gpuradar parse gcp FILE`)."""
        self.index, self.done = SkuIndex(), False
        self.read_page(self.json_body(response), response.url)
        yield from self.assemble()


    def read_page(self, page: Any, where: str) -> None:
        skus = require(page, "skus", self.name, where, list)
        for i, sku in enumerate(skus):
            self.read_sku(sku, f"{where} skus[{i}]")

    def read_sku(self, sku: Any, where: str) -> None:
        description = require(sku, "description", self.name, where, str)
        category = require(sku, "category", self.name, where, dict)
        if category.get("resourceFamily") != "Compute":
            return
        usage = category.get("usageType")
        if usage not in ("OnDemand", "Preemptible"):
            return  # commitments (Commit1Yr, Commit3Yr, ...)
        lower = description.lower()
        if any(word in lower for word in _SKIP_WORDS):
            return
        self.index.skus += 1
        # B200 spot SKUs have been published with usageType OnDemand: the wording decides.
        spot = usage == "Preemptible" or "spot preemptible" in lower
        stem = stem_of(description)
        host = _HOST.match(stem)
        if host:
            kind = "ram" if host.group(2).lower() == "ram" else "core"
            what: tuple[str, str] = (kind, host.group(1).upper())
        elif gpu_key(stem) in GPU_SKUS:
            what = ("gpu", gpu_key(stem))
        else:
            if category.get("resourceGroup") == "GPU" or " gpu" in f" {lower}":
                self.count("unmatched_gpu_sku")
                self.warn_once(stem, "gcp: GPU SKU %r matches no known GPU (renamed or new?); "
                               "skipped", stem)
            return
        price, currency, unit = unit_price(sku)
        if unit != _UNITS[what[0]]:
            self.count("unexpected_unit")
            self.warn_once(f"unit:{stem}", "gcp: SKU %r is priced per %r, expected %r; skipped",
                           stem, unit, _UNITS[what[0]])
            return
        regions = [r for r in require(sku, "serviceRegions", self.name, where, list)
                   if isinstance(r, str)]
        for region in regions:
            value = (len(regions), price, currency)
            if what[0] == "gpu":
                self.index._keep(self.index.gpu, (what[1], region, spot), value)
            else:
                self.index._keep(self.index.host, (*what, region, spot), value)

    def assemble(self) -> Iterator[PriceItem]:
        """Offers from the indexed unit prices; once per crawl."""
        if self.done:
            return
        self.done = True
        incomplete: set[str] = set()
        for (key, region, spot), (_, gpu_price, currency) in sorted(self.index.gpu.items()):
            spec = GPU_SKUS[key]
            pricing = "spot" if spot else "on_demand"
            if not spec.machines:
                yield self.item(spec.accelerator, spec, region, pricing, 1, None, None,
                                gpu_price, currency, {"price_basis": "gpu_only"})
                continue
            for machine, gpus, vcpus, ram in spec.machines:
                if spec.bundled:
                    total = None if gpu_price is None else gpus * gpu_price
                    yield self.item(machine, spec, region, pricing, gpus, vcpus, ram, total,
                                    currency, {"gpu_unit_price": gpu_price, "bundled": True})
                    continue
                core = self.index.host.get(("core", spec.host or "", region, spot))
                mem = self.index.host.get(("ram", spec.host or "", region, spot))
                parts = (gpu_price, core and core[1], mem and mem[1])
                if core is None or mem is None or not all(p and p > 0 for p in parts):
                    self.count("incomplete_price")
                    incomplete.add(f"{machine} {region} {pricing}")
                    continue
                if {currency, core[2], mem[2]} != {currency}:
                    self.count("currency_mismatch")
                    continue
                total = vcpus * core[1] + ram * mem[1] + gpus * gpu_price  # type: ignore[operator]
                yield self.item(machine, spec, region, pricing, gpus, vcpus, ram,
                                round(total, 6), currency,
                                {"gpu_unit_price": gpu_price, "core_unit_price": core[1],
                                 "ram_unit_price": mem[1]})
        if incomplete:
            shown = sorted(incomplete)
            self.logger.warning("gcp: %d machine prices not assembled (a core, RAM or GPU SKU "
                                "is missing or unpriced): %s%s", len(shown), ", ".join(shown[:8]),
                                " ..." if len(shown) > 8 else "")

    def item(self, instance_type: str, spec: GpuSku, region: str, pricing: str,
             gpus: float, vcpus: float | None, ram: float | None, price: float | None,
             currency: str, attributes: dict[str, Any]) -> PriceItem:
        return PriceItem(source=self.name, region=region, instance_type=instance_type,
                         pricing=pricing, gpu=spec.gpu, gpu_count=gpus,
                         gpu_memory_gb=spec.memory_gb, vcpus=vcpus, memory_gb=ram, price=price,
                         currency=currency or "USD", url=PRICING_PAGE, attributes=attributes)

