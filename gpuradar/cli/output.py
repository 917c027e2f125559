"""Rendering listings as a rich table, JSON or CSV (every listing offers all three)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuradar.core.units import age, money  # noqa: F401  (re-exported for the commands)

console = Console()
if not console.is_terminal:  # piped: do not squeeze tables into 80 columns
    console = Console(width=200)
# Errors are one line whatever the terminal: never wrapped at the console width.
err_console = Console(stderr=True, soft_wrap=True)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set):
        return sorted(value)
    return value


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], fmt: Format,
         title: str | None = None, raw_rows: Sequence[dict[str, Any]] | None = None) -> None:
    """Print `rows`; `columns` are (key, header) for the table; JSON/CSV get `raw_rows`
    (machine values) when given, else the row dicts."""
    data = raw_rows if raw_rows is not None else rows
    if fmt is Format.json:
        json.dump([{k: _jsonable(v) for k, v in r.items()} for r in data], sys.stdout,
                  indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    if fmt is Format.csv:
        keys = list(data[0].keys()) if data else [k for k, _ in columns]
        writer = csv.DictWriter(sys.stdout, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for r in data:
            writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else _jsonable(v)
                             for k, v in r.items()})
        return
    table = Table(title=title, header_style="bold", show_lines=False)
    for _, header in columns:
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(*[str(r.get(k, "")) if r.get(k) is not None else "-" for k, _ in columns])
    console.print(table)
