"""Delivering the outbox through apprise: per target, with retries and exponential backoff.

Each outbox row is one message for one target. A pass takes the due rows, sends each
target's rows in its own thread (a slow or dead target never holds up another), and marks
every row sent, or pending again with its next attempt `retry_backoff * 2**attempts` later
(capped), or failed once `max_attempts` are used up, with the error. Delivery is
at-least-once: a process killed between sending and recording sends that message again.
Errors carry apprise's redacted URL, never the URL itself.

A `Delivery` delivers one database's outbox, one pass at a time, with the time from the
`Clock` it is given, and knows until when a send it gave up waiting for may still run
(`sends_may_run_until`); the daemon keeps its own, `deliver_pending()` serves one-off
callers (the CLI, tests) with one per engine.

Replicas (scheduler/leadership.py) pass a `guard`: every row is handled inside it, and it
raises `Withheld` once this process may not send any more (it is stopping, or it lost the
leader lock); the target's remaining rows then stay exactly as they are, for whoever
delivers next. Inside the guard a row is first reserved (`claim_notification`: its next
attempt moves `lease_for()` ahead), so a replica that takes over meanwhile does not send
the message that is in flight here again.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import Engine

from gpuradar.alerts.loader import Target, Targets, channel_of, redact
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.config import AlertsSection
from gpuradar.storage import alert_store as store
from gpuradar.storage.db import PerEngine

log = logging.getLogger(__name__)

__all__ = ["Delivery", "DeliveryResult", "SendOutcome", "Withheld", "channel_of",
           "deliver_pending", "delivery_for", "lease_for", "send"]

# The `alerts:` section's defaults, stated once in its model (gpuradar.core.config): what a
# delivery uses when the config leaves them out, or when there is no config.
_DEFAULTS = AlertsSection()
MAX_ATTEMPTS = int(_DEFAULTS.max_attempts)
RETRY_BACKOFF = float(_DEFAULTS.retry_backoff)  # seconds before the first retry; doubles
MAX_BACKOFF = 3600.0
SEND_TIMEOUT = float(_DEFAULTS.send_timeout)    # one apprise call, seconds
_LOG_LINE = re.compile(r"^\S+ \S+ - (WARNING|ERROR|CRITICAL) - (.*)$")


class Withheld(Exception):  # noqa: N818 - not an error: the message is left for later
    """Raised by a delivery guard: this process sends nothing more now (it is stopping, or
    it is no longer the leader). The row stays pending, untouched, for whoever sends next."""


def lease_for(target: Target | None, timeout: float) -> timedelta:
    """How long a row is reserved for one send: every URL's attempt (`timeout` each) plus
    a margin to record the outcome."""
    urls = len(target.urls) if target is not None else 1
    return timedelta(seconds=timeout * max(1, urls) + min(timeout, 5.0))


@dataclass
class DeliveryResult:
    """The outcome of one outbox row in one pass."""

    id: int
    target: str
    channel: str            # slack | email | webhook | other
    status: str             # sent | failed | retry
    attempts: int
    kind: str = ""
    alert_key: str = ""
    error: str = ""


@dataclass
class SendOutcome:
    """One apprise call to one target."""

    ok: bool
    error: str = ""
    details: list[tuple[str, bool, str]] | None = None  # (redacted URL, ok, reason)
    # apprise stops waiting for a service at its deadline while its worker thread may go on
    # (apprise.dispatch.timeout_result: "The worker may still be running"); that worker
    # ends at the latest when its connect and read timeouts (set to `timeout` by _bound)
    # have run out: the clock's monotonic time by then (0: no such worker).
    may_run_until: float = 0.0


def _asset(timeout: float = SEND_TIMEOUT):
    import apprise

    # service_timeout: apprise's own budget for one service (its retries included).
    return apprise.AppriseAsset(app_id="gpuradar", app_desc="GPU price alerts",
                                app_url="https://github.com/gpuradar/gpuradar",
                                service_timeout=timeout)


def _bound(plugin: Any, url: str, timeout: float) -> None:
    """Make one attempt of `plugin` last at most `timeout` seconds per socket operation:
    apprise's connect/read timeouts (its `cto`/`rto` URL parameters, 4 s by default; SMTP
    15 s) are set to it, or kept when the URL gives a smaller one."""
    given = parse_qs(urlsplit(url).query)
    for param, attr in (("cto", "socket_connect_timeout"), ("rto", "socket_read_timeout")):
        current = float(getattr(plugin, attr))
        setattr(plugin, attr, min(current, timeout) if param in given else timeout)


def _reason(notify_result: Any) -> str:
    lines = []
    for entry in notify_result.logs():
        m = _LOG_LINE.match(str(entry))
        if m:
            lines.append(m.group(2).strip())
    return "; ".join(dict.fromkeys(lines)) or "apprise reported a failure"


def _send_one(url: str, target: Target, title: str, markdown: str, html: str,
              text: str, notify_type: str, timeout: float, clock: Clock
              ) -> tuple[str, bool, str, float]:
    """One URL of a target: (its redacted URL, sent, why not, until when apprise's worker
    may still run it: 0 when none)."""
    import apprise
    from apprise import AppriseResultStatus, NotifyFormat, NotifyType

    asset = _asset(timeout)
    plugin = apprise.Apprise.instantiate(url, asset=asset)
    if plugin is None:  # validated at load time; only a changed plugin set gets here
        return target.mask(redact(url)), False, "apprise cannot parse the URL", 0.0
    # as configured (before the timeouts are set); apprise keeps a webhook's path in clear
    shown = target.mask(plugin.url(privacy=True))
    _bound(plugin, url, timeout)
    fmt = plugin.resolve_format(NotifyFormat.MARKDOWN)
    body = {NotifyFormat.MARKDOWN: markdown, NotifyFormat.HTML: html}.get(fmt, text)
    ap = apprise.Apprise(asset=asset)
    ap.add(plugin)
    started = clock.monotonic()
    try:
        res = ap.notify(body=body, title=title, body_format=fmt,
                        notify_type=NotifyType(notify_type), timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a plugin bug must not stop the pass
        return shown, False, target.mask(f"{type(exc).__name__}: {exc}"), 0.0
    if res:
        return shown, True, "", 0.0
    lines = [str(entry) for r in res for entry in r.logs()]
    timed_out = (res.status == AppriseResultStatus.TIMEOUT
                 or clock.monotonic() - started >= timeout * 0.9
                 or any("timed out" in line.lower() for line in lines))
    if timed_out:
        return shown, False, target.mask(f"timed out after {timeout:g} s"), (
            started + 2 * timeout + 1.0)
    why = "; ".join(_reason(r) for r in res) or f"apprise status {res.status.name}"
    return shown, False, target.mask(why), 0.0


def send(target: Target, title: str, markdown: str, html: str, text: str,
         notify_type: str = "info", timeout: float = SEND_TIMEOUT, *,
         clock: Clock = SYSTEM) -> SendOutcome:
    """Send one message to every URL of `target`, each in the format it takes best
    (Markdown for Slack and webhooks, HTML for email, text otherwise), each attempt bounded
    by `timeout` seconds (`alerts.send_timeout`)."""
    sent = [_send_one(url, target, title, markdown, html, text, notify_type, timeout, clock)
            for url in target.urls]
    failed = [f"{u}: {why}" for u, ok, why, _ in sent if not ok]
    return SendOutcome(ok=not failed, error=" | ".join(failed)[:2000],
                       details=[(u, ok, why) for u, ok, why, _ in sent],
                       may_run_until=max((until for *_, until in sent), default=0.0))


def _backoff(attempts: int, base: float, cap: float) -> timedelta:
    return timedelta(seconds=min(cap, base * 2 ** max(0, attempts - 1)))


class Delivery:
    """Delivers one database's outbox: one pass at a time, each target's due rows in a
    thread of their own, with the time from `clock`; and keeps until when a send apprise
    gave up waiting for may still run in its worker thread."""

    def __init__(self, engine: Engine, clock: Clock = SYSTEM) -> None:
        self.engine = engine
        self.clock = clock
        self._pass = threading.Lock()          # one delivery pass at a time
        self._stragglers = threading.Lock()
        self._stragglers_until = 0.0           # clock.monotonic(); 0: none

    def sends_may_run_until(self) -> float:
        """The `clock.monotonic()` until which a send that apprise gave up waiting for may
        still be running in its worker thread (0: none). A process that hands over waits
        for it, or exits with its lock, so that no message leaves it after the lock is
        free."""
        return self._stragglers_until

    def _straggler(self, until: float) -> None:
        with self._stragglers:
            self._stragglers_until = max(self._stragglers_until, until)

    def deliver_pending(self, targets: Targets, *, now: datetime | None = None,
                        limit: int = 100, max_attempts: int | None = None,
                        retry_backoff: float | None = None, max_backoff: float = MAX_BACKOFF,
                        timeout: float | None = None,
                        sender: Callable[..., SendOutcome] = send,
                        guard: Callable[[], AbstractContextManager[Any]] = (
                            contextlib.nullcontext),
                        ) -> list[DeliveryResult]:
        """Deliver the outbox rows that are due; returns what happened to each (rows left
        because `guard` withheld them are not in it).

        Settings not given come from `targets.delivery` (the config's `alerts:` section),
        then the defaults."""
        now = now or self.clock.now()
        conf = getattr(targets, "delivery", {}) or {}
        retry = RetryPolicy(
            max_attempts=int(max_attempts or conf.get("max_attempts") or MAX_ATTEMPTS),
            retry_backoff=float(retry_backoff or conf.get("retry_backoff") or RETRY_BACKOFF),
            max_backoff=max_backoff,
            timeout=float(timeout or conf.get("send_timeout") or SEND_TIMEOUT))
        if not self._pass.acquire(blocking=False):
            return []  # another pass is running
        try:
            rows = store.due_notifications(self.engine, now, limit)
            by_target: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_target.setdefault(row["target"], []).append(row)
            results: list[DeliveryResult] = []
            if not by_target:
                return results

            def run(name: str, batch: list[dict[str, Any]]) -> list[DeliveryResult]:
                return self._deliver_target(targets.get(name), name, batch, now, retry,
                                            sender, guard)

            with ThreadPoolExecutor(max_workers=min(8, len(by_target)),
                                    thread_name_prefix="gpuradar-notify") as pool:
                for out in pool.map(lambda kv: run(*kv), by_target.items()):
                    results.extend(out)
            return results
        finally:
            self._pass.release()

    def _deliver_target(self, target: Target | None, name: str,
                        batch: list[dict[str, Any]], now: datetime, retry: RetryPolicy,
                        sender: Callable[..., SendOutcome],
                        guard: Callable[[], AbstractContextManager[Any]],
                        ) -> list[DeliveryResult]:
        """One target's due rows, oldest first; after a failure the rest wait for the
        retry. Each row is handled inside `guard`; once it withholds, the rest stay as they
        are."""
        results: list[DeliveryResult] = []
        channel = target.channel if target else "other"
        failing_until: datetime | None = None
        for n, row in enumerate(batch):
            try:
                with guard():
                    failing_until = self._deliver_row(target, name, channel, row, now,
                                                      failing_until, retry, sender, results)
            except Withheld as exc:
                log.info("notification %d to %s not sent: %s (%d left pending for this "
                         "target)", row["id"], name, exc, len(batch) - n)
                break
        return results

    def _deliver_row(self, target: Target | None, name: str, channel: str,
                     row: dict[str, Any], now: datetime, failing_until: datetime | None,
                     retry: RetryPolicy, sender: Callable[..., SendOutcome],
                     results: list[DeliveryResult]) -> datetime | None:
        """One row: reserve, send and record it; the target's retry time when it failed."""
        engine = self.engine
        base = {"id": row["id"], "target": name, "channel": channel, "kind": row["kind"],
                "alert_key": row["alert_key"]}
        if target is None:
            error = f"target {name!r} is not configured (any more)"
            store.record_attempt(engine, row["id"], status="failed", last_error=error,
                                 channel=channel)
            results.append(DeliveryResult(**base, status="failed", attempts=row["attempts"],
                                          error=error))
            return failing_until
        if failing_until is not None:
            store.record_attempt(engine, row["id"], next_attempt_at=failing_until,
                                 channel=channel)
            results.append(DeliveryResult(**base, status="retry", attempts=row["attempts"],
                                          error="deferred: the target failed in this pass"))
            return failing_until
        if not store.claim_notification(engine, row["id"], row["next_attempt_at"],
                                        self.clock.now() + lease_for(target, retry.timeout)):
            log.debug("notification %d: taken over by another replica", row["id"])
            return failing_until
        try:
            outcome = sender(target, row["title"], row["body_markdown"], row["body_html"],
                             row["body_text"], row["notify_type"], retry.timeout)
        except Exception as exc:  # noqa: BLE001
            outcome = SendOutcome(False, target.mask(f"{type(exc).__name__}: {exc}"))
        if outcome.may_run_until:
            self._straggler(outcome.may_run_until)
        attempts = row["attempts"] + 1
        if outcome.ok:
            store.record_attempt(engine, row["id"], status="sent", attempts=attempts,
                                 sent_at=self.clock.now(), last_error="", channel=channel)
            results.append(DeliveryResult(**base, status="sent", attempts=attempts))
            log.info("notification %d (%s) sent to %s", row["id"], row["kind"], name)
            return failing_until
        if attempts >= retry.max_attempts:
            store.record_attempt(engine, row["id"], status="failed", attempts=attempts,
                                 last_error=outcome.error, channel=channel)
            results.append(DeliveryResult(**base, status="failed", attempts=attempts,
                                          error=outcome.error))
            log.error("notification %d to %s failed for good after %d attempts: %s",
                      row["id"], name, attempts, outcome.error)
            return failing_until
        failing_until = now + _backoff(attempts, retry.retry_backoff, retry.max_backoff)
        store.record_attempt(engine, row["id"], attempts=attempts, last_error=outcome.error,
                             next_attempt_at=failing_until, channel=channel)
        results.append(DeliveryResult(**base, status="retry", attempts=attempts,
                                      error=outcome.error))
        log.warning("notification %d to %s failed (attempt %d), retry at %s: %s", row["id"],
                    name, attempts, failing_until.isoformat(timespec="seconds"), outcome.error)
        return failing_until


@dataclass(frozen=True)
class RetryPolicy:
    """How one pass sends and retries: the settings, resolved once per pass."""

    max_attempts: int
    retry_backoff: float
    max_backoff: float
    timeout: float


# -- for one-off callers -------------------------------------------------------------------
# The CLI and tests deliver by engine: each engine's Delivery lives as long as the engine
# (the daemon makes and keeps its own).
_DELIVERIES: PerEngine[Delivery] = PerEngine(Delivery)


def delivery_for(engine: Engine) -> Delivery:
    """The Delivery `deliver_pending()` uses for `engine` (made at the first call)."""
    return _DELIVERIES.get(engine)


def deliver_pending(engine: Engine, targets: Targets, *, now: datetime | None = None,
                    limit: int = 100, max_attempts: int | None = None,
                    retry_backoff: float | None = None, max_backoff: float = MAX_BACKOFF,
                    timeout: float | None = None,
                    sender: Callable[..., SendOutcome] = send,
                    guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
                    clock: Clock = SYSTEM) -> list[DeliveryResult]:
    """`Delivery.deliver_pending` with the engine's Delivery (`delivery_for`)."""
    return delivery_for(engine).deliver_pending(
        targets, now=now or clock.now(), limit=limit, max_attempts=max_attempts,
        retry_backoff=retry_backoff, max_backoff=max_backoff, timeout=timeout,
        sender=sender, guard=guard)
