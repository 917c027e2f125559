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

`Evaluator` owns that state (one per database; the daemon keeps its own) and reads the time
from the `Clock` it is given. Per rule it runs the stages of alerts.stages: match,
transition, render, enqueue; it reads their inputs and stores what they decide.
`evaluate()` is the same for one-off callers (the CLI, tests): one Evaluator per engine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from gpuradar.alerts import messages
from gpuradar.alerts.alert_settings import SETTING_KEYS, AlertSettings, parse_settings
from gpuradar.alerts.index_rules import read_index
from gpuradar.alerts.market import EPS, Market, Pool, PoolKey, PoolSet, RuleMatch, needs_signals
from gpuradar.alerts.rules import Rule
from gpuradar.alerts.stages import (
    INDEX_KEY,
    Composer,
    Matcher,
    Outbox,
    RulePlan,
    policy,
    rule_transition,
    source_transitions,
    starting_state,
)
from gpuradar.alerts.state import AlertState, Policy, failed
from gpuradar.core import collector
from gpuradar.core.clock import SYSTEM, Clock
from gpuradar.core.units import format_duration
from gpuradar.storage import alert_store as store
from gpuradar.storage.db import PerEngine

log = logging.getLogger(__name__)

__all__ = ["SETTING_KEYS", "AlertSettings", "EvaluationResult", "Evaluator", "RuleMatch",
           "evaluate", "match_rules", "parse_settings", "policy", "read_market"]


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


def _unique(rules: Iterable[Rule]) -> list[Rule]:
    out: dict[str, Rule] = {}
    for r in rules:
        if r.key in out:
            log.warning("two rules are named %r; only the first is evaluated", r.name)
            continue
        out[r.key] = r
    return list(out.values())


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


def _histories(engine: Engine, rules: list[Rule], now: datetime) -> dict[str, Any]:
    """The price history the drop rules need, and the market index the index rules read
    (or the error that fails the index rules alone)."""
    history: dict[str, Any] = _history(engine, [r for r in rules
                                                if r.condition.drop_pct is not None
                                                and not r.condition.index], now)
    try:
        history[INDEX_KEY] = read_index(engine, rules, now)
    except Exception as exc:  # noqa: BLE001 - fails the index rules alone
        history[INDEX_KEY] = exc
    return history


def read_market(engine: Engine, now: datetime | None = None,
                alert_settings: dict[str, Any] | AlertSettings | None = None,
                signals: bool = False, *, clock: Clock = SYSTEM) -> Market:
    """The market as stored now, read afresh (not the evaluation's copy); `signals`: with
    spot offers' interruption signals (`needs_signals`)."""
    market = Market(signals)
    market.refresh(engine, now or clock.now(), parse_settings(alert_settings))
    return market


def match_rules(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
                alert_settings: dict[str, Any] | AlertSettings | None = None,
                market: Market | None = None, clock: Clock = SYSTEM) -> list[RuleMatch]:
    """What every rule matches now, every match listed (no state, nothing written):
    `gpuradar rules test`. A rule that raises gets its `error` set; the others are
    matched as usual."""
    now = now or clock.now()
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
            out.append(Matcher(market, settings, history).match(
                rule, pools.pools[PoolKey.of(rule.condition)], None))
        except Exception as exc:  # noqa: BLE001 - reported per rule
            out.append(RuleMatch(rule, None, error=f"{type(exc).__name__}: {exc}".strip()))
    return out


