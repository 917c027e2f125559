"""The read side's server (scheduler/server.py) over real HTTP on the loopback: HTTP/1.1
keep-alive, gzip, answers cached per data version and revalidated by ETag and
Last-Modified, a new crawl seen at once; and `gpuradar serve` as a user starts and stops it."""

from __future__ import annotations

import gzip
import http.client
import json
import signal
from datetime import timedelta
from urllib.parse import urlsplit

from sqlalchemy import event

from tests.clirun import REAL_SUBPROCESS, ForkedProcess, _env, start_gpuradar
from tests.clirun import gpuradar as gpuradar_cli
from tests.daemon_helpers import wait_for
from tests.helpers import free_port
from tests.scheduler.test_api import served
from tests.storage.test_index import T0, crawl, item


def connect(base: str) -> http.client.HTTPConnection:
    url = urlsplit(base)
    return http.client.HTTPConnection(url.hostname, url.port, timeout=10)


def ask(conn: http.client.HTTPConnection, path: str, **headers: str
        ) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
    reply = conn.getresponse()
    return reply.status, reply.headers, reply.read()


def test_one_connection_carries_many_answers_compressed_when_asked(engine):
    """HTTP/1.1 keep-alive: the page and API answers over one connection (one socket, the
    same local port); gzip when the client takes it, the same bytes once unpacked."""
    crawl(engine, "azure", [item("azure", f"A{n}", 2.0 + n / 10) for n in range(30)], T0)
    with served(lambda: engine) as base:
        conn = connect(base)
        status, headers, plain = ask(conn, "/api/v1/offers")
        sock = conn.sock
        assert status == 200 and headers["Content-Encoding"] is None
        status, headers, packed = ask(conn, "/api/v1/offers", Accept_Encoding="gzip, br")
        assert status == 200 and headers["Content-Encoding"] == "gzip"
        assert headers["Vary"] == "Accept-Encoding" and len(packed) < len(plain) / 3
        assert gzip.decompress(packed) == plain
        assert json.loads(plain)["count"] == 30
        status, headers, page = ask(conn, "/?gpu=H100", Accept_Encoding="gzip")
        assert status == 200 and b"A0" in gzip.decompress(page)
        assert conn.sock is sock  # never reconnected
        status, _, plain_again = ask(conn, "/api/v1/offers", Accept_Encoding="gzip;q=0")
        assert plain_again == plain
        conn.close()


def test_an_answer_is_drawn_once_per_data_version_and_a_crawl_renews_it(engine):
    """The second request of the page and of the API reads only the data version, not the
    offers; a new crawl is in the very next answer, with a new ETag and a later
    Last-Modified; the client's old ETag then gets the new answer, not a 304."""
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    statements: list[str] = []
    listen = lambda conn, cursor, sql, *rest: statements.append(sql)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    try:
        with served(lambda: engine) as base:
            conn = connect(base)
            for path in ("/api/v1/offers?gpu=H100", "/"):
                status, first, body = ask(conn, path)
                assert status == 200
                drawn = len(statements)
                status, again, same = ask(conn, path)
                assert status == 200 and same == body and again["ETag"] == first["ETag"]
                assert len(statements) - drawn <= 3  # the data version's queries alone
                assert not any("FROM offer" in sql for sql in statements[drawn:])
                status, _, empty = ask(conn, path, If_None_Match=first["ETag"])
                assert status == 304 and empty == b""
                status, _, _ = ask(conn, path, If_Modified_Since=first["Last-Modified"])
                assert status == 304

            crawl(engine, "lambda", [item("lambda", "L", 1.0)], T0 + timedelta(hours=1))
            status, renewed, body = ask(conn, "/api/v1/offers?gpu=H100",
                                        If_None_Match=first["ETag"])
            assert status == 200 and renewed["ETag"] != first["ETag"]
            assert [o["instance_type"] for o in json.loads(body)["offers"]] == ["L", "A"]
            status, page, html = ask(conn, "/")
            assert status == 200 and b"lambda" in html
            conn.close()
    finally:
        event.remove(engine, "before_cursor_execute", listen)


