"""Units every layer shares: durations, money, currency signs, ages, region globs, exit codes.

One home for each, so a GBP price prints the same from `prices`, an alert and `recommend`,
and "5m" means five minutes in a rule, a source interval and `db prune` alike.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gpuradar.core import sources
from gpuradar.core.clock import SYSTEM
from gpuradar.core.text import excerpt

# -- exit codes (documented in `gpuradar --help` and the README) -----------------------------
EXIT_OK = 0
EXIT_FAILED = 1  # a crawl failed, or a check found problems
EXIT_USAGE = 2  # bad usage, configuration or input
EXIT_DATABASE = 3  # the database cannot be used
EXIT_PARTIAL = 4  # a crawl finished but was partial (some requests failed): nothing closed
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C / SIGINT

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FAILED: "a crawl failed or a check found problems",
    EXIT_USAGE: "bad usage, configuration or input",
    EXIT_DATABASE: "the database cannot be used",
    EXIT_PARTIAL: "a crawl was partial (some requests failed; no offer was closed)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

# -- durations -------------------------------------------------------------------------------
_UNIT_SECONDS = {
    "ms": 0.001, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)?", re.IGNORECASE)
# Longest span any duration may have: far beyond any window the store keeps, far below
# what datetime arithmetic overflows on (so "999999d" is an error, not a crash later).
MAX_DURATION = timedelta(days=3660)


def parse_duration(value: Any, *, unit_required: bool = False) -> timedelta:
    """'300' / 300 (seconds), '90s', '5m', '1h30m', '2 weeks' -> timedelta.

    ValueError (with an example) for anything else, a negative value or more than
    MAX_DURATION; `unit_required` refuses a bare number (so '400' cannot mean seconds by
    accident where days were meant)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or value is None:
        raise ValueError(f"not a duration: {value!r} (write e.g. 90s, 5m, 1h, 2d)")
    elif isinstance(value, int | float):
        if unit_required:
            raise ValueError(f"{value!r}: give a number with a unit, e.g. 12h, 400d, 58w")
        seconds = float(value)
    else:
        text = str(value).strip()
        if unit_required and re.fullmatch(r"\d+(?:\.\d+)?", text):
            raise ValueError(f"{value!r}: give a number with a unit, e.g. 12h, 400d, 58w")
        pos, seconds, read = 0, 0.0, False  # read: a part was read (a bare number may not follow)
        for found in _PART.finditer(text):
            if text[pos:found.start()].strip():
                break
            unit = (found.group(2) or "").lower()
            if unit and unit not in _UNIT_SECONDS:
                break
            if not unit and (unit_required or read or found.end() != len(text)):
                break
            seconds += float(found.group(1)) * (_UNIT_SECONDS[unit] if unit else 1.0)
            pos, read = found.end(), True
        if not read or text[pos:].strip():
            hint = "12h, 400d, 58w" if unit_required else "90s, 5m, 1h30m, 2d"
            raise ValueError(f"not a duration: {value!r} (write e.g. {hint})")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"not a duration: {value!r} (must be zero or more, e.g. 90s, 5m, 1h)")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration {value!r} is longer than the limit of "
                         f"{MAX_DURATION.days} days")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta | float) -> str:
    """timedelta or seconds -> '1.5s', '5m', '1m30s', '2d' (the shortest exact form; one
    formatter for the CLI and the logs, so both say what `parse_duration` reads back)."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:.3g}s"
    out, rest = [], int(round(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out) or "0s"


def age(ts: datetime | None, now: datetime | None = None) -> str:
    """'3m', '2h', '5d': how old an observation is."""
    if ts is None:
        return "-"
    seconds = ((now or SYSTEM.now()) - ts).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"


# -- money -----------------------------------------------------------------------------------
# Sign written before an amount, by ISO 4217 code; and what each sign means when read.
CURRENCY_SIGN: dict[str, str] = {"USD": "$", "CNY": "¥", "EUR": "€", "GBP": "£"}
SIGN_CURRENCY: dict[str, str] = {"$": "USD", "¥": "CNY", "￥": "CNY", "€": "EUR", "£": "GBP"}


def money(value: float | None, currency: str = "USD") -> str:
    """'$2.9800', '¥1.8840', '£0.0049', '$55.04', '12.50 CHF': the one money format of every
    view (README): 4 decimals below 10, 2 from 10 on, rounded half up on the value as written
    (a float's binary error would show 1.70115 as 1.7011 in one view and 1.7012 in another)."""
    if value is None:
        return "-"
    sign = CURRENCY_SIGN.get(currency)
    amount = Decimal(repr(float(value))).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
    if abs(amount) >= 10:  # after rounding: 9.99996 is $10.00, not $10.0000
        amount = amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    text = f"{amount:,}"
    return f"{sign}{text}" if sign else f"{text} {currency}"


#: Region words meaning "in mainland China" (by each provider's declaration), not a glob.
MAINLAND_ALIASES = frozenset({"mainland", "china", "cn-mainland"})
#: The region of an offer whose price holds in every region of its provider and whose place
#: is not known (OCI's list price without credentials, Lambda's public price page): a region
#: glob matches it (the price is the one asked for wherever the glob points), an excluded
#: region never removes it (it holds elsewhere too), and `mainland` matches it only when
#: the provider declares "global" a mainland region (none does).
EVERYWHERE = "global"


# -- region globs ----------------------------------------------------------------------------
def region_pattern(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One compiled, case-insensitive matcher for shell-style globs ('us-*', 'eu-west-?');
    None when there are no patterns (anything matches)."""
    pats = [p.lower() for p in patterns if p]
    if not pats:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in pats))


@functools.lru_cache(maxsize=64)
def _cached_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """region_pattern, compiled once per filter rather than once per offer it is tried on."""
    return region_pattern(patterns)


def region_matches(region: str, zone: str, patterns: Iterable[str], source: str = "",
                   *, excluding: bool = False) -> bool:
    """True when a glob matches the offer's region or its zone (no patterns: True).
    `excluding`: the patterns say where the offer must not be (`not region ...`), which a
    price that holds everywhere (EVERYWHERE) never is.

    One meaning everywhere (prices, rules, recommend): a pattern is a plain glob on the
    provider's own codes, except the alias `mainland` (also `china`, `cn-mainland`), which
    means "runs in mainland China" as the offer's provider declares it (needs `source`)."""
    pats = [p for p in patterns if p]
    if not pats:
        return True
    if source and any(p.lower() in MAINLAND_ALIASES for p in pats) \
            and sources.is_mainland(source, region):
        return True
    if region == EVERYWHERE and not zone:  # a price that holds everywhere: see EVERYWHERE
        return not excluding and any(p.lower() not in MAINLAND_ALIASES for p in pats)
    matcher = _cached_pattern(tuple(p for p in pats if p.lower() not in MAINLAND_ALIASES))
    return bool(matcher and (matcher.match(region.lower())
                             or (zone and matcher.match(zone.lower()))))


# -- points in time --------------------------------------------------------------------------
_BEFORE_NOW = {"now": timedelta(0), "yesterday": timedelta(days=1)}  # words parse_when reads


def parse_when(value: str, now: datetime | None = None) -> datetime:
    """An instant from what people type: 'now', 'yesterday' (this time yesterday), a
    duration ago ('2d', '90m', '3h ago'), or an ISO date / date and time ('2026-08-22' is
    its midnight, '2026-08-22 18:00'; with or without offset, naive means UTC).

    ValueError with examples for anything else."""
    now = now or SYSTEM.now()
    text = (value or "").strip()
    low = text.lower()
    if low in _BEFORE_NOW:
        return now - _BEFORE_NOW[low]
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            return now - parse_duration(low.removesuffix(" ago"), unit_required=True)
        except ValueError:
            raise ValueError(f"not a time: {excerpt(value)} (write e.g. yesterday, 2d, "
                             "2026-08-22, '2026-08-22 18:00')") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def utc_text(value: datetime) -> str:
    """The one text form of a time in machine output (`--json`, `--csv`), the JSON API and
    exports: ISO 8601 in UTC with `Z`, microseconds only when there are some
    ('2026-11-30T12:03:34Z'). A naive time is UTC (SQLite stores no offset)."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
