"""The value types of the configuration's schema: durations, numbers within a range, URLs,
texts; each refuses a wrong value with one clear message (gpuradar.core.config.errors words
it for the file)."""

from __future__ import annotations

import functools
import math
import operator
import types
import typing
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from gpuradar.core import units
from gpuradar.core.config.errors import shown


def seconds_of(value: Any) -> float | None:
    """Durations: 300 (seconds), "90s", "5m", "1h30m", "2 days" -> seconds."""
    if value is None:
        return None
    return units.parse_duration(value).total_seconds()


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise ValueError("must be more than 0 seconds")
    return value


#: The longest pause between two requests to one host (DOWNLOAD_DELAY, request_interval).
MAX_REQUEST_INTERVAL = 300.0


def _at_most_delay(value: float | None) -> float | None:
    if value is not None and value > MAX_REQUEST_INTERVAL:
        raise ValueError(f"must be at most {MAX_REQUEST_INTERVAL:g} seconds (5 minutes), got "
                         f"{value:g}")
    return value


def _never_or_seconds(value: Any) -> Any:
    if value in (None, False, "never"):
        return value
    seconds_of(value)
    return value


def _count_or_duration(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError("must be at least 1 evaluation, or a duration such as 10m")
        return value
    seconds_of(value)
    return value


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value


def _positive_number(value: float) -> float:
    if value <= 0:
        raise ValueError("must be more than 0")
    return value


def one_of(words: str, *accepted: type) -> AfterValidator:
    """The check of a value of one of several types (no bool unless named), for
    `Annotated[Any, one_of("text or a list", str, list)]`: one clear error instead of one per
    member of a union."""
    def check(value: Any) -> Any:
        if isinstance(value, accepted) and (bool in accepted or not isinstance(value, bool)):
            return value
        raise PydanticCustomError("type_words", "must be {words}", {"words": words})

    return AfterValidator(check)


TextOrNumber = Annotated[Any, one_of("text or a number", str, int, float)]


def _flat_texts(value: Any) -> Any:
    if isinstance(value, str) or (isinstance(value, list)
                                  and all(isinstance(v, str) for v in value)):
        return value
    raise PydanticCustomError("type_words", "must be {words}",
                              {"words": "text or a flat list of texts"})


TextOrTexts = Annotated[Any, AfterValidator(_flat_texts)]


Seconds = Annotated[float, BeforeValidator(seconds_of)]
OptionalSeconds = Annotated[float | None, BeforeValidator(seconds_of)]
PositiveSeconds = Annotated[float, BeforeValidator(seconds_of), AfterValidator(_positive)]
OptionalPositiveSeconds = Annotated[float | None, BeforeValidator(seconds_of),
                                    AfterValidator(_positive)]
PositiveNumber = Annotated[float, AfterValidator(_positive_number)]


class Section(BaseModel):
    """A mapping of the file: unknown keys are errors, types are strict (`"no"` is not a
    boolean, `"5"` is not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    def written(self) -> dict[str, Any]:
        """The keys the file (or the caller) set, by their names in the file, as checked."""
        return self.model_dump(exclude_unset=True, by_alias=True)


class Settings(Section):
    """A section of settings that default elsewhere (Scrapy's): one left out is None, so
    each is typed `X | None`; one written needs a value of its type, so `null` is refused
    with the error that type gives (`must be a number, got null`)."""

    @field_validator("*", mode="before")
    @classmethod
    def _written_means_a_value(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.field_name is not None:
            _refuse_null(cls, info.field_name)
        return value


def _refuse_null(model: type[BaseModel], name: str) -> None:
    """Raise the error that field `name`'s type, without its None, gives for None."""
    annotation = model.model_fields[name].annotation
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return  # a type without None: pydantic refuses None itself
    arms: list[Any] = [a for a in typing.get_args(annotation) if a is not type(None)]
    try:
        TypeAdapter(functools.reduce(operator.or_, arms)).validate_python(None, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PydanticCustomError(first["type"], first["msg"], first.get("ctx")) from None


def _price_range(value: list[float] | None) -> list[float] | None:
    """[low, high] in USD per GPU-hour: two finite numbers, 0 < low < high. The one check of
    `sources.<name>.price_range` and the GPURADAR_PRICE_RANGE Scrapy setting."""
    if value is None:
        return value
    if len(value) != 2 or not all(math.isfinite(v) for v in value) or \
            not 0 < value[0] < value[1]:
        raise ValueError("must be [low, high] in USD per GPU-hour with 0 < low < high, got "
                         f"{shown((), value)}")
    return value


PriceRange = Annotated[list[float], AfterValidator(_price_range)]


def between(low: float, high: float, *, above: bool = False) -> Any:
    """The bounds of a number, for `Annotated[float, between(0, 300)]`: in [low, high]
    ((low, high] when `above`); `int` for a whole number."""
    return Field(gt=low, le=high) if above else Field(ge=low, le=high)


def _one_line_text(value: str) -> str:
    if not value.strip() or "\n" in value or "\r" in value or len(value) > 500:
        raise ValueError("must be one line of text (at most 500 characters)")
    return value


# The named value types the sections use.
RequestInterval = Annotated[OptionalSeconds, AfterValidator(_at_most_delay)]
NeverOrDuration = Annotated[Any, AfterValidator(_never_or_seconds)]
CountOrDuration = Annotated[Any, AfterValidator(_count_or_duration)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
OneLineText = Annotated[str, AfterValidator(_one_line_text)]
