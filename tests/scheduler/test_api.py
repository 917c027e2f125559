"""The read-only JSON API on the metrics port: a real server on the loopback, a real HTTP
client (urllib), every answer validated against the served OpenAPI document."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.clirun import gpuradar
from tests.storage.test_index import T0, crawl, item

REC = Path(__file__).parents[2] / "gpuradar" / "recordings"
SECRET = "sk-live-0123456789abcdef"


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET"
        ) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {}, method=method,
                                 data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()  # names case-insensitive, as in HTTP
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@contextlib.contextmanager
def served(engine_fn, redact=lambda text: text) -> Iterator[str]:
    """The page and API server (`gpuradar serve`'s, and `run`'s child's) on a free loopback
    port; its base URL. The data version is read again at every request: a test that
    writes between two requests sees the second answer the new data."""
    from gpuradar.scheduler.server import ReadServer, read_app

    server = ReadServer(read_app(engine_fn, redact, recheck=0), "127.0.0.1", 0).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The service's endpoint in-process over the shipped real captures, replayed."""
    from gpuradar.storage.db import open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('api') / 'db.sqlite'}"
    proc = gpuradar("crawl", "gcp", "lambda", "oci", "vastai", "--replay", str(REC),
                    db_url=url)
    assert proc.returncode == 0, proc.stderr
    engine = open_database(url)
    with served(lambda: engine) as base:
        yield base + "/api/v1"


