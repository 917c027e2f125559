"""Alert state and how it moves: a pure function of (state, what the rule sees, its policy,
the time), Alertmanager's semantics.

* A rule that matches is pending while `for` has not been met, then firing; the first
  evaluation fires if the condition already holds.
* Firing notifies once; again only when the best price improves by `min_drop`, every
  `repeat` interval, and on resolution if `send_resolved`.
* Hysteresis: a firing rule resolves only when no fresh offer is within the limit plus
  `hysteresis`, and a stale source's offer within that band keeps it firing (no false
  "resolved" while a provider is down).
* A rule whose evaluation raised is in state `error` (its message in `best["error"]`); the
  state it had before is kept, so it goes on from there once it evaluates again.

Nothing here reads the database or the clock: alerts.engine feeds it and stores the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

STATES = ("inactive", "pending", "firing", "error")


@dataclass(frozen=True, slots=True)
class AlertState:
    """One row of `alert_state`: what was last decided and sent for one alert."""

    key: str
    kind: str                           # rule | source
    name: str
    rule_hash: str = ""
    description: str = ""
    state: str = "inactive"             # inactive | pending | firing | error
    active_count: int = 0               # consecutive evaluations matched (for `for:`)
    pending_since: datetime | None = None
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    last_notified_at: datetime | None = None
    notified_value: float | None = None  # best price at the last notification; None: not
    best_value: float | None = None      # announced yet in this firing episode
    currency: str = "USD"
    match_count: int = 0
    best: dict[str, Any] = field(default_factory=dict)  # cheapest offer, or {"error": ...}
    updated_at: datetime | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AlertState:
        return cls(**{name: row[name] for name in _FIELDS if name in row})

    def as_row(self) -> dict[str, Any]:
        # (field names looked up once, not per state: 10,000 new states at a first pass)
        return dict(zip(_FIELDS, _values(self), strict=True))

    @property
    def was_firing(self) -> bool:
        """Firing, or firing when its evaluation started to fail."""
        return self.state == "firing" or (self.state == "error" and self.fired_at is not None
                                          and self.resolved_at is None)

    def changes(self, since: AlertState) -> dict[str, Any]:
        """The fields that differ from `since` (`updated_at` aside): all an update of its
        stored row needs to write (none: nothing to write)."""
        return {name: value for name, value, before
                in zip(_COMPARED, _compared(self), _compared(since), strict=True)
                if value != before}


_FIELDS = tuple(f.name for f in fields(AlertState))
_values = attrgetter(*_FIELDS)  # every field's value, as one tuple
_COMPARED = tuple(name for name in _FIELDS if name != "updated_at")
_compared = attrgetter(*_COMPARED)  # their values, as one tuple
# Each field's slot, to set on a copy directly (frozen: the class refuses `setattr`).
_SLOTS = {name: getattr(AlertState, name).__set__ for name in _FIELDS}


def evolve(alert: AlertState, /, **changes: Any) -> AlertState:
    """`dataclasses.replace(alert, **changes)` at half its cost: every rule's state moves
    at every evaluation it is looked at (10,000 at a process's first), and `replace`
    checks each field's definition and runs `__init__`'s frozen assignments every time."""
    new = object.__new__(AlertState)
    for set_value, value in zip(_SLOTS.values(), _values(alert), strict=True):
        set_value(new, value)
    for name, value in changes.items():
        _SLOTS[name](new, value)
    return new


@dataclass(frozen=True, slots=True)
class Seen:
    """What a rule sees now, reduced to what the transition needs."""

    matched: bool
    best: float | None                  # cheapest fresh match (rule currency and unit)
    count: int
    in_band: bool                       # a fresh offer within limit + hysteresis
    stale_hold: bool                    # a stale source's offer within the band
    best_offer: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Policy:
    """A rule's options with the `alerts:` defaults applied (by engine.policy: the defaults
    live in AlertSettings, not here)."""

    for_count: int | None
    for_duration: timedelta | None
    repeat: timedelta | None
    min_drop_pct: float | None
    min_drop_abs: float | None
    send_resolved: bool
    mute_until: datetime | None
    can_notify: bool                    # it has targets

    def muted(self, now: datetime) -> bool:
        return self.mute_until is not None and now < self.mute_until

    def improved(self, best: float, notified: float) -> bool:
        if self.min_drop_abs is not None:
            return best <= notified - self.min_drop_abs + 1e-9 and best < notified
        pct = self.min_drop_pct or 0.0
        return best <= notified * (1 - pct) + 1e-9 and best < notified

    def due(self, state: AlertState) -> datetime | None:
        """The next time a firing alert may notify with nothing else changing: a repeat, or
        the end of a mute; None when only new offers can move it. (Pending and failed
        alerts are looked at at every evaluation: they need no due time.)"""
        if state.notified_value is None:
            return self.mute_until if self.can_notify else None
        if self.repeat and state.last_notified_at:
            return state.last_notified_at + self.repeat
        return None


def fresh_state(key: str, name: str, rule_hash: str, currency: str,
                description: str = "") -> AlertState:
    return AlertState(key=key, kind="rule", name=name, rule_hash=rule_hash,
                      description=description, currency=currency)


def transition(state: AlertState, seen: Seen, policy: Policy,
               now: datetime) -> tuple[AlertState, str | None]:
    """The next state of a rule's alert, and the notification it sends (None: none). A kind
    is returned only when it is sent (not muted, targets configured); then the state records
    it as notified."""
    st = state
    if st.state == "error":  # go on from the state it had before it failed
        firing = st.was_firing
        st = evolve(st, state="firing" if firing else "inactive", best={},
                     active_count=st.active_count if firing else 0,
                     pending_since=st.pending_since if firing else None)
    changes: dict[str, Any] = {}
    kind: str | None = None
    if seen.matched:
        pending_since = st.pending_since or now
        changes.update(best_value=seen.best, match_count=seen.count, best=seen.best_offer,
                       pending_since=pending_since)
        if st.state != "firing":
            active = st.active_count + 1
            ready = (now - pending_since >= policy.for_duration if policy.for_duration
                     else active >= (policy.for_count or 1))
            if ready:
                changes.update(state="firing", active_count=active, fired_at=now,
                               notified_value=None, resolved_at=None)
                kind = "firing"
            else:
                changes.update(state="pending", active_count=active)
        elif st.notified_value is None:
            kind = "firing"  # muted or without targets until now
        elif seen.best is not None and policy.improved(seen.best, st.notified_value):
            kind = "improved"
        elif policy.repeat and st.last_notified_at and (
                now - st.last_notified_at >= policy.repeat):
            kind = "repeat"
    elif st.state == "firing" and (seen.in_band or seen.stale_hold):
        pass  # hysteresis, or a stale source may still have it: keep firing
    elif st.state == "firing":
        kind = "resolved" if policy.send_resolved and st.notified_value is not None else None
        changes.update(state="inactive", resolved_at=now, active_count=0, pending_since=None,
                       match_count=0, notified_value=None)
    elif st.state == "pending" and not seen.stale_hold:
        changes.update(state="inactive", active_count=0, pending_since=None, match_count=0)
    if kind is not None and (policy.muted(now) or not policy.can_notify):
        kind = None
    if kind is not None:
        changes["last_notified_at"] = now
        if kind != "resolved":
            changes["notified_value"] = seen.best
    return evolve(st, **changes), kind


def failed(state: AlertState, message: str) -> AlertState:
    """The state of a rule whose evaluation raised: `error`, the rest kept as it was."""
    return evolve(state, state="error", best={"error": message[:500]})


def source_transition(state: AlertState | None, source: str, is_stale: bool, failures: int,
                      now: datetime, can_notify: bool) -> tuple[AlertState | None, str | None]:
    """A source's staleness alert: "stale" when it starts, "recovered" when it ends (the
    latter only if the former was sent). None when there is nothing to keep."""
    if state is None:
        if not is_stale:
            return None, None
        state = AlertState(key=f"source:{source}", kind="source", name=source,
                           description=f"source {source} is stale")
    kind: str | None = None
    changes: dict[str, Any] = {"active_count": failures}
    if is_stale and state.state != "firing":
        changes.update(state="firing", fired_at=now, resolved_at=None, notified_value=None)
        kind = "stale"
    elif not is_stale and state.state == "firing":
        changes.update(state="inactive", resolved_at=now, notified_value=None)
        kind = "recovered" if state.notified_value is not None else None
    if kind is not None and can_notify:
        changes["last_notified_at"] = now
        changes["notified_value"] = 1.0 if kind == "stale" else None
    elif kind is not None:
        kind = None
    return evolve(state, **changes), kind
