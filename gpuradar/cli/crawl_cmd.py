"""`gpuradar crawl` and `gpuradar parse`: run spiders, or one parser on saved files."""


import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuradar.cli.common import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    ConfigOpt,
    CsvOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    WideOpt,
    app,
    complete_source,
    fail,
    get_config,
    get_engine,
    pick_format,
)
from gpuradar.cli.output import Format, console, emit, err_console, progress_console
from gpuradar.core.outcome import CrawlStatus

if TYPE_CHECKING:
    from gpuradar.core.config import Config


# -- crawl -------------------------------------------------------------------------------
def crawl_sources(cfg: "Config", sources: list[str], record: Path | None, replay: Path | None,
                  verbose: bool, quiet: bool = False, log_level: str = "WARNING",
                  table: bool = True):
    from rich.live import Live
    from rich.text import Text

    from gpuradar.core.logs import setup_logging
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.runner import UnknownSource, resolve_sources
    from gpuradar.crawler.service import CrawlInterrupted, DatabaseUnusable, run_once

    # gpuradar's log handler rather than Scrapy's: a failure the summary table reports is
    # not printed above it too (gpuradar.core.logs.IN_OUTCOME), unless -v.
    setup_logging("text", "INFO" if verbose else log_level,
                  libraries="INFO" if verbose else None)
    if table and not verbose:  # with --json/--csv stdout is data: stderr says the failure
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_in_summary)
    settings = scrapy_settings(cfg, GPURADAR_RECORD_DIR=str(record) if record else None,
                               GPURADAR_REPLAY_DIR=str(replay) if replay else None,
                               LOG_LEVEL="INFO" if verbose else log_level, LOG_ENABLED=False,
                               # a recording answers at once: no politeness delay needed
                               DOWNLOAD_DELAY=0 if replay else None)
    try:
        names = resolve_sources(sources, settings)
    except UnknownSource as exc:
        raise fail(str(exc)) from None
    if replay:
        missing = [n for n in names if not (replay / n / "index.json").exists()]
        if sources and missing:
            raise fail(f"no recording of {', '.join(missing)} in {replay}")
        names = [n for n in names if n not in missing]
    if not names:
        raise fail("no source to crawl (all disabled?); see `gpuradar sources`")
    get_engine(cfg, write=True)  # fail fast, with one line, on a database we cannot write
    counts = dict.fromkeys(names, 0)

    def bump(name: str) -> None:
        counts[name] += 1

    def render() -> Text:
        return Text("crawling " + "  ".join(f"{n}: {c}" for n, c in counts.items()))

    def stopping() -> None:
        err_console.print("stopping… (Ctrl-C again to quit at once)", highlight=False)

    try:
        if quiet or not console.is_terminal:
            return run_once(names, settings, on_item=bump, on_interrupt=stopping)
        with Live(render(), console=progress_console, refresh_per_second=4,
                  transient=True) as live:
            def bump_live(name: str) -> None:
                bump(name)
                live.update(render())
            return run_once(names, settings, on_item=bump_live, on_interrupt=stopping)
    except CrawlInterrupted as exc:
        running = [r.source for r in exc.results if r.error == "interrupted (Ctrl-C)"]
        raise fail(f"interrupted: {len(running)} crawl(s) stopped and recorded failed "
                   f"({', '.join(running) or 'none running'}); they closed nothing",
                   EXIT_INTERRUPTED) from None
    except DatabaseUnusable as exc:
        raise fail(f"{exc}; the crawls were stopped and closed nothing",
                   EXIT_DATABASE) from None


def _not_in_summary(record: logging.LogRecord) -> bool:
    """False for an ERROR about one spider's crawl: the crawl's outcome collects it
    (crawler.pipelines._CrawlErrors) and the summary table prints it, so without -v it is
    said there once, not also above the table. Scrapy's "Spider error" reports are not in
    the outcome and stay."""
    return not (record.levelno >= logging.ERROR and getattr(record, "spider", None) is not None
                and not record.getMessage().startswith("Spider error"))


def print_results(results, fmt: Format) -> None:
    from gpuradar.cli.sources_cmd import uncatalogued_cell
    from gpuradar.core.logs import source_once

    rows = []
    for r in results:
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(r.dropped.items())) or "-"
        rows.append({"source": r.source, "status": r.status, "items": r.items,
                     "new": r.new_offers, "changed": r.changed, "closed": r.closed,
                     "dropped": dropped, "unknown_gpus": ", ".join(r.unknown_gpus) or "-",
                     "uncatalogued": uncatalogued_cell(r.uncatalogued) or "-",
                     "duration": f"{r.duration_s:.1f}s",
                     "error": source_once(r.error, r.source) or "-"})
    raw = [{k: v.as_dict() if k == "backfilled" and v is not None else v
            for k, v in vars(r).items() if k != "changed_offer_ids"} for r in results]
    emit(rows, [("source", "source"), ("status", "status"), ("items", "items"),
                ("new", "new", 2), ("changed", "changed", 2), ("closed", "closed", 2),
                ("dropped", "dropped", 3), ("unknown_gpus", "unknown GPUs", 4),
                ("uncatalogued", "uncatalogued", 4), ("duration", "time", 1),
                ("error", "error")],
         fmt, title="crawl summary", raw_rows=raw)
    if fmt is Format.table and results:
        for r in results:  # history stored from before the first crawl (docs/patterns.md)
            if r.backfilled is not None:
                console.print(f"{r.source}: {r.backfilled.line()}", highlight=False)
        console.print(summary_line(results), highlight=False)


