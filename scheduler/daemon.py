"""`gpuradar run`: the one long-running process.

One asyncio event loop carries everything: Twisted's asyncio reactor (installed before
anything imports a reactor), one Scrapy `AsyncCrawlerRunner`, and an APScheduler 3
`AsyncIOScheduler` with one job per enabled source. Crawl jobs are coroutines on the loop,
so sources crawl concurrently and a slow one never holds up another; blocking work after a
crawl (rule evaluation, apprise delivery) runs in threads. Metrics and /healthz are served
from a thread of their own.

Life cycle: SIGTERM/SIGINT end the process within one budget, `daemon.stop_timeout`. At
once: nothing more is scheduled and delivery takes no new message (the send gate closes: the
messages in flight finish, the rest stay pending for the standby or the next start). Running
crawls get `daemon.grace_period` to finish (then the crawl service stops them, at whatever
point they are, and they are recorded failed), the rule evaluations they started write their
notifications. Then, with nothing of the leader's work running any more, the leader lock is
released and the process exits 0. What is still running when the budget is used up (a send
that hangs, a crawl that does not stop) is not waited for: the process exits at once WITH
the lock, which the server frees only once the process and all its threads are gone, so no
message leaves it after its lock is free. A second signal skips the waiting.

SIGHUP (or a change of the config or rules file) reloads the configuration: a new one that
does not load is rejected as a whole, with its error, and the old one stays.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpuradar.alerts.alert_settings import parse_settings
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.config import ConfigError
from gpuradar.core.logs import REDACT, source_once
from gpuradar.core.outcome import CrawlStatus
from gpuradar.core.units import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    format_duration,
)
from gpuradar.scheduler.jobs import (
    SourcePlan,
    backoff_delay,
    first_run,
)
from gpuradar.scheduler.setup import (  # noqa: F401  (RunOptions: the command line's)
    DaemonSetup,
    RunOptions,
    crawl_settings,
    load_setup,
)
from gpuradar.scheduler.threads import in_thread

if TYPE_CHECKING:  # imported where they are used, when the daemon starts
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from prometheus_client.exposition import ThreadingWSGIServer
    from scrapy.settings import Settings
    from sqlalchemy.engine import Engine

    from gpuradar.alerts.delivery import Delivery
    from gpuradar.alerts.engine import Evaluator
    from gpuradar.crawler.runner import CrawlResult
    from gpuradar.crawler.service import Crawl, CrawlService
    from gpuradar.scheduler.health import Health
    from gpuradar.scheduler.leadership import Leadership
    from gpuradar.scheduler.metrics import Metrics
    from gpuradar.scheduler.web_child import WebChild

log = logging.getLogger("gpuradar.daemon")

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
FX_FIRST_DELAY = 1.0   # at start, other due sources wait this long so FX is crawled first
FX_WAIT_MAX = 60.0     # a source waits at most this long for a running FX crawl
STOP_TIMEOUT = 15.0    # crawls stopped after the grace period must close within this
RESERVE_MAX = 2.0      # of daemon.stop_timeout, kept for releasing the lock and exiting
DELIVERY_BATCH = 100

T = TypeVar("T")


def _job(fn: Callable[..., Awaitable[None]]) -> Callable[..., Coroutine[Any, Any, None]]:
    """A scheduled job that the scheduler may cancel when the daemon stops: one INFO line
    instead of APScheduler's error with a traceback."""

    @functools.wraps(fn)
    async def job(*args: Any, **kwargs: Any) -> None:
        try:
            await fn(*args, **kwargs)
        except asyncio.CancelledError:
            what = fn.__name__.strip("_").removesuffix("_job").replace("_", " ")
            log.info("%s cancelled: the daemon is stopping",
                     " ".join([what, *map(str, args[1:])]))  # args[0]: the daemon

    return job


def _time_limit(plan: SourcePlan) -> float | None:
    """How long a crawl may run before it is stopped: past CLOSESPIDER_TIMEOUT (a graceful
    close) and the download timeout that close waits for; the crawl service abandons it
    STOP_BOUND later."""
    return 2 * plan.timeout if plan.timeout > 0 else None


def _reserve(stop_timeout: float) -> float:
    return min(RESERVE_MAX, stop_timeout / 5)


