"""`gpuradar sources --check`: one cheap request per enabled source (and per credential),
read by the source's own parser, each outcome in one line with the fix to try.

A probe is the source's spider with another start: its `probe_requests()` (by default the
first request its crawl would make) go out once, without retries of HTTP errors, and the
answer is handed to the spider's own callback; nothing is stored and follow-up requests are
counted, not made. The outcome is the first that applies of: robots-forbidden (a page the
site's robots.txt forbids: not asked for, by choice), unreachable (no connection),
rate-limited (429 or the provider's throttling code), auth-failed (401/403 or the provider's
authentication codes), http-error, not-understood (the parser refused the answer), ok.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import IgnoreRequest
from scrapy.settings import Settings

from gpuradar.core.items import PriceItem
from gpuradar.core.logs import source_once
from gpuradar.crawler.middlewares import connection_cause
from gpuradar.crawler.runner import spider_classes
from gpuradar.crawler.spiders.base import GpuRadarSpider

# The providers' authentication and throttling codes, as their API references name them:
# Tencent (AuthFailure.*, RequestLimitExceeded), Alibaba (InvalidAccessKeyId.*,
# SignatureDoesNotMatch, IncompleteSignature, Throttling.*), Huawei APIG (APIGW.0301 wrong
# IAM authentication, APIGW.0308 throttled), AutoDL (AuthorizeFailed), Vast.ai ("API requests
# too frequent", search_quota_exceeded).
AUTH_CODES = re.compile(r"AuthFailure|InvalidAccessKeyId|SignatureDoesNotMatch|"
                        r"IncompleteSignature|APIGW\.0301|AuthorizeFailed|Unauthori[sz]ed|"
                        r"invalid authorization|Forbidden", re.IGNORECASE)
THROTTLE_CODES = re.compile(r"RequestLimitExceeded|Throttling|APIGW\.0308|too frequent|"
                            r"search_quota_exceeded|rate limit", re.IGNORECASE)


#: Signal sent by a probe for each outcome (`result`: a ProbeResult).
probe_reported = object()


@dataclass
class ProbeResult:
    source: str
    check: str
    result: str  # ok | robots-forbidden | unreachable | rate-limited | auth-failed |
    #              http-error | not-understood
    detail: str
    fix: str = ""


def _fix(cls: type[GpuRadarSpider], result: str, url: str) -> str:
    facts = cls.facts
    name = facts.name
    url = urlsplit(url)._replace(query="").geturl()
    endpoint = next((f"endpoints.{name}.{key}" for key, default in facts.endpoints.items()
                     if urlsplit(default).path.split("{")[0] in urlsplit(url).path), None)
    endpoint = endpoint or f"endpoints.{name}.<endpoint>"
    credentials = " / ".join(facts.credentials.values())
    return {
        "robots-forbidden": f"the site asks robots not to read {url}, and gpuradar obeys: "
                            f"ask the site, or disable sources.{name}",
        "unreachable": f"check the network or proxy; the URL is {url} ({endpoint} overrides it)",
        "rate-limited": f"wait and retry; crawl less often (sources.{name}.interval) or slower "
                        f"(sources.{name}.request_interval)",
        "auth-failed": (f"check the credentials ({credentials} or sources.{name}.*): valid, "
                        "not expired, allowed to read prices") if credentials else
                       "this source needs no credentials: check the endpoint",
        "http-error": f"check the endpoint {url} ({endpoint}); a 5xx is the provider's fault",
        "not-understood": f"the answer changed shape: run `gpuradar crawl {name} -v` and report "
                          "it with the message above",
    }.get(result, "")


def _outcome(text: str, status: int | None = None) -> str:
    if status == 429 or THROTTLE_CODES.search(text):
        return "rate-limited"
    if status in (401, 403) or AUTH_CODES.search(text):
        return "auth-failed"
    if status is not None and status >= 400:
        return "http-error"
    return "not-understood"


class _Errors(logging.Handler):
    """The spider's own ERROR/WARNING lines while one answer is parsed."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage().splitlines()[0][:300]))


