"""What a client can send the JSON API and the page: every bad query is a 400 naming its
parameter (an error the OpenAPI document describes), never a 503 that blames the database;
on SQLite and PostgreSQL alike, over a real loopback server."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta

import pytest

from tests.scheduler.test_api import check, get, served
from tests.storage.test_index import T0, crawl, item


@pytest.fixture(scope="module")
def site(module_db_url):
    """The endpoint over one stored offer, on each database; the tests using it only read."""
    from gpuradar.storage.db import open_database

    engine = open_database(module_db_url)
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    crawl(engine, "azure", [item("azure", "A", 2.5)], T0 + timedelta(hours=1))
    with served(lambda: engine) as base:
        yield base
    engine.dispose()


@pytest.fixture(scope="module")
def spec():
    from gpuradar.scheduler.http_api import openapi

    return json.loads(json.dumps(openapi(), default=str))


@pytest.mark.parametrize(("query", "message"), [
    # digits Python calls digits but int() cannot read
    ("/offers?limit=%C2%B2", "limit must be a whole number, not '²'"),
    ("/crawls?limit=%C2%B2", "limit must be a whole number, not '²'"),
    ("/history?offer_id=%C2%B2", "offer_id must be a whole number from 0 to 2147483647"),
    # an id past any stored one (PostgreSQL's integer, SQLite's 64 bits)
    ("/history?offer_id=99999999999999999999999", "offer_id must be a whole number from 0"),
    ("/history?offer_id=2147483648", "offer_id must be a whole number from 0 to 2147483647"),
    # a window reaching before the year 1
    ("/history?offer_id=1&days=inf", "days must be a finite number, not 'inf'"),
    ("/offers?min_gpus=inf", "min_gpus must be a finite number, not 'inf'"),
    ("/offers?max_price=1e400", "max_price must be a finite number, not '1e400'"),
    ("/history?offer_id=1&days=1e30", "days must be at most 36600, not '1e30'"),
    ("/history?offer_id=1&days=100000000", "days must be at most 36600, not '100000000'"),
    ("/history?offer_id=1&until=0001-01-01&days=1", "days '1' reaches before the year 1"),
    ("/index/history?days=1e9", "days must be at most 36600, not '1e9'"),
    ("/index/history?until=0010-01-01&days=36600", "days '36600' reaches before the year 1"),
    # control characters (PostgreSQL refuses NUL in text)
    ("/offers?source=%00", "source contains a control character"),
    ("/offers?region=a%0Ab", "region contains a control character"),
    ("/crawls?source=%00", "source contains a control character"),
    ("/history?gpu=H100&source=%07", "source contains a control character"),
])
def test_a_bad_value_is_a_400_naming_it(site, spec, query, message):
    status, headers, body = get(site + "/api/v1" + query)
    assert status == 400, body
    assert headers["Content-Type"] == "application/json"
    assert message in check(spec, query.split("?")[0], 400, body)["error"]


def test_the_largest_id_is_read_and_names_no_offer(site, spec):
    status, _, body = get(site + "/api/v1/history?offer_id=2147483647&days=1")
    assert status == 200, body
    assert check(spec, "/history", 200, body)["spans"] == []


def test_the_document_states_the_id_range(spec):
    (param,) = [p for p in spec["paths"]["/history"]["get"]["parameters"]
                if p["name"] == "offer_id"]
    assert param["schema"] == {"type": "integer", "minimum": 0, "maximum": 2147483647}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_a_write_method_on_the_api_is_a_json_405(site, method):
    status, headers, body = get(site + "/api/v1/offers", method=method)
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert json.loads(body) == {"error": "read-only: only GET and HEAD"}


@pytest.mark.parametrize("query", ["gpu=%00", "source=%00", "region=%00A"])
def test_the_page_ignores_a_filter_with_a_control_character(site, query):
    status, _, body = get(f"{site}/?{query}")
    assert status == 200, body
    key = query.split("=")[0]
    assert f"{key} contains a control character: ignored".encode() in body


@pytest.mark.parametrize("query", ["/offers?source=lamda", "/offers?source=azure,nosuch",
                                   "/history?gpu=H100&source=nosuch", "/crawls?source=nosuch"])
def test_an_unknown_source_is_a_400_not_an_empty_answer(site, spec, query):
    status, _, body = get(site + "/api/v1" + query)
    assert status == 400, body
    error = check(spec, query.split("?")[0], 400, body)["error"]
    assert error.startswith("unknown source '") and "; known: alibaba," in error


@pytest.mark.parametrize("query", ["/offers?source=azure", "/offers?source=aws",
                                   "/crawls?source=fx", "/crawls?source=azure"])
def test_a_known_or_stored_source_is_a_filter(site, spec, query):
    status, _, body = get(site + "/api/v1" + query)
    assert status == 200, body
    check(spec, query.split("?")[0], 200, body)


def test_a_removed_source_keeps_its_stored_offers_readable(engine, spec):
    crawl(engine, "oldcloud", [item("oldcloud", "O", 1.0)], T0)
    with served(lambda: engine) as base:
        status, _, body = get(base + "/api/v1/offers?source=oldcloud")
        assert status == 200 and [o["instance_type"] for o in json.loads(body)["offers"]] == [
            "O"]
        status, _, _ = get(base + "/api/v1/crawls?source=oldcloud")
        assert status == 200


def _raw(base: str, request: bytes) -> bytes:
    """Send bytes as they are (urllib would refuse or fix them); the answer's bytes."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(base)
    data = b""
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        # the server answers a refusal and closes at once, maybe before it has read all we
        # send: the send or our half-close may then fail, and the answer is still there
        with contextlib.suppress(OSError):
            sock.sendall(request)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    return data


