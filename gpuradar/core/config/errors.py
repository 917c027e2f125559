"""Where a key came from and how a problem with it is worded: one line naming the file, the
line and the key, what is wrong and, for a misspelt key, what was meant."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

from gpuradar.core.logs import SECRET_NAMES  # option names whose values are secrets

Key = tuple[str | int, ...]
#: The names of every setting Scrapy and the project's settings module define; asked only
#: for a key of `scrapy:` the file may not set (gpuradar.crawler.crawl_settings passes Scrapy's).
SettingNames = Callable[[], Collection[str]]


class ConfigError(ValueError):
    """A configuration that cannot be used; each problem names the file, line and key.

    str() is the first problem (one line) and how many more there are; `problems` has all."""

    def __init__(self, problems: str | list[str], more: int = 0) -> None:
        """`more`: problems found beyond those listed (a hostile file can have thousands)."""
        listed = [problems] if isinstance(problems, str) else list(problems)
        self.count = len(listed) + more
        self.problems = listed + ([f"... and {more:,} more like these"] if more else [])
        text = self.problems[0] if self.problems else "invalid configuration"
        if self.count > 1:
            text += (f" (and {self.count - 1:,} more problem"
                     f"{'s' if self.count > 2 else ''}: `gpuradar config check` "
                     "lists them)")
        super().__init__(text)


def dotted(keys: Key) -> str:
    """('sources', 'azure', 'enabled') -> 'sources.azure.enabled'; list items as [n]."""
    out = ""
    for k in keys:
        out += f"[{k + 1}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


@dataclass
class Marks:
    """Where each key of the configuration came from: a line of the file, an environment
    variable, or the command line."""

    path: Path | None = None
    lines: dict[Key, int] = field(default_factory=dict)
    origins: dict[Key, str] = field(default_factory=dict)
    #: the values `${VAR}` put into each key: never quoted back, and secrets where the key
    #: holds one (a target URL, a password; gpuradar.core.logs.config_secrets)
    env_values: dict[Key, list[str]] = field(default_factory=dict)

    def from_env(self, keys: Key) -> bool:
        """Whether the value at `keys` (or within it) came through `${VAR}`."""
        return any(k[:len(keys)] == keys or keys[:len(k)] == k for k in self.env_values)

    def values_under(self, keys: Key) -> list[str]:
        """The values `${VAR}` put anywhere within `keys`."""
        return [v for k, values in self.env_values.items() if k[:len(keys)] == keys
                for v in values]

    def where(self, keys: Key) -> str:
        """'/etc/gpuradar.yaml:12', 'environment variable GPURADAR_METRICS_PORT', ..."""
        for n in range(len(keys), 0, -1):
            if keys[:n] in self.origins:
                return self.origins[keys[:n]]
            if keys[:n] in self.lines and self.path is not None:
                return f"{self.path}:{self.lines[keys[:n]]}"
        return str(self.path) if self.path else "<defaults>"

    def line(self, keys: Key) -> int:
        """The line of the key (or of the nearest enclosing one); 0 when unknown."""
        for n in range(len(keys), 0, -1):
            if keys[:n] in self.lines:
                return self.lines[keys[:n]]
        return 0

    def problem(self, keys: Key, message: str) -> str:
        name = dotted(keys)
        return f"{self.where(keys)}: {name + ': ' if name else ''}{message}"


def shown(keys: Key, value: Any, marks: Marks | None = None) -> str:
    """The offending value for an error; for a secret, or a value given through `${VAR}`
    (it may be a secret under the wrong key), only its type."""
    names = [k for k in keys if isinstance(k, str)]
    if (marks is not None and marks.from_env(keys)) or names and (
            SECRET_NAMES.search(names[-1])
            or names[0] in ("targets", "database_url", "read_database_url")):
        kind = ("a number" if isinstance(value, int | float) and not isinstance(value, bool)
                else "a list" if isinstance(value, list) else "a mapping"
                if isinstance(value, dict) else "text" if isinstance(value, str)
                else shown((), value))
        return f"{kind} (value not shown)"
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# What a key of a configuration file looks like. Anything else (a line of a credentials
# file, a password hash given as --config by mistake) is not quoted back: it may be a secret.
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def key_shown(key: Any) -> str:
    """An unknown key for an error: quoted when it looks like a key name, else only its
    length (the file may not be a configuration at all, and its lines may be secrets)."""
    text = str(key)
    if _KEY_NAME.fullmatch(text):
        return repr(text)
    return f"({len(text)} characters, not shown: not a key name; is this a gpuradar " \
           "configuration file?)"


def suggest(key: Any, allowed: list[str], what: str = "key") -> str:
    """' — did you mean ...?' for a misspelt key, or the known keys when they are few."""
    text = str(key).lower()
    close = [a for a in allowed if len(text) >= 3 and a.lower().startswith(text)] or \
        difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    if close:
        return f" — did you mean {close[0]!r}?"
    if allowed and len(allowed) <= 30:
        return f"; known {what}s: {', '.join(allowed)}"
    return ""


# Settings the file has another way to say.
SCRAPY_INSTEAD = {
    "GPURADAR_DATABASE_URL": "`database_url:` or --database-url",
    "GPURADAR_SOURCES": "the `sources:` section",
    "GPURADAR_ENDPOINTS": "the `endpoints:` section",
    "GPURADAR_RECORD_DIR": "`gpuradar crawl --record DIR`",
    "GPURADAR_REPLAY_DIR": "`gpuradar crawl --replay DIR` or `gpuradar run --replay DIR`",
    "LOG_LEVEL": "-v or `gpuradar run --log-level`",
    "RANDOMIZE_DOWNLOAD_DELAY": "DOWNLOAD_DELAY_JITTER (Scrapy deprecated this one)",
}


def scrapy_setting_problem(name: str, supported: list[str],
                           scrapy_names: SettingNames | None = None) -> str:
    """Why `name` is refused in the `scrapy:` section: a Scrapy setting gpuradar does not let
    the file change, or a name Scrapy does not know. Without `scrapy_names` (a caller that
    does not load Scrapy) a name outside gpuradar's own is worded so that it is true either
    way: a close supported name is taken for a typo, any other cannot be set."""
    refused = (f"Scrapy setting {name!r} cannot be set in the config file (gpuradar relies on "
               "its own value; docs/configuration.md lists the settings that can be)")
    unknown = f"unknown Scrapy setting {name!r} in scrapy{suggest(name, supported, 'setting')}"
    if name in SCRAPY_INSTEAD:
        return (f"Scrapy setting {name!r} cannot be set in the config file; use "
                f"{SCRAPY_INSTEAD[name]}")
    if name.startswith(("PLAYWRIGHT_", "GPURADAR_")):
        return refused
    if scrapy_names is not None:
        return refused if name in scrapy_names() else unknown
    return unknown if " — did you mean" in unknown else (
        f"Scrapy setting {name!r} cannot be set in the config file (docs/configuration.md "
        "lists the settings that can be)")


# -- pydantic's errors, worded for the file ---------------------------------------------------
def _unwrap(annotation: Any) -> Any:
    """The model or container inside Optional[...] / Annotated[...]."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else args[0]
        else:
            return annotation


