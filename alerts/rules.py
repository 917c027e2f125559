"""The rule model: which offers a rule watches and at what price (`Condition`, the part that
defines "the same alert"), how it notifies (the options), and how it reads back.

A rule price is **per GPU-hour** unless the rule names a GPU count: `8x H100 under $25/h` is
an offer of exactly 8 GPUs whose whole price is under $25/h, `8+x H100 under $25/h` one of 8
or more. Words say the basis explicitly either way (`per GPU`, `/GPU-h`, `per instance`,
`/instance-h`; YAML `basis: gpu | offer`). A fit rule (`cheapest fit for 7B finetune under
$3/h`) prices the whole configuration the job needs, unless it says `per gpu`.

The two ways of writing a rule live beside this module: alerts.grammar (the readable form)
and alerts.mapping (the YAML form). Both end in `finish()`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from gpuradar.core.units import (
    CURRENCY_SIGN,
    EVERYWHERE,
    MAINLAND_ALIASES,
    money,
    parse_duration,
)
from gpuradar.recommend import Budget, Job, human_count

BASES = ("gpu", "offer")


class RuleError(ValueError):
    """A rule that cannot be understood.

    `str()` is the whole message: what is wrong, the rule, and a caret line under the word.
    """

    def __init__(self, message: str, rule: str = "", start: int = -1, end: int = -1,
                 where: str = "", hint: str | None = None) -> None:
        self.message, self.rule, self.start, self.end = message, rule, start, end
        self.where, self.hint = where, hint
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.where}: " if self.where else ""
        text = f"{head}{self.message}"
        if self.hint:
            text += f"; did you mean {self.hint}?"
        if self.rule:
            text += f"\n    {self.rule}"
            if self.start >= 0:
                text += "\n    " + " " * self.start + "^" * max(1, self.end - self.start)
        return text

    def located(self, where: str) -> RuleError:
        """The same error, prefixed with where the rule came from (file, index, name)."""
        return RuleError(self.message, self.rule, self.start, self.end, where, self.hint)


# -- what a rule watches ----------------------------------------------------------------
def cached_hash(obj: Any) -> int:
    """The hash of a frozen dataclass, computed once (they key the evaluation's pools)."""
    h = obj.__dict__.get("_hash")
    if h is None:
        h = hash(tuple(getattr(obj, name) for name in obj.__dataclass_fields__))
        object.__setattr__(obj, "_hash", h)
    return h


@dataclass(frozen=True)
class Selector:
    """Which offers a rule looks at: everything about an offer but its price."""

    __hash__ = cached_hash

    gpus: frozenset[str] | None = None    # canonical names; None = any GPU
    min_gpus: float | None = None
    max_gpus: float | None = None
    min_gpu_memory: float | None = None   # GB per GPU
    min_total_gpu_memory: float | None = None
    min_vcpus: float | None = None
    min_memory: float | None = None       # GB of RAM
    pricing: str | None = None            # a kind of gpuradar.core.pricing; None: open market
    sources: tuple[str, ...] = ()
    exclude_sources: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()         # globs on region or zone; `mainland` alias
    exclude_regions: tuple[str, ...] = ()
    available_only: bool = False          # known available (default: not known unavailable)
    # Spot offers whose published interruption band (gpuradar.core.spot) reaches at most
    # this share of capacity reclaimed per month (`interruptions under 10%`: 0.10); an
    # offer with no published band, or an open-ended one, never matches. None: not asked.
    max_interruption: float | None = None

    @property
    def names_count(self) -> bool:
        """Whether the rule names a GPU count (`8x`, `8+x`): its price is then per offer."""
        return self.min_gpus is not None


@dataclass(frozen=True)
class Condition:
    """What a rule watches and when it holds; two rules with equal conditions are the same
    alert, a rule whose condition changes starts a new one (`digest`)."""

    __hash__ = cached_hash

    offers: Selector = field(default_factory=Selector)
    max_price: float | None = None        # in `currency`, per `basis`; "under" is strict
    currency: str = "USD"
    basis: str = "gpu"                    # gpu: per GPU-hour; offer: the whole offer per hour
    drop_pct: float | None = None         # drops N % below ...
    drop_window: timedelta | None = None  # ... its N-day low
    # ... or, with `drop_pct`, N % under its W median (`under its 30-day median by 20%`):
    # the time-weighted median of the rule's offers' prices over the last W (docs/alerts.md)
    median_window: timedelta | None = None
    job: Job | None = None                # a fit rule: the configuration the job needs
    # An index rule (`H100 index under $2.50/h`): the price is the market index's median of
    # each model (docs/index.md), not an offer's; a drop is from the index's high in the
    # window (`H100 spot index drops 10% in 7 days`).
    index: bool = False

    @property
    def per_offer(self) -> bool:
        return self.basis == "offer"

    def digest(self) -> str:
        """16 hex digits identifying the condition. Computed as before the price basis was
        made explicit, so a stored rule whose meaning did not change keeps its alert state;
        one that did change (`8x H100 under $25/h` was per GPU-hour, is now per offer;
        `cn-*` in a fit rule meant mainland China, is now a glob) gets a new digest."""
        s = self.offers
        cond: dict[str, Any] = {
            "gpus": s.gpus, "min_gpus": s.min_gpus, "max_gpus": s.max_gpus,
            "min_gpu_memory": s.min_gpu_memory, "min_total_gpu_memory": s.min_total_gpu_memory,
            "min_vcpus": s.min_vcpus, "min_memory": s.min_memory, "pricing": s.pricing,
            "sources": s.sources, "exclude_sources": s.exclude_sources,
            "regions": s.regions, "exclude_regions": s.exclude_regions,
            "available_only": s.available_only, "max_price": self.max_price,
            "currency": self.currency, "per_instance": self.per_offer,
            "drop_pct": self.drop_pct, "drop_window": self.drop_window}
        globs = (*s.regions, *s.exclude_regions)
        if self.job is not None:
            # The fields the old FitRequirement carried, in its repr's exact form.
            cond["regions"] = ()
            cond["fit"] = (f"FitRequirement(job={self.job!r}, max_price={self.max_price!r}, "
                           f"currency={self.currency!r}, per_gpu={not self.per_offer!r}, "
                           f"pricing={s.pricing!r}, sources={s.sources!r}, "
                           f"regions={s.regions!r}, text='')")
            if any(g in ("cn-*", "cn*", "cn") for g in globs):
                cond["regions_read_as"] = "globs"
        elif any(g in MAINLAND_ALIASES for g in globs):
            cond["regions_read_as"] = "globs and the mainland alias"
        if self.index:  # only then: every other rule keeps its digest
            cond["index"] = True
        if s.max_interruption is not None:  # likewise
            cond["max_interruption"] = s.max_interruption
        if self.median_window is not None:  # likewise
            cond["median_window"] = self.median_window
        blob = json.dumps(cond, sort_keys=True, default=lambda v: sorted(v)
                          if isinstance(v, frozenset) else str(v))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# -- the rule ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """One alert rule: its condition, how it was written, and how it notifies.

    Options left None take the defaults from the `alerts:` section of the config.
    """

    name: str
    condition: Condition = field(default_factory=Condition)
    text: str = ""                        # the readable form, as written or described
    gpu_query: str = ""                   # the GPU as typed ("H100", "any 80GB+ GPU")
    notify: tuple[str, ...] = ()          # target names or tags, as written
    targets: tuple[str, ...] | None = None  # resolved target names (loader)
    for_count: int | None = None          # consecutive evaluations
    for_duration: timedelta | None = None
    repeat: timedelta | None = None
    repeat_set: bool = False              # repeat given explicitly (even "never")
    min_drop_pct: float | None = None
    min_drop_abs: float | None = None
    send_resolved: bool | None = None
    top: int | None = None
    mute_until: datetime | None = None
    hysteresis: float | None = None

    @cached_property
    def key(self) -> str:
        return f"rule:{self.name}"

    @cached_property
    def condition_hash_value(self) -> str:
        return self.condition.digest()

    def condition_hash(self) -> str:
        """Identity of what the rule watches: a change starts a new alert."""
        return self.condition_hash_value

    @property
    def unit(self) -> str:
        """The unit of the rule's prices: 'GPU-h' or 'h' (whole offer or configuration)."""
        return "h" if self.condition.per_offer else "GPU-h"

    def describe(self) -> str:
        """A readable form equivalent to the rule (for structured rules)."""
        c, s = self.condition, self.condition.offers
        if c.job is not None:
            return _describe_fit(c)
        words: list[str] = []
        if s.min_gpus is not None and s.min_gpus == s.max_gpus:
            words.append(f"{s.min_gpus:g}x")
        elif s.min_gpus is not None:
            words.append(f"{s.min_gpus:g}+x")
        if s.gpus is None:
            words.append("any")
            if s.min_gpu_memory:
                words.append(f"{s.min_gpu_memory:g}GB+")
            words.append("GPU")
        else:
            words.append(self.gpu_query)
            if s.min_gpu_memory:
                words.append(f"with {s.min_gpu_memory:g}GB+ GPU memory")
        if s.max_gpus is not None and s.max_gpus != s.min_gpus:
            words.append(f"at most {s.max_gpus:g} GPUs")
        if s.min_total_gpu_memory:
            words.append(f"with {s.min_total_gpu_memory:g}GB+ total GPU memory")
        if s.min_vcpus:
            words.append(f"with {s.min_vcpus:g}+ vCPUs")
        if s.min_memory:
            words.append(f"with {s.min_memory:g}GB+ RAM")
        if s.pricing:
            words.append(s.pricing.replace("_", "-"))
        if c.index:
            words.append("index")
        if c.max_price is not None:
            words.append(f"under {price_text(c.max_price, c.currency)}/h")
            if c.per_offer:  # as the first version wrote it: derived names stay the same
                words.append("per instance")
            elif s.names_count:  # a count alone would mean per offer
                words.append("per GPU")
        if c.drop_pct is not None and c.drop_window is not None:
            words.append(f"drops {c.drop_pct * 100:g}% in {window_words(c.drop_window)}"
                         if c.index else f"drops {c.drop_pct * 100:g}% below its "
                         f"{duration_text(c.drop_window)} low")
        if c.drop_pct is not None and c.median_window is not None:
            words.append(f"under its {duration_text(c.median_window)} median by "
                         f"{c.drop_pct * 100:g}%")
        if s.max_interruption is not None:
            words.append(f"interruptions under {pct_text(s.max_interruption)}")
        if s.available_only:
            words.append("available")
        words.extend(_where(s, ","))
        return " ".join(words)

    def reading(self) -> str:
        """How the rule was understood, in words: the price basis first.

        'whole offer, exactly 8x H100, under $25.00/h; region us-*'"""
        c, s = self.condition, self.condition.offers
        parts: list[str] = []
        if c.index:
            gpu = self.gpu_query or ",".join(sorted(s.gpus or ()))
            parts.append(f"the market index (median per GPU-hour) of each {gpu} model")
        elif c.job is not None:
            job = c.job.describe().split(", ", 2)
            parts.append(("per GPU of the " if not c.per_offer else "whole ")
                         + f"configuration for {job[0]} {job[1]} ({job[2]})")
        else:
            gpu = "any GPU" if s.gpus is None else (self.gpu_query or ",".join(sorted(s.gpus)))
            if s.gpus is None and s.min_gpu_memory:
                gpu = f"any {s.min_gpu_memory:g}GB+ GPU"
            if s.min_gpus is not None and s.min_gpus == s.max_gpus:
                count = f"exactly {s.min_gpus:g}x {gpu}"
            elif s.min_gpus is not None:
                count = f"at least {s.min_gpus:g}x {gpu}"
                if s.max_gpus is not None:
                    count += f", at most {s.max_gpus:g}"
            elif s.max_gpus is not None:
                count = f"{gpu}, at most {s.max_gpus:g} GPUs"
            else:
                count = f"{gpu}, any GPU count"
            parts.append(("whole offer, " if c.per_offer else "per GPU-hour, ") + count)
        if c.max_price is not None:
            unit = self.unit
            parts.append(f"under {money(c.max_price, c.currency)}/{unit}")
        if c.drop_pct is not None and c.drop_window is not None:
            parts.append(f"{c.drop_pct * 100:g}% below its {duration_text(c.drop_window)} high"
                         if c.index else
                         f"{c.drop_pct * 100:g}% below its {duration_text(c.drop_window)} low")
        if c.drop_pct is not None and c.median_window is not None:
            parts.append(f"{c.drop_pct * 100:g}% or more under the time-weighted median of its "
                         f"offers' prices over the last {window_words(c.median_window)}; no "
                         "match without stored prices in that window")
        filters: list[str] = []
        if c.currency != "USD":
            filters.append(f"in {c.currency} (offers quoted in {c.currency} as quoted, others "
                           "at the stored exchange rate)")
        if s.pricing:
            filters.append(f"{s.pricing.replace('_', '-')} only")
        for text, value in (("with {}GB+ per GPU", s.min_gpu_memory if s.gpus else None),
                            ("with {}GB+ GPU memory in all", s.min_total_gpu_memory),
                            ("with {}+ vCPUs", s.min_vcpus), ("with {}GB+ RAM", s.min_memory)):
            if value:
                filters.append(text.format(f"{value:g}"))
        if s.max_interruption is not None:
            filters.append(f"published interruption band at most "
                           f"{pct_text(s.max_interruption)}/month (its upper bound); an offer "
                           "with no published signal, or an open-ended band, never matches")
        if s.available_only:
            filters.append("known available only")
        filters.extend(_where(s, ", ", _region_words))
        if s.regions or s.exclude_regions:
            filters.append(f"a price that holds in every region (region {EVERYWHERE}) counts "
                           "as in every region named and in none excluded")
        text = ", ".join(parts)
        return text + ("; " + "; ".join(filters) if filters else "")


def _region_words(globs: tuple[str, ...]) -> list[str]:
    return [f"{g} (mainland China)" if g in MAINLAND_ALIASES else g for g in globs]


def _where(s: Selector, sep: str,
           regions: Callable[[tuple[str, ...]], Iterable[str]] = tuple) -> list[str]:
    """The place clauses, in the order the grammar reads them: 'on aws,gcp', 'not on vastai',
    'region us-*', 'not region mainland' (`sep` and `regions` set the wording)."""
    return [prefix + sep.join(words) for prefix, words in (
        ("on ", s.sources), ("not on ", s.exclude_sources),
        ("region ", regions(s.regions)), ("not region ", regions(s.exclude_regions)))
        if words]


def _describe_fit(c: Condition) -> str:
    """The readable form of a fit rule (its clause)."""
    assert c.job is not None
    s = c.offers
    words = ["cheapest fit for", human_count(c.job.params), c.job.task]
    if c.job.precision != "bf16":
        words.append(c.job.precision)
    if s.pricing:
        words.append(s.pricing.replace("_", "-"))
    if c.max_price is not None:
        words.append("under " + Budget(c.max_price, c.currency, not c.per_offer).text())
    words.extend(_where(s, ","))
    if c.job.seq_len != Job.seq_len:  # the defaults are class attributes
        words.append(f"seq {c.job.seq_len}")
    if c.job.batch != Job.batch:
        words.append(f"batch {c.job.batch}")
    return " ".join(words)


def price_text(value: float, currency: str) -> str:
    """'$2', '$1.50', '¥2', '1.5 CHF': the short form rules are written in (a rule's derived
    name comes from it, so it must not change)."""
    text = f"{value:.2f}" if value != int(value) else f"{value:g}"
    if value < 0.1 and value != 0:
        text = f"{value:.4f}".rstrip("0")
    sign = CURRENCY_SIGN.get(currency)
    return f"{sign}{text}" if sign else f"{text} {currency}"


def pct_text(share: float) -> str:
    """'10%' for 0.10: a share as a rule writes it."""
    return f"{round(share * 100, 6):g}%"


def window_words(d: timedelta) -> str:
    """'7 days', '1 hour': an index rule's window as its readable form writes it."""
    n, unit = duration_text(d).split("-")
    return f"{n} {unit}{'s' if n != '1' else ''}"


def duration_text(d: timedelta) -> str:
    seconds = int(d.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}-{unit}"
    return f"{seconds}-second"


# -- options (shared by both forms) ------------------------------------------------------
# A price as one word: '$2/h', '1.5USD/h', '¥2', '14cny' (alerts.grammar reads the parts).
PRICE_WORD = re.compile(r"^(?P<pre>[$¥￥€£])?(?P<num>\d+(?:\.\d+)?)(?P<post>[$¥￥€£]|[a-z]{3})?"
                        r"(?P<unit>/\S*)?$", re.IGNORECASE)


def parse_datetime(value: Any) -> datetime:
    """An ISO date or date-time; UTC when no offset is given."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a date/time: {value!r} (write e.g. 2026-12-01T08:00Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_pct_or_amount(value: Any, what: str) -> tuple[float | None, float | None]:
    """'5%' -> (0.05, None); '$0.10' or 0.1 -> (None, 0.1)."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a percentage or amount: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"{what}: must not be negative")
        return None, float(value)
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise ValueError(f"{what}: not a percentage: {value!r}") from None
        if not 0 <= pct < 100:
            raise ValueError(f"{what}: must be between 0% and 100%")
        return pct / 100, None
    m = PRICE_WORD.match(text.replace(" ", ""))
    if not m:
        raise ValueError(f"{what}: write a percentage (5%) or an amount ($0.10), not {value!r}")
    return None, float(m.group("num"))


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v).strip() for v in value]


