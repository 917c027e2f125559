"""pytest plugin of the coverage run in `mutation/run.py`: coverage in the subprocesses a test
starts (the CLI tests run gpuradar) records that test's node id as its context.

coverage's `patch = subprocess` hands its settings to subprocesses in COVERAGE_PROCESS_CONFIG
(base64 JSON, read once when the parent started); the static context in it is set per test.
"""

from __future__ import annotations

import base64
import json
import os

import pytest

KEY = "COVERAGE_PROCESS_CONFIG"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if raw := os.environ.get(KEY):
        config = json.loads(base64.b64decode(raw))
        config["context"] = item.nodeid
        os.environ[KEY] = base64.b64encode(json.dumps(config).encode()).decode()
