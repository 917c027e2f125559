"""The `gpuradar` command line: the Typer app, shared options, errors and configuration.

Exit codes scripts can rely on are gpuradar.core.units.EXIT_CODES, listed in `--help`.
"""

from __future__ import annotations

import inspect
import logging
import re
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gpuradar import __version__
from gpuradar.cli.output import Format, console, err_console
from gpuradar.core.config import Config, ConfigError, load_config
from gpuradar.core.units import (  # noqa: F401  (the commands import them from here)
    EXIT_CODES,
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    EXIT_USAGE,
)

RECORDINGS = Path(__file__).parent.parent / "recordings"
EXIT_HELP = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in
                                       EXIT_CODES.items()) + "."

def _unwrap(text: str) -> str:
    """A docstring's hard line breaks removed (blank lines kept): the help output wraps
    text to the terminal itself, and the command list would otherwise break mid-sentence."""
    return re.sub(r"(?<=\S)[ \t]*\n[ \t]*(?=\S)", " ", inspect.cleandoc(text))


def _unwrap_helps(group: typer.Typer) -> None:
    for info in group.registered_commands:
        if info.help:
            info.help = _unwrap(info.help)
        elif info.callback is not None and info.callback.__doc__:
            info.callback.__doc__ = _unwrap(info.callback.__doc__)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _unwrap_helps(sub.typer_instance)


class _App(typer.Typer):
    """The root app: every command's help unwrapped once, when the command line runs."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _unwrap_helps(self)
        return super().__call__(*args, **kwargs)


app = _App(help="Track GPU cloud prices and availability; alert when rules match.",
           epilog=EXIT_HELP, no_args_is_help=True, add_completion=False,
           context_settings={"help_option_names": ["-h", "--help"]})
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Config file (YAML).",
                                                 envvar="GPURADAR_CONFIG")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="Database URL (overrides "
                                           "GPURADAR_DATABASE_URL and the config file).")]
FormatOpt = Annotated[Format, typer.Option("--format", "-o", help="Output format.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Same as --format csv.")]


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


def get_config(config: Path | None, database_url: str | None = None, *,
               check: bool = False, rules: bool = True) -> Config:
    """The configuration, checked by the schema (every command). `check` also checks what
    `gpuradar run` checks on top (targets, rules, alert settings, every source's schedule):
    the commands that act on the configuration (crawl, sources, rules check) use it, so a
    file `run` refuses is refused by them too; `rules=False` leaves the rules to the caller."""
    if check:
        return get_setup(config, database_url, rules=rules).cfg
    try:
        return load_config(config, database_url=database_url, scrapy_names=scrapy_names)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def scrapy_names() -> set[str]:
    """Scrapy's setting names, for the wording of a refused `scrapy:` key (Scrapy is loaded
    only when the file has one)."""
    from gpuradar.crawler.config import scrapy_setting_names

    return scrapy_setting_names()


def get_setup(config: Path | None, database_url: str | None = None, *, rules: bool = True,
              **options: Any):
    """Everything `gpuradar run` loads from the configuration (gpuradar.scheduler.setup),
    or a one-line error and exit 2."""
    from gpuradar.alerts.rules import RuleError
    from gpuradar.scheduler.setup import RunOptions, load_setup

    try:
        return load_setup(RunOptions(config=config, database_url=database_url, **options),
                          rules=rules)
    except (ConfigError, RuleError) as exc:
        raise fail(str(exc)) from None


def get_engine(cfg: Config, *, write: bool = False):
    """The database, migrated; crawls a dead process left `running` are marked failed
    (gpuradar.storage.owner). `write`: check now that this process can write (crawls).
    A database that cannot be used is one line naming the cause, exit 3."""
    from gpuradar.storage.db import check_writable, database_problem, open_database
    from gpuradar.storage.owner import mark_dead_crawls

    try:
        engine = open_database(cfg.database_url)
        if write:
            check_writable(engine)
        mark_dead_crawls(engine)
    except Exception as exc:
        problem = database_problem(exc, cfg.database_url)
        if problem is None:
            raise
        raise fail(problem, EXIT_DATABASE) from None
    return engine


def _interrupted(signum: int, frame: Any) -> None:
    err_console.print("interrupted", highlight=False)
    raise SystemExit(EXIT_INTERRUPTED)


def run_app() -> None:
    """The `gpuradar` command: Ctrl-C exits 130 without a traceback (commands that need to
    clean up install their own handler), and a database that fails at any point is one
    line naming the cause, exit 3."""
    signal.signal(signal.SIGINT, _interrupted)
    try:
        app()
    except Exception as exc:
        from gpuradar.storage.db import database_problem

        problem = database_problem(exc)
        if problem is None:
            raise
        err_console.print(f"[red]error:[/red] {escape(problem)}", highlight=False)
        raise SystemExit(EXIT_DATABASE) from None


def pick_format(fmt: Format, as_json: bool, as_csv: bool) -> Format:
    return Format.json if as_json else Format.csv if as_csv else fmt


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"gpuradar {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.",
                                                callback=_print_version, is_eager=True)] = False
          ) -> None:
    """Track GPU cloud prices and availability; alert when rules match."""
