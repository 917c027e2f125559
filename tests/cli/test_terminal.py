"""The command line in a real terminal: an 80 x 24 pseudo-terminal, as a user's shell gives
it (the other CLI tests pipe the output, or set COLUMNS)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(*args: str, columns: int = 80, env: dict[str, str] | None = None,
                timeout: float = 120) -> tuple[int, str]:
    """(exit code, what the terminal received, escapes removed) of `python -m gpuradar ARGS`
    with stdin, stdout and stderr on a pseudo-terminal of `columns` x 24."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("GPURADAR_") and k not in ("COLUMNS", "LINES")}
    full.update({"TERM": "xterm", "PYTHONPATH": str(ROOT),
                 "GPURADAR_DATA_DIR": str(Path(os.environ.get("TMPDIR", "/tmp"))
                                          / f"gpuradar-tty-{os.getpid()}")}, **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "gpuradar", *args], cwd=ROOT, env=full,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed: every process holding it has exited
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return code, ANSI.sub("", text)


def test_an_error_is_one_line_in_an_80_column_terminal(tmp_path):
    """README: "Errors are one line whatever the terminal (never wrapped ...)". In a
    terminal the error console broke a long error into lines of 80 (a path or URL in it
    could no longer be copied whole)."""
    missing = tmp_path.joinpath(*["a-directory-with-a-long-name"] * 3) / "config.yaml"
    code, out = in_terminal("config", "check", str(missing))
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.strip()]
    assert errors == [f"error: config file {missing} does not exist"], out


def test_a_usage_error_is_one_line_too(tmp_path):
    """A missing argument, an unknown option or command, a bad value: Typer printed a usage
    line, a hint and a boxed panel (five lines) where every other error is one."""
    cases = [(["notify", "preview"], "error: Missing argument 'rule'. (see `"),
             (["prices", "--gpux", "H100"], "error: No such option: --gpux (Possible options: "
                                           "--gpu, "),
             (["pricse"], "error: No such command 'pricse'. Did you mean 'prices'"),
             (["prices", "--limit", "x"], "error: Invalid value for '--limit': "),
             (["history", "--days"], "error: Option '--days' requires an argument.")]
    for args, start in cases:
        code, out = in_terminal(*args, env={"GPURADAR_DATABASE_URL":
                                            f"sqlite:///{tmp_path / 'db.sqlite'}"})
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 2, out
        assert len(lines) == 1 and lines[0].startswith(start), out
        assert lines[0].endswith(" --help`)"), out
    # a group without a command still shows its help
    code, out = in_terminal("config")
    assert "Write a starter configuration file, or check one." in out


def test_watch_shows_when_it_refreshed_above_a_table_taller_than_the_terminal(tmp_path):
    """`prices --watch` in a 24-row terminal: Live cut the table at the bottom ("...") and
    the line saying when it refreshed, printed under the table, was never seen."""
    from tests.clirun import gpuradar

    db = tmp_path / "demo.db"
    assert gpuradar("demo", "--keep", str(db)).returncode == 0
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")
           and k not in ("COLUMNS", "LINES")}
    env |= {"TERM": "xterm", "PYTHONPATH": str(ROOT), "GPURADAR_DATABASE_URL": f"sqlite:///{db}"}
    proc = subprocess.Popen([sys.executable, "-m", "gpuradar", "prices", "--watch", "1"],
                            cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"every 1s, last" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                seen += os.read(master, 65536)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        os.close(master)
    text = ANSI.sub("", seen.decode(errors="replace"))
    assert "every 1s, last" in text and "Ctrl-C stops" in text, text[-2000:]
