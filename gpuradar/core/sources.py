"""The source registry: what every layer may ask about a provider, read from its spider.

Scrapy's spider loader is the list of providers (`scrapy list`); a provider's facts (kind,
default interval, which regions are in mainland China, ...) are class attributes of its
spider in crawler/spiders/. Layers above the crawler read them here, by spider name, so
adding a provider is one spider module plus its tests. The spiders are found by module
name through Scrapy's loader (no import of the crawler layer from here).
"""

from __future__ import annotations

from functools import cache
from typing import Any

SPIDER_MODULES = ["gpuradar.crawler.spiders"]


@cache
def spider_classes() -> dict[str, Any]:
    """name -> spider class, every source Scrapy's loader finds (FX included)."""
    from scrapy.settings import Settings
    from scrapy.spiderloader import SpiderLoader

    loader = SpiderLoader(Settings({"SPIDER_MODULES": SPIDER_MODULES}))
    return {name: loader.load(name) for name in sorted(loader.list())}


def price_sources() -> tuple[str, ...]:
    """Sources that yield offers (every spider but the exchange-rate one)."""
    return tuple(n for n, cls in spider_classes().items() if cls.kind != "fx")


def source_kind(name: str) -> str:
    """'marketplace', 'lambda', 'aws', 'cloud' or 'fx': the daemon's interval groups."""
    return spider_classes()[name].kind


def default_interval(name: str) -> float:
    return float(spider_classes()[name].default_interval)


def is_mainland(source: str, region: str) -> bool:
    """Whether an offer of `source` in `region` runs in mainland China."""
    cls = spider_classes().get(source)
    return bool(cls is not None and cls.is_mainland(region or ""))


def mainland_sources() -> tuple[str, ...]:
    """Sources with at least some regions in mainland China."""
    return tuple(n for n, cls in spider_classes().items() if cls.has_mainland_regions)
