"""The rule language: a readable one-liner and a structured YAML mapping, one `Rule` object.

Readable form (words in any order after the GPU; see docs/alerts.md)::

    H100 under $2/h
    A100-80GB spot under 1.5 USD/h in aws,gcp
    8x H100 under $25/h region us-*
    4090 under ¥2/h on autodl
    any 80GB+ GPU under $1.50/h
    H200 on-demand under $3/h not on vastai
    L40S under $1/h available in eu-*
    H100 drops 15% below its 7-day low
    cheapest fit for 7B finetune under $3/h
    cheapest fit for 70B lora under ¥100/h in cn-*

A rule starting with `cheapest fit for` (or `fit for`) is a fit rule: the clause is parsed by
`gpuradar.recommend.parse_fit_clause`, and the rule watches the configurations that can run
the job (its price is for the whole configuration unless it says `per gpu`).

Prices are per GPU-hour unless the rule says `per instance`; a rule in CNY compares in CNY
(offers quoted in CNY as quoted, others through the stored FX rate). A rule that cannot be
understood raises `RuleError`, which quotes the rule and points at the offending word.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from gpuradar.core import gpus as catalog
from gpuradar.core.currency import FALLBACK_USD_PER_UNIT
from gpuradar.core.sources import price_sources
from gpuradar.core.units import CURRENCY_SIGN, SIGN_CURRENCY, parse_duration
from gpuradar.recommend import FitClauseError, FitRequirement, parse_fit_clause

# The spider names (design.md); a word in `in aws,gcp` that is one of these is a source.


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


@dataclass(frozen=True)
class Rule:
    """One alert rule: which offers it watches, its condition, and how it notifies.

    Options left None take the defaults from the `alerts:` section of the config.
    """

    name: str
    text: str = ""                        # the readable form, as written or described
    # -- which offers ---------------------------------------------------------------------
    gpu_query: str = ""                   # as typed ("H100", "any 80GB+ GPU")
    gpus: frozenset[str] | None = None    # canonical names; None = any GPU
    min_gpus: float | None = None
    max_gpus: float | None = None
    min_gpu_memory: float | None = None   # GB per GPU
    min_total_gpu_memory: float | None = None
    min_vcpus: float | None = None
    min_memory: float | None = None       # GB of RAM
    pricing: str | None = None            # on_demand | spot
    sources: tuple[str, ...] = ()
    exclude_sources: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()         # globs on region or zone
    exclude_regions: tuple[str, ...] = ()
    available_only: bool = False          # known available (default: not known unavailable)
    # -- condition ------------------------------------------------------------------------
    max_price: float | None = None        # in `currency`, per GPU-hour or per instance-hour
    currency: str = "USD"
    per_instance: bool = False
    drop_pct: float | None = None         # drops N % below ...
    drop_window: timedelta | None = None  # ... its N-day low
    # A fit rule (`cheapest fit for 7B finetune under $3/h`): the job and its filters. Its
    # max_price, currency, pricing and sources are mirrored in the fields above, and
    # per_instance is True unless it says `per gpu` (the price is for the configuration).
    fit: FitRequirement | None = None
    # -- options --------------------------------------------------------------------------
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

    @property
    def key(self) -> str:
        return f"rule:{self.name}"

    @cached_property
    def condition_hash_value(self) -> str:
        return self.condition_hash()

    def condition_hash(self) -> str:
        """Identity of what the rule watches: a change starts a new alert."""
        cond = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _CONDITION}
        if self.fit is not None:  # only fit rules carry the key: other hashes stay as they were
            cond["fit"] = repr(replace(self.fit, text=""))
        blob = json.dumps(cond, sort_keys=True, default=lambda v: sorted(v)
                          if isinstance(v, frozenset) else str(v))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """A readable form equivalent to the rule (for structured rules)."""
        if self.fit is not None:
            return self.fit.describe()
        words: list[str] = []
        if self.min_gpus is not None and self.min_gpus == self.max_gpus:
            words.append(f"{self.min_gpus:g}x")
        elif self.min_gpus is not None:
            words.append(f"{self.min_gpus:g}+x")
        if self.gpus is None:
            words.append("any")
            if self.min_gpu_memory:
                words.append(f"{self.min_gpu_memory:g}GB+")
            words.append("GPU")
        else:
            words.append(self.gpu_query)
            if self.min_gpu_memory:
                words.append(f"with {self.min_gpu_memory:g}GB+ GPU memory")
        if self.max_gpus is not None and self.max_gpus != self.min_gpus:
            words.append(f"at most {self.max_gpus:g} GPUs")
        if self.min_total_gpu_memory:
            words.append(f"with {self.min_total_gpu_memory:g}GB+ total GPU memory")
        if self.min_vcpus:
            words.append(f"with {self.min_vcpus:g}+ vCPUs")
        if self.min_memory:
            words.append(f"with {self.min_memory:g}GB+ RAM")
        if self.pricing:
            words.append(self.pricing.replace("_", "-"))
        if self.max_price is not None:
            words.append(f"under {price_text(self.max_price, self.currency)}/h")
            if self.per_instance:
                words.append("per instance")
        if self.drop_pct is not None and self.drop_window is not None:
            words.append(f"drops {self.drop_pct * 100:g}% below its "
                         f"{duration_text(self.drop_window)} low")
        if self.available_only:
            words.append("available")
        if self.sources:
            words.append("on " + ",".join(self.sources))
        if self.exclude_sources:
            words.append("not on " + ",".join(self.exclude_sources))
        if self.regions:
            words.append("region " + ",".join(self.regions))
        if self.exclude_regions:
            words.append("not region " + ",".join(self.exclude_regions))
        return " ".join(words)


_CONDITION = {"gpus", "min_gpus", "max_gpus", "min_gpu_memory", "min_total_gpu_memory",
              "min_vcpus", "min_memory", "pricing", "sources", "exclude_sources", "regions",
              "exclude_regions", "available_only", "max_price", "currency", "per_instance",
              "drop_pct", "drop_window"}


def price_text(value: float, currency: str) -> str:
    """'$2', '$1.50', '¥2', '1.5 CHF'."""
    text = f"{value:.2f}" if value != int(value) else f"{value:g}"
    if value < 0.1 and value != 0:
        text = f"{value:.4f}".rstrip("0")
    sign = CURRENCY_SIGN.get(currency)
    return f"{sign}{text}" if sign else f"{text} {currency}"


def duration_text(d: timedelta) -> str:
    seconds = int(d.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}-{unit}"
    return f"{seconds}-second"


# -- small value parsers (shared with the YAML form and the settings) ----------------------
def parse_datetime(value: Any) -> datetime:
    """An ISO date or date-time; UTC when no offset is given."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a date/time: {value!r} (write e.g. 2026-12-01T08:00Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def known_currency(code: str) -> bool:
    return code.upper() in FALLBACK_USD_PER_UNIT