@pytest.fixture(scope="module")
def spec(site):
    status, headers, body = get(f"{site}/openapi.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    doc = json.loads(body)
    from openapi_spec_validator import validate as validate_spec

    validate_spec(doc)  # a valid OpenAPI 3.1 document
    return doc


def check(spec, path: str, status: int, body: bytes) -> dict:
    """The answer, validated against the schema the document gives for path and status."""
    from openapi_schema_validator import OAS31Validator

    data = json.loads(body)
    response = spec["paths"][path]["get"]["responses"][str(status)]
    schema = response["content"]["application/json"]["schema"]
    OAS31Validator({**schema, "components": spec["components"]},
                   format_checker=OAS31Validator.FORMAT_CHECKER).validate(data)
    return data


ENDPOINTS = ["/offers", "/offers?gpu=H100&pricing=spot&available=true",
             "/offers?source=lambda,oci&region=*&max_price=5&min_gpus=8&limit=3",
             "/history?gpu=H100&days=36500", "/index", "/index?gpu=H100&pricing=on-demand",
             "/index/history?gpu=H100&days=1", "/index/closes?gpu=H100&days=3650",
             "/patterns?gpu=H100&days=36500", "/sources", "/crawls?source=vastai&limit=2"]


@pytest.mark.parametrize("query", ENDPOINTS)
def test_every_endpoint_answers_and_matches_its_document(site, spec, query):
    status, headers, body = get(site + query)
    assert status == 200, body
    assert headers["ETag"].startswith('"') and headers["Cache-Control"] == "no-cache"
    data = check(spec, query.split("?")[0], 200, body)
    assert data["count"] > 0


def test_offers_are_filtered_as_in_prices(site, spec):
    _, _, body = get(f"{site}/offers?gpu=H100&pricing=spot")
    offers = check(spec, "/offers", 200, body)["offers"]
    assert {(o["gpu"], o["pricing"], o["source"]) for o in offers} == {
        ("H100-SXM-80GB", "spot", "vastai")}
    prices = [o["price_per_gpu_usd"] for o in offers]
    assert prices == sorted(prices)
    _, _, body = get(f"{site}/offers?source=lambda&source=oci&min_gpus=8")
    offers = check(spec, "/offers", 200, body)["offers"]
    assert offers and {o["source"] for o in offers} == {"lambda", "oci"}
    assert min(o["gpu_count"] for o in offers) >= 8


def test_index_has_an_h100_figure_per_pricing(site, spec):
    _, _, body = get(f"{site}/index?gpu=H100-SXM-80GB")
    figures = check(spec, "/index", 200, body)["index"]
    by_pricing = {f["pricing"]: f for f in figures}
    assert sorted(by_pricing) == ["on_demand", "spot"]
    # in force: the newest capture's point (Vast.ai, 2026-08-22), one vote, thin; Lambda's
    # and OCI's captures are more than 2 days older (docs/index.md)
    od = by_pricing["on_demand"]
    assert (od["median"], od["status"], od["offers"], od["providers"]) == (
        1.386741, "thin", 2, 1)
    assert [(v["source"], v["price"]) for v in od["panel"]] == [("vastai", 1.386741)]


def test_history_of_one_offer(site, spec):
    _, _, body = get(f"{site}/offers?gpu=H100&pricing=spot&limit=1")
    (offer,) = json.loads(body)["offers"]
    _, _, body = get(f"{site}/history?offer_id={offer['id']}&days=36500")
    (span,) = check(spec, "/history", 200, body)["spans"]
    assert (span["offer_id"], span["open"]) == (offer["id"], True)
    assert span["price"] == pytest.approx(offer["price"], abs=1e-6)  # stored in micro-units


def test_etag_gives_304_until_the_answer_changes(site):
    status, headers, body = get(f"{site}/index")
    tag = headers["ETag"]
    status, headers, again = get(f"{site}/index", {"If-None-Match": tag})
    assert status == 304 and again == b"" and headers["ETag"] == tag
    status, _, _ = get(f"{site}/index", {"If-None-Match": '"something-else"'})
    assert status == 200
    # another answer has another tag
    _, other, _ = get(f"{site}/index?pricing=spot", {"If-None-Match": tag})
    assert other["ETag"] != tag


def test_offers_page_with_a_cursor_and_the_matching_total(site, spec):
    """`count` is the page, `total` every match: pages of 7 walk the whole list once, in
    order, and the last page says there is no next one."""
    _, _, body = get(f"{site}/offers?limit=0")
    everything = check(spec, "/offers", 200, body)
    assert everything["count"] == everything["total"] == len(everything["offers"]) > 14
    assert everything["next_cursor"] is None
    seen, cursor = [], None
    while True:
        query = "/offers?limit=7" + (f"&cursor={cursor}" if cursor else "")
        status, _, body = get(site + query)
        page = check(spec, "/offers", 200, body)
        assert page["total"] == everything["total"] and page["count"] <= 7
        seen += [o["id"] for o in page["offers"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [o["id"] for o in everything["offers"]]
    status, _, body = get(f"{site}/offers?cursor=not-a-cursor")
    assert status == 400 and b"cursor 'not-a-cursor' is not one this API gave" in body


def test_last_modified_and_if_modified_since(site):
    from email.utils import format_datetime, parsedate_to_datetime

    status, headers, _ = get(f"{site}/offers")
    changed = parsedate_to_datetime(headers["Last-Modified"])
    status, _, body = get(f"{site}/offers", {"If-Modified-Since": headers["Last-Modified"]})
    assert status == 304 and body == b""
    earlier = format_datetime(changed - timedelta(seconds=1), usegmt=True)
    assert get(f"{site}/offers", {"If-Modified-Since": earlier})[0] == 200
    # If-None-Match decides when both are given (RFC 9110)
    assert get(f"{site}/offers", {"If-Modified-Since": headers["Last-Modified"],
                                  "If-None-Match": '"other"'})[0] == 200
    assert get(f"{site}/offers", {"If-Modified-Since": "yesterday-ish"})[0] == 200


@pytest.mark.parametrize(("query", "message"), [
    ("/offers?gpu=H1OO", "unknown GPU 'H1OO'"),
    ("/offers?pricing=reserved", "pricing must be one of on-demand, spot, capacity-block, "
                                  "flex-start, calendar, not 'reserved'"),
    ("/offers?max_price=cheap", "max_price must be a number, not 'cheap'"),
    ("/offers?availble=true", "unknown parameter 'availble'"),
    ("/history?days=7", "give offer_id (one offer) or gpu"),
    ("/history?gpu=H100&since=last+tuesday", "since: not a time: 'last tuesday'"),
    ("/crawls?limit=-1", "limit must be a whole number, not '-1'"),
])
def test_a_bad_parameter_is_a_400_naming_it(site, spec, query, message):
    status, _, body = get(site + query)
    assert status == 400
    assert message in check(spec, query.split("?")[0], 400, body)["error"]


def test_unknown_endpoint_and_writes_are_refused(site):
    status, _, body = get(f"{site}/prices")
    assert status == 404 and b"/api/v1/openapi.json" in body
    status, headers, _ = get(f"{site}/offers", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_cors_only_for_configured_origins(engine, site):
    """Off by default (the shared site has none configured); with metrics.cors_origins a
    page of that origin may read answers, their ETag and Last-Modified, preflight included."""
    from gpuradar.scheduler.server import ReadServer, read_app

    page = "https://dash.example.org"
    status, headers, _ = get(f"{site}/index", {"Origin": page})
    assert status == 200 and "Access-Control-Allow-Origin" not in headers
    server = ReadServer(read_app(lambda: engine, cors=[page]), "127.0.0.1", 0).start()
    base = f"{server.url}/api/v1"
    try:
        _, headers, _ = get(f"{base}/offers", {"Origin": page})
        assert headers["Access-Control-Allow-Origin"] == page and headers["Vary"] == "Origin"
        assert headers["Access-Control-Expose-Headers"] == "ETag, Last-Modified"
        _, headers, _ = get(f"{base}/offers", {"Origin": "https://elsewhere.example"})
        assert "Access-Control-Allow-Origin" not in headers
        status, headers, _ = get(f"{base}/offers", {
            "Origin": page, "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "if-none-match"}, method="OPTIONS")
        assert status == 204 and headers["Access-Control-Allow-Origin"] == page
        assert "If-None-Match" in headers["Access-Control-Allow-Headers"]
        status, _, _ = get(f"{base}/offers", {"Origin": page}, method="POST")
        assert status == 405
    finally:
        server.stop()


def test_no_secret_in_answers(engine):
    """A crawl error that quotes a configured secret reaches clients redacted."""
    from gpuradar.core.logs import Redactor

    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    crawl(engine, "azure", [], T0 + timedelta(hours=1), status="failed")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE crawl SET error = 'HTTP 401 for key={SECRET}' "
                             "WHERE status = 'failed'")
    redactor = Redactor()
    redactor.set_secrets([SECRET])
    with served(lambda: engine, redactor) as base:
        for path in ("/crawls", "/sources"):
            status, _, body = get(f"{base}/api/v1{path}")
            assert status == 200 and b"HTTP 401 for key=" in body
            assert SECRET.encode() not in body


def test_an_unreadable_database_is_a_503_on_the_api_and_the_page(tmp_path):
    import sqlalchemy

    (tmp_path / "not.db").write_text("a note, not a database\n" * 100)
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'not.db'}")
    with served(lambda: engine) as base:
        status, _, body = get(base + "/api/v1/offers")
        assert status == 503 and json.loads(body)["error"].startswith(
            "the database cannot be read: (sqlite3.DatabaseError) file is not a database")
        status, _, body = get(base + "/")
        assert status == 503 and body.decode().startswith(
            "the database cannot be read: (sqlite3.DatabaseError) file is not a database")
    engine.dispose()


def test_a_bug_in_a_handler_is_a_500_and_logged_not_blamed_on_the_database(caplog):
    with served(lambda: "not an engine") as base:  # reads fail as a bug would, not a database
        status, _, body = get(base + "/api/v1/offers")
        assert status == 500 and json.loads(body) == {
            "error": "internal error (AttributeError); the service's log has the details"}
        status, _, body = get(base + "/")
        assert status == 500 and body == (b"internal error (AttributeError); the service's "
                                          b"log has the details\n")
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage().split(": ")[0] for r in errors] == ["/api/v1/offers failed",
                                                               "the page failed"]
    assert all(r.exc_info for r in errors)  # the traceback is in the service's log
