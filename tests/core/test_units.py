"""The shared units: one meaning of "5m", one way to print £0.49, one region glob."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuradar.core.units import (
    EXIT_CODES,
    MAX_DURATION,
    age,
    format_duration,
    money,
    parse_duration,
    parse_when,
    region_matches,
)


@pytest.mark.parametrize("text, expected", [
    ("300", timedelta(seconds=300)), (90, timedelta(seconds=90)), ("90s", timedelta(seconds=90)),
    ("5m", timedelta(minutes=5)), ("5 minutes", timedelta(minutes=5)),
    ("1h30m", timedelta(hours=1, minutes=30)), ("2 weeks", timedelta(weeks=2)),
    ("250ms", timedelta(milliseconds=250)), ("1.5h", timedelta(minutes=90)),
])
def test_durations_mean_the_same_everywhere(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["soon", "5 minutez", "-3", -1, True, None, "1h soon", "",
                                 "1h 30"])
def test_bad_durations_are_refused_with_an_example(bad):
    with pytest.raises(ValueError, match="e.g."):
        parse_duration(bad)


def test_a_duration_beyond_the_limit_is_refused_not_overflowed():
    # docs/alerts.md states the limit: 3660 days (ten years and then some) is the longest
    assert parse_duration("3660d") == MAX_DURATION == timedelta(days=3660)
    with pytest.raises(ValueError, match="longer than the limit of 3660 days"):
        parse_duration("3661d")
    with pytest.raises(ValueError, match=f"limit of {MAX_DURATION.days} days"):
        parse_duration("999999d")


def test_a_unit_can_be_required():
    with pytest.raises(ValueError, match="give a number with a unit"):
        parse_duration("400", unit_required=True)
    with pytest.raises(ValueError, match="give a number with a unit"):
        parse_duration(400, unit_required=True)
    assert parse_duration("400d", unit_required=True) == timedelta(days=400)


@pytest.mark.parametrize("seconds, text", [(90, "1m30s"), (3600, "1h"), (86400 * 2, "2d"),
                                           (0.25, "250ms"), (0, "0s"),
                                           (1.5, "1.5s"), (45, "45s")])
def test_format_duration_round_trips(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("value, currency, text", [
    (2.98, "USD", "$2.9800"), (1.884, "CNY", "¥1.8840"), (0.49, "GBP", "£0.4900"),
    (0.0049, "EUR", "€0.0049"), (55.04, "USD", "$55.04"), (1234.5, "USD", "$1,234.50"),
    (12.5, "CHF", "12.50 CHF"), (None, "USD", "-"), (2.5, "USD", "$2.5000"),
    (9.8765, "USD", "$9.8765"), (10.1234, "USD", "$10.12"),   # 4 decimals below 10, 2 above
    # #50 item 11: always 4 decimals below $10 ($0.13 stood beside $0.1298), rounded half
    # up on the value as written, not its binary float (1.70115 was $1.7011 in a chart's
    # title and $1.7012 on its axis; the index's p10 2.595975 was $2.596)
    (0.13, "USD", "$0.1300"), (1.0, "USD", "$1.0000"), (4.352, "USD", "$4.3520"),
    (1.70115, "USD", "$1.7012"), (2.595975, "USD", "$2.5960"), (9.99996, "USD", "$10.00"),
])
def test_money_prints_every_currency_the_same_way(value, currency, text):
    assert money(value, currency) == text


def test_age():
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert age(now - timedelta(seconds=42), now) == "42s"
    assert age(now - timedelta(minutes=3), now) == "3m"
    assert age(now - timedelta(hours=5), now) == "5h"
    assert age(now - timedelta(days=2, hours=1), now) == "2d"
    assert age(None, now) == "-"


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"), (86399, "23h"),
    (86400, "1d"), (-5, "0s")])
def test_age_changes_unit_exactly_at_each_boundary(seconds, shown):
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert age(now - timedelta(seconds=seconds), now) == shown


def test_region_globs_are_plain_globs_with_a_mainland_alias():
    assert region_matches("us-east-1", "", ["us-*"])
    assert region_matches("eastus", "", [])  # no pattern: anything
    assert not region_matches("eu-west-1", "", ["us-*"])
    assert region_matches("US-EAST-1", "", ["us-*"])  # provider codes are case-insensitive
    assert region_matches("us-west-2", "us-west-2b", ["*-2b"])  # zone matches too
    assert region_matches("cn-beijing", "", ["cn-*"])  # a glob, whatever the source
    assert region_matches("cn-beijing", "", ["mainland"], source="alibaba")
    assert not region_matches("cn-hongkong", "", ["mainland"], source="alibaba")
    assert region_matches("ap-guangzhou", "", ["mainland"], source="tencent")
    assert not region_matches("ap-guangzhou", "", ["mainland"])  # alias needs the source
    assert region_matches("us-east-1", "", ["mainland", "us-*"], source="aws")


def test_every_exit_code_is_documented():
    assert set(EXIT_CODES) == {0, 1, 2, 3, 4, 130}
    assert all(EXIT_CODES.values())


@pytest.mark.parametrize(("text", "seconds"), [
    ("2hr", 7200), ("2hrs", 7200), ("1 hour", 3600), ("3 hours", 10800), ("90m", 5400),
    ("30sec", 30), ("30 secs", 30), ("1 second", 1), ("45 seconds", 45),
    ("1 minute", 60), ("5 mins", 300), ("5min", 300), ("1 week", 604800), ("2w", 1209600),
    ("3d", 259200), ("1 day", 86400), ("3 days", 259200), ("2 weeks", 1209600),
    ("250ms", 0.25)])
def test_every_spelling_of_a_unit_means_that_unit(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_a_duration_over_a_minute_is_written_in_whole_seconds():
    assert format_duration(60.5) == "1m" and format_duration(59.5) == "59.5s"


def test_points_in_time_as_people_type_them():
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_when("now", now) == now
    assert parse_when("yesterday", now) == now - timedelta(days=1)
    assert parse_when("2d", now) == now - timedelta(days=2)
    assert parse_when("3h ago", now) == now - timedelta(hours=3)
    assert parse_when("2026-08-22", now) == datetime(2026, 8, 22, tzinfo=UTC)
    with pytest.raises(ValueError, match="not a time: 'soon' \\(write e.g. yesterday, 2d"):
        parse_when("soon", now)