# -- the evaluator -------------------------------------------------------------------------
class Evaluator:
    """One database's rule evaluation: its market, pools and alert state between
    evaluations, and the time from `clock`."""

    def __init__(self, engine: Engine, clock: Clock = SYSTEM) -> None:
        self.engine = engine
        self.clock = clock
        self.lock = threading.Lock()
        self.market = Market()
        self.pools = PoolSet()
        self.states: dict[str, AlertState] | None = None  # None: read them again
        self.stamp: tuple[Any, ...] | None = None          # the stored state's, when read
        self.rules: dict[str, Rule] = {}                   # those last evaluated
        self.synced: tuple[int, ...] = ()  # the rules (by identity) the pools were made for
        self.plans: list[RulePlan] | None = None  # theirs, in order
        self.settings: AlertSettings | None = None
        # Jinja compiles a template once per environment: keep it (templates dir, renderer).
        self._renderer: tuple[Any, messages.Renderer] | None = None

    def evaluate(self, rules: list[Rule], *, now: datetime | None = None,
                 alert_settings: dict[str, Any] | AlertSettings | None = None
                 ) -> EvaluationResult:
        """One evaluation of the rule set against the stored offers.

        Writes the alert state and the outbox rows for the notifications it decides on, in
        one transaction. `rules` is the whole rule set: state of rules no longer in it is
        dropped."""
        started = time.perf_counter()
        # the collector is held off while rules are evaluated (core/collector: why)
        with collector.PAUSE.paused():
            now = now or self.clock.now()
            settings = parse_settings(alert_settings)
            rules = _unique(rules)
            with self.lock:
                try:
                    result = self._evaluate(rules, now, settings)
                except BaseException:
                    self.states = None  # the database is the truth: read it again next time
                    raise
        result.seconds = time.perf_counter() - started
        # Every crawl evaluates: a line only when a rule failed (the daemon says what fired).
        log.log(logging.INFO if result.errors else logging.DEBUG,
                "evaluated %d rules (%d looked at again) in %s: %d firing, %d "
                "notifications queued%s", len(rules), result.evaluated,
                format_duration(result.seconds), result.firing, result.notifications,
                f", {len(result.errors)} failed" if result.errors else "")
        return result

    def _evaluate(self, rules: list[Rule], now: datetime,
                  settings: AlertSettings) -> EvaluationResult:
        engine = self.engine
        everything, built, touched = self._sync_pools(rules, now, settings)
        states = self._states()
        if self.plans is None:  # the rules or the settings changed (_sync_pools)
            self.plans = [RulePlan.of(r, settings, self.pools) for r in rules]
        market = self.market
        matcher = Matcher(market, settings,
                          _histories(engine, [p.rule for p in self.plans if p.always], now))
        composer = Composer(self._renderer_for(settings), market, settings)
        outbox = Outbox(now, lambda key, since: store.announced_to(engine, key, since))
        result = EvaluationResult()
        new_states: dict[str, AlertState] = {}
        for plan in self.plans:
            old = states.get(plan.rule.key)
            if (not everything and old is not None
                    and self._unchanged(plan, old, built, touched, now)):
                continue
            new_states[plan.rule.key] = _evaluate_rule(plan, old, matcher, composer, outbox,
                                                       result, now)
        for t in source_transitions(rules, states, market, settings, now):
            if t.kind is not None:
                outbox.enqueue(t, composer.render(t))
            new_states[t.key] = t.after
        # every stale source is reported, whether its alert moved or not
        result.stale_sources = sorted(market.stale & (market.last_success.keys()
                                                      | market.failures.keys()))
        self._save(rules, states, new_states, outbox.rows, result, now, settings)
        return result

    def _sync_pools(self, rules: list[Rule], now: datetime, settings: AlertSettings
                    ) -> tuple[bool, set[Pool], dict[Pool, float]]:
        """Bring the market and the rules' pools up to date with the store: whether every
        rule must be looked at again, the pools built anew, and the lowest price that
        entered or left each pool."""
        if needs_signals(rules) and not self.market.signals:
            # Read the market again with the spot offers' signals, and every pool with it.
            self.market, self.pools, self.synced = Market(signals=True), PoolSet(), ()
        market = self.market
        first = market.versions is None
        changes, fx_changed, stale_changed = market.refresh(self.engine, now, settings)
        everything = (self.states is None or settings != self.settings or stale_changed
                      or first)
        if settings != self.settings or stale_changed:
            # bands (hysteresis) or stale partitions moved
            self.pools, self.synced = PoolSet(), ()
        ids = tuple(map(id, rules))
        built: set[PoolKey] = set()
        if ids != self.synced:
            built = self.pools.sync(rules, settings, market)
            self.synced, self.plans = ids, None
        if fx_changed:
            built |= self.pools.rebuild(market, lambda k: k.currency != "USD")
        # Pools built just now hold the current market already (every pool, at the first
        # evaluation of a process: its 100,000 "new" offers need not be applied).
        touched = ({} if built >= self.pools.pools.keys()
                   else self.pools.apply(changes, market, skip=built))
        # By pool object (hashed by identity): every rule looks its pool up in both.
        pools = self.pools.pools
        return everything, {pools[k] for k in built}, {pools[k]: v for k, v in touched.items()}

    def _renderer_for(self, settings: AlertSettings) -> messages.Renderer:
        """The message renderer of the configured templates (kept while they stay the same)."""
        if self._renderer is None or self._renderer[0] != settings.templates:
            self._renderer = (settings.templates, messages.Renderer(settings.templates))
        renderer = self._renderer[1]
        renderer.reset()
        return renderer

    def _unchanged(self, plan: RulePlan, old: AlertState, built: set[Pool],
                   touched: dict[Pool, float], now: datetime) -> bool:
        """Whether a rule's outcome cannot have changed since the last pass: the same rule
        and state, no offer reached its band, no pool rebuilt, nothing due."""
        rule = plan.rule
        before = self.rules.get(rule.key)
        same = before is rule or before == rule
        return (same and old.rule_hash == rule.condition_hash_value
                and old.state not in ("pending", "error") and not plan.always
                and plan.pool not in built
                and not _reached(plan, touched)
                and (old.state != "firing" or not _due(old, plan.policy, now)))

    def _states(self) -> dict[str, AlertState]:
        """The alert state, from the process's copy unless the database holds another."""
        stamp = store.state_stamp(self.engine)
        if self.states is None or stamp != self.stamp:
            self.states = {k: AlertState.from_row(row)
                           for k, row in store.load_states(self.engine).items()}
            self.stamp = stamp
        return self.states

    def _save(self, rules: list[Rule], states: dict[str, AlertState],
              new_states: dict[str, AlertState], outbox: list[dict[str, Any]],
              result: EvaluationResult, now: datetime, settings: AlertSettings) -> None:
        """Write the changed states, the dropped rules' deletions and the outbox in one
        transaction; the process's copy then follows the database, and the result counts."""
        configured = {r.key for r in rules}
        deletes = [k for k, s in states.items() if s.kind == "rule" and k not in configured]
        inserts = [s for k, s in new_states.items() if k not in states]
        changed = {k: s.changes(states[k]) for k, s in new_states.items() if k in states}
        updates = [new_states[k] for k, diff in changed.items() if diff]
        rows = [s.as_row() for s in inserts]
        for row in rows:  # (set in place: a copy per row costs 10,000 at a first pass)
            row["updated_at"] = now
        store.save_evaluation(self.engine, inserts=rows,
                              updates=[dict(changed[s.key], key=s.key, updated_at=now)
                                       for s in updates],
                              deletes=deletes, notifications=outbox)
        # Written: the process's copy follows the database.
        for s in (*inserts, *updates):
            states[s.key] = s
        for k in deletes:
            states.pop(k, None)
        self.stamp = (store.state_stamp(self.engine) if (inserts or updates or deletes)
                      else self.stamp)
        self.rules = {r.key: r for r in rules}
        self.settings = settings
        result.notifications = len(outbox)
        result.state_writes = len(inserts) + len(updates) + len(deletes)
        for r in rules:
            kept = states.get(r.key)
            if kept is not None and kept.state == "firing":
                result.firing += 1
            elif kept is not None and kept.state == "pending":
                result.pending += 1


