"""A crawl told to stop always ends (issue #46): the daemon's own crawl job, its scheduler and
a real crawl of a loopback provider that takes 0.5 s to answer, stopped the way a lost
leader lock stops it (`stand_by()`, then elected again at once) at 0, 10, 50, 100 and 150 ms
after the crawl started and while its spider opens. Each stopped crawl ends within its
bound, is recorded failed with why, and the source's next scheduled crawl runs. A crawl
stopped while the provider never answers its request (its close would wait for that answer)
is abandoned at its bound and recorded failed by the crawl service; the next crawl runs.

The daemon runs in one child process of its own (spawned, not forked): it installs Twisted's
asyncio reactor, which can happen once per process and must not leak into the test
worker's other files. Everything else is in that process: no CLI, no signals."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_helpers import only_sources, query, write_config
from tests.provider_server import Reply, serve_standard

pytestmark = pytest.mark.process  # a child with its own reactor

#: When each crawl is stopped: seconds after it started, or "opening" (from inside the
#: spider_opened signal, while its pipelines open).
STOPS: list[float | str | None] = [0.0, 0.01, 0.05, 0.1, 0.15, "opening"]
#: The longest a stopped crawl may take to end here: the answer in flight (0.5 s) it waits
#: for, with a wide margin for a loaded machine. A crawl that does not stop never ends.
BOUND = 5.0
WAIT_START = 20.0  # the longest the next scheduled crawl may take to start
HANG_BOUND = 1.0  # the stop bound of the crawl whose close hangs


def _drive(config: str, hang_flag: str, out: Any) -> None:
    """The child: run the daemon and stop each crawl at its moment; send the findings."""
    from gpuradar.scheduler.daemon import Daemon, RunOptions, install_asyncio_reactor

    install_asyncio_reactor()
    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerRunner
    from twisted.internet import reactor

    daemon = Daemon(RunOptions(config=Path(config), log_level="INFO"))
    daemon.prepare()
    started: asyncio.Queue = asyncio.Queue()
    real_crawl = AsyncCrawlerRunner.crawl
    # How each crawl in turn is stopped: seconds after it starts, "opening" (from inside
    # spider_opened), "in-flight" (once its request is with the downloader, the provider
    # never answering it), or None (left alone). Planned before the first starts: a crawl
    # never starts before its plan.
    plans: list[float | str | None] = [*STOPS, None, "in-flight", None]
    planned = list(reversed(plans))

    def crawl(runner: Any, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        """Scrapy's own, arming the next planned stop the instant the crawl starts."""
        when = planned.pop() if planned else None
        Path(hang_flag).unlink(missing_ok=True)
        if when == "opening":
            crawler.signals.connect(opened, signal=signals.spider_opened)
        elif when == "in-flight":
            Path(hang_flag).touch()  # the provider holds its answer for 30 s
            crawler.signals.connect(in_flight, signal=signals.request_reached_downloader)
        elif when is not None:
            asyncio.get_running_loop().call_later(when, lose_the_lock)
        started.put_nowait(when)
        return real_crawl(runner, crawler, *args, **kwargs)

    AsyncCrawlerRunner.crawl = crawl  # type: ignore[method-assign]

    def lose_the_lock() -> None:
        daemon.stand_by()
        daemon.lead()  # elected again at once: the source's crawls are scheduled again

    def opened(spider: Any) -> None:
        lose_the_lock()

    def in_flight(request: Any, spider: Any) -> None:
        daemon.state["vastai"].crawl.bound = HANG_BOUND  # a short wait for this test
        lose_the_lock()

    async def scenario() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        findings: list[dict[str, Any]] = []
        for when in plans:
            try:
                armed = await asyncio.wait_for(started.get(), WAIT_START)
            except TimeoutError:
                findings.append({"when": when, "started": False})
                break
            assert armed == when  # one plan per crawl, in order
            job = daemon.state["vastai"].job_task  # the job running this crawl
            t0 = loop.time()
            done, _ = await asyncio.wait({job}, timeout=BOUND + 30)
            findings.append({"when": when, "started": True, "ended": bool(done),
                             "seconds": loop.time() - t0})
            if not done:
                break
        return findings

    def main() -> None:
        asyncio.ensure_future(daemon.main())
        task = asyncio.ensure_future(scenario())

        def report(f: asyncio.Future) -> None:
            out.send(json.dumps(f.result() if not f.exception() else
                                {"error": repr(f.exception())}))
            out.close()
            import os

            os._exit(0)  # the daemon's own shutdown is not what is tested here

        task.add_done_callback(report)

    reactor.callWhenRunning(main)
    reactor.run(installSignalHandlers=False)


def test_a_crawl_stopped_at_any_moment_ends_is_recorded_and_the_next_one_runs(
        tmp_path, provider_server, sqlite_url):
    endpoints = serve_standard(provider_server, only=["vastai"])
    routes = dict(provider_server.routes)
    bundles = routes[("POST", "/api/v0/bundles/")]

    hang_flag = tmp_path / "hang"

    def slow(req: Any) -> Reply:  # the real answer, 0.5 s late: a crawl stopped mid-page
        reply = bundles(req)
        reply.delay = 30 if hang_flag.exists() else 0.5
        return reply

    provider_server.route("POST", "/api/v0/bundles/", slow)
    config = write_config(tmp_path / "gpuradar.yaml", {
        "database_url": sqlite_url, "endpoints": endpoints,
        "sources": only_sources({"vastai": {"interval": 1, "jitter": 0}}),
        "scrapy": {"DOWNLOAD_DELAY": 0},
        "daemon": {"backoff_max": 1, "watch_interval": 0},
        "metrics": {"enabled": False}, "web": {"enabled": False},
    })
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_drive, args=(str(config), str(hang_flag), theirs))
    started = time.monotonic()
    child.start()
    theirs.close()
    try:
        assert ours.poll(180), "the daemon child reported nothing"
        findings = json.loads(ours.recv())
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert "error" not in findings, findings
    # every crawl started (the one after each stop included), ended, the stopped ones within
    # their bound: the provider's 0.5 s, or the 1 s abandon of the one it never answers
    assert [f["when"] for f in findings] == [*STOPS, None, "in-flight", None], findings
    assert all(f["started"] and f["ended"] for f in findings), findings
    for f in findings:
        if f["when"] is not None:
            assert f["seconds"] < (HANG_BOUND if f["when"] == "in-flight" else 0) + BOUND, f
    crawls = query(sqlite_url, "SELECT status, error FROM crawl WHERE source = 'vastai' "
                   "ORDER BY id")
    stopped = "crawl stopped early: cancelled (not the leader any more)"
    abandoned = f"interrupted (not the leader any more; abandoned after {HANG_BOUND:g}s)"
    assert crawls == [*[("failed", stopped)] * len(STOPS), ("ok", ""),
                      ("failed", abandoned), ("ok", "")], crawls
    assert time.monotonic() - started < 180
