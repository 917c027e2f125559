"""Azure: the public Retail Prices API (no credentials).

One paginated chain per region, one region after the other: `$filter` with `armRegionName eq
'<region>'` and that region's own `NextPageLink` chain, not one ~100-page `$skip` chain over
every region, whose pages shift when a price changes during the walk (an item moved across a
page boundary is read twice or never). The regions are `sources.azure.regions`, by default
the programmatic names of Microsoft's public "Azure regions list" (see
core/providers/azure.py); a region with no GPU meter answers one empty page. An answer that
is not HTTP 200 loses that region alone, its pages read before included (one ERROR line; the
crawl is partial and closes nothing); a host that cannot be reached, or an answer gpuradar
cannot read, stops the walk. Asked per region: `type eq 'Consumption'` VM meters of the
N-series (the GPU families), primary meter regions only (`meterRegion='primary'`), Linux
only: a product named "... Windows" or "... Srs Win" carries the Windows licence and is
skipped, as are "Low Priority" meters (the retired low-priority offer, replaced by Spot). A
meter whose `meterName` or `skuName` ends in " Spot" is the spot price.

One offer, one price: Azure lists several meters for one size, region and pricing when a
price changes (`effectiveStartDate`); the one in effect is the latest that is not in the
future. Meters of one offer can sit on different pages, so every region's chain is read to
its end before any offer is yielded.

The GPU comes from the size name, read the way Azure documents it (family, vCPUs, additive
features, accelerator, version: `Standard_ND96is_noIB_H100_v5` is family ND, 96 vCPUs,
features "is", accelerator H100, version 5), and the GPU count from Azure's size tables for
that family, accelerator and version by vCPU count. So a new variant of a known series is
understood without a code change; a size whose accelerator or count is not documented here is
reported as uncatalogued (crawl summary, `gpuradar sources`, metric), never dropped silently.

With a service principal (`tenant_id`, `client_id`, `client_secret`, `subscription_id`, or
AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_SUBSCRIPTION_ID), a size of a
known series whose vCPU count the size table lacks takes its GPU count from the Resource SKUs
API instead: a client-credentials token from Microsoft Entra ID (`POST
login.microsoftonline.com/{tenant}/oauth2/v2.0/token`, scope
https://management.azure.com/.default), then `GET management.azure.com/subscriptions/{id}/
providers/Microsoft.Compute/skus?api-version=2021-07-01` to the end of its `nextLink` chain,
each `virtualMachines` entry's capability `GPUs`, and its `restrictions` of type Location: a
size this subscription cannot use in a region (NotAvailableForSubscription, QuotaId) is
stored unavailable there, the reason kept as `restriction`. Both run beside the price walk;
the offers are yielded once both have ended. Not for a series sold as GPU partitions (the table's
fractional counts: NVadsA10 v5, NC RTX PRO 6000 BSE v6, ...): that API counts a partition as
a whole GPU (skypilot-org/skypilot#3708, Standard_NV6ads_A10_v5 tagged one GPU), so such a
size stays uncatalogued, saying why. A failed token or SKU call is one ERROR line: the crawl
stores what the table knows and is `partial`, so the offers only that answer could count are
not closed. The token exchange is never recorded (`dont_record`) and never replayed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode, urlsplit

import scrapy
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.azure import AZURE, EVICTION_SOURCE, REGIONS
from gpuradar.core.spot import band_bounds
from gpuradar.crawler.spiders.base import (
    GpuRadarSpider,
    ParseError,
    failed_request,
    require,
    warn_once_per_process,
)

# -- sizes -------------------------------------------------------------------------------
# Azure size naming (learn.microsoft.com/azure/virtual-machines/vm-naming-conventions):
# [Family][Sub-family]#vCPUs[-constrained vCPUs][Additive features][_Accelerator][_Version].
# Some sizes carry extra tokens next to the accelerator ("noIB", "NDR", "xl") and features
# with digits ("isrG5"); both are variants, not other GPUs.
_SIZE = re.compile(r"^(?:Standard_)?(?P<family>N[A-Z]*?)(?P<vcpus>\d+)(?:-\d+)?"
                   r"(?P<features>[a-z][A-Za-z0-9]*)?(?P<tokens>(?:_[A-Za-z0-9]+)*?)"
                   r"(?:_(?P<version>v\d+))?(?:_Promo)?$")
# Families of the N prefix that hold no GPU.
_NOT_GPU_FAMILIES = {"NP"}  # Xilinx FPGAs


@dataclass(frozen=True)
class Series:
    """One size series of Azure's size tables: the GPU and, by vCPU count, how many; and the
    vCPU counts of sizes Microsoft retired (still priced, no longer deployable)."""

    gpu: str
    memory_gb: float | None
    gpus_by_vcpus: dict[int, float]
    retired: frozenset[int] = frozenset()

    @property
    def partitioned(self) -> bool:
        """Whether the series sells GPU partitions (a fractional count in its table)."""
        return any(count != int(count) for count in self.gpus_by_vcpus.values())


# (family, accelerator token or None when the name carries none, version) -> series, from
# Azure's size pages (github.com/MicrosoftDocs/azure-compute-docs, articles/virtual-machines/
# sizes/gpu-accelerated/*-series.md, "Accelerators" tables; read 2026-11-30). Fractions are
# the GPU partitions Azure sells (NVadsA10 v5: 1/6 of an A10).
SERIES: dict[tuple[str, str | None, str], Series] = {
    ("NC", None, "v1"): Series("K80", 12, {6: 1, 12: 2, 24: 4}),
    ("NC", None, "v2"): Series("P100", 16, {6: 1, 12: 2, 24: 4}),
    ("NC", None, "v3"): Series("V100", 16, {6: 1, 12: 2, 24: 4}),
    ("NC", "T4", "v3"): Series("T4", 16, {4: 1, 8: 1, 16: 1, 64: 4}),
    ("NC", "A10", "v4"): Series("A10", 24, {8: 1, 16: 1, 32: 2}),
    ("NC", "A100", "v4"): Series("A100 PCIe", 80, {24: 1, 48: 2, 96: 4}),
    ("NC", "H100", "v5"): Series("H100 NVL", 94, {40: 1, 80: 2}),
    ("NCC", "H100", "v5"): Series("H100 NVL", 94, {40: 1}),
    # NC RTX PRO 6000 BSE v6, generally available since 2026-06: the GA sizes of
    # learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nc-rtxpro6000-bse-v6-series
    # ("ds" and "lds" sizes share vCPU counts and GPU shares; GPUs partitioned by SR-IOV: 24
    # and 36 vCPUs a quarter GPU, 72 a half, 144 one, 288 two; the series' "Accelerators
    # 0.25 - 2", MicrosoftDocs/azure-compute-docs includes/nc-rtxpro6000-bse-v6-series-specs.md).
    # The preview sizes (128, 256, 320 vCPUs) "will no longer work correctly" since GA
    # (nc-rtxpro6000-bse-v6-series-overview.md, 2026-06-03): reported, not stored. Sizes no
    # Microsoft page lists (8, 16, 132, 264, 324 vCPUs on the price pages) stay uncatalogued.
    ("NC", "RTXPRO6000BSE", "v6"): Series("RTX PRO 6000", 96,
                                          {24: 1 / 4, 36: 1 / 4, 72: 1 / 2, 144: 1, 288: 2},
                                          retired=frozenset({128, 256, 320})),
    ("ND", None, "v1"): Series("P40", 24, {6: 1, 12: 2, 24: 4}),
    ("ND", None, "v2"): Series("V100", 32, {40: 8}),
    ("ND", None, "v4"): Series("A100 SXM", 40, {96: 8}),
    ("ND", "A100", "v4"): Series("A100 SXM", 80, {96: 8}),
    ("ND", "H100", "v5"): Series("H100 SXM", 80, {96: 8}),
    ("ND", "H200", "v5"): Series("H200", 141, {96: 8}),
    ("ND", "MI300X", "v5"): Series("MI300X", 192, {96: 8}),
    ("ND", "GB200", "v6"): Series("GB200", 186, {128: 4}),
    ("ND", "GB300", "v6"): Series("GB300", 288, {128: 4}),
    ("NG", "V620", "v1"): Series("Radeon Pro V620", 32, {8: 1 / 4, 16: 1 / 2, 32: 1}),
    ("NV", None, "v1"): Series("M60", 8, {6: 1, 12: 2, 24: 4}),
    ("NV", None, "v3"): Series("M60", 8, {12: 1, 24: 2, 48: 4}),
    ("NV", None, "v4"): Series("MI25", 16, {4: 1 / 8, 8: 1 / 4, 16: 1 / 2, 32: 1}),
    ("NV", "A10", "v5"): Series("A10", 24, {6: 1 / 6, 12: 1 / 3, 18: 1 / 2, 36: 1, 72: 2}),
    ("NV", "V710", "v5"): Series("V710", 28, {4: 1 / 6, 8: 1 / 3, 12: 1 / 2, 24: 1, 28: 1}),
}
ACCELERATORS = frozenset(acc for _, acc, _ in SERIES if acc)
# The compact form of a size name (no "Standard_", no underscores), as in `meterName` and
# `skuName` and, per a third-party adapter, some `armSkuName`s: family, vCPUs, features,
# accelerator, version run together ("NC8dsxlRTX6Kv6").
_COMPACT = re.compile(r"^(?P<family>N[A-Z]*?)(?P<vcpus>\d+)(?P<features>[a-z]*)"
                      r"(?P<accelerator>[A-Z][A-Za-z0-9]*?)?(?P<version>v\d+)$")
# Compact accelerator spellings, from real meters: `meterName` "NC36dsxlRTX6kv6" of
# `armSkuName` "Standard_NC36ds_xl_RTXPRO6000BSE_v6" (tests/fixtures/azure/westus_real_rows.json).
_COMPACT_ACCELERATORS = {"RTX6K": "RTXPRO6000BSE"}


class Size(NamedTuple):
    """What gpuradar reads from an Azure size name."""

    gpu: str
    memory_gb: float | None
    count: float  # type: ignore[assignment]  # shadows tuple.count, which nothing calls
    vcpus: int


class NotAGpu(ValueError):
    """An N-prefixed size that holds no GPU (FPGA)."""


class Uncatalogued(ValueError):
    """A GPU size whose accelerator or GPU count is not in SERIES: why, in one phrase."""


class UnlistedSize(Uncatalogued):
    """A size of a series SERIES knows (so its GPU is known) with a vCPU count its table does
    not list: only the GPU count is missing."""

    def __init__(self, why: str, series: Series, vcpus: int, label: str) -> None:
        super().__init__(why)
        self.series, self.vcpus, self.label = series, vcpus, label


def size_of(arm_sku_name: str) -> Size:
    """The GPU, its memory, the GPU count and the vCPUs of an Azure N-series size.

    Raises NotAGpu for a size without a GPU and Uncatalogued when the name does not say which
    accelerator, or Azure's size table for that series does not list the vCPU count."""
    if not arm_sku_name.startswith("Standard_") and "_" not in arm_sku_name:
        fam, vcpus, accelerator, version, tokens = _compact(arm_sku_name)
    else:
        m = _SIZE.match(arm_sku_name)
        if m is None:
            if not arm_sku_name.removeprefix("Standard_").startswith("N"):
                raise NotAGpu(arm_sku_name)
            raise Uncatalogued("the size name does not follow Azure's naming")
        fam, vcpus = m["family"], int(m["vcpus"])
        version = m["version"] or "v1"
        tokens = [t for t in (m["tokens"] or "").split("_") if t]
        accelerators = [t for t in tokens if t in ACCELERATORS]
        accelerator = accelerators[0] if accelerators else None
    if fam in _NOT_GPU_FAMILIES:
        raise NotAGpu(arm_sku_name)
    series = SERIES.get((fam, accelerator, version))
    if series is None:
        what = f" {'/'.join(tokens)}" if tokens else ""
        raise Uncatalogued(f"series {fam}{what} {version} is not in gpuradar's Azure size table")
    if vcpus in series.retired:
        raise Uncatalogued(f"a {fam} {accelerator or series.gpu} {version} size Microsoft "
                           f"retired (no longer deployable)")
    count = series.gpus_by_vcpus.get(vcpus)
    if count is None:
        label = f"{fam} {accelerator or series.gpu} {version}"
        raise UnlistedSize(f"Azure's size table for {label} lists no size with {vcpus} vCPUs "
                           f"(GPU count unknown)", series, vcpus, label)
    return Size(series.gpu, series.memory_gb, count, vcpus)


