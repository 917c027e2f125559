"""Small helpers several test modules share."""

from __future__ import annotations

import socket

from scrapy.settings import Settings


def free_port() -> int:
    """A port nobody listens on (aiosmtpd's Controller cannot take port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spider_settings(source: str, **options) -> Settings:
    """The project's Scrapy settings with `options` as the source's config section."""
    settings = Settings()
    settings.setmodule("gpuradar.crawler.settings")
    settings.set("GPURADAR_SOURCES", {source: options})
    return settings