def _evaluate_rule(plan: RulePlan, old: AlertState | None, matcher: Matcher,
                   composer: Composer, outbox: Outbox, result: EvaluationResult,
                   now: datetime) -> AlertState:
    """One rule through the stages: matched, moved, and its notification rendered and
    queued. A rule that fails is recorded failed and never stops the others."""
    rule = plan.rule
    result.evaluated += 1
    start = starting_state(rule, old)
    try:
        m = matcher.match(rule, plan.pool, rule.top or matcher.settings.top)
        result.matches[rule.name] = m
        step = rule_transition(plan, start, m, matcher.market, now)
        if step.kind is not None:
            outbox.enqueue(step, composer.render(step))
        new = step.after
    except Exception as exc:  # noqa: BLE001 - one rule must not stop the others
        why = f"{type(exc).__name__}: {exc}".strip()
        log.error("rule %r failed: %s", rule.name, why.splitlines()[0][:300],
                  exc_info=log.isEnabledFor(logging.DEBUG))
        result.errors[rule.name] = why
        new = failed(start, why)
    if new.state == "firing" and not start.was_firing:
        result.fired.append(rule.name)
    if new.state == "inactive" and start.was_firing:
        result.resolved.append(rule.name)
    return new


def _reached(plan: RulePlan, touched: dict[Pool, float]) -> bool:
    """Whether an offer entered or left the rule's pool at or below its band."""
    low = touched.get(plan.pool)
    return low is not None and (plan.band is None or low <= plan.band + EPS)


def _due(state: AlertState, pol: Policy, now: datetime) -> bool:
    at = pol.due(state)
    return at is not None and at <= now


# -- for one-off callers -------------------------------------------------------------------
# The CLI and tests evaluate by engine: each engine's Evaluator lives as long as the engine
# (a long-running caller such as the daemon makes and keeps its own).
_EVALUATORS: PerEngine[Evaluator] = PerEngine(Evaluator)


def evaluator_for(engine: Engine) -> Evaluator:
    """The Evaluator `evaluate()` uses for `engine` (made at the first call)."""
    return _EVALUATORS.get(engine)


def evaluate(engine: Engine, rules: list[Rule], *, now: datetime | None = None,
             alert_settings: dict[str, Any] | AlertSettings | None = None,
             clock: Clock = SYSTEM) -> EvaluationResult:
    """`Evaluator.evaluate` with the engine's Evaluator (`evaluator_for`); `now` defaults
    to `clock`'s time."""
    return evaluator_for(engine).evaluate(rules, now=now or clock.now(),
                                                 alert_settings=alert_settings)