def _compact(name: str) -> tuple[str, int, str | None, str, list[str]]:
    """Family, vCPUs, accelerator, version and raw tokens of a compact size name; only a
    compact name whose accelerator is known is read (any other could be mistaken for the
    accelerator-less first series of its family)."""
    m = _COMPACT.match(name)
    if m is None:
        if not name.startswith("N"):
            raise NotAGpu(name)
        raise Uncatalogued("the size name does not follow Azure's naming")
    raw = m["accelerator"] or ""
    accelerator = _COMPACT_ACCELERATORS.get(raw.upper(), raw if raw in ACCELERATORS else None)
    if accelerator is None:
        raise Uncatalogued(f"compact size name with accelerator {raw or 'none'!r} unknown to "
                           f"gpuradar's Azure size table")
    return m["family"], int(m["vcpus"]), accelerator, m["version"], [raw]


# -- meters ------------------------------------------------------------------------------
_WINDOWS = re.compile(r"\bWin(dows)?\b")
_EPOCH = datetime.min.replace(tzinfo=UTC)


class _Meter(NamedTuple):
    """The candidate meter of one offer (region, size, pricing), before the one in effect is
    picked: only what the offer is built from. A crawl holds one per offer until the chain
    ends (100,000 of them for a large catalog), so not the meter's whole JSON object; the
    strings many meters share (names, dates, the page URL) are one object each."""

    effective: datetime
    price: Any
    currency: Any
    meter_name: str
    product: str
    effective_from: Any
    url: str


