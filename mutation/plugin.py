"""pytest plugin of the coverage run in `mutation/run.py`.

* Coverage in the subprocesses a test starts (the CLI tests run gpuradar) records that test's
  node id as its context: coverage's `patch = subprocess` hands its settings to subprocesses
  in COVERAGE_PROCESS_CONFIG (base64 JSON, read once when the parent started), and the static
  context in it is set per test.
* Each test's duration goes to MUTATION_DURATIONS (JSON), so that a mutant's tests run the
  quickest first: most mutants are killed by the first test that reaches them.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

KEY = "COVERAGE_PROCESS_CONFIG"
DURATIONS: dict[str, float] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if raw := os.environ.get(KEY):
        config = json.loads(base64.b64decode(raw))
        config["context"] = item.nodeid
        os.environ[KEY] = base64.b64encode(json.dumps(config).encode()).decode()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    DURATIONS[report.nodeid] = DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller has them all
        return
    if path := os.environ.get("MUTATION_DURATIONS"):
        Path(path).write_text(json.dumps(DURATIONS, indent=0, sort_keys=True))
