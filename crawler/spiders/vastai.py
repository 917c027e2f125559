"""Vast.ai: the public marketplace search (`POST /api/v0/bundles/`, no key needed).

What Vast's API reference (vast-ai/docs `api-reference/openapi/yaml/search_offers.yaml`,
read 2026-12) says, and what the spider does with it:

* `rented` "is not a server-side filter. The server drops this key. Each offer still
  includes a `rented` flag"; the CLI re-filters on the client, and its field list says what
  the flag means: "allow/disallow duplicates and potential conflicts with existing stopped
  instances" (vast-ai/vast-cli `vast.py`, search offers) -- the caller's own instances. So
  `rented: true` says "you already hold this machine", not "nobody can rent it": it is kept
  as the attribute `yours`, and availability is `rentable` ("is the instance currently
  rentable"; the search asks for rentable offers). An offer missing from a complete crawl is
  closed.
* A bad or missing key answers HTTP 404 `{"msg": "Invalid user key"}` (the API reference's
  404: "Unauthorized - invalid or missing API key"): the crawl stops with one line saying so
  (every search would be refused), which `sources --check` reads as auth-failed.
* No cursor: `limit` is the most offers an answer holds and `truncated` is "True when the
  server cut the result short of `limit`. Narrow the query instead of assuming you saw every
  offer." Few, large searches: one for every GPU model of GPU_NAMES at once (`gpu_name` `in`)
  and one for every other model (`notin`: how a GPU Vast starts listing shows up, unknown to
  the catalog and counted). A cut answer is narrowed (the model list in halves, then one model
  by GPU count). Collectors saw the server stop at 64 offers however large `limit` was
  (providers' notes: gpu-index, and a collector of `search/asks`), so an answer of exactly
  SERVER_CAP offers without a `truncated` flag counts as cut too. One that still is cut when
  it cannot be narrowed is reported: the crawl is partial and closes nothing.
* `x-rate-limit`: 10 requests a minute per IP, so one search every 6 s, one at a time: the
  searches form a queue and each answer sends the next one. 429 "Too many requests, or the
  daily search row quota is exhausted": the retry middleware backs off on the first; the
  quota (`error: search_quota_exceeded`, Retry-After "which can be hours") is not waited out:
  the crawl stops there, partial, with one line saying so. The queue also stops before a
  search that could not finish inside the crawl's time budget (CLOSESPIDER_TIMEOUT), with one
  line naming what was not searched, instead of being cut by the timeout as a failed crawl.

Ask ids are ephemeral; the identity of an offer is (machine, GPU, count). Storage:
`dph_total` already contains the default disk's storage cost (`search.diskHour`); the spot
(interruptible) price is `min_bid` plus that same storage cost, so on-demand and spot compare
on the same basis.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from gpuradar.core.items import PriceItem
from gpuradar.core.providers.vastai import VASTAI
from gpuradar.crawler.spiders.base import GpuRadarSpider, failed_request, require

# gpu_name values Vast uses for datacenter and popular consumer GPUs.
GPU_NAMES = (
    "B200", "H200", "H200 NVL", "H100 SXM", "H100 NVL", "H100 PCIE", "GH200 SXM", "A100 SXM4",
    "A100 PCIE", "A100X", "L40S", "L40", "L4", "A40", "A10", "RTX PRO 6000 WS", "RTX PRO 6000 S",
    "RTX 6000Ada", "RTX A6000", "RTX A5000", "RTX A4000", "RTX 5090", "RTX 4090", "RTX 3090",
    "Tesla V100", "Tesla T4", "Q RTX 8000", "MI300X",
)
# How a one-model search that is still truncated is split further: by GPUs per offer.
GPU_COUNTS: tuple[dict[str, int], ...] = (
    {"eq": 1}, {"eq": 2}, {"gte": 3, "lte": 4}, {"gte": 5, "lte": 8}, {"gt": 8})
# Where collectors saw Vast's search stop whatever the `limit` (see the module docstring).
SERVER_CAP = 64
# What Vast answers a bad or missing API key with (search_offers.yaml: 404 "Unauthorized -
# invalid or missing API key", msg "Invalid user key").
UNAUTHORIZED = 404
INVALID_KEY = "Invalid user key"
# A search is (GPU names, "in" or "notin", GPU-count condition or None).
Search = tuple[tuple[str, ...], str, dict[str, int] | None]


class VastaiSpider(GpuRadarSpider):
    facts = VASTAI
    custom_settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1}

    @property
    def limit(self) -> int:
        return int(self.option("limit", 1000))

    def query(self, names: list[str], mode: str = "in", gpus: dict[str, int] | None = None,
              limit: int | None = None) -> dict[str, Any]:
        """The search body: rentable on-demand offers of the models `names` (`mode` "in"),
        or of every other model ("notin"), cheapest first."""
        query: dict[str, Any] = {"gpu_name": {mode: list(names)}} if names else {}
        if gpus:
            query["num_gpus"] = dict(gpus)
        return query | {
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "type": "on-demand",
            "order": [["dph_total", "asc"]],
            "limit": limit or self.limit,
        }

    def search(self, names: list[str], mode: str = "in", gpus: dict[str, int] | None = None,
               limit: int | None = None) -> scrapy.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.option("api_key")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return scrapy.Request(self.endpoint("bundles"), method="POST", headers=headers,
                              body=json.dumps(self.query(names, mode, gpus, limit),
                                              sort_keys=True),
                              callback=self.parse, errback=self.failed, dont_filter=True,
                              cb_kwargs={"search": (tuple(names), mode, gpus)},
                              meta={"handle_httpstatus_list": [UNAUTHORIZED]})

    async def start(self):
        names = tuple(str(n) for n in self.option("gpu_names", GPU_NAMES))
        self._queue: deque[Search] = deque([(names, "in", None), (names, "notin", None)])
        self._started = self.clock.monotonic()
        self._stopped = False
        for request in self.next_search():
            yield request

    def next_search(self) -> Iterator[scrapy.Request]:
        """The next queued search, unless the crawl stopped or it could not finish in time."""
        queue: deque[Search] = getattr(self, "_queue", deque())
        if self.__dict__.get("_stopped") or not queue:
            return
        settings = getattr(self, "settings", None)
        budget = settings.getfloat("CLOSESPIDER_TIMEOUT") if settings else 0.0
        interval = settings.getfloat("DOWNLOAD_DELAY") if settings else 0.0
        started = self.__dict__.setdefault("_started", self.clock.monotonic())
        # The next search waits one interval, then needs its answer (allow another interval,
        # at least 5 s): if that ends past the budget, stop here as a partial crawl.
        if budget and self.clock.monotonic() - started + interval + max(interval, 5.0) > budget:
            self.stop(f"the crawl's time budget of {budget:.0f} s would run out before "
                      f"{len(queue)} more search(es) finish")
            return
        names, mode, gpus = queue.popleft()
        yield self.search(list(names), mode, gpus)

    def stop(self, why: str) -> None:
        """Make no more searches: one error line, so the crawl is partial (nothing closed)."""
        queue: deque[Search] = getattr(self, "_queue", deque())
        left = ", ".join(describe(*search) for search in queue) or "none"
        self._stopped = True
        queue.clear()
        self.logger.error("vastai: %s; the crawl stops here and closes nothing (searches not "
                          "made: %s)", why, left)

    def failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        """A search that did not answer: a quota or rate-limit refusal stops the queue (every
        later search would be refused too); any other failure is reported and the next search
        goes ahead."""
        if failure.check(IgnoreRequest) and not failure.check(HttpError):
            yield from self.next_search()  # dropped by a middleware that said why
            return
        response = failure.value.response if isinstance(failure.value, HttpError) else None
        if response is not None and response.status == 429:
            try:
                error = (json.loads(response.text) or {}).get("error")
            except (ValueError, AttributeError):
                error = None
            wait = (response.headers.get(b"Retry-After") or b"").decode("latin-1").strip()
            after = f", Retry-After {wait} s" if wait else ""
            if error == "search_quota_exceeded":  # Vast's API reference, 429
                self.stop(f"Vast's daily search quota is exhausted (HTTP 429 "
                          f"search_quota_exceeded{after})")
            else:
                self.stop(f"Vast still refuses searches as too frequent (HTTP 429{after})")
            return
        what = f"HTTP {response.status}" if response is not None else failure.getErrorMessage()
        self.logger.error("vastai: a search failed (%s, %s); its offers are missing from this "
                          "crawl", what, failed_request(failure).url)
        yield from self.next_search()

    def probe_requests(self) -> list[tuple[str, scrapy.Request]]:
        """`sources --check`: one search for a single offer."""
        return [("search", self.search(["RTX 4090"], limit=1))]

    @staticmethod
    def refusal(response: Response) -> str:
        """Vast's own words for a refused request (`msg`, else `error`), never the key."""
        try:
            body = json.loads(response.text)
        except (ValueError, AttributeError):
            body = None
        said = (body.get("msg") or body.get("error")) if isinstance(body, dict) else None
        return str(said)[:120] if said else "(no message)"

    @staticmethod
    def narrower(names: tuple[str, ...], mode: str, gpus: dict[str, int] | None
                 ) -> list[Search]:
        """Searches that together cover one cut search, or [] when it cannot be split."""
        if mode == "in" and len(names) > 1:
            half = len(names) // 2
            return [(names[:half], "in", None), (names[half:], "in", None)]
        if gpus is None:
            return [(names, mode, dict(count)) for count in GPU_COUNTS]
        return []

    def cut_short(self, data: dict[str, Any], offers: list) -> bool:
        """Whether the answer may miss offers: Vast says so (`truncated`), it is full, or it
        stops at the observed server cap without saying either way."""
        if data.get("truncated") is True or len(offers) >= self.limit:
            return True
        if "truncated" not in data and len(offers) == SERVER_CAP:
            self.count("server_cap_suspected")
            return True
        return False

    def parse(self, response: Response, search: Search | None = None,
              **kwargs: Any) -> Iterator[PriceItem | scrapy.Request]:
        if response.status == UNAUTHORIZED:
            said = self.refusal(response)
            if INVALID_KEY.lower() in said.lower():
                self.stop(f"Vast refused the API key: HTTP 404 {said} (Unauthorized: invalid "
                          "or missing API key; check VAST_API_KEY or sources.vastai.api_key)")
                return
            # Another 404 (a wrong endpoint): this search is lost, the others go ahead.
            self.logger.error("vastai: a search failed (HTTP 404 %s, %s); its offers are "
                              "missing from this crawl", said, response.url)
            yield from self.next_search()
            return
        data = self.json_body(response)
        offers = require(data, "offers", self.name, response.url, list)
        if search is not None and self.cut_short(data, offers):
            split = self.narrower(*search)
            if split:  # the narrower searches carry these offers too: read them there
                self.count("truncated_search_split")
                self.__dict__.setdefault("_queue", deque()).extendleft(reversed(split))
                yield from self.next_search()
                return
            self.logger.error("vastai: the search for %s still stops at %d offers; the rest "
                              "are missing from this crawl", describe(*search), len(offers))
        for i, offer in enumerate(offers):
            yield from self.parse_offer(offer, f"offers[{i}]")
        if search is not None:
            yield from self.next_search()

    def parse_offer(self, offer: dict[str, Any], where: str) -> Iterator[PriceItem]:
        src = self.name
        machine = require(offer, "machine_id", src, where, int)
        gpu_name = require(offer, "gpu_name", src, where, str)
        num_gpus = require(offer, "num_gpus", src, where, (int, float))
        dph_total = require(offer, "dph_total", src, where, (int, float, type(None)))
        gpu_ram = offer.get("gpu_ram")
        geo = offer.get("geolocation") or ""
        country = geo.rsplit(",", 1)[-1].strip() or "unknown"
        cores, effective = offer.get("cpu_cores"), offer.get("cpu_cores_effective")
        ram = offer.get("cpu_ram")
        memory = None
        if ram and cores and effective:  # RAM is shared in proportion to the cores rented
            memory = round(ram * effective / cores / 1000, 1)
        # Availability is `rentable`; `rented` is about the caller's own instances (see the
        # module docstring), kept as `yours`, never "unavailable for everyone".
        rentable = offer.get("rentable")
        available = rentable if isinstance(rentable, bool) else None
        if available is None:
            self.warn_once("rentable", "vastai: offers without a `rentable` flag; their "
                           "availability is stored as unknown")
        rented = offer.get("rented")
        disk_hour = (offer.get("search") or {}).get("diskHour")
        if disk_hour is None and dph_total is not None and offer.get("dph_base") is not None:
            disk_hour = dph_total - offer["dph_base"]
        common = dict(
            source=src, region=country,
            instance_type=f"{machine}:{num_gpus}x{gpu_name.replace(' ', '_')}",
            gpu=gpu_name, gpu_count=num_gpus,
            gpu_memory_gb=round(gpu_ram / 1024, 1) if gpu_ram else None,
            vcpus=effective, memory_gb=memory, currency="USD", available=available,
            url=f"https://cloud.vast.ai/?ask={offer.get('ask_contract_id', offer.get('id', ''))}",
            attributes={"reliability": offer.get("reliability2", offer.get("reliability")),
                        "verification": offer.get("verification"),
                        "datacenter": bool(offer.get("hosting_type")),
                        "storage_usd_per_hour": disk_hour, "location": geo.strip(", "),
                        "yours": rented if isinstance(rented, bool) else None,
                        # The highest CUDA the host's driver supports: the SDK's `cuda_vers`
                        # ("machine max supported cuda version (based on driver version)",
                        # vastai api/query.py) is this field; `recommend --cuda` reads it.
                        "cuda": offer.get("cuda_max_good")},
        )
        yield PriceItem(pricing="on_demand", price=dph_total, **common)
        min_bid = offer.get("min_bid")
        if min_bid:
            yield PriceItem(pricing="spot", price=min_bid + (disk_hour or 0.0), **common)


def describe(names: tuple[str, ...], mode: str, gpus: dict[str, int] | None) -> str:
    """A search in words, for error lines: "RTX 4090 with num_gpus {'eq': 1}"."""
    what = "other models than " + ", ".join(names) if mode == "notin" else ", ".join(names)
    return (what or "every model") + (f" with num_gpus {gpus}" if gpus else "")
