"""The `gpuradar` command line: one Typer app; each module adds its commands.

Exit codes scripts can rely on are defined in gpuradar.core.units and listed in `--help`.

A command's module is imported when that command runs (issue #54): `gpuradar prices` loads
the prices module, not the alerting, crawling or recommending ones, and Typer reads the
signatures of its two commands rather than of all thirty. `--help`, shell completion and an
unknown word load every module, as does `gpuradar.cli.app` (what tests and tools read).
"""

import os
import sys
from collections.abc import Iterable
from typing import Any

from gpuradar.cli import common

#: Each command and group of `gpuradar` -> the modules that add it (decorators, or their
#: register(app)), in the order `gpuradar --help` lists them within a panel (commands
#: before groups, as Typer lists them).
COMMANDS: dict[str, tuple[str, ...]] = {
    "crawl": ("crawl_cmd",), "parse": ("crawl_cmd",), "prices": ("prices_cmd",),
    "history": ("prices_cmd",), "demo": ("demo_cmd",), "export": ("export_cmd",),
    "patterns": ("patterns_cmd",), "serve": ("serve_cmd",), "sources": ("sources_cmd",),
    "alerts": ("alerts_cmd",), "recommend": ("recommend_cmd",), "run": ("run_cmd",),
    "healthcheck": ("healthcheck_cmd",), "db": ("db_cmd",), "index": ("index_cmd",),
    "rules": ("alerts_cmd",), "notify": ("alerts_cmd",),
    "config": ("config_cmd", "config_init_cmd"),
}

_registered: set[str] = set()  # modules whose register(app) has run


def load(names: Iterable[str] | None = None) -> None:
    """Add the commands `names` (every command when None) to the app, each module once."""
    wanted = COMMANDS if names is None else [n for n in names if n in COMMANDS]
    for module_name in dict.fromkeys(m for name in wanted for m in COMMANDS[name]):
        name = f"gpuradar.cli.{module_name}"
        __import__(name)  # not importlib's: `python -X importtime` lists this one
        module = sys.modules[name]
        register = getattr(module, "register", None)
        if register is not None and module_name not in _registered:
            _registered.add(module_name)
            register(common.app)
    # one order whichever command ran first in this process (tests run several)
    rank = {name: i for i, name in enumerate(COMMANDS)}
    app = common.app
    app.registered_commands.sort(key=lambda c: rank.get(common.command_name(c), len(rank)))
    app.registered_groups.sort(key=lambda g: rank.get(g.name or "", len(rank)))
    common.decorate(app)  # panels, examples, flags shown as flags: once the commands are in


def command_of(args: list[str]) -> str | None:
    """The command a command line runs (its first word that is not an option: the root
    takes no option with a value), or None when it names none that is known."""
    word = next((a for a in args if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def main() -> None:
    """Run `gpuradar` with sys.argv, having loaded only the command it names (all of them
    for `--help`, completion or an unknown word, which lists or suggests the others)."""
    name = command_of(sys.argv[1:])
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    load(None if name is None or completing else [name])
    common.run_app()


def __getattr__(name: str) -> Any:
    """`gpuradar.cli.app`: the app with every command."""
    if name == "app":
        load()
        return common.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
