"""AWS EC2: public on-demand and spot prices, interruption bands, and (with credentials)
per-zone spot prices -- for GPU instances and the ML accelerator instances (Trainium,
Inferentia, Gaudi).

What is read, in this order (one response at a time, see `memory` below):

1. The Spot Instance Advisor feed (`spot-advisor-data.json`): interruption band ("<5%" ...
   ">20%") and savings per region and instance type, plus vCPUs/RAM per type.
2. The locations feed behind the pricing pages (`locations.json`): region code -> the
   location name the on-demand files are published under, so a new region is read without
   a code change (the table `REGIONS` below is only the fallback when that feed fails).
3. The spot price feed behind the spot pricing page (`spot.json`): the current Linux spot
   price per region and instance type, every region in one file. Its region list is also
   the list of regions whose on-demand files are read next.
4. One on-demand file per region, the JSON the EC2 on-demand pricing page loads
   (`meteredUnitMaps/ec2/.../<Region Name>/Linux/index.json`), requested one region after
   the other.
5. With AWS credentials (standard chain: environment, profile, SSO, instance role ...):
   `DescribeRegions`, then `DescribeSpotPriceHistory` in every enabled region, signed with
   botocore's SigV4 signer: the current spot price per availability zone. A region that
   refuses an instance type of the request (EC2 answers `InvalidParameterValue`) is asked
   again without it: the type the error names is left out, or the list is split in halves
   until the offender is found.
   The first crawl of a region (no per-zone spot offer stored there yet) asks for the
   last 90 days instead of the current hour: the latest price per zone is the live offer
   as always, and every price of the answer is also handed on as a `PriceHistory`, which
   storage keeps as change points at their own times, before the offer's first
   observation. Bounded: 1,000 results a page, at most 20 pages a region (the provider
   facts' BACKFILL_*); a history that does not fit is not stored, said, and the region is
   asked for the current hour instead.
6. With AWS credentials, also `DescribeCapacityBlockOfferings` in every enabled region for
   each type EC2 sells as Capacity Blocks for ML and each UltraServer type (the provider
   facts' CAPACITY_BLOCK_TYPES, CAPACITY_BLOCK_ULTRASERVERS): a 24-hour block of one
   instance (or UltraServer). Each offering is an offer of pricing kind `capacity_block` in
   its zone, priced per hour as its up-front fee over its length, with its terms (start,
   end, hours, fee, currency, offering id); of several offerings in one zone, the cheapest
   per hour (then the earliest) is kept. A region or type EC2 does not sell as blocks
   answers with no offering or refuses the type: nothing, counted.

A type AWS sells as Capacity Blocks that the on-demand file lists at $0 (p5e) is not sold
on demand: it gets no on-demand offer and is counted as `not_on_demand`, not as a dropped
zero price.

The accelerator model, count and memory come from the instance-type table below (the price
files do not name them). A type the price files list as a GPU or ML ASIC instance but the
table does not know is reported (counted as `uncatalogued` and logged once with its name),
never dropped silently, so a new family shows up instead of vanishing.

Memory: each region's on-demand file is one response, parsed and released before the next
region is requested; across regions only a small table of interruption bands is kept.
A region file that fails or has no entries makes the crawl partial, which closes nothing.
"""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import scrapy
from scrapy.http import Response
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from gpuradar.core.backfill import PriceHistory
from gpuradar.core.items import OfferKey, PriceItem
from gpuradar.core.pricing import CAPACITY_BLOCK
from gpuradar.core.providers.aws import (
    ADVISOR_SOURCE,
    AWS,
    BACKFILL_DAYS,
    BACKFILL_MAX_PAGES,
    BACKFILL_PAGE_SIZE,
    CAPACITY_BLOCK_HOURS,
    CAPACITY_BLOCK_TYPES,
    CAPACITY_BLOCK_ULTRASERVERS,
    credential_source,
)
from gpuradar.crawler.spiders.base import GpuRadarSpider, ParseError, failed_request, require

ONDEMAND_PAGE = "https://aws.amazon.com/ec2/pricing/on-demand/"
SPOT_PAGE = "https://aws.amazon.com/ec2/spot/pricing/"
EC2_API_VERSION = "2016-11-15"

# Region code -> the location name AWS's price files use (the on-demand file's URL and its
# `regions` key). China and GovCloud are sold separately and are not read.
REGIONS: dict[str, str] = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "ca-central-1": "Canada (Central)",
    "ca-west-1": "Canada West (Calgary)",
    "mx-central-1": "Mexico (Central)",
    "sa-east-1": "South America (Sao Paulo)",
    "eu-west-1": "EU (Ireland)",
    "eu-west-2": "EU (London)",
    "eu-west-3": "EU (Paris)",
    "eu-central-1": "EU (Frankfurt)",
    "eu-central-2": "EU (Zurich)",
    "eu-north-1": "EU (Stockholm)",
    "eu-south-1": "EU (Milan)",
    "eu-south-2": "EU (Spain)",
    "af-south-1": "Africa (Cape Town)",
    "il-central-1": "Israel (Tel Aviv)",
    "me-south-1": "Middle East (Bahrain)",
    "me-central-1": "Middle East (UAE)",
    "ap-east-1": "Asia Pacific (Hong Kong)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-south-2": "Asia Pacific (Hyderabad)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-northeast-2": "Asia Pacific (Seoul)",
    "ap-northeast-3": "Asia Pacific (Osaka)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "ap-southeast-3": "Asia Pacific (Jakarta)",
    "ap-southeast-4": "Asia Pacific (Melbourne)",
    "ap-southeast-5": "Asia Pacific (Malaysia)",
    "ap-southeast-7": "Asia Pacific (Thailand)",
    "ap-east-2": "Asia Pacific (Taipei)",
    "ap-southeast-6": "Asia Pacific (New Zealand)",
}
REGION_OF_LOCATION = {name: code for code, name in REGIONS.items()}
# The `type` of a commercial region in the locations feed (Local and Wavelength Zones are
# "AWS Local Zone" / "AWS Wavelength Zone": their prices are not read).
_REGION_TYPE = "AWS Region"
# Partitions priced elsewhere (China in CNY on amazonaws.cn, GovCloud for US agencies).
_OTHER_PARTITIONS = ("cn-", "us-gov-", "us-iso")

