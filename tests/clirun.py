"""Running the real `gpuradar` command as a user does: its arguments, environment, working
directory, stdout, stderr and exit code.

`gpuradar(...)` runs the command in the test's own process (`gpuradar.__main__.main()` with
the call's argv, environment and streams, the process-wide state it touches put back after)
when the test's subject is the command's output; a command that runs Twisted's reactor (a
reactor does not restart: `crawl`, `demo`, `run`, `serve`) or a call with `process=True`
is forked from tests/forkserver.py instead (one per run, shared by its xdist workers): a
fresh process without the 1-2 s of imports (`ForkedProcess` does the same for a
long-running one: the daemon in tests/daemon_helpers.py). `start_gpuradar(...)` and
GPURADAR_TEST_SUBPROCESS=1 start `python -m gpuradar` for real (the process itself is the
subject: signals, the daemon, the installed entry point)."""

from __future__ import annotations

import atexit
import gc
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

REAL_SUBPROCESS = os.environ.get("GPURADAR_TEST_SUBPROCESS") == "1"
#: GPURADAR_TEST_FORK=1: every `gpuradar(...)` call forked, none in-process (to compare)
ALWAYS_FORK = os.environ.get("GPURADAR_TEST_FORK") == "1"


#: GPURADAR_TEST_PROCESS_LOG=FILE: each process a test starts (forked or real) appends a line
#: "test id<TAB>command" there, to count the tests that still start one (tests/README.md)
PROCESS_LOG = os.environ.get("GPURADAR_TEST_PROCESS_LOG")


def note_process(args: list[str] | tuple[str, ...]) -> None:
    """Count a started process in PROCESS_LOG, if set."""
    if PROCESS_LOG:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
        with open(PROCESS_LOG, "a") as log:
            log.write(f"{test}\t{' '.join(args[:2])}\n")


def write_config(path: Path, **sections: Any) -> Path:
    path.write_text(yaml.safe_dump(sections))
    return path


def _env(db_url: str | None, config: Path | None, env: dict[str, str] | None) -> dict[str, str]:
    # Not the test process's terminal size either (pytest-xdist workers set COLUMNS=80):
    # output is piped, as in a script, unless a test sets COLUMNS itself.
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("GPURADAR_") and k not in ("COLUMNS", "LINES")}
    # one data directory per test process (pytest-xdist workers run side by side)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    full_env["GPURADAR_DATA_DIR"] = f"{full_env.get('TMPDIR', '/tmp')}/gpuradar-test-data-{worker}"
    if db_url:
        full_env["GPURADAR_DATABASE_URL"] = db_url
    if config:
        full_env["GPURADAR_CONFIG"] = str(config)
    full_env.update(env or {})
    return full_env


#: The socket of the fork server the xdist controller started for its workers
#: (tests/conftest.py); unset, a test process starts its own on first use.
SHARED_FORK_SERVER = "GPURADAR_TEST_FORK_SERVER"


def start_fork_server() -> tuple[subprocess.Popen, str]:
    """tests/forkserver.py, listening on a Unix socket in a folder of its own (there once its
    preload is done; the folder removed when this process ends) until this process closes
    the server's stdin, or ends; (the server, the socket's path)."""
    folder = tempfile.mkdtemp(prefix="gpuradar-forkserver-")
    atexit.register(shutil.rmtree, folder, True)
    path = f"{folder}/socket"
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
    return subprocess.Popen([sys.executable, "-m", "tests.forkserver", path], cwd=root,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL), path


class _ForkServer:
    """The client of tests/forkserver.py: the controller's, else one of this process's own,
    started on first use; connected again (its own started again) if it went away."""

    def __init__(self) -> None:
        self.own: tuple[subprocess.Popen, str] | None = None
        self.conn: Any = None  # the connection's reader and writer
        self.lock = threading.Lock()

    def _connection(self) -> Any:
        if self.conn is None:
            path, server = os.environ.get(SHARED_FORK_SERVER), None
            if not path:
                if self.own is None or self.own[0].poll() is not None:
                    self.own = start_fork_server()
                server, path = self.own
            self.conn = _connect(path, server).makefile("rwb", buffering=0)
        return self.conn

    def _ask(self, request: bytes) -> bytes:
        """The server's answer to `request` (nothing: it went away)."""
        conn = self._connection()
        try:
            conn.write(request + b"\n")
            return conn.readline()
        except OSError:
            return b""

    def fork(self, args: list[str], env: dict[str, str], cwd: str, folder: str) -> int:
        """Fork `gpuradar ARGS` writing into `folder` (stdout, stderr, rc); its pid."""
        note_process(args)
        request = json.dumps({"args": args, "env": env, "cwd": cwd, "dir": folder}).encode()
        with self.lock:
            reply = self._ask(request)
            if not reply:  # the server went away: one more try, connected again
                self.conn.close()
                self.conn = None
                reply = self._ask(request)
            assert reply, "the fork server did not answer"
            return json.loads(reply)["pid"]

    def run(self, args: list[str], env: dict[str, str], timeout: float
            ) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="gpuradar-cli-") as folder:
            proc = ForkedProcess(args, env, Path.cwd(), Path(folder))
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
            out = (proc.folder / "stdout").read_text(errors="replace")
            err = (proc.folder / "stderr").read_text(errors="replace")
            return subprocess.CompletedProcess(proc.args, code, out, err)