class StartupError(Exception):
    """The daemon cannot start; `code` is the command's exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class SourceState:
    failures: int = 0
    job_task: asyncio.Task | None = None
    crawl: Crawl | None = None  # the running one
    skipped: int = 0  # due crawls in a row that did not start (liveness, /healthz)


def _files_stamp(paths: list[Path | None]) -> tuple:
    out: list[tuple[str, int | None, int | None]] = []
    for p in paths:
        if p is None:
            continue
        try:
            st = p.stat()
            out.append((str(p), st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((str(p), None, None))
    return tuple(out)


class Daemon:
    """`gpuradar run`'s process: its schedule, role, crawls, evaluations and deliveries.
    `clock`: where every decision reads the time (a test's FakeClock drives the schedule,
    the backoff and liveness without waiting); the scheduler and the signal handlers come
    from `make_scheduler` and `install_signals`, which an in-process test harness replaces."""

    def __init__(self, options: RunOptions, clock: Clock = SYSTEM) -> None:
        self.options = options
        self.clock = clock
        self.state: dict[str, SourceState] = {}
        self._tasks: set[asyncio.Task] = set()
        self._busy: dict[asyncio.Future, str] = {}  # leader work running in threads
        self._closed = False  # stopping: no evaluation or delivery starts any more
        self.exit_now = False  # leave without releasing the lock (see the module docstring)
        self._eval_lock: asyncio.Lock | None = None
        # The alert engine and delivery of this daemon's database, made at first use (the
        # alerting side is imported only then).
        self.evaluator: Evaluator | None = None
        self.delivery: Delivery | None = None
        self._deliver_lock: asyncio.Lock | None = None
        self._deliver_wanted = False
        self._stop: asyncio.Event | None = None
        self._force: asyncio.Event | None = None
        self.stopping = False
        self.exit_code = EXIT_OK
        self.httpd: ThreadingWSGIServer | None = None  # the metrics endpoint, when enabled
        self.web: WebChild | None = None  # the page and API (a child process), when enabled
        # set by prepare() (the database and what reports on it) and main() (the rest)
        self.engine: Engine
        self.leadership: Leadership
        self.metrics: Metrics
        self.health: Health
        self.crawls: CrawlService
        self.scheduler: AsyncIOScheduler
        self._stamp: tuple = ()
        self._secrets: set[str] = set()
        self._have_fx = False
        self.loaded: DaemonSetup

    # -- configuration --------------------------------------------------------------------
    def load(self, previous: DaemonSetup | None = None) -> DaemonSetup:
        """Read and check the whole configuration (gpuradar.scheduler.setup); raises
        ConfigError/RuleError and changes nothing, so a reload can reject a broken file and
        keep the running one."""
        return load_setup(self.options, previous)

    def crawl_settings(self, plan: SourcePlan) -> Settings:
        """Settings of one crawl (the source's timeout closes a hung crawl)."""
        return crawl_settings(self.loaded, plan)

    # -- start --------------------------------------------------------------------------
    def prepare(self) -> None:
        """Everything that can fail before the loop starts, with a clear error."""
        from gpuradar.alerts.rules import RuleError
        from gpuradar.scheduler.health import EndpointError, Health, make_app, serve
        from gpuradar.scheduler.leadership import InstanceLocked, Leadership
        from gpuradar.scheduler.metrics import Metrics
        from gpuradar.storage.db import (
            check_writable,
            database_problem,
            open_database,
            redact_url,
        )
        from gpuradar.storage.owner import mark_dead_crawls
        from gpuradar.storage.queries import consecutive_failures

        try:
            self.loaded = self.load()
        except (ConfigError, RuleError) as exc:
            raise StartupError(str(exc)) from None
        self._secrets = set(self.loaded.secrets)
        REDACT.set_secrets(self._secrets)
        if not self.loaded.plans:
            why = "; ".join(f"{n}: {w}" for n, w in self.loaded.skipped.items())
            raise StartupError(f"no source to schedule ({why or 'no sources'})")
        url = self.loaded.cfg.database_url
        try:
            self.engine = open_database(url)
            check_writable(self.engine)
            self.leadership = Leadership(self.engine, self.loaded.opts, clock=self.clock)
            self.leadership.claim()  # SQLite: one daemon per file
            # PostgreSQL: the leader marks its predecessor's crawls when it takes over
            interrupted = (mark_dead_crawls(self.engine, unowned=True)
                           if self.leadership.single else 0)
        except InstanceLocked as exc:
            raise StartupError(str(exc)) from None
        except Exception as exc:
            problem = database_problem(exc, url)
            if problem is None:
                raise
            raise StartupError(problem, EXIT_DATABASE) from None
        if interrupted:
            log.warning("%d crawl(s) left running by a stopped process marked failed",
                        interrupted)
        from gpuradar.storage.queries import latest_fx

        self._have_fx = bool(latest_fx(self.engine))
        for name in self.loaded.plans:
            self.state[name] = SourceState(failures=consecutive_failures(self.engine, name))
        self.metrics = Metrics(lambda: self.engine)
        self.leadership.gauge = self.metrics.leader
        self.leadership.attempts = self.metrics.lock_attempts
        self.health = Health(lambda: self.engine, self._scheduler_running, clock=self.clock,
                             role=lambda: self.leadership.role,
                             plans=lambda: {n: p.interval for n, p in self.loaded.plans.items()},
                             alert_settings=lambda: parse_settings(self.loaded.alert_settings))
        m = self.loaded.metrics
        if m.enabled:
            try:
                self.httpd = serve(m.address, m.port,
                                   make_app(self.metrics.registry, self.health, REDACT,
                                            self.metrics.exposition))
            except EndpointError as exc:
                raise StartupError(f"{exc}; set metrics.port / --metrics-port (or "
                                   "metrics.enabled: false)") from None
        w = self.loaded.cfg.web
        if w.enabled:  # the page and the API: a process of their own (web_child.py)
            from gpuradar.scheduler.web_child import WebChild

            try:
                self.web = WebChild(w.address, w.port, {
                    "database_url": url, "threads": w.threads, "cors": list(m.cors_origins),
                    "secrets": sorted(self._secrets), "log_format": self.options.log_format,
                    "log_level": self.options.log_level}, on_up=self.metrics.web_up.set,
                    on_restart=self.metrics.web_restarts.inc).start()
            except EndpointError as exc:
                raise StartupError(f"{exc}; set web.port / GPURADAR_WEB_PORT (or "
                                   "web.enabled: false)") from None
        preload(self.loaded.settings)
        log.info("gpuradar daemon starting: database %s%s", redact_url(url),
                 f", replaying {self.options.replay}" if self.options.replay else "")
        self._stamp = self._watched_stamp()

    def _scheduler_running(self) -> bool:
        from apscheduler.schedulers.base import STATE_RUNNING

        scheduler = getattr(self, "scheduler", None)  # None until main() starts it
        return scheduler is not None and scheduler.state == STATE_RUNNING

    def _watched_stamp(self) -> tuple:
        cfg = self.loaded.cfg
        return _files_stamp([cfg.path, cfg.rules_file])

    def install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        """SIGTERM/SIGINT stop, SIGHUP reloads (the process's; see the module docstring)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, self._on_reload_signal)

    def make_scheduler(self) -> Any:
        """APScheduler on the running loop: one run of a job at a time, missed runs folded
        into one."""
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        return AsyncIOScheduler(timezone=UTC, job_defaults={
            "coalesce": True, "max_instances": 1})

    async def main(self) -> None:
        from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED

        from gpuradar.crawler.service import CrawlService

        self._stop, self._force = asyncio.Event(), asyncio.Event()
        self._eval_lock, self._deliver_lock = asyncio.Lock(), asyncio.Lock()
        self.install_signals(asyncio.get_running_loop())

        self.crawls = CrawlService(self.loaded.settings, clock=self.clock)
        self.scheduler = self.make_scheduler()
        self.scheduler.add_listener(self._job_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        self.scheduler.start()
        now = self.clock.now()
        self.scheduler.add_job(self._heartbeat, "interval", seconds=_heartbeat_every(),
                               id="heartbeat", next_run_time=now, misfire_grace_time=None)
        self._schedule_watch()
        m = self.loaded.metrics
        log.info("scheduled %d source(s); %d rule(s), %d target(s); metrics %s; web page %s",
                 len(self.loaded.plans), len(self.loaded.rules), len(self.loaded.cfg.targets),
                 f"on http://{_hostport(m.address, self.httpd.server_address[1])}/metrics"
                 if self.httpd else "disabled",
                 f"on {self.web.url}/" if self.web else "disabled")
        for name, why in self.loaded.skipped.items():
            log.info("%s: not scheduled (%s)", name, why, extra={"source": name})
        self.leadership.start(self.lead, self.stand_by)  # SQLite: lead() at once
        await self._stop.wait()
        await self.shutdown()

    # -- role (scheduler/leadership.py) -----------------------------------------------------
    def lead(self) -> None:
        """Elected: crawl, evaluate and deliver. The outbox goes first: notifications a
        previous leader (or run) left pending are sent at once."""
        from gpuradar.storage.queries import consecutive_failures, latest_fx

        if not self.leadership.single:  # another replica may have crawled meanwhile
            self._have_fx = bool(latest_fx(self.engine))
            for name, st in self.state.items():
                st.failures = consecutive_failures(self.engine, name)
        self._schedule_outbox(self.clock.now())
        self.apply_plans({}, self.loaded.plans)
        # rules may have changed while no one evaluated: evaluate what is stored now
        self._spawn(self._alerts_after_crawl())

    def stand_by(self) -> None:
        """Deposed (the leader lock is lost): stop acting at once. Scheduled crawls and the
        outbox sweep are removed; running crawls are stopped, whatever point they are at, and
        recorded failed (gpuradar.crawler.service); evaluate() and deliver() check the lock
        themselves."""
        for job in self.scheduler.get_jobs():
            if job.id == "outbox" or job.id.startswith("crawl:"):
                job.remove()
        self.health.stalled.clear()  # a standby runs no crawl: nothing of it can stall
        for st in self.state.values():
            st.skipped = 0
        for name, st in self.state.items():
            if st.crawl is not None:
                log.warning("%s: stopping the running crawl (not the leader any more)", name,
                            extra={"source": name})
                st.crawl.stop("not the leader any more")

    def _schedule_outbox(self, now: datetime) -> None:
        if not self.leadership.is_leader:
            return  # lead() schedules it
        # at start at once: notifications left pending by a previous run go out first
        self.scheduler.add_job(self._outbox_job, "interval",
                               seconds=self.loaded.opts.outbox_interval, id="outbox",
                               next_run_time=now, misfire_grace_time=None,
                               replace_existing=True)

    def _schedule_watch(self) -> None:
        every = self.loaded.opts.watch_interval
        if self.scheduler.get_job("watch"):
            self.scheduler.remove_job("watch")
        if every > 0 and (self.loaded.cfg.path or self.loaded.cfg.rules_file):
            self.scheduler.add_job(self._watch_job, "interval", seconds=every, id="watch",
                                   misfire_grace_time=None)

    def apply_plans(self, old: dict[str, SourcePlan], new: dict[str, SourcePlan]) -> None:
        """Add, change and remove crawl jobs. A source is due at once when its last success
        is older than its interval; otherwise it runs when that interval has passed."""
        from apscheduler.triggers.interval import IntervalTrigger

        from gpuradar.storage.queries import consecutive_failures, last_success

        if not self.leadership.is_leader:
            return  # a standby schedules nothing; lead() applies the plans in force
        now = self.clock.now()
        last = last_success(self.engine)
        fx_due = "fx" in new and "fx" not in old and first_run(
            last.get("fx"), new["fx"].interval, now) <= now
        for name in sorted(set(old) - set(new)):
            if self.scheduler.get_job(f"crawl:{name}"):
                self.scheduler.remove_job(f"crawl:{name}")
            log.info("%s: no longer scheduled", name, extra={"source": name})
            self.metrics.schedule_source(name, None)
        for name, plan in new.items():
            job_id = f"crawl:{name}"
            self.metrics.schedule_source(name, plan.interval)
            trigger = IntervalTrigger(seconds=plan.interval, jitter=plan.jitter or None,
                                      timezone=UTC)
            prev = old.get(name)
            due = first_run(last.get(name), plan.interval, now)
            if fx_due and name != "fx" and due <= now:
                due = now + timedelta(seconds=FX_FIRST_DELAY)
            if prev is None:
                self.state.setdefault(name, SourceState(
                    failures=consecutive_failures(self.engine, name)))
                self.metrics.init_source(name, job_id)
                self.metrics.failures.labels(name).set(self.state[name].failures)
                self.scheduler.add_job(self._crawl_job, trigger, args=[name], id=job_id,
                                       name=f"crawl {name}", next_run_time=due,
                                       misfire_grace_time=plan.misfire_grace,
                                       replace_existing=True)
            elif (prev.interval, prev.jitter) != (plan.interval, plan.jitter):
                self.scheduler.modify_job(job_id, trigger=trigger, next_run_time=due,
                                          misfire_grace_time=plan.misfire_grace)
            elif prev.misfire_grace != plan.misfire_grace:
                self.scheduler.modify_job(job_id, misfire_grace_time=plan.misfire_grace)
            if prev != plan:
                when = "now" if due <= now else f"at {due:%Y-%m-%d %H:%M:%S} UTC"
                log.info("%s: %s; next crawl %s", name, plan.describe(), when,
                         extra={"source": name})

    # -- jobs -----------------------------------------------------------------------------
    @_job
    async def _heartbeat(self) -> None:
        self.health.beat()

    @_job
    async def _watch_job(self) -> None:
        stamp = self._watched_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            self.reload("the config file changed")

    @_job
    async def _outbox_job(self) -> None:
        await self.deliver()

    @_job
    async def _crawl_job(self, source: str) -> None:
        from gpuradar.crawler.runner import waits_for_fx

        plan = self.loaded.plans.get(source)
        if self.stopping or plan is None:
            return
        if not await self.leadership.confirm() or self.stopping:
            return  # fencing: a crawl starts only while the leader lock holds
        st = self.state.setdefault(source, SourceState())
        st.job_task = asyncio.current_task()
        st.skipped = 0
        self.health.stalled.pop(source, None)
        try:
            fx = self.state.get("fx")
            if (waits_for_fx(source, self._have_fx) and fx is not None
                    and fx.crawl is not None and fx.crawl.done is not None):
                await asyncio.wait({fx.crawl.done}, timeout=FX_WAIT_MAX)
            if self.stopping or not self.leadership.is_leader:
                return  # stopped or deposed while waiting for the exchange rates
            started = self.clock.monotonic()
            log.debug("%s: crawl starting", source, extra={"source": source})
            st.crawl = crawl = self.crawls.start(
                self.loaded.classes[source], self.crawl_settings(plan),
                time_limit=_time_limit(plan))
            try:
                # shielded: a crawl is only ever stopped through the service, which records it
                assert crawl.done is not None  # set when start() began it
                result = await asyncio.shield(crawl.done)
            finally:
                st.crawl = None
            duration = self.clock.monotonic() - started
            self.metrics.observe_crawl(source, result.status, duration, result.items,
                                       result.dropped, result.new_offers, result.changed,
                                       result.closed)
            self._after_crawl(source, plan, result, duration)
            self._spawn(self._alerts_after_crawl())
        finally:
            st.job_task = None

    def _after_crawl(self, source: str, plan: SourcePlan, result: CrawlResult, duration: float
                     ) -> None:
        """Log the outcome; back a failing source off by moving its next run."""
        st = self.state[source]
        if source == "fx" and result.status == CrawlStatus.OK:
            self._have_fx = True
        extra = {"source": source, "status": result.status, "items": result.items,
                 "duration_s": round(duration, 3), "crawl_id": result.crawl_id}
        summary = (f"{result.items} items ({result.new_offers} new, {result.changed} changed, "
                   f"{result.closed} closed) in {duration:.1f}s")
        if result.status != CrawlStatus.FAILED:
            st.failures = 0
            self.metrics.failures.labels(source).set(0)
            if result.status == CrawlStatus.OK:
                log.info("%s: crawl ok: %s", source, summary, extra=extra)
            else:  # partial, or a replay refused (older than the stored data)
                log.warning("%s: crawl %s: %s; %s", source, result.status, summary,
                            source_once(result.error, source)[:500], extra=extra)
            return
        st.failures += 1
        self.metrics.failures.labels(source).set(st.failures)
        delay = backoff_delay(plan.interval, st.failures, self.loaded.opts.backoff_max)
        job = self.scheduler.get_job(f"crawl:{source}")
        nxt = ""
        if job is not None and not self.stopping:
            if st.failures > 1:
                job.modify(next_run_time=self.clock.now() + timedelta(seconds=delay))
            nxt = (f"; {st.failures} failed in a row, "
                   f"next crawl in {format_duration(round(delay))}"
                   if st.failures > 1 else "")
        log.warning("%s: crawl failed after %.1fs: %s%s", source, duration,
                    source_once(result.error or "", source)[:500] or "no detail", nxt,
                    extra=extra | {"failures": st.failures})

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _work(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any
              ) -> asyncio.Future[T]:
        """Leader work in a thread (rule evaluation, delivery), known to shutdown()."""
        fut = in_thread(fn, *args, **kwargs)
        self._busy[fut] = what
        fut.add_done_callback(lambda f: self._busy.pop(f, None))
        return fut

    async def _alerts_after_crawl(self) -> None:
        await self.evaluate()
        await self.deliver()

    async def evaluate(self) -> None:
        """One rule evaluation at a time (each sees everything stored so far)."""
        from gpuradar.alerts.engine import Evaluator

        assert self._eval_lock is not None
        async with self._eval_lock:
            if not await self.leadership.confirm():
                return  # only the leader evaluates (a standby's notifications would double)
            if self._closed:
                return  # stopping, past the budget: nothing new starts
            loaded = self.loaded
            if self.evaluator is None:
                self.evaluator = Evaluator(self.engine, self.clock)
            try:
                result = await self._work("rule evaluation", self.evaluator.evaluate,
                                          loaded.rules, alert_settings=loaded.alert_settings)
            except Exception as exc:  # noqa: BLE001 - retried after the next crawl
                self.metrics.evaluations.labels("error", "").inc()
                log.error("rule evaluation failed: %s", exc, exc_info=exc)
                return
            self.metrics.evaluations.labels("ok", "").inc()
            for name in result.errors:  # each failing rule, isolated from the others
                self.metrics.evaluations.labels("error", name).inc()
            self.health.failing_rules = sorted(result.errors)
            if result.notifications:
                log.info("rules: %d firing, %d notification(s) queued%s", result.firing,
                         result.notifications,
                         f" (fired: {', '.join(result.fired)})" if result.fired else "")

    async def deliver(self) -> None:
        """Deliver the outbox. Requests while a delivery runs fold into one more pass, so
        two deliveries never race for the same notification. Every message is sent inside
        the leadership's guard (the send gate and the fence): once this replica stops or
        is deposed, nothing more is sent and the rest stays pending."""
        from gpuradar.alerts.delivery import Delivery, send

        assert self._deliver_lock is not None
        self._deliver_wanted = True
        if self._deliver_lock.locked() or self.stopping:
            return
        async with self._deliver_lock:
            while self._deliver_wanted and not self.stopping:
                self._deliver_wanted = False
                if not await self.leadership.confirm():
                    return  # fencing: a replica without the lock delivers nothing
                if self.stopping:
                    return
                if self.delivery is None:
                    self.delivery = Delivery(self.engine, self.clock)
                try:
                    results = await self._work(
                        "delivery", self.delivery.deliver_pending, self.loaded.targets,
                        limit=DELIVERY_BATCH, sender=send, guard=self.leadership.guard())
                except Exception as exc:  # noqa: BLE001 - the periodic sweep retries
                    log.error("notification delivery failed: %s", exc, exc_info=exc)
                    return
                # alerts.delivery logs each outcome itself (target names, never URLs)
                results = list(results or [])
                self.metrics.observe_delivery(results)
                if len(results) >= DELIVERY_BATCH:
                    self._deliver_wanted = True  # more waiting

    def _job_event(self, event: Any) -> None:
        """A due run that did not start: counted (metric) and, for a crawl, judged by
        liveness: a source whose crawls stop starting fails /healthz."""
        from apscheduler.events import EVENT_JOB_MAX_INSTANCES

        reason = "max_instances" if event.code == EVENT_JOB_MAX_INSTANCES else "missed"
        self.metrics.job_events.labels(event.job_id, reason).inc()
        source = event.job_id.removeprefix("crawl:")
        st, plan = self.state.get(source), self.loaded.plans.get(source)
        if event.job_id.startswith("crawl:") and st is not None and plan is not None:
            st.skipped += 1
            self._judge_liveness(source, st, plan)

    def _judge_liveness(self, source: str, st: SourceState, plan: SourcePlan) -> None:
        from gpuradar.crawler.service import STOP_BOUND
        from gpuradar.scheduler.health import stalled

        why = stalled(st.skipped, plan.interval, (_time_limit(plan) or 0) + STOP_BOUND,
                      self.loaded.opts.liveness_intervals)
        if why is None:
            self.health.stalled.pop(source, None)
        else:
            if source not in self.health.stalled:
                log.error("%s: %s; /healthz fails until one starts", source, why,
                          extra={"source": source})
            self.health.stalled[source] = why

    # -- signals --------------------------------------------------------------------------
    def _on_stop_signal(self, sig: int) -> None:
        assert self._stop is not None and self._force is not None
        name = signal.Signals(sig).name
        if self._stop.is_set():
            log.warning("%s again: stopping now without waiting", name)
            self._force.set()
            return
        # at once: no message starts any more; those in flight finish
        self.leadership.close_gate("stopping; it stays pending for the next leader")
        opts = self.loaded.opts
        log.info("%s: stopping within %s (daemon.stop_timeout): no new notification is "
                 "sent; running crawls get %s to finish", name,
                 format_duration(opts.stop_timeout), format_duration(opts.grace_period))
        self._stop.set()

    def _on_reload_signal(self) -> None:
        if not self.stopping:
            self.reload("SIGHUP")

    def reload(self, why: str) -> bool:
        """Load the configuration again; apply it only when all of it loads."""
        from gpuradar.alerts.rules import RuleError

        try:
            new = self.load(previous=self.loaded)
        except (ConfigError, RuleError) as exc:
            self.metrics.reloads.labels("failure").inc()
            log.error("configuration reload (%s) rejected; the previous configuration stays "
                      "in force: %s", why, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a bad file must never stop the daemon
            self.metrics.reloads.labels("failure").inc()
            log.error("configuration reload (%s) rejected; the previous configuration stays "
                      "in force: %s: %s", why, type(exc).__name__, exc, exc_info=exc)
            return False
        self._secrets |= new.secrets  # old tokens may still be in flight: keep masking them
        REDACT.set_secrets(self._secrets)
        if self.web is not None:
            self.web.set_secrets(self._secrets)
        old = self.loaded
        self.loaded = new
        self._stamp = self._watched_stamp()
        self.leadership.configure(new.opts)
        try:
            self.apply_plans(old.plans, new.plans)
            if new.opts.outbox_interval != old.opts.outbox_interval:
                self._schedule_outbox(self.clock.now())
            if (new.opts.watch_interval, new.cfg.path, new.cfg.rules_file) != (
                    old.opts.watch_interval, old.cfg.path, old.cfg.rules_file):
                self._schedule_watch()
        except Exception as exc:  # noqa: BLE001 - e.g. the database is down right now
            self.metrics.reloads.labels("failure").inc()
            log.error("configuration reload (%s): rules and targets are new, but the "
                      "schedule could not be updated: %s", why, exc, exc_info=exc)
            return False
        self.metrics.reloads.labels("success").inc()
        log.info("configuration reloaded (%s): %d rule(s), %d target(s), %d source(s)", why,
                 len(new.rules), len(new.cfg.targets), len(new.plans))
        self._spawn(self._alerts_after_crawl())  # new rules apply to what is stored now
        return True

    # -- stop -----------------------------------------------------------------------------
    async def _wait(self, tasks: Iterable[asyncio.Future], timeout: float
                    ) -> set[asyncio.Future]:
        """Wait until `tasks` are done, `timeout` passes or a second stop signal comes;
        return those still pending."""
        assert self._force is not None
        tasks = {t for t in tasks if not t.done()}
        if not tasks or timeout <= 0:
            return tasks
        force = asyncio.ensure_future(self._force.wait())
        everything = asyncio.ensure_future(asyncio.wait(tasks))
        try:
            await asyncio.wait({force, everything}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            force.cancel()
            everything.cancel()  # stops waiting; the tasks themselves go on
        return {t for t in tasks if not t.done()}

    async def shutdown(self) -> None:
        """Stop within `daemon.stop_timeout` (see the module docstring for the order)."""
        self.stopping = True
        self.health.stopping = True
        # at once: no message starts any more; those in flight finish
        self.leadership.close_gate("stopping; it stays pending for the next leader")
        self.scheduler.pause()
        self.leadership.stop_trying()
        opts = self.loaded.opts
        loop = asyncio.get_running_loop()
        started = loop.time()
        end = started + opts.stop_timeout - _reserve(opts.stop_timeout)
        running = {n: s for n, s in self.state.items() if s.job_task is not None}
        if running:
            log.info("waiting for %d running crawl(s): %s", len(running), ", ".join(running))
            jobs = {s.job_task for s in running.values() if s.job_task is not None}
            pending = await self._wait(jobs, min(started + opts.grace_period, end)
                                       - loop.time())
            if pending:
                names = [n for n, s in running.items() if s.job_task in pending]
                log.warning("stopping crawl(s) still running after the grace period: %s",
                            ", ".join(names))
                left = min(STOP_TIMEOUT, end - loop.time())
                for n in names:
                    crawl = self.state[n].crawl
                    if crawl is not None:
                        # abandoned (and recorded) a little before this wait gives up
                        crawl.stop("the daemon is stopping",
                                   bound=max(0.1, left - min(1.0, left / 5)))
                await self._wait(pending, left)
        # the evaluations started by finished crawls write their notifications; the
        # delivery pass in flight ends with its last send
        await self._wait(set(self._tasks) | set(self._busy), end - loop.time())
        linger = self._sends_may_run_until() - self.clock.monotonic()
        if linger > 0:  # a send apprise gave up waiting for may still run in its worker
            await self._wait({asyncio.ensure_future(asyncio.sleep(linger))},
                             min(linger, end - loop.time()))
        self._closed = True  # from here on no evaluation or delivery starts
        busy = self._still_running()
        was_leader = self.leadership.is_leader
        left = await self._left_over(end - loop.time()) if was_leader else 0
        others = (await self.leadership.others(max(0.1, min(1.0, end - loop.time())))
                  if was_leader and left else [])
        if busy:
            log.warning("stop budget (daemon.stop_timeout, %s) used up with %s still "
                        "running: not waiting for it; exiting now%s", format_duration(
                            opts.stop_timeout), " and ".join(busy),
                        "" if self.leadership.single else ", and the leader lock goes "
                        "with the process (nothing of it outlives the lock)")
            self.exit_now = True
        else:
            await self.leadership.release(max(0.2, started + opts.stop_timeout - 0.5
                                              - loop.time()))
        if left:
            log.info("%d notification(s) left pending in the outbox: %s", left,
                     _who_delivers(others))
        self.scheduler.shutdown(wait=False)  # a job still running logs one cancelled line
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        if self.web is not None:  # the page's process, within what is left of the budget
            self.web.stop(max(0.5, min(5.0, started + opts.stop_timeout - loop.time())))
        log.info("gpuradar daemon stopped")

    def _sends_may_run_until(self) -> float:
        """Until when a send apprise gave up waiting for may still run (0: none)."""
        return 0.0 if self.delivery is None else self.delivery.sends_may_run_until()

    def _still_running(self) -> list[str]:
        """What of this process may still crawl, write or send."""
        out = [f"the crawl of {n}" for n, s in self.state.items()
               if s.job_task is not None and not s.job_task.done()]
        out += sorted({what for f, what in self._busy.items() if not f.done()})
        if self.leadership.gate.in_flight or self._sends_may_run_until() > self.clock.monotonic():
            out.append("a notification being sent")
        return list(dict.fromkeys(out))

    async def _left_over(self, timeout: float) -> int:
        """Notifications still pending (0 when the database does not answer in time)."""
        from gpuradar.storage.alert_store import outbox_backlog

        try:
            return await asyncio.wait_for(in_thread(outbox_backlog, self.engine),
                                          max(0.1, min(2.0, timeout)))
        except Exception:  # noqa: BLE001 - only for the log line
            return 0


def _who_delivers(others: list[str] | None) -> str:
    if others is None:
        return "the replica that leads next delivers them (or this one after its next start)"
    if not others:
        return "no other replica is running: they are delivered when gpuradar starts again"
    return (f"the standby ({', '.join(others)}) delivers them as soon as it takes over"
            if len(others) == 1 else f"the standby that takes over (one of "
            f"{', '.join(others)}) delivers them as soon as it takes over")


def preload(settings: Settings) -> None:
    """Import every component a crawl loads, before the loop runs: otherwise the first crawl
    after start spends seconds importing them on the event loop, holding up everything."""
    import scrapy.core.engine  # noqa: F401
    from scrapy.utils.misc import load_object

    for key in ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "ITEM_PIPELINES",
                "EXTENSIONS", "DOWNLOAD_HANDLERS"):
        for name, value in settings.getwithbase(key).items():
            path = value if key == "DOWNLOAD_HANDLERS" else name
            if isinstance(path, str) and value is not None:
                try:
                    load_object(path)
                except Exception:  # noqa: BLE001 - the crawl will report it properly
                    log.debug("preloading %s failed", path, exc_info=True)


def _heartbeat_every() -> float:
    from gpuradar.scheduler.health import HEARTBEAT_EVERY

    return HEARTBEAT_EVERY


def _hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def install_asyncio_reactor() -> None:
    """Twisted's asyncio reactor, before anything imports `twisted.internet.reactor` (which
    would install the default one for good)."""
    from scrapy.utils.reactor import (
        install_reactor,
        is_asyncio_reactor_installed,
        is_reactor_installed,
    )

    if is_reactor_installed():
        if not is_asyncio_reactor_installed():
            raise StartupError("a non-asyncio Twisted reactor was installed before the daemon "
                               "started (something imported twisted.internet.reactor early)",
                               EXIT_FAILED)
        return
    install_reactor(ASYNCIO_REACTOR)


def run(options: RunOptions) -> int:
    """Run the daemon until SIGTERM/SIGINT; the process exit code."""
    from gpuradar.core.logs import setup_logging

    setup_logging(options.log_format, options.log_level)
    install_asyncio_reactor()
    daemon = Daemon(options)
    try:
        daemon.prepare()
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        return exc.code
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    def started() -> None:
        future = asyncio.ensure_future(daemon.main())

        def done(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("the daemon failed", exc_info=f.exception())
                daemon.exit_code = EXIT_FAILED
            reactor.callLater(0, reactor.stop)

        future.add_done_callback(done)
        Deferred.fromFuture(future).addErrback(lambda _f: None)

    reactor.callWhenRunning(started)
    # signals are the daemon's (asyncio handlers), not Twisted's
    # every reactor's run() takes it (ReactorBase); Twisted's interface does not declare it
    reactor.run(installSignalHandlers=False)  # type: ignore[call-arg]
    if daemon.exit_now:
        # work that would outlive the lock is still running in threads: end them all with
        # the process, before the kernel closes the lock's connection (shutdown())
        logging.shutdown()
        os._exit(daemon.exit_code)
    return daemon.exit_code
