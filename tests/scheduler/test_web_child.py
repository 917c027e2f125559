"""`gpuradar run` serves the page and the JSON API from a process of its own
(scheduler/web_child.py), so that page readers never share the interpreter with /metrics:
the page answers under `run`, from a child of the daemon; a child that dies is reported in
the log and /metrics and comes back on the same port; stopping the daemon, or killing it,
leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_helpers import (
    Daemon,
    copy_recordings,
    free_port,
    wait_for,
    write_config,
)

CHILD = "gpuradar.scheduler.web_child"


def children(pid: int) -> list[int]:
    """The page processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and CHILD.encode() in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, ended but not reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def lambda_daemon(tmp_path: Path, sqlite_template: Path, **kwargs: Any) -> Daemon:
    """`gpuradar run --replay` of lambda on a SQLite copy of the migrated template, its
    /metrics on a port of the test's own (`kwargs`: Daemon's, e.g. web_port or env)."""
    recordings = copy_recordings(tmp_path / "recordings", ["lambda"])
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": f"sqlite:///{tmp_path / 'gpuradar.db'}",
        "sources": {"lambda": {"interval": 600, "jitter": 0}},
        "daemon": {"watch_interval": 0}})
    port = free_port()
    return Daemon(tmp_path, config, "--replay", str(recordings), "--metrics-port", str(port),
                  metrics_port=port, **kwargs)


@pytest.fixture
def daemon(tmp_path, sqlite_template):
    """`gpuradar run --replay` of lambda with its page on a port of the test's own."""
    d = lambda_daemon(tmp_path, sqlite_template, web_port=free_port())
    try:
        d.wait_ready()
        d.wait_metric("gpuradar_crawls_total", 1, source="lambda", status="ok")
        yield d
    finally:
        d.cleanup()
        for pid in children(d.proc.pid):
            os.kill(pid, signal.SIGKILL)


def test_the_page_is_served_by_a_child_that_comes_back_when_it_dies(daemon):
    """The page and the API answer under `run` from one child process of the daemon (at a
    lower priority); killed,
    the child is logged and counted, and a new one answers on the same port; SIGTERM to the
    daemon stops the child too (exit 0, no process left)."""
    status, page = daemon.page("/")
    assert status == 200 and '<table id="cheapest">' in page and "lambda" in page
    status, body = daemon.page("/api/v1/offers?source=lambda")
    assert status == 200 and json.loads(body)["count"] > 0
    [first] = children(daemon.proc.pid)
    # readers that keep the cores busy yield to the daemon's work
    assert niceness(first) == min(19, niceness(daemon.proc.pid) + 5)
    assert daemon.value("gpuradar_web_up") == 1
    assert daemon.value("gpuradar_web_restarts_total") == 0

    os.kill(first, signal.SIGKILL)
    daemon.wait_metric("gpuradar_web_restarts_total", 1)
    wait_for(lambda: children(daemon.proc.pid) not in ([], [first]), 30,
             "a new page process", every=0.1, on_fail=daemon.tail)
    [second] = children(daemon.proc.pid)
    assert second != first and not alive(first)
    assert f"the web page's process (pid {first}) was killed by SIGKILL" in daemon.logs()
    status, page = daemon.page("/")  # the same port: queued while it starts
    assert status == 200 and '<table id="cheapest">' in page
    assert daemon.value("gpuradar_web_up") == 1

    assert daemon.stop() == 0
    wait_for(lambda: not alive(second), 10, "the page process to end", every=0.05)
    assert "Traceback" not in daemon.logs() and "Fatal Python error" not in daemon.logs()


def test_a_daemon_killed_with_sigkill_leaves_no_page_process(daemon):
    """The daemon gets no chance to stop its child: the child sees its stdin end and stops."""
    status, _ = daemon.page("/api/v1/offers")
    assert status == 200
    [child] = children(daemon.proc.pid)
    daemon.kill9()
    wait_for(lambda: not alive(child), 15, "the page process to end", every=0.05)


def test_without_the_page_there_is_no_child(tmp_path, sqlite_template):
    """GPURADAR_WEB_ENABLED=false (web.enabled: false) starts no page process, and /metrics
    says the page is not up."""
    d = lambda_daemon(tmp_path, sqlite_template, env={"GPURADAR_WEB_ENABLED": "False"})
    try:
        d.wait_ready()
        assert children(d.proc.pid) == []
        assert d.value("gpuradar_web_up") == 0
        assert "web page disabled" in d.logs()
    finally:
        assert d.stop() == 0


def test_a_taken_web_port_is_one_line_and_exit_2(tmp_path, sqlite_template):
    """Another program on web.port: the daemon says which address and what to set, in one
    line, and exits 2 before starting anything (no page process)."""
    import socket

    recordings = copy_recordings(tmp_path / "recordings", ["lambda"])
    shutil.copy(sqlite_template, tmp_path / "gpuradar.db")
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": f"sqlite:///{tmp_path / 'gpuradar.db'}",
        "sources": {"lambda": {"interval": 600, "jitter": 0}}})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        web_port = taken.getsockname()[1]
        port = free_port()
        d = Daemon(tmp_path, config, "--replay", str(recordings), "--metrics-port",
                   str(port), metrics_port=port, web_port=web_port)
        try:
            assert d.proc.wait(60) == 2
        finally:
            d.cleanup()
    errors = [line for line in d.logs().splitlines() if "ERROR" in line]
    assert errors == [f"{errors[0][:errors[0].index('ERROR')]}ERROR gpuradar.daemon: cannot "
                      f"start: cannot listen on 127.0.0.1:{web_port} for the web page and "
                      "API: Address already in use; set web.port / GPURADAR_WEB_PORT (or "
                      "web.enabled: false)"], d.logs()
    assert "Traceback" not in d.logs() and children(d.proc.pid) == []
