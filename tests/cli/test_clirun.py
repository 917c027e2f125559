"""tests/clirun.py's in-process runs of the command: what a test asserts on (exit code,
stdout, stderr) is what a forked `gpuradar` gives, and a call leaves the test's process as
it found it — otherwise a test's outcome would depend on the calls before it."""

from __future__ import annotations

import gc
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
