"""Running a spider's parser on saved responses (`gpuradar parse`, the demo timeline).

This is how a changed page is debugged and how every parser is checked against real
captures. It is a crawl like any other, started by the crawl service with the same
pipelines (validation, price ranges, duplicate drops, unreadable prices), whose requests are
answered from the files (SavedFilesMiddleware); a spider that reads several kinds of
response decides from the content which parser applies (`GpuRadarSpider.parse_file`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.settings import Settings

from gpuradar.core.currency import FxTable
from gpuradar.core.items import FxRateItem, PriceItem
from gpuradar.crawler.middlewares import saved_file_failed
from gpuradar.crawler.runner import CrawlResult


class ParseFailed(RuntimeError):
    pass


def check_files(files: list[Path]) -> None:
    """ParseFailed naming the first of `files` that cannot be read as a saved response."""
    for path in files:
        if not path.exists():
            raise ParseFailed(f"{path}: no such file")
        if path.is_dir():
            raise ParseFailed(f"{path}: a directory; give the saved responses in it (e.g. "
                              f"{path}/*.json)")
        try:
            with path.open("rb"):
                pass
        except OSError as exc:  # unreadable: permissions, a device, ...
            raise ParseFailed(f"{path}: cannot be read ({exc.strerror or exc})") from None


def saved_files_settings(settings: Settings, files: list[Path],
                         url: str | None = None) -> Settings:
    """`settings` for a crawl of `files` (answered as if from `url`, else each file's URI)."""
    settings = settings.copy()
    settings.set("GPURADAR_SAVED_FILES", [[str(p), url] for p in files], priority="cmdline")
    # Offers one at a time, not in PriceBatches: each kept or dropped in the order read.
    settings.set("SPIDER_MIDDLEWARES", {
        **settings.getdict("SPIDER_MIDDLEWARES"),
        "gpuradar.crawler.middlewares.PriceBatchMiddleware": None}, priority="cmdline")
    return settings


class _Collected:
    """Every offer and exchange rate a crawl of saved files read, in order, each dropped
    one with its reason; and the first parser error with its file."""

    def __init__(self, crawler: Any) -> None:
        self.records: list[dict[str, Any]] = []
        self.failure: str | None = None
        crawler.signals.connect(self.scraped, signal=signals.item_scraped)
        crawler.signals.connect(self.dropped, signal=signals.item_dropped)
        crawler.signals.connect(self.failed, signal=saved_file_failed)

    def scraped(self, item: Any) -> None:
        if isinstance(item, PriceItem | FxRateItem):
            self.records.append(dataclasses.asdict(item))

    def dropped(self, item: Any, exception: Exception) -> None:
        if isinstance(item, PriceItem):
            record = dataclasses.asdict(item)
            record["dropped"] = str(exception).split(":", 1)[0]
            self.records.append(record)

    def failed(self, path: str, exception: Exception) -> None:
        if self.failure is None:
            self.failure = f"{path}: {exception}"


def crawl_files(source: str, files: list[Path], settings: Settings, url: str | None = None,
                ) -> tuple[list[dict[str, Any]], CrawlResult]:
    """Crawl the saved `files` as `source` through the crawl service: what the crawl read
    (each item the pipelines dropped carries `dropped`: the reason they counted) and its
    result. ParseFailed names a file that cannot be read or that its parser refused."""
    from gpuradar.crawler.runner import spider_classes
    from gpuradar.crawler.service import Crawl, CrawlService

    classes = spider_classes(settings)
    if source not in classes:
        raise ParseFailed(f"unknown source {source!r}; known: {', '.join(classes)}")
    check_files(files)
    settings = saved_files_settings(settings, files, url)
    service = CrawlService(settings)
    crawl = Crawl(classes[source], settings, memory=service.memory)
    collected = _Collected(crawl.crawler)
    result = service.run(lambda: crawl.begin(service.runner))
    assert result is not None  # nothing stops this run early
    if collected.failure is not None:
        raise ParseFailed(collected.failure)
    return collected.records, result


def parse_files(source: str, files: list[Path], settings: Settings,
                url: str | None = None, fx: FxTable | None = None) -> Iterator[dict[str, Any]]:
    """Normalised items (dicts) the source's parser reads from `files`, stored nowhere
    (exchange rates: `fx`'s, none but USD by default). Items the pipelines drop are
    reported with `dropped` set to the reason."""
    settings = settings.copy()
    settings.set("GPURADAR_STORE", False, priority="cmdline")
    settings.set("GPURADAR_FX", fx or FxTable(), priority="cmdline")
    records, _result = crawl_files(source, files, settings, url)
    yield from records
