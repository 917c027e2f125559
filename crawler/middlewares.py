"""Downloader middlewares: backoff on throttling, and record/replay of whole crawls."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.responsetypes import responsetypes

log = logging.getLogger(__name__)

_THROTTLED = {429, 503}


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's retry, plus an exponential pause before retrying a 429/503.

    Providers throttle per identity (Vast.ai answers 429 without Retry-After, Azure asks for
    a pause); retrying at once only burns the remaining attempts."""

    def __init__(self, settings) -> None:
        super().__init__(settings)
        self.base = settings.getfloat("RETRY_BACKOFF_BASE", 1.0)
        self.cap = settings.getfloat("RETRY_BACKOFF_MAX", 60.0)

    def _delay(self, request: Request, response: Response) -> float:
        retry_after = response.headers.get(b"Retry-After")
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.cap)
        attempt = request.meta.get("retry_times", 0)
        return min(self.base * 2**attempt, self.cap)

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        if (response.status in _THROTTLED and response.status in self.retry_http_codes
                and not request.meta.get("dont_retry")
                and request.meta.get("retry_times", 0) < request.meta.get(
                    "max_retry_times", self.max_retry_times)):
            delay = self._delay(request, response)
            self.crawler.stats.inc_value("gpuradar/throttled")
            log.info("%s answered %d; retrying in %.1fs", urlsplit(request.url).netloc,
                     response.status, delay)
            await asyncio.sleep(delay)
        return super().process_response(request, response)


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
