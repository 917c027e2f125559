"""The YAML rule form: the readable form's fields, structured, plus the options.

    - name: big-h100
      gpu: H100                # or a list, or "any"
      count: 8                 # or min_gpus / max_gpus
      under: $25/h             # a bare number is USD; `max_price`/`price` too
      basis: offer             # gpu | offer (default: offer when a count is given)
      regions: [us-*]
    - gpu: H100
      pricing: spot
      under: $2/h
      interruptions: under 10%   # published interruption band at most 10%/month
    - rule: 8x H100 under $25/h region us-*   # a readable rule the other fields refine
    - fit: 70B lora            # a job instead of a GPU (alerts.grammar.parse_fit_clause)
      under: ¥100/h
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from gpuradar.alerts.grammar import (
    FIT_PREFIX,
    QUANTITY,
    FitClause,
    closest,
    gigabytes,
    interruption_problem,
    is_fit_rule,
    make_condition,
    parse_fit_clause,
    parse_interruption,
    parse_price,
    parse_rule,
    price_problem,
    read_spec,
    too_long,
)
from gpuradar.alerts.rules import (
    OPTION_KEYS,
    Rule,
    RuleError,
    finish,
    parse_pct_or_amount,
)
from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FALLBACK_USD_PER_UNIT
from gpuradar.core.pricing import parse_pricing
from gpuradar.core.sources import price_sources
from gpuradar.core.units import SIGN_CURRENCY, parse_duration

FIELD_KEYS = {"rule", "when", "fit", "gpu", "gpus", "count", "min_gpus", "max_gpus", "gpu_memory",
              "total_gpu_memory", "vcpus", "memory", "ram", "pricing", "under", "max_price",
              "price", "currency", "per", "basis", "sources", "source", "not_sources",
              "exclude_sources", "regions", "region", "not_regions", "exclude_regions",
              "available", "drop", "median", "interruptions"}
# Fields a fit rule takes (the ones its clause has).
FIT_FIELD_KEYS = {"rule", "when", "fit", "under", "max_price", "price", "currency", "per",
                  "basis", "pricing", "sources", "source", "regions", "region"}
_BASIS_WORDS = {"gpu": "gpu", "gpu-h": "gpu", "offer": "offer", "instance": "offer",
                "instance-h": "offer", "machine": "offer", "node": "offer"}
_FIT_BASIS_WORDS = {**_BASIS_WORDS, "configuration": "offer", "config": "offer"}


def _as_list(value: Any, key: str) -> list[str]:
    """A name or a list of names ('aws,gcp' or [aws, gcp]): text or numbers, never a nested
    list or mapping (a YAML alias must not smuggle a structure into a name)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{key}: a name or a flat list of names")
    return [str(v).strip() for v in items]


def _number(value: Any, key: str, *, gb: bool = False) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{key}: a number, not {value!r}")
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{key}: a number, not {value!r}")
    else:
        q = QUANTITY.match(str(value).replace(" ", ""))
        if not q or (q.group(2) and not gb):
            raise ValueError(f"{key}: a number{' of GB' if gb else ''}, not {value!r}")
        number = gigabytes(q)
    if number < 0:
        raise ValueError(f"{key}: must not be negative")
    return number


def rule_from_mapping(data: dict[str, Any]) -> Rule:
    """The YAML form: the readable form's fields, structured, plus the options.

    `rule:` may carry a readable rule that the other fields refine."""
    if not isinstance(data, dict):
        raise RuleError("a rule is a string or a mapping")
    unknown = [k for k in data if k not in FIELD_KEYS and k not in OPTION_KEYS]
    if unknown:
        k = str(unknown[0])[:40]
        raise RuleError(f"unknown field {k!r}", hint=closest(k, FIELD_KEYS | OPTION_KEYS))
    for key, value in data.items():  # as the readable form: no field longer than a rule
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and (error := too_long(text, str(key))) is not None:
                raise error
    options = {k: v for k, v in data.items() if k in OPTION_KEYS}
    base_text = data.get("rule", data.get("when"))
    structured = [k for k in data if k in FIELD_KEYS and k not in ("rule", "when")]
    if "fit" in data or (base_text is not None and is_fit_rule(str(base_text))):
        return _fit_from_mapping(data, base_text, structured, options)
    try:
        spec: dict[str, Any] = {}
        gpu_query = ""
        if base_text is not None:
            base = parse_rule(str(base_text))
            spec = _spec_of(base, "basis" in read_spec(str(base_text)))
            gpu_query = base.gpu_query
        gpu_query = _structured_fields(spec, data) or gpu_query
    except RuleError:
        raise
    except ValueError as exc:
        raise RuleError(str(exc)) from None
    if (problem := interruption_problem(spec)) is not None:
        raise RuleError(f"interruptions: {problem}")
    if not gpu_query:
        raise RuleError("the rule names no GPU: set `gpu: H100` (or `gpu: any`)")
    if (spec.get("max_price") is None and spec.get("drop_pct") is None
            and not spec.get("available_only")):
        raise RuleError("the rule has no condition: set `under: $2/h`, `drop: 15% below 7-day "
                        "low`, `median: 30-day median by 20%` or `available: true`")
    # A structured rule is shown in the readable form it is equivalent to.
    text = str(base_text).strip() if base_text is not None and not structured else ""
    return finish(make_condition(spec), text, gpu_query, options)