def test_head_and_the_gzipped_variant_have_their_own_length_and_tag(engine):
    """HEAD says the length GET sends, without a body; the gzipped bytes are another
    representation (their own ETag, answered 304 when named), and a 304 carries no
    representation metadata (RFC 9110 15.4.5: no Content-Type, no Content-Encoding)."""
    crawl(engine, "azure", [item("azure", f"A{n}", 2.0 + n / 10) for n in range(30)], T0)
    with served(lambda: engine) as base:
        conn = connect(base)
        status, plain, body = ask(conn, "/api/v1/offers")
        assert status == 200 and int(plain["Content-Length"]) == len(body)
        conn.request("HEAD", "/api/v1/offers")
        reply = conn.getresponse()
        assert reply.status == 200 and reply.read() == b""
        assert reply.headers["Content-Length"] == plain["Content-Length"]
        assert reply.headers["ETag"] == plain["ETag"]
        status, packed, zipped = ask(conn, "/api/v1/offers", Accept_Encoding="gzip")
        assert status == 200 and int(packed["Content-Length"]) == len(zipped) < len(body)
        assert packed["ETag"] == plain["ETag"][:-1] + '-gzip"'
        assert packed["Last-Modified"] == plain["Last-Modified"]
        status, again, empty = ask(conn, "/api/v1/offers", Accept_Encoding="gzip",
                                   If_None_Match=packed["ETag"])
        assert status == 304 and empty == b"" and again["ETag"] == packed["ETag"]
        assert again["Content-Encoding"] is None and again["Content-Type"] is None
        conn.close()


def test_an_error_is_not_cached_and_a_write_is_refused(engine):
    """A 400 stays a 400 (never stored as the answer), and POST is 405 as before."""
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    with served(lambda: engine) as base:
        conn = connect(base)
        for _ in range(2):
            status, headers, body = ask(conn, "/api/v1/offers?nope=1")
            assert status == 400 and "unknown parameter 'nope'" in json.loads(body)["error"]
        conn.request("POST", "/api/v1/offers", body=b"x")
        reply = conn.getresponse()
        assert reply.status == 405 and reply.headers["Allow"] == "GET, HEAD"
        reply.read()
        conn.close()


def test_readers_read_the_read_url_and_never_the_database(tmp_path, db_url, engine,
                                                          monkeypatch):
    """With read_database_url (GPURADAR_READ_DATABASE_URL) set, `gpuradar serve`, `export`
    and `gpuradar.open()` read there; the database_url, here a PostgreSQL server that does
    not exist, is never reached (it would fail them). On PostgreSQL the reader's URL is a
    second database of the same server, standing for a streaming replica."""
    import gpuradar

    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    leader = f"postgresql://gpuradar@127.0.0.1:{free_port()}/gpuradar"
    env = {"GPURADAR_READ_DATABASE_URL": db_url}
    proc = gpuradar_cli("export", str(tmp_path / "out"), "--format", "csv", db_url=leader,
                        env=env)
    assert proc.returncode == 0, proc.stderr
    assert "offers 1" in proc.stdout
    monkeypatch.setenv("GPURADAR_DATABASE_URL", leader)
    monkeypatch.setenv("GPURADAR_READ_DATABASE_URL", db_url)
    assert [o.instance_type for o in gpuradar.open().offers()] == ["A"]
    check_serve(tmp_path, leader, env)


def test_gpuradar_serve_answers_and_stops_on_sigterm(tmp_path, sqlite_url):
    """`gpuradar serve` over a database filled by a crawl: the page and the API answer on
    its port; SIGTERM ends it with 0."""
    from gpuradar.storage.db import open_database

    crawl(open_database(sqlite_url), "azure", [item("azure", "A", 2.0)], T0)
    check_serve(tmp_path, sqlite_url, {})


def check_serve(tmp_path, db_url: str, extra: dict[str, str]) -> None:
    """Start `gpuradar serve`, read the page and the offers (one, "A"), stop it: exit 0."""
    port = free_port()
    args = ["serve", "--port", str(port)]
    env = _env(db_url, None, extra)
    proc = (start_gpuradar(*args, db_url=db_url, env=extra) if REAL_SUBPROCESS
            else ForkedProcess(args, env, tmp_path, tmp_path / "serve"))
    try:
        def up() -> bool:
            assert proc.poll() is None, "gpuradar serve exited"
            try:
                connect(f"http://127.0.0.1:{port}").request("HEAD", "/")
                return True
            except OSError:
                return False

        wait_for(up, 30, "gpuradar serve's port", every=0.05)
        conn = connect(f"http://127.0.0.1:{port}")
        status, _, body = ask(conn, "/api/v1/offers")
        assert status == 200 and json.loads(body)["offers"][0]["instance_type"] == "A"
        status, _, page = ask(conn, "/")
        assert status == 200 and b'<table id="cheapest">' in page
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0


