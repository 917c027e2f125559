"""The read-only JSON API under `/api/v1/` (served by scheduler/server.py), and its OpenAPI
3.1 document at `/api/v1/openapi.json`.

Offers (filters as in `gpuradar prices`), offer history, a spot offer's interruption signal
over time, the market index and its history, the market's patterns, sources and crawls: the
reads of gpuradar.storage.dataset, gpuradar.storage.queries and gpuradar.storage.index (the
patterns: gpuradar.core.patterns over storage's spans), as JSON. Every answer carries a
strong ETag (the SHA-256 of its body); a request whose If-None-Match names it gets 304 and
no body; the server caches each answer per data version, so a dashboard polling every few
seconds costs neither the reads nor the transfer. Answers pass through the same redaction
as logs and the page: no configured secret reaches a client. Safe on a standby replica:
nothing is written.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs

import orjson
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gpuradar.core.clock import SYSTEM
from gpuradar.core.pricing import CHOICES as PRICING_CHOICES
from gpuradar.core.pricing import PRICINGS, WORDS, parse_pricing
from gpuradar.storage.dataset import OFFER_SCHEMA, Field, last_change
from gpuradar.storage.db import DatabaseError

log = logging.getLogger("gpuradar.http_api")

PREFIX = "/api/v1"
# What a read of the store raises when the database cannot be read (locked, gone, not a
# database, a lost connection): answered 503. Anything else is a bug: 500, and logged.
DATABASE_ERRORS = (SQLAlchemyError, DatabaseError)
MAX_LIMIT = 10_000
MAX_ID = 2**31 - 1  # ids are 32-bit integers in PostgreSQL: a larger one names no offer
# The bounds of one request (docs/limits.md), checked before any other work: a query string
# past them costs the service nothing but the refusal, whatever a client sends. The HTTP
# server refuses a request line over 64 KiB before the app sees it (414).
MAX_REQUEST_LINE = 65_536  # http.server's own limit (_MAXLINE)
MAX_FIELDS = 100           # parameters, each repeat counted: 400 beyond
MAX_VALUE_CHARS = 256      # one parameter's value: 400 beyond
MAX_ITEMS = 20             # values of one list parameter, repeats and comma-separated items


class BadRequest(ValueError):
    """A query parameter the API cannot read: answered 400 with this message."""


def shown(text: str) -> str:
    """A value a client sent, for an error message: quoted, cut to 60 characters."""
    from gpuradar.core.text import excerpt

    return excerpt(text)


# C0 and C1 control characters (Unicode category Cc): they name nothing stored, and
# PostgreSQL refuses NUL in text. The OpenAPI document states the same set as a pattern.
_CONTROL_CHARS = "\\x00-\\x1f\\x7f-\\x9f"
_CONTROL = re.compile(f"[{_CONTROL_CHARS}]")


class NotFound(LookupError):
    pass


# -- parameters ---------------------------------------------------------------------------
class Params:
    """The query string, read strictly: an unknown parameter is an error, not ignored (a
    typo would silently widen the answer)."""

    def __init__(self, query: str, allowed: Iterable[str]) -> None:
        try:
            self.raw = parse_qs(query, keep_blank_values=True, max_num_fields=MAX_FIELDS)
        except ValueError:
            raise BadRequest(f"more than {MAX_FIELDS} parameters") from None
        unknown = sorted(set(self.raw) - set(allowed))
        if unknown:
            raise BadRequest(f"unknown parameter {shown(unknown[0])}; this endpoint takes "
                             f"{', '.join(sorted(allowed)) or 'none'}")
        for key, values in self.raw.items():
            for value in values:
                if len(value) > MAX_VALUE_CHARS:
                    raise BadRequest(f"{key} is {len(value):,} characters long; at most "
                                     f"{MAX_VALUE_CHARS}")
                # a control character names nothing stored; PostgreSQL refuses NUL in text
                if _CONTROL.search(value):
                    raise BadRequest(f"{key} contains a control character")

    def one(self, key: str) -> str | None:
        """The parameter's one value; None when it is absent. Given empty, it is a 400: a
        client that meant no filter leaves the parameter out."""
        values = self.raw.get(key)
        if not values:
            return None
        if len(values) > 1:
            raise BadRequest(f"{key} given {len(values)} times; give it once")
        text = values[0].strip()
        if not text:
            raise BadRequest(f"{key} is empty; give a value or leave {key} out")
        return text

    def many(self, key: str) -> list[str]:
        """Repeated (?source=a&source=b) or comma-separated (?source=a,b) values; an empty
        one is a 400, as in `one`."""
        out = [v.strip() for value in self.raw.get(key, []) for v in value.split(",")]
        if len(out) > MAX_ITEMS:
            raise BadRequest(f"{key} has {len(out)} values; at most {MAX_ITEMS}")
        if "" in out:
            raise BadRequest(f"{key} has an empty value; give names or leave {key} out")
        return out

    def number(self, key: str, minimum: float | None = None,
               maximum: float | None = None) -> float | None:
        text = self.one(key)
        if text is None:
            return None
        try:
            value = float(text)
        except ValueError:
            raise BadRequest(f"{key} must be a number, not {shown(text)}") from None
        if value != value or (minimum is not None and value < minimum):
            raise BadRequest(f"{key} must be a number of at least {minimum:g}, not "
                             f"{shown(text)}")
        if not math.isfinite(value):  # min_gpus=inf would match nothing, silently
            raise BadRequest(f"{key} must be a finite number, not {shown(text)}")
        if maximum is not None and value > maximum:
            raise BadRequest(f"{key} must be at most {maximum:g}, not {shown(text)}")
        return value

    def integer(self, key: str, default: int, maximum: int) -> int:
        """A whole number in ASCII digits, capped at `maximum`."""
        text = self.one(key)
        if text is None:
            return default
        if not (text.isascii() and text.isdigit()):  # '²'.isdigit(), but int('²') fails
            raise BadRequest(f"{key} must be a whole number, not {shown(text)}")
        # more digits than the cap has are past it (and int() refuses 4,300 digits and more)
        if len(text.lstrip("0")) > len(str(maximum)):
            return maximum
        return min(int(text), maximum)

    def ident(self, key: str) -> int | None:
        """An id: a whole number no stored row can exceed (MAX_ID)."""
        text = self.one(key)
        if text is None:
            return None
        if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(MAX_ID)) \
                or int(text) > MAX_ID:
            raise BadRequest(f"{key} must be a whole number from 0 to {MAX_ID}, not "
                             f"{shown(text)}")
        return int(text)

    def flag(self, key: str) -> bool:
        if self.raw.get(key) == [""]:
            return True  # ?available alone means true
        text = self.one(key)
        if text is None:
            return False
        low = text.lower()
        if low in ("1", "true", "yes"):
            return True
        if low in ("0", "false", "no"):
            return False
        raise BadRequest(f"{key} must be true or false, not {shown(text)}")

    def pricing(self) -> str | None:
        text = self.one("pricing")
        if text is None:
            return None
        try:
            return parse_pricing(text)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None

    def when(self, key: str) -> datetime | None:
        from gpuradar.core.units import parse_when

        text = self.one(key)
        if text is None:
            return None
        try:
            return parse_when(text)
        except ValueError as exc:
            raise BadRequest(f"{key}: {exc}") from None

    def window(self) -> tuple[datetime, datetime]:
        """[since, until]: `since`/`until` as times (ISO 8601, '2d', 'yesterday'), or the
        last `days` days (default 7) before `until` (default now)."""
        until = self.when("until") or SYSTEM.now()
        since = self.when("since")
        if since is None:
            days = self.number("days", minimum=0, maximum=MAX_DAYS)
            try:
                since = until - timedelta(days=7 if days is None else days)
            except (OverflowError, ValueError):  # inf, or before the year 1
                raise BadRequest(f"days {shown(self.one('days') or '')} reaches before the "
                                 "year 1") from None
        elif self.one("days") is not None:
            raise BadRequest("give since or days, not both")
        if since > until:
            raise BadRequest("since is after until")
        return since, until


def _gpus(engine: Engine, params: Params) -> list[str]:
    from gpuradar.storage.dataset import UnknownGpu, resolve_gpus

    try:
        return resolve_gpus(engine, params.one("gpu"))
    except UnknownGpu as exc:
        raise BadRequest(str(exc)) from None


def _sources(engine: Engine, params: Params, crawled: bool = False) -> list[str]:
    """`source` values, each a known or stored source (a typo is a 400, not an empty
    answer)."""
    from gpuradar.core.sources import providers
    from gpuradar.storage.dataset import unknown_sources

    names = params.many("source")
    unknown = unknown_sources(engine, names, crawled)
    if unknown:
        raise BadRequest(f"unknown source {shown(unknown[0])}; known: "
                         f"{', '.join(providers())}")
    return names


# -- endpoints ----------------------------------------------------------------------------
def offers(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.core import gpus as catalog
    from gpuradar.storage import dataset
    from gpuradar.storage.queries import OfferFilter

    vendors, kinds = params.many("vendor"), params.many("kind")
    for value in vendors:
        if not catalog.select(vendor=value):
            raise BadRequest(f"unknown vendor {shown(value)}; known: "
                             f"{', '.join(catalog.VENDORS)}")
    for value in kinds:
        if not catalog.select(kind=value):
            raise BadRequest(f"unknown kind {shown(value)}; known: {', '.join(catalog.KINDS)}")
    flt = OfferFilter(gpus=_gpus(engine, params), vendors=vendors, kinds=kinds,
                      pricing=params.pricing(), sources=_sources(engine, params),
                      regions=params.many("region"), max_price=params.number("max_price", 0),
                      min_gpus=params.number("min_gpus", 0),
                      min_gpu_memory=params.number("min_gpu_memory", 0),
                      available_only=params.flag("available"),
                      include_inactive=params.flag("all"))
    limit = params.integer("limit", 1000, MAX_LIMIT) or MAX_LIMIT
    rows = sorted(dataset.offers(engine, flt), key=_offer_key)  # ties: by id
    after = _cursor(params.one("cursor"))
    start = 0 if after is None else bisect.bisect_right([_offer_key(r) for r in rows], after)
    page = rows[start:start + limit]
    more = start + limit < len(rows)
    return {"count": len(page), "total": len(rows),
            "next_cursor": _encode_cursor(_offer_key(page[-1])) if more else None,
            "offers": page}


def _offer_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """An offer's place in /offers' order: cheapest USD per GPU-hour first, unpriced last."""
    price = row["price_per_gpu_usd"]
    return (price is None, price or 0.0, row["source"], row["region"], row["instance_type"],
            row["id"])


def _encode_cursor(key: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(key)).decode().rstrip("=")


def _cursor(text: str | None) -> tuple[Any, ...] | None:
    """The place after which a page continues (the `next_cursor` of the page before): a key,
    so offers repriced between two reads are neither skipped twice nor lost silently."""
    if text is None:
        return None
    try:
        key = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not (isinstance(key, list) and len(key) == 6 and isinstance(key[0], bool)
                and isinstance(key[1], int | float) and all(isinstance(k, str)
                                                           for k in key[2:5])
                and isinstance(key[5], int)):
            raise ValueError
    except ValueError:
        raise BadRequest(f"cursor {text[:40]!r} is not one this API gave (next_cursor)"
                         ) from None
    return tuple(key)


def history(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage import dataset

    since, until = params.window()
    offer = params.ident("offer_id")
    if offer is not None:
        if params.one("gpu"):
            raise BadRequest("give offer_id or gpu, not both")
        spans = dataset.history(engine, offer_id=offer, since=since, until=until)
    elif params.one("gpu"):
        spans = dataset.history(engine, gpus=_gpus(engine, params), since=since, until=until,
                                pricing=params.pricing(), sources=_sources(engine, params))
    else:
        raise BadRequest("give offer_id (one offer) or gpu (every offer of a model)")
    return {"since": since, "until": until, "count": len(spans), "spans": spans}


def signals(engine: Engine, params: Params) -> dict[str, Any]:
    """One spot offer's interruption signal over time: each stored change of the band, rate
    or source its provider published (storage.queries.signal_changes); none stored is an
    empty list (unknown), as an offer id not stored is."""
    from gpuradar.storage.queries import signal_changes

    offer = params.ident("offer_id")
    if offer is None:
        raise BadRequest("give offer_id (from /offers)")
    points = signal_changes(engine, offer)
    return {"offer_id": offer, "count": len(points), "signals": points}


def index(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage.index import current_index

    figures = current_index(engine, _gpus(engine, params) or None, params.pricing())
    for fig in figures:
        fig.pop("until")
    return {"count": len(figures), "index": figures}


def index_history(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage.index import index_history as series

    since, until = params.window()
    points = series(engine, _gpus(engine, params) or None, params.pricing(), since, until)
    return {"since": since, "until": until, "count": len(points), "points": points}


def index_closes(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage.index import CADENCES
    from gpuradar.storage.index import index_closes as closes

    cadence = params.one("cadence") or "day"
    if cadence not in CADENCES:
        raise BadRequest(f"cadence must be {' or '.join(CADENCES)}, not {cadence!r}")
    since, until = params.window()
    try:
        rows = closes(engine, _gpus(engine, params) or None, params.pricing(), since, until,
                      cadence)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {"since": since, "until": until, "cadence": cadence, "count": len(rows),
            "closes": rows}


#: The history `/patterns` reads unless `days` says otherwise: the 90 days AWS back-fills.
PATTERN_DAYS = 90


def patterns(engine: Engine, params: Params) -> dict[str, Any]:
    """Volatility, weekly profile and trends per GPU, pricing and region
    (gpuradar.core.patterns; docs/patterns.md), from the stored history of the last `days`."""
    from gpuradar.core.patterns import compute_all
    from gpuradar.storage.queries import pattern_spans

    if not params.one("gpu"):
        raise BadRequest("give gpu (a family such as H100, or a model)")
    days = params.number("days", minimum=0, maximum=MAX_DAYS)
    until = SYSTEM.now()
    try:
        since = until - timedelta(days=PATTERN_DAYS if days is None else days)
    except (OverflowError, ValueError):
        raise BadRequest(f"days {shown(params.one('days') or '')} reaches before the year 1"
                         ) from None
    found = compute_all(pattern_spans(engine, _gpus(engine, params), since, until,
                                      params.pricing(), params.many("region")), until)
    return {"since": since, "until": until, "count": len(found),
            "patterns": [p.as_dict() for p in found]}


def sources(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage import queries

    rows = queries.sources(engine)
    return {"count": len(rows), "sources": rows}


def crawls(engine: Engine, params: Params) -> dict[str, Any]:
    from gpuradar.storage import dataset

    names = _sources(engine, params, crawled=True)
    rows = dataset.crawls(engine, names, params.integer("limit", 50, 1000) or None)
    return {"count": len(rows), "crawls": rows}


OFFER_PARAMS = ("gpu", "vendor", "kind", "pricing", "source", "region", "max_price",
                "min_gpus", "min_gpu_memory", "available", "all", "limit", "cursor")
WINDOW = ("since", "until", "days")
ROUTES: dict[str, tuple[Callable[[Engine, Params], dict[str, Any]], tuple[str, ...]]] = {
    "/offers": (offers, OFFER_PARAMS),
    "/history": (history, ("offer_id", "gpu", "pricing", "source", *WINDOW)),
    "/signals": (signals, ("offer_id",)),
    "/index": (index, ("gpu", "pricing")),
    "/index/history": (index_history, ("gpu", "pricing", *WINDOW)),
    "/index/closes": (index_closes, ("gpu", "pricing", "cadence", *WINDOW)),
    "/patterns": (patterns, ("gpu", "pricing", "region", "days")),
    "/sources": (sources, ()),
    "/crawls": (crawls, ("source", "limit")),
}

#: Parameters an endpoint cannot answer without (a 400 names them).
REQUIRED: dict[str, tuple[str, ...]] = {"/patterns": ("gpu",), "/signals": ("offer_id",)}


# -- HTTP ---------------------------------------------------------------------------------
def encode(body: Any) -> bytes:
    """JSON as the API sends it: UTC times in ISO 8601, keys in their stated order."""
    return orjson.dumps(body, option=orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
                        | orjson.OPT_APPEND_NEWLINE)


def first_line(exc: BaseException) -> str:
    """An exception as one short line (a driver's message can run to many)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def etag_matches(header: str | None, tag: str) -> bool:
    if not header:
        return False
    wanted = {t.strip().removeprefix("W/") for t in header.split(",")}
    return "*" in wanted or tag in wanted


def _not_modified_since(header: str | None, changed: datetime | None) -> bool:
    """If-Modified-Since (RFC 9110 13.1.3, read only without If-None-Match): whether the
    data last changed at or before the date the client has (whole seconds, as HTTP dates
    go); an unreadable date is ignored, as the RFC says."""
    if not header or changed is None:
        return False
    try:
        since = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:
        return False
    return changed.replace(microsecond=0) <= since


def cors_headers(environ: dict[str, Any], origins: Sequence[str]) -> list[tuple[str, str]]:
    """CORS for the configured origins only (none by default): a browser page of an allowed
    origin may read the answers and their ETag and Last-Modified."""
    origin = environ.get("HTTP_ORIGIN")
    if not origin or not (origin in origins or "*" in origins):
        return []
    return [("Access-Control-Allow-Origin", "*" if "*" in origins else origin),
            ("Vary", "Origin"), ("Access-Control-Expose-Headers", "ETag, Last-Modified")]


def answer(environ: dict[str, Any], start_response: Callable, engine_fn: Callable[[], Engine],
           redact: Callable[[str], str] = str, cors: Sequence[str] = ()) -> Iterable[bytes]:
    """WSGI answer for a path under /api/v1 (`cors`: the origins allowed to read it)."""
    sharing = cors_headers(environ, cors)
    if environ.get("REQUEST_METHOD") == "OPTIONS":  # a browser's preflight (web.read_only)
        start_response("204 No Content", [*sharing, (
            "Access-Control-Allow-Methods", "GET, HEAD"), (
            "Access-Control-Allow-Headers", "If-None-Match, If-Modified-Since"), (
            "Access-Control-Max-Age", "600")] if sharing else [("Allow", "GET, HEAD")])
        return [b""]
    path = (environ.get("PATH_INFO") or "").removeprefix(PREFIX).rstrip("/") or "/"
    status = "200 OK"
    changed: datetime | None = None
    try:
        if path == "/openapi.json":
            body = encode(openapi())
        else:
            route = ROUTES.get(path)
            if route is None:
                raise NotFound(f"no endpoint {PREFIX}{path}; see {PREFIX}/openapi.json")
            handler, allowed = route
            params = Params(environ.get("QUERY_STRING") or "", allowed)
            engine = engine_fn()
            changed = last_change(engine)
            body = redact(encode(handler(engine, params)).decode()).encode()
    except BadRequest as exc:
        status, body = "400 Bad Request", encode({"error": redact(str(exc))})
    except NotFound as exc:
        status, body = "404 Not Found", encode({"error": str(exc)})
    except DATABASE_ERRORS as exc:
        status = "503 Service Unavailable"
        body = encode({"error": redact(f"the database cannot be read: {first_line(exc)}")})
    except Exception as exc:  # noqa: BLE001 - a bug: said and logged, the service goes on
        log.error("%s%s failed: %s: %s", PREFIX, path, type(exc).__name__, redact(str(exc)),
                  exc_info=exc)
        status = "500 Internal Server Error"
        body = encode({"error": f"internal error ({type(exc).__name__}); the service's log "
                                "has the details"})
    tag = etag(body)
    headers = [("Content-Type", "application/json"), ("Cache-Control", "no-cache"),
               ("ETag", tag), *sharing]
    ok = status.startswith("200")
    if ok and changed is not None:
        headers.append(("Last-Modified", format_datetime(changed, usegmt=True)))
    if ok and (etag_matches(environ.get("HTTP_IF_NONE_MATCH"), tag) if "HTTP_IF_NONE_MATCH"
               in environ else _not_modified_since(environ.get("HTTP_IF_MODIFIED_SINCE"),
                                                   changed)):
        start_response("304 Not Modified", headers[1:])
        return [b""]
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]


