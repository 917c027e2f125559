"""The Python API: a small, typed, read-only view of a gpuradar store.

    >>> import gpuradar
    >>> store = gpuradar.open("sqlite:///gpuradar.db")      # doctest: +SKIP
    >>> [f.median for f in store.index(gpu="H100", pricing="spot")]  # doctest: +SKIP

`gpuradar.open(url)` gives a `Store`; its methods answer with frozen dataclasses (`Offer`,
`Span`, `SignalPoint`, `IndexFigure`, `IndexPoint`, `Source`, `Crawl`) holding the same
fields as the JSON API (/api/v1/openapi.json) and exports. Nothing is written: the store
must already be at the schema this gpuradar knows (`gpuradar db upgrade`), so it is safe on
a standby replica.
docs/python-api.md has examples the test suite runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine

from gpuradar.core.clock import SYSTEM
from gpuradar.core.pricing import parse_pricing
from gpuradar.core.text import excerpt

__all__ = ["Crawl", "IndexFigure", "IndexPoint", "Offer", "Records", "SignalPoint", "Source",
           "Span", "Store", "open"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Offer:
    """An offer as it stands: price per hour of the whole offer in `currency`, and in USD
    per accelerator-hour (`price_per_gpu_usd`); `available` None means unknown. Its fields
    are storage.dataset.OFFER_SCHEMA's, in its order (a test holds them equal); counts
    (`gpu_count`, `vcpus`) are ints when whole."""

    id: int
    source: str
    region: str
    zone: str
    instance_type: str
    pricing: str
    gpu: str
    gpu_count: float
    gpu_memory_gb: float | None
    vcpus: float | None
    memory_gb: float | None
    price: float
    currency: str
    price_usd: float | None
    price_per_gpu_usd: float | None
    available: bool | None
    available_count: int | None
    active: bool
    first_seen: datetime
    changed_at: datetime
    observed_at: datetime
    replayed: bool
    captured: str | None
    unreadable_since: datetime | None
    url: str
    attributes: dict[str, Any]
    #: A spot offer's interruption signal (None for an offer that is not spot): the text
    #: every table shows, its kind ("interruption rate", "host reliability": a score, not a
    #: rate, "unknown"), source, date, and the monthly share it allows (high None with a
    #: rate: no upper bound).
    interruption: str | None
    interruption_kind: str | None
    interruption_source: str | None
    interruption_as_of: str | None
    interruption_monthly_low: float | None
    interruption_monthly_high: float | None


@dataclass(frozen=True, slots=True)
class Span:
    """One price and availability of one offer from `valid_from` until `valid_to` (None:
    still in force; seen until `seen_until`)."""

    offer_id: int
    source: str
    region: str
    zone: str
    instance_type: str
    pricing: str
    gpu: str
    gpu_count: float
    price: float
    currency: str
    price_usd: float | None
    price_per_gpu_usd: float | None
    available: bool | None
    valid_from: datetime
    valid_to: datetime | None
    seen_until: datetime
    open: bool


@dataclass(frozen=True, slots=True)
class SignalPoint:
    """One value of a spot offer's interruption signal from `valid_from` until the next
    (`valid_to` None: the last value stored). `band` as published, `rate` a published
    average in percent, `monthly_low`/`monthly_high` the band as a monthly share where its
    provider states the period (gpuradar.core.spot); an unknown signal is never a point."""

    offer_id: int
    valid_from: datetime
    valid_to: datetime | None
    band: str
    rate: float | None
    period: str | None
    source: str
    as_of: str | None
    text: str
    monthly_low: float | None
    monthly_high: float | None
    risk: str


@dataclass(frozen=True, slots=True)
class IndexFigure:
    """The market index of a model and pricing as it stands (docs/index.md, method v2), in
    USD per accelerator-hour. `status` thin: fewer providers than the minimum panel; `panel`:
    every provider's vote (source, offer_id, price, offers, observed, ref, reason);
    `excluded`: the votes the screens left out; `digest`: SHA-256 of its inputs."""

    gpu: str
    pricing: str
    since: datetime
    status: str
    median: float
    p10: float
    p90: float
    offers: int
    providers: int
    excluded: tuple[dict[str, Any], ...]
    panel: tuple[dict[str, Any], ...]
    method: int
    params: dict[str, Any]
    digest: str | None
    published: datetime | None
    corrects: datetime | None


@dataclass(frozen=True, slots=True)
class IndexPoint:
    """One point of the index: these figures from `since` until `until` (None: still in
    force). `status` none (figures None): no index over that time; the other fields as in
    IndexFigure."""

    gpu: str
    pricing: str
    since: datetime
    until: datetime | None
    status: str
    median: float | None
    p10: float | None
    p90: float | None
    offers: int
    providers: int
    excluded: tuple[dict[str, Any], ...]
    panel: tuple[dict[str, Any], ...]
    method: int
    params: dict[str, Any]
    digest: str | None
    published: datetime | None
    corrects: datetime | None


@dataclass(frozen=True, slots=True)
class Source:
    source: str
    status: str
    last_crawl: datetime | None
    last_success: datetime | None
    failures: int
    offers: int
    error: str


@dataclass(frozen=True, slots=True)
class Crawl:
    id: int
    source: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    items: int
    new_offers: int
    changed: int
    closed: int
    held: int
    dropped: dict[str, int]
    unknown_gpus: list[str]
    uncatalogued: dict[str, int]
    duration_s: float | None
    error: str


class Records(list[T]):
    """A method's answer: a list of records, and `to_pandas()` for a notebook."""

    def __init__(self, items: Sequence[T] = (), columns: Sequence[str] = ()) -> None:
        super().__init__(items)
        self.columns = tuple(columns)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per record and one column per field (also when
        empty); times stay timezone-aware UTC. Needs pandas: pip install 'gpuradar[pandas]'."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_pandas() needs pandas: pip install 'gpuradar[pandas]'"
                              ) from None
        rows = [r if isinstance(r, dict) else {c: getattr(r, c) for c in self.columns}
                for r in self]
        return pd.DataFrame(rows, columns=list(self.columns))