def _spec_of(rule: Rule, said_basis: bool) -> dict[str, Any]:
    """The parsed fields of a readable rule, for the structured ones to refine. The basis is
    kept only if the rule said it (`said_basis`): a count added in YAML then implies per
    offer."""
    c = rule.condition
    spec: dict[str, Any] = {k: getattr(c.offers, k) for k in c.offers.__dataclass_fields__}
    spec.update(max_price=c.max_price, currency=c.currency, drop_pct=c.drop_pct,
                drop_window=c.drop_window, median_window=c.median_window)
    if said_basis:
        spec["basis"] = c.basis
    return {k: v for k, v in spec.items() if v is not None}


def _structured_fields(spec: dict[str, Any], data: dict[str, Any]) -> str:
    """Apply the structured fields to `spec`; returns the GPU as written ('' if not given)."""
    gpu_query = _structured_gpu(spec, data)
    _structured_sizes(spec, data)
    if "pricing" in data:
        spec["pricing"] = _pricing(data["pricing"])
    price = _structured_price(data)
    if price is not None:
        value, currency, basis = price
        spec["max_price"], spec["currency"] = value, currency
        if basis is not None:
            spec["basis"] = basis
    if "currency" in data:
        spec["currency"] = _structured_currency(data["currency"])
    basis = _basis(data, _BASIS_WORDS)
    if basis is not None:
        spec["basis"] = basis
    _structured_places(spec, data)
    if "available" in data:
        if not isinstance(data["available"], bool):
            raise ValueError("available: true or false")
        spec["available_only"] = data["available"]
    if "drop" in data:
        _structured_drop(spec, data["drop"])
    if "median" in data:
        _structured_median(spec, data["median"])
    if "interruptions" in data:
        try:
            spec["max_interruption"] = parse_interruption(str(data["interruptions"]))
        except ValueError as exc:
            raise ValueError(f"interruptions: {exc}") from None
    return gpu_query


def _structured_gpu(spec: dict[str, Any], data: dict[str, Any]) -> str:
    """`gpu:` (or `gpus:`): catalog names, or `any`; the GPU as written."""
    gpu = data.get("gpu", data.get("gpus"))
    if gpu is None:
        return ""
    items = _as_list(gpu, "gpu")
    if items == ["any"] or items == ["*"]:
        spec["gpus"] = None
        return "any GPU"
    names: set[str] = set()
    for item in items:
        found = catalog.match_family(item)
        if not found:
            raise RuleError(f"gpu: unknown GPU {item!r}", hint=catalog.suggest(item))
        names.update(g.name for g in found)
    spec["gpus"] = frozenset(names)
    return ",".join(items)


def _structured_sizes(spec: dict[str, Any], data: dict[str, Any]) -> None:
    """GPU counts (`count`, `min_gpus`, `max_gpus`), memory and vCPUs."""
    if "count" in data:
        spec["min_gpus"] = spec["max_gpus"] = _gpu_count(data["count"], "count")
    if "min_gpus" in data:
        spec["min_gpus"] = _gpu_count(data["min_gpus"], "min_gpus")
    if "max_gpus" in data:
        spec["max_gpus"] = _gpu_count(data["max_gpus"], "max_gpus")
    low, high = spec.get("min_gpus"), spec.get("max_gpus")
    if low is not None and high is not None and low > high:  # as `at most` in the text form
        raise ValueError(f"max_gpus: {high:g} is fewer than min_gpus {low:g}")
    for key, attr, gb in (("gpu_memory", "min_gpu_memory", True),
                          ("total_gpu_memory", "min_total_gpu_memory", True),
                          ("vcpus", "min_vcpus", False), ("memory", "min_memory", True),
                          ("ram", "min_memory", True)):
        if key in data:
            spec[attr] = _number(data[key], key, gb=gb)


