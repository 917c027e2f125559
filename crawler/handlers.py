"""The download handler of every crawl: Scrapy's HTTP/1.1 handler plus a deadline for the
first answer, and, for a spider that may render pages with JavaScript (`renders_pages`),
scrapy-playwright's handler (rendered pages through Chromium, everything else through
Scrapy's HTTP/1.1 handler) with the same deadline.

Scrapy's DOWNLOAD_TIMEOUT bounds a whole download, connection included: a large price file on
a slow link needs a generous one, but then a provider that accepts the connection and never
answers (or an address whose packets are dropped) holds a request for that long, every
attempt. `GPURADAR_ANSWER_TIMEOUT` bounds only the wait for the response headers (DNS,
connect, TLS and the server's first answer); once the headers are in, DOWNLOAD_TIMEOUT alone
applies to the body. The request meta key `answer_timeout` overrides it per request (0: none).

scrapy-playwright (and Playwright's Python API under it) is imported only for a spider that
may render: about 6 MB and a second of a slow core's time a crawl of a plain JSON source
would pay for nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadTimeoutError, NotSupported
from scrapy.http import Response


@contextmanager
def _shallow_inspect_stack() -> Iterator[None]:
    """While Scrapy's TLS modules are imported: `inspect.stack()` gives only the caller's
    frames. Scrapy's `create_deprecated_class` (three calls at the import of
    scrapy.core.downloader.tls and .contextfactory) calls `inspect.stack()[1]` to name the
    module the class is made in; the whole stack, with its source lines, of a deep import
    costs noticeable CPU per call (docs/benchmark.md). The frames it reads are the same."""
    real = inspect.stack

    def stack(context: int = 1) -> list[inspect.FrameInfo]:
        frames = (sys._getframe(1), sys._getframe(2))  # the caller, and its caller
        return [inspect.FrameInfo(f, f.f_code.co_filename, f.f_lineno, f.f_code.co_name,
                                  None, None) for f in frames]

    inspect.stack = stack
    try:
        yield
    finally:
        inspect.stack = real


if "scrapy.core.downloader.contextfactory" not in sys.modules:
    with _shallow_inspect_stack():
        import scrapy.core.downloader.contextfactory  # noqa: F401 - imports .tls too

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler  # noqa: E402


class _AnswerDeadline:
    """A deadline on the response headers, around the handler's own download_request."""

    def _deadline_setup(self, crawler: Crawler) -> None:
        self.answer_timeout = crawler.settings.getfloat("GPURADAR_ANSWER_TIMEOUT", 0.0)
        self._deadlines: dict[Request, asyncio.TimerHandle] = {}
        crawler.signals.connect(self._headers_received, signal=signals.headers_received)

    def _headers_received(self, headers: Any, body_length: int, request: Request,
                          spider: Any) -> None:
        deadline = self._deadlines.pop(request, None)
        if deadline is not None:
            deadline.cancel()

    async def download_request(self, request: Request) -> Response:
        timeout = float(request.meta.get("answer_timeout", self.answer_timeout) or 0)
        # a mixin: the handler class it is mixed into has download_request (ignores: misc)
        if request.meta.get("playwright") or timeout <= 0:
            return await super().download_request(request)  # type: ignore[misc]
        download = asyncio.ensure_future(super().download_request(request))  # type: ignore[misc]
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


class PlainDownloadHandler(_AnswerDeadline, HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler with a deadline on the response headers, for a spider that
    never renders a page."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._deadline_setup(crawler)

    async def download_request(self, request: Request) -> Response:
        if request.meta.get("playwright"):
            raise NotSupported(f"{request.url}: a rendered page (meta 'playwright') from a "
                               "spider whose renders_pages is false")
        return await super().download_request(request)


@cache
def rendering_handler() -> type:
    """scrapy-playwright's handler with a deadline on the response headers (imported on
    first use)."""
    with _shallow_inspect_stack():
        from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

    class RenderingDownloadHandler(_AnswerDeadline, ScrapyPlaywrightDownloadHandler):
        """scrapy-playwright's handler with a deadline on the response headers."""

        def __init__(self, crawler: Crawler) -> None:
            super().__init__(crawler)
            self._deadline_setup(crawler)

    return RenderingDownloadHandler


class DownloadHandler:
    """DOWNLOAD_HANDLERS' entry for http and https: the rendering handler for a spider whose
    `renders_pages` is true (any spider that does not say: scrapy-playwright as installed),
    the plain one otherwise."""

    lazy = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if getattr(crawler.spider, "renders_pages", True):
            return rendering_handler()(crawler)
        return PlainDownloadHandler(crawler)
