"""tests/clirun.py's in-process runs of the command: what a test asserts on (exit code,
stdout, stderr) is what a forked `gpuradar` gives, and a call leaves the test's process as
it found it — otherwise a test's outcome would depend on the calls before it."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys

import pytest

from tests.clirun import gpuradar, write_config
from tests.helpers import FIXTURES as FIX


def _process_state() -> tuple:
    """What a command may change process-wide and the test's process must keep."""
    root = logging.getLogger()
    return (dict(os.environ), list(sys.argv), sys.modules["__main__"], os.getcwd(),
            signal.getsignal(signal.SIGINT), list(root.handlers), root.level,
            logging.getLogger("scrapy").level, gc.get_threshold(), sys.stdout, sys.stderr)


def test_a_call_leaves_the_process_as_it_found_it(tmp_path):
    before = _process_state()
    proc = gpuradar("prices", "--database-url", f"sqlite:///{tmp_path}/missing.db",
                    env={"GPURADAR_LOG_LEVEL": "DEBUG", "COLUMNS": "40"})
    assert proc.returncode != 0 and "no database at" in proc.stderr
    assert _process_state() == before
    assert gc.get_freeze_count() == 0  # nothing the command froze stays out of collection


# Commands whose subject is their output: success, a usage error, a bad configuration, a
# missing database, a changed page, JSON, help (each exits differently).
CALLS = {
    "version": ("--version",),
    "sources json": ("sources", "--json"),
    "parse": ("parse", "azure", str(FIX / "azure/prices_page1.json")),
    "unknown option": ("prices", "--no-such-option"),
    "help": ("prices", "--help"),
    "missing database": ("prices", "--database-url", "sqlite:///{tmp}/none/missing.db"),
    "bad config": ("config", "check"),
}


@pytest.mark.parametrize("name", CALLS)
def test_in_process_answers_as_the_forked_command_does(name, tmp_path):
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in CALLS[name])
    config = write_config(tmp_path / "c.yaml", sources={"nosuchsource": {}})
    env = {"COLUMNS": "100"}
    here = gpuradar(*args, config=config, env=env)
    forked = gpuradar(*args, config=config, env=env, process=True)
    assert (here.returncode, here.stdout, here.stderr) == \
        (forked.returncode, forked.stdout, forked.stderr)
    assert "Traceback" not in here.stderr


def _reactor_state() -> tuple:
    """What a command's crawls could leave behind on Twisted's reactor and in the process:
    a started reactor, delayed calls, tasks on its loop, sockets, its thread pool, another
    resolver, a second Twisted log observer, Scrapy's root handler, threads."""
    import asyncio
    import threading

    from scrapy.utils.log import get_scrapy_root_handler
    from scrapy.utils.reactor import install_reactor, is_reactor_installed
    from twisted.python import log as twisted_log

    if not is_reactor_installed():  # the calls were forked (GPURADAR_TEST_FORK=1)
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    loop = reactor._asyncioEventloop
    return (reactor.running, reactor.getDelayedCalls(), asyncio.all_tasks(loop),
            set(reactor.getReaders()), set(reactor.getWriters()), reactor.threadpool,
            reactor.nameResolver, len(twisted_log.theLogPublisher.observers),
            get_scrapy_root_handler(), sorted(t.name for t in threading.enumerate()))


def test_crawls_run_again_and_again_in_one_process_and_leave_nothing_behind(
        tmp_path, provider_server):
    """`crawl` drives the reactor's loop without starting the reactor: it runs any number of
    times in one process (the test's own), over the network too (a name looked up in the
    reactor's thread pool), each run with its own results, and leaves nothing for the next:
    no delayed call, task, socket, thread, resolver, log handler or signal handler."""
    from tests.provider_server import serve_standard

    endpoints = {name: url.replace("127.0.0.1", "localhost")
                 for name, url in serve_standard(provider_server, ["azure"]).items()}
    cfg = write_config(tmp_path / "c.yaml", endpoints=endpoints,
                       scrapy={"DOWNLOAD_DELAY": 0})
    db_url = f"sqlite:///{tmp_path}/g.db"
    replay = ("crawl", "vastai", "--replay", str(FIX.parents[1] / "gpuradar" / "recordings"))
    first = gpuradar(*replay, "--json", db_url=db_url)
    assert first.returncode == 0, first.stderr
    state, left = _process_state(), _reactor_state()
    assert left[:3] == (False, [], set()) and left[5] is None  # nothing pending, no pool
    for args in (replay, ("crawl", "azure"), replay):
        proc = gpuradar(*args, "--json", config=cfg, db_url=db_url)
        assert proc.returncode == 0, proc.stderr
        [row] = json.loads(proc.stdout)
        assert (row["source"], row["status"]) == (args[1], "ok") and row["items"] > 0
        assert _process_state() == state and _reactor_state() == left
