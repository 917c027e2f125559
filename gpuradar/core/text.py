"""How a value someone gave is quoted back in an error: never whole when it is long (a
hostile or careless input can be megabytes), always with its length when cut. One place,
so every surface (configuration, rules, the JSON API, the Python API) echoes alike."""

from __future__ import annotations

MAX_ECHO = 60  # characters of a value an error quotes (docs/limits.md)


def excerpt(text: object, limit: int = MAX_ECHO) -> str:
    """`text` for an error message: quoted, at most `limit` characters, with the length
    when cut."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"
