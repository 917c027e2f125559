"""The readable rule form: one line a person writes, parsed into a `Rule`.

Words in any order after the GPU (docs/alerts.md has the grammar)::

    H100 under $2/h                         per GPU-hour
    8x H100 under $25/h region us-*         an 8-GPU offer, whole offer under $25/h
    at least 8x H100 under $25/h            8 or more GPUs (also `8+x`)
    8x H100 under $3/GPU-h                  8-GPU offers, per GPU-hour (`per GPU`)
    H100 under $20/h per instance           any count, whole offer (`/instance-h`)
    A100-80GB spot under 1.5 USD/h in aws,gcp
    4090 under ¥2/h on autodl
    any 80GB+ GPU under $1.50/h
    H100 drops 15% below its 7-day low
    H100 spot under $2/h interruptions under 10%   published interruption band <= 10%/month
    H100 spot under its 30-day median by 20%       20 % under the offers' 30-day median
    H100 index under $2.50/h                the market index (docs/index.md), not an offer
    H100 spot index drops 10% in 7 days
    cheapest fit for 7B finetune under $3/h
    cheapest fit for 70B lora under ¥100/h in mainland

A rule that cannot be understood raises `RuleError`, which quotes the rule and points at
the offending word.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from gpuradar.alerts.rules import PRICE_WORD, Condition, Rule, RuleError, Selector, finish
from gpuradar.core import gpus as catalog
from gpuradar.core import pricing as pricing_kinds
from gpuradar.core.currency import FALLBACK_USD_PER_UNIT
from gpuradar.core.sources import price_sources
from gpuradar.core.units import SIGN_CURRENCY, parse_duration
from gpuradar.recommend import PRECISIONS, TASKS, Job, RecommendError, parse_budget, parse_count

SELECTOR_FIELDS = frozenset(Selector.__dataclass_fields__)


def make_condition(spec: dict[str, Any]) -> Condition:
    """A Condition from parsed fields. The price basis, when the rule does not say it, is
    per offer if the rule names a GPU count and per GPU-hour otherwise."""
    selector = Selector(**{k: v for k, v in spec.items() if k in SELECTOR_FIELDS})
    basis = spec.get("basis") or ("offer" if selector.names_count else "gpu")
    return Condition(offers=selector, max_price=spec.get("max_price"),
                     currency=spec.get("currency", "USD"), basis=basis,
                     drop_pct=spec.get("drop_pct"), drop_window=spec.get("drop_window"),
                     median_window=spec.get("median_window"),
                     job=spec.get("job"), index=bool(spec.get("index")))


def known_currency(code: str) -> bool:
    return code.upper() in FALLBACK_USD_PER_UNIT


#: The longest rule (and rule field) accepted: a rule is what a person writes (a list of
#: every region of a cloud fits); a longer one is a mistake, and quoting it in an error
#: would flood the terminal.
MAX_RULE_CHARS = 4000
#: The highest price a rule may name, per hour in its currency (an 8-GPU offer in IDR is
#: far below it); more is a typo that could never be compared meaningfully.
MAX_RULE_PRICE = 1_000_000_000.0


def price_problem(value: float) -> str | None:
    """Why `value` cannot be a rule's price limit, or None: the one check of both forms (a
    limit of 0 or less could never fire)."""
    if not math.isfinite(value):
        return f"a price must be a number, not {value!r}"
    if value <= 0:
        return f"a price must be more than 0, not {value:g}"
    if value > MAX_RULE_PRICE:
        return f"a price must be at most {MAX_RULE_PRICE:,.0f} per hour, not {value:g}"
    return None


def too_long(text: str, what: str = "a rule") -> RuleError | None:
    """RuleError when `text` is longer than MAX_RULE_CHARS (quoting only its start)."""
    if len(text) <= MAX_RULE_CHARS:
        return None
    return RuleError(f"{what} is at most {MAX_RULE_CHARS} characters, this one has "
                     f"{len(text):,} (it starts {text[:40]!r})")


_CURRENCY_WORD = re.compile(r"^(?P<code>[$¥￥€£]|[a-z]{3})(?P<unit>/\S*)?$", re.IGNORECASE)
_GPU_UNITS = {"h", "hr", "hour", "gpu-h", "gpuh", "gpu-hr", "gpu-hour", "gpu/h", "gpu/hr",
              "gpu/hour", "h/gpu", "hr/gpu", "hour/gpu", "gpuhr"}
_INSTANCE_UNITS = {"instance-h", "instance/h", "instance-hour", "h/instance", "instance",
                   "node-h", "node/h", "h/node", "machine-h", "h/machine", "server-h",
                   "offer-h", "offer/h", "h/offer"}
_OFFER_WORDS = {"instance", "node", "machine", "server", "vm", "instance-hour", "offer"}


def parse_price(text: str) -> tuple[float, str, str | None]:
    """'$2/h', '1.5 USD/h', '¥2', '25 USD/instance-h' -> (value, currency, basis or None):
    'gpu' for /GPU-h, 'offer' for /instance-h, None when the unit does not say.

    Used by the YAML form, where the price is one string."""
    words = text.split()
    tokens = [_Tok(w, 0, len(w)) for w in words]
    value, currency, basis, used = _price_tokens(tokens, 0, text)
    if used != len(tokens):
        raise ValueError(f"not a price: {text!r} (write e.g. $2/h, 1.5 USD/h, ¥2/h)")
    return value, currency, basis


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


PRICING_WORDS = pricing_kinds.WORDS
_UNDER_WORDS = {"under", "below", "<", "<=", "max", "cheaper", "less"}
_SOURCE_WORDS = {"on", "from", "via"}
_REGION_WORDS = {"region", "regions", "zone", "zones"}
_NOT_WORDS = {"not", "except", "excluding", "but"}
_FILLER = {"with", "and", "than", "is", "are", "the", "a", ","}
# Words after a quantity that make it RAM or total memory, not memory per accelerator.
_MEMORY_NOUNS = frozenset({"ram", "memory", "mem", "total", "vram"})
_INTERRUPTION_WORDS = {"interruptions", "interruption", "interrupted", "interrupt"}
_KEYWORDS = ({"in", "per", "available", "drops", "drop", "any", "total", "index"}
             | _INTERRUPTION_WORDS | set(PRICING_WORDS) | _UNDER_WORDS | _SOURCE_WORDS
             | _REGION_WORDS | _NOT_WORDS | {"with", "and"})
_COUNT = re.compile(r"^(\d+(?:\.\d+)?)(\+)?[x×](\+)?$", re.IGNORECASE)
_COUNT_GLUED = re.compile(r"^(\d+)[x×]([a-z].*)$", re.IGNORECASE)
QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(gb|g|tb|gib)?(\+)?$", re.IGNORECASE)
_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")
_WINDOW = re.compile(r"^(\d+)[- ]?(h|hr|hour|d|day|w|week)s?$", re.IGNORECASE)
_SPEC_NOUNS = {"vcpu": "vcpus", "vcpus": "vcpus", "cpu": "vcpus", "cpus": "vcpus",
               "cores": "vcpus", "ram": "memory", "memory": "memory", "mem": "memory",
               "vram": "gpu_memory", "gpus": "gpus", "gpu": "gpus"}


def _fail(msg: str, text: str, tok: _Tok | None, hint: str | None = None) -> RuleError:
    if tok is None:
        return RuleError(msg, text, len(text), len(text) + 1, hint=hint)
    return RuleError(msg, text, tok.start, tok.end, hint=hint)


def closest(word: str, choices: Any, cutoff: float = 0.75) -> str | None:
    """The choice nearest to a misspelt `word` (for "did you mean"), or None."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def _price_tokens(toks: list[_Tok], i: int, text: str) -> tuple[float, str, str | None, int]:
    """Parse a price starting at toks[i]; returns (value, currency, basis, next i)."""
    if i >= len(toks):
        raise _fail("a price is missing (write e.g. $2/h, 1.5 USD/h, ¥2/h)", text, None)
    tok = toks[i]
    m = PRICE_WORD.match(tok.text)
    if not m:
        raise _fail(f"{tok.text!r} is not a price (write e.g. $2/h, 1.5 USD/h, ¥2/h)", text, tok)
    value = float(m.group("num"))
    if (problem := price_problem(value)) is not None:
        raise _fail(problem, text, tok)
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
                        closest(w.group("code").upper(), FALLBACK_USD_PER_UNIT, 0.6))
    currency = SIGN_CURRENCY.get(code or "$") or (code or "USD").upper()
    if not known_currency(currency):
        raise _fail(f"unknown currency {code!r}", text, tok,
                    closest(currency, FALLBACK_USD_PER_UNIT, 0.6))
    basis: str | None = None
    if unit:
        u = unit[1:].lower()
        if u in _GPU_UNITS:
            basis = None if u in ("h", "hr", "hour") else "gpu"
        elif u in _INSTANCE_UNITS:
            basis = "offer"
        else:
            raise _fail(f"unknown price unit {unit!r} (write /h, /GPU-h or /instance-h)",
                        text, tok)
    return value, currency, basis, i


