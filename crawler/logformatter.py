"""Item drops are counted per reason in the crawl's stats; logging each one is noise."""

import logging

from scrapy.logformatter import LogFormatter


class QuietDropLogFormatter(LogFormatter):
    def dropped(self, item, exception, response, spider):
        entry = super().dropped(item, exception, response, spider)
        entry["level"] = logging.DEBUG
        return entry
