"""Delivering the outbox through apprise: per target, with retries and exponential backoff.

Each outbox row is one message for one target. A pass takes the due rows, sends each
target's rows in its own thread (a slow or dead target never holds up another), and marks
every row sent, or pending again with its next attempt `retry_backoff * 2**attempts` later
(capped), or failed once `max_attempts` are used up, with the error. Delivery is
at-least-once: a process killed between sending and recording sends that message again.
Errors carry apprise's redacted URL, never the URL itself.

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
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import Engine

from gpuradar.alerts.loader import Target, Targets, channel_of, redact
from gpuradar.core.config import AlertsSection
from gpuradar.storage import alerts as store

log = logging.getLogger(__name__)

__all__ = ["DeliveryResult", "SendOutcome", "Withheld", "channel_of", "deliver_pending",
           "lease_for", "send", "sends_may_run_until"]

# The `alerts:` section's defaults, stated once in its model (gpuradar.core.config): what a
# delivery uses when the config leaves them out, or when there is no config.
_DEFAULTS = AlertsSection()
MAX_ATTEMPTS = int(_DEFAULTS.max_attempts)
RETRY_BACKOFF = float(_DEFAULTS.retry_backoff)  # seconds before the first retry; doubles
MAX_BACKOFF = 3600.0
SEND_TIMEOUT = float(_DEFAULTS.send_timeout)    # one apprise call, seconds
_LOG_LINE = re.compile(r"^\S+ \S+ - (WARNING|ERROR|CRITICAL) - (.*)$")
_lock = threading.Lock()   # one delivery pass at a time per process
# apprise stops waiting for a service at its deadline while its worker thread may go on
# (apprise.dispatch.timeout_result: "The worker may still be running"); that worker ends at
# the latest when its connect and read timeouts (set to `timeout` by _bound) have run out.
_stragglers_until = 0.0    # time.monotonic() by which every such worker has ended
_stragglers_lock = threading.Lock()


class Withheld(Exception):  # noqa: N818 - not an error: the message is left for later
    """Raised by a delivery guard: this process sends nothing more now (it is stopping, or
    it is no longer the leader). The row stays pending, untouched, for whoever sends next."""


def lease_for(target: Target | None, timeout: float) -> timedelta:
    """How long a row is reserved for one send: every URL's attempt (`timeout` each) plus
    a margin to record the outcome."""
    urls = len(target.urls) if target is not None else 1
    return timedelta(seconds=timeout * max(1, urls) + min(timeout, 5.0))


def sends_may_run_until() -> float:
    """The `time.monotonic()` until which a send that apprise gave up waiting for may still
    be running in its worker thread (0: none). A process that hands over waits for it, or
    exits with its lock, so that no message leaves it after the lock is free."""
    return _stragglers_until


def _straggler(started: float, timeout: float) -> None:
    global _stragglers_until
    with _stragglers_lock:
        _stragglers_until = max(_stragglers_until, started + 2 * timeout + 1.0)


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
              text: str, notify_type: str, timeout: float) -> tuple[str, bool, str]:
    """One URL of a target: (its redacted URL, sent, why not)."""
    import apprise
    from apprise import AppriseResultStatus, NotifyFormat, NotifyType

    asset = _asset(timeout)
    plugin = apprise.Apprise.instantiate(url, asset=asset)
    if plugin is None:  # validated at load time; only a changed plugin set gets here
        return target.mask(redact(url)), False, "apprise cannot parse the URL"
    # as configured (before the timeouts are set); apprise keeps a webhook's path in clear
    shown = target.mask(plugin.url(privacy=True))
    _bound(plugin, url, timeout)
    fmt = plugin.resolve_format(NotifyFormat.MARKDOWN)
    body = {NotifyFormat.MARKDOWN: markdown, NotifyFormat.HTML: html}.get(fmt, text)
    ap = apprise.Apprise(asset=asset)
    ap.add(plugin)
    started = time.monotonic()
    try:
        res = ap.notify(body=body, title=title, body_format=fmt,
                        notify_type=NotifyType(notify_type), timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a plugin bug must not stop the pass
        return shown, False, target.mask(f"{type(exc).__name__}: {exc}")
    if res:
        return shown, True, ""
    lines = [str(entry) for r in res for entry in r.logs()]
    timed_out = (res.status == AppriseResultStatus.TIMEOUT
                 or time.monotonic() - started >= timeout * 0.9
                 or any("timed out" in line.lower() for line in lines))
    if timed_out:
        _straggler(started, timeout)
        why = f"timed out after {timeout:g} s"
    else:
        why = "; ".join(_reason(r) for r in res) or f"apprise status {res.status.name}"
    return shown, False, target.mask(why)


def send(target: Target, title: str, markdown: str, html: str, text: str,
         notify_type: str = "info", timeout: float = SEND_TIMEOUT) -> SendOutcome:
    """Send one message to every URL of `target`, each in the format it takes best
    (Markdown for Slack and webhooks, HTML for email, text otherwise), each attempt bounded
    by `timeout` seconds (`alerts.send_timeout`)."""
    details = [_send_one(url, target, title, markdown, html, text, notify_type, timeout)
               for url in target.urls]
    failed = [f"{u}: {why}" for u, ok, why in details if not ok]
    return SendOutcome(ok=not failed, error=" | ".join(failed)[:2000], details=details)


def _backoff(attempts: int, base: float, cap: float) -> timedelta:
    return timedelta(seconds=min(cap, base * 2 ** max(0, attempts - 1)))


def deliver_pending(engine: Engine, targets: Targets, *, now: datetime | None = None,
                    limit: int = 100, max_attempts: int | None = None,
                    retry_backoff: float | None = None, max_backoff: float = MAX_BACKOFF,
                    timeout: float | None = None,
                    sender: Callable[..., SendOutcome] = send,
                    guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
                    ) -> list[DeliveryResult]:
    """Deliver the outbox rows that are due; returns what happened to each (rows left
    because `guard` withheld them are not in it).

    Settings not given come from `targets.delivery` (the config's `alerts:` section), then
    the defaults."""
    now = now or datetime.now(UTC)
    conf = getattr(targets, "delivery", {}) or {}
    max_attempts = int(max_attempts or conf.get("max_attempts") or MAX_ATTEMPTS)
    retry_backoff = float(retry_backoff or conf.get("retry_backoff") or RETRY_BACKOFF)
    timeout = float(timeout or conf.get("send_timeout") or SEND_TIMEOUT)
    if not _lock.acquire(blocking=False):
        return []  # another pass is running in this process
    try:
        rows = store.due_notifications(engine, now, limit)
        by_target: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_target.setdefault(row["target"], []).append(row)
        results: list[DeliveryResult] = []
        if not by_target:
            return results

        def run(name: str, batch: list[dict[str, Any]]) -> list[DeliveryResult]:
            return _deliver_target(engine, targets.get(name), name, batch, now, max_attempts,
                                   retry_backoff, max_backoff, timeout, sender, guard)

        with ThreadPoolExecutor(max_workers=min(8, len(by_target)),
                                thread_name_prefix="gpuradar-notify") as pool:
            for out in pool.map(lambda kv: run(*kv), by_target.items()):
                results.extend(out)
        return results
    finally:
        _lock.release()


def _deliver_target(engine: Engine, target: Target | None, name: str,
                    batch: list[dict[str, Any]], now: datetime, max_attempts: int,
                    retry_backoff: float, max_backoff: float, timeout: float,
                    sender: Callable[..., SendOutcome],
                    guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
                    ) -> list[DeliveryResult]:
    """One target's due rows, oldest first; after a failure the rest wait for the retry.
    Each row is handled inside `guard`; once it withholds, the rest stay as they are."""
    results: list[DeliveryResult] = []
    channel = target.channel if target else "other"
    failing_until: datetime | None = None
    for n, row in enumerate(batch):
        try:
            with guard():
                failing_until = _deliver_row(engine, target, name, channel, row, now,
                                             failing_until, max_attempts, retry_backoff,
                                             max_backoff, timeout, sender, results)
        except Withheld as exc:
            log.info("notification %d to %s not sent: %s (%d left pending for this target)",
                     row["id"], name, exc, len(batch) - n)
            break
    return results


def _deliver_row(engine: Engine, target: Target | None, name: str, channel: str,
                 row: dict[str, Any], now: datetime, failing_until: datetime | None,
                 max_attempts: int, retry_backoff: float, max_backoff: float, timeout: float,
                 sender: Callable[..., SendOutcome], results: list[DeliveryResult],
                 ) -> datetime | None:
    """One row: reserve, send and record it; the target's retry time when it failed."""
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
                                    datetime.now(UTC) + lease_for(target, timeout)):
        log.debug("notification %d: taken over by another replica", row["id"])
        return failing_until
    try:
        outcome = sender(target, row["title"], row["body_markdown"], row["body_html"],
                         row["body_text"], row["notify_type"], timeout)
    except Exception as exc:  # noqa: BLE001
        outcome = SendOutcome(False, target.mask(f"{type(exc).__name__}: {exc}"))
    attempts = row["attempts"] + 1
    if outcome.ok:
        store.record_attempt(engine, row["id"], status="sent", attempts=attempts,
                             sent_at=datetime.now(UTC), last_error="", channel=channel)
        results.append(DeliveryResult(**base, status="sent", attempts=attempts))
        log.info("notification %d (%s) sent to %s", row["id"], row["kind"], name)
        return failing_until
    if attempts >= max_attempts:
        store.record_attempt(engine, row["id"], status="failed", attempts=attempts,
                             last_error=outcome.error, channel=channel)
        results.append(DeliveryResult(**base, status="failed", attempts=attempts,
                                      error=outcome.error))
        log.error("notification %d to %s failed for good after %d attempts: %s",
                  row["id"], name, attempts, outcome.error)
        return failing_until
    failing_until = now + _backoff(attempts, retry_backoff, max_backoff)
    store.record_attempt(engine, row["id"], attempts=attempts, last_error=outcome.error,
                         next_attempt_at=failing_until, channel=channel)
    results.append(DeliveryResult(**base, status="retry", attempts=attempts,
                                  error=outcome.error))
    log.warning("notification %d to %s failed (attempt %d), retry at %s: %s", row["id"],
                name, attempts, failing_until.isoformat(timespec="seconds"), outcome.error)
    return failing_until
