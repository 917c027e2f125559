"""`gpuradar sources --check`: can each enabled source be reached, does it accept the
credentials, is its answer understood, is it throttling? One line per source and credential,
each with the fix to try. The work is done by gpuradar.crawler.probe."""


from gpuradar.cli.output import Format, console, emit, fit_width, print_table, table
from gpuradar.core.config import Config
from gpuradar.core.units import EXIT_FAILED, EXIT_OK
from gpuradar.crawler.crawl_settings import scrapy_settings

COLUMNS = [("source", "source"), ("check", "check"), ("result", "result"),
           ("detail", "detail"), ("fix", "fix to try")]
TITLE = "source check"


def run_check(cfg: Config, fmt: Format, verbose: bool = False) -> int:
    """Probe every enabled source; print the outcomes; the exit code (1: a problem)."""
    from gpuradar.crawler.probe import run_probes
    from gpuradar.crawler.runner import enabled_sources

    if verbose:  # gpuradar's log lines, as `crawl -v` prints them (a source named once)
        from gpuradar.core.logs import setup_logging

        setup_logging("text", "INFO", libraries="INFO")
        settings = scrapy_settings(cfg, LOG_LEVEL="INFO", LOG_ENABLED=False)
    else:
        settings = scrapy_settings(cfg, LOG_LEVEL="CRITICAL")
    results = run_probes(enabled_sources(settings), settings)
    rows = [vars(r) for r in results]
    if fmt is Format.table:
        print_outcomes(rows)
    else:
        emit(rows, COLUMNS, fmt, title=TITLE, raw_rows=rows)
    return EXIT_OK if all(r.result == "ok" for r in results) else EXIT_FAILED


def print_outcomes(rows: list[dict]) -> None:
    """The table when it fits the terminal; else one line per source and check, which the
    terminal wraps: a detail or a fix holds URLs and host names that no column can narrow
    below, and a URL must stay whole to be copied."""
    out = table(rows, COLUMNS, title=TITLE)
    room = fit_width()
    if room is None or out.needed_width <= room:  # type: ignore[attr-defined]
        print_table(out)
        return
    console.print(TITLE, style="italic", highlight=False)
    for r in rows:
        fix = f"; fix: {r['fix']}" if r["fix"] else ""
        console.print(f"{r['source']} ({r['check']}): {r['result']} — {r['detail']}{fix}",
                      highlight=False, soft_wrap=True)
