"""`make test`'s step before the suite: compile the libraries its processes import to
bytecode, both cores at once, where that was not done yet.

uv's `--compile-bytecode` compiles every module of the environment, 13,800 files (15 s of
`make install-test`'s 26 s on the 2-core machine), most of which no test imports; left to
the suite, its four workers would compile the libraries they all import at start four
times over. This compiles the packages of the fork server's preload list (the libraries
every command and daemon imports) and those the test helpers and pytest's plugins import,
once (the Makefile compiles the product itself); what only a few tests import (an SDK,
pandas) is compiled by the process that first imports it.
"""

from __future__ import annotations

import compileall
import importlib.util
import sys

from tests.forkserver import PRELOAD

#: Imported by the test helpers and pytest's plugins in every worker, beside PRELOAD.
ALSO = ("_pytest", "pytest", "xdist", "execnet", "pluggy", "hypothesis", "aiosmtpd",
        "playwright", "uvicorn", "a2wsgi", "prometheus_client", "apscheduler", "w3lib",
        "parsel", "lxml", "itemadapter", "markupsafe", "pygments", "click", "annotated_types",
        "pydantic_core", "typing_extensions", "dateutil", "requests", "urllib3", "idna",
        "certifi", "charset_normalizer", "attr", "attrs", "zope", "cryptography", "OpenSSL",
        "service_identity", "hyperlink", "incremental", "automat", "constantly", "protego",
        "queuelib", "tldextract", "filelock", "defusedxml", "cssselect", "jmespath", "mako",
        "greenlet", "httptools", "uvloop", "h11", "anyio", "sniffio")


def package_dirs(names: tuple[str, ...]) -> list[str]:
    """The folder of each top-level package among `names` that is installed."""
    found: set[str] = set()
    for name in names:
        try:
            spec = importlib.util.find_spec(name.split(".")[0])
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found.update(spec.submodule_search_locations)
    return sorted(found)


def main() -> int:
    compiled = [compileall.compile_dir(d, quiet=1, workers=2)
                for d in package_dirs(PRELOAD + ALSO)]  # every one, even after a failure
    return 0 if all(compiled) else 1


if __name__ == "__main__":
    sys.exit(main())
