"""The read side: every read of the store is here, or in one of the read modules named
below, and each read exists once (one `sources()`, one `cheapest_per_gpu()`), used by the
command line, the page, the JSON API and the Python API alike.

Here: crawls and source health (`last_success`, `last_crawls`, `source_health`,
`sources`), current offers (`current_offers`, `cheapest_per_gpu`, `cheapest_per_source`,
`offer_counts`, `gpu_names`), price history (`spans`, `gpu_spans`, `price_at`,
`cheapest_over`), FX rates, and the spans the market's patterns rest on (`pattern_spans`,
computed by gpuradar.core.patterns).

The read modules beside it, each for one reader:
* storage.dataset: the records the API, the Python API and exports publish (offers,
  history and crawls as records; GPU names resolved from a query);
* storage.page_reads: what the web page gathers in one call (`overview`, `price_history`,
  `data_version`, `first_observation`);
* storage.offers: the compact offer row (`OfferRow`, `live_offers`) alert rules and
  `recommend` keep in memory;
* storage.alert_store: what rule evaluation reads (offers and their changed columns, crawl
  versions, alert state) beside the alert state and outbox it writes;
* storage.index: the market index's points (`current_index`, `index_history`,
  `index_series`, `index_closes`) beside the writer of those points;
* storage.signals: each offer's last interruption-signal point (`last_points`, what the
  crawl writer compares with) and the band histories the page shows (`band_histories`),
  beside the writer of that series (one offer's whole series is `signal_changes` here).
A write never lives in a read module but for storage.alert_store, storage.index and
storage.signals, which keep a table's reads next to its one writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Engine, ScalarSelect, and_, func, or_, select, true, update

from gpuradar.core.clock import SYSTEM
from gpuradar.core.outcome import CrawlStatus
from gpuradar.core.patterns import Span
from gpuradar.core.units import region_matches
from gpuradar.storage.db import dialect_insert
from gpuradar.storage.models import CHANGE, CRAWL, CRAWL_FINISHED, CRAWL_NOT_OK, FX, OFFER


def _aware(ts: datetime | None) -> datetime | None:
    """A time read as UTC when the database handed it back without a zone."""
    if ts is not None and ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts


# Times come back aware, in UTC, on both databases: the tables' datetime columns are
# storage.models.UTCDateTime, which adds the zone SQLite does not keep (MAX and COALESCE of
# such a column keep its type).


# -- crawls ------------------------------------------------------------------------------
def last_success(engine: Engine) -> dict[str, datetime]:
    """When each source's last successful crawl started: when it is next due, the metric.
    What its data describes (a replay's capture time) is `last_observed`, read from the
    same crawl."""
    q = (select(CRAWL.c.source, CRAWL.c.started_at)
         .where(CRAWL.c.id.in_(newest_crawl_ids(CRAWL.c.status == CrawlStatus.OK))))
    with engine.connect() as conn:
        return dict(conn.execute(q).all())


class Observed(NamedTuple):
    """What a source's stored offers describe: the time of its last successful crawl's data
    (a replay's capture time), whether that crawl was replayed from a recording, and the
    capture date as the recording states it (None: live, or not stated)."""

    at: datetime
    replayed: bool
    captured: str | None


def newest_crawl_ids(*where: ColumnElement[bool]) -> ScalarSelect[Any]:
    """The id of each source's newest crawl among those `where` selects (all by default):
    `CRAWL.c.id.in_(...)` picks one row per source, whatever order the database returns."""
    return (select(func.max(CRAWL.c.id)).where(*where).group_by(CRAWL.c.source)
            .scalar_subquery())


def last_observed(engine: Engine) -> dict[str, Observed]:
    """Per source, what its last successful crawl observed: the end of every open span and
    the age of every listed offer. For a live crawl that is its start; for a crawl replayed
    from a recording the recording's capture time, never the time it was replayed."""
    q = (select(CRAWL.c.source, func.coalesce(CRAWL.c.observed_at, CRAWL.c.started_at),
                CRAWL.c.replayed, CRAWL.c.captured)
         .where(CRAWL.c.id.in_(newest_crawl_ids(CRAWL.c.status == CrawlStatus.OK))))
    with engine.connect() as conn:
        return {s: Observed(at, bool(replayed), captured)
                for s, at, replayed, captured in conn.execute(q)}


def last_crawls(engine: Engine) -> dict[str, dict[str, Any]]:
    """The latest crawl of each source, whatever its outcome."""
    q = select(CRAWL).where(CRAWL.c.id.in_(newest_crawl_ids()))
    with engine.connect() as conn:
        return {r.source: dict(r._mapping) for r in conn.execute(q)}


def uncatalogued_offers(engine: Engine) -> dict[str, int]:
    """Offers each source's latest finished crawl could not map to a GPU model or count."""
    q = (select(CRAWL.c.source, CRAWL.c.uncatalogued)
         .where(CRAWL.c.id.in_(newest_crawl_ids(CRAWL_FINISHED))))
    with engine.connect() as conn:
        return {source: sum((names or {}).values()) for source, names in conn.execute(q)}


def consecutive_failures(engine: Engine, source: str, limit: int = 50) -> int:
    """Failed crawls of `source` in a row, up to its last finished crawl that did not fail
    (ok or partial: a partial crawl is no failure to the daemon either), counted up to
    `limit` (the daemon's back-off and the failures gauge; a long outage reads no more)."""
    q = (select(CRAWL.c.status).where(CRAWL.c.source == source, CRAWL_FINISHED)
         .order_by(CRAWL.c.id.desc()).limit(limit))
    n = 0
    with engine.connect() as conn:
        for (status,) in conn.execute(q):
            if status != CrawlStatus.FAILED:
                break
            n += 1
    return n


def mark_interrupted_crawls(engine: Engine, now: datetime | None = None) -> int:
    """Crawls left 'running' by a killed process are failed: they closed nothing."""
    with engine.begin() as conn:
        return conn.execute(update(CRAWL).where(CRAWL.c.status == CrawlStatus.RUNNING,
                                               CRAWL_NOT_OK).values(
            status=CrawlStatus.FAILED, error="interrupted (process stopped during the crawl)",
            finished_at=now or SYSTEM.now())).rowcount


def source_health(engine: Engine, *, by_run: bool = False
                  ) -> dict[str, tuple[datetime | None, int]]:
    """source -> (what its last successful crawl observed, failed crawls since then). The
    time is the data's: a crawl replayed from a recording counts from the recording's
    capture time, so replayed data from months ago is as stale to rules as it is old.
    `by_run`: the time the crawl ran instead (the market index, like `last_success`)."""
    observed = CRAWL.c.started_at if by_run else func.coalesce(CRAWL.c.observed_at,
                                                               CRAWL.c.started_at)
    last_ok = (select(CRAWL.c.source, CRAWL.c.id.label("ok_id"), observed.label("ok_at"))
               .where(CRAWL.c.id.in_(newest_crawl_ids(CRAWL.c.status == CrawlStatus.OK)))
               .subquery())
    fails = (select(CRAWL.c.source, func.count().label("n"))
             .select_from(CRAWL.outerjoin(last_ok, last_ok.c.source == CRAWL.c.source))
             .where(CRAWL.c.status.in_((CrawlStatus.FAILED, CrawlStatus.PARTIAL)), CRAWL_NOT_OK,
                    or_(last_ok.c.ok_id.is_(None), CRAWL.c.id > last_ok.c.ok_id))
             .group_by(CRAWL.c.source))
    out: dict[str, tuple[datetime | None, int]] = {}
    with engine.connect() as conn:
        for source, _id, at in conn.execute(select(last_ok)):
            out[source] = (_aware(at), 0)
        for source, n in conn.execute(fails):
            out[source] = (out.get(source, (None, 0))[0], n)
    return out



def sources(engine: Engine, *, whole: bool = False) -> list[dict[str, Any]]:
    """Each crawled source: its latest crawl, last success and failures since then, and
    what its stored data describes (`observed_at`; a replay's capture date, `replayed`),
    times in UTC: the page, the API and the Python API (`gpuradar.open().sources()`).
    `whole` adds what `gpuradar sources` shows of the latest crawl besides: its whole
    error (`last_error`; `error` is its first line) and the names it could not map to a
    GPU model or count (`uncatalogued`, name -> offers)."""
    health, ok, observed = source_health(engine), last_success(engine), last_observed(engine)
    out = []
    for name, crawl in sorted(last_crawls(engine).items()):
        failures = health.get(name, (None, 0))[1]
        last_ok, seen = ok.get(name), observed.get(name)
        started = crawl["started_at"]
        row = {"source": name, "status": crawl["status"],
               "last_crawl": _aware(started),
               "last_success": _aware(last_ok), "failures": failures,
               "offers": crawl["items"],
               "observed_at": _aware(seen.at) if seen else None,
               "replayed": seen.replayed if seen else False,
               "captured": seen.captured if seen else None,
               "error": (crawl["error"] or "").splitlines()[0][:300]
               if crawl["error"] else ""}
        if whole:
            row |= {"last_error": crawl["error"] or "",
                    "uncatalogued": crawl["uncatalogued"] or {}}
        out.append(row)
    return out



# -- current offers ----------------------------------------------------------------------
@dataclass
class OfferFilter:
    gpus: Sequence[str] = ()          # canonical names (already resolved from a family)
    vendors: Sequence[str] = ()       # accelerator vendors of the catalog ("NVIDIA", "Google")
    kinds: Sequence[str] = ()         # accelerator kinds ("GPU", "TPU", "NPU"; "ASIC" = NPU)
    pricing: str | None = None
    sources: Sequence[str] = ()
    regions: Sequence[str] = ()       # globs
    max_price: float | None = None    # USD per GPU-hour
    min_gpus: float | None = None
    min_gpu_memory: float | None = None
    available_only: bool = False
    include_inactive: bool = False


def current_offers(engine: Engine, flt: OfferFilter | None = None,
                   limit: int | None = None) -> list[dict[str, Any]]:
    """Offers as they stand now, cheapest USD per GPU-hour first."""
    flt = flt or OfferFilter()
    conds: list[ColumnElement[bool]] = []
    if not flt.include_inactive:
        conds.append(OFFER.c.active.is_(True))
    if flt.gpus:
        conds.append(OFFER.c.gpu.in_(list(flt.gpus)))
    if flt.vendors:
        conds.append(OFFER.c.gpu.in_(_catalog_names("vendor", flt.vendors)))
    if flt.kinds:
        conds.append(OFFER.c.gpu.in_(_catalog_names("kind", flt.kinds)))
    if flt.pricing:
        conds.append(OFFER.c.pricing == flt.pricing)
    if flt.sources:
        conds.append(OFFER.c.source.in_(list(flt.sources)))
    if flt.max_price is not None:
        conds.append(OFFER.c.price_per_gpu_usd <= flt.max_price)
    if flt.min_gpus is not None:
        conds.append(OFFER.c.gpu_count >= flt.min_gpus)
    if flt.min_gpu_memory is not None:
        conds.append(OFFER.c.gpu_memory_gb >= flt.min_gpu_memory)
    if flt.available_only:
        conds.append(or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)))
    q = (select(OFFER).where(and_(true(), *conds))
         .order_by(OFFER.c.price_per_gpu_usd.is_(None), OFFER.c.price_per_gpu_usd,
                   OFFER.c.source, OFFER.c.region, OFFER.c.instance_type))
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(q)]
    if flt.regions:
        rows = [r for r in rows
                if region_matches(r["region"], r["zone"], flt.regions, r["source"])]
    seen = last_observed(engine)
    for r in rows:
        obs = seen.get(r["source"])
        r["observed_at"] = obs.at if obs else r["changed_at"]
        r["replayed"] = obs.replayed if obs else False
        r["captured"] = obs.captured if obs else None
    return rows[:limit] if limit else rows


