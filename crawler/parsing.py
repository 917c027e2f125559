"""Running a spider's parser on saved responses, without a crawl (`gpuradar parse`).

This is how a changed page is debugged and how every parser is checked against real
captures. A spider that reads several kinds of response decides from the content which
parser applies (`GpuRadarSpider.parse_file`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse, XmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from gpuradar.core.currency import FxTable
from gpuradar.core.items import FxRateItem, PriceItem
from gpuradar.crawler.pipelines import normalize, validate
from gpuradar.crawler.spiders.base import ParseError


class ParseFailed(RuntimeError):
    pass


def response_for(path: Path, url: str | None = None) -> TextResponse:
    body = path.read_bytes()
    head = body.lstrip()[:200].lower()
    url = url or path.resolve().as_uri()
    if head.startswith(b"<?xml") or b"<gesmes" in head:
        cls = XmlResponse
    elif head.startswith((b"<!doctype html", b"<html", b"<")):
        cls = HtmlResponse
    else:
        cls = TextResponse
    return cls(url=url, body=body, encoding="utf-8", request=Request(url))


def parse_files(source: str, files: list[Path], settings: Settings,
                url: str | None = None, fx: FxTable | None = None) -> Iterator[dict[str, Any]]:
    """Normalised items (dicts) the source's parser reads from `files`. Items the pipeline
    would drop are reported with `dropped` set to the reason."""
    from gpuradar.crawler.runner import spider_classes

    classes = spider_classes(settings)
    if source not in classes:
        raise ParseFailed(f"unknown source {source!r}; known: {', '.join(classes)}")
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():  # a crawler needs one installed, though none runs here
        install_reactor(settings["TWISTED_REACTOR"])
    crawler = get_crawler(classes[source], settings.copy_to_dict())
    spider = crawler._create_spider()
    fx = fx or FxTable()
    for path in files:
        if not path.exists():
            raise ParseFailed(f"{path}: no such file")
        if path.is_dir():
            raise ParseFailed(f"{path}: a directory; give the saved responses in it (e.g. "
                              f"{path}/*.json)")
        try:
            response = response_for(path, url)
        except OSError as exc:  # unreadable: permissions, a device, ...
            raise ParseFailed(f"{path}: cannot be read ({exc.strerror or exc})") from None
        try:
            for out in spider.parse_file(response):
                if isinstance(out, PriceItem):
                    reason = validate(out) or normalize(out, fx)
                    record = dataclasses.asdict(out)
                    if reason:
                        record["dropped"] = reason
                    yield record
                elif isinstance(out, FxRateItem):
                    yield dataclasses.asdict(out)
        except ParseError as exc:
            raise ParseFailed(f"{path}: {exc}") from None
