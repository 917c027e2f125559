"""`gpuradar export DIR`: the store as a reproducible dataset; `--verify DIR` checks one."""


from pathlib import Path
from typing import Annotated

import typer

from gpuradar.cli.common import (
    EXIT_FAILED,
    ConfigOpt,
    DbOpt,
    app,
    fail,
    get_config,
    get_engine,
    read_engine,
)
from gpuradar.cli.output import console, err_console


@app.command()
def export(
    directory: Annotated[Path, typer.Argument(help="Directory to write (created if missing), "
                                              "or with --verify the export to check.")],
    fmt: Annotated[str, typer.Option("--format", help="Comma-separated: parquet, csv, jsonl "
                                     "(Parquet needs the `export` extra: pyarrow).")
                   ] = "parquet,csv,jsonl",
    verify: Annotated[bool, typer.Option("--verify", help="Recompute the digests of an "
                                         "export against its manifest.json instead of "
                                         "writing one (no database needed).")] = False,
    config: ConfigOpt = None, database_url: DbOpt = None,
) -> None:
    """Write offers, change points, interruption-signal changes, the market index and crawls
    as Parquet, CSV and JSON Lines with a manifest (row counts, time range, schema version,
    SHA-256 per file). The same database exported twice gives byte-identical files."""
    from gpuradar.storage.export import ExportError, other_files, stale_files
    from gpuradar.storage.export import export as write
    from gpuradar.storage.export import verify as check

    if verify:
        problems = check(directory)
        if problems:
            err_console.print(problems[0] + (f" (and {len(problems) - 1} more)"
                                             if len(problems) > 1 else ""), highlight=False,
                              soft_wrap=True)
            raise typer.Exit(EXIT_FAILED)
        console.print(f"{directory}: every file matches manifest.json", highlight=False)
        others = other_files(directory)
        if others:
            console.print(f"not in manifest.json, not checked: {', '.join(others)}",
                          highlight=False, soft_wrap=True)
        return
    formats = [f.strip().lower() for f in fmt.split(",") if f.strip()]
    cfg = get_config(config, database_url)
    # a replica is read as it is: a reader never migrates nor writes
    engine = (read_engine(cfg.reader_url) if cfg.read_database_url
              else get_engine(cfg, existing=True))
    stale = stale_files(directory, formats)
    try:
        manifest = write(engine, directory, formats)
    except ExportError as exc:
        raise fail(str(exc)) from None
    rows = ", ".join(f"{name} {t['rows']}" for name, t in manifest["tables"].items())
    console.print(f"exported to {directory}: {rows} rows; {len(manifest['files'])} files, "
                  "digests in manifest.json", highlight=False)
    if stale:
        console.print(f"removed an earlier export's {', '.join(stale)} (formats not written "
                      "now: manifest.json would not list them)", highlight=False,
                      soft_wrap=True)
