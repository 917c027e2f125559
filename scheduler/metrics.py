"""Prometheus metrics of the daemon.

Events (crawls, notifications, reloads) are counters and a histogram updated as they
happen. State that lives in the database (offers, cheapest prices, last successes, alerts
firing, outbox backlog) comes from a custom collector, so an offer that vanished or a GPU no
longer listed disappears from /metrics instead of lingering, and the figures are right after
a restart. That state changes only when a crawl starts or ends, an index point is written or
an alert changes, which the data version (storage.page_reads.data_version, one tiny query) says:
a scrape reads it and the outbox's count, and draws the rest again only when it changed;
the text of those series is rendered once per version (`Metrics.exposition`), and an
in-memory family's text again only when its samples changed. So a scrape's cost does not
grow with what is stored. Every label has a bounded set of values: sources,
statuses, drop reasons, accelerator models of the catalog (GPUs, TPUs, NPUs) and their
vendors and kinds, pricing, notification channels.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from gpuradar import __version__
from gpuradar.core.outcome import CrawlStatus

log = logging.getLogger(__name__)

PREFIX = "gpuradar"
DURATION_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800)


@cache
def catalog_gpu(name: str) -> bool:
    """True for a canonical GPU of the catalog; raw names of GPUs the catalog does not know
    are left out of labels (they are unbounded) and counted apart."""
    from gpuradar.core import gpus

    found = gpus.lookup(name)
    return found is not None and found.name == name


def accelerator_info(names: set[str]) -> GaugeMetricFamily:
    """`gpuradar_accelerator_info{gpu, vendor, kind, frameworks} 1` for the catalog models
    that have a price series: join on `gpu` to select TPUs, a vendor or a software stack."""
    from gpuradar.core import gpus

    info = GaugeMetricFamily(
        f"{PREFIX}_accelerator_info",
        "Vendor, kind (GPU, TPU, NPU) and frameworks of each accelerator model with a "
        "price series (value 1).", labels=["gpu", "vendor", "kind", "frameworks"])
    for name in sorted(names):
        entry = gpus.CATALOG[name]
        info.add_metric([name, entry.vendor, entry.kind, ",".join(entry.frameworks or ())], 1)
    return info


def index_families(engine: Engine) -> Iterator[GaugeMetricFamily]:
    """The market index as it stands: `gpuradar_price_index_usd_per_gpu_hour{gpu,pricing,
    stat}` (stat: median, p10, p90), and what each figure is made of, one metric per count
    (offers, providers and excluded offers are different things: never summed as one)."""
    from gpuradar.storage.index import current_index

    labels = ["gpu", "pricing"]
    usd = GaugeMetricFamily(
        f"{PREFIX}_price_index_usd_per_gpu_hour",
        "Market index of each accelerator model and pricing in USD per accelerator-hour over "
        "fresh, available offers, outliers screened (docs/index.md).",
        labels=[*labels, "stat"])
    counts = {
        "offers": GaugeMetricFamily(
            f"{PREFIX}_price_index_offers", "Offers the market index of each model and "
            "pricing is computed from, after the outlier screen.", labels=labels),
        "providers": GaugeMetricFamily(
            f"{PREFIX}_price_index_providers", "Providers (sources) of the offers the market "
            "index of each model and pricing is computed from.", labels=labels),
        "excluded": GaugeMetricFamily(
            f"{PREFIX}_price_index_excluded_offers", "Offers the outlier screen of the "
            "market index of each model and pricing left out.", labels=labels),
    }
    for fig in current_index(engine):
        key = [fig["gpu"], fig["pricing"]]
        for stat in ("median", "p10", "p90"):
            usd.add_metric([*key, stat], fig[stat])
        counts["offers"].add_metric(key, fig["offers"])
        counts["providers"].add_metric(key, fig["providers"])
        counts["excluded"].add_metric(key, len(fig["excluded"]))
    yield usd
    yield from counts.values()


class DatabaseCollector(Collector):
    """Series computed from the database, drawn again only when the data version changed
    (see the module's docstring)."""

    def __init__(self, engine_fn: Callable[[], Engine]) -> None:
        self.engine_fn = engine_fn
        self._warned_at = 0.0
        self._lock = threading.Lock()
        self._version: tuple[Any, ...] | None = None
        self._families: list[Metric] = []
        self._text: dict[str, bytes] = {}

    def describe(self) -> list:
        return []  # unchecked: the series depend on what is stored

    def collect(self) -> Iterator[Any]:
        up, live, families, _ = self.snapshot()
        yield up
        yield from families
        yield from live

    def snapshot(self, encoder: Callable | None = None, form: str = ""
                 ) -> tuple[GaugeMetricFamily, list[Metric], list[Metric], bytes]:
        """(database_up, the series read at every scrape, the series of this data version,
        and their text in `encoder`'s format `form` (its content type) when asked, rendered
        once per version)."""
        from gpuradar.storage import queries
        from gpuradar.storage.alert_store import outbox_backlog
        from gpuradar.storage.page_reads import data_version

        up = GaugeMetricFamily(f"{PREFIX}_database_up",
                               "1 when the database answered the last scrape's queries.")
        try:
            engine = self.engine_fn()
            version, _ = data_version(engine)
            backlog = outbox_backlog(engine)
            with self._lock:
                if version != self._version:
                    self._families = list(self._collect(engine, queries))
                    self._version, self._text = version, {}
                families = self._families
                text = b""
                if encoder is not None:
                    text = self._text.get(form) or _render(encoder, families)
                    self._text[form] = text
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail on a database error
            now = time.monotonic()
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning("metrics: database query failed: %s", str(exc).splitlines()[0])
            up.add_metric([], 0)
            return up, [], [], b""
        up.add_metric([], 1)
        live: list[Metric] = [GaugeMetricFamily(f"{PREFIX}_outbox_backlog",
                                  "Notifications waiting in the outbox to be delivered.",
                                  value=backlog)]
        return up, live, families, text

    def _collect(self, engine: Engine, queries: Any) -> Iterator[Any]:
        offers = GaugeMetricFamily(
            f"{PREFIX}_offers", "Offers currently listed, by source, pricing and availability.",
            labels=["source", "pricing", "availability"])
        for source, pricing, availability, n in queries.offer_counts(engine):
            offers.add_metric([source, pricing, availability], n)
        yield offers

        cheapest = GaugeMetricFamily(
            f"{PREFIX}_cheapest_usd_per_gpu_hour",
            "Cheapest listed, not unavailable offer in USD per accelerator-hour (a GPU, a TPU "
            "chip, an NPU), by catalog model, pricing and source.",
            labels=["gpu", "pricing", "source"])
        uncatalogued: dict[str, int] = {}
        listed: set[str] = set()
        for gpu, pricing, source, usd in queries.cheapest_per_source(engine):
            if catalog_gpu(gpu):
                cheapest.add_metric([gpu, pricing, source], usd)
                listed.add(gpu)
            else:
                uncatalogued[source] = uncatalogued.get(source, 0) + 1
        yield cheapest
        yield accelerator_info(listed)
        unknown = GaugeMetricFamily(
            f"{PREFIX}_uncatalogued_gpu_models",
            "GPU models listed by a source that the catalog does not know (left out of "
            "gpuradar_cheapest_usd_per_gpu_hour).", labels=["source"])
        for source, n in sorted(uncatalogued.items()):
            unknown.add_metric([source], n)
        yield unknown
        uncatalogued_offers = GaugeMetricFamily(
            f"{PREFIX}_uncatalogued_offers",
            "Offers a source listed in its latest crawl that the spider could not map to a "
            "GPU model or count (not stored; `gpuradar sources` names them).",
            labels=["source"])
        for source, n in sorted(queries.uncatalogued_offers(engine).items()):
            uncatalogued_offers.add_metric([source], n)
        yield uncatalogued_offers

        yield from index_families(engine)

        last = GaugeMetricFamily(
            f"{PREFIX}_last_success_timestamp_seconds",
            "Start of the last successful crawl of each source (Unix time).",
            labels=["source"])
        for source, ts in sorted(queries.last_success(engine).items()):
            last.add_metric([source], ts.timestamp())
        yield last

        from gpuradar.storage import alert_store

        yield GaugeMetricFamily(f"{PREFIX}_rules_firing", "Alert rules currently firing.",
                                value=alert_store.firing_count(engine))


#: The end of an OpenMetrics exposition (the classic text format has none).
EOF = b"# EOF\n"


class _Fixed(Collector):
    """Families already drawn, for an encoder to render."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _render(encoder: Callable, families: list[Metric]) -> bytes:
    text = encoder(_Fixed(families))
    return text[:-len(EOF)] if text.endswith(EOF) else text


class _Forward(Collector):
    """Another registry's series, so that `Metrics.registry` holds them all."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return iter(self.registry.collect())

    def describe(self) -> Iterator[Metric]:
        return iter(self.registry.collect())  # the names a `name[]` selection looks for


#: The label values each labelled counter knows before its first event.
CHANGES = ("new", "changed", "closed")
CHANNELS = ("slack", "email", "webhook", "other")
DELIVERY_STATUSES = ("sent", "failed", "retry")
LOCK_RESULTS = ("taken", "held", "unreachable")
SKIP_REASONS = ("max_instances", "missed")


class Metrics:
    """Every metric the daemon exports, in its own registry (plus process metrics)."""

    def __init__(self, engine_fn: Callable[[], Engine] | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        prometheus_client.disable_created_metrics()
        self.registry = registry or CollectorRegistry()
        # the series kept in memory; `registry` holds them and the database's
        self.live = CollectorRegistry()
        # each in-memory family's text as last rendered, by format (see _live_text)
        self._rendered: dict[str, dict[str, tuple[Any, bytes]]] = {}
        self.database: DatabaseCollector | None = None
        r = self.live
        ProcessCollector(registry=r)
        prometheus_client.PlatformCollector(registry=r)
        prometheus_client.GCCollector(registry=r)
        self.crawls = Counter(f"{PREFIX}_crawls", "Finished crawls by source and status "
                              "(ok, partial, failed).", ["source", "status"], registry=r)
        self.crawl_duration = Histogram(f"{PREFIX}_crawl_duration_seconds",
                                        "Wall time of a crawl, by source.", ["source"],
                                        buckets=DURATION_BUCKETS, registry=r)
        self.items = Counter(f"{PREFIX}_crawl_items", "Offers stored by crawls, by source.",
                             ["source"], registry=r)
        self.dropped = Counter(f"{PREFIX}_crawl_dropped_items", "Items dropped by the "
                               "pipeline, by source and reason.", ["source", "reason"],
                               registry=r)
        self.changes = Counter(f"{PREFIX}_offer_changes", "Offers new, changed (price or "
                               "availability) or closed by crawls.", ["source", "change"],
                               registry=r)
        self.failures = Gauge(f"{PREFIX}_source_consecutive_failures", "Failed crawls in a "
                              "row per source (backoff grows with it).", ["source"], registry=r)
        self.intervals = Gauge(f"{PREFIX}_source_interval_seconds", "Crawl interval in "
                               "force per scheduled source (staleness is 3 of them).",
                               ["source"], registry=r)
        self.evaluations = Counter(f"{PREFIX}_rule_evaluations", "Rule evaluations by "
                                   "result (ok, error); `rule` names a rule that failed ("
                                   "empty: the evaluation as a whole).", ["result", "rule"],
                                   registry=r)
        self.notifications = Counter(f"{PREFIX}_notifications", "Notification delivery "
                                     "attempts by channel (slack, email, webhook, other) and "
                                     "status (sent, failed, retry).", ["channel", "status"],
                                     registry=r)
        self.reloads = Counter(f"{PREFIX}_config_reloads", "Configuration reloads by result "
                               "(success, failure).", ["result"], registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 on the replica that crawls, evaluates and "
                            "delivers (it holds the leader lock), 0 on a standby; "
                            "sum() over the replicas must be 1.", registry=r)
        self.lock_attempts = Counter(f"{PREFIX}_leader_lock_attempts", "Attempts of a "
                                     "standby to take the leader lock, by result (taken, "
                                     "held: another replica has it, unreachable).",
                                     ["result"], registry=r)
        self.job_events = Counter(f"{PREFIX}_scheduler_skipped_runs", "Scheduled runs not "
                                  "started, by job and reason (max_instances: the previous run "
                                  "was still going; missed: later than the misfire grace).",
                                  ["job", "reason"], registry=r)
        self.web_up = Gauge(f"{PREFIX}_web_up", "1 while the process serving the web page "
                            "and the JSON API (web.port) runs, 0 when it has died and is not "
                            "back yet (or web.enabled is false).", registry=r)
        self.web_restarts = Counter(f"{PREFIX}_web_restarts", "Times the process serving "
                                    "the web page and the JSON API was started again after "
                                    "it died.", registry=r)
        # every label value known in advance starts at zero (as crawls_total per source):
        # a counter with no series until its first event breaks rate() and absent()
        for channel in CHANNELS:
            for status in DELIVERY_STATUSES:
                self.notifications.labels(channel, status)
        for result in ("success", "failure"):
            self.reloads.labels(result)
        for result in LOCK_RESULTS:
            self.lock_attempts.labels(result)
        self.build = Info(f"{PREFIX}_build", "Version of gpuradar and its main parts.",
                          registry=r)
        import scrapy

        self.build.info({"version": __version__, "python": platform.python_version(),
                         "scrapy": scrapy.__version__})
        self.registry.register(_Forward(self.live))  # now that their names are known
        if engine_fn is not None:
            self.database = DatabaseCollector(engine_fn)
            self.registry.register(self.database)

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """(/metrics' body in the format `accept` asks for, its content type): the
        in-memory series rendered now, the database's as rendered once per data version."""
        encoder, content_type = choose_encoder(accept or "")
        live = self._live_text(encoder, content_type)
        end = EOF if content_type.startswith("application/openmetrics-text") else b""
        if self.database is None:
            return live + end, content_type
        up, fresh, _, text = self.database.snapshot(encoder, content_type)
        return live + _render(encoder, [up, *fresh]) + text + end, content_type

    def _live_text(self, encoder: Callable, form: str) -> bytes:
        """The in-memory series' text: a family whose samples are those of the previous
        scrape is not rendered again (prometheus-client escapes every label name and value
        character by character: most of a scrape's time, for series that rarely change)."""
        kept = self._rendered.setdefault(form, {})
        parts = []
        for family in self.live.collect():
            key = (family.type, family.documentation, family.unit, [
                (s.name, s.labels, s.value, s.timestamp, s.exemplar) for s in family.samples])
            found = kept.get(family.name)
            if found is None or found[0] != key:
                found = kept[family.name] = (key, _render(encoder, [family]))
            parts.append(found[1])
        return b"".join(parts)

    def schedule_source(self, source: str, interval: float | None) -> None:
        """The interval a source is crawled at now; None: it is no longer scheduled."""
        if interval is None:
            if (source,) in self.intervals._metrics:
                self.intervals.remove(source)
        else:
            self.intervals.labels(source).set(interval)

    def init_source(self, source: str, job: str | None = None) -> None:
        """Zero series for a scheduled source (and its crawl job), so that a first failure,
        drop or change is a visible increase to rate() and absence alerts."""
        from gpuradar.crawler.pipelines import DROP_REASONS

        for status in (CrawlStatus.OK, CrawlStatus.PARTIAL, CrawlStatus.FAILED):
            self.crawls.labels(source, status)
        self.items.labels(source)
        self.failures.labels(source).set(0)
        for reason in sorted(DROP_REASONS):
            self.dropped.labels(source, reason)
        for change in CHANGES:
            self.changes.labels(source, change)
        if job is not None:
            for reason in SKIP_REASONS:
                self.job_events.labels(job, reason)

    def observe_crawl(self, source: str, status: str, duration: float, items: int,
                      dropped: dict[str, int], new: int, changed: int, closed: int) -> None:
        self.crawls.labels(source, status).inc()
        self.crawl_duration.labels(source).observe(duration)
        if items:
            self.items.labels(source).inc(items)
        for reason, n in dropped.items():
            if n:
                self.dropped.labels(source, str(reason)[:40]).inc(n)
        for change, n in zip(CHANGES, (new, changed, closed), strict=True):
            if n:
                self.changes.labels(source, change).inc(n)

    def observe_delivery(self, results: list[Any]) -> None:
        for res in results:
            channel = getattr(res, "channel", "other") or "other"
            if channel not in CHANNELS:
                channel = "other"
            self.notifications.labels(channel, str(getattr(res, "status", "unknown"))).inc()