def summary_line(results) -> str:
    """One line under the table: 'network unreachable: 0 of 8 sources' when no source
    could be reached at all, else the count of each outcome."""
    ok = sum(r.status == CrawlStatus.OK for r in results)
    if all(r.status == CrawlStatus.FAILED and r.error.startswith("cannot reach")
           for r in results):
        return (f"network unreachable: 0 of {len(results)} sources answered (check the "
                "connection or the proxy; `gpuradar sources --check` tells more)")
    counts = {s: sum(r.status == s for r in results)
              for s in (CrawlStatus.OK, CrawlStatus.PARTIAL, CrawlStatus.FAILED,
                        CrawlStatus.REFUSED)}
    return f"{ok} of {len(results)} sources crawled: " + ", ".join(
        f"{n} {s}" for s, n in counts.items() if n)


@app.command()
def crawl(
    sources: Annotated[list[str] | None, typer.Argument(help="Sources to crawl (default: "
                                                        "every enabled source).",
                                                        autocompletion=complete_source)] = None,
    record: Annotated[Path | None, typer.Option(help="Save every response under DIR.")] = None,
    replay: Annotated[Path | None, typer.Option(help="Answer every request from a recording "
                                                "in DIR (no network).")] = None,
    config: ConfigOpt = None, database_url: DbOpt = None, fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False, as_csv: CsvOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log Scrapy at INFO.")] = False,
    wide: WideOpt = False,
) -> None:
    """Crawl sources once, store what changed, print a summary per source."""
    if record and replay:
        raise fail("--record and --replay exclude each other")
    if replay and not replay.is_dir():
        raise fail(recording_problem(replay))
    if record:  # now, not at the first answer in the middle of a crawl
        try:
            record.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"cannot record into {record}: {exc.strerror or exc}") from None
    cfg = get_config(config, database_url, check=True)  # refused here if `run` refuses it
    fmt = pick_format(fmt, as_json, as_csv)
    results = crawl_sources(cfg, sources or [], record, replay, verbose,
                            table=fmt is Format.table)
    _blame_scrapy_settings(cfg, results)
    print_results(results, fmt)
    if any(r.status in (CrawlStatus.FAILED, CrawlStatus.REFUSED) for r in results):
        raise typer.Exit(EXIT_FAILED)
    if any(r.status == CrawlStatus.PARTIAL for r in results):
        raise typer.Exit(EXIT_PARTIAL)


def recording_problem(replay: Path) -> str:
    """Why --replay cannot read `replay` (not a directory)."""
    if replay.exists():
        return f"recording directory {replay} is not a directory"
    return f"recording directory {replay} does not exist"


def _blame_scrapy_settings(cfg: "Config", results) -> None:
    """A crawl that did not start because of a `scrapy:` setting of the config file: name
    the setting (its value appears in Scrapy's error)."""
    for r in results:
        if not r.error.startswith("crawl did not start"):
            continue
        blamed = [key for key, value in cfg.scrapy.written().items()
                  if any(part and part in r.error for part in _words(value))]
        if blamed:
            r.error += f" (check {', '.join(f'scrapy.{k}' for k in blamed)} in " \
                       f"{cfg.where('scrapy', blamed[0])})"


def _words(value) -> list[str]:
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in (*_words(k), *_words(v))]
    if isinstance(value, list | tuple):
        return [w for v in value for w in _words(v)]
    if not isinstance(value, str) or len(value) < 3:
        return []  # numbers and flags: Scrapy's errors do not quote them
    return [value, value.rsplit(".", 1)[0], value.split(".", 1)[0]]

# -- parse -------------------------------------------------------------------------------
@app.command()
def parse(source: Annotated[str, typer.Argument(help="Source whose parser to run.",
                                                        autocompletion=complete_source)],
          files: Annotated[list[Path], typer.Argument(help="Saved responses.")],
          url: Annotated[str | None, typer.Option(help="URL the response came from.")] = None,
          config: ConfigOpt = None) -> None:
    """Run a source's parser on saved responses; print normalised items as JSON lines."""
    from gpuradar.core.logs import setup_logging
    from gpuradar.crawler.crawl_settings import scrapy_settings
    from gpuradar.crawler.parsing import ParseFailed, parse_files

    cfg = get_config(config)
    # The parser's warnings (a row skipped, and why) on stderr; stdout is the items. The
    # crawl's own log handler would otherwise take them where nobody reads them. A parser's
    # error is said once, below (its record is part of the outcome: gpuradar.core.logs).
    setup_logging("text", "WARNING")
    settings = scrapy_settings(cfg)
    try:
        for item in parse_files(source, files, settings, url=url):
            sys.stdout.write(json.dumps(item, default=str, ensure_ascii=False) + "\n")
    except ParseFailed as exc:
        raise fail(str(exc), EXIT_FAILED) from None
