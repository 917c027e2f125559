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


def test_a_spider_message_names_its_source_once():
    """A spider logs through a logger named after its source, and its messages start with
    the source as well: the line said `WARNING aws: aws: g7.2xlarge is not in gpuradar's
    catalog ...` (`gpuradar demo -v`). Other loggers keep the source in the message."""
    out = io.StringIO()
    setup_logging("text", "INFO", stream=out)
    logging.getLogger("aws").warning("%s: %s is not in gpuradar's catalog", "aws", "g7.2xlarge")
    logging.getLogger("gcp").error("gcp: no API key; set GCP_API_KEY")
    logging.getLogger("gpuradar.crawler.middlewares").error("azure: cannot reach x")
    logging.getLogger("aws").info("awsome: not the source's prefix")
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(" WARNING aws: g7.2xlarge is not in gpuradar's catalog")
    assert lines[1].endswith(" ERROR gcp: no API key; set GCP_API_KEY")
    assert lines[2].endswith(" ERROR gpuradar.crawler.middlewares: azure: cannot reach x")
    assert lines[3].endswith(" INFO aws: awsome: not the source's prefix")
    assert not any(": aws: " in line or ": gcp: " in line for line in lines)
    setup_logging("text", "WARNING", stream=io.StringIO())


def test_a_crawl_error_beside_its_source_names_it_once():
    from gpuradar.core.logs import source_once

    error = ("aws: Spot Advisor feed failed (HTTP 500); 2 response(s) with HTTP 500; "
             "aws: cannot reach b0.p.awsstatic.com (timeout, 2 attempts)")
    assert source_once(error, "aws") == (
        "Spot Advisor feed failed (HTTP 500); 2 response(s) with HTTP 500; "
        "cannot reach b0.p.awsstatic.com (timeout, 2 attempts)")
    assert source_once("awsome: x; gcp: y", "aws") == "awsome: x; gcp: y"
    assert source_once("", "aws") == ""