def _structured_places(spec: dict[str, Any], data: dict[str, Any]) -> None:
    """Sources and regions, wanted or excluded."""
    for keys, attr in ((("sources", "source"), "sources"),
                       (("not_sources", "exclude_sources"), "exclude_sources")):
        for key in keys:
            if key in data:
                spec[attr] = _sources(data[key], key)
    for keys, attr in ((("regions", "region"), "regions"),
                       (("not_regions", "exclude_regions"), "exclude_regions")):
        for key in keys:
            if key in data:
                spec[attr] = tuple(s.lower() for s in _as_list(data[key], key))


def _structured_drop(spec: dict[str, Any], drop: Any) -> None:
    """`drop:` {percent, window | days}, or the text form's `15% in 7 days`."""
    if not isinstance(drop, dict):
        sub = parse_rule(f"any GPU drops {drop}").condition
        spec["drop_pct"], spec["drop_window"] = sub.drop_pct, sub.drop_window
        return
    unknown = set(map(str, drop)) - {"percent", "window", "days"}
    if unknown:
        raise ValueError(f"drop: unknown key(s) {', '.join(sorted(unknown))}; use "
                         "percent and window (or days)")
    pct, _ = _drop_pct(drop)
    days = drop.get("days", 7)
    if isinstance(days, bool) or not isinstance(days, int) or days <= 0:
        raise ValueError(f"drop: days must be a whole number more than 0, not {days!r}")
    window = drop.get("window", f"{days}d")
    try:
        spec["drop_window"] = parse_duration(window)
    except ValueError as exc:
        raise ValueError(f"drop: window: {exc}") from None
    if spec["drop_window"].total_seconds() <= 0:  # as the text form's window
        raise ValueError("drop: window must be longer than zero")
    spec["drop_pct"] = pct


def _structured_median(spec: dict[str, Any], median: Any) -> None:
    """`median:` {percent, window | days}, or the text form's `30-day median by 20%`."""
    if not isinstance(median, dict):
        sub = parse_rule(f"any GPU under its {median}").condition
    else:
        unknown = set(map(str, median)) - {"percent", "window", "days"}
        if unknown:
            raise ValueError(f"median: unknown key(s) {', '.join(sorted(unknown))}; use "
                             "percent and window (or days)")
        window = median.get("window", f"{median.get('days', 30)}d")
        try:
            sub = parse_rule(f"any GPU under its {window} median by "
                             f"{str(median.get('percent', '')).rstrip('%')}%").condition
        except RuleError as exc:
            raise ValueError(f"median: {exc.message}") from None
    if spec.get("drop_window") is not None:
        raise ValueError("median: a rule compares with one reference: a median or a low")
    spec["drop_pct"], spec["median_window"] = sub.drop_pct, sub.median_window


def _drop_pct(drop: dict[str, Any]) -> tuple[float, None]:
    pct, _ = parse_pct_or_amount(f"{str(drop.get('percent', '')).rstrip('%')}%", "drop")
    if pct is None or pct <= 0:
        raise ValueError("drop: percent must be more than 0")
    return pct, None


def _pricing(value: Any) -> str:
    try:
        return parse_pricing(str(value))
    except ValueError as exc:
        raise ValueError(f"pricing: {exc}") from None


def _sources(value: Any, key: str) -> tuple[str, ...]:
    items = [s.lower() for s in _as_list(value, key)]
    for s in items:
        if s not in price_sources():
            raise RuleError(f"{key}: unknown source {s!r}", hint=closest(s, price_sources()))
    return tuple(items)


def _basis(data: dict[str, Any], words: dict[str, str]) -> str | None:
    """`basis: gpu | offer` (or the older `per: gpu | instance`); None when not given."""
    for key in ("basis", "per"):
        if key in data:
            value = str(data[key]).lower()
            if value not in words:
                raise ValueError(f"{key}: gpu or offer, not {data[key]!r}")
            return words[value]
    return None


def _structured_currency(value: Any) -> str:
    """The YAML form's `currency`: an ISO code or a symbol."""
    cur = str(value).upper()
    cur = SIGN_CURRENCY.get(cur, cur)
    if cur not in FALLBACK_USD_PER_UNIT:
        raise RuleError(f"currency: unknown currency {value!r}",
                        hint=closest(cur, FALLBACK_USD_PER_UNIT, 0.6))
    return cur


