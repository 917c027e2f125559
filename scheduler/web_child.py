"""The page and the JSON API of `gpuradar run`, served by a process of its own.

In the daemon's process, page readers shared the interpreter lock with the `/metrics`
scrape and the health checks: a loaded page slowed the monitoring of the service. So the
daemon binds the page's port itself and hands the listening socket to a child process (a
fresh interpreter, `python -m gpuradar.scheduler.web_child`), which serves the same app on
uvicorn as `gpuradar serve` does (scheduler/server.py).

The daemon supervises it (`WebChild`): the child is started with the daemon, started again
when it dies (logged, `gpuradar_web_up` 0 and `gpuradar_web_restarts_total` counted until it
is back), and stopped with the daemon. The socket stays open in the daemon, so a connection
made while the child restarts waits in the backlog instead of being refused, and a port 0
keeps the port it was given.

The child's settings (the database URL, secrets to mask, logging) come as one JSON line on
its stdin, never on its command line; later lines replace the secrets (a reload). The end
of its stdin — the daemon stopped or died, even by SIGKILL — stops it: it never outlives
the daemon.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from gpuradar.scheduler.sockets import listen

log = logging.getLogger("gpuradar.web")

#: The first restart waits this long; each quick death doubles it, up to RESTART_MAX.
RESTART_DELAY = 0.5
RESTART_MAX = 30.0
#: A child that served this long before it died is restarted after RESTART_DELAY again.
STEADY = 60.0
#: SIGTERM, then this long for the requests under way, then SIGKILL.
STOP_WAIT = 5.0
#: The child's niceness above the daemon's: when readers keep every core busy, the kernel
#: still gives the daemon (its crawls, its scrapes and health checks) most of a core.
NICE = 5


class WebChild:
    """The daemon's side: the listening sockets, the child serving them, its supervision."""

    def __init__(self, address: str, port: int, settings: dict[str, Any],
                 on_up: Callable[[bool], None] = lambda up: None,
                 on_restart: Callable[[], None] = lambda: None,
                 restart_delay: float = RESTART_DELAY) -> None:
        """`settings`: what the child serves (database_url, threads, cors, secrets,
        log_format, log_level). `on_up` is told when the child runs or has died,
        `on_restart` each time it is started again."""
        self.sockets = listen(address, port)
        self.settings = dict(settings)
        self.on_up, self.on_restart = on_up, on_restart
        self.restart_delay = restart_delay
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.sockets[0].getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> WebChild:
        self._spawn()
        self._thread = threading.Thread(target=self._supervise, daemon=True,
                                        name="web-child")
        self._thread.start()
        return self

    def _spawn(self) -> None:
        fds = [s.fileno() for s in self.sockets]
        proc = subprocess.Popen([sys.executable, "-m", "gpuradar.scheduler.web_child"],
                                stdin=subprocess.PIPE, pass_fds=fds, close_fds=True)
        with self._lock:
            self.proc = proc
            self._send(proc, {**self.settings, "fds": fds})
        self.on_up(True)

    @staticmethod
    def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
        stdin: IO[bytes] | None = proc.stdin
        if stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):  # it died: the supervisor sees it
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()

    def set_secrets(self, secrets: Iterable[str]) -> None:
        """Secrets to mask from now on (a reload): the child is told, and a restart gets
        them."""
        self.settings["secrets"] = sorted(secrets)
        with self._lock:
            if self.proc is not None:
                self._send(self.proc, {"secrets": self.settings["secrets"]})

    def _supervise(self) -> None:
        delay = self.restart_delay
        while True:
            proc, started = self.proc, time.monotonic()
            assert proc is not None
            code = proc.wait()
            if self._stopping.is_set():
                return
            self.on_up(False)
            if time.monotonic() - started >= STEADY:
                delay = self.restart_delay
            how = f"exited with {code}"
            if code < 0:
                with contextlib.suppress(ValueError):
                    how = f"was killed by {signal.Signals(-code).name}"
            log.error("the web page's process (pid %d) %s; starting it again in %.1fs",
                      proc.pid, how, delay)
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, RESTART_MAX)
            try:
                with self._lock:
                    if self._stopping.is_set():
                        return
                    self._spawn()
            except OSError as exc:
                log.error("the web page's process cannot be started: %s", exc)
                continue
            self.on_restart()
            log.info("the web page's process is back (pid %d) on %s/", self.pid or 0,
                     self.url)

    def stop(self, timeout: float = STOP_WAIT) -> None:
        """Stop the child (SIGTERM, then SIGKILL after `timeout`) and close the sockets."""
        self._stopping.set()
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if self._thread is not None:
            self._thread.join(timeout)
        for sock in self.sockets:
            sock.close()
        self.on_up(False)


def main(argv: Sequence[str] | None = None) -> int:
    """The child: serve the sockets it was given until SIGTERM or the end of its stdin."""
    from gpuradar.core.logs import REDACT, setup_logging

    # Ctrl-C in a terminal reaches the whole process group: the daemon decides when the
    # child stops, not the terminal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    line = sys.stdin.buffer.readline()
    if not line:
        return 0  # the daemon is gone already
    spec = json.loads(line)
    setup_logging(spec.get("log_format", "text"), spec.get("log_level", "INFO"))
    REDACT.set_secrets(spec.get("secrets", ()))
    from gpuradar.scheduler.server import ReadServer, read_app
    from gpuradar.storage.db import get_engine

    engine = get_engine(spec["database_url"])
    sockets = [socket.socket(fileno=fd) for fd in spec["fds"]]
    server = ReadServer(read_app(lambda: engine, REDACT, cors=spec.get("cors", ()),
                                 threads=spec.get("threads", 4)), "", 0, sockets=sockets)

    def follow() -> None:
        for more in sys.stdin.buffer:
            with contextlib.suppress(ValueError, TypeError):
                REDACT.set_secrets(json.loads(more)["secrets"])
        server.stop()  # stdin ended: the daemon stopped or died

    threading.Thread(target=follow, daemon=True, name="web-child-stdin").start()
    signal.signal(signal.SIGTERM, lambda signum, frame: server.stop())
    server.run()
    engine.dispose()
    return 0


if __name__ == "__main__":
    code = main()
    # not sys.exit(): the interpreter's shutdown would wait for the stdin reader's lock, which
    # its thread holds while it blocks on the pipe (a fatal error at shutdown)
    logging.shutdown()
    os._exit(code)
