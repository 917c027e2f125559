"""The stages of one alert evaluation, each with one job (issue #52), composed per rule by
alerts.engine.Evaluator:

1. `Matcher`: a rule against the offers (its pool) or the market index -> `RuleMatch`.
2. `rule_transition` / `source_transitions`: a match (or a source's staleness) and the
   stored state -> the next state and the notification it sends (`Transition`),
   Alertmanager's semantics (alerts.state).
3. `Composer`: a transition that notifies -> its `Message` (alerts.messages' templates).
4. `Outbox`: a message -> one outbox row per target, to be written with the state change;
   an end (resolved, recovered) goes only to the targets told of its start.

They read no clock (the time is passed in) and write nothing: the evaluator reads the
inputs and stores states and outbox rows in one transaction. Split this way so each can
be tested alone, as Alertmanager composes its notification pipeline from stages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpuradar.alerts import messages
from gpuradar.alerts.alert_settings import AlertSettings
from gpuradar.alerts.index_rules import IndexMatch, index_match
from gpuradar.alerts.market import Market, Pool, PoolKey, PoolSet, RuleMatch, band, band_best, match
from gpuradar.alerts.rules import Rule
from gpuradar.alerts.state import (
    AlertState,
    Policy,
    Seen,
    evolve,
    fresh_state,
    source_transition,
    transition,
)

__all__ = ["INDEX_KEY", "Composer", "Matcher", "Outbox", "RulePlan", "Transition", "policy",
           "rule_transition", "source_transitions", "starting_state", "targets_of"]

# Where the evaluation's history holds the index rules' data (alerts.index_rules).
INDEX_KEY = "index:"


def policy(rule: Rule, settings: AlertSettings) -> Policy:
    """The rule's options, the `alerts:` defaults filling what it leaves out."""
    own_drop = rule.min_drop_pct is not None or rule.min_drop_abs is not None
    return Policy(
        for_count=rule.for_count or (None if rule.for_duration else settings.for_count),
        for_duration=rule.for_duration or (None if rule.for_count else settings.for_duration),
        repeat=rule.repeat if rule.repeat_set else settings.repeat,
        min_drop_pct=rule.min_drop_pct if own_drop else settings.min_drop_pct,
        min_drop_abs=rule.min_drop_abs if own_drop else settings.min_drop_abs,
        send_resolved=(settings.send_resolved if rule.send_resolved is None
                       else rule.send_resolved),
        mute_until=rule.mute_until, can_notify=bool(targets_of(rule)))


def targets_of(rule: Rule) -> tuple[str, ...]:
    """The targets a rule notifies: resolved by the loader, else as written."""
    return rule.targets if rule.targets is not None else rule.notify


@dataclass(frozen=True, slots=True)
class RulePlan:
    """What evaluation needs of one rule under the settings, worked out once per rule set
    (the check whether a rule must be looked at again runs for every rule, every time)."""

    rule: Rule
    pool: Pool                  # the pools are synced for the rule set first
    band: float | None          # the highest price it looks at (None: any)
    policy: Policy
    always: bool                # a drop or index rule: looked at every time

    @classmethod
    def of(cls, rule: Rule, settings: AlertSettings, pools: PoolSet) -> RulePlan:
        c = rule.condition
        return cls(rule, pools.pools[PoolKey.of(c)], band(rule, settings),
                   policy(rule, settings), c.drop_pct is not None or c.index)


# -- 1. match ------------------------------------------------------------------------------
class Matcher:
    """Rules against the market as read for this evaluation: what each matches now."""

    def __init__(self, market: Market, settings: AlertSettings,
                 history: dict[str, Any]) -> None:
        self.market = market
        self.settings = settings
        # rule key -> its price history (drop and median rules), INDEX_KEY -> the market
        # index; either may be the exception its read raised (that rule then fails alone)
        self.history = history

    def match(self, rule: Rule, pool: Pool, keep: int | None) -> RuleMatch:
        """What `rule` matches: every match when `keep` is None, else the first `keep`."""
        market, history = self.market, self.history
        if rule.condition.index:  # a rule on the market index, not on offers
            assert market.now is not None
            if isinstance(history.get(INDEX_KEY), Exception):
                raise history[INDEX_KEY]
            return index_match(rule, history.get(INDEX_KEY, {}),
                               market.usd_per_unit(rule.condition.currency), self.settings,
                               market.now)
        spans = history.get(rule.key)
        if isinstance(spans, Exception):
            raise spans
        return match(rule, pool, market, self.settings, keep=keep, history=spans)


# -- 2. transition -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Transition:
    """One alert's move: the state it starts from, the state it ends in, and the
    notification that move sends (None: none), to whom."""

    key: str
    before: AlertState
    after: AlertState
    kind: str | None
    targets: tuple[str, ...]
    match: RuleMatch | None = None      # a rule's (None: a source's staleness)
    rule: Rule | None = None
    source: str | None = None