# -- the OpenAPI document -----------------------------------------------------------------
def _n(kind: str | list[str], **extra: Any) -> dict[str, Any]:
    """A nullable schema of `kind`."""
    kinds = [kind] if isinstance(kind, str) else kind
    return {"type": [*kinds, "null"], **extra}


TIME = {"type": "string", "format": "date-time"}
USD = {"type": "number", "description": "USD per accelerator-hour"}
NULL_TIME = _n("string", format="date-time")
PRICING = {"type": "string", "enum": list(PRICINGS)}


_VOTES = {"type": "array", "items": {"$ref": "#/components/schemas/Vote"}}
#: The fields of an index point (docs/index.md, method v2), as storage.index reads them.
INDEX_POINT: dict[str, Any] = {
    "gpu": {"type": "string"}, "pricing": PRICING, "since": TIME,
    "status": {"type": "string", "enum": ["market", "thin", "none"]},
    "median": _n("number"), "p10": _n("number"), "p90": _n("number"),
    "offers": {"type": "integer", "minimum": 0}, "providers": {"type": "integer"},
    "excluded": _VOTES, "panel": _VOTES, "method": {"type": "integer"},
    "params": {"type": "object"}, "digest": _n("string"), "published": NULL_TIME,
    "corrects": NULL_TIME}


