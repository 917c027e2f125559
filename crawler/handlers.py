"""The download handler of every crawl: scrapy-playwright's (rendered pages through Chromium,
everything else through Scrapy's HTTP/1.1 handler) plus a deadline for the first answer.

Scrapy's DOWNLOAD_TIMEOUT bounds a whole download, connection included: a large price file on
a slow link needs a generous one, but then a provider that accepts the connection and never
answers (or an address whose packets are dropped) holds a request for that long, every
attempt. `GPURADAR_ANSWER_TIMEOUT` bounds only the wait for the response headers (DNS,
connect, TLS and the server's first answer); once the headers are in, DOWNLOAD_TIMEOUT alone
applies to the body. The request meta key `answer_timeout` overrides it per request (0: none).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http import Response
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler


class DownloadHandler(ScrapyPlaywrightDownloadHandler):
    """scrapy-playwright's handler with a deadline on the response headers."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.answer_timeout = crawler.settings.getfloat("GPURADAR_ANSWER_TIMEOUT", 0.0)
        self._deadlines: dict[Request, asyncio.TimerHandle] = {}
        crawler.signals.connect(self._headers_received, signal=signals.headers_received)

    def _headers_received(self, headers: Any, body_length: int, request: Request,
                          spider: Any) -> None:
        deadline = self._deadlines.pop(request, None)
        if deadline is not None:
            deadline.cancel()

    async def download_request(self, request: Request) -> Response:  # type: ignore[override]
        timeout = float(request.meta.get("answer_timeout", self.answer_timeout) or 0)
        if request.meta.get("playwright") or timeout <= 0:
            return await super().download_request(request)
        download = asyncio.ensure_future(super().download_request(request))
        expired: list[bool] = []

        def expire() -> None:
            expired.append(True)
            download.cancel()  # cancels Scrapy's Deferred too: the connection is dropped

        self._deadlines[request] = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            return await download
        except asyncio.CancelledError:
            if expired:
                raise DownloadTimeoutError(
                    f"no answer from {urlsplit(request.url).netloc} within {timeout:g} s"
                ) from None
            raise
        finally:
            deadline = self._deadlines.pop(request, None)
            if deadline is not None:
                deadline.cancel()
