"""A fork server for the command-line tests: `gpuradar` as its own process, without paying
for its imports on every call.

Each run of the CLI is a real process with its own reactor, signal handlers, logging,
environment, working directory, stdout/stderr and exit code — what the tests assert on —
but instead of starting Python and importing Scrapy, Twisted, SQLAlchemy, pydantic and the
whole package again (1-2 s a call on this machine), it is forked from a server process that
has imported them once and done nothing else. The server never runs a test, so each child
starts from the state of a fresh `python -m gpuradar` that has just finished its imports.

Protocol (one JSON object per line on the server's stdin): {"args", "env", "cwd", "dir"};
the server answers {"pid": N} on its stdout once the child is forked, and writes the exit
code (a negative signal number, as subprocess reports it) into `dir/rc` when the child has
ended. The child writes stdout and stderr into `dir/stdout` and `dir/stderr`.

Only what cannot change a fresh process's behaviour is imported here: third-party libraries
and gpuradar's modules below the command line. `gpuradar.cli` builds its consoles from the
environment (terminal width, colour) when imported, so the child imports it itself.
"""

from __future__ import annotations

import json
import os
import signal
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


def _child(request: dict, reply_fd: int) -> None:
    """In the forked child: become `python -m gpuradar ARGS` and exit with its code."""
    import runpy

    os.close(reply_fd)
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


def serve() -> None:
    _preload()
    children: dict[int, str] = {}
    lock = threading.Lock()
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever a preloaded library prints does not corrupt the protocol
    reply.write(json.dumps({"ready": os.getpid()}) + "\n")
    reply.flush()
    forked = threading.Event()
    threading.Thread(target=_reap, args=(children, lock, forked), daemon=True).start()
    for line in sys.stdin:
        request = json.loads(line)
        with lock:  # the reaper must know the child before it can end
            pid = os.fork()
            if pid == 0:
                _child(request, reply.fileno())
            children[pid] = request["dir"]
            forked.set()
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve()