@pytest.mark.parametrize(("request_bytes", "status", "error"), [
    (b"GET /api/v1/offers?gpu=" + b"A" * 70_000 + b" HTTP/1.1\r\n\r\n", 431,
     "Request Header Fields Too Large: request head larger than 65536 bytes"),
    (b"GET /api/v1/offers HTTP/1.1\r\nX-A: " + b"b" * 70_000 + b"\r\n\r\n", 431,
     "Request Header Fields Too Large: request head larger than 65536 bytes"),
    # many headers, none of them long
    (b"GET /api/v1/offers HTTP/1.1\r\n" + b"X-A: b\r\n" * 10_000 + b"\r\n", 431,
     "Request Header Fields Too Large: request head larger than 65536 bytes"),
    (b"GET /api/v1/offers /x HTTP/1.1\r\n\r\n", 400,
     "Bad Request: unreadable request: Expected HTTP/, RTSP/ or ICE/"),
    (b'GET /api/v1/offers HTTP/9"9\r\n\r\n', 400, "Bad Request: unreadable request: Expected dot"),
])
def test_a_request_refused_before_the_app_is_a_json_error(site, request_bytes, status, error):
    """The server refuses a head over 64 KiB or a request it cannot read with one line of
    JSON, as the API's own errors, and closes the connection."""
    head, _, body = _raw(site, request_bytes).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    assert int(status_line.split()[1]) == status
    assert "Content-Type: application/json" in lines and "Connection: close" in lines
    assert json.loads(body) == {"error": error}


def test_reservation_kinds_are_their_own_pricing_in_offers_and_index(engine, spec):
    """A Capacity Block is asked for by its word and never mixed into on-demand: not in the
    offers, not in the on-demand index figure; the OpenAPI document lists every kind."""
    crawl(engine, "aws", [item("aws", "p5.48xlarge", 4.9, pricing="capacity_block"),
                          item("aws", "p5.48xlarge", 6.9)], T0)
    assert {"capacity_block", "flex_start", "calendar"} <= set(
        spec["components"]["schemas"]["Offer"]["properties"]["pricing"]["enum"])
    with served(lambda: engine) as base:
        status, _, body = get(base + "/api/v1/offers?pricing=capacity-block")
        offers = check(spec, "/offers", 200, body)
        assert status == 200 and [o["pricing"] for o in offers["offers"]] == ["capacity_block"]
        status, _, body = get(base + "/api/v1/index?pricing=on-demand")
        figures = check(spec, "/index", 200, body)["index"]
        assert [(f["pricing"], f["median"]) for f in figures] == [("on_demand", 6.9)]
        status, _, body = get(base + "/api/v1/offers?pricing=reserved")
        assert status == 400
        assert ("pricing must be one of on-demand, spot, capacity-block, flex-start, calendar, "
                "not 'reserved'") in check(spec, "/offers", 400, body)["error"]


# -- round four (issue 49): bounded work, bounded echoes, the document states what is enforced
@pytest.mark.parametrize(("query", "message"), [
    # one value of 60,000 characters took 32 s of CPU; 1,000 region parameters 2.5 s
    ("/offers?region=" + "a" * 60_000, "region is 60,000 characters long; at most 256"),
    ("/offers?" + "&".join(["region=us-*"] * 1000), "more than 100 parameters"),
    ("/offers?" + "&".join(["region=us-*"] * 21), "region has 21 values; at most 20"),
    ("/offers?region=" + ",".join(["us-*"] * 21), "region has 21 values; at most 20"),
    # a limit of 5,001 digits was a 500 (int() refuses more than 4,300 digits)
    ("/offers?limit=" + "9" * 5001, "limit is 5,001 characters long; at most 256"),
    ("/history?offer_id=" + "9" * 250, "offer_id must be a whole number from 0 to 2147483647"),
    # empty values are refused, not taken as absent without the document saying so
    ("/offers?limit=", "limit is empty; give a value or leave limit out"),
    ("/offers?pricing=", "pricing is empty"),
    ("/history?gpu=H100&days=", "days is empty"),
    ("/offers?gpu=", "gpu is empty"),
    ("/offers?source=aws,", "source has an empty value"),
    ("/crawls?source=vastai,nosuch", "unknown source 'nosuch'"),
    ("/history?gpu=H100&days=40000", "days must be at most 36600, not '40000'"),
])
def test_a_request_past_a_bound_is_a_400_before_any_work(site, spec, query, message):
    status, _, body = get(site + "/api/v1" + query)
    assert status == 400, body
    error = check(spec, query.split("?")[0], 400, body)["error"]
    assert message in error and len(error) < 300