def _name_list(text: str) -> list[str]:
    """The names of a comma list (`aws,gcp`, `us-*,eu-*`), empty ones dropped."""
    return [p for p in text.split(",") if p]


# -- the readable form -------------------------------------------------------------------
def parse_rule(text: str, **options: Any) -> Rule:
    """Parse the readable form into a Rule (`options` set name and notification options)."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("empty rule (write e.g. `H100 under $2/h`)")
    if (error := too_long(text)) is not None:
        raise error
    if is_fit_rule(text):
        return _fit_rule(text, options)
    spec = read_spec(text)
    gpu_query = spec.pop("gpu_query")
    return finish(make_condition(spec), text.strip(), gpu_query, options)


def read_spec(text: str) -> dict[str, Any]:
    """The fields a readable (not fit) rule states, as parsed: `basis` only if its words
    give one (`per GPU`, `/instance-h`), and `gpu_query`, the GPU as written."""
    toks = _tokenize(text)
    spec: dict[str, Any] = {}
    i = _read_count(spec, toks, text)
    i = _read_gpu(spec, toks, i, text)
    _read_clauses(spec, toks, i, text)
    if spec.get("index") or "drop_in" in spec:
        _index_rule(spec, text)
    if (problem := interruption_problem(spec)) is not None:
        raise _fail(problem, text, spec.pop("interruption_word", None))
    spec.pop("interruption_word", None)
    if "max_price" not in spec and "drop_pct" not in spec and not spec.get("available_only"):
        raise _fail("the rule has no condition: say `under $2/h`, `drops 15% below its 7-day "
                    "low` or `available`", text, None)
    return spec


def _read_count(spec: dict[str, Any], toks: list[_Tok], text: str) -> int:
    """1. The GPU count: 8x, 8+x, 8x+, 8xH100, at least 8x; the index of the next token."""
    i = 0
    at_least = len(toks) > 2 and toks[0].low == "at" and toks[1].low == "least"
    if at_least:
        i = 2
        if not (_COUNT.match(toks[2].text) or _COUNT_GLUED.match(toks[2].text)):
            raise _fail("`at least` needs a GPU count, e.g. `at least 8x H100`", text, toks[2])
    m = _COUNT.match(toks[i].text)
    g = _COUNT_GLUED.match(toks[i].text)
    if m:
        count = float(m.group(1))
        if count <= 0:
            raise _fail("a GPU count must be more than zero", text, toks[i])
        spec["min_gpus"] = count
        if not (m.group(2) or m.group(3) or at_least):
            spec["max_gpus"] = count
        i += 1
    elif g:
        spec["min_gpus"] = float(g.group(1))
        if not at_least:
            spec["max_gpus"] = spec["min_gpus"]
        cut = toks[i].start + len(g.group(1)) + 1
        toks[i] = _Tok(g.group(2), cut, toks[i].end)
    return i


def _read_gpu(spec: dict[str, Any], toks: list[_Tok], i: int, text: str) -> int:
    """2. The GPU: `any [80GB+] [GPU]` or a catalog name (possibly several words or an a,b
    list)."""
    if i >= len(toks):
        raise _fail("the rule names no GPU (write e.g. `8x H100 under $25/h`)", text, None)
    if toks[i].low == "any":
        return _any_gpu(spec, toks, i + 1)
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
    return i


_ANY_NOUNS = ("gpu", "gpus", "card", "cards", "accelerator", "accelerators")


def _any_gpu(spec: dict[str, Any], toks: list[_Tok], i: int) -> int:
    """`any [80GB+] GPU`, `any accelerator [with] 80GB+` (toks[i] follows `any`): every model
    (GPU, TPU, NPU), with at least that much memory when a size is given."""
    spec["gpus"] = None
    words = ["any"]
    noun_first = i < len(toks) and toks[i].low in _ANY_NOUNS
    if noun_first:
        words.append(toks[i].text)
        i += 1
        if (i + 1 < len(toks) and toks[i].low == "with"
                and (q := QUANTITY.match(toks[i + 1].text)) and q.group(2)
                and not (i + 2 < len(toks) and toks[i + 2].low in _MEMORY_NOUNS)):
            words.append(toks[i].text)
            i += 1
    if i < len(toks) and (q := QUANTITY.match(toks[i].text)) and q.group(2) and not (
            noun_first and i + 1 < len(toks) and toks[i + 1].low in _MEMORY_NOUNS):
        spec["min_gpu_memory"] = gigabytes(q)
        words.append(toks[i].text)
        i += 1
    if not noun_first and i < len(toks) and toks[i].low in _ANY_NOUNS:
        words.append(toks[i].text)
        i += 1
    spec["gpu_query"] = " ".join(words)
    return i


_PLACE_WORDS = ("on", "in", "from", "via", "region", "regions", "zone", "zones")


def _read_clauses(spec: dict[str, Any], toks: list[_Tok], i: int, text: str) -> None:
    """3. The clauses, in any order; `not`/`except` applies to the place clause after it."""
    negate: _Tok | None = None
    while i < len(toks):
        tok, low = toks[i], toks[i].low
        if (negate is not None and low not in _PLACE_WORDS and "," not in low
                and (low in _KEYWORDS or _starts_clause(toks, i))):
            raise _fail(f"`{negate.text}` must be followed by `on SOURCE`, `in REGION` or "
                        f"`region REGION`", text, tok)
        if low in _NOT_WORDS:
            negate = tok
            i += 1
            continue
        i = _read_clause(spec, toks, i, text, negate)
        negate = None
    if negate is not None:
        raise _fail(f"`{negate.text}` must be followed by `on SOURCE` or `in REGION`", text, None)


def _read_clause(spec: dict[str, Any], toks: list[_Tok], i: int, text: str,
                 negate: _Tok | None) -> int:
    """One clause starting at toks[i]; the index of the token after it."""
    tok, low = toks[i], toks[i].low
    if low in PRICING_WORDS:
        _set_once(spec, "pricing", PRICING_WORDS[low], text, tok)
        return i + 1
    if low in _UNDER_WORDS:
        return _under(spec, toks, i + 1, text, tok)
    if low == "per":
        return _per(spec, toks, i, text, tok)
    if low == "in":
        return _place(spec, toks, i + 1, text, negate, tok)
    if low in _SOURCE_WORDS:
        return _sources(spec, toks, i + 1, text, negate, tok)
    if low in _REGION_WORDS:
        return _regions(spec, toks, i + 1, text, negate, tok)
    if negate is not None:
        return _place(spec, toks, i, text, negate, tok)
    if low in ("available", "in-stock", "instock"):
        spec["available_only"] = True
        return i + 1
    if low in ("drops", "drop", "falls"):
        return _drop(spec, toks, i + 1, text, tok)
    if low == "index":
        _set_once(spec, "index", True, text, tok)
        return i + 1
    if low in _INTERRUPTION_WORDS:
        return _interruptions(spec, toks, i + 1, text, tok)
    if _is_at_most(toks, i):
        return _at_most(spec, toks, i + 2, text, tok)
    if low in _FILLER:
        return i + 1
    if QUANTITY.match(tok.text) or (low.endswith("+") and QUANTITY.match(low)):
        return _spec_clause(spec, toks, i, text)
    hint = closest(low, _KEYWORDS | set(price_sources()))
    raise _fail(f"unexpected word {tok.text!r}", text, tok, hint)


def _under(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, tok: _Tok) -> int:
    """`under [than] PRICE` (toks[i] follows `under`): the price, its currency and basis."""
    while i < len(toks) and toks[i].low in ("than", "or", "equal", "to", "="):
        i += 1
    if i < len(toks) and toks[i].low in ("its", "the"):
        return _median(spec, toks, i + 1, text, tok)
    if "max_price" in spec:
        raise _fail("the rule has two prices", text, tok)
    value, currency, basis, i = _price_tokens(toks, i, text)
    spec["max_price"], spec["currency"] = value, currency
    if basis is not None:
        _set_once(spec, "basis", basis, text, toks[i - 1])
    return i


def parse_interruption(text: str) -> float:
    """'under 10%', 'below 10%', '10%' -> 0.10: the highest interruption band a rule accepts,
    as a share of capacity reclaimed per month. ValueError names what is wrong."""
    words = text.lower().split()
    if words and words[0] in ("under", "below", "<", "<="):
        words = words[1:]
    pct = _PCT.match(words[0]) if len(words) == 1 else None
    if pct is None:
        raise ValueError(f"not an interruption limit: {text!r} (write e.g. `under 10%`)")
    value = float(pct.group(1))
    if not 0 < value <= 100:
        raise ValueError(f"an interruption limit is more than 0% and at most 100%, not "
                         f"{value:g}%")
    return value / 100


def interruption_problem(spec: dict[str, Any]) -> str | None:
    """Why a rule's interruption limit cannot apply, or None: only spot offers publish one."""
    if spec.get("max_interruption") is not None and spec.get("pricing") != pricing_kinds.SPOT:
        return "an interruption limit is for spot offers: add `spot` (YAML: `pricing: spot`)"
    return None


