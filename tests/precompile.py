"""`make test`'s step before the suite: compile to bytecode what the suite's processes
import, once, both cores at once, where that was not done yet.

uv's `--compile-bytecode` compiles every module of the environment, 13,800 files (15 s of
`make install-test`'s 26 s on the 2-core machine), most of which no test imports; left to
the suite, each worker would compile the libraries they all import at start, at the same
time. Compiling whole packages (the fork server's preload list, what pytest and the test
helpers import) compiled 2,700 files of which half were never imported. So this imports
instead, with bytecode written, in two processes at once: pytest collecting the suite
(every test module and what it imports at its top; pytest rewrites each test file for its
asserts once, not in every worker) and the fork server's preload list with the libraries
the workers import while testing (ALSO); and compiles the product's own folders whole.
What only a few tests import (an SDK, pandas) is compiled by the process that first
imports it.
"""

from __future__ import annotations

import compileall
import contextlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

from tests.forkserver import PRELOAD

TESTS = Path(__file__).resolve().parent
#: The product's folders (gpuradar/ links the other four, which compileall does not follow).
PRODUCT = tuple(str(TESTS.parent / name)
                for name in ("gpuradar", "alerts", "crawler", "scheduler", "storage"))
#: Imported by the test helpers and pytest's plugins in every worker, beside PRELOAD.
ALSO = ("xdist", "execnet", "aiosmtpd.controller", "playwright.sync_api", "uvicorn", "a2wsgi",
        "prometheus_client", "apscheduler.schedulers.background", "requests", "dateutil",
        "tests.clirun", "tests.daemon_helpers", "tests.provider_server")


def import_all() -> None:
    """Import PRELOAD and ALSO (an optional one missing is left out)."""
    for name in PRELOAD + ALSO:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def main() -> int:
    """0 whatever happened: this only saves time, and what failed here (a test module
    that does not import, a syntax error) the suite reports in full; a line says so."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}  # empty: bytecode written
    quiet = {"cwd": str(TESTS.parent), "env": env, "stdout": subprocess.DEVNULL,
             "stderr": subprocess.DEVNULL}
    collect = subprocess.Popen([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                "-p", "no:cacheprovider"], **quiet)
    preload = subprocess.Popen([sys.executable, "-c",
                                "import tests.precompile as p; p.import_all()"], **quiet)
    compiled = all([compileall.compile_dir(d, quiet=2) for d in PRODUCT])
    failed = [what for what, ok in (("the product's compile", compiled),
                                    ("the preload's imports", preload.wait() == 0),
                                    ("pytest's collection", collect.wait() == 0)) if not ok]
    if failed:
        print(f"precompile: {', '.join(failed)} failed; the suite will say why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
