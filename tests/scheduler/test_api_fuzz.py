"""Schemathesis against the JSON API's own OpenAPI document, every check on (`--checks
all`): no 5xx, no answer off its schema, nothing the document calls valid refused, nothing it
calls invalid accepted. Bounded and seeded, so it takes seconds and finds the same cases
each run; the rules over two parameters that the document states in prose are applied by
tests/scheduler/api_fuzz_hooks.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from tests.scheduler.test_api import served
from tests.storage.test_index import T0, crawl, item

ROOT = Path(__file__).parents[2]


def test_schemathesis_finds_no_failure(sqlite_url, tmp_path):
    from gpuradar.storage.db import open_database

    engine = open_database(sqlite_url)
    crawl(engine, "azure", [item("azure", "A", 2.0)], T0)
    crawl(engine, "azure", [item("azure", "A", 2.5)], T0 + timedelta(hours=1))
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.scheduler.api_fuzz_hooks",
           "PYTHONPATH": str(ROOT)}
    with served(lambda: engine) as base:
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "st"), "run", f"{base}/api/v1/openapi.json",
             "--checks", "all", "--max-examples", "10", "--seed", "49",
             "--phases", "examples,coverage,fuzzing", "--no-color"],
            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failures" not in proc.stdout