def _catalog_names(field: str, values: Sequence[str]) -> list[str]:
    """Catalog names of the accelerators of any of these vendors (or kinds): offers of
    accelerators the catalog does not know have neither, so they never match."""
    from gpuradar.core import gpus

    return sorted({g.name for v in values for g in gpus.select(**{field: v})})


def gpu_names(engine: Engine) -> list[str]:
    """Every GPU name stored, including raw names the catalog does not know."""
    with engine.connect() as conn:
        return sorted(conn.execute(select(OFFER.c.gpu).distinct()).scalars())


def offer_counts(engine: Engine) -> list[tuple[str, str, str, int]]:
    """(source, pricing, availability, count) of listed offers, for metrics."""
    q = (select(OFFER.c.source, OFFER.c.pricing, OFFER.c.available, func.count())
         .where(OFFER.c.active.is_(True))
         .group_by(OFFER.c.source, OFFER.c.pricing, OFFER.c.available))
    out = []
    with engine.connect() as conn:
        for source, pricing, available, n in conn.execute(q):
            state = ("unknown" if available is None
                     else "available" if available else "unavailable")
            out.append((source, pricing, state, n))
    return out


def cheapest_per_source(engine: Engine) -> list[tuple[str, str, str, float]]:
    """(gpu, pricing, source, min USD per GPU-hour) over listed, not-unavailable offers,
    aggregated by the database on a covering index (ix_offer_cheapest): the metrics'
    gauge, read at every scrape."""
    q = (select(OFFER.c.gpu, OFFER.c.pricing, OFFER.c.source, func.min(OFFER.c.price_per_gpu_usd))
         .where(OFFER.c.active.is_(True), OFFER.c.price_per_gpu_usd.is_not(None),
                or_(OFFER.c.available.is_(True), OFFER.c.available.is_(None)))
         .group_by(OFFER.c.gpu, OFFER.c.pricing, OFFER.c.source))
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(q)]



