"""A fork server for the command-line tests: `gpuradar` as its own process, without paying
for its imports on every call.

Each run of the CLI is a real process with its own reactor, signal handlers, logging,
environment, working directory, stdout/stderr and exit code — what the tests assert on —
but instead of starting Python and importing Scrapy, Twisted, SQLAlchemy, pydantic and the
whole package again (1-2 s a call on this machine), it is forked from a server process that
has imported them once and done nothing else. The server never runs a test, so each child
starts from the state of a fresh `python -m gpuradar` that has just finished its imports.

One server serves every pytest-xdist worker of a run (each preloading its own cost 1.7 s
of CPU): `python -m tests.forkserver SOCKET` listens on the Unix socket SOCKET, which appears
once the preload is done, and stops when its stdin ends (whoever started it is gone).
tests/conftest.py starts it in the xdist controller; a run without workers starts its own
(tests/clirun.py). Protocol, per connection: one JSON object per line, {"args", "env",
"cwd", "dir"}; the server answers {"pid": N} once the child is forked, and writes the exit
code (a negative signal number, as subprocess reports it) into `dir/rc` when the child has
ended. The child writes stdout and stderr into `dir/stdout` and `dir/stderr`.

Only what cannot change a fresh process's behaviour is imported here: third-party libraries
and gpuradar's modules below the command line. `gpuradar.cli` builds its consoles from the
environment (terminal width, colour) when imported, so the child imports it itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import threading

# Imported once, before any fork (none of them starts a thread, a loop or a reactor).
PRELOAD = (
    "typer", "rich.console", "rich.table", "pydantic", "yaml", "orjson", "jinja2",
    "sqlalchemy", "sqlmodel", "alembic.command", "alembic.config", "psycopg",
    "apprise", "prometheus_client", "apscheduler.schedulers.asyncio", "botocore.session",
    "scrapy", "scrapy.crawler", "scrapy.spiderloader", "scrapy.http",
    "twisted.internet.defer", "twisted.internet.asyncioreactor",
    "gpuradar.core.config", "gpuradar.core.gpus", "gpuradar.storage.db",
    "gpuradar.storage.ingest", "gpuradar.storage.queries", "gpuradar.alerts.engine",
    "gpuradar.alerts.rules", "gpuradar.alerts.delivery", "gpuradar.crawler.pipelines",
    "gpuradar.crawler.middlewares", "gpuradar.crawler.runner", "gpuradar.scheduler.setup",
    "gpuradar.recommend",
)
MAIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "gpuradar", "__main__.py")


def _preload() -> None:
    import contextlib
    import importlib

    for name in PRELOAD:
        # an optional extra not installed: the child imports what it needs, as usual
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    assert "twisted.internet.reactor" not in sys.modules, "preloading installed a reactor"


def _child(request: dict, server_fds: list[int]) -> None:
    """In the forked child: become `python -m gpuradar ARGS` and exit with its code
    (`server_fds`: the server's sockets, closed)."""
    import runpy

    for fd in server_fds:
        os.close(fd)
    out = os.open(os.path.join(request["dir"], "stdout"), os.O_WRONLY | os.O_CREAT, 0o600)
    err = os.open(os.path.join(request["dir"], "stderr"), os.O_WRONLY | os.O_CREAT, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
    # as Python sets them up: stderr line-buffered, stdout too under PYTHONUNBUFFERED
    out_buffering = 1 if request["env"].get("PYTHONUNBUFFERED") else -1
    sys.stdout = sys.__stdout__ = open(1, "w", buffering=out_buffering,  # noqa: SIM115
                                       closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, errors="backslashreplace",  # noqa: SIM115
                                       closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = [MAIN, *request["args"]]
    code = 0
    try:
        runpy.run_module("gpuradar", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:  # as the interpreter does with an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


def _reap(children: dict[int, str], lock: threading.Lock, forked: threading.Event) -> None:
    """Wait for every child and write its exit code where the client looks for it; with no
    child, wait (without waking) for the next fork."""
    while True:
        forked.wait()
        try:
            pid, status = os.wait()
        except ChildProcessError:  # none left: sleep until serve() forks again
            with lock:
                if not children:
                    forked.clear()
            continue
        with lock:
            folder = children.pop(pid, None)
        if folder is None:
            continue
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        tmp = os.path.join(folder, "rc.tmp")
        try:
            with open(tmp, "w") as fh:
                fh.write(str(code))
            os.replace(tmp, os.path.join(folder, "rc"))
        except OSError:  # the client gave up (timed out) and removed the folder
            pass


def serve(path: str) -> None:
    """Preload, then listen on the Unix socket `path` and fork a child per request, until
    stdin ends. One thread: forking while another thread holds a lock would leave the
    child that lock held (the reaper only waits and writes files)."""
    _preload()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what a preloaded library prints: nowhere
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{path}.{os.getpid()}")
    listener.listen(64)
    os.replace(f"{path}.{os.getpid()}", path)  # there for clients once it answers
    children: dict[int, str] = {}
    lock = threading.Lock()
    forked = threading.Event()
    threading.Thread(target=_reap, args=(children, lock, forked), daemon=True).start()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)
    unread: dict[socket.socket, bytes] = {}  # per client, what follows its last newline
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj == 0:
                    if not os.read(0, 4096):
                        return
                elif key.fileobj is listener:
                    conn, _ = listener.accept()
                    unread[conn] = b""
                    selector.register(conn, selectors.EVENT_READ)
                else:
                    conn = key.fileobj  # type: ignore[assignment]
                    data = conn.recv(1 << 16)
                    if not data:
                        selector.unregister(conn)
                        del unread[conn]
                        conn.close()
                        continue
                    *lines, unread[conn] = (unread[conn] + data).split(b"\n")
                    for line in lines:
                        pid = _fork(json.loads(line), children, lock, forked,
                                    [listener.fileno(), *(c.fileno() for c in unread),
                                     *([selector.fileno()] if hasattr(selector, "fileno")
                                       else [])])
                        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _fork(request: dict, children: dict[int, str], lock: threading.Lock,
          forked: threading.Event, server_fds: list[int]) -> int:
    with lock:  # the reaper must know the child before it can end
        pid = os.fork()
        if pid == 0:
            _child(request, server_fds)
        children[pid] = request["dir"]
        forked.set()
    return pid


if __name__ == "__main__":
    serve(sys.argv[1])
