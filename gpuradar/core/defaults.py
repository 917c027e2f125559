"""Defaults stated once: every layer that needs one of these reads it from here (the Scrapy
settings module, the pipelines, storage, the daemon's plans, delivery), so a default cannot
differ between two places. The configuration can override each (see core/config.py)."""

from __future__ import annotations

#: Plausible USD per GPU-hour, [low, high], both ends inclusive: a price outside is
#: quarantined (never stored). `sources.<name>.price_range` or GPURADAR_PRICE_RANGE.
PRICE_RANGE: tuple[float, float] = (0.001, 1000.0)
#: A clean crawl listing fewer offers than this share of the source's last successful crawl
#: closes nothing until the next crawl confirms the drop; 0 turns the guard off.
#: `sources.<name>.shrink_guard` or GPURADAR_SHRINK_GUARD.
SHRINK_GUARD: float = 0.5
#: A crawl still running after this many seconds is closed and recorded failed (Scrapy's
#: CLOSESPIDER_TIMEOUT). `sources.<name>.timeout` or `daemon.crawl_timeout`.
CRAWL_TIMEOUT: float = 900.0
#: One whole download, seconds (Scrapy's DOWNLOAD_TIMEOUT; its own default is 180).
DOWNLOAD_TIMEOUT: float = 60.0
#: One notification sent through apprise, seconds. `alerts.send_timeout`.
SEND_TIMEOUT: float = 30.0
