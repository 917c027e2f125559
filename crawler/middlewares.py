"""Downloader middlewares: backoff on throttling, giving up on unreachable providers, and
record/replay of whole crawls. Spider middlewares: one line for an unreadable response, and
the offers of one callback grouped into batches for the item pipelines."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
    ResponseDataLossError,
)
from scrapy.http import Headers, HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.responsetypes import responsetypes
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from scrapy.utils.response import response_status_message
from twisted.internet.error import ConnectError
from twisted.internet.error import TimeoutError as TxTimeoutError

from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.items import PriceBatch, PriceItem
from gpuradar.core.logs import IN_OUTCOME
from gpuradar.storage.ingest import Replay

if TYPE_CHECKING:
    from gpuradar.crawler.spiders.base import GpuRadarSpider

log = logging.getLogger(__name__)

_THROTTLED = {429, 503}
# Failures that mean "could not talk to the host at all" (as opposed to a bad answer).
_CONNECTION_ERRORS = (CannotResolveHostError, DownloadConnectionRefusedError,
                      DownloadTimeoutError, ConnectError, TxTimeoutError)


# What a body cut mid-transfer is called in every report (Scrapy's ResponseDataLossError
# carries no message, so its retry and give-up lines said nothing).
CUT_SHORT = "answer cut short (the connection closed before the whole body arrived)"


def connection_cause(exc: BaseException) -> str:
    """A few words on why a host could not be reached, for one-line reports."""
    if isinstance(exc, CannotResolveHostError):
        return "DNS lookup failed"
    if isinstance(exc, DownloadConnectionRefusedError):
        return "connection refused"
    text = str(exc).strip()
    if text.startswith("no answer from") and " within " in text:
        return "no answer within " + text.split(" within ", 1)[1]
    if isinstance(exc, DownloadTimeoutError | TxTimeoutError):
        return "timed out"
    return (text.splitlines() or [type(exc).__name__])[0][:120]


def crawling(crawler: Crawler) -> Spider:
    """The crawl's spider. Scrapy sets it before any middleware method is called (its type
    allows None for the time before the crawl starts)."""
    if crawler.spider is None:
        raise RuntimeError("the crawl has no spider yet")
    return crawler.spider


async def reactor_sleep(seconds: float) -> None:
    """Wait without blocking the crawl (the middleware's default `sleep`)."""
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    await maybe_deferred_to_future(deferLater(reactor, seconds, lambda: None))


def retry_after_seconds(value: bytes | str | None, now: datetime) -> float | None:
    """Seconds a Retry-After header asks for: delay-seconds or an HTTP-date (RFC 9110
    section 10.2.3); a date in the past is 0; None when absent or unreadable."""
    if not value:
        return None
    text = (value.decode("latin-1") if isinstance(value, bytes) else value).strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's retry, made polite and quick to give up where that is the right thing. One
    policy for every source, whatever its request interval:

    * Throttling (429/503, or a response the spider's `throttle_pause(response)` says is one:
      Alibaba's 400/403 `Throttling.*`) is retried after a pause: the spider's pause, else
      the Retry-After header (seconds or an HTTP date), else base * 2**attempt, capped at
      RETRY_BACKOFF_MAX. The pause holds
      every request to that host (they wait in `process_request`), not just the refused one.
      Without Retry-After (Vast.ai limits each identity to a request rate and says nothing
      more) the pause also becomes the slot's minimum interval for the rest of the crawl. A
      Retry-After beyond the cap (a daily quota) is not waited out: the answer stands, the
      crawl reports it and the log names the cap. Retries count against RETRY_TIMES.
    * Every retry is signed afresh when the spider defines `sign_again(request)`: Alibaba
      refuses a reused SignatureNonce, and every signer dates its signature.
    * A provider that says "throttled" with another status (Alibaba: 400/403 `Throttling*`)
      is told apart by the spider's `throttle_pause(response)`: seconds to wait, or None
      for an answer that is not throttling.
    * A host that never answered in this crawl gets GPURADAR_CONNECT_ATTEMPTS attempts per
      request, and none once the source has waited GPURADAR_UNREACHABLE_AFTER seconds without
      any answer; then it is unreachable: one ERROR line (host, cause, and the requests sent
      to it) and every other request to it is dropped at once, so an offline crawl ends in
      seconds with one line per source instead of a traceback per request.

    The waits go through `self.sleep` and the times through `self.clock` (a
    gpuradar.core.clock.Clock, a FakeClock in tests): the setting GPURADAR_RETRY_SLEEP (a
    callable or its import path, `async (seconds) -> None`) replaces the sleep, so tests
    see the computed waits without waiting.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler.settings)
        self.crawler = crawler
        settings = crawler.settings
        self.base = settings.getfloat("RETRY_BACKOFF_BASE", 1.0)
        self.cap = settings.getfloat("RETRY_BACKOFF_MAX", 60.0)
        self.connect_attempts = max(1, settings.getint("GPURADAR_CONNECT_ATTEMPTS", 2))
        self.unreachable_after = settings.getfloat("GPURADAR_UNREACHABLE_AFTER", 25.0)
        self.answer_timeout = settings.getfloat("GPURADAR_ANSWER_TIMEOUT", 0.0)
        sleep = settings.get("GPURADAR_RETRY_SLEEP")
        self.sleep: Callable[[float], Awaitable[None]] = (
            load_object(sleep) if isinstance(sleep, str) else sleep or reactor_sleep)
        self.clock: Clock = SYSTEM
        self.started: float | None = None
        self.answered: set[str] = set()
        self.unreachable: dict[str, str] = {}
        self.sent: dict[str, int] = {}            # requests sent to a host not yet answered
        self.resume_at: dict[str, float] = {}     # host -> clock time it may be asked again
        crawler.signals.connect(self._headers_received, signal=signals.headers_received)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        # The spider's own reports of requests dropped for an unreachable host repeat the one
        # line already logged: shown with -v only, and not part of the crawl's error.
        self._spider_log = logging.getLogger(crawler.spidercls.name)
        self._spider_log.addFilter(self._demote_repeats)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BackoffRetryMiddleware:
        return cls(crawler)

    # -- reachability ---------------------------------------------------------------------
    def _headers_received(self, headers: Any, body_length: int, request: Request,
                          spider: Any) -> None:
        self.answered.add(urlsplit(request.url).netloc)

    def _spider_closed(self, spider: Spider) -> None:
        self._spider_log.removeFilter(self._demote_repeats)

    def _demote_repeats(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and self.unreachable:
            message = record.getMessage()
            if any(f"{host} is unreachable (" in message for host in self.unreachable):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True

    def _out_of_time(self) -> bool:
        """Nothing of this source has answered, and another attempt could not end in time."""
        if self.answered or self.started is None:
            return False
        return self.clock.monotonic() - self.started + self.answer_timeout > self.unreachable_after

    def _give_up(self, request: Request, cause: str) -> None:
        host = urlsplit(request.url).netloc
        if host in self.unreachable:
            return
        spider = crawling(self.crawler)
        attempts = self.sent.get(host, 0)  # every request sent to it, retries included
        self.unreachable[host] = f"{cause}, {attempts} attempt{'s' if attempts != 1 else ''}"
        self.crawler.stats.set_value("gpuradar/unreachable", dict(self.unreachable))
        # Logged against the spider: as an ERROR the crawl's outcome counts it (partial or
        # failed, nothing closed); a request the spider can do without (meta `optional`,
        # its errback falls back) only warns.
        # The crawl's outcome repeats the line (gpuradar.core.logs.IN_OUTCOME): shown at DEBUG.
        level = logging.WARNING if request.meta.get("optional") else logging.ERROR
        log.log(level, "%s: cannot reach %s (%s); its other requests are skipped",
                spider.name, host, self.unreachable[host],
                extra={"spider": spider, IN_OUTCOME: True})

    async def process_request(self, request: Request) -> None:
        host = urlsplit(request.url).netloc
        if self.started is None:
            self.started = self.clock.monotonic()
        wait = self.resume_at.get(host, 0.0) - self.clock.monotonic()
        if wait > 0:  # the host asked for a pause (or throttled us): every request waits
            await self.sleep(wait)
        if host not in self.unreachable and host not in self.answered and self._out_of_time():
            waited = self.clock.monotonic() - self.started
            self._give_up(request, f"not tried: nothing answered in {waited:.0f} s")
        if host in self.unreachable:
            self.crawler.stats.inc_value("gpuradar/unreachable_skipped")
            raise IgnoreRequest(f"{host} is unreachable ({self.unreachable[host]})")
        if host not in self.answered:
            self.sent[host] = self.sent.get(host, 0) + 1
        return None

    def process_exception(  # type: ignore[override]  # Scrapy 2.13+ passes no spider
            self, request: Request, exception: Exception) -> Request | Response | None:
        host = urlsplit(request.url).netloc
        if isinstance(exception, ResponseDataLossError):
            return self._cut_short(request, exception)
        if not isinstance(exception, _CONNECTION_ERRORS) or host in self.answered:
            return super().process_exception(request, exception)
        if host in self.unreachable:
            raise IgnoreRequest(f"{host} is unreachable ({self.unreachable[host]})")
        slot = self._slot(request)
        if slot is not None:  # nothing was received: no politeness pause before the retry
            slot.lastseen = 0.0
        attempts = request.meta.get("retry_times", 0) + 1
        allowed = min(self.connect_attempts,
                      1 + request.meta.get("max_retry_times", self.max_retry_times))
        if (attempts < allowed and not request.meta.get("dont_retry")
                and not self._out_of_time()):
            retry = self._retry(request, exception)
            if retry is not None:
                return retry
        self._give_up(request, connection_cause(exception))
        raise IgnoreRequest(f"{host} is unreachable ({self.unreachable[host]})")

    def _cut_short(self, request: Request, exception: ResponseDataLossError) -> Request:
        """A body cut mid-transfer (the length promised, the connection closed): retried
        as Scrapy does, each line saying so; once retries are spent, IgnoreRequest with the
        reason for the request's errback (Scrapy's give-up line is the crawl's one ERROR),
        not a traceback from the scraper."""
        cut = ResponseDataLossError(CUT_SHORT)
        cut.__cause__ = exception.__cause__
        retry = super().process_exception(request, cut)
        if isinstance(retry, Request):
            return retry
        raise IgnoreRequest(CUT_SHORT) from exception

    # -- throttling -----------------------------------------------------------------------
    def _slot(self, request: Request):
        key = request.meta.get("download_slot")
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy: not set before the crawl starts
            engine = None
        if key is None or engine is None:
            return None
        return engine.downloader.slots.get(key)

    def _throttled(self, response: Response) -> bool:
        """429/503, when retried at all (the spider's own reading: `_spider_pause`)."""
        return response.status in _THROTTLED and response.status in self.retry_http_codes

    def pause(self, request: Request, response: Response) -> tuple[float | None, float]:
        """(Retry-After in seconds or None, the pause before the retry)."""
        retry_after = retry_after_seconds(response.headers.get(b"Retry-After"), self.clock.now())
        if retry_after is not None:
            return retry_after, retry_after
        attempt = request.meta.get("retry_times", 0)
        return None, min(self.base * 2**attempt, self.cap)

    def _hold(self, request: Request, pause: float, learned: bool) -> None:
        """No request to this host leaves before `pause` seconds from now; a `learned` pause
        (no Retry-After: the provider's rate is unknown) also stays the slot's minimum
        interval for the rest of the crawl."""
        host = urlsplit(request.url).netloc
        self.resume_at[host] = max(self.resume_at.get(host, 0.0), self.clock.monotonic() + pause)
        slot = self._slot(request)
        if learned and slot is not None:
            slot.delay = max(slot.delay, pause)
            slot.jitter = 0.0  # a rate the provider enforces is a minimum
            slot.lastseen = monotonic()

    def _spider_pause(self, response: Response) -> float | None:
        """The spider's own reading of a throttled answer (see the class docstring)."""
        pause = getattr(self.crawler.spider, "throttle_pause", None)
        return pause(response) if callable(pause) else None

    async def process_response(  # type: ignore[override]  # Scrapy 2.13+: async, no spider
            self, request: Request, response: Response) -> Request | Response:
        self.answered.add(urlsplit(request.url).netloc)  # whatever it said, it answered
        if request.meta.get("dont_retry"):
            return response
        told = self._spider_pause(response)
        if told is None and not self._throttled(response):
            return super().process_response(request, response)
        host = urlsplit(request.url).netloc
        spider = crawling(self.crawler)
        retry_after, pause = (told, told) if told is not None else self.pause(request, response)
        if retry_after is not None and retry_after > self.cap:
            # A quota, not a burst: waiting it out would hold the crawl for hours.
            log.error("%s: %s answered %d asking to wait %.0f s (Retry-After); not retried "
                      "in this crawl (waits are capped at RETRY_BACKOFF_MAX = %g s)",
                      spider.name, host, response.status, retry_after, self.cap,
                      extra={"spider": spider})
            return response
        retry = self._retry(request, response_status_message(response.status))
        if retry is None:  # RETRY_TIMES spent: the answer stands
            return response
        self.crawler.stats.inc_value("gpuradar/throttled")
        log.info("%s answered %d; waiting %.1f s before asking again%s", host, response.status,
                 pause, " (Retry-After)" if retry_after is not None else "")
        self._hold(request, pause, learned=retry_after is None)
        return retry

    def _retry(self, request: Request, reason: Any) -> Request | None:
        retry = super()._retry(request, reason)
        sign_again = getattr(self.crawler.spider, "sign_again", None)
        if retry is not None and callable(sign_again):
            retry = sign_again(retry)
        return retry


#: Errors of a callback reading a response it did not expect (HTML where JSON was due, a
#: field missing): one line each. Scrapy's own exceptions (CloseSpider, ...) pass through.
_READING_ERRORS = (ValueError, LookupError, TypeError, AttributeError)


class UnreadableResponseMiddleware:
    """A spider middleware: a response its callback cannot read (ParseError, JSON that is
    not JSON, a missing key) is one ERROR line naming the source, the URL, the status and
    the content type, instead of Scrapy's traceback; the first bytes of the body are logged
    at INFO (-v), the traceback at DEBUG. Logged against the spider, so the crawl is failed or
    partial as before and closes nothing."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UnreadableResponseMiddleware:
        return cls(crawler)

    def process_spider_exception(self, response: Response, exception: Exception
                                 ) -> list[Any] | None:
        from gpuradar.crawler.spiders.base import ParseError

        if not isinstance(exception, _READING_ERRORS):  # ParseError is a ValueError
            return None
        spider = crawling(self.crawler)
        ctype = ((response.headers.get(b"Content-Type") or b"").decode("latin-1")
                 or "no content type")
        reason = " ".join(str(exception).split()).removeprefix(f"{spider.name}: ")
        if isinstance(exception, ParseError):
            reason = reason.removesuffix(f" (in {exception.where})")
            if exception.field == "<body>":
                reason = reason.replace("unexpected response shape: field '<body>' ", "body ")
        else:
            reason = f"{type(exception).__name__}: {reason}"
        url = response.url if len(response.url) <= 200 else response.url[:197] + "..."
        self.crawler.stats.inc_value("gpuradar/unreadable_responses")
        log.error("%s: unreadable response from %s (HTTP %d, %s): %s", spider.name, url,
                  response.status, ctype[:80], reason[:300], extra={"spider": spider})
        log.info("%s: the response began with %r", spider.name, response.body[:200],
                 extra={"spider": spider})
        log.debug("%s: where the callback stopped", spider.name, exc_info=exception,
                  extra={"spider": spider})
        return []


class PriceBatchMiddleware:
    """A spider middleware next to the spider: the PriceItems one callback yields go to the
    item pipelines in PriceBatches of up to GPURADAR_BATCH_SIZE offers, in the order they
    were yielded; everything else (requests, exchange rates) passes as it comes. A callback
    that yields a single offer passes it as it is. Offers yielded before the callback fails
    are still handed on, as they were one by one."""

    def __init__(self, crawler: Crawler) -> None:
        self.size = max(1, crawler.settings.getint("GPURADAR_BATCH_SIZE", 1000))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PriceBatchMiddleware:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]
                              ) -> Iterator[Any]:
        batcher = _Batcher(self.size)
        try:
            for out in result:
                yield from batcher.take(out)
        except Exception:
            yield from batcher.rest()
            raise
        yield from batcher.rest()

    async def process_spider_output_async(self, response: Response,
                                          result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        batcher = _Batcher(self.size)
        try:
            async for out in result:
                for ready in batcher.take(out):
                    yield ready
        except Exception:
            for ready in batcher.rest():
                yield ready
            raise
        for ready in batcher.rest():
            yield ready


class _Batcher:
    """The grouping of PriceBatchMiddleware, for its sync and async paths alike: what to
    hand on after each output of a callback, and what is left when the callback ends."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.batch: list[PriceItem] = []

    def take(self, out: Any) -> list[Any]:
        if not isinstance(out, PriceItem):
            return [out]
        self.batch.append(out)
        if len(self.batch) < self.size:
            return []
        full, self.batch = self.batch, []
        return [PriceBatch(full)]

    def rest(self) -> list[PriceItem | PriceBatch]:
        """A single offer left passes as it is; more go as one batch."""
        left, self.batch = self.batch, []
        if not left:
            return []
        return [left[0] if len(left) == 1 else PriceBatch(left)]


def request_key(request: Request) -> str:
    """Identity of a request in a recording: host-independent, so a recording replays
    whatever base URL the endpoints are configured with. APIs that say what they want in a
    header (Tencent's X-TC-Region) set `meta["record_key"]` to tell such requests apart."""
    parts = urlsplit(request.url)
    path = parts.path + ("?" + parts.query if parts.query else "")
    digest = hashlib.sha1(request.body).hexdigest() if request.body else ""
    extra = request.meta.get("record_key", "")
    return " ".join(p for p in (request.method.upper(), path, digest, extra) if p)


_SUFFIX = {"json": ".json", "xml": ".xml", "html": ".html", "csv": ".csv", "javascript": ".js"}


def _suffix(content_type: str) -> str:
    for key, suffix in _SUFFIX.items():
        if key in content_type:
            return suffix
    return ".bin"


def capture_time(captured: Any) -> datetime | None:
    """The moment a provenance's `captured` stands for, UTC: an ISO time as given; a date
    ("2026-08-22") or a month ("2026-08") its first instant -- the earliest the capture can
    be, so replayed data never looks newer than it is. None when absent or unreadable."""
    if not isinstance(captured, str) or not captured.strip():
        return None
    text = captured.strip()
    try:
        if re.fullmatch(r"\d{4}-\d\d", text):
            return datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


class Recording:
    """A directory of one crawl per source: `<dir>/<source>/index.json` plus one file per
    response body, stored exactly as served (so `gpuradar parse` reads them directly), and
    `provenance.json`: when (`captured`) and where the responses were captured. A replay
    dates its observations at that capture time. An index entry's own `captured` dates an
    answer captured apart from the rest (a spider reads it as `meta["recording_captured"]`)."""

    def __init__(self, root: Path, source: str) -> None:
        self.dir = Path(root) / source
        self.index_path = self.dir / "index.json"
        self.provenance_path = self.dir / "provenance.json"
        self.entries: list[dict[str, Any]] = []
        if self.index_path.exists():
            self.entries = json.loads(self.index_path.read_text())
        self.by_key = {e["key"]: e for e in self.entries}
        self._dated = False  # provenance written by this recording session
        self.clock: Clock = SYSTEM  # dates the recording

    def provenance(self) -> dict[str, Any]:
        """The recording's provenance; {} when it has none or it cannot be read."""
        try:
            data = json.loads(self.provenance_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def replay(self) -> Replay:
        """What a crawl replayed from this recording is: its capture date as stated and
        the moment that stands for (both None when the provenance does not say)."""
        captured = self.provenance().get("captured")
        at = capture_time(captured)
        return Replay(captured=str(captured) if at is not None else None, at=at)

    def find(self, request: Request) -> dict[str, Any] | None:
        return self.by_key.get(request_key(request))

    def body(self, entry: dict[str, Any]) -> bytes:
        return (self.dir / entry["file"]).read_bytes()

    def save(self, request: Request, response: Response) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        key = request_key(request)
        ctype = (response.headers.get(b"Content-Type") or b"").decode("latin-1")
        slug = re.sub(r"[^A-Za-z0-9]+", "-", urlsplit(request.url).path).strip("-")[-60:]
        number = 1 + max((int(e["file"][:4]) for e in self.entries), default=0)
        name = f"{number:04d}-{slug or 'root'}{_suffix(ctype)}"
        (self.dir / name).write_bytes(response.body)
        entry = {"key": key, "method": request.method, "url": request.url,
                 "status": response.status, "content_type": ctype, "file": name}
        if request.body:
            entry["request_body"] = request.body.decode("utf-8", "replace")
        if key in self.by_key:
            self.entries.remove(self.by_key[key])
        self.entries.append(entry)
        self.by_key[key] = entry
        self.index_path.write_text(json.dumps(self.entries, indent=1, ensure_ascii=False))
        if not self._dated:  # the first response of this session dates the recording
            self._dated = True
            now = self.clock.now().replace(microsecond=0)
            self.provenance_path.write_text(json.dumps(
                {**self.provenance(), "captured": now.isoformat().replace("+00:00", "Z"),
                 "recorded_by": "gpuradar crawl --record"}, indent=1, ensure_ascii=False)
                + "\n")


class RecordReplayMiddleware:
    """`GPURADAR_RECORD_DIR` saves every response; `GPURADAR_REPLAY_DIR` answers every
    request from a recording and never touches the network.

    A request marked `meta["dont_record"]` is never saved: an exchange that carries a secret
    both ways (Azure's OAuth token request: the client secret in its body, the access token
    in its answer) must not land in a recording, which is data to share. A spider replays
    without such a request (it needs none when the provider is never reached)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.record_dir = settings.get("GPURADAR_RECORD_DIR")
        self.replay_dir = settings.get("GPURADAR_REPLAY_DIR")
        if not (self.record_dir or self.replay_dir):
            raise NotConfigured
        self.crawler = crawler
        self._recording: Recording | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecordReplayMiddleware:
        return cls(crawler)

    def recording(self, spider: Spider) -> Recording:
        if self._recording is None:
            root = self.replay_dir or self.record_dir
            self._recording = Recording(Path(root), spider.name)
        return self._recording

    def process_request(self, request: Request) -> Response | None:
        if not self.replay_dir:
            return None
        spider = crawling(self.crawler)
        rec = self.recording(spider)
        entry = rec.find(request)
        if entry is None:
            # Logged against the spider: the crawl's outcome counts it as an error.
            log.error("%s: no recorded response for %s %s in %s", spider.name, request.method,
                      request.url, rec.dir, extra={"spider": spider})
            raise IgnoreRequest(f"not in recording: {request.method} {request.url}")
        # A recording is data from elsewhere: an entry may only name a file inside it
        # ('../../x', an absolute path or a symlink out of it is refused, never read).
        inside = rec.dir.resolve()
        path = (rec.dir / str(entry.get("file") or "")).resolve()
        if not path.is_relative_to(inside) or path == inside:
            log.error("%s: recording entry %r in %s resolves outside the recording; not "
                      "read", spider.name, entry.get("file"), rec.index_path,
                      extra={"spider": spider})
            raise IgnoreRequest(f"recording entry {entry.get('file')!r} is outside {inside}")
        body = path.read_bytes()
        if entry.get("captured"):
            # An answer captured apart from the rest of the recording carries its own date.
            request.meta["recording_captured"] = str(entry["captured"])
        # Headers: bytes keys, so that the recorded content type picks the response class as
        # it did live (a plain dict's str key was never found: the class was guessed)
        headers = Headers({"Content-Type": entry.get("content_type")
                           or "application/octet-stream"})
        cls = responsetypes.from_args(headers=headers, url=request.url, body=body)
        return cls(url=request.url, status=entry["status"], headers=headers, body=body,
                   request=request, flags=["replayed"])

    def process_response(self, request: Request, response: Response) -> Response:
        if (self.record_dir and "replayed" not in response.flags
                and not request.meta.get("dont_record")):
            self.recording(crawling(self.crawler)).save(request, response)
        return response


def response_for(path: Path, request: Request) -> TextResponse:
    """A saved response as Scrapy's kind of it (XML, HTML or text, from its first bytes)."""
    body = path.read_bytes()
    head = body.lstrip()[:200].lower()
    if head.startswith(b"<?xml") or b"<gesmes" in head:
        cls: type[TextResponse] = XmlResponse
    elif head.startswith((b"<!doctype html", b"<html", b"<")):
        cls = HtmlResponse
    else:
        cls = TextResponse
    return cls(url=request.url, body=body, encoding="utf-8", request=request)


#: Scrapy signal of a crawl of saved files (SavedFilesMiddleware): a parser raised on one
#: (`path`, `exception`); `gpuradar parse` says so in one line naming the file.
saved_file_failed = object()


class SavedFilesMiddleware:
    """`GPURADAR_SAVED_FILES` ([path, url] pairs): a crawl of saved responses instead of the
    provider, so that `parse` and the demo timeline run the source's parser through the same
    crawl, pipelines and rules as `crawl`. As a spider middleware it starts one request per
    file (the spider's `parse_file` picks the parser from the content) and reports a parser's
    exception whole with its file (saved_file_failed), once; as a downloader middleware it
    answers those requests from the files and drops every other request (a saved file leads
    nowhere)."""

    def __init__(self, crawler: Crawler) -> None:
        files = crawler.settings.getlist("GPURADAR_SAVED_FILES")
        if not files:
            raise NotConfigured
        self.crawler = crawler
        self.files = [(Path(path), url) for path, url in files]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SavedFilesMiddleware:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        # saved files are read by gpuradar's spiders, whose base class has parse_file
        spider = cast("GpuRadarSpider", crawling(self.crawler))
        for path, url in self.files:
            yield Request(url or path.resolve().as_uri(), callback=spider.parse_file,
                          dont_filter=True, meta={"saved_file": str(path)})

    def process_request(self, request: Request) -> Response:
        path = request.meta.get("saved_file")
        if path is None:
            raise IgnoreRequest(f"a crawl of saved files fetches nothing: {request.url}")
        return response_for(Path(path), request)

    def process_spider_exception(self, response: Response, exception: Exception
                                 ) -> list[Any] | None:
        path = response.meta.get("saved_file")
        if path is None:
            return None
        self.crawler.signals.send_catch_log(saved_file_failed, path=path, exception=exception)
        # Its caller (`parse`, `demo`) says the failure in one line naming the file, so the
        # record is part of the outcome (gpuradar.core.logs.IN_OUTCOME): it still fails the
        # crawl, and is shown only at DEBUG, as is where the parser stopped. Handled here,
        # so neither UnreadableResponseMiddleware nor Scrapy says it a second time.
        spider = crawling(self.crawler)
        log.error("%s: %s", path, exception, extra={"spider": spider, IN_OUTCOME: True})
        log.debug("%s: where the parser stopped", path, exc_info=exception,
                  extra={"spider": spider})
        return []