def _interruptions(spec: dict[str, Any], toks: list[_Tok], i: int, text: str,
                   tok: _Tok) -> int:
    """`interruptions under 10%` (toks[i] follows `interruptions`)."""
    j = i + 1 if i < len(toks) and toks[i].low in ("under", "below", "<", "<=") else i
    if j >= len(toks):
        raise _fail("`interruptions` needs a limit: write `interruptions under 10%`", text, None)
    try:
        value = parse_interruption(toks[j].text)
    except ValueError as exc:
        raise _fail(str(exc), text, toks[j]) from None
    _set_once(spec, "max_interruption", value, text, tok)
    spec["interruption_word"] = tok
    return j + 1


def _median(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, kw: _Tok) -> int:
    """`under its 30-day median by 20%` (toks[i] follows `its`): the window and the share."""
    usage = "write `under its 30-day median by 20%`"
    w = _WINDOW.match(toks[i].text) if i < len(toks) else None
    if w is None or int(w.group(1)) <= 0:
        raise _fail(f"a window is missing: {usage}", text, toks[i] if i < len(toks) else None)
    try:
        window = parse_duration(f"{int(w.group(1))}{w.group(2).lower()[0]}")
    except ValueError as exc:
        raise _fail(str(exc), text, toks[i]) from None
    if i + 1 >= len(toks) or toks[i + 1].low != "median":
        raise _fail(f"`median` is missing: {usage}", text,
                    toks[i + 1] if i + 1 < len(toks) else None)
    j = i + 2 + (i + 2 < len(toks) and toks[i + 2].low == "by")
    pct = _PCT.match(toks[j].text) if j < len(toks) else None
    if pct is None:
        raise _fail(f"the percentage is missing: {usage}", text,
                    toks[j] if j < len(toks) else None)
    value = float(pct.group(1))
    if not 0 < value < 100:
        raise _fail("the percentage must be between 0 and 100", text, toks[j])
    if "drop_pct" in spec:
        raise _fail("a rule compares with one reference: a median or a low, not both", text,
                    kw)
    spec["drop_pct"], spec["median_window"] = value / 100, window
    return j + 1