_KINDS: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"}, "float": {"type": "number"}, "str": {"type": "string"},
    "bool": {"type": "boolean"}, "time": TIME, "json": {"type": "object"},
    "count": {"type": "number", "description": "an integer when whole"}}


def _field(f: Field) -> dict[str, Any]:
    """The JSON schema of one declared field (storage.dataset.Field)."""
    schema = dict(_KINDS[f.kind])
    if f.nullable:
        schema["type"] = [schema["type"], "null"]
    if f.description:
        schema["description"] = f.description
    if f.choices:
        schema["enum"] = [*f.choices, *([None] if f.nullable else [])]
    return schema


def _obj(props: dict[str, Any], description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "required": list(props),
                           "additionalProperties": False}
    if description:
        out["description"] = description
    return out


def _page(key: str, item: str, **extra: Any) -> dict[str, Any]:
    return _obj({**extra, "count": {"type": "integer", "minimum": 0},
                 key: {"type": "array", "items": {"$ref": f"#/components/schemas/{item}"}}})


SCHEMAS: dict[str, Any] = {
    "Offer": _obj({f.name: _field(f) for f in OFFER_SCHEMA},
                  "An offer as it stands (storage.dataset.OFFER_SCHEMA, as `prices --json` and "
                  "the export's offers)."),
    "Span": _obj({
        "offer_id": {"type": "integer"}, "source": {"type": "string"},
        "region": {"type": "string"}, "zone": {"type": "string"},
        "instance_type": {"type": "string"}, "pricing": PRICING, "gpu": {"type": "string"},
        "gpu_count": {"type": "number"}, "price": {"type": "number"},
        "currency": {"type": "string"}, "price_usd": _n("number"),
        "price_per_gpu_usd": _n("number"), "available": _n("boolean"),
        "valid_from": TIME, "valid_to": NULL_TIME,
        "seen_until": {**TIME, "description": "an open span: the source's last success"},
        "open": {"type": "boolean"}}, "One price and availability of one offer over time."),
    "SignalPoint": _obj({
        "offer_id": {"type": "integer"}, "valid_from": TIME,
        "valid_to": {**NULL_TIME, "description": "null: the last value stored (a signal "
                     "read as unknown since is not a change)"},
        "band": {"type": "string", "description": "as the provider published it"},
        "rate": _n("number", description="a published average rate, in percent"),
        "period": _n("string", description="the window the provider states"),
        "source": {"type": "string"},
        "as_of": _n("string", description="the day the provider's data described when this "
                    "value was first read (ISO date)"),
        "text": {"type": "string"},
        "monthly_low": _n("number"), "monthly_high": _n("number"),
        "risk": {"type": "string", "enum": ["low", "medium", "high", "unknown"]}},
        "One value of a spot offer's interruption signal, from `valid_from` until the next "
        "(gpuradar.core.spot; docs/sources.md)."),
    "Vote": _obj({
        "source": _n("string"), "offer_id": {"type": "integer"}, "price": _n("number"),
        "offers": _n("integer"), "observed": _n("integer"), "ref": _n("number"),
        "reason": {"type": "string", "enum": ["", "outlier", "unconfirmed jump"]}},
        "One provider's vote: its lowest offer (USD per GPU-hour), how many of its offers "
        "were candidates, when its data was observed (epoch seconds), its last accepted "
        "vote before (ref) and why the screens left it out ('' when kept). A method 1 "
        "point names only its excluded offers' ids."),
    "IndexFigure": _obj({**INDEX_POINT, "since": TIME, "median": USD, "p10": USD, "p90": USD,
                         "status": {"type": "string", "enum": ["market", "thin"]}},
                        "The market index of a model and pricing as it stands (docs/index.md)."
                        " status thin: fewer providers than the minimum panel."),
    "IndexPoint": _obj({**INDEX_POINT, "until": NULL_TIME},
                       "One point of the index: these figures from `since` until `until` "
                       "(null: still in force). status none: no index over that time."),
    "Source": _obj({
        "source": {"type": "string"}, "status": {"type": "string"},
        "last_crawl": NULL_TIME, "last_success": NULL_TIME,
        "failures": {"type": "integer"}, "offers": {"type": "integer"},
        "error": {"type": "string"},
        # the time the source's data describes: a replayed recording's capture time
        "observed_at": NULL_TIME, "replayed": {"type": "boolean"},
        "captured": _n("string")}),
    "Crawl": _obj({
        "id": {"type": "integer"}, "source": {"type": "string"}, "started_at": TIME,
        "finished_at": NULL_TIME,
        # refused: a replay older than the stored data, nothing stored (not a failure)
        "status": {"type": "string",
                   "enum": ["running", "ok", "partial", "failed", "refused"]},
        "items": {"type": "integer"}, "new_offers": {"type": "integer"},
        "changed": {"type": "integer"}, "closed": {"type": "integer"},
        "held": {"type": "integer"},
        "dropped": {"type": "object", "additionalProperties": {"type": "integer"}},
        "unknown_gpus": {"type": "array", "items": {"type": "string"}},
        "uncatalogued": {"type": "object", "additionalProperties": {"type": "integer"}},
        "duration_s": _n("number"), "error": {"type": "string"}}),
    "Error": _obj({"error": {"type": "string"}}),
    "Offers": _page("offers", "Offer", total={"type": "integer", "minimum": 0,
                                              "description": "offers matching, all pages"},
                    next_cursor={**_n("string"), "description": "the next page's `cursor` "
                                 "(null: this is the last page)"}),
    "History": _page("spans", "Span", since=TIME, until=TIME),
    "Signals": _page("signals", "SignalPoint", offer_id={"type": "integer"}),
    "Index": _page("index", "IndexFigure"),
    "IndexHistory": _page("points", "IndexPoint", since=TIME, until=TIME),
    "IndexClose": _obj({
        "gpu": {"type": "string"}, "pricing": PRICING, "at": TIME,
        "status": {"type": "string", "enum": ["market", "thin", "gap"]},
        "median": _n("number"), "p10": _n("number"), "p90": _n("number"),
        "providers": {"type": "integer", "minimum": 0}, "point": NULL_TIME,
        "digest": _n("string")},
        "The index at one close (each hour, or each UTC midnight: the day before's close): "
        "the point in force just before `at` (`point`: its time), or a gap."),
    "IndexCloses": _page("closes", "IndexClose", since=TIME, until=TIME,
                         cadence={"type": "string", "enum": ["hour", "day"]}),
    "Sources": _page("sources", "Source"),
    "Crawls": _page("crawls", "Crawl"),
    "Pattern": _obj({
        "gpu": {"type": "string"}, "pricing": PRICING, "region": {"type": "string"},
        "hourly_samples": {"type": "integer", "minimum": 0,
                           "description": "whole UTC hours with a price"},
        "first": NULL_TIME, "last": NULL_TIME,
        "volatility": _n("number", description="sample standard deviation of the daily log "
                         "changes of the price at 00:00 UTC"),
        "volatility_daily_changes": {"type": "integer", "minimum": 0},
        "weeks": {"type": "integer", "minimum": 0,
                  "description": "the fewest samples any hour of the week rests on"},
        "cheapest_hours": {"type": "array", "items": _obj({
            "hour_of_week": {"type": "integer", "minimum": 0, "maximum": 167},
            "label": {"type": "string"}, "mean_usd_per_gpu_hour": USD})},
        "weekly_profile": {"type": "array", "items": _obj({
            "hour_of_week": {"type": "integer", "minimum": 0, "maximum": 167},
            "label": {"type": "string"}, "mean_usd_per_gpu_hour": _n("number"),
            "weeks": {"type": "integer", "minimum": 0}}),
            "description": "168 hours (Monday 00:00 UTC is 0), or empty: not enough history"},
        "trend_7d": _n("number", description="relative change over 7 days"),
        "trend_30d": _n("number", description="relative change over 30 days"),
        "not_enough_history": {"type": "array", "items": {"type": "string"},
                               "description": "each figure the history cannot support, "
                                              "with its threshold"}},
        "The patterns of one GPU, pricing and region (docs/patterns.md)."),
    "Patterns": _page("patterns", "Pattern", since=TIME, until=TIME),
}


