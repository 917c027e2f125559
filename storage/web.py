"""The reads behind the service's web page (scheduler/web.py): one call gathers everything
the page shows, from the same queries the command line uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gpuradar.storage.alerts import alert_rows, source_health
from gpuradar.storage.queries import (
    OfferFilter,
    cheapest_series,
    current_offers,
    gpu_names,
    last_crawls,
    last_observed,
    last_success,
)
from sqlalchemy import Engine

MAX_CHARTS = 8


def cheapest_per_gpu(engine: Engine, flt: OfferFilter) -> list[dict[str, Any]]:
    """The cheapest listed offer of each GPU (not known to be unavailable), cheapest first."""
    best: dict[str, dict[str, Any]] = {}
    for o in current_offers(engine, flt):
        if o["price_per_gpu_usd"] is not None and o["available"] is not False:
            best.setdefault(o["gpu"], o)
    return sorted(best.values(), key=lambda o: o["price_per_gpu_usd"])


def sources(engine: Engine) -> list[dict[str, Any]]:
    """Each crawled source: its latest crawl, last success and failures since then, and
    what its stored data describes (`observed_at`; a replay's capture date, `replayed`)."""
    health, ok, observed = source_health(engine), last_success(engine), last_observed(engine)
    out = []
    for name, crawl in sorted(last_crawls(engine).items()):
        failures = health.get(name, (None, 0))[1]
        last_ok, seen = ok.get(name), observed.get(name)
        started = crawl["started_at"]
        out.append({"source": name, "status": crawl["status"],
                    "last_crawl": started if started is None or started.tzinfo
                    else started.replace(tzinfo=UTC),
                    "last_success": last_ok, "failures": failures, "offers": crawl["items"],
                    "observed_at": seen.at if seen else None,
                    "replayed": seen.replayed if seen else False,
                    "captured": seen.captured if seen else None,
                    "error": (crawl["error"] or "").splitlines()[0][:300]
                    if crawl["error"] else ""})
    return out


def overview(engine: Engine, flt: OfferFilter, days: float = 7.0,
             now: datetime | None = None, buckets: int = 60) -> dict[str, Any]:
    """Everything the page shows: cheapest offer per GPU under the filter, the sources'
    freshness, firing alerts, the cheapest price over `days` of the charted GPUs, and the
    market index's median over `days` of the models with the most offers."""
    now = now or datetime.now(UTC)
    since = now - timedelta(days=days)
    cheapest = cheapest_per_gpu(engine, flt)
    charts = []
    for offer in cheapest[:MAX_CHARTS]:
        series = cheapest_series(engine, [offer["gpu"]], since, now, buckets, flt.pricing)
        if any(v is not None for _, v in series):
            charts.append({"gpu": offer["gpu"], "series": series})
    index_charts = []
    from gpuradar.storage.index import current_index, index_series

    figures = sorted(current_index(engine, flt.gpus or None, flt.pricing),
                     key=lambda f: (-f["offers"], f["gpu"], f["pricing"]))
    for fig in figures[:MAX_CHARTS]:
        series = index_series(engine, fig["gpu"], fig["pricing"], since, now, buckets)
        if any(v is not None for _, v in series):
            index_charts.append({"figure": fig, "series": series})
    return {"cheapest": cheapest, "sources": sources(engine), "index": index_charts,
            "alerts": [a for a in alert_rows(engine) if a["state"] == "firing"],
            "charts": charts, "since": since, "until": now, "gpus": gpu_names(engine)}