def _per(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, tok: _Tok) -> int:
    """`per instance` / `per GPU` (toks[i] is `per`): the price's basis."""
    if i + 1 >= len(toks):
        raise _fail("`per` needs `instance` or `GPU`", text, tok)
    what = toks[i + 1].low
    if what in _OFFER_WORDS:
        _set_once(spec, "basis", "offer", text, toks[i + 1])
    elif what in ("gpu", "gpu-hour", "gpu-h", "card"):
        _set_once(spec, "basis", "gpu", text, toks[i + 1])
    else:
        raise _fail(f"`per {toks[i + 1].text}`: write `per instance` or `per GPU`", text,
                    toks[i + 1])
    return i + 2


# -- fit rules ---------------------------------------------------------------------------
FIT_PREFIX = "cheapest fit for "
_TASK_WORDS = {
    "finetune": "finetune", "fine-tune": "finetune", "finetuning": "finetune",
    "fine-tuning": "finetune", "full-finetune": "finetune", "sft": "finetune",
    "pretrain": "pretrain", "pre-train": "pretrain", "pretraining": "pretrain",
    "pre-training": "pretrain", "lora": "lora", "qlora": "qlora", "inference": "inference",
    "serve": "inference", "serving": "inference", "infer": "inference",
}
_CLAUSE_WORDS = ("cheapest", "fit", "for", "under", "below", "less", *PRICING_WORDS, "in",
                 "on", "region", "seq", "batch", "per", "gpu", *_TASK_WORDS, *PRECISIONS)
