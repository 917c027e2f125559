"""gpuradar: GPU cloud price and availability tracker.

`gpuradar.open(url)` gives a read-only, typed view of a store (gpuradar.api): offers,
history, the market index, sources and crawls. Imported lazily, so `import gpuradar` (and
`gpuradar --version`) stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `import gpuradar` imports nothing
if TYPE_CHECKING:
    from typing import Any

    from gpuradar.api import Store


def open(url: str | None = None) -> Store:  # noqa: A001 - gpuradar.open, like a file
    """A read-only view of the gpuradar database at `url` (default: the configured one)."""
    from gpuradar.api import open as open_store

    return open_store(url)


def __getattr__(name: str) -> Any:
    """The API's types (gpuradar.Offer, gpuradar.Store, ...) on first use."""
    if name in ("Store", "Offer", "Span", "SignalPoint", "IndexFigure", "IndexPoint", "Source",
                "Crawl"):
        from gpuradar import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpuradar' has no attribute {name!r}")
