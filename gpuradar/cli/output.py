"""Rendering listings as a rich table, JSON or CSV (every listing offers all three).

Tables fit the terminal: columns with nothing in them are left out, a number is never
split or cut (its column keeps its full width), and long names are shortened with "…"
instead of wrapping. JSON and CSV carry every timestamp in one form (ISO 8601 with its UTC
offset) and counts as integers when they are whole.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from gpuradar.core.units import age, money  # noqa: F401  (re-exported for the commands)

console = Console()
if not console.is_terminal and not os.environ.get("COLUMNS"):
    console = Console(width=200)  # piped: do not squeeze tables into 80 columns
# Errors are one line whatever the terminal: never wrapped at the console width.
err_console = Console(stderr=True, soft_wrap=True)

# Cells that are one number (with its sign or unit): never wrapped, never shortened.
_NUMBER = re.compile(r"^[-+]?[$¥€£]?\d[\d,.]*\s*(%|[a-zA-Z]{1,3}|/h|GB)?$|^\d+x$")
# A timestamp some drivers hand back as text ('2026-11-30 11:59:18').
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?$")
_EMPTY = ("", "-", None)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def iso(value: datetime) -> str:
    """The one timestamp form of machine output: '2026-11-30T12:03:34+00:00'."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="seconds")


def _jsonable(value: Any, key: str = "") -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and _TIMESTAMP.match(value):
        try:
            return iso(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer() and _is_count(key):
        return int(value)
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, dict):
        return {k: _jsonable(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _is_count(key: str) -> bool:
    return key.endswith(("count", "_gpus")) or key in ("gpus", "vcpus", "items", "offers")


def machine_rows(data: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as JSON and CSV carry them."""
    return [{k: _jsonable(v, k) for k, v in r.items()} for r in data]


def dump_json(data: Any) -> None:
    """Any JSON document on stdout, with the timestamp and count rules of `emit`."""
    json.dump(_jsonable(data), sys.stdout, indent=1, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], fmt: Format,
         title: str | None = None, raw_rows: Sequence[dict[str, Any]] | None = None,
         caption: str | None = None, **fit: Any) -> None:
    """Print `rows`; `columns` are (key, header) for the table (`fit`: how it may shrink,
    see table()); JSON/CSV get `raw_rows` (machine values) when given, else the rows."""
    data = raw_rows if raw_rows is not None else rows
    if fmt is Format.json:
        json.dump(machine_rows(data), sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    if fmt is Format.csv:
        keys = list(data[0].keys()) if data else [k for k, _ in columns]
        writer = csv.DictWriter(sys.stdout, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for r in machine_rows(data):
            writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v
                             for k, v in r.items()})
        return
    console.print(table(rows, columns, title=title, caption=caption, **fit))


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
          title: str | None = None, caption: str | None = None,
          wrap: Sequence[str] = ("notes", "error"), width: int | None = None,
          squeeze: Sequence[str] = ("instance", "region", "notes", "error"),
          abbreviate: dict[str, dict[str, str]] | None = None,
          optional: Sequence[str] = ()) -> Table:
    """A rich table that fits `width` (the console's): see the module docstring.

    Columns named in `wrap` may wrap onto several lines; every other column stays on one
    line. When the table is too wide: values are abbreviated (`abbreviate`: column ->
    {value: short}), then `optional` columns are left out in that order, then the `squeeze`
    columns give up width, then the widest text columns; the caption says what was done."""
    room_total = width or console.width
    cells = [[str(r.get(k)) if r.get(k) is not None else "-" for k, _ in columns]
             for r in rows]
    keep = [i for i in range(len(columns))
            if not rows or any(row[i] not in _EMPTY for row in cells)]

    def natural(i: int) -> int:
        return max(len(v) for v in [columns[i][1], *(row[i] for row in cells)])

    def floor(i: int) -> int:
        return natural(i) if i in numeric else min(natural(i), max(len(columns[i][1]), 6))

    numeric = {i for i in keep if cells and all(_NUMBER.match(row[i]) or row[i] in _EMPTY
                                                for row in cells)}
    notes = [caption] if caption else []
    if sum(natural(i) + 2 for i in keep) > room_total and abbreviate:
        used = {}
        for i in keep:
            short = abbreviate.get(columns[i][0], {})
            for row in cells:
                if row[i] in short:
                    used[short[row[i]]] = row[i]
                    row[i] = short[row[i]]
        notes += [f"{a} = {v}" for a, v in used.items()]
    hidden = []
    for key in optional:
        if sum(floor(i) + 2 for i in keep) <= room_total:
            break
        drop = [i for i in keep if columns[i][0] == key]
        if drop:
            keep.remove(drop[0])
            hidden.append(columns[drop[0]][1])
    if hidden:
        notes.append(f"hidden to fit {room_total} columns: {', '.join(hidden)} "
                     "(widen the terminal or use --json)")
    widths = {i: natural(i) for i in keep}
    room = room_total - 2 * len(keep)  # two spaces around every column
    while sum(widths.values()) > room:
        shrinkable = [i for i in keep if i not in numeric and widths[i] > floor(i)]
        if not shrinkable:
            break
        first = [i for i in shrinkable if columns[i][0] in squeeze]
        widest = max(first or shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    out = Table(title=title, caption="; ".join(notes) or None, header_style="bold",
                box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                title_justify="left", caption_justify="left")
    for i in keep:
        key, header = columns[i]
        if i in numeric:
            out.add_column(header, justify="right", no_wrap=True, min_width=widths[i])
        elif key in wrap:
            out.add_column(header, overflow="fold", max_width=widths[i])
        else:
            out.add_column(header, no_wrap=True, overflow="ellipsis", width=widths[i])
    for row in cells:
        out.add_row(*[row[i] for i in keep])
    return out
