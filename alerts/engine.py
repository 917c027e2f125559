"""Rule evaluation: what every rule matches now, the state changes that follow
(alerts.state.transition) and the notifications they cause, stored in one transaction.

The market, the rules' price pools and the alert state are kept in the process between
evaluations, with the database as the source of truth: offers are reloaded per source when
that source crawled, alert state when another process changed it (or a write failed).
An evaluation then looks again only at what can have changed:

* rules whose pool an offer entered or left at or below the rule's band (its limit plus
  hysteresis): after a crawl of one source, the rules that source's changes can reach;
* rules that are pending (`for:` counts evaluations) or in error, drop rules (their
  reference moves with time), rules with a time-based transition due (repeat, end of a
  mute, end of a `for` duration), new and changed rules;
* every rule when the stale sources, the FX rates (for non-USD rules) or the `alerts:`
  settings changed, and at the first evaluation in a process.

A rule whose evaluation raises is isolated: its state becomes `error` (the message kept),
the others are evaluated and notify as usual (`EvaluationResult.errors`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from gpuradar.alerts import messages
from gpuradar.alerts.index_rules import IndexMatch, index_match, read_index
from gpuradar.alerts.market import (
    EPS,
    Market,
    Pool,
    PoolKey,
    PoolSet,
    RuleMatch,
    band,
    band_best,
    match,
    needs_signals,
)
from gpuradar.alerts.rules import Rule
from gpuradar.alerts.settings import SETTING_KEYS, AlertSettings, parse_settings
from gpuradar.alerts.state import (
    AlertState,
    Policy,
    Seen,
    failed,
    fresh_state,
    source_transition,
    transition,
)
from gpuradar.core import collector
from gpuradar.core.units import format_duration
from gpuradar.storage import alerts as store

log = logging.getLogger(__name__)

__all__ = ["SETTING_KEYS", "AlertSettings", "EvaluationResult", "RuleMatch", "evaluate",
           "match_rules", "parse_settings", "policy", "read_market"]


@dataclass
class EvaluationResult:
    """What one evaluation did."""

    firing: int = 0                 # rules firing now
    pending: int = 0
    notifications: int = 0          # outbox rows queued
    fired: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    stale_sources: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)   # rule name -> why it failed
    matches: dict[str, RuleMatch] = field(default_factory=dict)  # rules evaluated
    evaluated: int = 0              # rules looked at again (the others cannot have changed)
    state_writes: int = 0           # alert_state rows inserted, updated or deleted
    seconds: float = 0.0


def policy(rule: Rule, settings: AlertSettings) -> Policy:
    """The rule's options, the `alerts:` defaults filling what it leaves out."""
    own_drop = rule.min_drop_pct is not None or rule.min_drop_abs is not None
    targets = rule.targets if rule.targets is not None else rule.notify
    return Policy(
        for_count=rule.for_count or (None if rule.for_duration else settings.for_count),
        for_duration=rule.for_duration or (None if rule.for_count else settings.for_duration),
        repeat=rule.repeat if rule.repeat_set else settings.repeat,
        min_drop_pct=rule.min_drop_pct if own_drop else settings.min_drop_pct,
        min_drop_abs=rule.min_drop_abs if own_drop else settings.min_drop_abs,
        send_resolved=(settings.send_resolved if rule.send_resolved is None
                       else rule.send_resolved),
        mute_until=rule.mute_until, can_notify=bool(targets))


# -- what stays in the process -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Plan:
    """What evaluation needs of one rule under the settings, worked out once per rule set
    (the check whether a rule must be looked at again runs for every rule, every time)."""

    rule: Rule
    pool: Pool                  # the pools are synced for the rule set first
    band: float | None          # the highest price it looks at (None: any)
    policy: Policy
    always: bool                # a drop or index rule: looked at every time

    @classmethod
    def of(cls, rule: Rule, settings: AlertSettings, pools: PoolSet) -> _Plan:
        c = rule.condition
        return cls(rule, pools.pools[PoolKey.of(c)], band(rule, settings),
                   policy(rule, settings), c.drop_pct is not None or c.index)


