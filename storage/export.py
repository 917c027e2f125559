"""Reproducible exports: offers, change points (prices and interruption signals), the
market index and crawls as Parquet, CSV and JSON Lines, with a manifest (row counts, time
range, schema version, SHA-256 per file).

Reproducible means byte-identical: the same database exported twice gives the same files.
So every table is read in primary-key order inside one read transaction (a consistent
snapshot), every value has one fixed written form (UTC times, floats in their shortest
round-trip form, JSON with sorted keys), nothing about the export itself (its time, host,
directory) is written, and Parquet is written with fixed settings and row groups. The
manifest's digests let anyone check a copy with `gpuradar export --verify DIR`, without
the database.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, func, select

from gpuradar.core.files import not_a_file
from gpuradar.core.text import excerpt
from gpuradar.core.units import utc_text
from gpuradar.storage.dataset import INTERRUPTION_FIELDS, OFFER_SCHEMA, interruption_fields
from gpuradar.storage.models import CHANGE, CRAWL, FX, INDEX, OFFER, SIGNAL

#: 3: offers carry their interruption signal (interruption, interruption_kind, _source,
#: _as_of, _monthly_low, _monthly_high). 4: the interruption-signal series
#: (interruption_changes).
FORMAT_VERSION = 4
MAX_MANIFEST_BYTES = 1024 * 1024  # a manifest is a few kilobytes; verify reads no more
FORMATS = ("parquet", "csv", "jsonl")
MANIFEST = "manifest.json"
CHUNK = 50_000  # rows per read and per Parquet row group (fixed: part of the byte layout)


class ExportError(RuntimeError):
    """An export that cannot be written or a directory that does not match its manifest:
    one line naming what and where."""


@dataclass(frozen=True)
class Table:
    """One exported table: its columns as (name, kind), kind one of int, count (an integer
    when whole), float, str, bool, time, json; and how to read its rows in a fixed order."""

    name: str
    columns: tuple[tuple[str, str], ...]
    query: Callable[[], Any]
    convert: Callable[[dict[str, Any]], dict[str, Any]] = lambda r: r


def _epoch(value: int) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _micros(value: int | None) -> float | None:
    return None if value is None else value / 1_000_000


def _change(row: dict[str, Any]) -> dict[str, Any]:
    return {"offer_id": row["offer_id"], "at": _epoch(row["at"]),
            "price": _micros(row["price_micros"]), "currency": row["currency"],
            "available": row["available"]}


def _index(row: dict[str, Any]) -> dict[str, Any]:
    return {"gpu": row["gpu"], "pricing": row["pricing"], "at": _epoch(row["at"]),
            "median": _micros(row["median_micros"]), "p10": _micros(row["p10_micros"]),
            "p90": _micros(row["p90_micros"]), "offers": row["offers"],
            "providers": row["providers"], "excluded": row["excluded"] or [],
            "method": row["method"], "status": row["status"], "params": row["params"] or {},
            "panel": row["panel"] or [], "digest": row["digest"],
            "published": None if row["published"] is None else _epoch(row["published"]),
            "corrects": None if row["corrects"] is None else _epoch(row["corrects"])}


#: An offer's fields as every interface carries them (storage.dataset.OFFER_SCHEMA).
OFFER_COLUMNS = tuple((f.name, f.kind) for f in OFFER_SCHEMA)


def _offers_query() -> Any:
    """Every offer with what its source's last successful crawl observed (observed_at,
    replayed, captured), as `prices` reads them: an offer never crawled ok since is dated
    at its last change."""
    from gpuradar.storage.queries import newest_crawl_ids

    last = (select(CRAWL.c.source,
                   func.coalesce(CRAWL.c.observed_at, CRAWL.c.started_at).label("seen"),
                   CRAWL.c.replayed, CRAWL.c.captured)
            .where(CRAWL.c.id.in_(newest_crawl_ids(CRAWL.c.status == "ok"))).subquery())
    stored = [OFFER.c[c] for c, _ in OFFER_COLUMNS
              if c not in ("observed_at", "replayed", "captured", *INTERRUPTION_FIELDS)]
    return (select(*stored, func.coalesce(last.c.seen, OFFER.c.changed_at).label("observed_at"),
                   func.coalesce(last.c.replayed, False).label("replayed"),
                   last.c.captured)
            .select_from(OFFER.outerjoin(last, last.c.source == OFFER.c.source))
            .order_by(OFFER.c.id))
CRAWL_COLUMNS = (("id", "int"), ("source", "str"), ("started_at", "time"),
                 ("finished_at", "time"), ("status", "str"), ("items", "int"),
                 ("new_offers", "int"), ("changed", "int"), ("closed", "int"), ("held", "int"),
                 ("dropped", "json"), ("unknown_gpus", "json"), ("uncatalogued", "json"),
                 ("duration_s", "float"), ("error", "str"), ("observed_at", "time"),
                 ("replayed", "bool"), ("captured", "str"))
def _offer(row: dict[str, Any]) -> dict[str, Any]:
    """A stored offer with the interruption_* fields its attributes give (storage.dataset)."""
    return {**row, **interruption_fields(row["source"], row["pricing"], row["attributes"])}


TABLES = (
    Table("offers", OFFER_COLUMNS, _offers_query, _offer),
    # each change with its offer's currency: `price` is the whole offer per hour in it
    Table("price_changes", (("offer_id", "int"), ("at", "time"), ("price", "float"),
                            ("currency", "str"), ("available", "bool")),
          lambda: select(CHANGE, OFFER.c.currency)
          .join(OFFER, OFFER.c.id == CHANGE.c.offer_id)
          .order_by(CHANGE.c.offer_id, CHANGE.c.at), _change),
    # each change of a spot offer's published interruption signal (storage/signals.py)
    Table("interruption_changes", (("offer_id", "int"), ("at", "time"), ("band", "str"),
                                   ("rate", "float"), ("period", "str"), ("source", "str"),
                                   ("as_of", "str")),
          lambda: select(SIGNAL).order_by(SIGNAL.c.offer_id, SIGNAL.c.at),
          lambda r: {**r, "at": _epoch(r["at"])}),
    # the exchange rates prices were converted with (USD per unit, by ECB reference date)
    Table("fx_rates", (("currency", "str"), ("rate_date", "str"), ("usd_per_unit", "float"),
                       ("source", "str"), ("fetched_at", "time")),
          lambda: select(FX.c.currency, FX.c.rate_date, FX.c.usd_per_unit, FX.c.source,
                         FX.c.fetched_at).order_by(FX.c.currency, FX.c.rate_date),
          lambda r: {**r, "rate_date": r["rate_date"].isoformat()
                     if hasattr(r["rate_date"], "isoformat") else str(r["rate_date"])}),
    Table("index", (("gpu", "str"), ("pricing", "str"), ("at", "time"), ("median", "float"),
                    ("p10", "float"), ("p90", "float"), ("offers", "int"),
                    ("providers", "int"), ("excluded", "json"), ("method", "int"),
                    ("status", "str"), ("params", "json"), ("panel", "json"),
                    ("digest", "str"), ("published", "time"), ("corrects", "time")),
          lambda: select(INDEX).order_by(INDEX.c.gpu, INDEX.c.pricing, INDEX.c.at), _index),
    Table("crawls", CRAWL_COLUMNS,
          lambda: select(*(CRAWL.c[c] for c, _ in CRAWL_COLUMNS)).order_by(CRAWL.c.id)),
)


# -- one value, one written form ------------------------------------------------------------
def _time(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _iso(value: datetime) -> str:
    return utc_text(value)


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _normal(row: dict[str, Any], columns: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Python values of fixed type per column (SQLite and PostgreSQL hand back the same)."""
    out = {}
    for name, kind in columns:
        v = row[name]
        if v is not None:
            if kind == "time":
                v = _time(v)
            elif kind == "float":
                v = float(v)
            elif kind == "count":
                v = int(v) if float(v).is_integer() else float(v)
            elif kind == "int":
                v = int(v)
            elif kind == "bool":
                v = bool(v)
        elif kind == "json":
            v = [] if name in ("unknown_gpus", "excluded", "panel") else {}
        out[name] = v
    return out


