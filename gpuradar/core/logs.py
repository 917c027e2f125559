"""Logging for the long-running process: one line per event, human-readable or JSON, and
never a secret.

Secrets (notification target URLs and their tokens, source credentials, the database
password) are masked in the final, formatted text, tracebacks included, so a library that
logs a URL it was given cannot leak it either.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"
# user:password@ in any URL, whether or not the password is a known secret.
_URL_PASSWORD = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):"
                           r"(?P<pw>[^@/\s]+)@")
# Option names whose values are secrets wherever they appear in the config.
SECRET_NAMES = re.compile(r"(key|token|secret|password|passwd|credential|auth)", re.IGNORECASE)
_MIN_SECRET = 4  # shorter values would mask ordinary words


class Redactor:
    """Masks a set of known secret strings, plus passwords in URLs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None

    def set_secrets(self, secrets: Iterable[str]) -> None:
        values = frozenset(s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET)
        # longest first, so a URL is masked whole before its parts are
        ordered = sorted(values, key=len, reverse=True)
        pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        with self._lock:
            self._secrets, self._pattern = values, pattern

    def __call__(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(MASK, text)
        return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


REDACT = Redactor()


def url_secrets(url: str) -> set[str]:
    """The parts of an apprise or database URL that must not be shown: the URL itself, its
    password, and the long path/host tokens webhook URLs carry (Slack's T…/B…/X…)."""
    out = {url}
    try:
        parts = urlsplit(url)
    except ValueError:
        return out
    if parts.password:
        out |= {parts.password, unquote(parts.password)}
    if parts.username and len(parts.username) >= 16:
        out.add(parts.username)  # bot tokens live in the user part (slack://xoxb-...@...)
    tokens = [t for t in re.split(r"[/?&=#]", parts.path + "?" + parts.query) if t]
    if (parts.hostname or "") and not re.fullmatch(r"[\w.-]+\.\w+|localhost|[\d.]+",
                                                     parts.hostname or ""):
        tokens.append(parts.netloc.split("@")[-1])
    out |= {t for t in tokens if len(t) >= 16 or (len(t) >= 8 and re.search(r"\d", t)
                                                   and re.search(r"[A-Za-z]", t))}
    return out


def credential_env_values() -> list[str]:
    """Values of the credential environment variables the providers declare (to mask
    them)."""
    import os

    from gpuradar.core import providers

    return [os.environ[env] for provider in providers.PROVIDERS
            for env in provider.credentials.values() if os.environ.get(env)]


def config_secrets(cfg: Any, extra_env: Iterable[str] = ()) -> set[str]:
    """Every secret a configuration (gpuradar.core.config.Config, checked) holds: target
    URLs, credential-like source options and the database password; `extra_env` are values
    of credential environment variables."""
    out: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if hasattr(value, "model_dump"):  # a section of the configuration
            value = value.model_dump(by_alias=True)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and SECRET_NAMES.search(key):
            out.add(value)

    for target in cfg.targets.values():  # TargetSpec (gpuradar.core.config)
        for url in target.url_list():
            out |= url_secrets(url)
    walk(cfg.sources)
    walk(cfg.scrapy)
    db = cfg.database_url or ""
    try:
        password = urlsplit(db).password
    except ValueError:
        password = None
    if password:
        out |= {password, unquote(password)}
    # whatever `${VAR}` put into a target, the database URL or a secret-named option, wherever
    # it sits in a URL (a webhook's path, its query) and however short a token it is
    marks = getattr(cfg, "marks", None)
    for keys, values in (marks.env_values.items() if marks is not None else ()):
        names = [k for k in keys if isinstance(k, str)]
        if names and (names[0] in ("targets", "database_url")
                      or any(SECRET_NAMES.search(n) for n in names)):
            out |= {v for v in values if v}
    out |= {v for v in extra_env if v}
    return out


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime",
                                                                           "taskName"}


def without_prefix(text: str, name: str) -> str:
    """`text` without a leading `name: `: a spider logs through a logger named after its
    source and its messages start with the source too (they are also stored in the crawl
    record, where that prefix says which source failed)."""
    return text.removeprefix(f"{name}: ") if name else text


def source_once(error: str, source: str) -> str:
    """A crawl's error (its messages joined by '; ') shown beside its source, each message
    without the `source: ` it starts with: 'failed (...); HTTP 500' beside `aws`, not
    'aws: failed (...); aws: HTTP 500'."""
    return "; ".join(without_prefix(part, source) for part in error.split("; "))


class TextFormatter(logging.Formatter):
    """`2026-01-02 03:04:05 INFO gpuradar.daemon: message`, secrets masked. A message that
    starts with its logger's name (a spider's `aws: ...` through the logger `aws`) names it
    once: `WARNING aws: g7.2xlarge is not ...`, not `WARNING aws: aws: g7.2xlarge ...`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s",
                         datefmt="%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = without_prefix(record.message, record.name)
        if message == record.message:
            return super().formatMessage(record)
        return super().formatMessage(logging.makeLogRecord({**vars(record),
                                                            "message": message}))

    def format(self, record: logging.LogRecord) -> str:
        return REDACT(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, structured extras (source,
    crawl_id, ...) and exc for tracebacks; secrets masked in every string."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key in _STANDARD or key.startswith("_"):
                continue
            if key == "spider":  # Scrapy passes the spider object
                value = getattr(value, "name", str(value))
            out[key] = value if isinstance(value, int | float | bool | type(None)) else str(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return REDACT(json.dumps(out, ensure_ascii=False, default=str))


# Libraries that say too much at INFO for a process that runs for months.
_CHATTY = {"scrapy": logging.WARNING, "apscheduler": logging.WARNING,
           "gpuradar.storage.ingest": logging.WARNING, "py.warnings": logging.ERROR,
           "asyncio": logging.WARNING, "twisted": logging.WARNING, "apprise": logging.WARNING,
           "filelock": logging.WARNING, "urllib3": logging.WARNING,
           "alembic": logging.WARNING, "scrapy-playwright": logging.WARNING,
           "scrapy_playwright": logging.WARNING}


#: A record with this attribute set (`extra={IN_OUTCOME: True}`) describes a failure that the
#: crawl's outcome reports again (the daemon's one "crawl failed: ..." line, the crawl
#: table): it counts towards the outcome but is shown only at DEBUG, so each failure is
#: logged once, at one level.
IN_OUTCOME = "in_outcome"


class _Threshold(logging.Filter):
    """The chosen level, applied to what is shown rather than to what is made: a record a
    library filter demoted after it was made (Scrapy's spider logs of skipped requests) is
    not shown above its new level; and a failure the outcome repeats is not shown twice."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return False
        return self.level <= logging.DEBUG or not getattr(record, IN_OUTCOME, False)


def setup_logging(fmt: str = "text", level: str = "INFO", stream: Any = None,
                  libraries: str | None = None) -> None:
    """Root handler on stderr with the chosen format; nothing below `level` is shown. At
    INFO, Scrapy, APScheduler and the other libraries only report warnings (`libraries`:
    their own level instead); at DEBUG everything is shown."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    root.setLevel(numeric)
    handler.setLevel(numeric)
    handler.addFilter(_Threshold(numeric))
    for name, quiet in _CHATTY.items():
        if libraries is not None:
            quiet = logging.getLevelName(libraries.upper())
        logging.getLogger(name).setLevel(logging.NOTSET if numeric <= logging.DEBUG
                                         else max(quiet, numeric))
    logging.captureWarnings(True)
