"""Schemathesis hooks for tests/scheduler/test_api_fuzz.py: the rules over two parameters
that the OpenAPI document states in prose (OpenAPI cannot state them as a schema), so that
a case the document calls valid is one the server must accept.

Loaded by `st run` through SCHEMATHESIS_HOOKS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import schemathesis


def _when(text: Any) -> datetime | None:
    from gpuradar.core.units import parse_when

    return None if text is None else parse_when(str(text))


def _closes_within_bound(query: dict[str, Any]) -> bool:
    """/index/closes: at most MAX_CLOSES closes per model and pricing (a year of hours)."""
    from gpuradar.storage.index import CADENCES, MAX_CLOSES

    try:
        until = _when(query.get("until")) or datetime.now(UTC)
        since = _when(query.get("since")) or until - timedelta(days=float(query.get("days", 7)))
        step = CADENCES[str(query.get("cadence", "day"))]
    except (ValueError, TypeError, KeyError, OverflowError):
        return True
    return (until - since) / step <= MAX_CLOSES


def _window_is_possible(query: dict[str, Any]) -> bool:
    """`since` at most `until`, and the window (`days` before `until`) after the year 1; a
    value that cannot be read keeps the case: the server must refuse it (a 400)."""
    try:
        until = _when(query.get("until")) or datetime.now(UTC)
        since = _when(query.get("since"))
        days = float(query.get("days", 7))
    except (ValueError, TypeError):
        return True
    if since is None:
        try:
            since = until - timedelta(days=days)
        except (OverflowError, ValueError):
            return False
    return since <= until


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    path = case.operation.path
    query = case.query or {}
    if path in ("/history", "/index/history", "/index/closes"):
        if "since" in query and "days" in query:
            return False
        if not _window_is_possible(query):
            return False
        if path == "/index/closes" and not _closes_within_bound(query):
            return False
    if path == "/offers" and "cursor" in query:
        return False  # a cursor is one a page gave (next_cursor): an invented one is a 400
    return not (path == "/history" and ("offer_id" in query) == ("gpu" in query))