def test_gpuradar_serve_never_migrates_a_reader(tmp_path):
    """A database that is not there is one line and exit 3, and is not created: a reader
    never migrates nor writes (on a replica it could not)."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    proc = gpuradar_cli("serve", "--port", "0", db_url=url)
    assert proc.returncode == 3, proc.stderr
    assert "no database file at" in proc.stderr and "reading creates none" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_requests_are_not_logged_one_by_one(engine, caplog):
    """Many requests at once on one worker thread: each answered, and no log line per request
    (the server's access log and start-up chatter would be a line per request under load
    in the service's log; its errors still show)."""
    import logging
    from concurrent.futures import ThreadPoolExecutor

    from gpuradar.scheduler.server import ReadServer, read_app

    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    server = ReadServer(read_app(lambda: engine, str, threads=1), "127.0.0.1", 0).start()
    try:
        def one(_: int) -> int:
            conn = connect(server.url)
            try:
                return ask(conn, "/api/v1/offers")[0]
            finally:
                conn.close()

        with caplog.at_level(logging.DEBUG), ThreadPoolExecutor(16) as pool:
            assert list(pool.map(one, range(64))) == [200] * 64
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.name.startswith("uvicorn")], caplog.text


def test_a_cached_answer_is_sent_while_every_worker_draws(engine):
    """A cached answer (its plain and gzipped bytes, a 304, HEAD) is sent from the event
    loop: it does not wait for the one worker thread, held here by a draw that has not
    ended; that draw's answer then comes too."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from unittest import mock

    from gpuradar.scheduler import http_api
    from gpuradar.scheduler.server import ReadServer, read_app

    crawl(engine, "azure", [item("azure", f"A{n}", 2.0 + n / 10) for n in range(30)], T0)
    server = ReadServer(read_app(lambda: engine, str, recheck=3600, threads=1),
                        "127.0.0.1", 0).start()
    drawing, release = threading.Event(), threading.Event()
    original = http_api.ROUTES["/crawls"]

    def held(engine, params):
        drawing.set()
        release.wait(30)
        return original[0](engine, params)

    try:
        conn = connect(server.url)
        status, first, plain = ask(conn, "/api/v1/offers")
        assert status == 200
        status, packed_headers, packed = ask(conn, "/api/v1/offers", Accept_Encoding="gzip")
        assert status == 200 and gzip.decompress(packed) == plain
        with mock.patch.dict(http_api.ROUTES, {"/crawls": (held, original[1])}), \
                ThreadPoolExecutor(1) as pool:
            slow = pool.submit(lambda: ask(connect(server.url), "/api/v1/crawls"))
            assert drawing.wait(10)
            status, again, same = ask(conn, "/api/v1/offers")
            assert status == 200 and same == plain and again["ETag"] == first["ETag"]
            assert again["Content-Length"] == str(len(plain))
            status, zipped_headers, zipped = ask(conn, "/api/v1/offers", Accept_Encoding="gzip")
            assert status == 200 and zipped == packed
            assert zipped_headers["ETag"] == packed_headers["ETag"]
            assert zipped_headers["Content-Encoding"] == "gzip"
            status, not_modified, empty = ask(conn, "/api/v1/offers",
                                              If_None_Match=first["ETag"])
            assert status == 304 and empty == b"" and not_modified["Content-Type"] is None
            conn.request("HEAD", "/api/v1/offers")
            reply = conn.getresponse()
            assert reply.status == 200 and reply.read() == b""
            assert reply.headers["Content-Length"] == str(len(plain))
            assert not slow.done()  # the worker is still held: these came from the loop
            release.set()
            status, _, crawls = slow.result(10)
            assert status == 200 and json.loads(crawls)["crawls"][0]["source"] == "azure"
        conn.close()
    finally:
        release.set()
        server.stop()


def test_a_cached_answer_follows_the_data_once_recheck_has_passed(engine):
    """Answers sent from the cache read the data version again once `recheck` seconds have
    passed: a crawl is in the first answer after that, never later."""
    from gpuradar.scheduler.server import ReadApp, ReadCache, ReadServer, route

    now = [0.0]
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    cache = ReadCache(route(lambda: engine, str), lambda: engine, recheck=1.0,
                      clock=lambda: now[0])
    server = ReadServer(ReadApp(cache), "127.0.0.1", 0).start()
    try:
        conn = connect(server.url)
        status, first, body = ask(conn, "/api/v1/offers")
        assert status == 200 and json.loads(body)["count"] == 1
        crawl(engine, "lambda", [item("lambda", "L", 1.0)], T0 + timedelta(hours=1))
        now[0] = 0.5  # within recheck: the stored answer
        status, _, same = ask(conn, "/api/v1/offers")
        assert status == 200 and same == body
        now[0] = 1.0
        status, renewed, body = ask(conn, "/api/v1/offers", If_None_Match=first["ETag"])
        assert status == 200 and renewed["ETag"] != first["ETag"]
        assert [o["instance_type"] for o in json.loads(body)["offers"]] == ["L", "A"]
        conn.close()
    finally:
        server.stop()


def test_while_a_new_minute_s_page_is_drawn_readers_get_the_last_one(engine):
    """The page is drawn again each minute (its ages): the reader that asks first waits for
    the draw, the others meanwhile get the previous minute's page of the same data at once.
    After a crawl, no reader gets the former data that way: each waits for the new page."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from unittest import mock

    from gpuradar.scheduler import web
    from gpuradar.scheduler.server import ReadApp, ReadCache, ReadServer, route

    wall, clock = [600.0], [0.0]
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    cache = ReadCache(route(lambda: engine, str), lambda: engine, recheck=3600,
                      clock=lambda: clock[0], wall=lambda: wall[0])
    server = ReadServer(ReadApp(cache), "127.0.0.1", 0).start()
    original = web.page
    request = {"type": "http", "method": "GET", "path": "/", "query_string": b"",
               "headers": []}

    def held_draw(release: threading.Event) -> tuple[mock.Mock, threading.Event]:
        drawing = threading.Event()

        def held(*args, **kwargs):
            drawing.set()
            release.wait(30)
            return original(*args, **kwargs)

        return mock.patch.object(web, "page", held), drawing

    release = threading.Event()
    try:
        conn = connect(server.url)
        status, first, page = ask(conn, "/")
        assert status == 200
        wall[0] = 660.0  # the next minute
        patch, drawing = held_draw(release)
        with patch, ThreadPoolExecutor(1) as pool:
            slow = pool.submit(lambda: ask(connect(server.url), "/"))
            assert drawing.wait(10)
            status, meanwhile, same = ask(conn, "/")
            assert status == 200 and same == page and meanwhile["ETag"] == first["ETag"]
            assert not slow.done()
            release.set()
            status, _, drawn = slow.result(10)
            assert status == 200 and b'<table id="cheapest">' in drawn

        crawl(engine, "lambda", [item("lambda", "L", 1.0)], T0 + timedelta(hours=1))
        clock[0], wall[0] = 3600.0, 720.0  # the version read again, and a new minute
        release = threading.Event()
        patch, drawing = held_draw(release)
        with patch, ThreadPoolExecutor(1) as pool:
            slow = pool.submit(lambda: ask(connect(server.url), "/"))
            assert drawing.wait(10)
            # the page of this minute is being drawn, and the last minute's is of the former
            # data: no answer from the loop, the request waits for the draw
            key = cache.key("GET", "/", "", "", cache.fresh())
            assert cache.hit(request, {key}) == (None, key)
            release.set()
            status, _, drawn = slow.result(10)
            assert status == 200 and b"lambda" in drawn
        conn.close()
    finally:
        release.set()
        server.stop()


def test_a_connection_that_sends_no_request_is_closed(engine, monkeypatch):
    """A client that connects and says nothing does not hold a connection for ever: it is
    closed after the keep-alive time, as an idle connection between two requests is."""
    import socket

    from gpuradar.scheduler import server as read_server

    monkeypatch.setattr(read_server, "KEEP_ALIVE", 0.2)
    server = read_server.ReadServer(read_server.read_app(lambda: engine, str), "127.0.0.1",
                                    0).start()
    try:
        host, port = server.listening[0]
        with socket.create_connection((host, port), timeout=10) as sock:
            assert sock.recv(1) == b""  # closed by the server (a timeout here: left open)
    finally:
        server.stop()
