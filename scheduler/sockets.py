"""Listening sockets of the read side (the web page and the JSON API), on every address a
name resolves to: bound by the daemon, which hands them to its page child
(scheduler/web_child.py), or by `gpuradar serve` (scheduler/server.py). Apart from both so
that neither imports the other."""

from __future__ import annotations

import socket
from typing import Any

from gpuradar.scheduler.health import EndpointError

#: Connections the kernel queues (for the daemon's child: while it starts or restarts too).
BACKLOG = 1024


def listen(address: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `address` resolves to (a name such as localhost:
    IPv4 and IPv6), all on one port (port 0: the one the first was given)."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EndpointError(f"cannot resolve web address {address!r}: {exc}") from None
    out: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, sockaddr in infos:
            if (family, sockaddr[0]) in seen:
                continue
            seen.add((family, sockaddr[0]))
            sock = socket.socket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            chosen = out[0].getsockname()[1] if len(out) > 1 else port
            sock.bind((sockaddr[0], chosen, *sockaddr[2:]))
            sock.listen(BACKLOG)
    except OSError as exc:
        for sock in out:
            sock.close()
        raise EndpointError(f"cannot listen on {address}:{port} for the web page and API: "
                            f"{exc.strerror or exc}") from None
    return out
