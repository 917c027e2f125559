"""Rendering listings as a table, JSON or CSV (every listing offers all three).

One renderer for every command's tables. Each column has a priority: 0 for what identifies
a row or is its price (source, instance, GPUs, prices), never left out and never cut; 1, 2,
... for the rest, left out highest first when the terminal is too narrow, and the table says
so (`+2 columns hidden (age, notes): --wide`). Nothing is ever shortened with "…": prose
columns wrap between words, a number stays whole with its unit, and a column of numbers is
right-aligned with one number of decimals. Output that is piped (no terminal, no COLUMNS)
is for machines: every column, no truncation, no wrapping. JSON and CSV carry every
timestamp in one form (ISO 8601 in UTC with Z, core.units.utc_text) and counts as integers
when whole.
"""


import csv
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, datetime
from enum import StrEnum
from typing import Any, TypedDict

from rich import box
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from gpuradar.core.clock import SYSTEM
from gpuradar.core.units import age, money  # noqa: F401  (re-exported for the commands)

# Width of prose printed into a pipe (tables there take the width they need).
PIPED_WIDTH = 200


class _Console(Console):
    """A console whose width is read when it prints, not when it was made: COLUMNS when set
    (tests, scripts), the terminal's, or PIPED_WIDTH into a pipe; `wider()` lifts it for one
    table that must not be squeezed (--wide, piped)."""

    _forced: int | None = None

    @property
    def size(self) -> ConsoleDimensions:
        columns = os.environ.get("COLUMNS", "")
        base = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._forced:
            return ConsoleDimensions(self._forced, base.height)
        if columns.isdigit():
            return ConsoleDimensions(int(columns), base.height)
        if not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, base.height)
        return base

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def on_broken_pipe(self) -> None:
        """The program reading the output closed it (`gpuradar demo | head -3`): it had what
        it wanted, so the command ends quietly with exit 0, as when the output fitted into
        the pipe before (rich exits 1)."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to write, not even at exit
        raise SystemExit(0)

    @contextmanager
    def wider(self, width: int) -> Iterator[None]:
        self._forced = max(width, self.width)
        try:
            yield
        finally:
            self._forced = None


# How each console is made (one place: a test that runs the command in its own process
# makes them afresh from this). emoji=False: a text is printed as it is (a provider's note
# with ':fire:' in it stays so), and rich's emoji table (a measurable share of `gpuradar
# prices`, issue #54) is not loaded. Errors and warnings: one line whatever the terminal (it
# shows a long one over several rows, but a path or URL in it stays whole when copied), as
# into a pipe or a log file. The progress line is redrawn in place (rich Live): wrapped to
# the terminal, since Live must know how many rows it takes to draw over them.
class ConsoleOptions(TypedDict, total=False):
    stderr: bool
    soft_wrap: bool
    emoji: bool


CONSOLES: dict[str, ConsoleOptions] = {
    "console": {"emoji": False},
    "err_console": {"stderr": True, "soft_wrap": True, "emoji": False},
    "progress_console": {"stderr": True, "emoji": False},
}
console = _Console(**CONSOLES["console"])
err_console = _Console(**CONSOLES["err_console"])
progress_console = _Console(**CONSOLES["progress_console"])

# A cell that is one number with its sign or unit: '$1.3867', '¥14.00', '79.6 GB', '8x',
# '3d', '12.50 CHF', '40%'. Its parts, so that a column can share one number of decimals.
_NUMBER = re.compile(r"^(?P<pre>[-+]?[$¥€£]?)(?P<int>\d[\d,]*)(?:\.(?P<dec>\d+))?"
                     r"(?P<post>\s*(?:%|[a-zA-Z]{1,3}|/h|/GPU-h|x))?$")
# A number and its unit are one word when a cell wraps ('3.3 GB' never splits).
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:[KMGT]i?B|h|min|s|d|%|[A-Z]{3})\b)")
# ... and a GPU count its model ('8x H100-SXM-80GB').
_COUNT_SPACE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?x) ")
_GLUE = "\u00a0"  # textwrap does not break at a no-break space; rich never sees it
# A timestamp some drivers hand back as text ('2026-11-30 11:59:18').
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?$")
_EMPTY = ("", "-", None)
# Prose columns: they wrap between words rather than widen the table.
PROSE = frozenset({"notes", "note", "error", "last_error", "why", "rule", "read_as", "where",
                   "detail", "fix", "origin", "uncatalogued", "dropped", "credentials",
                   "options", "urls", "unknown_gpus"})
GAP = 2  # spaces between two columns (1 in a table that would otherwise leave one out)
# Values shortened (and said so in the caption) before any column is left out.
ABBREVIATE = {"pricing": {"on-demand": "OD"}}

_wide = False


def set_wide(value: bool) -> bool:
    """The --wide flag (a Typer callback): every column, each as wide as it needs."""
    global _wide
    _wide = bool(value)
    return value


@dataclass(frozen=True)
class Col:
    """A table column. `priority` 0: identifies the row or is its price, never left out or
    cut; 1, 2, ...: left out when the table does not fit, the highest first. `wrap`: may wrap
    between words (default: prose columns)."""

    key: str
    header: str
    priority: int = 0
    wrap: bool | None = None
    # as a last resort a GPU count may go on its own line above its model ('8x' / 'H100')
    split_count: bool = False

    @property
    def wraps(self) -> bool:
        return self.key in PROSE if self.wrap is None else self.wrap


def _col(spec: Col | tuple) -> Col:
    return spec if isinstance(spec, Col) else Col(*spec)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def iso(value: datetime) -> str:
    """The one timestamp form of machine output, the API's and the exports':
    '2026-11-30T12:03:34Z' (core.units.utc_text)."""
    from gpuradar.core.units import utc_text

    return utc_text(value)


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


def _csv_cell(value: Any) -> Any:
    """One CSV cell as every gpuradar CSV writes it (the export's too): true/false, JSON for
    structures, empty for None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def machine_rows(data: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as JSON and CSV carry them. An offer's `attributes` are the provider's words, kept
    as they are (as the API and the export keep them)."""
    return [{k: v if k == "attributes" else _jsonable(v, k) for k, v in r.items()}
            for r in data]


def dump_json(data: Any) -> None:
    """Any JSON document on stdout, with the timestamp and count rules of `emit`."""
    json.dump(_jsonable(data), sys.stdout, indent=1, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[Col | tuple], fmt: Format,
         title: str | None = None, raw_rows: Sequence[dict[str, Any]] | None = None,
         caption: str | None = None, **fit: Any) -> None:
    """Print `rows`; `columns` are Col(key, header, priority) or (key, header[, priority])
    for the table (`fit`: see table()); JSON/CSV get `raw_rows` (machine values) when given,
    else the rows."""
    data = raw_rows if raw_rows is not None else rows
    if fmt is Format.json:
        json.dump(machine_rows(data), sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    if fmt is Format.csv:
        keys = list(data[0].keys()) if data else [_col(c).key for c in columns]
        writer = csv.DictWriter(sys.stdout, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for r in machine_rows(data):
            writer.writerow({k: _csv_cell(v) for k, v in r.items()})
        return
    print_table(table(rows, columns, title=title, caption=caption, **fit))


def print_table(out: Table) -> None:
    """Print a table made by table(): wider than the console when it must be (--wide, a
    pipe, or columns that cannot be narrowed further), never squeezed by rich."""
    needed = getattr(out, "needed_width", 0)
    if needed > console.width:
        with console.wider(needed):
            console.print(out, soft_wrap=True)
    else:
        console.print(out)


def fit_width() -> int | None:
    """The width a table must fit: None (as wide as it needs) with --wide or into a pipe."""
    if _wide or (not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit()):
        return None
    return console.width


def same_decimals(cells: list[list[str]], i: int) -> None:
    """One number of decimals in column i: the most any of its numbers has (nothing is
    rounded: '$14.69' next to '$7.3468' becomes '$14.6900')."""
    parts = [_NUMBER.match(row[i]) for row in cells]
    numbers = [m for m in parts if m]
    if len({(m["post"] or "").strip() for m in numbers}) > 1:
        return  # different units ('30 min', '1.5 h'): each keeps its own form
    places = max((len(m["dec"] or "") for m in numbers), default=0)
    if not places:
        return
    for row, m in zip(cells, parts, strict=True):
        if m:
            dec = (m["dec"] or "").ljust(places, "0")
            row[i] = f"{m['pre']}{m['int']}.{dec}{m['post'] or ''}"


def _wrap(text: str, width: int, split_count: bool = False) -> list[str]:
    """Lines of at most `width`, broken only between words; a word longer than the width
    (an id, a URL) stays whole on its own line; a number keeps its unit."""
    out: list[str] = []
    for para in text.split("\n"):
        glued = _glue(para, split_count)
        lines = textwrap.wrap(glued, width, break_long_words=False, break_on_hyphens=False)
        out += [line.replace(_GLUE, " ") for line in lines] or [""]
    return out


def _longest_word(text: str, split_count: bool = False) -> int:
    return max((len(w) for w in re.split(r"[ \t\n]+", _glue(text, split_count))), default=0)


def _glue(text: str, split_count: bool = False) -> str:
    if not split_count:
        text = _COUNT_SPACE.sub(lambda m: m[1] + _GLUE, text)
    return _UNIT_SPACE.sub(_GLUE, text)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Col | tuple],
          title: str | None = None, caption: str | None = None, width: int | None = None,
          abbreviate: dict[str, dict[str, str]] | None = None,
          optional: Sequence[str] = (), prefixes: dict[str, str] | None = None,
          **_ignored: Any) -> Table:
    """A rich table that fits `width` (default: fit_width()); see the module docstring.

    When the table is too wide: values are abbreviated (`abbreviate`: column -> {value:
    short}, said in the caption; `prefixes`: column -> a prefix its values share, left out
    and said in the caption), then columns of priority 1, 2, ... are left out (highest
    first; `optional` lists keys to treat as priority 1, 2, ... in that order), prose
    columns wrap between words, and as a last resort so do the identifying columns; a
    column of numbers is never narrower than its numbers (its header may wrap). The caption
    says what was left out."""
    cols = [_col(c) for c in columns]
    abbreviate = {**ABBREVIATE, **(abbreviate or {})}
    for rank, key in enumerate(optional, 1):
        cols = [replace(c, priority=max(c.priority, rank)) if c.key == key else c
                for c in cols]
    room = width if width is not None else fit_width()
    cells = [[str(r.get(c.key)) if r.get(c.key) is not None else "-" for c in cols]
             for r in rows]
    keep = [i for i in range(len(cols)) if not rows or any(row[i] not in _EMPTY
                                                            for row in cells)]
    numeric = {i for i in keep if cells and all(_NUMBER.match(row[i]) or row[i] in _EMPTY
                                                for row in cells)}
    i: int | None  # a column's index (None: no column has the key, below)
    for i in numeric:
        same_decimals(cells, i)

    def natural(i: int) -> int:
        return max(len(v) for v in [cols[i].header, *(row[i] for row in cells)])

    # A column's floor is asked for again at every step of the fitting below (one character
    # at a time): kept until its cells change (a prefix left out), not computed over every
    # row each time (most of `gpuradar prices`'s time on a full market, issue #54).
    floors: dict[tuple[int, bool], int] = {}

    def floor(i: int, last_resort: bool = False) -> int:
        if (i, last_resort) not in floors:
            floors[i, last_resort] = _floor(i, last_resort)
        return floors[i, last_resort]

    def _floor(i: int, last_resort: bool) -> int:
        if i in numeric:  # its numbers whole; its header may wrap ('whole offer /h')
            return max([_longest_word(cols[i].header), *(len(row[i]) for row in cells)])
        if not (cols[i].wraps or cols[i].split_count or last_resort):
            return natural(i)
        split = cols[i].split_count  # a count over its model before a column goes
        return max(_longest_word(v, split) for v in [cols[i].header, *(row[i] for row in cells)])

    gap = GAP

    def total(widths: dict[int, int]) -> int:  # with the table's two edge spaces
        return sum(widths.values()) + gap * (len(widths) - 1) + 2

    notes = [caption] if caption else []
    if room is not None and abbreviate and total({i: natural(i) for i in keep}) > room:
        used = {}
        for i in keep:
            short = abbreviate.get(cols[i].key, {})
            for row in cells:
                if row[i] in short:
                    used[short[row[i]]] = row[i]
                    row[i] = short[row[i]]
        notes += [f"{a} = {v}" for a, v in used.items()]
    for key, prefix in (prefixes or {}).items():  # too wide: the shared prefix goes first
        if room is None or total({i: floor(i) for i in keep}) <= room:
            break
        i = next((i for i in keep if cols[i].key == key), None)
        if i is not None and any(row[i].startswith(prefix) for row in cells):
            for row in cells:
                row[i] = row[i].removeprefix(prefix)
            floors.clear()
            notes.append(f"{cols[i].header} names without {prefix}")
    if room is not None and total({i: floor(i) for i in keep}) > room:
        gap = 1  # one space between columns before any column is left out
    hidden: list[str] = []
    while room is not None and total({i: floor(i) for i in keep}) > room:
        droppable = [i for i in keep if cols[i].priority > 0]
        if not droppable:
            break
        drop = max(droppable, key=lambda i: (cols[i].priority, i))
        keep.remove(drop)
        hidden.append(cols[drop].header)
    if hidden:
        notes.append(f"+{len(hidden)} column{'s' if len(hidden) > 1 else ''} hidden "
                     f"({', '.join(reversed(hidden))}): --wide")
    widths = {i: natural(i) for i in keep}
    if room is not None:
        for last_resort in (False, True):
            while total(widths) > room:
                slack = [i for i in keep if widths[i] > floor(i, last_resort)]
                if not slack:
                    break
                # prose first (it wraps between words anyway), then a GPU count before an
                # id, then the one with most room
                widest = max(slack, key=lambda i: (cols[i].wraps, cols[i].split_count,
                                                   widths[i] - floor(i, last_resort)))
                widths[widest] -= 1
    out = Table(title=title, caption="; ".join(notes) or None, header_style="bold",
                padding=(0, 1) if gap == GAP else (0, 0),
                box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                title_justify="left", caption_justify="left")
    for i in keep:
        out.add_column(Text("\n".join(_wrap(cols[i].header, widths[i])),
                            justify="right" if i in numeric else "left"),
                       justify="right" if i in numeric else "left",
                       no_wrap=True, overflow="fold", width=widths[i])
    for row in cells:
        out.add_row(*[Text(row[i], justify="right") if i in numeric
                      else Text("\n".join(_wrap(row[i], widths[i], cols[i].split_count)))
                      for i in keep])
    out.needed_width = total(widths)  # type: ignore[attr-defined]
    return out


def watch_output(show: Any, interval: float, rounds: int | None = None) -> None:
    """Run `show` (which prints) every `interval` seconds, its output replacing the last in
    place (rich Live) with the time of the refresh. Ctrl-C ends it (exit 130, the command
    line's handler; the screen is left as it was); `rounds` bounds it (tests)."""
    import time

    from rich.console import Group
    from rich.live import Live

    def frame() -> Group:
        with console.capture() as captured:
            show()
        stamp = Text(f"every {interval:g}s, last {SYSTEM.now():%H:%M:%S} UTC; Ctrl-C "
                     "stops", style="dim")
        # the stamp first, and what does not fit counted: Live would cut the bottom to "..."
        lines = captured.get().rstrip("\n").split("\n")
        room = console.height - 2  # the stamp and the count
        if len(lines) > room:
            hidden = len(lines) - room + 1
            lines = [*lines[:room - 1],
                     f"+{hidden} more lines below: a taller terminal or --limit shows them"]
        return Group(stamp, Text.from_ansi("\n".join(lines)))

    done = 0
    with Live(frame(), console=console, auto_refresh=False, screen=False) as live:
        while rounds is None or done < rounds:
            done += 1
            time.sleep(interval)
            live.update(frame(), refresh=True)
