"""GCP Compute Engine and Cloud TPU: the Cloud Billing Catalog API (needs an API key).

Google prices resources, not machines: a vCPU-hour ("A2 Instance Core"), a GiB-hour of RAM
("A2 Instance Ram") and a GPU-hour ("Nvidia Tesla A100 GPU"), per region, on demand and as
Spot ("Preemptible"). So machine prices are assembled:

* accelerator-optimised machine types (a2, a3, g2) = vCPUs x core SKU + GiB x RAM SKU +
  GPUs x GPU SKU of that family and region (table `MACHINES` below);
* A4 (B200) is billed as one SKU per "1 gpu slice" that already covers the machine, so its
  price is GPUs x that SKU;
* G4 (RTX PRO 6000) exists only as whole machines (g4-standard-48/96/192/384 with 1/2/4/8
  GPUs): priced like the other accelerator-optimised machines, GPU + its cores + its RAM;
* GPUs that attach to N1 machines (T4, V100, P100, P4) are offered per GPU, `instance_type`
  the accelerator id ("nvidia-tesla-t4"), marked `price_basis: gpu_only`: the N1 VM is
  billed on top.

Each SKU prices one way of buying: on demand, Spot ("Spot Preemptible ...", or usage type
Preemptible), Flex-start ("... attached to DWS Defined Duration VMs", "DWS Defined Duration
A2 Core", "DWS Flex Start ...") or a calendar-mode reservation ("DWS Calendar Mode ...",
"Reserved V6e TPU in Columbus in Calendar Mode"); each becomes offers of its own pricing
kind, the reservation kinds with their documented terms. A machine Google does not sell
some way (`SOLD_AS` in the provider facts: A4, A3 Ultra and A3 High 1/2/4g are not sold on
demand) gets no offer of that kind although the catalog prices its parts: counted as
`not_on_demand` (or `kind_not_sold`) and named in the log.

TPUs are priced per chip-hour by SKUs of resource group "TPU": v5e, v5p, v6e and newer in
the Compute Engine service ("TpuV5e running in Delhi", "TpuV6e attached to Spot Preemptible
VMs running in Columbus"), v2, v3 and v4 in the Cloud TPU service `E000-3F24-B8AA`, whose
SKUs price an 8-TensorCore device of 4 chips ("Tpu-v4 Pod Accelerator USA"; "Pod" SKUs
price the slices of a pod). Both services are read with the same key. Each generation is
offered in the slice sizes users rent (v5litepod-1/4/8/..., v5p-8/..., v6e-1/...): slice
price = chips x price per chip, the accelerator count = chips. A TPU SKU of a generation not
in `TPU_GENERATIONS` is reported as uncatalogued, never dropped silently.

Skipped: commitments, reservations other than calendar mode, sole tenancy, premium/custom
and capacity-optimised SKUs. A GPU SKU whose description matches no known GPU (a renamed or new
SKU) is reported as uncatalogued. A machine whose core or RAM SKU is missing in a region is
not priced (counted).

The SKU lists are paged (`nextPageToken`); only a small index of the relevant unit prices is
kept across pages, and offers are assembled when the last page of the last service has
arrived.
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
from scrapy.http import Response
from twisted.python.failure import Failure

from gpuradar.core.items import PriceItem
from gpuradar.core.pricing import CALENDAR, FLEX_START, ON_DEMAND, SPOT
from gpuradar.core.providers.gcp import GCP, SOLD_AS, TERMS
from gpuradar.crawler.spiders.base import GpuRadarSpider, failed_request, require

PRICING_PAGE = "https://cloud.google.com/compute/gpus-pricing"
TPU_PRICING_PAGE = "https://cloud.google.com/tpu/pricing"


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
    # A4X: NVIDIA GB200 NVL72, a4x-highgpu-4g = 4 GPUs (744 GB HBM3e: 186 GB each), 140
    # vCPUs, 884 GB (Google's accelerator-optimized machine family page). Sold by
    # reservation only (SOLD_AS): its SKUs are recognised, never an offer.
    "gb200": GpuSku("NVIDIA GB200", 186, "nvidia-gb200", (("a4x-highgpu-4g", 4, 140, 884),),
                    "A4X"),
    # G4: the GPU count, vCPUs and GB of memory of each whole-GPU machine type, as Google's
    # accelerator-optimized machine family page tables them (1/2/4/8 GPUs, 48/96/192/384
    # vCPUs, 180/360/720/1440 GB). Its fractional vGPU shapes (g4-standard-6/12/24, Preview)
    # are not priced: how a GPU SKU bills a fraction was not confirmed.
    "rtx 6000 96gb": GpuSku("RTX 6000 96GB", 96, "nvidia-rtx-pro-6000",
                            (("g4-standard-48", 1, 48, 180), ("g4-standard-96", 2, 96, 360),
                             ("g4-standard-192", 4, 192, 720),
                             ("g4-standard-384", 8, 384, 1440)), "G4"),
}
# Other spellings Google has used for the same SKUs.
GPU_SKUS["h100 80gb mega"] = GPU_SKUS["h100 mega 80gb"] = GPU_SKUS["h100 80gb plus"]

@dataclass(frozen=True)
class TpuGeneration:
    """A TPU generation as the catalog sells it."""

    accelerator: str  # the name given to the accelerator catalog
    memory_gb: float  # HBM per chip
    chips_per_unit: int  # chips one SKU unit prices: 1 (per chip-hour) or 4 (a v2-8 device)
    slices: tuple[tuple[str, int], ...]  # (accelerator type, chips) priced by the plain SKU
    pod_slices: tuple[tuple[str, int], ...] = ()  # ... priced by the "Pod" SKU


def _slices(prefix: str, sizes: tuple[int, ...], per_chip: int) -> tuple[tuple[str, int], ...]:
    """Accelerator types named by their size: v5litepod-8 is 8 chips, v5p-8 (TensorCores,
    two per chip) is 4."""
    return tuple((f"{prefix}-{n}", n // per_chip) for n in sizes)


# Generation -> how it is sold. Slice names and sizes: Google's TPU docs (v2/v3 "TPU types",
# v4, v5e, v5p and v6e configuration tables). v2 and v3 sell an 8-core device (v2-8, v3-8)
# on demand and pod slices through "Pod" SKUs; every v4 configuration is a pod slice. The
# 4-chip SKU unit of the Cloud TPU service is how skypilot's and gpuhunt's catalog builders
# read it (the price of 8 TensorCores; Google's v2-8 list price, $4.50/h, is one such unit).
TPU_GENERATIONS: dict[str, TpuGeneration] = {
    "v2": TpuGeneration("TPU v2", 16, 4, _slices("v2", (8,), 2),
                        _slices("v2", (32, 128, 256, 512), 2)),
    "v3": TpuGeneration("TPU v3", 32, 4, _slices("v3", (8,), 2),
                        _slices("v3", (32, 64, 128, 256, 512, 1024, 2048), 2)),
    "v4": TpuGeneration("TPU v4", 32, 4, (),
                        _slices("v4", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), 2)),
    "v5e": TpuGeneration("TPU v5e", 16, 1,
                         _slices("v5litepod", (1, 4, 8, 16, 32, 64, 128, 256), 1)),
    "v5p": TpuGeneration("TPU v5p", 95, 1,
                         _slices("v5p", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                         8192, 12288), 2)),
    "v6e": TpuGeneration("TPU v6e", 32, 1, _slices("v6e", (1, 4, 8, 16, 32, 64, 128, 256), 1)),
    # TPU7x (Ironwood): named by TensorCores, two per chip, like v5p: tpu7x-8 is the 4-chip
    # VM of Google's TPU7x page (the accelerator type of Google's own TPU microbenchmarks,
    # AI-Hypercomputer/accelerator-microbenchmarks); the slice sizes and their chips
    # (7x-8: 2x2x1, 4 chips ... 7x-8192: 16x16x16, 4096) as Google's Pathways tooling tables
    # them. Its SKU ("TPU7x running in Americas") is read per chip-hour like every TPU SKU of
    # this service; no TPU7x list price was found to check that against.
    "7x": TpuGeneration("TPU7x", 192, 1,
                        _slices("tpu7x", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                          8192), 2)),
}
# "TpuV5e", "TpuV6e", "Tpu-v4", "TPU-v2", "TPU7x": the generation in a TPU SKU description.
_TPU = re.compile(r"\btpu[-\s]?(v?)(\d+[a-z]*)\b", re.IGNORECASE)
# "V6e" alone: how the Flex-start and calendar-mode TPU SKUs name the generation.
_BARE_TPU = re.compile(r"\b(v)(\d+[a-z]*)\b", re.IGNORECASE)

# "A2 Instance Core", "A3Plus Instance Ram", "G2 Instance Core" (after the Spot prefix).
_HOST = re.compile(r"^(A2|A3|A3Plus|A3Mega|A3Ultra|A3Edge|A4|A4X|G2|G4)\s+(?:Instance\s+)?"
                   r"(Core|Cpu|Ram)\b", re.IGNORECASE)
_SKIP_WORDS = ("sole tenancy", "commitment", "reserved", "reservation", "premium", "custom",
               "suspended", "virtual workstation", "capacity optimized")
# How a description names the way the SKU sells (after "Spot Preemptible", checked first):
# the words, then the pricing kind. Calendar mode first: its TPU SKUs also say "Reserved".
_KIND_WORDS = (("calendar mode", CALENDAR), ("dws defined duration", FLEX_START),
               ("dws flex start", FLEX_START), ("flex-start", FLEX_START))
# The words that say how a SKU sells, around the resource it prices.
_MODE_PREFIX = re.compile(r"^(?:spot preemptible|dws defined duration|dws flex start|"
                          r"dws calendar mode|reserved)\s+", re.IGNORECASE)
_MODE_SUFFIX = re.compile(r"\s+(?:in\s+\S+\s+)?in calendar mode$", re.IGNORECASE)
_UNITS = {"core": "h", "ram": "GiBy.h", "gpu": "h", "tpu": "h"}


def stem_of(description: str) -> str:
    """'Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas' ->
    'Nvidia Tesla T4 GPU', 'Reserved V6e TPU in Columbus in Calendar Mode' -> 'V6e TPU': the
    resource, without pricing mode and location."""
    stem = _MODE_PREFIX.sub("", description.strip())
    stem = _MODE_SUFFIX.sub("", stem)
    stem = re.sub(r"\s+attached to\s.*$", "", stem, flags=re.IGNORECASE)
    return re.sub(r"\s+running in\s.*$", "", stem, flags=re.IGNORECASE).strip()


def sku_kind(description: str, usage: str) -> str:
    """The pricing kind a SKU prices. Spot by usage type or wording (B200 spot SKUs have been
    published with usageType OnDemand), then the reservation kinds by wording."""
    lower = description.lower()
    if usage == "Preemptible" or "preemptible" in lower:
        return SPOT
    return next((kind for words, kind in _KIND_WORDS if words in lower), ON_DEMAND)


def tpu_generation(description: str) -> str | None:
    """'TpuV5e running in Delhi' -> 'v5e', 'Tpu-v4 Pod Accelerator USA' -> 'v4',
    'TPU7x running in Americas' -> '7x', 'DWS Defined Duration V6e running in Columbus' ->
    'v6e' (a SKU of resource group TPU); None when no TPU is named."""
    found = _TPU.search(description) or _BARE_TPU.search(description)
    return f"{found.group(1).lower()}{found.group(2).lower()}" if found else None


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
    """The unit prices that matter, by (what, region, pricing kind): small, kept across
    pages."""

    # ("core"|"ram", host family, region, kind) -> (regions the SKU covers, price, currency)
    host: dict[tuple[str, str, str, str], tuple[int, float | None, str]] = field(
        default_factory=dict)
    # (gpu key, region, kind) -> (regions the SKU covers, price, currency)
    gpu: dict[tuple[str, str, str], tuple[int, float | None, str]] = field(default_factory=dict)
    # (TPU generation, pod SKU, region, kind) -> (regions the SKU covers, price, currency)
    tpu: dict[tuple[str, bool, str, str], tuple[int, float | None, str]] = field(
        default_factory=dict)

    @staticmethod
    def _keep(table: dict, key: tuple, value: tuple[int, float | None, str]) -> None:
        # A region's own SKU wins over one that covers several regions ("... in Americas").
        if key not in table or value[0] <= table[key][0]:
            table[key] = value


class GcpSpider(GpuRadarSpider):
    facts = GCP
    services = ("skus", "tpu_skus")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = SkuIndex()
        self.tokens: set[str] = set()
        self.done = False

    # -- requests ------------------------------------------------------------------------
    def page_request(self, token: str | None = None, service: str = "skus") -> scrapy.Request:
        query = {"currencyCode": self.option("currency", "USD"),
                 "pageSize": int(self.option("page_size", 5000))}
        if token:
            query["pageToken"] = token
        headers = {"Accept": "application/json"}
        key = self.option("api_key")
        if key:  # a header, not `key=` in the URL: URLs end up in logs and recordings
            headers["X-Goog-Api-Key"] = str(key)
        return scrapy.Request(f"{self.endpoint(service)}?{urlencode(query)}", headers=headers,
                              callback=self.parse, errback=self.page_failed,
                              meta={"handle_httpstatus_list": [400, 401, 403]},
                              cb_kwargs={"service": service})

    def after_service(self, service: str) -> Iterator[PriceItem | scrapy.Request]:
        """The first page of the next service, or the offers once the last one is read."""
        rest = self.services[self.services.index(service) + 1:]
        if rest:
            yield self.page_request(service=rest[0])
        else:
            yield from self.assemble()

    async def start(self):
        if not self.option("api_key") and not self.settings.get("GPURADAR_REPLAY_DIR"):
            self.logger.error("gcp: no API key; set GCP_API_KEY or sources.gcp.api_key")
            return
        yield self.page_request()

    def page_failed(self, failure: Failure) -> Iterator[PriceItem | scrapy.Request]:
        service = failed_request(failure).cb_kwargs.get("service", "skus")
        self.logger.error("gcp: SKU page of %s failed (%s); offers from the pages read so far "
                          "are kept, nothing is closed", self.endpoint(service).split("/")[-2],
                          failure.getErrorMessage())
        yield from self.after_service(service)

    # -- parsing -------------------------------------------------------------------------
    def parse(self, response: Response, service: str = "skus", **kwargs: Any
              ) -> Iterator[PriceItem | scrapy.Request]:
        if response.status >= 400:
            try:
                message = json.loads(response.text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            self.logger.error("gcp: Cloud Billing API refused the request (HTTP %d): %s",
                              response.status, message)
            yield from self.after_service(service)
            return
        page = self.json_body(response)
        self.read_page(page, response.url)
        token = page.get("nextPageToken")
        if token and token not in self.tokens:
            self.tokens.add(token)
            yield self.page_request(token, service)
            return
        if token:
            self.logger.error("gcp: the API returned page token %r twice; stopping", token[:12])
        yield from self.after_service(service)

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
        tpu = category.get("resourceGroup") == "TPU"
        if category.get("resourceFamily") != "Compute" and not tpu:
            return
        usage = category.get("usageType")
        if usage not in ("OnDemand", "Preemptible"):
            return  # commitments (Commit1Yr, Commit3Yr, ...)
        kind, lower = sku_kind(description, usage), description.lower()
        stem = stem_of(description)
        # A calendar-mode SKU says "Reserved"; any other reserved or committed SKU is skipped
        # (many are $0 placeholders).
        if any(word in (stem.lower() if kind == CALENDAR else lower) for word in _SKIP_WORDS):
            return
        if tpu:
            self.read_tpu_sku(sku, description, kind, where)
            return
        host = _HOST.match(stem)
        if host:
            part = "ram" if host.group(2).lower() == "ram" else "core"
            what: tuple[str, str] = (part, host.group(1).upper())
        elif gpu_key(stem) in GPU_SKUS:
            what = ("gpu", gpu_key(stem))
        else:
            if category.get("resourceGroup") == "GPU" or " gpu" in f" {lower}":
                self.uncatalogued(stem, "a GPU SKU matching no known GPU: renamed or new?")
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
                self.index._keep(self.index.gpu, (what[1], region, kind), value)
            else:
                self.index._keep(self.index.host, (*what, region, kind), value)

    def read_tpu_sku(self, sku: Any, description: str, kind: str, where: str) -> None:
        """Index a TPU SKU's price by generation, pod-ness, region and pricing."""
        generation = tpu_generation(description)
        stem = stem_of(description)
        if generation not in TPU_GENERATIONS:
            self.uncatalogued(stem, "a TPU SKU of a generation gpuradar does not know")
            return
        pod = re.search(r"\bpod\b", description, re.IGNORECASE) is not None
        spec = TPU_GENERATIONS[generation]
        if not (spec.pod_slices if pod else spec.slices):
            self.uncatalogued(stem, f"TPU SKU pricing {'pod' if pod else 'device'} slices of "
                                    f"{generation}, which gpuradar has no sizes for")
            return
        price, currency, unit = unit_price(sku)
        if unit != _UNITS["tpu"]:
            self.count("unexpected_unit")
            self.warn_once(f"unit:{stem}", "gcp: SKU %r is priced per %r, expected %r; skipped",
                           stem, unit, _UNITS["tpu"])
            return
        regions = [r for r in require(sku, "serviceRegions", self.name, where, list)
                   if isinstance(r, str)]
        for region in regions:
            self.index._keep(self.index.tpu, (generation, pod, region, kind),
                             (len(regions), price, currency))

    def assemble(self) -> Iterator[PriceItem]:
        """Offers from the indexed unit prices; once per crawl."""
        if self.done:
            return
        self.done = True
        yield from self.tpu_offers()
        incomplete: set[str] = set()
        not_sold: set[str] = set()
        for (key, region, pricing), (_, gpu_price, currency) in sorted(self.index.gpu.items()):
            spec = GPU_SKUS[key]
            if not spec.machines:
                yield self.item(spec.accelerator, spec, region, pricing, 1, None, None,
                                gpu_price, currency, {"price_basis": "gpu_only"})
                continue
            for machine, gpus, vcpus, ram in spec.machines:
                if pricing not in SOLD_AS.get(machine, (pricing,)):
                    self.count("not_on_demand" if pricing == ON_DEMAND else "kind_not_sold")
                    not_sold.add(f"{machine} {pricing.replace('_', '-')}")
                    continue
                if spec.bundled:
                    total = None if gpu_price is None else gpus * gpu_price
                    yield self.item(machine, spec, region, pricing, gpus, vcpus, ram, total,
                                    currency, {"gpu_unit_price": gpu_price, "bundled": True})
                    continue
                core = self.index.host.get(("core", spec.host or "", region, pricing))
                mem = self.index.host.get(("ram", spec.host or "", region, pricing))
                parts = (gpu_price, core and core[1], mem and mem[1])
                if core is None or mem is None or not all(p and p > 0 for p in parts):
                    self.count("incomplete_price")
                    incomplete.add(f"{machine} {region} {pricing}")
                    continue
                if {currency, core[2], mem[2]} != {currency}:
                    self.count("currency_mismatch")
                    continue
                # every part is there and positive (`parts`, checked above)
                total = vcpus * core[1] + ram * mem[1] + gpus * gpu_price  # type: ignore[operator]
                yield self.item(machine, spec, region, pricing, gpus, vcpus, ram,
                                round(total, 6), currency,
                                {"gpu_unit_price": gpu_price, "core_unit_price": core[1],
                                 "ram_unit_price": mem[1]})
        if not_sold:
            self.logger.info("gcp: not sold that way, so no offer although the catalog prices "
                             "the parts (Google's consumption options): %s",
                             ", ".join(sorted(not_sold)))
        if incomplete:
            shown = sorted(incomplete)
            self.logger.warning("gcp: %d machine prices not assembled (a core, RAM or GPU SKU "
                                "is missing or unpriced): %s%s", len(shown), ", ".join(shown[:8]),
                                " ..." if len(shown) > 8 else "")

    def tpu_offers(self) -> Iterator[PriceItem]:
        """Every slice size of every indexed TPU price: chips x the price per chip."""
        for (generation, pod, region, pricing), (_, unit, currency) in sorted(
                self.index.tpu.items()):
            spec = TPU_GENERATIONS[generation]
            # Exact: the unit price has at most 9 decimals and is divided by 1 or 4 chips.
            per_chip = None if unit is None else unit / spec.chips_per_unit
            for instance_type, chips in spec.pod_slices if pod else spec.slices:
                price = None if per_chip is None else round(per_chip * chips, 6)
                yield PriceItem(source=self.name, region=region, instance_type=instance_type,
                                pricing=pricing, gpu=spec.accelerator,
                                gpu_count=chips, gpu_memory_gb=spec.memory_gb, price=price,
                                currency=currency or "USD", url=TPU_PRICING_PAGE,
                                attributes=with_terms({"chip_unit_price": per_chip}, pricing))

    def item(self, instance_type: str, spec: GpuSku, region: str, pricing: str,
             gpus: float, vcpus: float | None, ram: float | None, price: float | None,
             currency: str, attributes: dict[str, Any]) -> PriceItem:
        return PriceItem(source=self.name, region=region, instance_type=instance_type,
                         pricing=pricing, gpu=spec.gpu, gpu_count=gpus,
                         gpu_memory_gb=spec.memory_gb, vcpus=vcpus, memory_gb=ram, price=price,
                         currency=currency or "USD", url=PRICING_PAGE,
                         attributes=with_terms(attributes, pricing))


def with_terms(attributes: dict[str, Any], pricing: str) -> dict[str, Any]:
    """An offer's attributes with the documented terms of its reservation kind, if any."""
    terms = TERMS.get(pricing)
    return {**attributes, "terms": dict(terms)} if terms else attributes