def _param(name: str, description: str, schema: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema or {"type": "string"}, **extra}


# What every value must be (Params): at most MAX_VALUE_CHARS characters, no control
# character, not empty nor blank (a client that means no filter leaves it out).
_TEXT = f"[^{_CONTROL_CHARS}]"
_WORD = {"type": "string", "minLength": 1, "maxLength": MAX_VALUE_CHARS,
         "pattern": f"^{_TEXT}*[^\\s{_CONTROL_CHARS}]{_TEXT}*$"}
# one item of a list (no comma: a comma separates items)
_ITEM = {**_WORD, "pattern": f"^[^,{_CONTROL_CHARS}]*[^,\\s{_CONTROL_CHARS}][^,{_CONTROL_CHARS}]*$"}
_WHEN = {"anyOf": [{"type": "string", "format": "date-time"},
                   {"type": "string", "format": "date"},
                   {"type": "string",
                    "pattern": "^(now|yesterday|([1-9][0-9]{0,2}[mhd]|[1-9][0-9]?w)( ago)?)$"}]}
MAX_DAYS = 36_600  # a window of 100 years: older than anything stored


def _list(name: str, description: str, items: dict[str, Any]) -> dict[str, Any]:
    return _param(name, description + " Repeat or comma-separate.",
                  {"type": "array", "items": items, "maxItems": MAX_ITEMS}, explode=True)


