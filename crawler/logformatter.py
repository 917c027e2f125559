"""Scrapy's per-item log lines, quieted: a crawl of 100,000 offers should not build 100,000
DEBUG records nobody reads. Drops are counted per reason in the crawl's stats instead."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.logformatter import LogFormatter, LogFormatterResult


class QuietDropLogFormatter(LogFormatter):
    def dropped(self, item: Any, exception: BaseException, response: Any, spider: Any
                ) -> LogFormatterResult:
        """Dropped items: counted in stats (gpuradar/dropped/<reason>); logged at DEBUG."""
        entry = super().dropped(item, exception, response, spider)
        entry["level"] = logging.DEBUG
        return entry

    def scraped(  # type: ignore[override]  # None is Scrapy's documented "do not log"
            self, item: Any, response: Any, spider: Any) -> LogFormatterResult | None:
        """No "Scraped from" line per item (Scrapy skips logging when this returns None);
        the crawl summary gives the counts."""
        return None