_SIZE = re.compile(r"^\d+(?:\.\d+)?(?:e\d+)?[kmbt]$", re.IGNORECASE)


def is_fit_rule(text: str) -> bool:
    """Whether a readable rule is a fit rule: `cheapest fit for ...` or `fit for ...`."""
    words = str(text).lower().split()
    return bool(words) and (words[0] == "cheapest"
                            or (words[0] in ("fit", "fits") and words[1:2] == ["for"]))


@dataclass(frozen=True)
class FitClause:
    """`cheapest fit for 7B finetune under $3/h` as data: the job, and the price limit for
    the whole configuration (all the GPUs the job needs) unless `per_gpu`."""

    job: Job
    max_price: float | None = None
    currency: str = "USD"
    per_gpu: bool = False
    pricing: str | None = None
    sources: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()

    def condition(self) -> Condition:
        return make_condition({"job": self.job, "max_price": self.max_price,
                               "currency": self.currency,
                               "basis": "gpu" if self.per_gpu else "offer",
                               "pricing": self.pricing, "sources": self.sources,
                               "regions": self.regions})


def parse_fit_clause(text: str) -> FitClause:
    """`[cheapest] fit for <size> <task> [bf16|fp8|int4] [spot|on-demand] [under <price>]
    [per gpu] [on <providers>] [in <providers or regions>] [region <globs>] [seq N]
    [batch N]`, clauses after the size in any order. The price is for the whole
    configuration (every GPU the job needs) unless `per gpu`; "under" is strict. Region
    patterns mean what they mean everywhere (gpuradar.core.units.region_matches)."""
    reader = _FitReader(text)
    if not reader.toks:
        raise RuleError("empty clause", text)
    i = reader.start()
    while i < len(reader.toks):
        i = reader.clause(i)
    return reader.fit_clause()


