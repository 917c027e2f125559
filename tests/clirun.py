"""Running the real `gpuradar` command as its own process, as a user does.

`gpuradar(...)` forks the command from tests/forkserver.py (one per test process), so each
call is a fresh process without the 1-2 s of imports (`ForkedProcess` does the same for a
long-running one: the daemon in tests/daemon_helpers.py); `start_gpuradar(...)` and
GPURADAR_TEST_SUBPROCESS=1 start `python -m gpuradar` for real (the process itself is the
subject: signals, the daemon, the installed entry point)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

REAL_SUBPROCESS = os.environ.get("GPURADAR_TEST_SUBPROCESS") == "1"


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


class _ForkServer:
    """The client of tests/forkserver.py: started on first use, restarted if it died."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _server(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            root = Path(__file__).resolve().parent.parent
            env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")}
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.forkserver"], cwd=root, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            assert self.proc.stdout is not None
            ready = self.proc.stdout.readline()
            assert ready.startswith('{"ready"'), f"fork server did not start: {ready!r}"
        return self.proc

    def fork(self, args: list[str], env: dict[str, str], cwd: str, folder: str) -> int:
        """Fork `gpuradar ARGS` writing into `folder` (stdout, stderr, rc); its pid."""
        with self.lock:
            server = self._server()
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps({"args": args, "env": env, "cwd": cwd,
                                           "dir": folder}) + "\n")
            server.stdin.flush()
            return json.loads(server.stdout.readline())["pid"]

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


def gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
             env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    """`gpuradar ARGS` run to its end: exit code, stdout and stderr as text."""
    if REAL_SUBPROCESS:
        return subprocess.run([sys.executable, "-m", "gpuradar", *args], capture_output=True,
                              text=True, env=_env(db_url, config, env), timeout=timeout)
    return _FORK_SERVER.run(list(args), _env(db_url, config, env), timeout)


def start_gpuradar(*args: str, db_url: str | None = None, config: Path | None = None,
                   env: dict[str, str] | None = None) -> subprocess.Popen:
    """`gpuradar` started in the background (its output read with `communicate`)."""
    return subprocess.Popen([sys.executable, "-m", "gpuradar", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(db_url, config, env))


def gpuradar_json(*args: str, **kwargs: Any) -> Any:
    proc = gpuradar(*args, "--json", **kwargs)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