def cheapest_per_gpu(engine: Engine, flt: OfferFilter | None = None) -> list[dict[str, Any]]:
    """The cheapest listed offer of each GPU and pricing (not known to be unavailable),
    cheapest first: a model's on-demand price is never hidden behind its spot one (the
    page, `gpuradar demo`)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for o in current_offers(engine, flt):
        if o["price_per_gpu_usd"] is not None and o["available"] is not False:
            best.setdefault((o["gpu"], o["pricing"]), o)
    return sorted(best.values(), key=lambda o: o["price_per_gpu_usd"])


# -- history -----------------------------------------------------------------------------
def find_offer(engine: Engine, source: str, instance_type: str, region: str | None = None,
               pricing: str | None = None, zone: str | None = None) -> list[dict[str, Any]]:
    conds = [OFFER.c.source == source, OFFER.c.instance_type == instance_type]
    if region:
        conds.append(OFFER.c.region == region)
    if pricing:
        conds.append(OFFER.c.pricing == pricing)
    if zone is not None:
        conds.append(OFFER.c.zone == zone)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(OFFER).where(*conds))]


def _when(at: int) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _spans_of(offer: dict[str, Any], changes: Sequence[tuple[int, int | None, bool | None]],
              end: datetime | None) -> list[dict[str, Any]]:
    """Turn an offer's change points (oldest first) into spans.

    USD values use the conversion of the offer's latest observation: the quoted price is
    exact, the USD figure of an old CNY span follows today's rate."""
    factor = (offer["price_usd"] / offer["price"]
              if offer.get("price_usd") and offer.get("price") else None)
    count = offer.get("gpu_count") or None
    out = []
    for n, (at, price_micros, available) in enumerate(changes):
        if price_micros is None:  # not listed from here on
            continue
        nxt = changes[n + 1][0] if n + 1 < len(changes) else None
        price = price_micros / 1_000_000
        usd = round(price * factor, 6) if factor is not None else None
        start, stop = _when(at), (_when(nxt) if nxt is not None else None)
        out.append({
            "offer_id": offer["id"], "price": price, "currency": offer["currency"],
            "price_usd": usd, "price_per_gpu_usd": round(usd / count, 6) if usd and count
            else None, "available": available, "valid_from": start, "valid_to": stop,
            "open": stop is None, "seen_until": stop or (end if end and end > start else start),
        })
    return out