class _FitReader:
    """The words of one fit clause, read left to right into `spec`."""

    def __init__(self, text: str) -> None:
        self.text, self.toks = text, _tokenize(text or "")
        self.spec: dict[str, Any] = {}

    def err(self, msg: str, k: int, hint: str | None = None) -> RuleError:
        return _fail(msg, self.text, self.toks[k] if k < len(self.toks) else None, hint)

    def low(self, k: int) -> str:
        return self.toks[k].low if k < len(self.toks) else ""

    def once(self, key: str, value: Any, k: int) -> None:
        if key in self.spec:
            raise self.err(f"{key} given twice", k)
        self.spec[key] = value

    def start(self) -> int:
        """`[cheapest] fit for`: the index of the first clause."""
        i = 1 if self.low(0) == "cheapest" else 0
        if self.low(i) not in ("fit", "fits"):
            raise self.err("expected 'fit for <size> <task>'", i)
        i += 1
        if self.low(i) != "for":
            raise self.err("expected 'for' after 'fit'", i)
        return i + 1

    def clause(self, i: int) -> int:
        """The clause at toks[i]; the index after it."""
        word, low = self.low(i), self.low
        if word in _TASK_WORDS:
            self.once("task", _TASK_WORDS[word], i)
        elif word in PRECISIONS:
            self.once("precision", word, i)
        elif word in PRICING_WORDS:
            self.once("pricing", PRICING_WORDS[word], i)
        elif word in ("under", "below", "<"):
            return _clause_price(self.toks, i + 1, self.spec, self.err)
        elif word == "less" and low(i + 1) == "than":
            return _clause_price(self.toks, i + 2, self.spec, self.err)
        elif word == "per":
            if low(i + 1) in ("gpu", "gpu-hour", "gpu-h"):
                self.spec["per_gpu"] = True
            elif low(i + 1) not in ("instance", "config", "configuration"):
                raise self.err("expected 'per gpu'", i + 1)
            return i + 2
        elif word in ("in", "on", "region"):
            return self.place(word, i)
        elif word in ("seq", "seq-len", "context", "batch"):
            if not low(i + 1).isdigit() or int(low(i + 1)) <= 0:
                raise self.err(f"'{word}' needs a positive whole number", i + 1)
            self.once("batch" if word == "batch" else "seq_len", int(low(i + 1)), i)
            return i + 2
        elif _SIZE.match(word):
            try:
                self.once("params", parse_count(word, "model size"), i)
            except RecommendError as exc:
                raise self.err(str(exc), i) from None
        else:
            close = [c for c in difflib.get_close_matches(word, _CLAUSE_WORDS, 2, 0.7)
                     if c != word]
            raise self.err(f"unexpected word {self.toks[i].text!r}", i,
                           close[0] if close else None)
        return i + 1

    def place(self, word: str, i: int) -> int:
        """`in`/`on` providers, `in`/`region` region globs (toks[i] is the word)."""
        low, after = self.low, self.low(i + 1)
        if word == "in" and i + 1 < len(self.toks) and not all(
                n in price_sources() for n in after.split(",") if n):
            self.once("regions", tuple(_name_list(after)), i)
        elif word in ("in", "on"):
            if i + 1 >= len(self.toks):
                raise self.err(f"'{word}' needs providers, e.g. {word} aws,gcp", i + 1)
            names = [n for n in low(i + 1).split(",") if n]
            for name in names:
                if name not in price_sources():
                    raise self.err(f"unknown provider {name!r}", i + 1,
                                   closest(name, price_sources(), 0.6))
            self.once("sources", tuple(names), i)
        else:
            if i + 1 >= len(self.toks):
                raise self.err("'region' needs a glob, e.g. region us-*", i + 1)
            self.once("regions", tuple(_name_list(after)), i)
        return i + 2

    def fit_clause(self) -> FitClause:
        """The clause read, once it names a size and a task."""
        spec, end = self.spec, len(self.toks)
        if "params" not in spec:
            raise self.err("missing the model size, e.g. 7B", end)
        if "task" not in spec:
            raise self.err(f"missing the task ({', '.join(TASKS)})", end)
        try:
            job = Job(params=spec["params"], task=spec["task"],
                      precision=spec.get("precision", "bf16"),
                      seq_len=spec.get("seq_len", 2048), batch=spec.get("batch", 1))
        except RecommendError as exc:
            raise RuleError(str(exc), self.text) from None
        return FitClause(job=job, max_price=spec.get("max_price"),
                         currency=spec.get("currency", "USD"),
                         per_gpu=spec.get("per_gpu", False), pricing=spec.get("pricing"),
                         sources=spec.get("sources", ()), regions=spec.get("regions", ()))