def _records(cls: type[T], rows: Sequence[dict[str, Any]]) -> Records[T]:
    return Records([_make(cls, r) for r in rows], [f.name for f in fields(cls)])  # type: ignore[arg-type]


def _make(cls: type[T], row: dict[str, Any]) -> T:
    values = {f.name: row[f.name] for f in fields(cls)}  # type: ignore[arg-type]
    for name in ("excluded", "panel"):
        if name in values:
            values[name] = tuple(values[name])
    return cls(**values)


def _text(name: str, value: object) -> str:
    """`value` when it is text; TypeError naming the argument otherwise (a list, a number or
    bytes would fail later with a message that names nothing)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _pricing(value: str | None) -> str | None:
    if value is None:
        return None
    return parse_pricing(_text("pricing", value))


def _list(name: str, value: str | Sequence[str] | None) -> list[str]:
    """Names to filter on; ValueError for one that is empty or holds a control character
    (it names nothing stored, and PostgreSQL refuses NUL in text)."""
    if value is None:
        return []
    if not isinstance(value, str | list | tuple):  # a mapping, a set, bytes, a number
        raise TypeError(f"{name} must be a str or a list of str, not "
                        f"{type(value).__name__}")
    names = [value] if isinstance(value, str) else list(value)
    for item in names:
        _text(name, item)
        if not item.strip() or not item.isprintable():
            raise ValueError(f"{name} must be names, not {excerpt(item)}")
    return names


MAX_ID = 2**31 - 1  # ids are 32-bit integers in PostgreSQL


def _count(name: str, value: int | None, maximum: int | None = None) -> int | None:
    """A whole number of at least 0 (and at most `maximum`), or None; ValueError naming
    the argument otherwise (a negative limit would silently drop the last rows)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 \
            or (maximum is not None and value > maximum):
        upper = f" to {maximum}" if maximum is not None else " or more"
        raise ValueError(f"{name} must be a whole number from 0{upper}, not {excerpt(value)}")
    return value


def _amount(name: str, value: float | None) -> float | None:
    """A finite number of at least 0, or None (NaN would match nothing, silently)."""
    if value is None:
        return None
    try:  # float(): an int of 400 digits is past any float (OverflowError)
        number = float(value) if isinstance(value, int | float) \
            and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number of at least 0, not "
                         f"{excerpt(value)}")
    return number