_FULL: dict[str, float] = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                           "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
# Family -> (accelerator as AWS names it, memory per accelerator in GB or None for the
# catalog's, size -> accelerators). Fractional counts are the GPU shares AWS sells (G6f:
# 1/8, 1/4, 1/2 of an L4); their memory is the whole GPU's, which is what identifies the
# model. The ML ASIC families count chips (AWS Neuron architecture guides: trn1.2xlarge 1 and
# trn1/trn1n.32xlarge 16 Trainium, trn2.48xlarge 16 Trainium2, inf1 1/1/4/16 Inferentia,
# inf2 1/1/6/12 Inferentia2; the DL1 page: dl1.24xlarge 8 Gaudi HL-205). trn2.3xlarge: one
# Trainium2 chip, 96 GB (one device of 4 logical NeuronCores in the Neuron benchmarks of
# three independent public repositories). trn2u.48xlarge: 16 Trainium2 like trn2.48xlarge,
# four of them make a Trn2 UltraServer of 64 chips (u-trn2x64; the Neuron SDK's Trn2
# architecture page, aws-neuron/aws-neuron-sdk about-neuron/arch/neuron-hardware/trn2-arch).
# Qualcomm's dl2q is reported as uncatalogued rather than guessed.
# G7e: NVIDIA RTX PRO 6000 Blackwell Server Edition, 96 GB, 1/1/1/2/4/8 GPUs (AWS's own
# SageMaker HyperPod CLI instance table,
# aws/sagemaker-hyperpod-cli#390, as its g7e nodes report them; the same counts in dstack's
# and the Kubernetes autoscaler's G7e tables). G7: NVIDIA RTX PRO 4500 Blackwell Server
# Edition, 32 GB, 1/1/1/2/4/8 GPUs (AWS's G7 page as takech9203/aws-news-summary reproduces
# it twice, for the EC2 and the WorkSpaces Applications launches, with the storage and
# network of AWS's price file; g7.12xlarge with 2 and g7.48xlarge with 8 RTX PRO 4500 in
# users' nvidia-smi reports; the price file's 12/24/48xlarge prices are exactly 2:4:8).
# kubernetes/autoscaler#9854 lists 1/1/2/4/4/8: it is a feature request, against all these.
ACCELERATOR_FAMILIES: dict[str, tuple[str, float | None, dict[str, float]]] = {
    "p6-b300": ("B300", None, {"48xlarge": 8}),
    "p6-b200": ("B200", 180, {"48xlarge": 8}),
    "p6e-gb200": ("GB200", 186, {"36xlarge": 4}),
    "p5en": ("H200", 141, {"48xlarge": 8}),
    "p5e": ("H200", 141, {"48xlarge": 8}),
    "p5": ("H100", 80, {"4xlarge": 1, "48xlarge": 8}),
    "p4de": ("A100", 80, {"24xlarge": 8}),
    "p4d": ("A100", 40, {"24xlarge": 8}),
    "p3dn": ("V100", 32, {"24xlarge": 8}),
    "p3": ("V100", 16, {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    "p2": ("K80", 12, {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}),
    "g7": ("RTX PRO 4500", 32, {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2,
                                "24xlarge": 4, "48xlarge": 8}),
    "g7e": ("RTX PRO 6000", 96, {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2,
                                 "24xlarge": 4, "48xlarge": 8}),
    "g6e": ("L40S", 48, _FULL),
    "g6": ("L4", 24, _FULL),
    "gr6": ("L4", 24, {"4xlarge": 1, "8xlarge": 1}),
    "g6f": ("L4", 24, {"large": 1 / 8, "xlarge": 1 / 8, "2xlarge": 1 / 4, "4xlarge": 1 / 2}),
    "gr6f": ("L4", 24, {"4xlarge": 1 / 2}),
    "g5": ("A10G", 24, _FULL),
    "g5g": ("T4g", 16, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1,
                        "16xlarge": 2, "metal": 2}),
    "g4dn": ("T4", 16, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                        "12xlarge": 4, "metal": 8}),
    "g4ad": ("Radeon Pro V520", 8, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 2,
                                    "16xlarge": 4}),
    "g3": ("M60", 8, {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    "g3s": ("M60", 8, {"xlarge": 1}),
    "trn2": ("Trainium2", 96, {"3xlarge": 1, "48xlarge": 16}),
    "trn2u": ("Trainium2", 96, {"48xlarge": 16}),
    "trn1n": ("Trainium", 32, {"32xlarge": 16}),
    "trn1": ("Trainium", 32, {"2xlarge": 1, "32xlarge": 16}),
    "inf2": ("Inferentia2", 32, {"xlarge": 1, "8xlarge": 1, "24xlarge": 6, "48xlarge": 12}),
    "inf1": ("Inferentia", 8, {"xlarge": 1, "2xlarge": 1, "6xlarge": 4, "24xlarge": 16}),
    "dl1": ("Gaudi HL-205", 32, {"24xlarge": 8}),
}
# `Instance Family` of the accelerated types in the on-demand files (real values, e.g. the
# 2026-08 us-east-1 file: "GPU instance" and "Machine Learning ASIC Instances").
_ACCELERATED_FAMILY_NAMES = ("GPU instance", "Machine Learning ASIC Instances")
# Accelerated but not for ML, and not reported: video transcoding (vt1, listed with the
# GPUs in the spot feed) and FPGA (f1, f2) instances.
_NOT_ML = re.compile(r"^(vt|f)\d+\.")
# EC2's error code for a parameter value it does not accept (an instance type it does not
# know in that region, among others).
_INVALID_VALUE = "InvalidParameterValue"
# How EC2 refuses a Capacity Block search it cannot answer in a region (a type or UltraServer
# it does not sell as blocks there): nothing to price, not a failure.
_NOT_SOLD_HERE = (_INVALID_VALUE, "InvalidParameterCombination", "Unsupported",
                  "UnsupportedOperation", "InvalidInstanceType")
# The AWS page that explains Capacity Block prices (fee up front, per the block).
CAPACITY_BLOCKS_PAGE = "https://aws.amazon.com/ec2/capacityblocks/pricing/"


def gpu_of(instance_type: str) -> tuple[str, float | None, float] | None:
    """(accelerator, memory per accelerator, count) of an EC2 instance type (GPUs, Trainium,
    Inferentia, Gaudi); None when not a known one."""
    family, _, size = instance_type.partition(".")
    spec = ACCELERATOR_FAMILIES.get(family)
    if spec is None or size not in spec[2]:
        return None
    return spec[0], spec[1], spec[2][size]


def _number(text: Any) -> float | None:
    """'192' -> 192.0, '2048 GiB' -> 2048.0; None when there is no number."""
    found = re.match(r"\s*(\d+(?:\.\d+)?)", str(text)) if text is not None else None
    return float(found.group(1)) if found else None


def _body_text(response: Response) -> str:
    """The body as text: the pricing CDN serves some files gzip-compressed without saying so."""
    body = response.body
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    return body.decode("utf-8")


def _json(response: Response, source: str) -> Any:
    text = _body_text(response).strip()
    # The spot feed once was JSONP (`callback({...});`); accept both forms.
    wrapped = re.match(r"^[A-Za-z_$][\w$]*\((.*)\)\s*;?\s*$", text, re.DOTALL)
    if wrapped:
        text = wrapped.group(1)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ParseError(source, "<body>", response.url, f"is not JSON ({exc})") from None


def _xml(response: Response, source: str) -> ET.Element:
    try:
        root = ET.fromstring(_body_text(response))
    except ET.ParseError as exc:
        raise ParseError(source, "<body>", response.url, f"is not XML ({exc})") from None
    for element in root.iter():  # drop the EC2 namespace: tags read as in the documentation
        element.tag = element.tag.rpartition("}")[2]
    return root


def region_of_zone(zone: str) -> str:
    """'us-east-1a' -> 'us-east-1'; 'us-west-2-lax-1a' (a Local Zone) -> 'us-west-2'."""
    found = re.match(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)", zone)
    return found.group(1) if found else zone


def _epoch(stamp: str) -> int | None:
    """EC2's timestamp ('2026-09-25T17:02:11.000Z') as epoch seconds; None if unreadable."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(when.timestamp()) if when.tzinfo is not None else None


class AwsSpider(GpuRadarSpider):
    facts = AWS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (region, instance type) -> (interruption band, savings %): GPU types only.
        self.bands: dict[tuple[str, str], tuple[str | None, int | None]] = {}
        # instance type -> (vCPUs, RAM GB) from the advisor feed: GPU types only.
        self.shapes: dict[str, tuple[float | None, float | None]] = {}
        # The day the advisor feed describes (ISO date; None until it is read).
        self.advisor_as_of: str | None = None
        self.pending_regions: list[str] = []
        self.aws_credentials: Any = None  # frozen botocore credentials, when signing
        # Region code -> location name of its on-demand file: the built-in table, then what
        # the locations feed says. Local and Wavelength Zones the feed lists are kept apart.
        self.region_names: dict[str, str] = dict(REGIONS)
        self.other_zones: set[str] = set()
        # Capacity Block types the on-demand files list at $0: logged once a crawl.
        self.not_on_demand: set[str] = set()
        # The keys of the offers storage holds for this source (set by the storage
        # pipeline when the crawl opens; None: nothing is stored, so nothing back-filled).
        self.stored_offer_keys: frozenset[tuple] | None = None
        # A back-fill's prices so far, per request chain (region, types): (zone, type) ->
        # {timestamp: price text}.
        self.history: dict[tuple[str, tuple[str, ...]],
                           dict[tuple[str, str], dict[str, str | None]]] = {}

    # -- configuration -----------------------------------------------------------------
    def wanted_regions(self) -> set[str] | None:
        regions = self.option("regions")
        if not regions:
            return None
        return {regions} if isinstance(regions, str) else set(regions)

    @classmethod
    def credential_source(cls, settings: BaseSettings, with_roles: bool = True) -> Any:
        """botocore Credentials for these settings' options (the declaration's lookup,
        gpuradar.core.providers.aws.credential_source); None if none, the exception when
        they cannot be loaded. `with_roles=False` skips the instance-metadata lookups."""
        return credential_source(cls.options_from(settings), with_roles)

    # -- requests ------------------------------------------------------------------------
    async def start(self):
        # A replay touches no network: not even the instance-metadata credential lookups.
        credentials = self.credential_source(
            self.settings, with_roles=not self.settings.get("GPURADAR_REPLAY_DIR"))
        if isinstance(credentials, Exception):
            self.logger.error("aws: AWS credentials cannot be loaded (%s); per-zone spot "
                              "prices skipped", type(credentials).__name__)
        elif credentials is not None:
            self.aws_credentials = credentials.get_frozen_credentials()
            self.logger.info("aws: AWS credentials found (%s): reading per-zone spot prices",
                             credentials.method)
        yield scrapy.Request(self.endpoint("advisor"), callback=self.parse_advisor,
                             errback=self.advisor_failed)

    def after_advisor(self) -> Iterator[scrapy.Request]:
        """The locations feed: the regions whose on-demand files exist, by location name."""
        yield scrapy.Request(self.endpoint("locations"), callback=self.parse_locations,
                             errback=self.locations_failed)

    def after_locations(self) -> Iterator[scrapy.Request]:
        """The spot feed, and the signed calls: both need the interruption bands first."""
        yield scrapy.Request(self.endpoint("spot"), callback=self.parse_spot,
                             errback=self.spot_failed)
        if self.aws_credentials is not None:
            home = self.option("home_region", "us-east-1")
            yield self.signed_request(home, {"Action": "DescribeRegions",
                                             "AllRegions": "true"},
                                      callback=self.parse_describe_regions)

    def advisor_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        self.logger.error("aws: Spot Advisor feed failed (%s); spot offers carry no "
                          "interruption band", failure.getErrorMessage())
        yield from self.after_advisor()

    def locations_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        # An error, so the crawl is partial: a region read before but missing from the
        # built-in table would otherwise have its offers closed.
        self.logger.error("aws: locations feed failed (%s); only the regions of the built-in "
                          "table are read, nothing is closed this crawl",
                          failure.getErrorMessage())
        yield from self.after_locations()

    def spot_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        self.logger.error("aws: spot price feed failed (%s); on-demand files of every known "
                          "region are read instead", failure.getErrorMessage())
        self.queue_ondemand(self.region_names)
        yield from self.next_ondemand()

    def queue_ondemand(self, codes: Iterable[str]) -> None:
        wanted = self.wanted_regions()
        queue = []
        for code in codes:
            if wanted is not None and code not in wanted:
                continue
            if code not in self.region_names:
                if code not in self.other_zones and not code.startswith(_OTHER_PARTITIONS):
                    self.warn_once(f"region:{code}", "aws: region %s is in neither the "
                                   "locations feed nor the region table; its on-demand prices "
                                   "are not read", code)
                    self.count("unknown_region")
                continue
            queue.append(code)
        self.pending_regions = sorted(set(queue))

    def next_ondemand(self) -> Iterator[scrapy.Request]:
        """The next region's on-demand file: one region in flight at a time."""
        if self.pending_regions:
            code = self.pending_regions.pop(0)
            url = self.endpoint("ondemand").format(location=quote(self.region_names[code]))
            yield scrapy.Request(url, callback=self.parse_ondemand, errback=self.ondemand_failed,
                                 cb_kwargs={"region": code})

    def ondemand_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        region = failed_request(failure).cb_kwargs.get("region", "?")
        self.logger.error("aws: on-demand prices of %s failed (%s); nothing is closed this "
                          "crawl", region, failure.getErrorMessage())
        yield from self.next_ondemand()

    def signed_request(self, region: str, params: dict[str, str],
                       cb_kwargs: dict[str, Any] | None = None, **kwargs: Any
                       ) -> scrapy.Request:
        """A POST to the EC2 Query API of `region`, signed by botocore's SigV4 signer."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        url = self.endpoint("ec2").format(region=region)
        # Action, Version, then the rest: the bytes botocore's own EC2 client signs.
        body = urlencode({"Action": params["Action"], "Version": EC2_API_VERSION, **params})
        aws = AWSRequest(method="POST", url=url, data=body, headers={
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        SigV4Auth(self.aws_credentials, "ec2", region).add_auth(aws)
        headers = {k: v for k, v in aws.headers.items()}
        return scrapy.Request(url, method="POST", body=body, headers=headers, dont_filter=True,
                              meta={"handle_httpstatus_list": [400, 401, 403]},
                              cb_kwargs={"region": region, "params": params,
                                         **(cb_kwargs or {})}, **kwargs)

    def all_types(self) -> tuple[str, ...]:
        """Every instance type of the table, sorted."""
        return tuple(sorted(f"{family}.{size}" for family, (_, _, sizes)
                            in ACCELERATOR_FAMILIES.items() for size in sizes))

    def backfills(self, region: str) -> bool:
        """Whether `region` gets its spot history back-filled: storage holds no per-zone
        spot offer of this source there yet (its first crawl with credentials), and the
        `backfill` option is not off. Not per type: a type AWS never answered for would be
        asked again every crawl; one that appears later starts its history when first seen.
        Nothing stored to compare with (no storage: `parse`) is no back-fill."""
        keys = self.stored_offer_keys
        if keys is None or not self.option("backfill", True):
            return False
        return not any(k[0] == region and k[1] and k[3] == "spot" for k in keys)

    def spot_history_requests(self, region: str) -> Iterator[scrapy.Request]:
        """The region's DescribeSpotPriceHistory: the last BACKFILL_DAYS on its first
        crawl, the current hour after."""
        yield self.spot_history_request(region, backfill=self.backfills(region))

    def spot_history_request(self, region: str, token: str | None = None,
                             types: tuple[str, ...] | None = None, *, backfill: bool = False,
                             page: int = 1) -> scrapy.Request:
        """DescribeSpotPriceHistory for `types` (default: every type of the table); with
        `backfill`, from BACKFILL_DAYS ago (page `page` of at most BACKFILL_MAX_PAGES)."""
        # The price in effect at StartTime plus every change since: the hour keeps the
        # request body stable within the hour (record/replay) and the answer small.
        start = self.clock.now().replace(minute=0, second=0, microsecond=0)
        if backfill:
            start -= timedelta(days=BACKFILL_DAYS)
        params = {"Action": "DescribeSpotPriceHistory", "ProductDescription.1": "Linux/UNIX",
                  "StartTime": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "MaxResults": str(BACKFILL_PAGE_SIZE)}
        if types is None:
            types = self.all_types()
        params.update({f"InstanceType.{i}": t for i, t in enumerate(types, 1)})
        if token:
            params["NextToken"] = token
        return self.signed_request(region, params, {"types": types, "backfill": backfill,
                                                    "page": page},
                                   callback=self.parse_spot_history)

    # -- parsers -------------------------------------------------------------------------
    def parse_file(self, response: Response) -> Iterator[PriceItem]:
        """Tell the seven kinds of response apart by content (`gpuradar parse aws FILE`)."""
        head = _body_text(response).lstrip()[:400]
        if head.startswith("<"):
            if "DescribeSpotPriceHistoryResponse" in head:
                yield from (o for o in self.parse_spot_history(response)
                            if isinstance(o, PriceItem))
                return
            if "DescribeRegionsResponse" in head:
                return
            if "DescribeCapacityBlockOfferingsResponse" in head:
                yield from (o for o in self.parse_capacity_blocks(response)
                            if isinstance(o, PriceItem))
                return
            raise ParseError(self.name, "<root>", response.url,
                             "is not a DescribeSpotPriceHistory, DescribeRegions or "
                             "DescribeCapacityBlockOfferings response")
        data = _json(response, self.name)
        if isinstance(data, dict) and "spot_advisor" in data:
            self.read_advisor(data, response.url)
            self.logger.info("aws: advisor data read: %d GPU offers with a band", len(self.bands))
        elif isinstance(data, dict) and "config" in data:
            yield from self.spot_items(data, response.url)
        elif isinstance(data, dict) and "regions" in data:
            yield from self.ondemand_items(data, response.url, None)
        elif isinstance(data, dict) and any(isinstance(v, dict) and "code" in v
                                            for v in data.values()):
            self.read_locations(data, response.url)  # names for on-demand files parsed next
        else:
            raise ParseError(self.name, "spot_advisor/config/regions", response.url,
                             "is missing: not an AWS price file gpuradar knows")

    def parse_advisor(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        self.read_advisor(_json(response, self.name), response.url)
        # S3 serves the feed's Last-Modified: the bands are a trailing month's figure, so a
        # band is only as good as its date
        self.advisor_as_of = self.answer_day(response, b"Last-Modified")
        yield from self.after_advisor()

    def read_advisor(self, data: Any, where: str) -> None:
        """Keep the interruption band and savings of GPU types only."""
        ranges = require(data, "ranges", self.name, where, list)
        labels = {}
        for i, band in enumerate(ranges):
            labels[require(band, "index", self.name, f"{where} ranges[{i}]", int)] = require(
                band, "label", self.name, f"{where} ranges[{i}]", str)
        advice = require(data, "spot_advisor", self.name, where, dict)
        for region, by_os in advice.items():
            linux = (by_os or {}).get("Linux") or {}
            for instance_type, entry in linux.items():
                if gpu_of(instance_type) is None or not isinstance(entry, dict):
                    continue
                savings = entry.get("s")
                self.bands[(region, instance_type)] = (
                    labels.get(entry.get("r")), int(savings) if isinstance(savings, int | float)
                    else None)
        for instance_type, shape in (data.get("instance_types") or {}).items():
            if gpu_of(instance_type) is not None and isinstance(shape, dict):
                self.shapes[instance_type] = (_number(shape.get("cores")),
                                              _number(shape.get("ram_gb")))

    def parse_locations(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        try:
            self.read_locations(_json(response, self.name), response.url)
        except ParseError as exc:  # the spot feed and the on-demand files still count
            self.logger.error("aws: locations feed unreadable (%s); only the regions of the "
                              "built-in table are read, nothing is closed this crawl", exc)
        yield from self.after_locations()

    def read_locations(self, data: Any, where: str) -> None:
        """Region code -> location name from the locations feed (the feed wins over the
        built-in table); Local and Wavelength Zones are noted so they are skipped quietly."""
        if not isinstance(data, dict) or not data:
            raise ParseError(self.name, "<locations>", where, "is not a non-empty object")
        regions = 0
        for key, entry in data.items():
            if not isinstance(entry, dict):
                continue
            code, kind = entry.get("code"), entry.get("type")
            name = entry.get("name") or key
            if not isinstance(code, str) or not isinstance(name, str):
                continue
            if kind == _REGION_TYPE:
                self.region_names[code] = name
                regions += 1
            else:
                self.other_zones.add(code)
        if not regions:
            raise ParseError(self.name, "type", where, f"names no {_REGION_TYPE!r}")
        new = sorted(set(self.region_names) - set(REGIONS))
        self.logger.info("aws: %d regions in the locations feed%s", regions,
                         f" (not in the built-in table: {', '.join(new)})" if new else "")

    def parse_spot(self, response: Response, **kwargs: Any
                   ) -> Iterator[PriceItem | scrapy.Request]:
        data = _json(response, self.name)
        regions = require(require(data, "config", self.name, response.url, dict), "regions",
                          self.name, response.url, list)
        codes = [r["region"] for r in regions if isinstance(r, dict) and r.get("region")]
        yield from self.spot_items(data, response.url)
        del data, regions
        self.queue_ondemand(codes)
        yield from self.next_ondemand()

    def spot_items(self, data: Any, where: str) -> Iterator[PriceItem]:
        config = require(data, "config", self.name, where, dict)
        # The feed says its unit: "rate": "perhr" in every real capture. Another unit would
        # make every spot price wrong by a constant factor: refuse it rather than store it.
        rate = config.get("rate", "perhr")
        if rate != "perhr":
            raise ParseError(self.name, "config.rate", where, f"is {rate!r}, expected 'perhr'")
        wanted = self.wanted_regions()
        for i, region in enumerate(require(config, "regions", self.name, where, list)):
            at = f"{where} config.regions[{i}]"
            code = require(region, "region", self.name, at, str)
            if wanted is not None and code not in wanted:
                continue
            for group in require(region, "instanceTypes", self.name, at, list):
                kind = group.get("type", "")
                for size in require(group, "sizes", self.name, f"{at} {kind}", list):
                    instance_type = require(size, "size", self.name, f"{at} {kind}", str)
                    if not self.is_accelerated(instance_type, kind == "gpuCurrentGen"):
                        continue
                    price = None
                    for column in require(size, "valueColumns", self.name,
                                          f"{at} {instance_type}", list):
                        if column.get("name") == "linux":
                            price = (column.get("prices") or {}).get("USD")
                    yield self.spot_item(code, "", instance_type, price, SPOT_PAGE)

    def spot_item(self, region: str, zone: str, instance_type: str, price: Any, url: str,
                  extra: dict[str, Any] | None = None) -> PriceItem:
        # an accelerated type (checked before): gpu_of knows it, never None
        gpu, memory, count = gpu_of(instance_type)  # type: ignore[misc]
        band, savings = self.bands.get((region, instance_type), (None, None))
        attributes: dict[str, Any] = dict(extra or {})
        if band:
            attributes["interruption"] = band
            attributes["interruption_source"] = ADVISOR_SOURCE
            if self.advisor_as_of:
                attributes["interruption_as_of"] = self.advisor_as_of
        if savings is not None:
            attributes["savings_pct"] = savings
        vcpus, ram = self.shapes.get(instance_type, (None, None))
        return PriceItem(source=self.name, region=region, zone=zone, instance_type=instance_type,
                         pricing="spot", gpu=gpu, gpu_count=count, gpu_memory_gb=memory,
                         vcpus=vcpus, memory_gb=ram, price=price, currency="USD", url=url,
                         attributes=attributes)

    def is_accelerated(self, instance_type: str, listed_as_accelerated: bool) -> bool:
        """True for a type of the table; a type AWS lists as a GPU or ML ASIC instance that
        the table lacks is reported (never dropped silently)."""
        if gpu_of(instance_type) is not None:
            return True
        if listed_as_accelerated and not _NOT_ML.match(instance_type):
            self.uncatalogued(instance_type, "listed as a GPU or ML accelerator instance, "
                              "not in the instance-type table")
        return False

    def parse_ondemand(self, response: Response, region: str | None = None, **kwargs: Any
                       ) -> Iterator[PriceItem | scrapy.Request]:
        data = _json(response, self.name)
        yield from self.ondemand_items(data, response.url, region)
        del data
        yield from self.next_ondemand()

    def ondemand_items(self, data: Any, where: str, region: str | None) -> Iterator[PriceItem]:
        regions = require(data, "regions", self.name, where, dict)
        entries = 0
        for location, offers in regions.items():
            code = self.region_of_location(location) or region
            if code is None:
                raise ParseError(self.name, "regions", where,
                                 f"names location {location!r} that is not in the region table")
            if not isinstance(offers, dict):
                raise ParseError(self.name, f"regions[{location!r}]", where,
                                 f"is {type(offers).__name__}, expected dict")
            for key, offer in offers.items():
                entries += 1
                item = self.ondemand_item(code, offer, f"{where} regions[{location!r}][{key!r}]")
                if item is not None:
                    yield item
        if entries == 0:
            # A file without a single entry is a broken publication, not a region that
            # stopped selling everything: the crawl must not close that region's offers.
            self.logger.error("aws: on-demand file of %s has no entries; nothing is closed "
                              "this crawl", region or where)

    def region_of_location(self, location: str) -> str | None:
        for code, name in self.region_names.items():
            if name == location:
                return code
        return REGION_OF_LOCATION.get(location)

    def ondemand_item(self, region: str, offer: Any, where: str) -> PriceItem | None:
        instance_type = require(offer, "Instance Type", self.name, where, str)
        family = offer.get("Instance Family", "")
        if not self.is_accelerated(instance_type, family in _ACCELERATED_FAMILY_NAMES):
            return None
        if offer.get("Operating System", "Linux") != "Linux":
            return None
        if offer.get("Pre Installed S/W", "NA") not in ("NA", ""):
            return None
        if offer.get("Tenancy", "Shared") != "Shared":
            return None
        if instance_type in CAPACITY_BLOCK_TYPES and _number(offer.get("price")) == 0:
            # $0 for a type sold as Capacity Blocks: not sold on demand (p5e), not a price.
            self.count("not_on_demand")
            if instance_type not in self.not_on_demand:
                self.not_on_demand.add(instance_type)
                self.logger.info("aws: %s is listed at $0 on demand: not sold on demand "
                                 "(Capacity Blocks), so no on-demand offer", instance_type)
            return None
        # an accelerated type (checked before): gpu_of knows it, never None
        gpu, memory, count = gpu_of(instance_type)  # type: ignore[misc]
        return PriceItem(source=self.name, region=region, instance_type=instance_type,
                         pricing="on_demand", gpu=gpu, gpu_count=count, gpu_memory_gb=memory,
                         vcpus=_number(offer.get("vCPU")), memory_gb=_number(offer.get("Memory")),
                         price=offer.get("price"), currency="USD", url=ONDEMAND_PAGE)

    def parse_describe_regions(self, response: Response, region: str = "", **kwargs: Any
                               ) -> Iterator[scrapy.Request]:
        root = _xml(response, self.name)
        if self.api_error(root, response, "DescribeRegions", region):
            return
        info = root.find("regionInfo")
        if info is None:
            raise ParseError(self.name, "regionInfo", response.url, "is missing")
        enabled: list[str]
        disabled: list[str]
        enabled, disabled = [], []
        for item in info.findall("item"):
            name = item.findtext("regionName") or ""
            status = item.findtext("optInStatus") or "opt-in-not-required"
            (disabled if status == "not-opted-in" else enabled).append(name)
        # Every enabled region is asked, whether or not a price file names it: the EC2 API
        # is per region code and needs no location name.
        wanted = self.wanted_regions()
        skipped = sorted(r for r in disabled if wanted is None or r in wanted)
        if skipped:
            self.logger.info("aws: regions not enabled for this account, skipped: %s",
                             ", ".join(skipped))
        for code in sorted(r for r in set(enabled) if wanted is None or r in wanted):
            yield from self.spot_history_requests(code)
            if self.option("capacity_blocks", True):
                yield from self.capacity_block_requests(code)

    def capacity_block_requests(self, region: str) -> Iterator[scrapy.Request]:
        """DescribeCapacityBlockOfferings in `region`: a 24-hour block of one instance of each
        Capacity Block type, and of one UltraServer of each UltraServer type."""
        hours = str(CAPACITY_BLOCK_HOURS)
        for instance_type in CAPACITY_BLOCK_TYPES:
            yield self.signed_request(region, {
                "Action": "DescribeCapacityBlockOfferings", "InstanceType": instance_type,
                "InstanceCount": "1", "CapacityDurationHours": hours},
                callback=self.parse_capacity_blocks)
        for ultraserver in CAPACITY_BLOCK_ULTRASERVERS:
            yield self.signed_request(region, {
                "Action": "DescribeCapacityBlockOfferings", "UltraserverType": ultraserver,
                "UltraserverCount": "1", "CapacityDurationHours": hours},
                callback=self.parse_capacity_blocks)

    def parse_capacity_blocks(self, response: Response, region: str = "", **kwargs: Any
                              ) -> Iterator[PriceItem | scrapy.Request]:
        root = _xml(response, self.name)
        code = root.findtext(".//Error/Code")
        if code in _NOT_SOLD_HERE:
            self.count("capacity_blocks_not_sold_here")
            return
        if code == "UnauthorizedOperation":
            # Credentials without ec2:DescribeCapacityBlockOfferings, or an account EC2 does
            # not let search UltraServer blocks: the spot history still counts; said once
            # per kind of search, in EC2's words.
            ultra = "UltraserverType" in (kwargs.get("params") or {})
            self.count("capacity_blocks_refused")
            self.warn_once(f"capacity-blocks-refused:{ultra}", "aws: DescribeCapacityBlockOfferings"
                           " for %s refused (%s): no such Capacity Block prices; it needs "
                           "ec2:DescribeCapacityBlockOfferings%s",
                           "UltraServers" if ultra else "instances",
                           (root.findtext(".//Error/Message") or code)[:200],
                           " and an account AWS lets search UltraServers" if ultra else "")
            return
        if self.api_error(root, response, "DescribeCapacityBlockOfferings", region):
            return
        offerings = root.find("capacityBlockOfferingSet")
        if offerings is None:
            raise ParseError(self.name, "capacityBlockOfferingSet", response.url, "is missing")
        best: dict[tuple[str, str], tuple[tuple[float, str], PriceItem]] = {}
        for item in offerings.findall("item"):
            offer = self.capacity_block_item(region, item, response.url)
            if offer is None:
                continue
            rank = (float("inf") if not isinstance(offer.price, float) else offer.price,
                    offer.attributes["terms"].get("start") or "")
            key = (offer.zone, offer.instance_type)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, offer)
        for _, offer in best.values():
            yield offer
        token = (root.findtext("nextToken") or "").strip()
        if token and region and self.aws_credentials is not None:
            params = dict(kwargs.get("params") or {})
            params["NextToken"] = token
            yield self.signed_request(region, params, callback=self.parse_capacity_blocks)

    def capacity_block_item(self, region: str, item: ET.Element, where: str
                            ) -> PriceItem | None:
        """One offering as an offer: per hour = up-front fee / (hours + minutes / 60) of the
        whole block (one instance, or one UltraServer of `instanceCount` instances)."""
        instance_type = item.findtext("instanceType") or ""
        ultraserver = item.findtext("ultraserverType") or ""
        zone = item.findtext("availabilityZone") or ""
        if not zone:
            raise ParseError(self.name, "availabilityZone", where, "is missing")
        if not self.is_accelerated(instance_type, True):
            return None
        # an accelerated type (checked before): gpu_of knows it, never None
        gpu, memory, per_instance = gpu_of(instance_type)  # type: ignore[misc]
        instances = _number(item.findtext("instanceCount")) or 1
        hours = (_number(item.findtext("capacityBlockDurationHours")) or 0) + (
            _number(item.findtext("capacityBlockDurationMinutes")) or 0) / 60
        fee = _number(item.findtext("upfrontFee"))
        # No fee or no length: no hourly price; the pipeline counts it, nothing is stored.
        price = round(fee / hours, 6) if fee is not None and hours > 0 else None
        terms: dict[str, Any] = {
            "block_hours": hours or None, "start": item.findtext("startDate"),
            "end": item.findtext("endDate"), "upfront_fee": fee,
            "currency": item.findtext("currencyCode"), "instance_count": int(instances),
            "offering_id": item.findtext("capacityBlockOfferingId")}
        vcpus, ram = self.shapes.get(instance_type, (None, None))  # the advisor's, if read
        return PriceItem(source=self.name, region=region or region_of_zone(zone), zone=zone,
                         instance_type=ultraserver or instance_type, pricing=CAPACITY_BLOCK,
                         gpu=gpu, gpu_count=per_instance * instances, gpu_memory_gb=memory,
                         vcpus=vcpus and vcpus * instances, memory_gb=ram and ram * instances,
                         price=price, currency=item.findtext("currencyCode") or "USD",
                         available=True, url=CAPACITY_BLOCKS_PAGE,
                         attributes={"terms": {k: v for k, v in terms.items()
                                               if v is not None}})

    def api_error(self, root: ET.Element, response: Response, action: str, region: str) -> bool:
        """Log an EC2 API error response (its code and message, never the request)."""
        if root.tag != "Response" and response.status < 400:
            return False
        code = root.findtext(".//Error/Code") or f"HTTP {response.status}"
        message = root.findtext(".//Error/Message") or ""
        self.logger.error("aws: %s in %s refused: %s %s", action, region, code, message)
        return True

    def retry_without_refused(self, root: ET.Element, region: str, types: tuple[str, ...],
                              backfill: bool = False) -> Iterator[scrapy.Request]:
        """After `InvalidParameterValue`: ask again without the instance type EC2 refused --
        the one its message names, else find it by halves. One unknown type must not cost a
        region all its per-zone spot prices."""
        message = root.findtext(".//Error/Message") or ""
        named = [t for t in types
                 if re.search(rf"(?<![\w.-]){re.escape(t)}(?![\w.-])", message)]
        if named:
            for refused in named:
                self.count("refused_instance_type")
                self.warn_once(f"refused:{region}:{refused}", "aws: DescribeSpotPriceHistory "
                               "in %s refuses %s (%s); asked again without it", region,
                               refused, message)
            rest = tuple(t for t in types if t not in named)
            if rest:
                yield self.spot_history_request(region, types=rest, backfill=backfill)
            return
        half = len(types) // 2
        self.logger.info("aws: DescribeSpotPriceHistory in %s refused %d instance types "
                         "without naming one (%s); asking in halves", region, len(types),
                         message)
        yield self.spot_history_request(region, types=types[:half], backfill=backfill)
        yield self.spot_history_request(region, types=types[half:], backfill=backfill)

    def parse_spot_history(self, response: Response, region: str = "",
                           types: tuple[str, ...] = (), backfill: bool = False, page: int = 1,
                           **kwargs: Any) -> Iterator[PriceItem | PriceHistory | scrapy.Request]:
        root = _xml(response, self.name)
        refused = root.findtext(".//Error/Code") == _INVALID_VALUE
        if refused and self.aws_credentials is not None and (
                len(types) > 1 or any(t in (root.findtext(".//Error/Message") or "")
                                      for t in types)):
            self.history.pop((region, tuple(types)), None)
            yield from self.retry_without_refused(root, region, tuple(types), backfill)
            return
        if self.api_error(root, response, "DescribeSpotPriceHistory", region):
            self.history.pop((region, tuple(types)), None)
            return
        history = root.find("spotPriceHistorySet")
        if history is None:
            raise ParseError(self.name, "spotPriceHistorySet", response.url, "is missing")
        # (zone, type) -> {timestamp: price text}: every price of this page
        prices: dict[tuple[str, str], dict[str, str | None]] = (
            self.history.setdefault((region, tuple(types)), {}) if backfill else {})
        for item in history.findall("item"):
            instance_type = item.findtext("instanceType") or ""
            zone = item.findtext("availabilityZone") or ""
            if not zone:
                raise ParseError(self.name, "availabilityZone", response.url, "is missing")
            if not (item.findtext("productDescription") or "").startswith("Linux/UNIX"):
                continue
            if not self.is_accelerated(instance_type, False):
                continue
            stamp = item.findtext("timestamp") or ""
            series = prices.setdefault((zone, instance_type), {})
            if backfill:
                series.setdefault(stamp, item.findtext("spotPrice"))
            elif not series or stamp > next(iter(series)):  # the latest only
                prices[(zone, instance_type)] = {stamp: item.findtext("spotPrice")}
        token = (root.findtext("nextToken") or "").strip()
        more = bool(token and region and self.aws_credentials is not None)
        if backfill and more and page >= BACKFILL_MAX_PAGES:
            # Not the whole history: storing a part would invent the price of the rest.
            self.history.pop((region, tuple(types)), None)
            self.count("backfill_over_cap")
            self.logger.warning(
                "aws: the %d-day spot history of %s does not fit %d pages of %d; not "
                "back-filled, asking for the current hour instead", BACKFILL_DAYS, region,
                BACKFILL_MAX_PAGES, BACKFILL_PAGE_SIZE)
            yield self.spot_history_request(region, types=tuple(types))
            return
        if backfill and more:
            yield self.spot_history_request(region, token, tuple(types), backfill=True,
                                            page=page + 1)
            return
        if backfill:
            self.history.pop((region, tuple(types)), None)
        yield from self.history_items(region, prices, backfill)
        if more and not backfill:
            yield self.spot_history_request(region, token, tuple(types) or None)

    def history_items(self, region: str, prices: dict[tuple[str, str], dict[str, str | None]],
                      backfill: bool) -> Iterator[PriceItem | PriceHistory]:
        """The latest price per zone and type as the live offer; with `backfill`, every
        readable price also as that offer's history (an unreadable one is counted)."""
        for (zone, instance_type), series in sorted(prices.items()):
            stamp = max(series)
            code = region or region_of_zone(zone)
            yield self.spot_item(code, zone, instance_type, series[stamp], SPOT_PAGE,
                                 {"price_since": stamp} if stamp else None)
            if not backfill:
                continue
            points, unreadable = [], 0
            for when, text in series.items():
                at = _epoch(when)
                if at is None or not re.fullmatch(r"\s*\d+(\.\d+)?\s*", text or ""):
                    unreadable += 1  # counted in the crawl's summary, never stored
                    continue
                points.append((at, float(text or "")))
            yield PriceHistory(self.name, OfferKey(code, zone, instance_type, "spot"),
                               gpu_of(instance_type)[2],  # type: ignore[index]
                               "USD", points, BACKFILL_DAYS, unreadable)