def effective_start(meter: dict[str, Any], where: str) -> datetime:
    """When the meter's price took effect (UTC); the epoch when the API omits it."""
    raw = meter.get("effectiveStartDate")
    if raw is None:
        return _EPOCH
    if not isinstance(raw, str):
        raise ParseError("azure", "effectiveStartDate", where,
                         f"is {type(raw).__name__}, expected str")
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ParseError("azure", "effectiveStartDate", where,
                         f"is {raw!r}, not a date") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


# -- Resource SKUs (with credentials) -----------------------------------------------------
#: The credential options, all needed for the Resource SKUs API.
CREDENTIALS = ("tenant_id", "client_id", "client_secret", "subscription_id")
#: What azure-mgmt-compute's ResourceSkusOperations.list sends (39.0.0): its api-version,
#: and the scope its ComputeManagementClient asks tokens for (`credential_scopes`).
SKUS_API_VERSION = "2021-07-01"
MANAGEMENT_SCOPE = "https://management.azure.com/.default"
#: Sent instead of a token when replaying: a recording never holds one.
REPLAY_TOKEN = "replay"
#: Where the GPU count of an offer came from when it is not gpuradar's size table.
FROM_SKUS = "Resource SKUs API"


class SkusUnavailable(Exception):
    """The token or the Resource SKUs list could not be had: why, in a few words."""