def _changes(conn, offer_ids: Sequence[int], until: datetime | None = None
             ) -> dict[int, list[tuple[int, int | None, bool | None]]]:
    q = select(CHANGE.c.offer_id, CHANGE.c.at, CHANGE.c.price_micros, CHANGE.c.available)
    if until is not None:
        q = q.where(CHANGE.c.at <= int(until.timestamp()))
    out: dict[int, list] = {}
    ids = list(offer_ids)
    for chunk in range(0, len(ids), 5000):
        part = q.where(CHANGE.c.offer_id.in_(ids[chunk:chunk + 5000]))
        for oid, at, pm, av in conn.execute(part.order_by(CHANGE.c.offer_id, CHANGE.c.at)):
            out.setdefault(oid, []).append((at, pm, av))
    return out


def spans(engine: Engine, offer_id: int) -> list[dict[str, Any]]:
    """The spans of one offer, oldest first; an open span ends at what the source's last
    successful crawl observed (`seen_until`; a replay's capture time, then marked
    `replayed` with the `captured` date)."""
    with engine.connect() as conn:
        offer = dict(conn.execute(select(OFFER).where(OFFER.c.id == offer_id)).one()._mapping)
        changes = _changes(conn, [offer_id]).get(offer_id, [])
    seen = last_observed(engine).get(offer["source"])
    out = _spans_of(offer, changes, seen.at if seen else None)
    for span in out:
        if span["open"] and seen is not None and seen.replayed:
            span.update(replayed=True, captured=seen.captured)
    return out