class _Runtime:
    """One database's market, pools and alert state, between evaluations."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.market = Market()
        self.pools = PoolSet()
        self.states: dict[str, AlertState] | None = None
        self.stamp: tuple[Any, ...] | None = None
        self.rules: dict[str, Rule] = {}
        self.synced: tuple[int, ...] = ()  # the rules (by identity) the pools were made for
        self.plans: list[_Plan] | None = None  # theirs, in order
        self.settings: AlertSettings | None = None
        # Jinja compiles a template once per environment: keep it (templates dir, renderer).
        self.renderer: tuple[Any, messages.Renderer] | None = None


_RUNTIMES: weakref.WeakKeyDictionary[Engine, _Runtime] = weakref.WeakKeyDictionary()
_RUNTIMES_LOCK = threading.Lock()


def _runtime(engine: Engine) -> _Runtime:
    with _RUNTIMES_LOCK:
        rt = _RUNTIMES.get(engine)
        if rt is None:
            rt = _RUNTIMES[engine] = _Runtime()
        return rt


def _unique(rules: Iterable[Rule]) -> list[Rule]:
    out: dict[str, Rule] = {}
    for r in rules:
        if r.key in out:
            log.warning("two rules are named %r; only the first is evaluated", r.name)
            continue
        out[r.key] = r
    return list(out.values())


# Where the evaluation's history holds the index rules' data (alerts.index_rules).
INDEX_KEY = "index:"


def _history(engine: Engine, rules: list[Rule], now: datetime) -> dict[str, Any]:
    """Price history for the drop and median rules, one query per (GPUs, window): rule key -> spans,
    or the exception the query raised (that rule's evaluation then fails alone)."""
    groups: dict[tuple, list[Rule]] = {}
    for r in rules:
        c = r.condition
        window = c.drop_window or c.median_window
        if c.drop_pct is not None and window is not None:
            groups.setdefault((c.offers.gpus, window), []).append(r)
    out: dict[str, Any] = {}
    for (gpus, window), members in groups.items():
        try:
            spans: Any = store.offer_history(engine, gpus, now - 2 * window)
        except Exception as exc:  # noqa: BLE001 - isolated to the rules that need it
            spans = exc
        for r in members:
            out[r.key] = spans
    return out


def _match(rule: Rule, pool: Pool, market: Market, settings: AlertSettings,
           history: dict[str, Any], keep: int | None) -> RuleMatch:
    if rule.condition.index:  # a rule on the market index, not on offers
        assert market.now is not None
        if isinstance(history.get(INDEX_KEY), Exception):
            raise history[INDEX_KEY]
        return index_match(rule, history.get(INDEX_KEY, {}),
                           market.usd_per_unit(rule.condition.currency), settings, market.now)
    spans = history.get(rule.key)
    if isinstance(spans, Exception):
        raise spans
    return match(rule, pool, market, settings, keep=keep, history=spans)


def read_market(engine: Engine, now: datetime | None = None,
                alert_settings: dict[str, Any] | AlertSettings | None = None,
                signals: bool = False) -> Market:
    """The market as stored now, read afresh (not the evaluation's copy); `signals`: with
    spot offers' interruption signals (`needs_signals`)."""
    market = Market(signals)
    market.refresh(engine, now or datetime.now(UTC), parse_settings(alert_settings))
    return market


def match_rules(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
                alert_settings: dict[str, Any] | AlertSettings | None = None,
                market: Market | None = None) -> list[RuleMatch]:
    """What every rule matches now, every match listed (no state, nothing written):
    `gpuradar rules test`. A rule that raises gets its `error` set; the others are
    matched as usual."""
    now = now or datetime.now(UTC)
    settings = parse_settings(alert_settings)
    if market is None or (needs_signals(rules) and not market.signals):
        market = read_market(engine, now, settings, needs_signals(rules))
    pools = PoolSet()
    out = []
    for rule in rules:
        try:
            pools.sync([rule], settings, market)
            history = _history(engine, [rule], now)
            history[INDEX_KEY] = read_index(engine, [rule], now)
            out.append(_match(rule, pools.pools[PoolKey.of(rule.condition)], market, settings,
                              history, None))
        except Exception as exc:  # noqa: BLE001 - reported per rule
            out.append(RuleMatch(rule, None, error=f"{type(exc).__name__}: {exc}".strip()))
    return out


# -- one evaluation ----------------------------------------------------------------------
@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector for the duration (it resumes as it was).

    An evaluation allocates and frees hundreds of thousands of short-lived objects (rows,
    matches, messages); reference counting frees them, yet every few thousand allocations
    the collector would traverse every tracked object of the process, the market's 100,000
    offers and the rules' state included: up to a third of a large evaluation's time (see
    docs/benchmark.md). The few cycles an evaluation leaves are collected once it resumes.
    The collector's one owner: gpuradar.core.collector.PAUSE."""
    with collector.PAUSE.paused():
        yield


def evaluate(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
             alert_settings: dict[str, Any] | AlertSettings | None = None) -> EvaluationResult:
    """One evaluation of the rule set against the stored offers.

    Writes the alert state and the outbox rows for the notifications it decides on, in one
    transaction. `rules` is the whole rule set: state of rules no longer in it is dropped.
    """
    started = time.perf_counter()
    with gc_paused():
        now = now or datetime.now(UTC)
        settings = parse_settings(alert_settings)
        rules = _unique(rules)
        rt = _runtime(engine)
        with rt.lock:
            try:
                result = _evaluate(engine, rt, rules, now, settings)
            except BaseException:
                rt.states = None  # the database is the truth: read it again next time
                raise
    result.seconds = time.perf_counter() - started
    # Every crawl evaluates: a line only when a rule failed (the daemon says what fired).
    log.log(logging.INFO if result.errors else logging.DEBUG,
            "evaluated %d rules (%d looked at again) in %s: %d firing, %d "
            "notifications queued%s", len(rules), result.evaluated,
            format_duration(result.seconds), result.firing, result.notifications,
            f", {len(result.errors)} failed" if result.errors else "")
    return result


def _evaluate(engine: Engine, rt: _Runtime, rules: list[Rule], now: datetime,
              settings: AlertSettings) -> EvaluationResult:
    everything, built, touched = _sync_pools(engine, rt, rules, now, settings)
    states = _states(engine, rt)
    if rt.plans is None:  # the rules or the settings changed (_sync_pools)
        rt.plans = [_Plan.of(r, settings, rt.pools) for r in rules]
    run = _Pass(rt, settings, now, _histories(engine, [p.rule for p in rt.plans if p.always],
                                              now), _renderer(rt, settings), engine=engine)
    new_states: dict[str, AlertState] = {}
    for plan in rt.plans:
        old = states.get(plan.rule.key)
        if (not everything and old is not None
                and _unchanged(rt, plan, old, built, touched, now)):
            continue
        new_states[plan.rule.key] = _evaluate_rule(run, plan, old)
    _source_alerts(rules, states, new_states, rt.market, settings, run, now)
    _save(engine, rt, rules, states, new_states, run)
    return run.result


def _sync_pools(engine: Engine, rt: _Runtime, rules: list[Rule], now: datetime,
                settings: AlertSettings) -> tuple[bool, set[Pool], dict[Pool, float]]:
    """Bring the market and the rules' pools up to date with the store: whether every rule
    must be looked at again, the pools built anew, and the lowest price that entered or
    left each pool."""
    if needs_signals(rules) and not rt.market.signals:
        # Read the market again with the spot offers' signals, and every pool with it.
        rt.market, rt.pools, rt.synced = Market(signals=True), PoolSet(), ()
    market = rt.market
    first = market.versions is None
    changes, fx_changed, stale_changed = market.refresh(engine, now, settings)
    everything = rt.states is None or settings != rt.settings or stale_changed or first
    if settings != rt.settings or stale_changed:
        rt.pools, rt.synced = PoolSet(), ()  # bands (hysteresis) or stale partitions moved
    ids = tuple(map(id, rules))
    built: set[PoolKey] = set()
    if ids != rt.synced:
        built = rt.pools.sync(rules, settings, market)
        rt.synced, rt.plans = ids, None
    if fx_changed:
        built |= rt.pools.rebuild(market, lambda k: k.currency != "USD")
    # Pools built just now hold the current market already (every pool, at the first
    # evaluation of a process: its 100,000 "new" offers need not be applied).
    touched = ({} if built >= rt.pools.pools.keys()
               else rt.pools.apply(changes, market, skip=built))
    # By pool object (hashed by identity): every rule looks its pool up in both.
    pools = rt.pools.pools
    return everything, {pools[k] for k in built}, {pools[k]: v for k, v in touched.items()}


def _histories(engine: Engine, rules: list[Rule], now: datetime) -> dict[Any, Any]:
    """The price history the drop rules need, and the market index the index rules read
    (or the error that fails the index rules alone)."""
    history: dict[Any, Any] = _history(engine, [r for r in rules
                                                if r.condition.drop_pct is not None
                                                and not r.condition.index], now)
    try:
        history[INDEX_KEY] = read_index(engine, rules, now)
    except Exception as exc:  # noqa: BLE001 - fails the index rules alone
        history[INDEX_KEY] = exc
    return history


def _renderer(rt: _Runtime, settings: AlertSettings) -> messages.Renderer:
    """The message renderer of the configured templates (kept while they stay the same)."""
    if rt.renderer is None or rt.renderer[0] != settings.templates:
        rt.renderer = (settings.templates, messages.Renderer(settings.templates))
    renderer = rt.renderer[1]
    renderer.reset()
    return renderer


@dataclass
class _Pass:
    """One evaluation's working set: what each rule is matched against, its outcome, and
    the notifications it queues."""

    rt: _Runtime
    settings: AlertSettings
    now: datetime
    history: dict[Any, Any]
    renderer: messages.Renderer
    result: EvaluationResult = field(default_factory=EvaluationResult)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    unbounded: dict[PoolKey, float | None] = field(default_factory=dict)  # cheapest now
    engine: Engine | None = None

    def announced(self, key: str, since: datetime | None, targets: Iterable[str]
                  ) -> list[str]:
        """Of `targets`, those the alert was announced to since it fired (Alertmanager's
        resolve-only-what-was-notified): a target added since, or whose announcement was
        given up on, never receives the end of something it never heard of."""
        if self.engine is None:
            return list(targets)
        told = store.announced_to(self.engine, key, since)
        return [t for t in targets if t in told]

    def queue(self, key: str, kind: str, targets: Iterable[str],
              msg: messages.Message) -> None:
        """One outbox row per target, written with the state change."""
        now = self.now
        for target in dict.fromkeys(targets):
            self.outbox.append({
                "created_at": now, "alert_key": key, "kind": kind, "target": target,
                "channel": "", "title": msg.title[:1000], "body_markdown": msg.markdown,
                "body_text": msg.text, "body_html": msg.html, "notify_type": msg.notify_type,
                "status": "pending", "attempts": 0, "next_attempt_at": now, "last_error": "",
                "sent_at": None})


def _unchanged(rt: _Runtime, plan: _Plan, old: AlertState, built: set[Pool],
               touched: dict[Pool, float], now: datetime) -> bool:
    """Whether a rule's outcome cannot have changed since the last pass: the same rule and
    state, no offer reached its band, no pool rebuilt, nothing due."""
    rule = plan.rule
    before = rt.rules.get(rule.key)
    same = before is rule or before == rule
    return (same and old.rule_hash == rule.condition_hash_value
            and old.state not in ("pending", "error") and not plan.always
            and plan.pool not in built
            and not _reached(plan, touched)
            and (old.state != "firing" or not _due(old, plan.policy, now)))


def _evaluate_rule(run: _Pass, plan: _Plan, old: AlertState | None) -> AlertState:
    """The rule's new state; its notification queued. A rule that fails is recorded failed
    and never stops the others."""
    settings, now, result, market = run.settings, run.now, run.result, run.rt.market
    rule, pol = plan.rule, plan.policy
    result.evaluated += 1
    digest = rule.condition_hash_value
    st = old if old is not None and old.rule_hash == digest else fresh_state(
        rule.key, rule.name, digest, rule.condition.currency, rule.text[:1000])
    if st.description != rule.text[:1000]:  # reworded, same condition (and currency)
        st = replace(st, description=rule.text[:1000])
    try:
        top = rule.top or settings.top
        m = _match(rule, plan.pool, market, settings, run.history, top)
        result.matches[rule.name] = m
        best = (m.summary() if isinstance(m, IndexMatch)
                else messages.offer_summary(*m.matches[0], rule, market, m.pool)
                if m.matches else {})
        seen = Seen(m.matched, m.best, m.count, m.in_band, m.stale_hold, best)
        new, kind = transition(st, seen, pol, now)
        if kind is not None:
            previous = st.notified_value if kind == "improved" else None
            cheapest = (None if kind != "resolved" else m.lowest
                        if isinstance(m, IndexMatch) else band_best(rule, market, run.unbounded))
            msg = run.renderer.rule_message(kind, m, market, top, previous, cheapest)
            targets = list(rule.targets if rule.targets is not None else rule.notify)
            if kind == "resolved":
                targets = run.announced(rule.key, st.fired_at, targets)
            run.queue(rule.key, kind, targets, msg)
    except Exception as exc:  # noqa: BLE001 - one rule must not stop the others
        why = f"{type(exc).__name__}: {exc}".strip()
        log.error("rule %r failed: %s", rule.name, why.splitlines()[0][:300],
                  exc_info=log.isEnabledFor(logging.DEBUG))
        result.errors[rule.name] = why
        new = failed(st, why)
    if new.state == "firing" and not st.was_firing:
        result.fired.append(rule.name)
    if new.state == "inactive" and st.was_firing:
        result.resolved.append(rule.name)
    return new


def _save(engine: Engine, rt: _Runtime, rules: list[Rule], states: dict[str, AlertState],
          new_states: dict[str, AlertState], run: _Pass) -> None:
    """Write the changed states, the dropped rules' deletions and the outbox in one
    transaction; the process's copy then follows the database, and the result counts."""
    now, result = run.now, run.result
    configured = {r.key for r in rules}
    deletes = [k for k, s in states.items() if s.kind == "rule" and k not in configured]
    inserts = [s for k, s in new_states.items() if k not in states]
    changed = {k: s.changes(states[k]) for k, s in new_states.items() if k in states}
    updates = [new_states[k] for k, diff in changed.items() if diff]
    store.save_evaluation(engine, inserts=[dict(s.as_row(), updated_at=now) for s in inserts],
                          updates=[dict(changed[s.key], key=s.key, updated_at=now)
                                   for s in updates],
                          deletes=deletes, notifications=run.outbox)
    # Written: the process's copy follows the database.
    for s in (*inserts, *updates):
        states[s.key] = s
    for k in deletes:
        states.pop(k, None)
    rt.stamp = store.state_stamp(engine) if (inserts or updates or deletes) else rt.stamp
    rt.rules = {r.key: r for r in rules}
    rt.settings = run.settings
    result.notifications = len(run.outbox)
    result.state_writes = len(inserts) + len(updates) + len(deletes)
    for r in rules:
        kept = states.get(r.key)
        if kept is not None and kept.state == "firing":
            result.firing += 1
        elif kept is not None and kept.state == "pending":
            result.pending += 1


def _reached(plan: _Plan, touched: dict[Pool, float]) -> bool:
    """Whether an offer entered or left the rule's pool at or below its band."""
    low = touched.get(plan.pool)
    return low is not None and (plan.band is None or low <= plan.band + EPS)


def _due(state: AlertState, pol: Policy, now: datetime) -> bool:
    at = pol.due(state)
    return at is not None and at <= now


def _states(engine: Engine, rt: _Runtime) -> dict[str, AlertState]:
    """The alert state, from the process's copy unless the database holds another."""
    stamp = store.state_stamp(engine)
    if rt.states is None or stamp != rt.stamp:
        rt.states = {k: AlertState.from_row(row) for k, row in store.load_states(engine).items()}
        rt.stamp = stamp
    return rt.states


def _source_alerts(rules: list[Rule], states: dict[str, AlertState],
                   new_states: dict[str, AlertState], market: Market,
                   settings: AlertSettings, run: _Pass, now: datetime) -> None:
    """Sources gone stale: one notification when it starts (opt-in), one when it ends (to
    the targets told that it started)."""
    renderer, result = run.renderer, run.result
    for source in sorted(market.last_success.keys() | market.failures.keys()):
        key = f"source:{source}"
        is_stale = source in market.stale
        if is_stale:
            result.stale_sources.append(source)
        old = states.get(key)
        was = old is not None and old.state == "firing"
        targets: list[str] = []
        if is_stale == was:
            pass  # no transition: nobody to tell
        elif settings.notify_stale is True:
            targets = sorted({t for r in rules
                              if (not r.condition.offers.sources
                                  or source in r.condition.offers.sources)
                              and source not in r.condition.offers.exclude_sources
                              for t in (r.targets if r.targets is not None else r.notify)})
        elif settings.notify_stale:
            targets = list(settings.notify_stale)
        new, kind = source_transition(old, source, is_stale,
                                      market.failures.get(source, 0), now, bool(targets))
        if new is None:
            continue
        if kind == "recovered":
            targets = run.announced(key, old.fired_at if old else None, targets)
        if kind is not None:
            run.queue(key, kind, targets, renderer.source_message(kind, source, market))
        new_states[key] = new