def _structured_price(data: dict[str, Any]) -> tuple[float, str, str | None] | None:
    """The YAML form's price (`under`, `max_price` or `price`): a bare number is USD."""
    key = next((k for k in ("under", "max_price", "price") if k in data), "under")
    price = data.get(key)
    if price is None:
        return None
    if isinstance(price, int | float) and not isinstance(price, bool):
        if (problem := price_problem(float(price))) is not None:  # as the readable form
            raise ValueError(f"{key}: {problem}")
        return float(price), "USD", None
    if not isinstance(price, str):
        raise ValueError(f"{key}: a price such as 2 or $2/h, not {type(price).__name__}")
    try:
        return parse_price(price)
    except RuleError as exc:
        raise ValueError(f"{key}: {exc.message}") from None


# -- fit rules --------------------------------------------------------------------------
def _fit_error(exc: RuleError, rule: str, shift: int = 0, prefix: str = "") -> RuleError:
    """The clause's error quoting `rule`, the caret under the same word (the clause was
    parsed with `shift` characters in front of `rule`)."""
    start = max(0, exc.start - shift) if exc.start >= 0 else -1
    end = max(start + 1, exc.end - shift) if exc.start >= 0 else -1
    return RuleError(prefix + exc.message, rule if exc.rule else "", start, end, hint=exc.hint)


def _fit_from_mapping(data: dict[str, Any], base_text: Any, structured: list[str],
                      options: dict[str, Any]) -> Rule:
    """`fit: 7B finetune` (or `rule: cheapest fit for ...`), refined by the fields a fit
    clause has: under/price, currency, basis/per, pricing, sources, regions."""
    other = [k for k in structured if k not in FIT_FIELD_KEYS]
    if other:
        takes = ", ".join(sorted(FIT_FIELD_KEYS - {"rule", "when", "fit"}))
        raise RuleError(f"{other[0]}: does not apply to a fit rule (it takes {takes})")
    if "fit" in data:
        if base_text is not None:
            raise RuleError("give the job in `fit:` or in `rule:`, not both")
        value = data["fit"]
        if not isinstance(value, str) or not value.strip():
            raise RuleError("fit: the job as text, e.g. `fit: 7B finetune`")
        clause_text = value if is_fit_rule(value) else FIT_PREFIX + value
        try:
            clause = parse_fit_clause(clause_text)
        except RuleError as exc:
            raise _fit_error(exc, value, len(clause_text) - len(value), "fit: ") from None
    else:
        clause = parse_fit_clause(str(base_text))
    try:
        clause = _refine_fit(clause, data)
    except RuleError:
        raise
    except ValueError as exc:
        raise RuleError(str(exc)) from None
    if clause.max_price is None:
        raise RuleError("the fit rule has no price limit: set `under: $3/h` (for the whole "
                        "configuration; `$3/GPU-h` or `basis: gpu` per GPU-hour)")
    text = str(base_text).strip() if base_text is not None and not structured else ""
    return finish(clause.condition(), text, "", options)


def _refine_fit(clause: FitClause, data: dict[str, Any]) -> FitClause:
    """The clause with the structured fields applied (they override the clause)."""
    changes: dict[str, Any] = {}
    price = _structured_price(data)
    if price is not None:
        value, currency, basis = price
        changes["max_price"], changes["currency"] = value, currency
        if basis is not None:  # `$3/h` is for the configuration, as in the clause
            changes["per_gpu"] = basis == "gpu"
    if "currency" in data:
        changes["currency"] = _structured_currency(data["currency"])
    basis = _basis(data, _FIT_BASIS_WORDS)
    if basis is not None:
        changes["per_gpu"] = basis == "gpu"
    if "pricing" in data:
        changes["pricing"] = _pricing(data["pricing"])
    for key in ("sources", "source"):
        if key in data:
            changes["sources"] = _sources(data[key], key)
    for key in ("regions", "region"):
        if key in data:
            changes["regions"] = tuple(r.lower() for r in _as_list(data[key], key))
    return replace(clause, **changes)


def _gpu_count(value: Any, key: str) -> float:
    """A GPU count is more than zero, as in the readable form: no offer has none, so a zero
    count would make a rule that never fires."""
    number = _number(value, key)
    if number <= 0:
        raise ValueError(f"{key}: a GPU count must be more than zero")
    return number
