"""`make test`'s step before the suite: compile the product and the libraries its
processes import to bytecode, both cores at once, where that was not done yet, then have
pytest rewrite the test files once.

uv's `--compile-bytecode` compiles every module of the environment, 13,800 files (15 s of
`make install-test`'s 26 s on the 2-core machine), most of which no test imports; left to
the suite, each worker would compile the libraries they all import at start. This compiles
the product's folders, the packages of the fork server's preload list (the libraries every
command and daemon imports) and those the test helpers and pytest import, once; what only
a few tests import (an SDK, pandas) is compiled by the process that first imports it.

pytest rewrites the asserts of every test file when it imports it and keeps the result
beside the bytecode; in a fresh clone each worker would rewrite all of them at start (5 s
of CPU each on the 2-core machine). This rewrites them once, with pytest's own functions (a
pytest without them is left to do it itself).
"""

from __future__ import annotations

import compileall
import importlib.util
import re
import sys
from pathlib import Path

from tests.forkserver import PRELOAD

TESTS = Path(__file__).resolve().parent
#: The product's folders (gpuradar/ links the other four, which compileall does not follow).
PRODUCT = tuple(str(TESTS.parent / name)
                for name in ("gpuradar", "alerts", "crawler", "scheduler", "storage"))
#: Folders of those packages the suite's processes hardly import, a fifth of their files:
#: the packages' own tests and Pygments' lexers (a process that imports one compiles it).
NEVER_IMPORTED = re.compile(r"[/\\](tests?|lexers)[/\\]")

#: Imported by the test helpers and pytest's plugins in every worker, beside PRELOAD.
ALSO = ("_pytest", "pytest", "xdist", "execnet", "pluggy", "aiosmtpd",
        "playwright", "uvicorn", "a2wsgi", "prometheus_client", "apscheduler", "w3lib",
        "parsel", "lxml", "itemadapter", "markupsafe", "pygments", "click", "annotated_types",
        "pydantic_core", "typing_extensions", "dateutil", "requests", "urllib3", "idna",
        "certifi", "charset_normalizer", "attr", "attrs", "zope", "cryptography", "OpenSSL",
        "service_identity", "hyperlink", "incremental", "automat", "constantly", "protego",
        "queuelib", "tldextract", "filelock", "defusedxml", "cssselect", "jmespath", "mako",
        "greenlet", "httptools", "uvloop", "h11", "anyio", "sniffio")


def package_dirs(names: tuple[str, ...]) -> list[str]:
    """The folder of each top-level package among `names` that is installed (the product's
    own among them, the editable install's)."""
    found: set[str] = set()
    for name in names:
        try:
            spec = importlib.util.find_spec(name.split(".")[0])
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found.update(spec.submodule_search_locations)
    return sorted(found)


def rewrite_test_files() -> None:
    """Each test file and conftest.py rewritten and written where pytest's workers look."""
    try:  # private, so looked up: another version of pytest rewrites its own way, at start
        from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc, get_cache_dir
    except ImportError:
        return
    for path in sorted(TESTS.rglob("*.py")):
        if path.name.startswith("test_") or path.name == "conftest.py":
            cache = get_cache_dir(path)
            cache.mkdir(exist_ok=True)
            source_hash, code = _rewrite_test(path, None)
            _write_pyc(_NoTrace(), code, source_hash,
                       cache / (path.name[:-3] + PYC_TAIL))


class _NoTrace:
    """pytest's assertion state, as far as writing a file uses it: a trace of failures,
    which only cost the workers a rewrite of their own."""

    @staticmethod
    def trace(message: str) -> None:
        pass


def main() -> int:
    folders = sorted({*PRODUCT, *package_dirs(PRELOAD + ALSO)})
    compiled = [compileall.compile_dir(d, quiet=1, workers=2, rx=NEVER_IMPORTED)
                for d in folders]  # every one, even after a failure
    rewrite_test_files()
    return 0 if all(compiled) else 1


if __name__ == "__main__":
    sys.exit(main())
