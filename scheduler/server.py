"""The read side: the web page (scheduler/web.py) and the JSON API (scheduler/http_api.py) as one
WSGI app on waitress, a production HTTP/1.1 server (keep-alive, a pool of worker threads, a
bounded backlog), answers cached per data version and sent gzip-compressed to clients that
take it.

`gpuradar serve` runs it alone, stateless and read-only (any number of replicas, on a read
replica of the database); `gpuradar run` runs the same app in a child process on its own
port (scheduler/web_child.py), so that page and API readers never queue in front of the
daemon's /metrics and /healthz (scheduler/health.py) nor share its interpreter lock.

Every answer is a function of what is stored and, for the page, of the minute it is drawn
(its ages: "5 minutes ago"). What is stored changes only when a crawl starts or ends, an
index point is written or an alert changes: storage.page_reads.data_version reads that cheaply, at
most every `recheck` seconds, and a change empties the cache. So a page that took a second
to draw is drawn once per version and minute and then sent as stored bytes; its ETag (the
SHA-256 of the body) and Last-Modified (the version's newest change) let a client
revalidate for a 304.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from sqlalchemy import Engine

from gpuradar.scheduler import http_api, web
from gpuradar.scheduler.health import EndpointError

log = logging.getLogger("gpuradar.web")

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
    it needs made once: its tag, the headers of a 200 (its length included) and of a 304."""

    tag: str
    body: bytes
    ok: list[tuple[str, str]]
    not_modified: list[tuple[str, str]]


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

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        query = environ.get("QUERY_STRING") or ""
        method = environ.get("REQUEST_METHOD", "GET")
        cacheable = method in ("GET", "HEAD") and (
            path == "/" or path.startswith(http_api.PREFIX + "/")) and not (
            path in CLOCK_PATHS and "until=" not in query)
        if not cacheable:
            return self.app(environ, start_response)
        try:
            version, modified = self.version()
        except Exception:  # noqa: BLE001 - the app says why (503, or 500 and logged)
            return self.app(environ, start_response)
        minute = int(self.wall() // 60) if path == "/" else 0
        # the CORS headers answer the request's Origin: one entry per origin
        key = (version, path, query, minute, environ.get("HTTP_ORIGIN") or "")
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
        return self._send(found, environ, start_response)

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

    @staticmethod
    def _send(answer: Answer, environ: dict[str, Any], start_response: Callable
              ) -> Iterable[bytes]:
        """The stored bytes and headers of the variant the client takes, or a 304."""
        variant = answer.plain
        if answer.gzipped is not None and _accepts_gzip(
                environ.get("HTTP_ACCEPT_ENCODING") or ""):
            variant = answer.gzipped
        if_none = environ.get("HTTP_IF_NONE_MATCH")
        since = environ.get("HTTP_IF_MODIFIED_SINCE")
        if (if_none is not None or since is not None) and (
                (http_api.etag_matches(if_none, answer.etag)
                 or http_api.etag_matches(if_none, variant.tag))
                or (if_none is None and _not_modified_since(since, answer.modified))):
            start_response("304 Not Modified", variant.not_modified)
            return [b""]
        start_response("200 OK", variant.ok)
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else variant.body]


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


def read_app(engine_fn: Callable[[], Engine], redact: Callable[[str], str] = str,
             recheck: float = 1.0, cors: Sequence[str] = ()) -> Callable:
    """The read side's WSGI app: read-only (405 for anything but GET and HEAD), cached."""
    return web.read_only(ReadCache(route(engine_fn, redact, cors), engine_fn, recheck))


#: Request head refused beyond this (a URL over 64 KiB, or headers as long): 431.
MAX_HEAD = 64 * 1024


def _channel_class() -> type:
    """waitress's connection, answering a request it refuses before the app (a head too
    large, no HTTP at all) with one line of JSON, as the API's own errors."""
    from waitress.channel import HTTPChannel
    from waitress.task import ErrorTask

    class JsonError(ErrorTask):
        def execute(self) -> None:
            # types-waitress calls `request` an Error: it is the parser that holds one
            error = self.request.error  # type: ignore[attr-defined]
            body = json.dumps({"error": f"{error.reason}: {error.body}"}).encode() + b"\n"
            self.status = f"{error.code} {error.reason}"
            self.response_headers.append(  # type: ignore[attr-defined]  # a list (stub: Sequence)
                ("Content-Type", "application/json"))
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class Channel(HTTPChannel):
        error_task_class = JsonError

    return Channel


class ReadServer:
    """`app` on waitress at address:port, from a thread of its own (`run`) or the calling
    thread (`serve`, until stop())."""

    def __init__(self, app: Callable, address: str, port: int, threads: int = 4,
                 sockets: Sequence[socket.socket] = ()) -> None:
        """`sockets`: listening sockets to serve instead of address:port (the page child of
        `gpuradar run` serves the daemon's, scheduler/web_child.py)."""
        from waitress.server import create_server

        # waitress warns "Task queue depth is N" for every request that waits for a worker
        # thread: at 50 in flight on 4 threads, a line per request, formatted and written
        # under load (the backlog is bounded and waiting is normal, not a warning)
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        where: dict[str, Any] = ({"sockets": list(sockets)} if sockets else
                                 {"host": address, "port": port})
        try:
            self.server: Any = create_server(app, **where, threads=threads,
                                             ident="gpuradar", max_request_header_size=MAX_HEAD,
                                             clear_untrusted_proxy_headers=True,
                                             asyncore_use_poll=True)
            for one in getattr(self.server, "map", {0: self.server}).values():
                one.channel_class = _channel_class()
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise EndpointError(f"cannot listen on {address}:{port} for the web page and "
                                f"API: {why}") from None
        # one listening socket, or several (a name such as localhost: IPv4 and IPv6)
        self._map = getattr(self.server, "_map", None) or getattr(self.server, "map", None)
        self._stopping = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def listening(self) -> list[tuple[str, int]]:
        """(host, port) of each listening socket (a port 0 asked for is the one taken)."""
        found = getattr(self.server, "effective_listen", None)
        return found or [(self.server.effective_host, self.server.effective_port)]

    @property
    def url(self) -> str:
        host, port = self.listening[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def start(self) -> ReadServer:
        self.thread = threading.Thread(target=self.run, daemon=True, name="web-http")
        self.thread.start()
        return self

    def run(self) -> None:
        """Serve until stop(); then finish the requests under way and close every socket,
        from this thread (closing them from another one races the poll loop)."""
        from waitress import wasyncore

        while not self._stopping.is_set():
            wasyncore.loop(timeout=self.server.adj.asyncore_loop_timeout, map=self._map,
                           use_poll=self.server.adj.asyncore_use_poll, count=1)
        self.server.task_dispatcher.shutdown()
        wasyncore.close_all(self._map)

    def stop(self) -> None:
        self._stopping.set()
        # wakes the poll loop now; a trigger already closed means the loop is ending anyway
        # (it checks _stopping at least every asyncore_loop_timeout, 1 s)
        with contextlib.suppress(OSError):
            self.server.pull_trigger()
        if self.thread is not None:
            self.thread.join(10)