def _duration(value: Any, what: str) -> timedelta:
    """A duration option, refused (naming the number and the limit) beyond what the store
    can represent (gpuradar.core.units.MAX_DURATION)."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


# Each option's reading: its value -> the Rule fields it sets; raises ValueError naming the
# option. One function per option, so that each reads (and is tested) alone (issue #52).
def _name_option(value: Any) -> dict[str, Any]:
    if not str(value).strip():
        raise ValueError("name: must not be empty")
    return {"name": str(value).strip()[:200]}


def _notify_option(value: Any) -> dict[str, Any]:
    """Target names or tags: one, a comma-separated string, a list, or {targets, tags}."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        items = [str(v).strip() for v in value]
    elif isinstance(value, dict):
        unknown = set(value) - {"targets", "tags"}
        if unknown:
            raise ValueError(f"notify: unknown key(s) {', '.join(sorted(unknown))}; "
                             "use targets and tags")
        items = [*_as_list(value.get("targets")), *_as_list(value.get("tags"))]
    else:
        raise ValueError("notify: a target name, a tag, or a list of them")
    return {"notify": tuple(items)}


def _for_option(value: Any) -> dict[str, Any]:
    """A number of evaluations (an integer, or digits) or a duration."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError("for: at least 1 (evaluation)")
        return {"for_count": value}
    text = str(value).strip()
    if text.isdigit():
        return {"for_count": max(1, int(text))}
    return {"for_duration": _duration(text, "for")}


def _repeat_option(value: Any) -> dict[str, Any]:
    """A duration, or never (set explicitly either way: the default does not apply)."""
    if value is False or str(value).lower() in ("never", "no", "off", "0"):
        return {"repeat_set": True, "repeat": None}
    d = _duration(value, "repeat")
    if d <= timedelta(0):
        raise ValueError("repeat: must be longer than zero (or `never`)")
    return {"repeat_set": True, "repeat": d}


def _min_drop_option(value: Any) -> dict[str, Any]:
    pct, amount = parse_pct_or_amount(value, "min_drop")
    if pct is None and amount is None:
        raise ValueError("min_drop: missing value")
    return {"min_drop_pct": pct, "min_drop_abs": amount}


def _send_resolved_option(value: Any) -> dict[str, Any]:
    if not isinstance(value, bool):
        raise ValueError("send_resolved: true or false")
    return {"send_resolved": value}


def _top_option(value: Any) -> dict[str, Any]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValueError("top: a whole number of offers, 1 to 1000")
    return {"top": value}


def _mute_until_option(value: Any) -> dict[str, Any]:
    return {"mute_until": parse_datetime(value)}


def _hysteresis_option(value: Any) -> dict[str, Any]:
    pct, _amount = parse_pct_or_amount(value, "hysteresis")
    if pct is None:
        raise ValueError("hysteresis: a percentage, e.g. 2%")
    return {"hysteresis": pct}


OPTIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "name": _name_option, "notify": _notify_option, "for": _for_option,
    "repeat": _repeat_option, "min_drop": _min_drop_option,
    "send_resolved": _send_resolved_option, "top": _top_option,
    "mute_until": _mute_until_option, "hysteresis": _hysteresis_option}


#: The options either form of a rule may carry.
OPTION_KEYS = frozenset(OPTIONS)


def apply_options(rule: Rule, options: dict[str, Any]) -> Rule:
    """Rule with the per-rule options set (None: left out); raises ValueError naming the
    option, the first in `options`' order that is wrong."""
    changes: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        read = OPTIONS.get(key)
        if read is None:
            raise ValueError(f"unknown option {key!r}")
        changes.update(read(value))
    return replace(rule, **changes)


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9.]+", "-", text.lower().replace("/h", "").replace("%", "pct"))
    return s.strip("-")[:120] or "rule"


def finish(condition: Condition, text: str, gpu_query: str, options: dict[str, Any]) -> Rule:
    """The Rule both forms end in: the readable text (described when not given), a name
    derived from it, then the options."""
    rule = Rule(name="rule", condition=condition, text=text, gpu_query=gpu_query)
    if not rule.text:
        rule = replace(rule, text=rule.describe())
    rule = replace(rule, name=_slug(rule.text))
    if options:
        try:
            rule = apply_options(rule, options)
        except ValueError as exc:
            raise RuleError(str(exc), rule.text) from None
    return rule
