"""The read side: the web page (scheduler/web.py) and the JSON API (scheduler/http_api.py) as one
app on uvicorn (uvloop's event loop, httptools' parser: HTTP/1.1 keep-alive), answers cached
per data version and sent gzip-compressed to clients that take it. A cached answer is sent
from the event loop as stored bytes and headers; anything else (a first request, an error,
a 405) is drawn by the WSGI app in a worker thread (a2wsgi's bridge), so a slow draw never
holds back the cached answers. Why this server: docs/architecture.md.

`gpuradar serve` runs it alone, stateless and read-only (any number of replicas, on a read
replica of the database); `gpuradar run` runs the same app in a child process on its own
port (scheduler/web_child.py), so that page and API readers never queue in front of the
daemon's /metrics and /healthz (scheduler/health.py) nor share its interpreter lock.

Every answer is a function of what is stored and, for the page, of the minute it is drawn
(its ages: "5 minutes ago"). What is stored changes only when a crawl starts or ends, an
index point is written or an alert changes: storage.page_reads.data_version reads that cheaply, at
most every `recheck` seconds, and a change empties the cache. So a page that took a second
to draw is drawn once per version and minute and then sent as stored bytes (while the page
of a new minute is drawn, other readers get the previous minute's: the same data); its ETag (the
SHA-256 of the body) and Last-Modified (the version's newest change) let a client
revalidate for a 304.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httptools
import uvicorn
from sqlalchemy import Engine
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gpuradar.scheduler import http_api, web
from gpuradar.scheduler.sockets import BACKLOG, listen

log = logging.getLogger("gpuradar.web")

#: An answer as ASGI sends it: status, headers (lower-case bytes), body.
Reply = tuple[int, list[tuple[bytes, bytes]], bytes]

#: Answers kept per data version (distinct paths and queries), and their bytes (plain and
#: gzipped) at most: past either, the least recently used goes first. An answer larger than
#: the whole budget is sent, not kept.
MAX_ENTRIES = 512
MAX_BYTES = 64 * 1024 * 1024
#: Bodies shorter than this are sent as they are: gzip would save less than its headers.
GZIP_MIN = 1024
#: Answers that read the clock besides the store: a window ending "now" unless `until` is
#: given. Never cached (their `until` would be stale).
CLOCK_PATHS = (http_api.PREFIX + "/history", http_api.PREFIX + "/index/history")


@dataclass(frozen=True)
class Variant:
    """One representation of a cached answer (plain or gzipped), everything a request for
    it needs made once: its tag, the headers of a 200 (its length included) and of a 304,
    as WSGI takes them and as ASGI does (`raw_ok`, `raw_not_modified`: lower-case bytes)."""

    tag: str
    body: bytes
    ok: list[tuple[str, str]]
    not_modified: list[tuple[str, str]]
    raw_ok: list[tuple[bytes, bytes]] = field(init=False)
    raw_not_modified: list[tuple[bytes, bytes]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw_ok", _raw(self.ok))
        object.__setattr__(self, "raw_not_modified", _raw(self.not_modified))


def _raw(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


@dataclass(frozen=True)
class Answer:
    """One cached 200 answer: its plain and (when worth it) gzipped variant."""

    plain: Variant
    gzipped: Variant | None
    etag: str
    modified: datetime | None

    @classmethod
    def of(cls, headers: list[tuple[str, str]], body: bytes, modified: datetime | None
           ) -> Answer:
        packed = gzip.compress(body, 6, mtime=0) if len(body) >= GZIP_MIN else None
        tag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        common = [*headers, ("Cache-Control", "no-cache"), ("Vary", "Accept-Encoding")]
        if modified is not None:
            common.append(("Last-Modified", format_datetime(modified, usegmt=True)))

        def variant(tag: str, data: bytes, extra: list[tuple[str, str]]) -> Variant:
            said = [*common, ("ETag", tag)]
            # a 304 carries no representation metadata (RFC 9110 15.4.5): no type, encoding
            return Variant(tag, data, [*said, *extra, ("Content-Length", str(len(data)))],
                           [h for h in said if h[0] != "Content-Type"])

        # a representation's tag: the gzipped bytes are another one than the plain
        zipped = None if packed is None else variant(
            tag[:-1] + '-gzip"', packed, [("Content-Encoding", "gzip")])
        return cls(variant(tag, body, []), zipped, tag, modified)

    @property
    def size(self) -> int:
        return len(self.plain.body) + (len(self.gzipped.body) if self.gzipped else 0)

    def reply(self, accept_encoding: str, if_none_match: str | None,
              if_modified_since: str | None) -> tuple[Variant, bool]:
        """The variant a request takes, and whether the client's copy of it is current (a
        304)."""
        variant = self.plain
        if self.gzipped is not None and _accepts_gzip(accept_encoding):
            variant = self.gzipped
        if if_none_match is None and if_modified_since is None:
            return variant, False
        return variant, (http_api.etag_matches(if_none_match, self.etag)
                         or http_api.etag_matches(if_none_match, variant.tag)
                         or (if_none_match is None
                             and _not_modified_since(if_modified_since, self.modified)))


def _parse_accepts_gzip(header: str) -> bool:
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00",
                                                          "q=0.000")
    return False


#: Accept-Encoding values seen, and whether they take gzip: clients send a handful of
#: distinct ones, so each is parsed once (at most this many kept).
_GZIP_SEEN: dict[str, bool] = {}
GZIP_SEEN_MAX = 256


def _accepts_gzip(header: str) -> bool:
    found = _GZIP_SEEN.get(header)
    if found is None:
        found = _parse_accepts_gzip(header)
        if len(_GZIP_SEEN) < GZIP_SEEN_MAX:
            _GZIP_SEEN[header] = found
    return found


def _not_modified_since(header: str | None, at: datetime | None) -> bool:
    if not header or at is None:
        return False
    try:
        since = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return False
    return since.tzinfo is not None and int(at.timestamp()) <= since.timestamp()


class ReadCache:
    """WSGI middleware: GET and HEAD answers of `app` cached per data version (see the
    module's docstring), compressed once, revalidated by ETag or Last-Modified."""

    def __init__(self, app: Callable, engine_fn: Callable[[], Engine],
                 recheck: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.app, self.engine_fn, self.recheck = app, engine_fn, recheck
        self.clock, self.wall = clock, wall
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], Answer] = OrderedDict()
        self._bytes = 0
        self._pending: dict[tuple[Any, ...], threading.Lock] = {}
        self._version: tuple[Any, ...] | None = None
        self._generation = 0  # counts the versions seen: part of every cache key
        self._modified: datetime | None = None
        self._checked = float("-inf")

    def version(self) -> tuple[int, datetime | None]:
        """(the data version's number in this process, its time), read again when
        `recheck` seconds have passed; a new one empties the cache."""
        from gpuradar.storage.page_reads import data_version

        now = self.clock()
        if self._version is None or now - self._checked >= self.recheck:
            key, modified = data_version(self.engine_fn())
            with self._lock:
                if key != self._version:
                    self._entries.clear()
                    self._bytes = 0
                    self._version, self._modified = key, modified
                    self._generation += 1
                self._checked = now
        return self._generation, self._modified

    def fresh(self) -> int | None:
        """The data version's number when it was read less than `recheck` seconds ago (no
        query needed), else None."""
        if self._version is None or self.clock() - self._checked >= self.recheck:
            return None
        return self._generation

    def key(self, method: str, path: str, query: str, origin: str, version: int
            ) -> tuple[Any, ...] | None:
        """The cache key of a request, or None for one never cached: a write, a path
        outside the page and the API, a window ending now."""
        if method not in ("GET", "HEAD") or not (
                path == "/" or path.startswith(http_api.PREFIX + "/")) or (
                path in CLOCK_PATHS and "until=" not in query):
            return None
        minute = int(self.wall() // 60) if path == "/" else 0
        # the CORS headers answer the request's Origin: one entry per origin
        return (version, path, query, minute, origin)

    def hit(self, scope: dict[str, Any], drawing: Container[tuple[Any, ...]] = ()
            ) -> tuple[Reply | None, tuple[Any, ...] | None]:
        """An ASGI request's answer when it is cached and the data version is fresh: (status,
        headers, body), made without a query nor a lock, on the event loop; else None (the
        WSGI app then draws or finds it in a worker thread). And the request's cache key
        (None: never cached, or the version is to be read). `drawing`: the keys of pages
        being drawn, for which the previous minute's page will do."""
        version = self.fresh()
        if version is None:
            return None, None
        path: str = scope["path"]
        if not path.isascii():  # as WSGI has it (PEP 3333): UTF-8 bytes read as Latin-1
            path = path.encode().decode("latin-1")
        origin = accept = ""
        if_none = since = None
        for name, value in scope["headers"]:
            if name == b"accept-encoding":
                accept = value.decode("latin-1")
            elif name == b"if-none-match":
                if_none = value.decode("latin-1")
            elif name == b"if-modified-since":
                since = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        key = self.key(scope["method"], path, scope["query_string"].decode("latin-1"), origin,
                       version)
        if key is None:
            return None, None
        found = self._entries.get(key)  # a dict read: atomic
        if found is None and path == "/" and key in drawing:
            # the page of a new minute is being drawn (its ages): until it is, the previous
            # minute's page of the same data, rather than every reader waiting for the draw
            found = self._entries.get((*key[:3], key[3] - 1, *key[4:]))
        if found is None:
            return None, key
        variant, current = found.reply(accept, if_none, since)
        if current:
            return (304, variant.raw_not_modified, b""), key
        return (200, variant.raw_ok, b"" if scope["method"] == "HEAD" else variant.body), key

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        query = environ.get("QUERY_STRING") or ""
        method = environ.get("REQUEST_METHOD", "GET")
        if self.key(method, path, query, "", 0) is None:
            return self.app(environ, start_response)
        try:
            version, modified = self.version()
        except Exception:  # noqa: BLE001 - the app says why (503, or 500 and logged)
            return self.app(environ, start_response)
        key = self.key(method, path, query, environ.get("HTTP_ORIGIN") or "", version)
        assert key is not None
        found = self._entries.get(key)  # a dict read: atomic, no lock on the hot path
        if found is None:
            try:
                with self._key_lock(key):  # one thread draws it; the others wait for it
                    drawn = self._lookup(key) or self._draw(environ, key, modified)
            finally:
                with self._lock:
                    self._pending.pop(key, None)
            if not isinstance(drawn, Answer):  # not a 200: sent as the app said it
                status, headers, body = drawn
                start_response(status, headers)
                return [body]
            found = drawn
        variant, current = found.reply(environ.get("HTTP_ACCEPT_ENCODING") or "",
                                       environ.get("HTTP_IF_NONE_MATCH"),
                                       environ.get("HTTP_IF_MODIFIED_SINCE"))
        if current:
            start_response("304 Not Modified", variant.not_modified)
            return [b""]
        start_response("200 OK", variant.ok)
        return [b"" if method == "HEAD" else variant.body]

    def _lookup(self, key: tuple[Any, ...]) -> Answer | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def _key_lock(self, key: tuple[Any, ...]) -> threading.Lock:
        with self._lock:
            return self._pending.setdefault(key, threading.Lock())

    def _draw(self, environ: dict[str, Any], key: tuple[Any, ...],
              modified: datetime | None
              ) -> Answer | tuple[str, list[tuple[str, str]], bytes]:
        """Run the app for the full GET answer; cache it when it is a 200."""
        inner = {k: v for k, v in environ.items()
                 if k not in ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE")}
        inner["REQUEST_METHOD"] = "GET"
        said: list[Any] = []

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            said[:] = [status, headers]

        chunks = self.app(inner, start)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        status, headers = said
        if not status.startswith("200"):
            if environ.get("REQUEST_METHOD") == "HEAD":
                body = b""
            return status, headers, body
        kept = [(k, v) for k, v in headers if k.lower() not in (
            "content-length", "etag", "cache-control", "last-modified")]
        answer = Answer.of(kept, body, modified)
        size = answer.size
        if size > MAX_BYTES:
            return answer
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[key] = answer
            self._bytes += size
            while len(self._entries) > MAX_ENTRIES or self._bytes > MAX_BYTES:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old.size
        return answer


def route(engine_fn: Callable[[], Engine], redact: Callable[[str], str],
          cors: Sequence[str] = ()) -> Callable:
    """The page at `/` and the API under /api/v1, uncached: what ReadCache wraps (`cors`:
    the web origins whose pages may read the API, metrics.cors_origins)."""

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/":
            return web.page(environ, start_response, engine_fn(), redact)
        if path == http_api.PREFIX or path.startswith(http_api.PREFIX + "/"):
            return http_api.answer(environ, start_response, engine_fn, redact, tuple(cors))
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; try / or /api/v1/openapi.json\n"]

    return app


#: Worker threads that draw answers not yet cached (config web.threads).
THREADS = 4
#: A connection idle this long (before its first request or between two) is closed.
KEEP_ALIVE = 60
#: On stop, the answers under way get this long to finish.
STOP_WAIT = 5


class ReadApp:
    """The read side as an ASGI app: a cached answer sent from the event loop
    (ReadCache.hit), anything else by the WSGI app (`wsgi`: read-only, cached) in one of
    `threads` worker threads."""

    def __init__(self, cache: ReadCache, threads: int = THREADS) -> None:
        from a2wsgi import WSGIMiddleware

        self.cache = cache
        self.wsgi = web.read_only(cache)
        self.bridge = WSGIMiddleware(self.wsgi, workers=threads)
        # the data version is read in a thread of its own, never behind a long draw
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="web-version")
        self._reading: asyncio.Future[Any] | None = None
        self._drawing: set[tuple[Any, ...]] = set()  # pages being drawn (the loop's alone)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            if self.cache.recheck > 0 and self.cache.fresh() is None:
                await self._read_version()
            found, key = self.cache.hit(scope, self._drawing)
            if found is not None:
                status, headers, body = found
                await send({"type": "http.response.start", "status": status,
                            "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            if key is not None and key[1] == "/" and key not in self._drawing:
                # this request draws the page; those that come meanwhile are not held
                self._drawing.add(key)
                try:
                    await self.bridge(scope, receive, send)
                finally:
                    self._drawing.discard(key)
                return
        await self.bridge(scope, receive, send)

    async def _read_version(self) -> None:
        """Read the data version again, once for all the requests that found it stale (each
        second under load: without this, every request of that moment would go to a worker
        thread and read it). A failure is left to the WSGI app to answer (a 503)."""
        if self._reading is None:
            self._reading = asyncio.get_running_loop().run_in_executor(
                self._reader, self.cache.version)
            self._reading.add_done_callback(self._read)
        with contextlib.suppress(Exception):
            await asyncio.shield(self._reading)

    def _read(self, reading: asyncio.Future[Any]) -> None:
        self._reading = None
        if not reading.cancelled():
            reading.exception()  # seen here, whether or not a request still awaits it

    def close(self) -> None:
        """Let the worker threads end (a draw under way finishes; none waiting starts)."""
        self.bridge.executor.shutdown(wait=False, cancel_futures=True)
        self._reader.shutdown(wait=False, cancel_futures=True)


def read_app(engine_fn: Callable[[], Engine], redact: Callable[[str], str] = str,
             recheck: float = 1.0, cors: Sequence[str] = (), threads: int = THREADS
             ) -> ReadApp:
    """The read side's app: read-only (405 for anything but GET and HEAD), cached."""
    return ReadApp(ReadCache(route(engine_fn, redact, cors), engine_fn, recheck), threads)


#: Request head refused beyond this (a URL over 64 KiB, or headers as long): 431.
MAX_HEAD = 64 * 1024


class _HeadTooLarge(Exception):
    """Raised from the parser's callbacks: the request's head passed MAX_HEAD."""


class _Protocol(HttpToolsProtocol):
    """uvicorn's HTTP connection (httptools), refusing a request head over MAX_HEAD with a
    431 and one it cannot parse with a 400, each one line of JSON as the API's own errors,
    and the connection closed (httptools has no bound on a head of its own)."""

    head = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # a connection that sends no request is closed as an idle keep-alive one is (uvicorn
        # times a connection out only between two requests)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def on_message_begin(self) -> None:
        self.head = 0
        super().on_message_begin()

    def _count(self, size: int) -> None:
        self.head += size
        if self.head > MAX_HEAD:
            raise _HeadTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no protocol to upgrade to: the request is answered as it is
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _HeadTooLarge):
                self.refuse("431 Request Header Fields Too Large",
                            f"request head larger than {MAX_HEAD} bytes")
            else:
                self.refuse("400 Bad Request", f"unreadable request: {exc}")

    def refuse(self, status: str, why: str) -> None:
        body = json.dumps({"error": f"{status[4:]}: {why}"}).encode() + b"\n"
        self.transport.write(
            f"HTTP/1.1 {status}\r\nServer: gpuradar\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body)
        self.transport.close()


class ReadServer:
    """An ASGI `app` (read_app's) on uvicorn at address:port, from a thread of its own
    (`start`) or the calling thread (`run`, until stop())."""

    def __init__(self, app: Callable, address: str, port: int,
                 sockets: Sequence[socket.socket] = ()) -> None:
        """`sockets`: listening sockets to serve instead of address:port (the page child of
        `gpuradar run` serves the daemon's, scheduler/web_child.py). Raises EndpointError
        (one line) when the port cannot be had."""
        self.app = app
        self.sockets = list(sockets) or listen(address, port)
        # uvicorn says at INFO when it starts and stops, each time; its errors still show
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        # proxy_headers off: no answer depends on the client's address or scheme, and a
        # proxy's X-Forwarded-* headers are not taken on trust (as waitress was told)
        config = uvicorn.Config(
            app, http=_Protocol, loop="auto", lifespan="off", interface="asgi3",
            log_config=None, access_log=False, server_header=False, proxy_headers=False,
            headers=[("Server", "gpuradar")], backlog=BACKLOG,
            timeout_keep_alive=KEEP_ALIVE, timeout_graceful_shutdown=STOP_WAIT)
        self.server = _Server(config)
        self.thread: threading.Thread | None = None

    @property
    def listening(self) -> list[tuple[str, int]]:
        """(host, port) of each listening socket (a port 0 asked for is the one taken)."""
        return [sock.getsockname()[:2] for sock in self.sockets]

    @property
    def url(self) -> str:
        host, port = self.listening[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def start(self) -> ReadServer:
        self.thread = threading.Thread(target=self.run, daemon=True, name="web-http")
        self.thread.start()
        return self

    def run(self) -> None:
        """Serve until stop(); then finish the answers under way (STOP_WAIT at most) and
        close every socket."""
        try:
            self.server.run(sockets=self.sockets)
        finally:
            close = getattr(self.app, "close", None)
            if close is not None:
                close()
            for sock in self.sockets:
                sock.close()

    def stop(self) -> None:
        """Ask the server to stop (it looks every 0.1 s; safe from a signal handler or
        another thread) and wait for it when it runs in its own thread."""
        self.server.should_exit = True
        self.server.wake()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(STOP_WAIT + 5)


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handling: the caller's handlers call stop()
    (uvicorn's would raise the signal again once stopped: an exit by SIGTERM, not 0)."""

    _loop: asyncio.AbstractEventLoop | None = None
    _woken: asyncio.Event | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def wake(self) -> None:
        """Let main_loop see should_exit now rather than at its next 0.1 s tick (safe from
        any thread; a stop asked before the loop runs is seen at its first tick)."""
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(woken.set)

    async def main_loop(self) -> None:
        """uvicorn's ticks (its Date header, once a second), but woken by stop(): every
        `serve` and page process stops as soon as asked, not up to a tick later."""
        self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 0.1)
            should_exit = await self.on_tick(counter)
