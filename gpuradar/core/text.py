"""How a value someone gave is quoted back in an error: never whole when it is long (a
hostile or careless input can be megabytes), always with its length when cut. One place,
so every surface (configuration, rules, the JSON API, the Python API) echoes alike."""

from __future__ import annotations

MAX_ECHO = 60  # characters of a value an error quotes (docs/limits.md)


def excerpt(value: object, limit: int = MAX_ECHO) -> str:
    """`value` for an error message as repr() shows it, at most `limit` characters (text is
    cut, with its length)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:  # repr refuses 4,300 digits
        return f"a whole number of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    return f"{text[:limit]!r}... ({len(text):,} characters)"