def _clause_price(toks: list[_Tok], i: int, spec: dict[str, Any], err) -> int:
    if i >= len(toks):
        raise err("'under' needs a price, e.g. under $3/h", i)
    if "max_price" in spec:
        raise err("price given twice", i)
    words = toks[i].text
    used = 1
    # "14 CNY/h", "3 $/h": a bare number, then a currency word.
    unit = _CURRENCY_WORD.match(toks[i + 1].text if i + 1 < len(toks) else "")
    if re.match(r"^\d+(\.\d+)?$", words) and unit and (
            unit.group("code") in SIGN_CURRENCY or known_currency(unit.group("code"))):
        words += " " + toks[i + 1].text
        used = 2
    try:
        budget = parse_budget(words)
    except RecommendError:
        raise err(f"{toks[i].text!r} is not a price, e.g. $3/h or ¥20/h", i) from None
    if not known_currency(budget.currency):
        raise err(f"unknown currency {budget.currency}", i)
    if (problem := price_problem(budget.amount)) is not None:
        raise err(problem, i)
    spec["max_price"], spec["currency"] = budget.amount, budget.currency
    if budget.per_gpu:
        spec["per_gpu"] = True
    return i + used


def _fit_rule(text: str, options: dict[str, Any]) -> Rule:
    """`cheapest fit for 7B finetune under $3/h` -> a Rule whose condition carries the job."""
    clause = parse_fit_clause(text)
    if clause.max_price is None:
        raise _fail("a fit rule needs a price limit: add e.g. `under $3/h`", text, None)
    return finish(clause.condition(), text.strip(), "", options)


def gigabytes(q: re.Match) -> float:
    """The size a QUANTITY match states, in GB ("2TB" is 2048)."""
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
                            closest(bad.low, _KEYWORDS | set(price_sources())))
    start = text.find(part, toks[0].start)
    end = start + len(part) if start >= 0 else toks[-1].end
    raise RuleError(f"unknown GPU {part!r}", text, max(start, toks[0].start), end,
                    hint=catalog.suggest(part))


def _is_at_most(toks: list[_Tok], i: int) -> bool:
    """`at most` starts at word i (two words: `at` alone is no keyword)."""
    return toks[i].low == "at" and i + 1 < len(toks) and toks[i + 1].low == "most"


def _starts_clause(toks: list[_Tok], i: int) -> bool:
    low = toks[i].low
    if low in _KEYWORDS or low in _FILLER:
        return True
    if _is_at_most(toks, i):
        return True
    if PRICE_WORD.match(low) and not QUANTITY.match(low):
        return True  # "$2/h"
    q = QUANTITY.match(low)  # "80GB+", "32 vCPUs"
    return bool(q and (q.group(3) or (i + 1 < len(toks) and toks[i + 1].low in _SPEC_NOUNS)))


def _at_most(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, kw: _Tok) -> int:
    """`at most 4 GPUs` (or `at most 4x`): offers of that many GPUs or fewer (the form
    `Rule.describe` writes for a structured rule with only `max_gpus`)."""
    count, j = None, i
    if i < len(toks) and (m := _COUNT.match(toks[i].text)) and not (m.group(2) or m.group(3)):
        count, j = float(m.group(1)), i + 1
    elif (i + 1 < len(toks) and re.fullmatch(r"\d+(?:\.\d+)?", toks[i].text)
          and toks[i + 1].low in ("gpu", "gpus")):
        count, j = float(toks[i].text), i + 2
    if count is None or count <= 0:
        raise _fail("`at most` needs a GPU count: write `at most 4 GPUs`", text,
                    toks[i] if i < len(toks) else None)
    if spec.get("min_gpus") is not None and spec["min_gpus"] > count:
        raise _fail(f"`at most {count:g}` is fewer than the rule's {spec['min_gpus']:g} GPUs",
                    text, kw)
    _set_once(spec, "max_gpus", count, text, kw)
    return j


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
    items = [x.lower() for x in _name_list(arg.text)]
    if all(x in price_sources() for x in items):
        return _sources(spec, toks, i, text, negate, kw)
    if any(x in price_sources() for x in items):
        raise _fail(f"{arg.text!r} mixes sources and regions: write `on SOURCES region "
                    f"REGIONS`", text, arg)
    for x in items:
        if not any(c in x for c in "*?-0123456789") and (hint := closest(x, price_sources())):
            raise _fail(f"unknown source {x!r} (for a region named so, write `region {x}`)",
                        text, arg, hint)
    return _regions(spec, toks, i, text, negate, kw)