def probe_class(cls: type[GpuRadarSpider]) -> type[GpuRadarSpider]:
    """`cls` with a start that sends its probe requests and judges their answers."""
    crawl_start = cls.start

    async def probe_requests(self) -> list[tuple[str, scrapy.Request]]:
        own = getattr(cls, "probe_requests", None)
        if own is not None:
            return list(own(self))
        async for request in crawl_start(self):
            return [("first request", request)]
        return []

    async def start(self):
        for label, request in await probe_requests(self):
            yield request.replace(
                callback=self._probe_answer, errback=self._probe_failed, dont_filter=True,
                meta={**request.meta, "probe": label, "dont_retry": True,
                      "probe_callback": request.callback, "handle_httpstatus_all": True})

    def report(self, request: scrapy.Request, result: str, detail: str) -> None:
        self.crawler.signals.send_catch_log(probe_reported, result=ProbeResult(
            self.name, request.meta["probe"], result, source_once(detail, self.name),
            _fix(cls, result, request.url)))

    async def _probe_answer(self, response, **kwargs: Any) -> None:
        request = response.request
        handled = set(request.meta.get("handle_httpstatus_list", ()))
        text = response.text[:2000] if hasattr(response, "text") else ""
        if response.status >= 400 and response.status not in handled:
            result = _outcome(text, response.status)
            self.report(request, result, f"HTTP {response.status}: {' '.join(text.split())[:160]}")
            return
        errors = _Errors()
        log = logging.getLogger(self.name)
        log.addHandler(errors)
        items = follow = 0
        try:
            output = request.meta["probe_callback"](response, **kwargs)
            if inspect.isawaitable(output):
                output = await output
            outputs: Iterable[Any] = output or ()
            if inspect.isasyncgen(outputs):
                outputs = [o async for o in outputs]
            for out in outputs:
                if isinstance(out, PriceItem):
                    items += 1
                elif isinstance(out, scrapy.Request):
                    follow += 1
        except Exception as exc:  # noqa: BLE001 - the parser's verdict on the answer
            self.report(request, _outcome(str(exc), response.status),
                        str(exc).splitlines()[0][:200])
            return
        finally:
            log.removeHandler(errors)
        problems = [m for level, m in errors.lines if level >= logging.ERROR]
        if problems:
            self.report(request, _outcome(problems[0], response.status), problems[0])
            return
        warnings = [m for _, m in errors.lines]
        detail = (f"reachable, answer understood: {items} offer(s), {follow} follow-up "
                  f"request(s)")
        if warnings:
            detail += f"; warning: {warnings[0]}"
        self.report(request, "ok", detail)

    def _probe_failed(self, failure) -> None:
        request = failure.request
        exc = failure.value
        if failure.check(IgnoreRequest) and "robots.txt" in str(exc):
            # Scrapy's RobotsTxtMiddleware refused the request: the network is not at fault
            self.report(request, "robots-forbidden",
                        f"the site's robots.txt forbids {urlsplit(request.url).path}; not read")
            return
        cause = str(exc).split("is unreachable (", 1)[-1].rstrip(")") if "is unreachable" in \
            str(exc) else connection_cause(exc)
        self.report(request, "unreachable", f"{urlsplit(request.url).netloc}: {cause}")

    return type(f"{cls.__name__}Probe", (cls,), {
        "start": start, "_probe_answer": _probe_answer, "_probe_failed": _probe_failed,
        "report": report, "__module__": cls.__module__})


def run_probes(sources: list[str], settings: Settings) -> list[ProbeResult]:
    """Probe `sources` through the crawl service. Nothing is stored."""
    from gpuradar.crawler.service import Crawl, CrawlService, scrapy_logging

    settings = settings.copy()
    settings.set("ITEM_PIPELINES", {}, priority="cmdline")
    settings.set("RETRY_HTTP_CODES", [], priority="cmdline")
    settings.set("CLOSESPIDER_TIMEOUT", 120, priority="cmdline")
    service = CrawlService(settings)
    classes = spider_classes(settings)
    found = {name: _Found() for name in sources}
    crawls = {}
    for name in sources:
        crawls[name] = crawl = Crawl(probe_class(classes[name]), settings)
        crawl.crawler.signals.connect(found[name].add, signal=probe_reported, weak=False)
    with scrapy_logging(settings):
        service.run(lambda: service.in_order(crawls), shutdown_signals=True)
    results: list[ProbeResult] = []
    for name in sources:
        results.extend(found[name] or [ProbeResult(
            name, "-", "not-understood", "the probe made no request",
            "run `gpuradar crawl -v` for this source")])
    return results


class _Found(list[ProbeResult]):
    """The outcomes one probe reported (signal `probe_reported`)."""

    def add(self, result: ProbeResult) -> None:
        self.append(result)
