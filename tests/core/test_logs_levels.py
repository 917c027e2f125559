"""The daemon's log: nothing below the chosen level, each failure once."""

from __future__ import annotations

import io
import logging

from gpuradar.core.logs import IN_OUTCOME, setup_logging


def test_a_record_demoted_after_it_was_made_is_not_shown_at_info():
    """Scrapy's spiders log a skipped request as a WARNING that a filter demotes to DEBUG
    (crawler/middlewares.py); at --log-level info it must not be printed (issue #35 counted
    38 such DEBUG lines in one offline round)."""
    out = io.StringIO()
    setup_logging("text", "INFO", stream=out)
    spider_log = logging.getLogger("aws-test-spider")

    def demote(record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True

    spider_log.addFilter(demote)
    try:
        spider_log.warning("on-demand prices of af-south-1 failed")
    finally:
        spider_log.removeFilter(demote)
    logging.getLogger("gpuradar.daemon").info("shown")
    assert "af-south-1" not in out.getvalue() and "DEBUG" not in out.getvalue()
    assert "shown" in out.getvalue()


def test_a_failure_the_crawl_outcome_repeats_is_shown_only_at_debug():
    out = io.StringIO()
    setup_logging("text", "INFO", stream=out)
    log = logging.getLogger("gpuradar.crawler.middlewares")
    log.error("azure: cannot reach prices.azure.com", extra={IN_OUTCOME: True})
    logging.getLogger("gpuradar.daemon").warning("azure: crawl failed: cannot reach "
                                                 "prices.azure.com")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "WARNING gpuradar.daemon: azure: crawl failed" in lines[0]
    debug = io.StringIO()
    setup_logging("text", "DEBUG", stream=debug)
    log.error("azure: cannot reach prices.azure.com", extra={IN_OUTCOME: True})
    assert "cannot reach prices.azure.com" in debug.getvalue()
    setup_logging("text", "WARNING", stream=io.StringIO())
