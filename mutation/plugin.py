"""pytest plugin of the coverage run in `mutation/run.py`: every test's node id in the
environment, so that coverage in the subprocesses it starts records whose they are."""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    os.environ["GPURADAR_MUTATION_TEST"] = item.nodeid
