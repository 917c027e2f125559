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
from rich.console import Console, ConsoleDimensions, JustifyMethod
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
    for rank, key in enumerate(optional, 1):
        cols = [replace(c, priority=max(c.priority, rank)) if c.key == key else c
                for c in cols]
    layout = _Layout(cols, rows, width if width is not None else fit_width())
    notes = [caption] if caption else []
    notes += layout.abbreviate({**ABBREVIATE, **(abbreviate or {})})
    notes += layout.leave_out_prefixes(prefixes or {})
    notes += layout.hide_columns()
    return layout.draw(title, "; ".join(notes) or None)


class _Layout:
    """The cells of one table and the steps that fit them into `room` columns (None: as
    wide as they need), each its own method, in the order table() takes them."""

    def __init__(self, cols: list[Col], rows: Sequence[dict[str, Any]], room: int | None
                 ) -> None:
        self.cols, self.room, self.gap = cols, room, GAP
        self.cells = [[str(r.get(c.key)) if r.get(c.key) is not None else "-" for c in cols]
                      for r in rows]
        # an empty column is left out (unless there is no row at all: the headers show)
        self.keep = [i for i in range(len(cols)) if not rows or any(
            row[i] not in _EMPTY for row in self.cells)]
        self.numeric = {i for i in self.keep if self.cells and all(
            _NUMBER.match(row[i]) or row[i] in _EMPTY for row in self.cells)}
        for i in self.numeric:
            same_decimals(self.cells, i)
        # A column's floor is asked for again at every step of the fitting (one character
        # at a time): kept until its cells change (a prefix left out), not computed over
        # every row each time (most of `gpuradar prices`'s time on a full market, issue #54).
        self.floors: dict[tuple[int, bool], int] = {}

    def natural(self, i: int) -> int:
        """Column i's width with nothing wrapped."""
        return max(len(v) for v in [self.cols[i].header, *(row[i] for row in self.cells)])

    def floor(self, i: int, last_resort: bool = False) -> int:
        """The narrowest column i may be: its numbers whole; a prose column (or, as a last
        resort, any) its longest word."""
        if (i, last_resort) not in self.floors:
            col = self.cols[i]
            if i in self.numeric:  # its header may wrap ('whole offer /h')
                found = max([_longest_word(col.header), *(len(r[i]) for r in self.cells)])
            elif not (col.wraps or col.split_count or last_resort):
                found = self.natural(i)
            else:  # a count over its model before a column goes
                found = max(_longest_word(v, col.split_count)
                            for v in [col.header, *(row[i] for row in self.cells)])
            self.floors[i, last_resort] = found
        return self.floors[i, last_resort]

    def total(self, widths: dict[int, int]) -> int:
        """The table's width, with its two edge spaces."""
        return sum(widths.values()) + self.gap * (len(widths) - 1) + 2

    def too_wide(self, widths: dict[int, int]) -> bool:
        return self.room is not None and self.total(widths) > self.room

    def abbreviate(self, short: dict[str, dict[str, str]]) -> list[str]:
        """Values shortened when the table does not fit as it is; the notes saying so."""
        if not short or not self.too_wide({i: self.natural(i) for i in self.keep}):
            return []
        used = {}
        for i in self.keep:
            words = short.get(self.cols[i].key, {})
            for row in self.cells:
                if row[i] in words:
                    used[words[row[i]]] = row[i]
                    row[i] = words[row[i]]
        return [f"{a} = {v}" for a, v in used.items()]

    def leave_out_prefixes(self, prefixes: dict[str, str]) -> list[str]:
        """A prefix a column's values share, left out while the table is too wide."""
        notes = []
        for key, prefix in prefixes.items():
            if not self.too_wide({i: self.floor(i) for i in self.keep}):
                break
            i = next((i for i in self.keep if self.cols[i].key == key), None)
            if i is not None and any(row[i].startswith(prefix) for row in self.cells):
                for row in self.cells:
                    row[i] = row[i].removeprefix(prefix)
                self.floors.clear()
                notes.append(f"{self.cols[i].header} names without {prefix}")
        return notes

    def hide_columns(self) -> list[str]:
        """One space between columns, then columns of priority 1, 2, ... left out (highest
        first) while the table cannot fit; the note saying which."""
        if self.too_wide({i: self.floor(i) for i in self.keep}):
            self.gap = 1
        hidden: list[str] = []
        while self.too_wide({i: self.floor(i) for i in self.keep}):
            droppable = [i for i in self.keep if self.cols[i].priority > 0]
            if not droppable:
                break
            drop = max(droppable, key=lambda i: (self.cols[i].priority, i))
            self.keep.remove(drop)
            hidden.append(self.cols[drop].header)
        if not hidden:
            return []
        return [f"+{len(hidden)} column{'s' if len(hidden) > 1 else ''} hidden "
                f"({', '.join(reversed(hidden))}): --wide"]

    def widths(self) -> dict[int, int]:
        """Each kept column's width: its natural one, narrowed one character at a time
        while the table is too wide (prose first, as it wraps between words anyway, then a
        GPU count before an id, then the column with most room), to its floor, then to its
        last resort's."""
        widths = {i: self.natural(i) for i in self.keep}
        for last_resort in (False, True):
            while self.too_wide(widths):
                slack = [i for i in self.keep if widths[i] > self.floor(i, last_resort)]
                if not slack:
                    break
                widest = max(slack, key=lambda i: (self.cols[i].wraps, self.cols[i].split_count,
                                                   widths[i] - self.floor(i, last_resort)))
                widths[widest] -= 1
        return widths

    def draw(self, title: str | None, caption: str | None) -> Table:
        """The rich table of the kept columns at their widths, cells wrapped to them."""
        widths = self.widths()
        out = Table(title=title, caption=caption, header_style="bold",
                    padding=(0, 1) if self.gap == GAP else (0, 0),
                    box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                    title_justify="left", caption_justify="left")
        for i in self.keep:
            justify: JustifyMethod = "right" if i in self.numeric else "left"
            out.add_column(Text("\n".join(_wrap(self.cols[i].header, widths[i])),
                                justify=justify),
                           justify=justify, no_wrap=True, overflow="fold", width=widths[i])
        for row in self.cells:
            out.add_row(*[Text(row[i], justify="right") if i in self.numeric
                          else Text("\n".join(_wrap(row[i], widths[i], self.cols[i].split_count)))
                          for i in self.keep])
        out.needed_width = self.total(widths)  # type: ignore[attr-defined]
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
