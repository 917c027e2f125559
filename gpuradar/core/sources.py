"""The source registry: what every layer may ask about a provider, by source name.

The answers come from the Scrapy-free declarations in gpuradar.core.providers (the explicit
list `PROVIDERS`, which a test keeps equal to `scrapy list`); nothing here loads Scrapy or a
spider.
"""

from __future__ import annotations

from gpuradar.core.providers import BY_NAME, PROVIDERS, Provider


def providers() -> dict[str, Provider]:
    """name -> declaration, every source (FX included), in name order."""
    return dict(BY_NAME)


def price_sources() -> tuple[str, ...]:
    """Sources that yield offers (every source but the exchange-rate one)."""
    return tuple(p.name for p in PROVIDERS if p.kind != "fx")


def source_kind(name: str) -> str:
    """'marketplace', 'lambda', 'aws', 'cloud', 'page' or 'fx': the daemon's interval groups."""
    return BY_NAME[name].kind


def default_interval(name: str) -> float:
    return float(BY_NAME[name].default_interval)


def is_mainland(source: str, region: str) -> bool:
    """Whether an offer of `source` in `region` runs in mainland China."""
    provider = BY_NAME.get(source)
    return provider is not None and provider.is_mainland(region or "")


def mainland_sources() -> tuple[str, ...]:
    """Sources with at least some regions in mainland China."""
    return tuple(p.name for p in PROVIDERS if p.has_mainland_regions)