_PRICE = re.compile(r"^(?P<pre>[$¥￥€£])?(?P<num>\d+(?:\.\d+)?)(?P<post>[$¥￥€£]|[a-z]{3})?"
                    r"(?P<unit>/\S*)?$", re.IGNORECASE)
_CURRENCY_WORD = re.compile(r"^(?P<code>[$¥￥€£]|[a-z]{3})(?P<unit>/\S*)?$", re.IGNORECASE)
_GPU_UNITS = {"h", "hr", "hour", "gpu-h", "gpuh", "gpu-hr", "gpu-hour", "gpu/h", "gpu/hr",
              "gpu/hour", "h/gpu", "hr/gpu", "hour/gpu", "gpuhr"}
_INSTANCE_UNITS = {"instance-h", "instance/h", "instance-hour", "h/instance", "instance",
                   "node-h", "node/h", "h/node", "machine-h", "h/machine", "server-h"}


def parse_price(text: str) -> tuple[float, str, bool | None]:
    """'$2/h', '1.5 USD/h', '¥2', '25 USD/instance-h' -> (value, currency, per_instance or None).

    Used by the YAML form, where the price is one string."""
    words = text.split()
    tokens = [_Tok(w, 0, len(w)) for w in words]
    value, currency, per_instance, used = _price_tokens(tokens, 0, text)
    if used != len(tokens):
        raise ValueError(f"not a price: {text!r} (write e.g. $2/h, 1.5 USD/h, ¥2/h)")
    return value, currency, per_instance


# -- tokens ------------------------------------------------------------------------------
@dataclass
class _Tok:
    text: str
    start: int
    end: int

    @property
    def low(self) -> str:
        return self.text.lower()