def test_a_long_limit_is_the_maximum_not_a_500(site, spec):
    status, _, body = get(site + "/api/v1/offers?limit=" + "9" * 250)
    assert status == 200, body
    assert check(spec, "/offers", 200, body)["count"] == 1


@pytest.mark.parametrize("query", ["/offers?pricing=" + "x" * 250,
                                   "/offers?vendor=" + "x" * 250,
                                   "/offers?gpu=" + "x" * 250,
                                   "/history?gpu=H100&since=" + "x" * 250])
def test_a_400_echoes_at_most_60_characters_of_a_value(site, spec, query):
    status, _, body = get(site + "/api/v1" + query)
    assert status == 400
    error = check(spec, query.split("?")[0], 400, body)["error"]
    assert "x" * 61 not in error and "(250 characters)" in error, error


@pytest.mark.parametrize("query", ["?source=azure&source=aws", "?source=azure,aws"])
def test_crawls_takes_several_sources_as_its_document_says(site, spec, query):
    status, _, body = get(site + "/api/v1/crawls" + query)
    assert status == 200, body
    crawls = check(spec, "/crawls", 200, body)["crawls"]
    assert [c["source"] for c in crawls] == ["azure", "azure"]


def test_available_without_a_value_means_true(site, spec):
    status, _, body = get(site + "/api/v1/offers?available")
    assert status == 200, body
    (param,) = [p for p in spec["paths"]["/offers"]["get"]["parameters"]
                if p["name"] == "available"]
    assert param["allowEmptyValue"] is True and "without a value: true" in param["description"]


def test_the_document_states_the_rules_the_server_enforces(spec):
    """Control characters, empty values, lengths and counts, the names the server knows,
    and the rules over two parameters (in the operation's summary)."""
    import re

    from gpuradar.core.sources import providers

    params = {p["name"]: p["schema"] for p in spec["paths"]["/offers"]["get"]["parameters"]}
    region = params["region"]["items"]
    assert params["region"]["maxItems"] == 20 and region["maxLength"] == 256
    assert region["minLength"] == 1
    assert not re.fullmatch(region["pattern"], "us\x07") and re.fullmatch(region["pattern"],
                                                                             "us-*")
    assert params["source"]["items"]["enum"] == list(providers())
    assert "H100" in params["gpu"]["enum"] and "TPU" in params["gpu"]["enum"]
    crawls = {p["name"]: p["schema"] for p in spec["paths"]["/crawls"]["get"]["parameters"]}
    assert crawls["source"]["type"] == "array"
    assert "give exactly one of the two" in spec["paths"]["/history"]["get"]["summary"]
    assert "at most 100 parameters" in spec["info"]["description"]


def test_hostile_requests_are_refused_without_work_and_health_answers(engine):
    """50 hostile requests at once to the page and API server: each is refused before the
    endpoint reads anything (the data version aside: one cheap query a second) or matches a
    glob, and the daemon's /healthz, asked among them on its own endpoint, answers ok."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from unittest import mock

    from prometheus_client import CollectorRegistry

    from gpuradar.core import units
    from gpuradar.scheduler import http_api
    from gpuradar.scheduler.health import Health, make_app
    from gpuradar.scheduler.health import serve as start
    from gpuradar.scheduler.server import ReadServer, read_app
    from tests.helpers import free_port

    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    reads: list[str] = []
    health = Health(lambda: engine, scheduler_running=lambda: True)
    httpd = start("127.0.0.1", free_port(), make_app(CollectorRegistry(), health, str))
    site = ReadServer(read_app(lambda: engine, str), "127.0.0.1", 0).start()
    base = site.url
    hostile = [f"{base}/api/v1/offers?region={'a' * 60_000}",
               f"{base}/api/v1/offers?" + "&".join(["region=a*b*c*d*e"] * 1000),
               f"{base}/api/v1/offers?limit={'9' * 5001}",
               f"{base}/api/v1/offers?region=" + ",".join(["*a*b*"] * 500)]
    barrier = threading.Barrier(51)

    def hit(url: str) -> int:
        barrier.wait()
        return get(url)[0]

    original = http_api.ROUTES["/offers"]
    try:
        with mock.patch.dict(http_api.ROUTES, {"/offers": (
                lambda e, p: reads.append("offers") or original[0](e, p), original[1])}), \
                mock.patch.object(units, "region_pattern",
                                  side_effect=AssertionError("a glob was compiled")), \
                ThreadPoolExecutor(51) as pool:
            refused = [pool.submit(hit, hostile[i % 4]) for i in range(50)]
            health_status, _, health_body = pool.submit(lambda: (barrier.wait(), get(
                f"http://127.0.0.1:{httpd.server_address[1]}/healthz"))[1]).result()
            statuses = [f.result() for f in refused]
    finally:
        site.stop()
        httpd.shutdown()
        httpd.server_close()
    assert set(statuses) == {400}
    assert reads == []  # no hostile request reached the endpoint's reads
    assert health_status == 200 and json.loads(health_body)["status"] == "ok"
