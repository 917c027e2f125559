"""`gpuradar healthcheck`: the real command in a subprocess against real HTTP servers on the
loopback, finding the port where `gpuradar run` would listen with the same configuration.
(The daemon itself answering it: tests/project/test_deploy.py and, in the image,
tests/project/test_image.py.)
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.clirun import gpuradar, write_config
from tests.helpers import free_port


class _Healthz(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        ok = self.path == "/healthz" and self.status == 200
        body = (b'{"status": "ok", "scheduler": "running"}' if ok else
                b'{"status": "unhealthy", "scheduler": "stuck (no heartbeat for 40s)"}')
        self.send_response(200 if ok else 503 if self.path == "/healthz" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body + b"\n")

    def log_message(self, *args) -> None:
        pass


@contextmanager
def _serve(address: str, status: int) -> Iterator[int]:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    handler = type("Handler", (_Healthz,), {"status": status})
    server_class = type("Server", (http.server.ThreadingHTTPServer,),
                        {"address_family": family})
    server = server_class((address, 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def healthy() -> Iterator[int]:
    with _serve("127.0.0.1", 200) as port:
        yield port


@pytest.fixture
def unhealthy() -> Iterator[int]:
    with _serve("127.0.0.1", 503) as port:
        yield port


def test_the_config_files_metrics_port_is_asked(tmp_path, healthy):
    config = write_config(tmp_path / "config.yaml", metrics={"port": healthy,
                                                             "address": "0.0.0.0"})
    proc = gpuradar("healthcheck", config=config)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (f'healthy: http://127.0.0.1:{healthy}/healthz: 200 '
                                   '{"status": "ok", "scheduler": "running"}')
    # --config says the same as GPURADAR_CONFIG
    assert gpuradar("healthcheck", "--config", str(config)).returncode == 0


def test_the_environment_wins_over_the_config_file_as_for_run(tmp_path, healthy):
    config = write_config(tmp_path / "config.yaml", metrics={"port": free_port()})
    proc = gpuradar("healthcheck", config=config,
                    env={"GPURADAR_METRICS_PORT": str(healthy),
                         "GPURADAR_METRICS_ADDRESS": "127.0.0.1"})
    assert proc.returncode == 0, proc.stderr
    # and the options as `run --metrics-port` takes them
    proc = gpuradar("healthcheck", "--metrics-port", str(healthy), config=config)
    assert proc.returncode == 0, proc.stderr


def test_an_unhealthy_service_fails_with_its_answer(tmp_path, unhealthy):
    config = write_config(tmp_path / "config.yaml", metrics={"port": unhealthy})
    proc = gpuradar("healthcheck", config=config)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines == [f'unhealthy: http://127.0.0.1:{unhealthy}/healthz: 503 {{"status": '
                     '"unhealthy", "scheduler": "stuck (no heartbeat for 40s)"}'], proc.stderr
    assert not proc.stdout


def test_nothing_listening_is_one_line_and_exit_1(tmp_path):
    port = free_port()
    proc = gpuradar("healthcheck", "--timeout", "3", env={"GPURADAR_METRICS_PORT": str(port)})
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"unhealthy: http://127.0.0.1:{port}/healthz: no answer (")
    assert "refused" in line and "Traceback" not in proc.stderr


def test_ipv6_wildcard_is_asked_on_the_ipv6_loopback(tmp_path):
    with _serve("::1", 200) as port:
        proc = gpuradar("healthcheck", env={"GPURADAR_METRICS_ADDRESS": "::",
                                             "GPURADAR_METRICS_PORT": str(port)})
    assert proc.returncode == 0, proc.stderr
    assert f"http://[::1]:{port}/healthz" in proc.stdout


@pytest.mark.parametrize(("metrics", "message"), [
    ({"enabled": False}, "the metrics endpoint is disabled (metrics.enabled: false)"),
    ({"port": 70000}, "metrics.port: must be less than or equal to 65535, got 70000"),
    ({"prot": 9108}, "unknown key 'prot' in metrics — did you mean 'port'?"),
])
def test_a_configuration_without_an_endpoint_is_unhealthy_not_a_usage_error(
        tmp_path, metrics, message):
    """Docker reserves exit code 2: every failure is 1, with one line naming the cause."""
    config = write_config(tmp_path / "config.yaml", metrics=metrics)
    proc = gpuradar("healthcheck", config=config)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("unhealthy: ") and message in line, line


def test_a_missing_config_file_is_named(tmp_path):
    proc = gpuradar("healthcheck", config=tmp_path / "nope.yaml")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"unhealthy: config file {tmp_path / 'nope.yaml'} does not exist"