def _window(since: datetime | None, until: datetime | None, days: float
            ) -> tuple[datetime, datetime]:
    """[since, until], defaulting to the last `days` days; ValueError or TypeError naming
    the argument that cannot make one. A naive datetime is read as UTC."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and not isinstance(value, datetime):
            raise TypeError(f"{name} must be a datetime, not {type(value).__name__}")
    # naive means UTC, as everywhere in gpuradar (a time typed without an offset)
    since = since.replace(tzinfo=UTC) if since and since.tzinfo is None else since
    until = until.replace(tzinfo=UTC) if until and until.tzinfo is None else until
    until = until or SYSTEM.now()
    if since is None:
        days = _amount("days", days) or 0.0
        try:
            since = until - timedelta(days=days)
        except OverflowError:
            raise ValueError(f"days {days!r} reaches before the year 1") from None
    if since > until:  # an empty answer would look like no data
        raise ValueError(f"since ({since.isoformat()}) is after until ({until.isoformat()})")
    return since, until


class Store:
    """A read-only view of one gpuradar database. Use `gpuradar.open(url)`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    def _gpus(self, gpu: str | None) -> list[str]:
        from gpuradar.storage.dataset import resolve_gpus

        if gpu is not None:  # '' would mean every GPU, as no filter: say so instead
            _list("gpu", _text("gpu", gpu))
        return resolve_gpus(self.engine, gpu)

    def offers(self, gpu: str | None = None, *, pricing: str | None = None,
               source: str | Sequence[str] | None = None,
               region: str | Sequence[str] | None = None, max_price: float | None = None,
               min_gpus: float | None = None, min_gpu_memory: float | None = None,
               available: bool = False, include_inactive: bool = False,
               limit: int | None = None) -> Records[Offer]:
        """Offers as they stand, cheapest USD per GPU-hour first; the filters of
        `gpuradar prices` (`gpu`: family, model or kind; `region`: globs or 'mainland';
        `available`: leave out offers known to be unavailable)."""
        from gpuradar.storage import dataset
        from gpuradar.storage.queries import OfferFilter

        flt = OfferFilter(gpus=self._gpus(gpu), pricing=_pricing(pricing),
                          sources=_list("source", source), regions=_list("region", region),
                          max_price=_amount("max_price", max_price),
                          min_gpus=_amount("min_gpus", min_gpus),
                          min_gpu_memory=_amount("min_gpu_memory", min_gpu_memory),
                          available_only=available, include_inactive=include_inactive)
        return _records(Offer, dataset.offers(self.engine, flt,
                                              _count("limit", limit, MAX_ID)))

    def history(self, offer_id: int | None = None, *, gpu: str | None = None,
                pricing: str | None = None, source: str | Sequence[str] | None = None,
                since: datetime | None = None, until: datetime | None = None,
                days: float = 7.0) -> Records[Span]:
        """Price spans of one offer, or of every offer of `gpu`, overlapping [since, until]
        (default: the last `days` days)."""
        from gpuradar.storage import dataset

        since, until = _window(since, until, days)
        if (offer_id is None) == (gpu is None):
            raise ValueError("give offer_id (one offer) or gpu (every offer of a model)")
        if offer_id is not None:
            _count("offer_id", offer_id, MAX_ID)
            rows = dataset.history(self.engine, offer_id=offer_id, since=since, until=until)
        else:
            rows = dataset.history(self.engine, gpus=self._gpus(gpu), since=since,
                                   until=until, pricing=_pricing(pricing),
                                   sources=_list("source", source))
        return _records(Span, rows)

    def signals(self, offer_id: int) -> Records[SignalPoint]:
        """One spot offer's interruption signal over time, oldest first: a point for each
        change of the band, rate or source its provider published (none stored: empty)."""
        from gpuradar.storage.queries import signal_changes

        if _count("offer_id", offer_id, MAX_ID) is None:
            raise ValueError("give offer_id (from offers())")
        return _records(SignalPoint, signal_changes(self.engine, offer_id))

    def index(self, gpu: str | None = None, pricing: str | None = None) -> Records[IndexFigure]:
        """The market index of each model (of `gpu`'s family) and pricing, as it stands."""
        from gpuradar.storage.index import current_index

        rows = current_index(self.engine, self._gpus(gpu) or None, _pricing(pricing))
        return _records(IndexFigure, rows)

    def index_history(self, gpu: str | None = None, pricing: str | None = None,
                      since: datetime | None = None, until: datetime | None = None,
                      days: float = 30.0) -> Records[IndexPoint]:
        """The index's change points overlapping [since, until] (default: the last `days`
        days), by model, pricing and time."""
        from gpuradar.storage.index import index_history

        since, until = _window(since, until, days)
        rows = index_history(self.engine, self._gpus(gpu) or None, _pricing(pricing), since,
                             until)
        return _records(IndexPoint, rows)

    def index_closes(self, gpu: str | None = None, pricing: str | None = None,
                     cadence: str = "day", since: datetime | None = None,
                     until: datetime | None = None, days: float = 30.0
                     ) -> Records[dict[str, Any]]:
        """The index at a fixed cadence (`cadence` hour or day: each hour's or each UTC
        day's close) over [since, until] (default: the last `days` days): per model and
        pricing and close, the point in force just before it, or a gap (status `gap`)."""
        from gpuradar.storage.index import CADENCES, CLOSE_FIELDS, index_closes

        if cadence not in CADENCES:
            raise ValueError(f"cadence must be {' or '.join(CADENCES)}, not {cadence!r}")
        since, until = _window(since, until, days)
        return Records(index_closes(self.engine, self._gpus(gpu) or None, _pricing(pricing),
                                    since, until, cadence), CLOSE_FIELDS)

    def sources(self) -> Records[Source]:
        """Each crawled source: its latest crawl, last success and failures since."""
        from gpuradar.storage import queries

        return _records(Source, queries.sources(self.engine))

    def crawls(self, source: str | None = None, limit: int | None = 50) -> Records[Crawl]:
        """Crawl records, newest first."""
        from gpuradar.storage import dataset

        if source is not None:
            _list("source", _text("source", source))
        return _records(Crawl, dataset.crawls(self.engine, source,
                                              _count("limit", limit, MAX_ID)))


def open(url: str | None = None) -> Store:  # noqa: A001 - gpuradar.open, like a file
    """A read-only view of the gpuradar database at `url` (SQLAlchemy URL; default: the
    configured reader's, `read_database_url` / GPURADAR_READ_DATABASE_URL, else the
    database's, as for the command line). Raises gpuradar.storage.db.DatabaseError
    when it cannot be used (a missing SQLite file is not created) or its schema is not the
    one this gpuradar reads; the Store's methods raise ValueError for a bad argument."""
    from gpuradar.storage.dataset import open_read_only

    if url is None:
        from gpuradar.core.config import load_config

        url = load_config(None).reader_url
    return Store(open_read_only(url))
