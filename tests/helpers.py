"""Small helpers several test modules share."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any, Literal, TypeVar

from scrapy import Request, Spider
from scrapy.http import HtmlResponse, TextResponse, XmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

FIXTURES = Path(__file__).parent / "fixtures"

Kind = Literal["text", "json", "html", "xml"]
_CLASSES: dict[str, type[TextResponse]] = {
    "text": TextResponse, "json": TextResponse, "html": HtmlResponse, "xml": XmlResponse}

SpiderT = TypeVar("SpiderT", bound=Spider)


def fixture(path: str) -> bytes:
    """The bytes of a recorded provider answer, e.g. fixture("aws/spot.json")."""
    return (FIXTURES / path).read_bytes()


def response(body: bytes | str | Path | dict | list, url: str = "https://example.invalid/",
             *, status: int = 200, kind: Kind | None = None, request: Request | None = None,
             **meta: Any) -> TextResponse:
    """A Scrapy response as a spider callback receives it, so a callback can be tested
    without a crawl.

    `body` is the raw bytes, a text (str), a fixture file (Path) or a document to send as
    JSON (dict/list). `kind` picks the response class; by default a Path's suffix does
    (.xml, .html), else it is a plain text/JSON response. The response carries `request`,
    or a GET of `url` with `meta`, as a downloaded one would."""
    if isinstance(body, Path):
        if kind is None:
            kind = {".xml": "xml", ".html": "html"}.get(body.suffix)
        body = body.read_bytes()
    elif isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode()
    cls = _CLASSES[kind or "text"]
    return cls(url=url, status=status, body=body, encoding="utf-8",
               request=request or Request(url, meta=meta))


def free_port() -> int:
    """A port nobody listens on (aiosmtpd's Controller cannot take port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def callback_spider(cls: type[SpiderT], settings: dict[str, Any] | None = None,
                    **options: Any) -> SpiderT:
    """A spider with `options` as its config section (and `settings`), for calling its
    callbacks without a crawl (plain settings: no reactor is asked for)."""
    return get_crawler(cls, {**(settings or {}),
                             "GPURADAR_SOURCES": {cls.name: options}})._create_spider()


def spider_settings(source: str, **options) -> Settings:
    """The project's Scrapy settings with `options` as the source's config section."""
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    settings.set("GPURADAR_SOURCES", {source: options})
    return settings


class SilentServer:
    """Accepts TCP connections on loopback and never sends a byte: a hung SMTP server, a
    firewalled provider. `accepted` counts the connections (each one an attempt)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def accepted(self) -> int:
        return len(self.held)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
