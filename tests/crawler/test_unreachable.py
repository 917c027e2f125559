"""A provider that cannot be reached: one result per source naming the cause and the attempts
(said once: the crawl's table or JSON, not also a log line above it, issue #35),
no traceback, nothing closed, and a bounded wait. Real sockets on loopback stand in for the
network: a closed port (refused) and a server that accepts connections and never answers."""

from __future__ import annotations

import json

import pytest
from scrapy.settings import Settings

from tests.clirun import gpuradar, gpuradar_json, write_config
from tests.helpers import SilentServer, free_port
from tests.provider_server import serve_standard


@pytest.fixture
def blackhole():
    """A hung or firewalled provider: connections accepted, never a byte sent."""
    with SilentServer() as hole:
        yield hole


def crawl(tmp_path, endpoints: dict[str, str], *sources: str, db_url: str, **scrapy):
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints,
                       scrapy={"DOWNLOAD_DELAY": 0, **scrapy})
    proc = gpuradar("crawl", *sources, "--json", config=cfg, db_url=db_url)
    return cfg, proc, {r["source"]: r for r in json.loads(proc.stdout)}


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "WARNING" in line or "ERROR" in line]


def test_refused_connections_are_one_line_per_source(tmp_path, sqlite_url):
    closed = f"http://127.0.0.1:{free_port()}"
    endpoints = {"vastai.bundles": closed + "/api/v0/bundles/",
                 "lambda.pricing": closed + "/pricing"}
    _, proc, result = crawl(tmp_path, endpoints, "vastai", "lambda", db_url=sqlite_url)
    assert proc.returncode == 1  # a crawl failed
    host = closed.removeprefix("http://")
    for source in ("vastai", "lambda"):
        assert result[source]["status"] == "failed"
    # Each asks once and once more (Vast.ai sends its searches one at a time, and the next
    # one is not sent to a host found unreachable): every request sent counts.
    for source in ("vastai", "lambda"):
        assert result[source]["error"] == f"cannot reach {host} (connection refused, 2 attempts)"
    assert problem_lines(proc.stderr) == [], proc.stderr  # the result says it, once
    assert "Traceback" not in proc.stderr


def test_a_provider_that_never_answers_is_given_up(tmp_path, provider_server, sqlite_url,
                                                   blackhole):
    endpoints = serve_standard(provider_server, only=["fx", "azure"])
    cfg, proc, _ = crawl(tmp_path, endpoints, "fx", "azure", db_url=sqlite_url)
    assert proc.returncode == 0, proc.stderr
    before = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    endpoints["azure.prices"] = blackhole.base + "/api/retail/prices"
    _, proc, result = crawl(tmp_path, endpoints, "azure", db_url=sqlite_url,
                            GPURADAR_ANSWER_TIMEOUT=1)
    host = blackhole.base.removeprefix("http://")
    assert result["azure"]["status"] == "failed"
    assert result["azure"]["error"] == f"cannot reach {host} (no answer within 1 s, 2 attempts)"
    assert blackhole.accepted == 2
    assert problem_lines(proc.stderr) == [] and "Traceback" not in proc.stderr
    # Nothing was closed on account of the failed crawl.
    after = gpuradar_json("prices", "--source", "azure", config=cfg, db_url=sqlite_url)
    assert [o["id"] for o in after] == [o["id"] for o in before]


def test_attempts_count_every_request_sent_to_a_hung_host(tmp_path, sqlite_url, blackhole):
    """Vast.ai's first search, tried twice: a hung host is reported with the requests it
    swallowed (it was "1 attempt" after more than one)."""
    endpoints = {"vastai.bundles": blackhole.base + "/api/v0/bundles/"}
    _, proc, result = crawl(tmp_path, endpoints, "vastai", db_url=sqlite_url,
                            GPURADAR_ANSWER_TIMEOUT=1, GPURADAR_CONNECT_ATTEMPTS=2)
    host = blackhole.base.removeprefix("http://")
    assert blackhole.accepted == 2
    assert result["vastai"]["error"] == f"cannot reach {host} (no answer within 1 s, 2 attempts)"
    assert "Traceback" not in proc.stderr


def test_a_source_that_got_no_answer_tries_no_further_host(tmp_path, blackhole, sqlite_url):
    """Alibaba falls back from its pricing page to the price file on another host; when the
    source's budget is spent, that host is not tried at all."""
    closed = f"http://127.0.0.1:{free_port()}"
    endpoints = {"alibaba.discovery_china": blackhole.base + "/price/ecs/ecs-pricing/zh",
                 "alibaba.price_file_china": closed + "/aliyun/ecs-price-info/{version}/x.json"}
    _, proc, result = crawl(tmp_path, endpoints, "alibaba", db_url=sqlite_url,
                            GPURADAR_ANSWER_TIMEOUT=1, GPURADAR_UNREACHABLE_AFTER=1.5)
    error = result["alibaba"]["error"]
    assert result["alibaba"]["status"] == "failed"
    assert "(no answer within 1 s, 1 attempt)" in error  # a 2nd attempt would overrun
    assert f"{closed.removeprefix('http://')} (not tried: nothing answered in 1 s" in error
    assert blackhole.accepted == 1 and "Traceback" not in proc.stderr


def test_defaults_give_up_within_30_seconds():
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    answer = settings.getfloat("GPURADAR_ANSWER_TIMEOUT")
    worst_per_host = answer * settings.getint("GPURADAR_CONNECT_ATTEMPTS")
    assert answer > 0 and worst_per_host <= 30
    assert settings.getfloat("GPURADAR_UNREACHABLE_AFTER") <= 30
