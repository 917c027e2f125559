"""Python's cyclic garbage collector, tuned in one place for the three kinds of work that
need it: a short command, a one-shot crawl and a rule evaluation.

The collector is one per process, so its settings are too: each tuning here sets them for
the span of its work and puts back what it found (a pause counts its holders: evaluations
may overlap in the daemon's threads). The figures that justify each are measured in
`python -m bench` and docs/benchmark.md, not here.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["PAUSE", "CollectorPause", "for_crawls", "for_short_command", "skip_at_exit"]


def for_short_command() -> None:
    """A short command's collector looks only at new objects: its start-up makes tens of
    thousands of tracked objects (SQLAlchemy, pydantic and Typer's classes, the
    configuration's models) that live until it exits, and the older generations would walk
    them again and again. Cycles among new objects are still collected; older ones wait
    for 1,000 young collections, which a short command does not reach."""
    threshold, _, _ = gc.get_threshold()
    gc.set_threshold(threshold, 1000, 1000)


def skip_at_exit() -> None:
    """No last collection when the interpreter exits (what it would free, the process's end
    frees): the caller has closed what only that collection would have closed."""
    gc.freeze()


@contextlib.contextmanager
def for_crawls() -> Iterator[None]:
    """A one-shot crawl: everything imported so far lives as long as the process, so it is
    frozen out of the collector's full passes; offers come and go by the thousand, so the
    young generation is collected less often. The thresholds are put back after."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


class CollectorPause:
    """Holds the collector off while any holder needs it (a rule evaluation allocates and
    frees hundreds of thousands of short-lived objects, which reference counting frees;
    the collector would meanwhile traverse every tracked object of the process). It resumes,
    as it was found, when the last holder is done; the few cycles left are collected then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._resume = False

    @property
    def holders(self) -> int:
        return self._holders

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._resume:
                    gc.enable()


#: The process's one collector, held off by its evaluations.
PAUSE = CollectorPause()
