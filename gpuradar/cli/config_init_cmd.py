"""`gpuradar config init [PATH]`: a commented starter configuration, written from the
configuration schema itself (gpuradar.core.config.schema(), the pydantic models `run`
checks the file with), so it names every key that exists and nothing else.

Every key is commented out at its default: the file as written is the defaults, and
`gpuradar config check` accepts it. Uncomment what you change.
"""


import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuradar.cli.common import EXIT_USAGE, fail
from gpuradar.cli.output import console

if TYPE_CHECKING:  # pydantic and YAML are loaded when the file is written, not at start-up
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

DEFAULT_PATH = Path("~/.config/gpuradar/config.yaml")
_EXAMPLES = {  # a value to show where the default is empty (all are documented forms)
    "targets": {"slack": "slack://TokenA/TokenB/TokenC/#gpu-prices",
                "email": "mailtos://user:password@example.com?to=me@example.com"},
    "rules": ["H100 under $2/h", "8x A100-80GB spot under $10/h region us-*"],
    "endpoints": {"vastai.bundles": "http://127.0.0.1:8000/api/v0/bundles/"},
    "scrapy": {"DOWNLOAD_DELAY": 1},
    "rules_file": "rules.yaml",
}


def _model(annotation: Any) -> "type[BaseModel] | None":
    """The pydantic model inside `Model | None` / Annotated[Model, ...], if any."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation)
                           if a is not type(None))
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _hint(field: "FieldInfo") -> str:
    """What a value of this field is, as the schema reads it: a duration only where the
    schema parses one (a count or a ratio is no number of seconds)."""
    from gpuradar.core.config import values

    if any(getattr(meta, "func", None) is values.seconds_of for meta in field.metadata):
        return "seconds, or 5m, 1h, 2d"
    return {"bool": "true or false", "int": "a whole number", "float": "a number",
            "str": "text"}.get(_type_name(field.annotation), "")


def _database_default() -> str:
    """The database used when none is configured: the data directory's, not a path
    relative to wherever the command runs (what the starter file once suggested)."""
    from gpuradar.core.config.paths import data_dir

    return (f"# database_url: null    # default: sqlite:///{data_dir() / 'gpuradar.db'} "
            "(GPURADAR_DATA_DIR moves it)")


def _value(key: str, default: Any) -> str:
    import yaml

    shown = _EXAMPLES.get(key, default)
    return yaml.safe_dump({key: shown}, default_flow_style=False, sort_keys=False,
                          allow_unicode=True, width=1000).strip()


def _section(model: "type[BaseModel]", indent: int, lines: list[str]) -> None:
    """The keys of one section, commented out and indented so that removing '# ' gives
    valid YAML; each with its type where the schema names a plain one."""
    pad = "  " * indent
    for name, field in model.model_fields.items():
        key = field.alias or name
        if field.description:
            lines.append(f"# {pad}# {field.description}")
        value = _value(key, field.get_default(call_default_factory=True))
        hint = _hint(field)
        first, *rest = value.splitlines()
        lines.append(f"# {pad}{first}" + (f"    # {hint}" if hint and not rest else ""))
        lines += [f"# {pad}{line}" for line in rest]
    lines.append("")


def _sources(model: "type[BaseModel]", lines: list[str]) -> None:
    from gpuradar.core.sources import providers

    classes = providers()
    lines.append("# per-source options (every source takes enabled, interval, jitter, timeout,")
    lines.append("# request_interval, price_range, shrink_guard; durations in seconds or 5m/1h)")
    lines.append("# sources:")
    for name, field in model.model_fields.items():
        sub = _model(field.annotation)
        cls = classes.get(name)
        own = [k for k in (sub.model_fields if sub else {})
               if k not in ("enabled", "interval", "jitter", "timeout", "request_interval",
                            "price_range", "shrink_guard")]
        creds = getattr(cls, "credentials", {}) or {}
        lines.append(f"#   {name}:")
        lines.append("#     enabled: true")
        for opt in own:
            env = f"    # or the environment variable {creds[opt]}" if opt in creds else ""
            lines.append(f"#     {opt}: {'...' if opt in creds else 'null'}{env}")
    lines.append("")


def starter_config() -> str:
    """The commented starter file (every key of the schema, commented out at its default)."""
    from gpuradar.core.config import schema

    root = schema()
    lines = ["# gpuradar configuration: every key, commented out at its default.",
             "# Uncomment what you change; `gpuradar config check` says how it was read.",
             "# Credentials are best kept in the environment (named below per source).", ""]
    for name, field in root.model_fields.items():
        if name == "sources":
            sources = _model(field.annotation)
            assert sources is not None  # the schema's `sources` is a model of the sources
            _sources(sources, lines)
            continue
        sub = _model(field.annotation)
        if field.description:
            lines.append(f"# {field.description}")
        if sub is not None and typing.get_origin(field.annotation) is not dict:
            lines.append(f"# {field.alias or name}:")
            _section(sub, 1, lines)
            continue
        if name == "database_url":
            lines.append(_database_default())
        else:
            lines += [f"# {line}" for line in _value(name, field.get_default(
                call_default_factory=True)).splitlines()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def config_init(
    path: Annotated[Path | None, typer.Argument(help="Where to write it (default: "
                                                "~/.config/gpuradar/config.yaml).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")
                     ] = False,
) -> None:
    """Write a commented starter configuration: every key the schema knows, commented out
    at its default; refuses to overwrite a file without --force."""
    import os

    from gpuradar.core.files import not_a_file

    target = (path or DEFAULT_PATH).expanduser()
    why = not_a_file(target)
    if why not in (None, "missing"):  # a link (dangling or not), a FIFO, a folder
        raise fail(f"{target} is {why}; give the path of a plain file", EXIT_USAGE)
    if why is None and not force:
        raise fail(f"{target} exists; give --force to overwrite it", EXIT_USAGE)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # no link followed, no FIFO waited on, even if one appears after the check above
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_NONBLOCK, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(starter_config())
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
    console.print(f"wrote {target}; check it with `gpuradar config check {target}`",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    from gpuradar.cli.config_cmd import config_app

    config_app.command("init")(config_init)