def _parameters() -> dict[str, dict[str, Any]]:
    """Every query parameter as the document states it: the names the server reads (the
    catalog's, the sources'), the bounds of Params. Rules over two parameters are in the
    operation's description: OpenAPI cannot state them."""
    from gpuradar.core import gpus as catalog
    from gpuradar.core.sources import providers

    gpu_names = sorted({*catalog.families(), *catalog.CATALOG, *catalog.KINDS})
    return {
        "gpu": _param("gpu", "Accelerator family (H100), exact model (H100-SXM-80GB) or kind "
                      "(TPU), in any case; also a family with its memory (A100-80GB) or a "
                      "raw name a source reported. Any other name is a 400.",
                      {"type": "string", "enum": gpu_names}),
        "vendor": _list("vendor", "Only this vendor.", {"type": "string",
                                                         "enum": list(catalog.VENDORS)}),
        "kind": _list("kind", "Only this kind.", {"type": "string", "enum": list(catalog.KINDS)}),
        "pricing": _param("pricing", f"{PRICING_CHOICES}; none given: every kind.",
                          {"type": "string", "enum": sorted(WORDS)}),
        "source": _list("source", "Only these sources: a source of gpuradar, or one since "
                        "removed whose data is stored; any other name is a 400.",
                        {"type": "string", "enum": list(providers())}),
        "region": _list("region", "Region globs ('us-*', 'mainland').", _ITEM),
        "max_price": _param("max_price", "Max USD per GPU-hour.",
                            {"type": "number", "minimum": 0}),
        "min_gpus": _param("min_gpus", "Min GPUs per offer.", {"type": "number", "minimum": 0}),
        "min_gpu_memory": _param("min_gpu_memory", "Min GB per GPU.",
                                 {"type": "number", "minimum": 0}),
        "available": _param("available", "Hide offers known to be unavailable (given "
                            "without a value: true).", {"type": "boolean"},
                            allowEmptyValue=True),
        "all": _param("all", "Include offers no longer listed (given without a value: "
                      "true).", {"type": "boolean"}, allowEmptyValue=True),
        "limit": _param("limit", "Rows to return (0, or more than the maximum: the maximum).",
                        {"type": "integer", "minimum": 0}),
        "cursor": _param("cursor", "Continue after the page that gave this `next_cursor` "
                         "(only such a value: any other is a 400).", _WORD),
        "offer_id": _param("offer_id", "One offer's id (from /offers).",
                           {"type": "integer", "minimum": 0, "maximum": MAX_ID}),
        "since": _param("since", "Start: ISO 8601, '2d' (ago) or 'yesterday'; at most "
                        "`until`.", _WHEN),
        "until": _param("until", "End (default now).", _WHEN),
        "days": _param("days", "Days before `until` (default 7) when `since` is not given; "
                       "the window may not reach before the year 1.",
                       {"type": "number", "minimum": 0, "maximum": MAX_DAYS}),
        "cadence": _param("cadence", "hour: each hour's close; day (default): each UTC "
                          "day's.", {"type": "string", "enum": ["hour", "day"]}),
    }


