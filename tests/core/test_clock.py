"""The clock components are given: the fake one moves only when told to."""

from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.core.clock import SYSTEM, FakeClock


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    assert clock.now() == datetime(2026, 3, 1, 12, tzinfo=UTC)
    start = clock.monotonic()
    clock.sleep(90)
    assert clock.now() == datetime(2026, 3, 1, 12, 1, 30, tzinfo=UTC)
    assert clock.monotonic() - start == 90
    assert clock.slept == [90]
    assert clock.advance(timedelta(hours=1)) == datetime(2026, 3, 1, 13, 1, 30, tzinfo=UTC)


def test_fake_clock_refuses_naive_start_and_going_back() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2026, 3, 1))
    with pytest.raises(ValueError, match="does not go back"):
        FakeClock().advance(-1)


def test_system_clock_is_utc_and_monotonic() -> None:
    now = SYSTEM.now()
    assert now.utcoffset() == timedelta(0)
    first = SYSTEM.monotonic()
    assert SYSTEM.monotonic() >= first