def _tokenize(text: str) -> list[_Tok]:
    """Words with their positions; 'aws, gcp' and 'aws ,gcp' become one word 'aws,gcp'."""
    toks = [_Tok(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    out: list[_Tok] = []
    for tok in toks:
        if out and (out[-1].text.endswith(",") or tok.text.startswith(",")):
            prev = out[-1]
            out[-1] = _Tok(text[prev.start:tok.end].replace(" ", ""), prev.start, tok.end)
        else:
            out.append(tok)
    return out


_PRICING_WORDS = {"spot": "spot", "preemptible": "spot", "interruptible": "spot",
                  "on-demand": "on_demand", "ondemand": "on_demand", "on_demand": "on_demand"}
_UNDER_WORDS = {"under", "below", "<", "<=", "max", "cheaper", "less"}
_SOURCE_WORDS = {"on", "from", "via"}
_REGION_WORDS = {"region", "regions", "zone", "zones"}
_NOT_WORDS = {"not", "except", "excluding", "but"}
_FILLER = {"with", "and", "than", "is", "are", "the", "a", ","}
_KEYWORDS = ({"in", "per", "available", "drops", "drop", "any", "total"}
             | set(_PRICING_WORDS) | _UNDER_WORDS | _SOURCE_WORDS | _REGION_WORDS
             | _NOT_WORDS | {"with", "and"})
_COUNT = re.compile(r"^(\d+(?:\.\d+)?)(\+)?[x×](\+)?$", re.IGNORECASE)
_COUNT_GLUED = re.compile(r"^(\d+)[x×]([a-z].*)$", re.IGNORECASE)
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(gb|g|tb|gib)?(\+)?$", re.IGNORECASE)
_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")
_WINDOW = re.compile(r"^(\d+)[- ]?(h|hr|hour|d|day|w|week)s?$", re.IGNORECASE)
_SPEC_NOUNS = {"vcpu": "vcpus", "vcpus": "vcpus", "cpu": "vcpus", "cpus": "vcpus",
               "cores": "vcpus", "ram": "memory", "memory": "memory", "mem": "memory",
               "vram": "gpu_memory", "gpus": "gpus", "gpu": "gpus"}


def _fail(msg: str, text: str, tok: _Tok | None, hint: str | None = None) -> RuleError:
    if tok is None:
        return RuleError(msg, text, len(text), len(text) + 1, hint=hint)
    return RuleError(msg, text, tok.start, tok.end, hint=hint)


def _close(word: str, choices: Any, cutoff: float = 0.75) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def _price_tokens(toks: list[_Tok], i: int, text: str) -> tuple[float, str, bool | None, int]:
    """Parse a price starting at toks[i]; returns (value, currency, per_instance, next i)."""
    if i >= len(toks):
        raise _fail("a price is missing (write e.g. $2/h, 1.5 USD/h, ¥2/h)", text, None)
    tok = toks[i]
    m = _PRICE.match(tok.text)
    if not m:
        raise _fail(f"{tok.text!r} is not a price (write e.g. $2/h, 1.5 USD/h, ¥2/h)", text, tok)
    value = float(m.group("num"))
    code = m.group("pre") or m.group("post")
    unit = m.group("unit")
    i += 1
    if m.group("pre") and m.group("post"):
        raise _fail(f"{tok.text!r} names two currencies", text, tok)
    if not code and i < len(toks):
        w = _CURRENCY_WORD.match(toks[i].text)
        if w and (w.group("code") in SIGN_CURRENCY or known_currency(w.group("code"))):
            code, unit = w.group("code"), w.group("unit") or unit
            tok = toks[i]
            i += 1
        elif w and w.group("unit") and len(w.group("code")) == 3:
            raise _fail(f"unknown currency {w.group('code')!r}", text, toks[i],
                        _close(w.group("code").upper(), FALLBACK_USD_PER_UNIT, 0.6))
    currency = SIGN_CURRENCY.get(code or "$") or (code or "USD").upper()
    if not known_currency(currency):
        raise _fail(f"unknown currency {code!r}", text, tok,
                    _close(currency, FALLBACK_USD_PER_UNIT, 0.6))
    per_instance: bool | None = None
    if unit:
        u = unit[1:].lower()
        if u in _GPU_UNITS:
            per_instance = None if u in ("h", "hr", "hour") else False
        elif u in _INSTANCE_UNITS:
            per_instance = True
        else:
            raise _fail(f"unknown price unit {unit!r} (write /h, /GPU-h or /instance-h)",
                        text, tok)
    return value, currency, per_instance, i


def _name_list(tok: _Tok) -> list[str]:
    return [p for p in tok.text.split(",") if p]


# -- the readable form -------------------------------------------------------------------
def parse_rule(text: str, **options: Any) -> Rule:
    """Parse the readable form into a Rule (`options` set name and notification options)."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("empty rule (write e.g. `H100 under $2/h`)")
    if is_fit_rule(text):
        return _fit_rule(text, options)
    toks = _tokenize(text)
    spec: dict[str, Any] = {"text": text.strip()}
    i = 0
    # 1. GPU count: 8x, 8+x, 8x+, 8xH100
    m = _COUNT.match(toks[0].text)
    g = _COUNT_GLUED.match(toks[0].text)
    if m:
        count = float(m.group(1))
        spec["min_gpus"] = count
        if not (m.group(2) or m.group(3)):
            spec["max_gpus"] = count
        i = 1
    elif g:
        spec["min_gpus"] = spec["max_gpus"] = float(g.group(1))
        cut = toks[0].start + len(g.group(1)) + 1
        toks[0] = _Tok(g.group(2), cut, toks[0].end)
    # 2. GPU: `any [80GB+] [GPU]` or a catalog name (possibly several words or a,b list)
    if i >= len(toks):
        raise _fail("the rule names no GPU (write e.g. `8x H100 under $25/h`)", text, None)
    if toks[i].low == "any":
        spec["gpus"], i = None, i + 1
        words = ["any"]
        if i < len(toks) and (q := _QUANTITY.match(toks[i].text)) and q.group(2):
            spec["min_gpu_memory"] = _gb(q)
            words.append(toks[i].text)
            i += 1
        if i < len(toks) and toks[i].low in ("gpu", "gpus", "card", "cards"):
            words.append(toks[i].text)
            i += 1
        spec["gpu_query"] = " ".join(words)
    else:
        start = i
        while i < len(toks) and not _starts_clause(toks, i):
            i += 1
        if i == start:
            raise _fail(f"a rule starts with a GPU (H100, A100-80GB, 4090) or `any`, not "
                        f"{toks[i].text!r}", text, toks[i])
        gpu_toks = toks[start:i]
        query = " ".join(t.text for t in gpu_toks)
        names: set[str] = set()
        for part in query.split(","):
            part = part.strip()
            found = catalog.match_family(part)
            if not found:
                _gpu_error(text, gpu_toks, part)
            names.update(g.name for g in found)
        spec["gpus"] = frozenset(names)
        spec["gpu_query"] = query
    # 3. clauses, in any order
    negate: _Tok | None = None
    while i < len(toks):
        tok, low = toks[i], toks[i].low
        if (negate is not None and low not in ("on", "in", "from", "via", "region", "regions",
                                               "zone", "zones") and "," not in low
                and (low in _KEYWORDS or _starts_clause(toks, i))):
                raise _fail(f"`{negate.text}` must be followed by `on SOURCE`, `in REGION` or "
                            f"`region REGION`", text, tok)
        if low in _PRICING_WORDS:
            _set_once(spec, "pricing", _PRICING_WORDS[low], text, tok)
            i += 1
        elif low in _UNDER_WORDS:
            i += 1
            while i < len(toks) and toks[i].low in ("than", "or", "equal", "to", "="):
                i += 1
            if "max_price" in spec:
                raise _fail("the rule has two prices", text, tok)
            value, currency, per_inst, i = _price_tokens(toks, i, text)
            spec["max_price"], spec["currency"] = value, currency
            if per_inst is not None:
                spec["per_instance"] = per_inst
        elif low == "per":
            if i + 1 >= len(toks):
                raise _fail("`per` needs `instance` or `GPU`", text, tok)
            what = toks[i + 1].low
            if what in ("instance", "node", "machine", "server", "vm", "instance-hour"):
                spec["per_instance"] = True
            elif what in ("gpu", "gpu-hour", "gpu-h", "card"):
                spec["per_instance"] = False
            else:
                raise _fail(f"`per {toks[i + 1].text}`: write `per instance` or `per GPU`", text,
                            toks[i + 1])
            i += 2
        elif low in _NOT_WORDS:
            negate = tok
            i += 1
            continue
        elif low == "in":
            i = _place(spec, toks, i + 1, text, negate, tok)
        elif low in _SOURCE_WORDS:
            i = _sources(spec, toks, i + 1, text, negate, tok)
        elif low in _REGION_WORDS:
            i = _regions(spec, toks, i + 1, text, negate, tok)
        elif negate is not None:
            i = _place(spec, toks, i, text, negate, tok)
        elif low in ("available", "in-stock", "instock"):
            spec["available_only"] = True
            i += 1
        elif low in ("drops", "drop", "falls"):
            i = _drop(spec, toks, i + 1, text, tok)
        elif low in _FILLER:
            i += 1
        elif _QUANTITY.match(tok.text) or (low.endswith("+") and _QUANTITY.match(low)):
            i = _spec_clause(spec, toks, i, text)
        else:
            hint = _close(low, _KEYWORDS | set(price_sources()))
            raise _fail(f"unexpected word {tok.text!r}", text, tok, hint)
        negate = None
    if negate is not None:
        raise _fail(f"`{negate.text}` must be followed by `on SOURCE` or `in REGION`", text, None)
    if "max_price" not in spec and "drop_pct" not in spec and not spec.get("available_only"):
        raise _fail("the rule has no condition: say `under $2/h`, `drops 15% below its 7-day "
                    "low` or `available`", text, None)
    return _finish(spec, options)


# -- fit rules ---------------------------------------------------------------------------
def is_fit_rule(text: str) -> bool:
    """Whether a readable rule is a fit rule: `cheapest fit for ...` or `fit for ...`."""
    words = str(text).lower().split()
    return bool(words) and (words[0] == "cheapest"
                            or (words[0] in ("fit", "fits") and words[1:2] == ["for"]))


def _fit_error(exc: FitClauseError, rule: str, shift: int = 0, prefix: str = "") -> RuleError:
    """The fit clause's error as a RuleError quoting `rule`, the caret under the same word
    (the clause was parsed with `shift` characters in front of `rule`)."""
    start = max(0, exc.start - shift) if exc.start >= 0 else -1
    end = max(start + 1, exc.end - shift) if exc.start >= 0 else -1
    return RuleError(prefix + exc.message, rule, start, end, hint=exc.hint)


def _fit_fields(req: FitRequirement) -> dict[str, Any]:
    """A fit rule's Rule fields: the requirement, and the parts of it the engine, the
    messages and the stale-source notices read like any rule's (limit, currency, unit,
    pricing, sources). Regions stay in the requirement only: there `cn-*` means mainland
    China (gpuradar.recommend.region_allowed), not a glob."""
    return {"fit": req, "gpu_query": "", "gpus": None, "max_price": req.max_price,
            "currency": req.currency, "per_instance": not req.per_gpu, "pricing": req.pricing,
            "sources": req.sources}


def _fit_rule(text: str, options: dict[str, Any]) -> Rule:
    """`cheapest fit for 7B finetune under $3/h` -> a Rule carrying the FitRequirement."""
    try:
        req = parse_fit_clause(text)
    except FitClauseError as exc:
        raise _fit_error(exc, text) from None
    if req.max_price is None:
        raise _fail("a fit rule needs a price limit: add e.g. `under $3/h`", text, None)
    return _finish({"text": text.strip(), **_fit_fields(req)}, options)


def _gb(q: re.Match) -> float:
    value = float(q.group(1))
    return value * 1024 if (q.group(2) or "").lower() == "tb" else value


def _gpu_error(text: str, toks: list[_Tok], part: str) -> None:
    """Point at the word that breaks the GPU name: a misspelt GPU, or a misspelt keyword
    after a good one ('H100 undr $2/h')."""
    if "," not in part:
        for k in range(len(toks) - 1, 0, -1):
            if catalog.match_family(" ".join(t.text for t in toks[:k])):
                bad = toks[k]
                raise _fail(f"unexpected word {bad.text!r}", text, bad,
                            _close(bad.low, _KEYWORDS | set(price_sources())))
    start = text.find(part, toks[0].start)
    end = start + len(part) if start >= 0 else toks[-1].end
    raise RuleError(f"unknown GPU {part!r}", text, max(start, toks[0].start), end,
                    hint=catalog.suggest(part))


def _starts_clause(toks: list[_Tok], i: int) -> bool:
    low = toks[i].low
    if low in _KEYWORDS or low in _FILLER:
        return True
    if _PRICE.match(low) and not _QUANTITY.match(low):
        return True  # "$2/h"
    q = _QUANTITY.match(low)  # "80GB+", "32 vCPUs"
    return bool(q and (q.group(3) or (i + 1 < len(toks) and toks[i + 1].low in _SPEC_NOUNS)))


def _set_once(spec: dict[str, Any], key: str, value: Any, text: str, tok: _Tok) -> None:
    if key in spec and spec[key] != value:
        raise _fail(f"{tok.text!r} contradicts an earlier word", text, tok)
    spec[key] = value


def _list_arg(toks: list[_Tok], i: int, text: str, what: str, after: _Tok) -> _Tok:
    if i >= len(toks) or (toks[i].low in _KEYWORDS and "," not in toks[i].low):
        raise _fail(f"`{after.text}` needs {what}", text, toks[i] if i < len(toks) else None)
    return toks[i]


def _place(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, negate: _Tok | None,
           kw: _Tok) -> int:
    """`in aws,gcp` (all known sources) or `in eu-*` (region globs)."""
    arg = _list_arg(toks, i, text, "sources (aws,gcp) or regions (us-*)", kw)
    items = [x.lower() for x in _name_list(arg)]
    if all(x in price_sources() for x in items):
        return _sources(spec, toks, i, text, negate, kw)
    if any(x in price_sources() for x in items):
        raise _fail(f"{arg.text!r} mixes sources and regions: write `on SOURCES region "
                    f"REGIONS`", text, arg)
    for x in items:
        if not any(c in x for c in "*?-0123456789") and (hint := _close(x, price_sources())):
            raise _fail(f"unknown source {x!r} (for a region named so, write `region {x}`)",
                        text, arg, hint)
    return _regions(spec, toks, i, text, negate, kw)


def _sources(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, negate: _Tok | None,
             kw: _Tok) -> int:
    arg = _list_arg(toks, i, text, "a source (aws, gcp, vastai, ...)", kw)
    items = [x.lower() for x in _name_list(arg)]
    for x in items:
        if x not in price_sources():
            raise _fail(f"unknown source {x!r} (sources: {', '.join(price_sources())})", text, arg,
                        _close(x, price_sources()))
    key = "exclude_sources" if negate is not None else "sources"
    spec[key] = tuple(dict.fromkeys([*spec.get(key, ()), *items]))
    return i + 1


def _regions(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, negate: _Tok | None,
             kw: _Tok) -> int:
    arg = _list_arg(toks, i, text, "a region or glob (us-*, eu-west-1)", kw)
    key = "exclude_regions" if negate is not None else "regions"
    spec[key] = tuple(dict.fromkeys([*spec.get(key, ()), *(x.lower() for x in _name_list(arg))]))
    return i + 1


def _drop(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, kw: _Tok) -> int:
    """`drops 15% below its 7-day low`."""
    usage = "write `drops 15% below its 7-day low`"
    if i >= len(toks) or not (pct := _PCT.match(toks[i].text)):
        raise _fail(f"`{kw.text}` needs a percentage: {usage}", text,
                    toks[i] if i < len(toks) else None)
    value = float(pct.group(1))
    if not 0 < value < 100:
        raise _fail("the percentage must be between 0 and 100", text, toks[i])
    spec["drop_pct"] = value / 100
    i += 1
    while i < len(toks) and toks[i].low in ("below", "under", "its", "the", "from"):
        i += 1
    if i >= len(toks) or not (w := _WINDOW.match(toks[i].text)):
        raise _fail(f"a window is missing: {usage}", text, toks[i] if i < len(toks) else None)
    n, unit = int(w.group(1)), w.group(2).lower()[0]
    if n <= 0:
        raise _fail("the window must be longer than zero", text, toks[i])
    try:
        spec["drop_window"] = parse_duration(f"{n}{unit}")
    except ValueError as exc:
        raise _fail(str(exc), text, toks[i]) from None
    i += 1
    if i >= len(toks) or toks[i].low not in ("low", "minimum", "min", "lowest"):
        raise _fail(f"`low` is missing: {usage}", text, toks[i] if i < len(toks) else None)
    return i + 1


def _spec_clause(spec: dict[str, Any], toks: list[_Tok], i: int, text: str) -> int:
    """`32+ vCPUs`, `256GB+ RAM`, `80GB+ GPU memory`, `640GB+ total GPU memory`, `4+ GPUs`."""
    tok = toks[i]
    q = _QUANTITY.match(tok.text)
    assert q is not None
    value, has_gb = _gb(q), bool(q.group(2))
    j = i + 1
    nouns = []
    while j < len(toks) and toks[j].low in ("total", "gpu", "gpus", "memory", "vram", "ram",
                                            "mem", "vcpu", "vcpus", "cpu", "cpus", "cores",
                                            "per"):
        nouns.append(toks[j].low)
        j += 1
    if not nouns:
        raise _fail(f"{tok.text!r} of what? write e.g. `32+ vCPUs`, `256GB+ RAM`, "
                    f"`80GB+ GPU memory`, `4+ GPUs`", text, tok)
    if "total" in nouns:
        key = "min_total_gpu_memory"
    elif any(n in ("vcpu", "vcpus", "cpu", "cpus", "cores") for n in nouns):
        key = "min_vcpus"
    elif "vram" in nouns or ("gpu" in nouns and any(n in ("memory", "mem") for n in nouns)):
        key = "min_gpu_memory"
    elif any(n in ("ram", "memory", "mem") for n in nouns):
        key = "min_memory"
    else:  # GPUs
        if has_gb:
            key = "min_gpu_memory"
        else:
            spec["min_gpus"] = value
            if not q.group(3):
                spec["max_gpus"] = value
            return j
    if key != "min_vcpus" and not has_gb:
        raise _fail(f"write the memory with its unit, e.g. `{q.group(1)}GB+`", text, tok)
    spec[key] = value
    return j


# -- options (shared by both forms) ------------------------------------------------------
OPTION_KEYS = {"name", "notify", "for", "repeat", "min_drop", "send_resolved", "top",
               "mute_until", "hysteresis"}


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9.]+", "-", text.lower().replace("/h", "").replace("%", "pct"))
    return s.strip("-")[:120] or "rule"


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
    m = _PRICE.match(text.replace(" ", ""))
    if not m:
        raise ValueError(f"{what}: write a percentage (5%) or an amount ($0.10), not {value!r}")
    return None, float(m.group("num"))


def apply_options(rule: Rule, options: dict[str, Any]) -> Rule:
    """Rule with the per-rule options set; raises ValueError naming the option."""
    changes: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key == "name":
            if not str(value).strip():
                raise ValueError("name: must not be empty")
            changes["name"] = str(value).strip()[:200]
        elif key == "notify":
            if isinstance(value, str):
                items = [v.strip() for v in value.split(",") if v.strip()]
            elif isinstance(value, list | tuple):
                items = [str(v).strip() for v in value]
            elif isinstance(value, dict):
                items = [*_as_list(value.get("targets")), *_as_list(value.get("tags"))]
                unknown = set(value) - {"targets", "tags"}
                if unknown:
                    raise ValueError(f"notify: unknown key(s) {', '.join(sorted(unknown))}; "
                                     "use targets and tags")
            else:
                raise ValueError("notify: a target name, a tag, or a list of them")
            changes["notify"] = tuple(items)
        elif key == "for":
            if isinstance(value, int) and not isinstance(value, bool):
                if value < 1:
                    raise ValueError("for: at least 1 (evaluation)")
                changes["for_count"] = value
            else:
                text = str(value).strip()
                if text.isdigit():
                    changes["for_count"] = max(1, int(text))
                else:
                    changes["for_duration"] = parse_duration(text)
        elif key == "repeat":
            changes["repeat_set"] = True
            if value is False or str(value).lower() in ("never", "no", "off", "0"):
                changes["repeat"] = None
            else:
                d = parse_duration(value)
                if d <= timedelta(0):
                    raise ValueError("repeat: must be longer than zero (or `never`)")
                changes["repeat"] = d
        elif key == "min_drop":
            pct, amount = parse_pct_or_amount(value, "min_drop")
            changes["min_drop_pct"], changes["min_drop_abs"] = pct, amount
            if pct is None and amount is None:
                raise ValueError("min_drop: missing value")
        elif key == "send_resolved":
            if not isinstance(value, bool):
                raise ValueError("send_resolved: true or false")
            changes["send_resolved"] = value
        elif key == "top":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError("top: a whole number of offers, at least 1")
            changes["top"] = value
        elif key == "mute_until":
            changes["mute_until"] = parse_datetime(value)
        elif key == "hysteresis":
            pct, amount = parse_pct_or_amount(value, "hysteresis")
            if pct is None:
                raise ValueError("hysteresis: a percentage, e.g. 2%")
            changes["hysteresis"] = pct
        else:
            raise ValueError(f"unknown option {key!r}")
    return replace(rule, **changes)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v).strip() for v in value]


def _finish(spec: dict[str, Any], options: dict[str, Any]) -> Rule:
    rule = Rule(name="rule", **spec)
    if not rule.text:
        rule = replace(rule, text=rule.describe())
    rule = replace(rule, name=_slug(rule.text))
    if options:
        try:
            rule = apply_options(rule, options)
        except ValueError as exc:
            raise RuleError(str(exc), rule.text) from None
    return rule


# -- the structured form -----------------------------------------------------------------
FIELD_KEYS = {"rule", "when", "fit", "gpu", "gpus", "count", "min_gpus", "max_gpus", "gpu_memory",
              "total_gpu_memory", "vcpus", "memory", "ram", "pricing", "under", "max_price",
              "price", "currency", "per", "sources", "source", "not_sources", "exclude_sources",
              "regions", "region", "not_regions", "exclude_regions", "available", "drop"}


def _number(value: Any, key: str, *, gb: bool = False) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{key}: a number, not {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        q = _QUANTITY.match(str(value).replace(" ", ""))
        if not q or (q.group(2) and not gb):
            raise ValueError(f"{key}: a number{' of GB' if gb else ''}, not {value!r}")
        number = _gb(q)
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
        k = str(unknown[0])
        raise RuleError(f"unknown field {k!r}", hint=_close(k, FIELD_KEYS | OPTION_KEYS))
    options = {k: v for k, v in data.items() if k in OPTION_KEYS}
    base_text = data.get("rule", data.get("when"))
    structured = [k for k in data if k in FIELD_KEYS and k not in ("rule", "when")]
    if "fit" in data or (base_text is not None and is_fit_rule(str(base_text))):
        return _fit_from_mapping(data, base_text, structured, options)
    try:
        spec: dict[str, Any] = {}
        if base_text is not None:
            base = parse_rule(str(base_text))
            spec = {f.name: getattr(base, f.name) for f in fields(base)
                    if f.name in _CONDITION or f.name == "gpu_query"}
        _structured_fields(spec, data)
    except RuleError:
        raise
    except ValueError as exc:
        raise RuleError(str(exc)) from None
    if "gpu_query" not in spec:
        raise RuleError("the rule names no GPU: set `gpu: H100` (or `gpu: any`)")
    if (spec.get("max_price") is None and spec.get("drop_pct") is None
            and not spec.get("available_only")):
        raise RuleError("the rule has no condition: set `under: $2/h`, `drop: 15% below 7-day "
                        "low` or `available: true`")
    # A structured rule is shown in the readable form it is equivalent to.
    spec["text"] = str(base_text).strip() if base_text is not None and not structured else ""
    return _finish(spec, options)


def _structured_fields(spec: dict[str, Any], data: dict[str, Any]) -> None:
    gpu = data.get("gpu", data.get("gpus"))
    if gpu is not None:
        items = _as_list(gpu)
        if items == ["any"] or items == ["*"]:
            spec["gpus"], spec["gpu_query"] = None, "any GPU"
        else:
            names: set[str] = set()
            for item in items:
                found = catalog.match_family(item)
                if not found:
                    raise RuleError(f"gpu: unknown GPU {item!r}", hint=catalog.suggest(item))
                names.update(g.name for g in found)
            spec["gpus"], spec["gpu_query"] = frozenset(names), ",".join(items)
    if "count" in data:
        spec["min_gpus"] = spec["max_gpus"] = _number(data["count"], "count")
    if "min_gpus" in data:
        spec["min_gpus"] = _number(data["min_gpus"], "min_gpus")
    if "max_gpus" in data:
        spec["max_gpus"] = _number(data["max_gpus"], "max_gpus")
    for key, attr, gb in (("gpu_memory", "min_gpu_memory", True),
                          ("total_gpu_memory", "min_total_gpu_memory", True),
                          ("vcpus", "min_vcpus", False), ("memory", "min_memory", True),
                          ("ram", "min_memory", True)):
        if key in data:
            spec[attr] = _number(data[key], key, gb=gb)
    if "pricing" in data:
        p = str(data["pricing"]).lower()
        if p not in _PRICING_WORDS:
            raise ValueError(f"pricing: on-demand or spot, not {data['pricing']!r}")
        spec["pricing"] = _PRICING_WORDS[p]
    price = _structured_price(data)
    if price is not None:
        value, currency, per_inst = price
        spec["max_price"], spec["currency"] = value, currency
        if per_inst is not None:
            spec["per_instance"] = per_inst
    if "currency" in data:
        spec["currency"] = _structured_currency(data["currency"])
    if "per" in data:
        per = str(data["per"]).lower()
        if per not in ("gpu", "instance"):
            raise ValueError(f"per: gpu or instance, not {data['per']!r}")
        spec["per_instance"] = per == "instance"
    for keys, attr in ((("sources", "source"), "sources"),
                       (("not_sources", "exclude_sources"), "exclude_sources")):
        for key in keys:
            if key in data:
                items = [s.lower() for s in _as_list(data[key])]
                for s in items:
                    if s not in price_sources():
                        raise RuleError(f"{key}: unknown source {s!r}",
                                        hint=_close(s, price_sources()))
                spec[attr] = tuple(items)
    for keys, attr in ((("regions", "region"), "regions"),
                       (("not_regions", "exclude_regions"), "exclude_regions")):
        for key in keys:
            if key in data:
                spec[attr] = tuple(s.lower() for s in _as_list(data[key]))
    if "available" in data:
        if not isinstance(data["available"], bool):
            raise ValueError("available: true or false")
        spec["available_only"] = data["available"]
    if "drop" in data:
        drop = data["drop"]
        if isinstance(drop, dict):
            pct, _ = parse_pct_or_amount(f"{str(drop.get('percent', '')).rstrip('%')}%", "drop")
            window = drop.get("window", f"{drop.get('days', 7)}d")
            spec["drop_pct"], spec["drop_window"] = pct, parse_duration(window)
        else:
            sub = parse_rule(f"any GPU drops {drop}")
            spec["drop_pct"], spec["drop_window"] = sub.drop_pct, sub.drop_window


# Fields a fit rule takes in the YAML form (the ones its clause has).
FIT_FIELD_KEYS = {"rule", "when", "fit", "under", "max_price", "price", "currency", "per",
                  "pricing", "sources", "source", "regions", "region"}
_FIT_PREFIX = "cheapest fit for "


def _fit_from_mapping(data: dict[str, Any], base_text: Any, structured: list[str],
                      options: dict[str, Any]) -> Rule:
    """`fit: 7B finetune` (or `rule: cheapest fit for ...`), refined by the fields a fit
    clause has: under/price, currency, per, pricing, sources, regions."""
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
        clause = value if is_fit_rule(value) else _FIT_PREFIX + value
        shift = len(clause) - len(value)
        try:
            req = parse_fit_clause(clause)
        except FitClauseError as exc:
            raise _fit_error(exc, value, shift, "fit: ") from None
    else:
        text = str(base_text)
        try:
            req = parse_fit_clause(text)
        except FitClauseError as exc:
            raise _fit_error(exc, text) from None
    try:
        req = _refine_fit(req, data)
    except RuleError:
        raise
    except ValueError as exc:
        raise RuleError(str(exc)) from None
    if req.max_price is None:
        raise RuleError("the fit rule has no price limit: set `under: $3/h` (for the whole "
                        "configuration; `$3/GPU-h` or `per: gpu` per GPU-hour)")
    text = str(base_text).strip() if base_text is not None and not structured else ""
    return _finish({"text": text, **_fit_fields(req)}, options)


def _structured_currency(value: Any) -> str:
    """The YAML form's `currency`: an ISO code or a symbol."""
    cur = str(value).upper()
    cur = SIGN_CURRENCY.get(cur, cur)
    if not known_currency(cur):
        raise RuleError(f"currency: unknown currency {value!r}",
                        hint=_close(cur, FALLBACK_USD_PER_UNIT, 0.6))
    return cur


def _structured_price(data: dict[str, Any]) -> tuple[float, str, bool | None] | None:
    """The YAML form's price (`under`, `max_price` or `price`): a bare number is USD."""
    price = data.get("under", data.get("max_price", data.get("price")))
    if price is None:
        return None
    if isinstance(price, int | float) and not isinstance(price, bool):
        return float(price), "USD", None
    try:
        return parse_price(str(price))
    except RuleError as exc:
        raise ValueError(f"under: {exc.message}") from None


def _refine_fit(req: FitRequirement, data: dict[str, Any]) -> FitRequirement:
    """The requirement with the structured fields applied (they override the clause)."""
    changes: dict[str, Any] = {}
    price = _structured_price(data)
    if price is not None:
        value, currency, per_inst = price
        changes["max_price"], changes["currency"] = value, currency
        if per_inst is not None:  # `$3/h` is for the configuration, as in the clause
            changes["per_gpu"] = not per_inst
    if "currency" in data:
        changes["currency"] = _structured_currency(data["currency"])
    if "per" in data:
        per = str(data["per"]).lower()
        if per not in ("gpu", "instance", "configuration", "config"):
            raise ValueError(f"per: gpu or configuration, not {data['per']!r}")
        changes["per_gpu"] = per == "gpu"
    if "pricing" in data:
        p = str(data["pricing"]).lower()
        if p not in _PRICING_WORDS:
            raise ValueError(f"pricing: on-demand or spot, not {data['pricing']!r}")
        changes["pricing"] = _PRICING_WORDS[p]
    for key in ("sources", "source"):
        if key in data:
            items = [s.lower() for s in _as_list(data[key])]
            for s in items:
                if s not in price_sources():
                    raise RuleError(f"{key}: unknown source {s!r}",
                                    hint=_close(s, price_sources()))
            changes["sources"] = tuple(items)
    for key in ("regions", "region"):
        if key in data:
            changes["regions"] = tuple(_as_list(data[key]))
    return replace(req, **changes)