def _sources(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, negate: _Tok | None,
             kw: _Tok) -> int:
    arg = _list_arg(toks, i, text, "a source (aws, gcp, vastai, ...)", kw)
    items = [x.lower() for x in _name_list(arg.text)]
    for x in items:
        if x not in price_sources():
            raise _fail(f"unknown source {x!r} (sources: {', '.join(price_sources())})", text, arg,
                        closest(x, price_sources()))
    key = "exclude_sources" if negate is not None else "sources"
    spec[key] = tuple(dict.fromkeys([*spec.get(key, ()), *items]))
    return i + 1


def _regions(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, negate: _Tok | None,
             kw: _Tok) -> int:
    arg = _list_arg(toks, i, text, "a region or glob (us-*, eu-west-1)", kw)
    key = "exclude_regions" if negate is not None else "regions"
    names = (x.lower() for x in _name_list(arg.text))
    spec[key] = tuple(dict.fromkeys([*spec.get(key, ()), *names]))
    return i + 1


# What an index rule may say besides its GPU, pricing, price and drop (docs/index.md: the
# index covers every source and region of a model, each offer whatever its size).
_NOT_FOR_INDEX = ("min_gpus", "max_gpus", "min_total_gpu_memory", "min_vcpus", "min_memory",
                  "sources", "exclude_sources", "regions", "exclude_regions", "available_only")


def _index_rule(spec: dict[str, Any], text: str) -> None:
    """`H100 index under $2.50/h`, `H100 spot index drops 10% in 7 days`: checked here."""
    drop_in = spec.pop("drop_in", None)
    if not spec.get("index"):
        raise _fail("`drops N% in W` is for index rules (`H100 index drops 10% in 7 days`); "
                    "for offers write `drops 15% below its 7-day low`", text, drop_in)
    if "drop_pct" in spec and drop_in is None:
        raise _fail("an index rule's drop reads `drops 10% in 7 days` (from the index's high "
                    "in the window)", text, None)
    if any(spec.get(k) for k in _NOT_FOR_INDEX) or spec.get("basis") == "offer":
        raise _fail("an index rule takes a GPU, a pricing, `under PRICE` and `drops N% in W` "
                    "only: the index covers every source, region and offer size", text, None)


def _drop(spec: dict[str, Any], toks: list[_Tok], i: int, text: str, kw: _Tok) -> int:
    """`drops 15% below its 7-day low`; for an index rule `drops 10% in 7 days`."""
    usage = "write `drops 15% below its 7-day low`"
    if i >= len(toks) or not (pct := _PCT.match(toks[i].text)):
        raise _fail(f"`{kw.text}` needs a percentage: {usage}", text,
                    toks[i] if i < len(toks) else None)
    value = float(pct.group(1))
    if not 0 < value < 100:
        raise _fail("the percentage must be between 0 and 100", text, toks[i])
    if "drop_pct" in spec:
        raise _fail("a rule compares with one reference: a median or a low, not both", text,
                    kw)
    spec["drop_pct"] = value / 100
    i += 1
    if i < len(toks) and toks[i].low in ("in", "within", "over"):  # the index form
        spec["drop_in"] = toks[i]
        i += 1
        word = " ".join(t.text for t in toks[i:i + 2])
        w = _WINDOW.match(toks[i].text) if i < len(toks) else None
        if w is None and i + 1 < len(toks):
            w, used = _WINDOW.match(word), 2
        else:
            used = 1
        if w is None or int(w.group(1)) <= 0:
            raise _fail("a window is missing: write `drops 10% in 7 days`", text,
                        toks[i] if i < len(toks) else None)
        spec["drop_window"] = parse_duration(f"{int(w.group(1))}{w.group(2).lower()[0]}")
        return i + used
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
    q = QUANTITY.match(tok.text)
    assert q is not None
    value, has_gb = gigabytes(q), bool(q.group(2))
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