def gpu_counts(page: Any, counts: dict[str, float | None],
               restricted: dict[tuple[str, str], str] | None = None) -> str | None:
    """Add one Resource SKUs page's GPU counts to `counts` (size name -> GPUs, None when two
    entries of one size disagree), and its location restrictions to `restricted` ((size,
    region) -> reason: ResourceSkuRestrictions `type` "Location", `values` the regions,
    `reasonCode` "NotAvailableForSubscription" or "QuotaId"); the page's `nextLink`, if any.

    The page is azure-mgmt-compute's ResourceSkusResult: `value`, a list of ResourceSku
    (`resourceType`, `name`, `capabilities`: ResourceSkuCapabilities `name`/`value`, both
    text), and `nextLink`. One size is listed once per region. A size without a positive
    whole `GPUs` value gets no count; entries that are not virtual machines are skipped."""
    if not isinstance(page, dict) or not isinstance(page.get("value"), list):
        raise SkusUnavailable("the answer has no `value` list")
    for sku in page["value"]:
        if not isinstance(sku, dict) or sku.get("resourceType") != "virtualMachines":
            continue
        name, caps = sku.get("name"), sku.get("capabilities")
        if not isinstance(name, str) or not isinstance(caps, list):
            continue
        for rule in sku.get("restrictions") or ():
            if restricted is None or not isinstance(rule, dict) or rule.get("type") != "Location":
                continue
            for region in rule.get("values") or ():
                if isinstance(region, str):
                    restricted[(name, region.lower())] = str(rule.get("reasonCode") or
                                                             "restricted")
        gpus = next((c.get("value") for c in caps
                     if isinstance(c, dict) and c.get("name") == "GPUs"), None)
        if not isinstance(gpus, str) or not re.fullmatch(r"0*[1-9][0-9]*", gpus):
            continue
        count = float(gpus)
        counts[name] = count if counts.get(name, count) == count else None
    next_link = page.get("nextLink")
    return next_link if isinstance(next_link, str) and next_link else None


def error_of(response: Response) -> str:
    """`HTTP <status> <code>` of a failed Entra ID or ARM answer: Entra ID says
    `{"error": "invalid_client", ...}`, ARM `{"error": {"code": "AuthorizationFailed", ...}}`.
    Only the code: the descriptions name the client and the subscription."""
    try:
        body = json.loads(response.text)
    except (ValueError, AttributeError):
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("code")
    code = error if isinstance(error, str) else ""
    return f"HTTP {response.status} {code}".strip()


# -- spot eviction rates: Azure Resource Graph (with credentials) --------------------------
#: What azure-mgmt-resourcegraph's ResourceGraphClient.resources sends (8.0.1): POST
#: /providers/Microsoft.ResourceGraph/resources with this api-version and a QueryRequest.
RESOURCE_GRAPH_API_VERSION = "2021-03-01"
#: The eviction rate of every N-series size and region (Microsoft's "Spot eviction rates"
#: query on the `SpotResources` table, narrowed to the GPU sizes; `startswith` is not
#: case-sensitive). SpotResources is answered at tenant scope: no `subscriptions`.
EVICTION_QUERY = (
    "SpotResources\n"
    "| where type =~ 'microsoft.compute/skuspotevictionrate/location'\n"
    "| where tostring(sku.name) startswith 'standard_n'\n"
    "| project skuName = tostring(sku.name), location = tostring(location), "
    "evictionRate = tostring(properties.evictionRate)\n"
    "| order by skuName asc, location asc")
#: Rows per page: QueryRequestOptions.top's maximum.
EVICTION_PAGE = 1000


def eviction_body(skip_token: str | None = None) -> dict[str, Any]:
    """A QueryRequest (azure-mgmt-resourcegraph): `query`, `options` with `resultFormat`
    objectArray, `$top`, `allowPartialScopes` false (the SDK's default, sent by it too) and,
    after the first page, the answer's `$skipToken`."""
    options: dict[str, Any] = {"resultFormat": "objectArray", "$top": EVICTION_PAGE,
                               "allowPartialScopes": False}
    if skip_token:
        options["$skipToken"] = skip_token
    return {"query": EVICTION_QUERY, "options": options}