def starting_state(rule: Rule, old: AlertState | None) -> AlertState:
    """The state a rule moves from: its stored one, or a fresh one when it is new or its
    condition changed (a new alert); a reworded rule keeps its state with the new text."""
    digest = rule.condition_hash_value
    st = old if old is not None and old.rule_hash == digest else fresh_state(
        rule.key, rule.name, digest, rule.condition.currency, rule.text[:1000])
    if st.description != rule.text[:1000]:  # reworded, same condition (and currency)
        st = evolve(st, description=rule.text[:1000])
    return st


def rule_transition(plan: RulePlan, start: AlertState, m: RuleMatch, market: Market,
                    now: datetime) -> Transition:
    """The rule's next state from what it matches now (alerts.state.transition)."""
    rule = plan.rule
    best = (m.summary() if isinstance(m, IndexMatch)
            else messages.offer_summary(*m.matches[0], rule, market, m.pool)
            if m.matches else {})
    seen = Seen(m.matched, m.best, m.count, m.in_band, m.stale_hold, best)
    new, kind = transition(start, seen, plan.policy, now)
    return Transition(rule.key, start, new, kind, targets_of(rule), match=m, rule=rule)


def source_transitions(rules: Iterable[Rule], states: dict[str, AlertState],
                       market: Market, settings: AlertSettings,
                       now: datetime) -> list[Transition]:
    """Sources gone stale or back: one notification when it starts (opt-in, to the rules'
    targets or those `notify_stale` names), one when it ends."""
    rules = list(rules)
    out = []
    for source in sorted(market.last_success.keys() | market.failures.keys()):
        key = f"source:{source}"
        is_stale = source in market.stale
        old = states.get(key)
        was = old is not None and old.state == "firing"
        targets: tuple[str, ...] = ()
        if is_stale == was:
            pass  # no transition: nobody to tell
        elif settings.notify_stale is True:
            targets = tuple(sorted({t for r in rules
                                    if (not r.condition.offers.sources
                                        or source in r.condition.offers.sources)
                                    and source not in r.condition.offers.exclude_sources
                                    for t in targets_of(r)}))
        elif settings.notify_stale:
            targets = tuple(settings.notify_stale)
        new, kind = source_transition(old, source, is_stale, market.failures.get(source, 0),
                                      now, bool(targets))
        if new is not None:
            out.append(Transition(key, old or new, new, kind, targets, source=source))
    return out


# -- 3. render -----------------------------------------------------------------------------
class Composer:
    """Transitions that notify -> their messages, from the configured templates."""

    def __init__(self, renderer: messages.Renderer, market: Market,
                 settings: AlertSettings) -> None:
        self.renderer = renderer
        self.market = market
        self.settings = settings
        self._cheapest: dict[PoolKey, float | None] = {}  # by kind of rule, this evaluation

    def render(self, t: Transition) -> messages.Message:
        assert t.kind is not None
        if t.source is not None:
            return self.renderer.source_message(t.kind, t.source, self.market)
        assert t.rule is not None and t.match is not None
        rule, m = t.rule, t.match
        previous = t.before.notified_value if t.kind == "improved" else None
        cheapest = (None if t.kind != "resolved" else m.lowest if isinstance(m, IndexMatch)
                    else band_best(rule, self.market, self._cheapest))
        return self.renderer.rule_message(t.kind, m, self.market, rule.top or self.settings.top,
                                          previous, cheapest)


# -- 4. enqueue ----------------------------------------------------------------------------
ENDS = ("resolved", "recovered")


@dataclass
class Outbox:
    """Messages -> outbox rows, one per target, written with the state change.
    `announced(key, since)`: the targets an alert was announced to since it fired
    (Alertmanager's resolve-only-what-was-notified); None: every target."""

    now: datetime
    announced: Callable[[str, datetime | None], set[str]] | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def enqueue(self, t: Transition, msg: messages.Message) -> None:
        targets: Iterable[str] = t.targets
        if t.kind in ENDS and self.announced is not None:
            # a target added since, or whose announcement was given up on, never receives
            # the end of something it never heard of
            told = self.announced(t.key, t.before.fired_at)
            targets = [x for x in targets if x in told]
        now = self.now
        for target in dict.fromkeys(targets):
            self.rows.append({
                "created_at": now, "alert_key": t.key, "kind": t.kind, "target": target,
                "channel": "", "title": msg.title[:1000], "body_markdown": msg.markdown,
                "body_text": msg.text, "body_html": msg.html, "notify_type": msg.notify_type,
                "status": "pending", "attempts": 0, "next_attempt_at": now, "last_error": "",
                "sent_at": None})
