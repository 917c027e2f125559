"""`gpuradar sources --check`: can each enabled source be reached, does it accept the
credentials, is its answer understood, is it throttling? One line per source and credential,
each with the fix to try. The work is done by gpuradar.crawler.probe."""


from gpuradar.cli.output import Format, emit
from gpuradar.core.config import Config
from gpuradar.core.units import EXIT_FAILED, EXIT_OK
from gpuradar.crawler.config import scrapy_settings


def run_check(cfg: Config, fmt: Format, verbose: bool = False) -> int:
    """Probe every enabled source; print the outcomes; the exit code (1: a problem)."""
    from gpuradar.crawler.probe import run_probes
    from gpuradar.crawler.runner import enabled_sources

    settings = scrapy_settings(cfg, LOG_LEVEL="INFO" if verbose else "CRITICAL")
    results = run_probes(enabled_sources(settings), settings)
    rows = [vars(r) for r in results]
    emit(rows, [("source", "source"), ("check", "check"), ("result", "result"),
                ("detail", "detail"), ("fix", "fix to try")], fmt, title="source check",
         raw_rows=rows)
    return EXIT_OK if all(r.result == "ok" for r in results) else EXIT_FAILED