def read_evictions(page: Any, day: str, rates: dict[tuple[str, str], dict[str, Any]],
                   count: Any) -> str | None:
    """One Resource Graph answer (QueryResponse: `totalRecords`, `count`, `resultTruncated`,
    `$skipToken`, `data`: with objectArray a list of rows) into `rates`, (size, region) in
    lower case -> the signal's attributes (gpuradar.core.spot); the `$skipToken` of the next
    page, if any. A band gpuradar cannot read is counted (`count`) and that offer's signal
    is unknown, saying so; never a default."""
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        raise SkusUnavailable("the Resource Graph answer has no `data` list")
    for row in page["data"]:
        sku = row.get("skuName") if isinstance(row, dict) else None
        region = row.get("location") if isinstance(row, dict) else None
        if not isinstance(sku, str) or not isinstance(region, str) or not sku or not region:
            count("unreadable_eviction_row")
            continue
        band = row.get("evictionRate")
        key = (sku.lower(), region.lower())
        if band_bounds(band) is None:
            count("unreadable_interruption_band")
            rates[key] = {"interruption_unknown": f"Azure eviction rate {str(band)[:20]!r} "
                                                  "not understood"}
            continue
        rates[key] = {"interruption": str(band), "interruption_as_of": day,
                      "interruption_source": EVICTION_SOURCE}
    token = page.get("$skipToken")
    return token if isinstance(token, str) and token else None



