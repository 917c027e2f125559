"""A real HTTP server on loopback that answers like the providers do, from recorded
responses in their exact formats (tests/fixtures). Handlers can also misbehave: 500s,
429 storms, hangs."""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.helpers import FIXTURES, fixture  # noqa: F401  (routes read fixtures from here)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    cut_after: int | None = None  # send this many bytes of the body, then close


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case

    def json(self):
        return json.loads(self.body or b"null")


Handler = Callable[[Request], Reply]


class _Server(ThreadingHTTPServer):
    request_queue_size = 128


class ProviderServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Request] = []
        server = self

        class _H(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                req = Request(self.command, parts.path, parse_qs(parts.query),
                              self.rfile.read(length) if length else b"",
                              {k.lower(): v for k, v in self.headers.items()})
                server.requests.append(req)
                handler = server.routes.get((self.command, parts.path))
                try:
                    reply = handler(req) if handler else Reply(404, b'{"error": "not found"}')
                except Exception:  # a broken route says so, instead of a silent hang-up
                    reply = Reply(500, traceback.format_exc().encode(), "text/plain")
                if reply.delay:
                    time.sleep(reply.delay)
                body = reply.body.replace(b"{{BASE}}", server.base.encode())
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(body)))
                    # HTTP/1.0 closes after each answer, but Twisted's pool keeps any
                    # connection not marked "close": a POST then reused on the closed
                    # socket fails with ConnectionDone and is never retried.
                    self.send_header("Connection", "close")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body if reply.cut_after is None
                                     else body[:reply.cut_after])
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _serve

            def log_message(self, *args) -> None:
                pass

        # A probe or crawl of many sources connects to this one server at once: the default
        # listen backlog (5) can overflow under load and turn a connect into a timeout.
        self.httpd = _Server(("127.0.0.1", 0), _H)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> ProviderServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler


# -- the providers gpuradar reads, as served from fixtures --------------------------------
def standard_routes() -> dict[str, tuple[str, str, Handler]]:
    """Every `ROUTES` of the modules in tests/routes/: "source.endpoint" ->
    (method, path, handler). One module per provider keeps providers apart."""
    import importlib
    import pkgutil

    import tests.routes as pkg

    out: dict[str, tuple[str, str, Handler]] = {}
    owner: dict[tuple[str, str], str] = {}
    for mod in pkgutil.iter_modules(pkg.__path__):
        routes = importlib.import_module(f"tests.routes.{mod.name}").ROUTES
        for method, path, _ in routes.values():
            # one server serves them all: another module's handler would silently replace it
            if owner.setdefault((method, path), mod.name) != mod.name:
                raise ValueError(f"{method} {path} is served by both tests/routes/"
                                 f"{owner[method, path]}.py and {mod.name}.py")
        out.update(routes)
    return out


def serve_standard(server: ProviderServer, only: list[str] | None = None) -> dict[str, str]:
    """Install the fixture routes; return the GPURADAR_ENDPOINTS overrides pointing here
    (for the routes named after a real endpoint; the others only serve)."""
    from gpuradar.core.config import known_endpoints

    endpoints = {}
    for key, (method, path, handler) in standard_routes().items():
        if only and key.split(".")[0] not in only:
            continue
        server.route(method, path, handler)
        if key in known_endpoints():
            endpoints[key] = server.base + path
    return endpoints