def signal_changes(engine: Engine, offer_id: int) -> list[dict[str, Any]]:
    """One offer's interruption signal over time (table interruption_change), oldest first:
    each value from `valid_from` until the next (`valid_to` None: the last one stored), as
    gpuradar.core.spot reads it. Only published values: where the signal was unknown, the
    last known value is not shown as ending (unknown is not stored)."""
    from gpuradar.core.spot import signal_of
    from gpuradar.storage.models import SIGNAL

    q = (select(SIGNAL.c.at, SIGNAL.c.band, SIGNAL.c.rate, SIGNAL.c.period, SIGNAL.c.source,
                SIGNAL.c.as_of).where(SIGNAL.c.offer_id == offer_id).order_by(SIGNAL.c.at))
    with engine.connect() as conn:
        points = conn.execute(q).all()
    out = []
    for n, (at, band, rate, period, source, as_of) in enumerate(points):
        signal = signal_of({"interruption": band, "interruption_rate": rate,
                            "interruption_window": period, "interruption_source": source,
                            "interruption_as_of": as_of})
        record = signal.record()
        out.append({"offer_id": offer_id, "valid_from": _when(at),
                    "valid_to": _when(points[n + 1][0]) if n + 1 < len(points) else None,
                    "band": band, "rate": rate, "period": period, "source": source,
                    "as_of": as_of, "text": signal.label(),
                    "monthly_low": record["monthly_low"],
                    "monthly_high": record["monthly_high"], "risk": record["risk"]})
    return out


def replayed_sources(engine: Engine, gpus: Sequence[str] | None = None,
                     pricing: str | None = None) -> dict[str, str | None]:
    """Sources whose stored offers (of these GPUs) come from a replayed recording, with
    the capture date each recording states."""
    seen = {s: o for s, o in last_observed(engine).items() if o.replayed}
    if not seen:
        return {}
    conds: list[ColumnElement[bool]] = [OFFER.c.source.in_(sorted(seen))]
    if gpus is not None:
        conds.append(OFFER.c.gpu.in_(list(gpus)))
    if pricing:
        conds.append(OFFER.c.pricing == pricing)
    with engine.connect() as conn:
        found = conn.execute(select(OFFER.c.source).where(*conds).distinct()).scalars()
        return {s: seen[s].captured for s in found}


def price_at(engine: Engine, offer_id: int, at: datetime) -> dict[str, Any] | None:
    """The span in force at `at`, or None when the offer was not listed then (or not yet
    known). A price holds until the next observation says otherwise: an open span answers
    any time after it started, marked `carried` past what was last observed (`seen_until`;
    a replay's capture), so the caller can say the price is carried forward."""
    for span in spans(engine, offer_id):
        if span["valid_from"] <= at and (span["valid_to"] is None or at < span["valid_to"]):
            return {**span, "carried": span["open"] and at > span["seen_until"]}
    return None


