"""Downloader middlewares: backoff on throttling, giving up on unreachable providers, and
record/replay of whole crawls."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from time import monotonic
from typing import Any
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
)
from scrapy.http import Response
from scrapy.responsetypes import responsetypes
from twisted.internet.error import ConnectError
from twisted.internet.error import TimeoutError as TxTimeoutError

from gpuradar.core.logs import IN_OUTCOME

log = logging.getLogger(__name__)

_THROTTLED = {429, 503}
# Failures that mean "could not talk to the host at all" (as opposed to a bad answer).
_CONNECTION_ERRORS = (CannotResolveHostError, DownloadConnectionRefusedError,
                      DownloadTimeoutError, ConnectError, TxTimeoutError)


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


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's retry, made polite and quick to give up where that is the right thing.

    * Throttling (429/503): the pause (Retry-After, else base * 2**attempt, capped) is applied
      to the request's download slot, AutoThrottle-style, so the whole queue behind it slows
      down, not just the one retried request. Without Retry-After (Vast.ai limits each
      identity to a request rate and says nothing more) the pause becomes the slot's minimum
      interval for the rest of the crawl. A Retry-After beyond RETRY_BACKOFF_MAX (a daily
      quota) is not waited out: the answer stands and the crawl reports it.
    * Every retry is signed afresh when the spider defines `sign_again(request)`: Alibaba
      refuses a reused SignatureNonce, and every signer dates its signature.
    * A provider that says "throttled" with another status (Alibaba: 400/403 `Throttling*`)
      is told apart by the spider's `throttle_pause(response)`: seconds to wait, or None.
    * A host that never answered in this crawl gets GPURADAR_CONNECT_ATTEMPTS attempts per
      request, and none once the source has waited GPURADAR_UNREACHABLE_AFTER seconds without
      any answer; then it is unreachable: one ERROR line (host, cause, attempts) and every
      other request to it is dropped at once, so an offline crawl ends in seconds with one
      line per source instead of a traceback per request.
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
        self.started: float | None = None
        self.answered: set[str] = set()
        self.unreachable: dict[str, str] = {}
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
        return monotonic() - self.started + self.answer_timeout > self.unreachable_after

    def _give_up(self, request: Request, cause: str, attempts: int) -> None:
        host = urlsplit(request.url).netloc
        if host in self.unreachable:
            return
        spider = self.crawler.spider
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

    def process_request(self, request: Request) -> None:
        host = urlsplit(request.url).netloc
        if self.started is None:
            self.started = monotonic()
        if host not in self.unreachable and host not in self.answered and self._out_of_time():
            waited = monotonic() - self.started
            self._give_up(request, f"not tried: nothing answered in {waited:.0f} s", 0)
        if host in self.unreachable:
            self.crawler.stats.inc_value("gpuradar/unreachable_skipped")
            raise IgnoreRequest(f"{host} is unreachable ({self.unreachable[host]})")
        return None

    def process_exception(self, request: Request, exception: Exception
                          ) -> Request | Response | None:
        host = urlsplit(request.url).netloc
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
        self._give_up(request, connection_cause(exception), attempts)
        raise IgnoreRequest(f"{host} is unreachable ({self.unreachable[host]})")

    # -- throttling -----------------------------------------------------------------------
    def _retry_after(self, response: Response) -> float | None:
        value = response.headers.get(b"Retry-After")
        if value and value.strip().isdigit():
            return float(value)
        return None

    def _slot(self, request: Request):
        key = request.meta.get("download_slot")
        engine = getattr(self.crawler, "engine", None)
        if key is None or engine is None:
            return None
        return engine.downloader.slots.get(key)

    def _slow_down(self, request: Request, pause: float, learned: bool) -> None:
        """Hold back every request of this slot for `pause` seconds from now on; a `learned`
        pause (no Retry-After: the provider's rate is unknown) stays the slot's minimum
        interval for the rest of the crawl, a Retry-After is waited out once."""
        slot = self._slot(request)
        if slot is None:
            return
        now = monotonic()
        if learned:
            slot.delay = max(slot.delay, pause)
            slot.jitter = 0.0  # a rate the provider enforces is a minimum
            slot.lastseen = now
        else:
            slot.lastseen = max(slot.lastseen, now + pause - slot.delay)

    def _spider_pause(self, response: Response) -> float | None:
        """The spider's own reading of a throttled answer (see the class docstring)."""
        pause = getattr(self.crawler.spider, "throttle_pause", None)
        return pause(response) if callable(pause) else None

    async def process_response(self, request: Request, response: Response
                               ) -> Request | Response:
        told = self._spider_pause(response)
        if told is None and (response.status not in _THROTTLED
                             or response.status not in self.retry_http_codes):
            return super().process_response(request, response)
        if request.meta.get("dont_retry"):
            return response
        retry_after = told if told is not None else self._retry_after(response)
        host = urlsplit(request.url).netloc
        spider = self.crawler.spider
        if retry_after is not None and retry_after > self.cap:
            # A quota, not a burst: waiting it out would hold the crawl for hours.
            log.error("%s: %s answered %d asking to wait %.0f s (Retry-After); not retried "
                      "in this crawl", spider.name, host, response.status, retry_after,
                      extra={"spider": spider})
            return response
        attempt = request.meta.get("retry_times", 0)
        delay = retry_after if retry_after is not None else min(self.base * 2**attempt,
                                                                self.cap)
        self.crawler.stats.inc_value("gpuradar/throttled")
        log.info("%s answered %d; slowing to one request per %.1fs", host, response.status,
                 delay)
        self._slow_down(request, delay, learned=retry_after is None)
        if told is not None:  # a status Scrapy would not retry
            return self._retry(request, f"throttled ({response.status})") or response
        return super().process_response(request, response)

    def _retry(self, request: Request, reason: Any) -> Request | None:
        retry = super()._retry(request, reason)
        sign_again = getattr(self.crawler.spider, "sign_again", None)
        if retry is not None and callable(sign_again):
            retry = sign_again(retry)
        return retry


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


class Recording:
    """A directory of one crawl per source: `<dir>/<source>/index.json` plus one file per
    response body, stored exactly as served (so `gpuradar parse` reads them directly)."""

    def __init__(self, root: Path, source: str) -> None:
        self.dir = Path(root) / source
        self.index_path = self.dir / "index.json"
        self.entries: list[dict[str, Any]] = []
        if self.index_path.exists():
            self.entries = json.loads(self.index_path.read_text())
        self.by_key = {e["key"]: e for e in self.entries}

    def find(self, request: Request) -> dict[str, Any] | None:
        return self.by_key.get(request_key(request))

    def body(self, entry: dict[str, Any]) -> bytes:
        return (self.dir / entry["file"]).read_bytes()

    def save(self, request: Request, response: Response) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        key = request_key(request)
        ctype = response.headers.get(b"Content-Type", b"").decode("latin-1")
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


class RecordReplayMiddleware:
    """`GPURADAR_RECORD_DIR` saves every response; `GPURADAR_REPLAY_DIR` answers every
    request from a recording and never touches the network."""

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
        spider = self.crawler.spider
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
        headers = {"Content-Type": entry.get("content_type") or "application/octet-stream"}
        cls = responsetypes.from_args(headers=headers, url=request.url, body=body)
        return cls(url=request.url, status=entry["status"], headers=headers, body=body,
                   request=request, flags=["replayed"])

    def process_response(self, request: Request, response: Response) -> Response:
        if self.record_dir and "replayed" not in response.flags:
            self.recording(self.crawler.spider).save(request, response)
        return response