class AzureSpider(GpuRadarSpider):
    facts = AZURE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._meters: dict[tuple[str, str, str], _Meter] = {}
        # The Resource SKUs answer: None until read (or never asked, or failed); whether it
        # is still awaited; whether every region's price chain has ended; the access token.
        self._skus: dict[str, float | None] | None = None
        self._skus_pending = False
        # Spot eviction rates (Resource Graph): (size, region) -> signal attributes; None
        # until read (or never asked), with why when the query failed.
        self._evictions: dict[tuple[str, str], dict[str, Any]] | None = None
        self._evictions_pending = False
        self._evictions_failed: str | None = None
        self._eviction_pages: set[str] = set()  # the $skipTokens followed
        self._prices_read = False
        self._token = ""
        self._sku_pages: set[str] = set()
        # (size, region) -> why this subscription cannot use the size there (Resource SKUs
        # `restrictions`), read with the GPU counts.
        self._restricted: dict[tuple[str, str], str] = {}
        # One object per distinct string of the kept meters (see _Meter).
        self._shared: dict[Any, Any] = {}
        # The regions whose price chain is still to be walked, in order.
        self._regions: list[str] = []

    def region_url(self, region: str) -> str:
        """The first page of one region's chain."""
        # Every armSkuName with a capital N: the N-series whatever its form ("Standard_NC..."
        # or a compact "NC8dsxlRTX6Kv6", which `contains(armSkuName, 'Standard_N')` would
        # drop); filter values are case-sensitive since api-version 2023-01-01-preview
        # (learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices), so
        # "Standard_" itself does not match. Other sizes with an N are counted as not GPUs.
        # The region is a filter the same page documents (`armRegionName eq 'southcentralus'`).
        flt = ("serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
               f"and armRegionName eq '{region}' and contains(armSkuName, 'N')")
        currency = self.option("currency", "USD")
        query = {"api-version": "2023-01-01-preview", "currencyCode": f"'{currency}'",
                 "meterRegion": "'primary'", "$filter": flt}
        return f"{self.endpoint('prices')}?{urlencode(query)}"

    def region_request(self, url: str, region: str) -> scrapy.Request:
        return scrapy.Request(url, callback=self.parse, errback=self.region_failed,
                              cb_kwargs={"region": region})

    async def start(self):
        self._regions = list(self.option("regions") or REGIONS)
        for request in self.next_region():
            yield request
        for request in self.sku_requests():
            yield request

    def next_region(self) -> Iterator[Any]:
        """The next region's first page; when every region is read, the offers (once the
        Resource SKUs answer, if one was asked for, has ended too)."""
        if self._regions:
            region = self._regions.pop(0)
            yield self.region_request(self.region_url(region), region)
            return
        self._prices_read = True
        yield from self.offers_when_ready()

    def offers_when_ready(self) -> Iterator[Any]:
        """The offers, once every region's price chain and every answer asked with the
        credentials (Resource SKUs, eviction rates) have ended; nothing before."""
        if self._prices_read and not self._skus_pending and not self._evictions_pending:
            yield from self.offers()

    def parse(self, response: Response, region: str = "", **kwargs: Any):
        """Collect one page of a region; then its next page, or the next region."""
        try:
            next_link = self.read_page(response)
        except ParseError:
            # Not the format gpuradar reads: the next regions would answer the same. The
            # walk stops; the regions read to their end are yielded (the crawl closes
            # nothing).
            self.forget(region)
            self._regions.clear()
            yield from self.next_region()
            raise
        if next_link:
            yield self.region_request(response.urljoin(next_link), region)
            return
        yield from self.next_region()

    def forget(self, region: str) -> None:
        """Drop what a region whose chain broke has given: the price in effect of any of its
        offers may be on the page that was lost."""
        for key in [k for k in self._meters if k[0] == region]:
            del self._meters[key]

    def region_failed(self, failure: Failure) -> Any:
        """A region whose answer is an HTTP error: one ERROR line (the crawl is partial: it
        closes nothing), then the next region. Anything else (the host cannot be reached)
        is Scrapy's to report, and no further region is asked."""
        region = failed_request(failure).cb_kwargs.get("region", "?")
        self.forget(region)
        if not isinstance(failure.value, HttpError):
            self._regions.clear()
            return failure
        self.logger.error("azure: the prices of region %s answered HTTP %s: its offers are "
                          "not read", region, failure.value.response.status)
        return self.next_region()

    def parse_file(self, response: Response):
        """A saved page on its own (`gpuradar parse`): its offers, prices in effect; a saved
        Resource SKUs page or Resource Graph answer has none."""
        page = self.json_body(response)
        if isinstance(page, dict) and ("value" in page or "totalRecords" in page):
            return
        self.read_page(response)
        yield from self.offers()

    # -- the Resource SKUs API (with credentials) --------------------------------------------
    def sku_requests(self) -> Iterator[scrapy.Request]:
        """The token request, when the four credentials are set (none: nothing, as without
        this API; some: a warning naming the missing ones). A replay asks for the SKU list
        directly: the token exchange is never recorded."""
        creds = {name: self.option(name) for name in CREDENTIALS}
        if not any(creds.values()):
            return
        missing = [f"{self.credentials[name]} (or sources.azure.{name})"
                   for name, value in creds.items() if not value]
        if missing:
            self.logger.warning("azure: the Resource SKUs API and the spot eviction rates "
                                "are not used: %s missing",
                                " and ".join(missing))
            return
        self._skus_pending = self._evictions_pending = True
        if self.settings.get("GPURADAR_REPLAY_DIR"):
            self._token = REPLAY_TOKEN
            yield self.skus_request(self.skus_url())
            yield self.evictions_request(None)
            return
        url = self.endpoint("token").format(tenant=quote(str(creds["tenant_id"]), safe=""))
        yield scrapy.FormRequest(
            url, formdata={"client_id": str(creds["client_id"]), "scope": MANAGEMENT_SCOPE,
                           "client_secret": str(creds["client_secret"]),
                           "grant_type": "client_credentials"},
            callback=self.parse_token, errback=self.skus_failed,
            meta={"handle_httpstatus_all": True, "dont_record": True})

    def skus_url(self) -> str:
        subscription = quote(str(self.option("subscription_id")), safe="")
        return (self.endpoint("skus").format(subscription=subscription) + "?"
                + urlencode({"api-version": SKUS_API_VERSION}))

    def skus_request(self, url: str) -> scrapy.Request:
        return scrapy.Request(url, headers={"Authorization": f"Bearer {self._token}",
                                            "Accept": "application/json"},
                              callback=self.parse_skus, errback=self.skus_failed,
                              meta={"handle_httpstatus_all": True})

    def parse_token(self, response: Response) -> Iterator[Any]:
        """The access token of a client-credentials answer (`access_token`), then the SKU
        list. Never raises: the answer holds the token, and a reading error would log the
        start of the body."""
        try:
            token = json.loads(response.text).get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            why = f"the token request answered {error_of(response)}"
            self.evictions_unavailable(why)
            yield from self.skus_unavailable(why)
            return
        self._token = token
        yield self.skus_request(self.skus_url())
        yield self.evictions_request(None)

    def parse_skus(self, response: Response) -> Iterator[Any]:
        """One Resource SKUs page; the next one (`nextLink`, on the same host only: it carries
        the token; never a page already read: a loop would hold the offers for ever), or, at
        the end, the offers if every region's price chain has ended."""
        try:
            if response.status != 200:
                raise SkusUnavailable(f"the SKU list answered {error_of(response)}")
            try:
                page = json.loads(response.text)
            except ValueError:
                raise SkusUnavailable("the SKU list is not JSON") from None
            counts = self._skus if self._skus is not None else {}
            next_link = gpu_counts(page, counts, self._restricted)
            here, there = urlsplit(response.url), urlsplit(next_link or response.url)
            if (there.scheme, there.netloc) != (here.scheme, here.netloc):
                raise SkusUnavailable(f"nextLink leaves {here.netloc}")
            self._sku_pages.add(response.url)
            if next_link in self._sku_pages:
                raise SkusUnavailable("nextLink names a page already read")
        except SkusUnavailable as why:
            yield from self.skus_unavailable(str(why))
            return
        self._skus = counts
        if next_link:
            yield self.skus_request(next_link)
            return
        self._skus_pending = False
        yield from self.offers_when_ready()

    def skus_failed(self, failure: Any) -> Iterator[Any]:
        """A token or SKU request that got no answer (unreachable, timed out)."""
        request = getattr(failure, "request", None)
        if request is not None and request.callback == self.parse_token:
            self.evictions_unavailable(failure.getErrorMessage())
        yield from self.skus_unavailable(failure.getErrorMessage())

    def skus_unavailable(self, why: str) -> Iterator[Any]:
        """One ERROR line (the crawl is partial: sizes only this answer could count must not
        be closed); the offers the table knows, if every region's price chain has ended."""
        self._skus, self._skus_pending = None, False
        secret = str(self.option("client_secret") or "")
        for value in (secret, self._token):
            if value:
                why = why.replace(value, "***")
        self.logger.error("azure: Resource SKUs API unavailable (%s): sizes missing from "
                          "gpuradar's size table stay uncatalogued", why[:300])
        yield from self.offers_when_ready()

    # -- spot eviction rates: Azure Resource Graph (with credentials) ------------------------
    def evictions_request(self, skip_token: str | None) -> scrapy.Request:
        url = (self.endpoint("resource_graph") + "?"
               + urlencode({"api-version": RESOURCE_GRAPH_API_VERSION}))
        return scrapy.Request(
            url, method="POST", body=json.dumps(eviction_body(skip_token)),
            headers={"Authorization": f"Bearer {self._token}",
                     "Content-Type": "application/json", "Accept": "application/json"},
            callback=self.parse_evictions, errback=self.evictions_failed,
            meta={"handle_httpstatus_all": True}, dont_filter=True)

    def parse_evictions(self, response: Response) -> Iterator[Any]:
        """One page of eviction rates; the next (`$skipToken`, never one already seen), or,
        at the end, the offers if everything else has ended. A refused or unreadable answer
        costs the signal alone (one WARNING line): prices are stored, the crawl goes on."""
        try:
            if response.status != 200:
                raise SkusUnavailable(f"the Resource Graph query answered {error_of(response)}")
            try:
                page = json.loads(response.text)
            except ValueError:
                raise SkusUnavailable("the Resource Graph answer is not JSON") from None
            rates = self._evictions if self._evictions is not None else {}
            token = read_evictions(page, self.answer_day(response), rates, self.count)
            seen = self._eviction_pages
            if token is not None and token in seen:
                raise SkusUnavailable("$skipToken names a page already read")
        except SkusUnavailable as why:
            self.evictions_unavailable(str(why))
            yield from self.offers_when_ready()
            return
        self._evictions = rates
        if token is not None:
            seen.add(token)
            yield self.evictions_request(token)
            return
        self._evictions_pending = False
        yield from self.offers_when_ready()

    def evictions_failed(self, failure: Any) -> Iterator[Any]:
        """An eviction-rate request that got no answer (unreachable, timed out)."""
        self.evictions_unavailable(failure.getErrorMessage())
        yield from self.offers_when_ready()

    def evictions_unavailable(self, why: str) -> None:
        """One WARNING line; every spot offer then says why its signal is unknown."""
        self._evictions, self._evictions_pending = None, False
        for value in (str(self.option("client_secret") or ""), self._token):
            if value:
                why = why.replace(value, "***")
        self._evictions_failed = f"the Resource Graph eviction rates failed ({why[:120]})"
        self.logger.warning("azure: spot eviction rates unavailable (%s): spot offers carry "
                            "no interruption signal", why[:300])

    def eviction_attributes(self, sku: str, region: str) -> dict[str, Any]:
        """A spot offer's signal attributes (gpuradar.core.spot); {} without credentials
        (the provider's `spot_signal` says why), else the rate or why it is unknown."""
        if self._evictions is None:
            if self._evictions_failed:
                return {"interruption_unknown": self._evictions_failed}
            return {}
        found = self._evictions.get((sku.lower(), region.lower()))
        if found is not None:
            return dict(found)
        return {"interruption_unknown": "not in Resource Graph's eviction rates for this "
                                        "size and region"}

    def read_page(self, response: Response) -> str | None:
        """Keep the page's candidate meters; the next page's URL, if any."""
        page = self.json_body(response)
        items = require(page, "Items", self.name, response.url, list)
        now, url = self.clock.now(), self._share(response.url)
        for i, meter in enumerate(items):
            self.consider(meter, f"{response.url} Items[{i}]", url, now)
        next_link = page.get("NextPageLink") if isinstance(page, dict) else None
        if next_link is not None and not isinstance(next_link, str):
            raise ParseError(self.name, "NextPageLink", response.url,
                             f"is {type(next_link).__name__}, expected str")
        return next_link or None

    def _share(self, value: Any) -> Any:
        """`value`, or the equal string or date an earlier meter already holds."""
        if isinstance(value, str | datetime):
            return self._shared.setdefault(value, value)
        return value

    def consider(self, meter: Any, where: str, url: str, now: datetime | None = None) -> None:
        """Keep a Linux consumption meter if it is the latest in effect for its offer (`now`:
        when the page was read; a price starting later is not in effect yet)."""
        sku = require(meter, "armSkuName", self.name, where, str)
        meter_name = require(meter, "meterName", self.name, where, str)
        product = require(meter, "productName", self.name, where, str)
        sku_name = meter.get("skuName") or ""
        if meter.get("type", "Consumption") != "Consumption":
            return
        if _WINDOWS.search(product):
            return
        if "Low Priority" in meter_name or "Low Priority" in sku_name:
            return
        if meter.get("unitOfMeasure", "1 Hour") != "1 Hour":
            return
        if meter.get("isPrimaryMeterRegion") is False:
            self.count("non_primary_meter")
            return
        region = require(meter, "armRegionName", self.name, where, str)
        if not region or region.endswith("euap"):  # canary regions nobody can rent in
            return
        effective = effective_start(meter, where)
        if effective > (now or self.clock.now()):
            self.count("future_price")  # announced, not yet in effect
            return
        spot = meter_name.endswith(" Spot") or sku_name.endswith(" Spot")
        key = (region, sku, "spot" if spot else "on_demand")
        held = self._meters.get(key)
        if held is None or effective > held.effective:
            if held is not None:
                self.count("superseded_price")
            share = self._share
            if held is None:
                key = (share(region), share(sku), key[2])
            self._meters[key] = _Meter(
                share(effective), meter.get("retailPrice", meter.get("unitPrice")),
                share(meter.get("currencyCode")), share(meter_name), share(product),
                share(meter.get("effectiveStartDate")), url)
        elif effective < held.effective:
            self.count("superseded_price")
        else:
            self.count("duplicate_meter")  # same offer, same date: the first one stands

    def offers(self):
        """One PriceItem per offer (the meter in effect), or an uncatalogued report."""
        meters, self._meters, self._shared = self._meters, {}, {}
        for key in list(meters):
            # Taken out one by one: the meters' memory goes as their offers are yielded.
            region, sku, pricing = key
            held = meters.pop(key)
            counted_by = None
            try:
                size = size_of(sku)
            except NotAGpu:
                self.count("not_a_gpu_size")
                continue
            except UnlistedSize as why:
                found = self.sku_size(sku, why)
                if found is None:
                    continue
                size, counted_by = found, FROM_SKUS
            except Uncatalogued as why:
                self.uncatalogued(sku, str(why))
                continue
            attributes = {"meter": held.meter_name, "product": held.product,
                          "effective_from": held.effective_from}
            if counted_by:
                attributes["gpu_count_from"] = counted_by
            # Resource SKUs read: a size restricted in the region cannot be had there by this
            # subscription (not available); elsewhere nothing is known (None).
            reason = self._restricted.get((sku, region)) if self._skus is not None else None
            if reason:
                attributes["restriction"] = reason
            if pricing == "spot":
                attributes.update(self.eviction_attributes(sku, region))
            yield PriceItem(
                source=self.name, region=region, instance_type=sku, pricing=pricing,
                gpu=size.gpu, gpu_count=size.count, gpu_memory_gb=size.memory_gb,
                vcpus=size.vcpus, price=held.price, currency=held.currency or "USD",
                available=False if reason else None, url=held.url, attributes=attributes,
            )

    def sku_size(self, sku: str, why: UnlistedSize) -> Size | None:
        """The size with the GPU count the Resource SKUs API gives, for a series the table
        knows and does not partition; None (reported as uncatalogued, saying why) when there
        is no such answer or count, or the series sells GPU partitions."""
        counts = self._skus
        if counts is None:
            self.uncatalogued(sku, str(why))
            return None
        if why.series.partitioned:
            self.uncatalogued(sku, f"{why}; {why.label} sells GPU partitions, which the "
                                   "Resource SKUs API counts as whole GPUs: its count is "
                                   "not used")
            return None
        count = counts.get(sku)
        if count is None:
            self.uncatalogued(sku, f"{why}; the Resource SKUs API gives no GPU count for it")
            return None
        warn_once_per_process(
            getattr(self, "crawler", None), self.__dict__.setdefault("_warned_here", set()),
            self.logger, ("sku_count", self.name, sku),
            "%s: %s is not in gpuradar's size table; its GPU count (%g) is the Resource SKUs "
            "API's", self.name, sku, count)
        return Size(why.series.gpu, why.series.memory_gb, count, why.vcpus)