def _operation(summary: str, schema: str, params: Iterable[str],
               table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    error = {"content": {"application/json": {"schema": {
        "$ref": "#/components/schemas/Error"}}}}
    return {"get": {
        "summary": summary, "parameters": [table[p] for p in params],
        "responses": {
            "200": {"description": "OK; ETag is the SHA-256 of the body, Last-Modified when "
                                   "the stored data last changed",
                    "headers": {"ETag": {"schema": {"type": "string"}},
                                "Last-Modified": {"schema": {"type": "string"}}},
                    "content": {"application/json": {"schema": ref}}},
            "304": {"description": "Not modified (If-None-Match named the current ETag, or, "
                                   "without it, If-Modified-Since is not before "
                                   "Last-Modified)"},
            "400": {"description": "A parameter cannot be read", **error},
            "414": {"description": f"The request line is longer than {MAX_REQUEST_LINE:,} "
                                   "bytes (refused by the HTTP server)", **error},
            "500": {"description": "An internal error (logged by the service)", **error},
            "503": {"description": "The database cannot be read", **error}}}}


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API."""
    from gpuradar import __version__

    summaries = {
        "/offers": ("Offers as they stand, cheapest USD per GPU-hour first.", "Offers"),
        "/history": ("Price spans of one offer (offer_id) or of every offer of a model (gpu): "
                     "give exactly one of the two, and `since` or `days`, not both.",
                     "History"),
        "/signals": ("One spot offer's interruption signal over time: a point for each "
                     "change of the band, rate or source its provider published; an unknown "
                     "signal is never a point (empty: none stored).", "Signals"),
        "/index": ("The market index of each model and pricing: one vote per provider, the "
                   "panel and the votes its screens excluded (docs/index.md).", "Index"),
        "/index/history": ("The market index's change points; give `since` or `days`, not "
                           "both.", "IndexHistory"),
        "/index/closes": ("The market index at a fixed cadence (hourly or daily closes), "
                          "gaps as gaps; give `since` or `days`, not both; at most 9,000 "
                          "closes (a year of hours).", "IndexCloses"),
        "/patterns": ("Volatility, weekly profile (the cheapest hours of the week) and "
                      "7- and 30-day trends per GPU, pricing and region, from the stored "
                      "history of the last `days` (default 90); `gpu` is required "
                      "(docs/patterns.md).", "Patterns"),
        "/sources": ("Each crawled source: latest crawl, last success, failures.", "Sources"),
        "/crawls": ("Crawl records, newest first.", "Crawls"),
    }
    table = _parameters()
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpuradar", "version": __version__,
                 "description": "Read-only GPU cloud prices, history and market index. Every "
                 f"request is bounded: a request line of at most {MAX_REQUEST_LINE:,} bytes "
                 f"(414 beyond), at most {MAX_FIELDS} parameters, {MAX_ITEMS} values of a "
                 f"list and {MAX_VALUE_CHARS} characters a value (400 beyond); an unknown, "
                 "repeated single, empty or "
                 "control-character parameter is a 400 (docs/limits.md)."},
        "servers": [{"url": PREFIX}],
        "paths": {path: _operation(summaries[path][0], summaries[path][1], allowed,
                                   {**table, **{p: {**table[p], "required": True}
                                                for p in REQUIRED.get(path, ())}})
                  for path, (_, allowed) in ROUTES.items()},
        "components": {"schemas": SCHEMAS},
    }