def _connect(path: str, server: subprocess.Popen | None, timeout: float = 60.0
             ) -> socket.socket:
    """A connection to the fork server at `path`, waiting while it preloads (`server`: the
    process, when this one started it: its end is an error at once)."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if server is not None and server.poll() is not None:
                raise AssertionError(f"the fork server exited ({server.returncode})") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"no fork server at {path} after {timeout} s") from None
            time.sleep(0.01)


_FORK_SERVER = _ForkServer()


class ForkedProcess:
    """A long-running `gpuradar` forked from the fork server, driven like a `Popen`: it is
    the fork server's child, so its exit code is read from the file the server writes."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.args = ["gpuradar", *args]
        self.returncode: int | None = None
        self.pid = _FORK_SERVER.fork(args, env, str(cwd), str(folder))

    def poll(self) -> int | None:
        rc = self.folder / "rc"
        if self.returncode is None and rc.exists():
            self.returncode = int(rc.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


#: Commands that run Twisted's reactor, which runs once per process: always a process. The
#: crawls of `crawl`, `demo`, `parse` and `sources --check` run on the reactor's loop
#: without starting it (gpuradar.crawler.service.CrawlService.run): in this process.
REACTOR_COMMANDS = frozenset({"run", "serve"})

# The consoles gpuradar.cli.output makes at import, made again for each in-process call
# (rich reads the colour and terminal settings from the environment when one is made).


#: One in-process call at a time: the streams, environment and argv it swaps are the
#: process's (a test calling from threads gets its calls one after another, not mixed).
_IN_PROCESS = threading.Lock()


def _needs_process(args: tuple[str, ...]) -> bool:
    """A reactor command; or a call made while an event loop runs on this thread (Playwright's
    sync API keeps one), where a command's crawls cannot drive the reactor's loop."""
    import asyncio

    first = next((a for a in args if not a.startswith("-")), "")
    return first in REACTOR_COMMANDS or asyncio._get_running_loop() is not None


def _in_process(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`gpuradar ARGS` in this process, as `python -m gpuradar` would run it: argv,
    environment, stdin at /dev/null, stdout and stderr captured, the exit code from its
    SystemExit. What the command changes process-wide — the environment, argv, streams,
    SIGINT's handler, the root logger, the collector, the engines per URL, the secrets
    masked in logs — is put back (or started over) after, so the next call and the test
    meet it as before."""
    import gpuradar.__main__ as entry
    from gpuradar.core.logs import REDACT
    from gpuradar.storage.db import ENGINES

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_main = sys.modules["__main__"]
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_sigint = signal.getsignal(signal.SIGINT)
    root = logging.getLogger()
    saved_logging = root.handlers[:], root.level, {
        name: (lg.level, lg.propagate, lg.disabled, lg.handlers[:])
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)}
    saved_gc, secrets = gc.get_threshold(), REDACT._secrets
    saved_warnings = warnings.showwarning, logging._warnings_showwarning  # type: ignore[attr-defined]
    code = 0
    os.environ.clear()
    os.environ.update(env)
    ENGINES.forget()  # the command opens its databases as a new process does
    try:
        with open(os.devnull) as stdin:
            sys.stdin, sys.stdout, sys.stderr = stdin, out, err
            # as `python -m gpuradar`: Click names the program from __main__ ("python -m
            # gpuradar" in its usage lines), not from pytest's
            sys.argv = [entry.__file__, *args]
            sys.modules["__main__"] = entry
            from gpuradar.cli import output

            for name, kwargs in output.CONSOLES.items():
                console = getattr(output, name)
                type(console).__init__(console, **kwargs)
            try:
                entry.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    print(exc.code, file=err)
            except KeyboardInterrupt:
                code = -signal.SIGINT
            except Exception:  # as the interpreter does with an uncaught exception
                import traceback

                traceback.print_exc(file=err)
                code = 1
    finally:
        ENGINES.forget()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        sys.modules["__main__"] = saved_main
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        signal.signal(signal.SIGINT, saved_sigint)
        handlers, level, levels = saved_logging
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        # every logger as it was, and one the command made as a new one is: a level set
        # on it would otherwise silence it for the rest of this test process
        for name, lg in list(logging.root.manager.loggerDict.items()):
            if isinstance(lg, logging.Logger):
                lg.level, lg.propagate, lg.disabled, lg.handlers[:] = levels.get(
                    name, (logging.NOTSET, True, False, []))
        logging.root.manager._clear_cache()  # type: ignore[attr-defined]
        warnings.showwarning, logging._warnings_showwarning = saved_warnings  # type: ignore[attr-defined]
        gc.unfreeze()
        gc.set_threshold(*saved_gc)
        REDACT.set_secrets(secrets)
    return subprocess.CompletedProcess(["gpuradar", *args], code, out.getvalue(),
                                       err.getvalue())


def gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
             env: dict[str, str] | None = None, timeout: float = 120,
             process: bool = False) -> subprocess.CompletedProcess:
    """`gpuradar ARGS` run to its end: exit code, stdout and stderr as text. In this
    process unless `process` (the process is the subject) or the command runs Twisted's
    reactor (REACTOR_COMMANDS); `timeout` bounds a process only."""
    full_env = _env(db_url, config, env)
    if REAL_SUBPROCESS:
        note_process(args)
        return subprocess.run([sys.executable, "-m", "gpuradar", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout)
    if process or ALWAYS_FORK or _needs_process(args):
        return _FORK_SERVER.run(list(args), full_env, timeout)
    with _IN_PROCESS:
        return _in_process(list(args), full_env)


def start_gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
                   env: dict[str, str] | None = None) -> subprocess.Popen:
    """`gpuradar` started in the background (its output read with `communicate`)."""
    note_process(args)
    return subprocess.Popen([sys.executable, "-m", "gpuradar", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(db_url, config, env))


def gpuradar_json(*args: str, **kwargs: Any) -> Any:
    proc = gpuradar(*args, "--json", **kwargs)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