def _csv_cell(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "time":
        return _iso(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "json":
        return _json_text(value)
    return repr(value) if kind in ("float", "count") else str(value)


def _jsonl_value(value: Any, kind: str) -> Any:
    return _iso(value) if kind == "time" and value is not None else value


# -- writers ---------------------------------------------------------------------------------
class _Writer:
    def __init__(self, path: Path, table: Table) -> None:
        self.path, self.table, self.rows = path, table, 0

    def write(self, rows: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @staticmethod
    def count(path: Path) -> int:
        """The rows a file of this format holds (what `verify` checks the manifest's row
        counts against)."""
        raise NotImplementedError


class _CsvWriter(_Writer):
    def __init__(self, path: Path, table: Table) -> None:
        super().__init__(path, table)
        self.file = path.open("w", encoding="utf-8", newline="")
        self.csv = csv.writer(self.file, lineterminator="\n")
        self.csv.writerow([c for c, _ in table.columns])

    def write(self, rows: list[dict[str, Any]]) -> None:
        cols = self.table.columns
        self.csv.writerows([_csv_cell(r[c], k) for c, k in cols] for r in rows)
        self.rows += len(rows)

    def close(self) -> None:
        self.file.close()

    @staticmethod
    def count(path: Path) -> int:
        with path.open(encoding="utf-8", newline="") as f:
            return max(0, sum(1 for _ in csv.reader(f)) - 1)  # less the header


class _JsonlWriter(_Writer):
    def __init__(self, path: Path, table: Table) -> None:
        super().__init__(path, table)
        self.file = path.open("wb")

    def write(self, rows: list[dict[str, Any]]) -> None:
        cols = self.table.columns
        for r in rows:
            self.file.write(orjson.dumps({c: _jsonl_value(r[c], k) for c, k in cols},
                                         option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))
        self.rows += len(rows)

    def close(self) -> None:
        self.file.close()

    @staticmethod
    def count(path: Path) -> int:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("Parquet needs pyarrow: pip install 'gpuradar[export]', or export "
                          "--format csv,jsonl") from None
    return pa, pq


class _ParquetWriter(_Writer):
    def __init__(self, path: Path, table: Table) -> None:
        super().__init__(path, table)
        pa, pq = _pyarrow()
        # a count is a double in Parquet's fixed column type (a shared GPU is fractional)
        kinds = {"int": pa.int64(), "count": pa.float64(), "float": pa.float64(),
                 "str": pa.string(),
                 "bool": pa.bool_(), "time": pa.timestamp("us", tz="UTC"), "json": pa.string()}
        self.pa = pa
        self.schema = pa.schema([(c, kinds[k]) for c, k in table.columns])
        # Fixed settings: compression, no dictionary surprises across versions of the data.
        self.writer = pq.ParquetWriter(str(path), self.schema, compression="zstd",
                                       compression_level=3, use_dictionary=True,
                                       write_statistics=True, version="2.6")

    def write(self, rows: list[dict[str, Any]]) -> None:
        cols = self.table.columns
        data = {c: [_json_text(r[c]) if k == "json" else r[c] for r in rows] for c, k in cols}
        self.writer.write_table(self.pa.table(data, schema=self.schema), row_group_size=CHUNK)
        self.rows += len(rows)

    def close(self) -> None:
        self.writer.close()

    @staticmethod
    def count(path: Path) -> int:
        _, pq = _pyarrow()
        return pq.ParquetFile(str(path)).metadata.num_rows


WRITERS: dict[str, type[_Writer]] = {"parquet": _ParquetWriter, "csv": _CsvWriter,
                                     "jsonl": _JsonlWriter}


def _rows(conn, table: Table) -> Iterator[list[dict[str, Any]]]:
    result = conn.execute(table.query().execution_options(yield_per=CHUNK))
    for part in result.partitions(CHUNK):
        yield [_normal(table.convert(dict(r._mapping)), table.columns) for r in part]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _schema_version(conn) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def export(engine: Engine, directory: Path, formats: Sequence[str] = FORMATS
           ) -> dict[str, Any]:
    """Write every table in each format into `directory` (created if missing), then the
    manifest; the manifest, as written."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"unknown export format {unknown[0] if unknown else ''!r}; "
                          f"known: {', '.join(FORMATS)}")
    formats = [f for f in FORMATS if f in formats]  # one order, whatever was asked
    if "parquet" in formats:
        _pyarrow()
    if directory.exists() and not directory.is_dir():
        raise ExportError(f"{directory} is a file, not a directory: give a directory to "
                          "export into")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create export directory {directory}: "
                          f"{exc.strerror or exc}") from None
    links = [n for n in [*_own_names(formats), MANIFEST] if (directory / n).is_symlink()]
    if links:  # writing through it would change a file outside the directory
        raise ExportError(f"{directory / links[0]} is a symbolic link: an export writes plain "
                          "files into its directory; remove the link")
    try:
        return _write(engine, directory, formats)
    except OSError as exc:  # read-only, full, or one of our names taken by a directory
        where = exc.filename or directory
        raise ExportError(f"cannot write {where}: {exc.strerror or exc}") from None


def _own_names(formats: Sequence[str] = FORMATS) -> list[str]:
    """The file names an export of these formats writes (besides the manifest)."""
    return [f"{t.name}.{f}" for t in TABLES for f in formats]


def stale_files(directory: Path, formats: Sequence[str]) -> list[str]:
    """An earlier export's files in `directory` of formats an export of `formats` does not
    write: they would sit beside a manifest that does not list them (and not match its
    data), so the export removes them, and the command says which. Other files stay."""
    if not directory.is_dir():
        return []
    return sorted(n for n in set(_own_names()) - set(_own_names(formats))
                  if (directory / n).is_file() and not (directory / n).is_symlink())


def _write(engine: Engine, directory: Path, formats: Sequence[str]) -> dict[str, Any]:
    from gpuradar import __version__

    for name in stale_files(directory, formats):
        (directory / name).unlink(missing_ok=True)
    files, tables = [], {}
    first: datetime | None = None
    last: datetime | None = None
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():  # one snapshot for every table
            schema_version = _schema_version(conn)
            for table in TABLES:
                writers = [WRITERS[f](directory / f"{table.name}.{f}", table) for f in formats]
                times = [c for c, k in table.columns if k == "time"]
                try:
                    for chunk in _rows(conn, table):
                        for w in writers:
                            w.write(chunk)
                        for r in chunk:
                            for c in times:
                                t = r[c]
                                if t is not None:
                                    first = t if first is None or t < first else first
                                    last = t if last is None or t > last else last
                finally:
                    for w in writers:
                        w.close()
                tables[table.name] = {"rows": writers[0].rows,
                                      "columns": [{"name": c, "type": k}
                                                  for c, k in table.columns]}
                files += [{"path": w.path.name, "table": table.name, "format": f,
                           "rows": w.rows, "bytes": w.path.stat().st_size,
                           "sha256": sha256(w.path)} for f, w in zip(formats, writers,
                                                                     strict=True)]
    manifest = {"format": "gpuradar-export", "format_version": FORMAT_VERSION,
                "schema_version": schema_version, "gpuradar_version": __version__,
                "time_range": {"from": _iso(first) if first else None,
                               "until": _iso(last) if last else None},
                "tables": tables, "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def read_table(directory: Path, name: str) -> list[dict[str, Any]]:
    """The rows of an exported table, from its JSON Lines file or else its CSV file, with
    the values the export wrote (times as UTC datetimes); ExportError when neither is
    there."""
    table = next(t for t in TABLES if t.name == name)
    kinds = dict(table.columns)
    jsonl, csv_path = directory / f"{name}.jsonl", directory / f"{name}.csv"
    try:
        if jsonl.is_file():
            rows = [orjson.loads(line) for line in jsonl.read_bytes().splitlines() if line]
        elif csv_path.is_file():
            with csv_path.open(encoding="utf-8", newline="") as f:
                rows = [{c: _from_csv(v, kinds.get(c, "str")) for c, v in r.items()}
                        for r in csv.DictReader(f)]
        else:
            raise ExportError(f"{directory}: no {name}.jsonl or {name}.csv (not a gpuradar "
                              "export of those formats?)")
    except (OSError, ValueError) as exc:
        raise ExportError(f"{jsonl if jsonl.is_file() else csv_path}: unreadable "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    for r in rows:
        for c, k in kinds.items():
            if k == "time" and isinstance(r.get(c), str):
                r[c] = datetime.fromisoformat(r[c].replace("Z", "+00:00"))
    return rows


def _from_csv(text: str, kind: str) -> Any:
    """A CSV cell back to its value (the inverse of _csv_cell; times stay text here)."""
    if text == "":
        return "" if kind == "str" else None
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "count":
        value = float(text)
        return int(value) if value.is_integer() else value
    if kind == "bool":
        return text == "true"
    if kind == "json":
        return orjson.loads(text)
    return text


def _entries(manifest: Any) -> list[dict[str, str]]:
    """The manifest's file entries, each checked to be {path: a plain file name, sha256: 64
    hex digits}; ValueError naming the first that is not. A path must not leave the
    directory: verify reads only files of the export."""
    entries = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no list of files")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"files[{i}] is not an object")
        name, digest = entry.get("path"), entry.get("sha256")
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"files[{i}] path {name!r} is not a file name in the export "
                             "directory")
        if not isinstance(digest, str) or len(digest) != 64 \
                or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"files[{i}] sha256 {digest!r} is not 64 hex digits")
    return entries


def _not_plain(path: Path) -> str | None:
    """not_a_file, worded for an export: a link is refused because its target may be
    anywhere."""
    why = not_a_file(path)
    return f"{why} (an export holds plain files)" if why == "a symbolic link" else why


def _read_manifest(path: Path) -> Any:
    """The manifest's JSON; ValueError (or OSError) saying why it cannot be one."""
    why = _not_plain(path)
    if why == "missing":
        raise FileNotFoundError(path)
    if why:
        raise ValueError(why)
    with path.open("rb") as f:
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"larger than {MAX_MANIFEST_BYTES // 1024} KiB; an export's is a few "
                         "kilobytes")
    manifest = json.loads(raw)
    if isinstance(manifest, dict) and manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"format_version {excerpt(manifest.get('format_version'))}; this "
                         f"gpuradar reads {FORMAT_VERSION}")
    return manifest