def gpu_spans(engine: Engine, gpus: Sequence[str] | None, since: datetime,
              until: datetime | None = None, pricing: str | None = None,
              sources: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Spans overlapping [since, until] of every offer of the given GPUs (None: every GPU),
    each merged with its offer's identity and specs. An open span overlaps every time after
    its start: its price holds until an observation says otherwise."""
    until = until or SYSTEM.now()
    conds: list[ColumnElement[bool]] = []
    if gpus is not None:
        conds.append(OFFER.c.gpu.in_(list(gpus)))
    if pricing:
        conds.append(OFFER.c.pricing == pricing)
    if sources:
        conds.append(OFFER.c.source.in_(list(sources)))
    ends = {s: o.at for s, o in last_observed(engine).items()}
    out = []
    with engine.connect() as conn:
        offers = {r.id: dict(r._mapping) for r in conn.execute(select(OFFER).where(*conds))}
        changes = _changes(conn, list(offers), until)
    for oid, rows in changes.items():
        offer = offers[oid]
        for span in _spans_of(offer, rows, ends.get(offer["source"])):
            if (not span["open"] and span["seen_until"] < since) \
                    or span["price_per_gpu_usd"] is None:
                continue
            out.append({**{k: v for k, v in offer.items() if k not in span}, **span})
    return out


def pattern_spans(engine: Engine, gpus: Sequence[str] | None, since: datetime,
                  until: datetime, pricing: str | None = None,
                  regions: Sequence[str] = ()) -> list[Span]:
    """The spans of every offer of these GPUs within [since, until], as
    gpuradar.core.patterns.Span (price per GPU-hour in USD, epoch seconds), filtered by
    region globs as `prices --region` is. Only spans with a USD price are returned, and
    none of a time the offer was known unavailable."""
    out = []
    for s in gpu_spans(engine, gpus, since, until, pricing):
        if s["available"] is False:
            continue
        if regions and not region_matches(s["region"], s["zone"], regions, s["source"]):
            continue
        end = s["valid_to"]
        # a span begun before the window counts from the window's start
        out.append(Span(s["gpu"], s["pricing"], s["region"],
                        int(max(s["valid_from"], since).timestamp()),
                        None if end is None else int(end.timestamp()),
                        int(s["seen_until"].timestamp()), s["price_per_gpu_usd"]))
    return out


def cheapest_over(engine: Engine, gpus: Sequence[str], since: datetime,
                  until: datetime | None = None, pricing: str | None = None,
                  available_only: bool = True) -> dict[str, Any] | None:
    """The lowest USD per GPU-hour any offer of these GPUs had within [since, until]."""
    best = None
    for s in gpu_spans(engine, gpus, since, until, pricing):
        if available_only and s["available"] is False:
            continue
        if best is None or s["price_per_gpu_usd"] < best["price_per_gpu_usd"]:
            best = s
    return best


def cheapest_series(engine: Engine, gpus: Sequence[str], since: datetime, until: datetime,
                    buckets: int, pricing: str | None = None
                    ) -> list[tuple[datetime, float | None]]:
    """Cheapest USD per GPU-hour in each of `buckets` equal slices of [since, until]."""
    return min_per_bucket(gpu_spans(engine, gpus, since, until, pricing), since, until, buckets)


def min_per_bucket(spans: Iterable[dict[str, Any]], since: datetime, until: datetime,
                   buckets: int) -> list[tuple[datetime, float | None]]:
    """The lowest USD per GPU-hour of the spans (not known unavailable) touching each of
    `buckets` equal slices of [since, until]: slice i holds a span when the span starts
    before the slice ends and holds until at least the slice's start. An open span holds
    to `until`: a price stands until the next observation of its offer says otherwise (a
    replay, whose span is its capture instant, is carried forward from the capture)."""
    step = (until - since) / buckets
    best: list[float | None] = [None] * buckets
    for s in spans:
        if s["available"] is False:
            continue
        # timedelta // timedelta is exact integer arithmetic on microseconds
        first = max(0, (s["valid_from"] - since) // step)
        last = (buckets - 1 if s["open"]
                else min(buckets - 1, (s["seen_until"] - since) // step))
        price = s["price_per_gpu_usd"]
        for i in range(first, last + 1):
            if best[i] is None or price < best[i]:
                best[i] = price
    return [(since + step * i, v) for i, v in enumerate(best)]


# -- FX ----------------------------------------------------------------------------------
def latest_fx(engine: Engine) -> dict[str, tuple[float, date, str]]:
    """currency -> (USD per unit, rate date, origin) from the newest stored rate."""
    newest = (select(FX.c.currency, func.max(FX.c.rate_date).label("d"))
              .group_by(FX.c.currency).subquery())
    q = select(FX.c.currency, FX.c.usd_per_unit, FX.c.rate_date, FX.c.source).join(
        newest, and_(FX.c.currency == newest.c.currency, FX.c.rate_date == newest.c.d))
    with engine.connect() as conn:
        return {c: (u, d, s) for c, u, d, s in conn.execute(q)}


def store_fx(engine: Engine, rates: dict[str, float], rate_date: date, origin: str = "ecb",
             now: datetime | None = None) -> int:
    """Upsert USD-per-unit rates for one date (`now`: when they were fetched)."""
    if not rates:
        return 0
    now = now or SYSTEM.now()
    rows = [{"currency": c, "rate_date": rate_date, "usd_per_unit": v, "source": origin,
             "fetched_at": now} for c, v in rates.items()]
    ins = dialect_insert(engine.dialect.name, FX)
    stmt = ins.on_conflict_do_update(
        index_elements=["currency", "rate_date"],
        set_={"usd_per_unit": ins.excluded.usd_per_unit, "source": ins.excluded.source,
              "fetched_at": ins.excluded.fetched_at})
    with engine.begin() as conn:
        conn.execute(stmt, rows)
    return len(rows)
