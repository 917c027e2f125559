"""The reads behind the service's web page (scheduler/web.py): one call gathers everything
the page shows, from the same queries the command line uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, select

from gpuradar.core.clock import SYSTEM
from gpuradar.core.units import region_matches
from gpuradar.storage.alert_store import alert_rows
from gpuradar.storage.models import OFFER
from gpuradar.storage.queries import (
    OfferFilter,
    cheapest_per_gpu,
    gpu_names,
    gpu_spans,
    min_per_bucket,
    sources,
)

MAX_INDEX_CHARTS = 8  # the models with the most offers; the API has every one


def first_observation(engine: Engine) -> datetime | None:
    """When the oldest stored offer was first seen (a replay: its capture): where the
    page's longest history range starts."""
    with engine.connect() as conn:
        first = conn.execute(select(func.min(OFFER.c.first_seen))).scalar_one()
    if isinstance(first, str):  # SQLite hands an aggregate's timestamp back as text
        first = datetime.fromisoformat(first)
    return first if first is None or first.tzinfo else first.replace(tzinfo=UTC)


def price_history(engine: Engine, gpus: list[str], flt: OfferFilter, since: datetime,
                  until: datetime, buckets: int
                  ) -> dict[str, dict[str, list[tuple[datetime, float | None]]]]:
    """GPU -> pricing -> the cheapest price per GPU-hour in each of `buckets` slices of
    [since, until], under the page's pricing, source and region filters; spot and on-demand
    apart (a spot offer appearing is not an on-demand price drop). A GPU or pricing with no
    price in the range is left out. One read for all the GPUs."""
    if not gpus:
        return {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for span in gpu_spans(engine, gpus, since, until, flt.pricing, flt.sources):
        if flt.regions and not region_matches(span["region"], span["zone"], flt.regions,
                                              span["source"]):
            continue
        groups.setdefault((span["gpu"], span["pricing"]), []).append(span)
    out: dict[str, dict[str, list[tuple[datetime, float | None]]]] = {}
    for (gpu, pricing), spans in sorted(groups.items()):
        series = min_per_bucket(spans, since, until, buckets)
        if any(v is not None for _, v in series):
            out.setdefault(gpu, {})[pricing] = series
    return out


def overview(engine: Engine, flt: OfferFilter, days: float = 7.0,
             now: datetime | None = None, buckets: int = 60) -> dict[str, Any]:
    """Everything the page shows: cheapest offer per GPU under the filter, the sources'
    freshness, firing alerts, the cheapest spot and on-demand price over `days` of every
    listed GPU (`charts`; `uncharted` lists the listed GPUs with no price in the range),
    and the market index's median over `days` of the models with the most offers."""
    now = now or SYSTEM.now()
    since = now - timedelta(days=days)
    cheapest = cheapest_per_gpu(engine, flt)
    listed = list(dict.fromkeys(o["gpu"] for o in cheapest))  # each GPU once, cheapest first
    history = price_history(engine, listed, flt, since, now, buckets)
    charts = [{"gpu": gpu, "series": history[gpu]} for gpu in listed if gpu in history]
    uncharted = [o for o in cheapest if o["gpu"] not in history]
    index_charts = []
    from gpuradar.storage.index import current_index, index_series

    figures = sorted(current_index(engine, flt.gpus or None, flt.pricing),
                     key=lambda f: (-f["offers"], f["gpu"], f["pricing"]))
    for fig in figures[:MAX_INDEX_CHARTS]:
        series = index_series(engine, fig["gpu"], fig["pricing"], since, now, buckets)
        if any(v is not None for _, v in series):
            index_charts.append({"figure": fig, "series": series})
    alerts = alert_rows(engine, include_inactive=True)
    return {"cheapest": cheapest, "sources": sources(engine), "index": index_charts,
            "index_total": len(figures),
            # rules firing (as gpuradar_rules_firing counts them); a stale source is not a
            # rule: its alert (firing, or ended) shows in the sources table instead
            "alerts": [a for a in alerts if a["kind"] == "rule" and a["state"] == "firing"],
            "stale": {a["name"]: a for a in alerts if a["kind"] == "source"},
            "charts": charts, "uncharted": uncharted, "since": since, "until": now,
            "listed": listed,
            "gpus": gpu_names(engine)}


def data_version(engine: Engine) -> tuple[tuple[Any, ...], datetime | None]:
    """What every answer of the page and the API is a function of, cheaply: (a key that
    changes whenever a crawl starts or ends, an index point is written or an alert changes;
    the time of the newest of those changes, None before any). The read side caches its
    answers under the key (scheduler/server.py) and dates them with the time."""
    from sqlalchemy import case, func, select

    from gpuradar.storage.models import CRAWL, INDEX, STATE

    running = case((CRAWL.c.status == "running", CRAWL.c.id), else_=0)
    crawls = select(func.max(CRAWL.c.id), func.sum(running), func.max(CRAWL.c.finished_at),
                    func.max(CRAWL.c.started_at))
    with engine.connect() as conn:
        newest, running_ids, finished, started = conn.execute(crawls).one()
        index_at = conn.execute(select(func.max(INDEX.c.at))).scalar()
        alert_at = conn.execute(select(func.max(STATE.c.updated_at))).scalar()
    times = [_utc(t) for t in (finished, started, alert_at) if t is not None]
    if index_at is not None:
        times.append(datetime.fromtimestamp(index_at, UTC))
    key = (newest, running_ids, finished, index_at, alert_at)
    return key, max(times) if times else None


def _utc(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
