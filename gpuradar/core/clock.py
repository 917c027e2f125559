"""Time, passed in: the one place that reads the wall clock.

The daemon, the crawl writer, the alert engine, delivery and the market index take a
`Clock` instead of calling `datetime.now` themselves, so that a test can run them on a
`FakeClock` (no real sleeps, no timing-dependent assertions) and a replay can run them at
a capture's time. `SYSTEM` is the real clock every production caller defaults to.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["SYSTEM", "Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """What a component needs of time: the UTC wall clock, a monotonic reading for
    durations and deadlines, and a way to wait."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations and deadlines)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (a fake clock advances instead)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM: Clock = SystemClock()


class FakeClock:
    """A clock that moves only when told to: `advance()`, or `sleep()`, which advances
    instead of waiting and records what was asked (`slept`)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")
        self._monotonic = 1000.0
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move both readings forward; returns the new wall-clock time."""
        step = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if step < 0:
            raise ValueError("a clock does not go back")
        self._now += timedelta(seconds=step)
        self._monotonic += step
        return self._now