def _model_at(root: type[BaseModel], keys: Key) -> Any:
    """The model (or dict) type that validates the mapping at `keys`."""
    current: Any = root
    for key in keys:
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {f.alias or n: f for n, f in current.model_fields.items()}
            fields.update(current.model_fields)
            if key not in fields:
                return None
            current = _unwrap(fields[key].annotation)
        elif typing.get_origin(current) in (dict, list):
            current = _unwrap(typing.get_args(current)[-1])
        else:
            return None
    return current


def _allowed_keys(model: Any) -> list[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        known = getattr(model, "KNOWN_NAMES", None)  # `sources` built for a file's names
        if known is not None:
            return list(known)
        return [f.alias or n for n, f in model.model_fields.items()]
    return []


_TYPE_WORDS = {"bool_type": "true or false", "int_type": "a whole number",
               "float_type": "a number", "string_type": "text (quote it)",
               "list_type": "a list", "dict_type": "a mapping (key: value)",
               "model_type": "a mapping (key: value)", "model_attributes_type":
               "a mapping (key: value)"}


def _real_keys(loc: tuple, data: Any) -> Key:
    """The keys of the data in a pydantic error location, without the tags pydantic adds
    for union members and validators ('str', 'function-after[...]')."""
    keys: list[str | int] = []
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if in_dict or in_list:
            data = data[part]
            keys.append(part)
    return tuple(keys)


class _Problems:
    """The problems of one validation, grouped by key: a key whose value has the wrong type
    gets one line naming every accepted type; any other problem gets its own line."""

    def __init__(self, marks: Marks, root: type[BaseModel], base: Key,
                 scrapy_names: SettingNames | None) -> None:
        self.marks, self.root, self.base, self.scrapy_names = marks, root, base, scrapy_names
        self.found: dict[Key, list[str]] = {}
        self.type_words: dict[Key, list[str]] = {}
        self.shown: dict[Key, str] = {}

    def add(self, keys: Key, line: str) -> None:
        """One problem; a value `${VAR}` gave is masked in it (a validator may quote it)."""
        for k, values in self.marks.env_values.items():
            if k[:len(keys)] == keys or keys[:len(k)] == k:
                for value in values:
                    if len(value) >= 4:
                        line = line.replace(value, "***")
        self.found.setdefault(keys, []).append(line)

    def unknown_key(self, keys: Key) -> None:
        parent, key = keys[:-1], keys[-1]
        where = self.marks.where(keys)
        if parent == ("scrapy",):
            supported = _allowed_keys(_model_at(self.root, parent[len(self.base):]))
            self.add(keys, f"{where}: "
                           f"{scrapy_setting_problem(str(key), supported, self.scrapy_names)}")
            return
        what = "source" if parent == ("sources",) else "key"
        allowed = _allowed_keys(_model_at(self.root, parent[len(self.base):]))
        place = f"in {dotted(parent)}" if parent else "at the top level"
        self.add(keys, f"{where}: unknown {what} {key_shown(key)} {place}"
                       f"{suggest(key, allowed, what) if _KEY_NAME.fullmatch(str(key)) else ''}")

    def error(self, err: Any, keys: Key) -> None:
        kind, ctx = err["type"], err.get("ctx") or {}
        if kind == "extra_forbidden":
            self.unknown_key(keys)
        elif kind == "unknown_key":
            key, what = ctx["key"], ctx.get("what", "key")
            self.add(keys + (key,), f"{self.marks.where(keys + (key,))}: unknown {what} "
                                    f"{key_shown(key)} in {dotted(keys)}"
                                    f"{suggest(key, list(ctx.get('allowed', ())), what)}")
        elif kind in _TYPE_WORDS or kind == "type_words":
            self.type_words.setdefault(keys, []).append(ctx.get("words") or _TYPE_WORDS[kind])
            self.shown[keys] = shown(keys, err["input"], self.marks)
            self.found.setdefault(keys, [])
        else:
            if kind == "value_error":
                message = str(ctx.get("error") or err["msg"])
            else:
                message = err["msg"].replace("Input should be", "must be")
                message = message[0].lower() + message[1:]
                if "input" in err and not isinstance(err["input"], dict | list):
                    message += f", got {shown(keys, err['input'], self.marks)}"
            self.add(keys, self.marks.problem(keys, message))

    def lines(self) -> list[str]:
        """One line per problem, in the order of the file."""
        out: list[tuple[int, str]] = []
        for keys, messages in self.found.items():
            if keys in self.type_words and not messages:
                words = " or ".join(dict.fromkeys(self.type_words[keys]))
                messages = [self.marks.problem(keys, f"must be {words}, got {self.shown[keys]}")]
            line = self.marks.line(keys)
            out.extend((line, m) for m in (messages[:1] if keys in self.type_words
                                           else messages))
        return [m for _, m in sorted(out, key=lambda lm: lm[0])]


def problems(exc: ValidationError, marks: Marks, root: type[BaseModel], data: Any,
             base: Key = (), scrapy_names: SettingNames | None = None) -> list[str]:
    """One line per problem: where (file:line), which key, what is wrong."""
    found = _Problems(marks, root, base, scrapy_names)
    for err in exc.errors():
        found.error(err, base + _real_keys(err["loc"], data))
    return found.lines()


def validate_section(model: type[BaseModel], data: Any, keys: Key,
                     marks: Marks | None = None, *,
                     scrapy_names: SettingNames | None = None) -> Any:
    """`data` (the mapping at `keys` of the file) checked by `model`; ConfigError naming the
    file, line and key of every problem."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise ConfigError(problems(exc, marks or Marks(), model, data, keys,
                                   scrapy_names)) from None