def _row_problems(manifest: dict[str, Any], entry: dict[str, Any], target: Path) -> list[str]:
    """A file whose digest matches: its rows counted against the manifest's entry and its
    table's count (an edited count with the digests left alone is still a lie)."""
    fmt, table = entry.get("format"), entry.get("table")
    writer = WRITERS.get(fmt) if isinstance(fmt, str) else None
    if writer is None:
        return [f"{target}: format {excerpt(fmt)} is not one gpuradar writes"]
    try:
        rows = writer.count(target)
    except (OSError, ValueError, ExportError) as exc:
        return [f"{target}: rows cannot be counted ({exc})"]
    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        tables = {}
    stated = {"the file's entry": entry.get("rows"),
              f"table {table}": (tables.get(table) or {}).get("rows")
              if isinstance(table, str) else None}
    return [f"{target}: holds {rows} rows, {MANIFEST} says {excerpt(count)} ({where})"
            for where, count in stated.items() if count != rows]


def verify(directory: Path) -> list[str]:
    """Recompute every listed file's digest against the manifest and count its rows, and
    look for export files it does not list: [] when all match, else one line per problem."""
    if directory.exists() and not directory.is_dir():
        return [f"{directory}: a file, not an export directory"]
    path = directory / MANIFEST
    try:
        manifest = _read_manifest(path)
        entries = _entries(manifest)
    except FileNotFoundError:
        return [f"{path}: no manifest (not a gpuradar export?)"]
    except (OSError, ValueError) as exc:
        return [f"{path}: unreadable manifest ({getattr(exc, 'strerror', None) or exc})"]
    problems = []
    seen: set[str] = set()
    for entry in entries:
        target = directory / entry["path"]
        if entry["path"] in seen:
            problems.append(f"{target}: listed twice in {MANIFEST}")
            continue
        seen.add(entry["path"])
        why = _not_plain(target)
        if why:
            problems.append(f"{target}: {why}" + (f" (listed in {MANIFEST})"
                                                   if why == "missing" else ""))
            continue
        try:
            digest = sha256(target)
        except OSError as exc:
            problems.append(f"{target}: cannot be read ({exc.strerror or exc})")
            continue
        if digest != entry["sha256"]:
            problems.append(f"{target}: sha256 {digest[:16]}… does not match the manifest's "
                            f"{entry['sha256'][:16]}…")
            continue
        problems += _row_problems(manifest, entry, target)
    problems += [f"{directory / name}: an export file {MANIFEST} does not list"
                 for name in _own_names() if name not in seen
                 and not_a_file(directory / name) != "missing"]
    return problems


def other_files(directory: Path) -> list[str]:
    """Files in an export directory that are neither the manifest nor an export file:
    `export` leaves them, `verify` does not check them and says so."""
    own = {*_own_names(), MANIFEST}
    try:
        return sorted(p.name for p in directory.iterdir() if p.name not in own)
    except OSError:
        return []
