"""The `gpuradar` command line: the Typer app, shared options, errors and configuration.

Exit codes scripts can rely on are gpuradar.core.units.EXIT_CODES, listed in `--help`.
"""


import inspect
import math
import re
import signal
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException
from typer.models import CommandInfo, DefaultPlaceholder

from gpuradar import __version__
from gpuradar.cli.output import Format, console, err_console, set_wide
from gpuradar.core.units import (  # noqa: F401  (the commands import them from here)
    EXIT_CODES,
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    EXIT_USAGE,
)

if TYPE_CHECKING:
    from gpuradar.core.config import Config
    from gpuradar.core.config.paths import DatabaseOnly

# The configuration (pydantic), the database (SQLAlchemy, Alembic), Scrapy and the alerting
# side are imported inside the functions that use them: `gpuradar --version` and `--help`
# import none of them, and each command only what it needs
# (tests/cli/test_startup_imports.py).

RECORDINGS = Path(__file__).parent.parent / "recordings"
EXIT_HELP = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in
                                       EXIT_CODES.items()) + "."

def _unwrap(text: str) -> str:
    """A docstring's hard line breaks removed (blank lines kept): the help output wraps
    text to the terminal itself, and the command list would otherwise break mid-sentence."""
    return re.sub(r"(?<=\S)[ \t]*\n[ \t]*(?=\S)", " ", inspect.cleandoc(text))


# Where each command is listed in `gpuradar --help` (Typer's rich_help_panel).
DAILY, SERVICE, ALERTS, DATA, DEVELOPER = ("Daily use", "Service", "Alerts", "Data",
                                           "Developer")
PANELS = {"demo": DAILY, "prices": DAILY, "history": DAILY, "patterns": DAILY,
          "recommend": DAILY,
          "sources": DAILY, "run": SERVICE, "serve": SERVICE, "healthcheck": SERVICE,
          "config": SERVICE,
          "alerts": ALERTS, "rules": ALERTS, "notify": ALERTS, "crawl": DATA, "db": DATA,
          "export": DATA, "index": DATA, "parse": DEVELOPER}
PANEL_ORDER = (DAILY, SERVICE, ALERTS, DATA, DEVELOPER)

# The Examples section of each command's help (Typer's epilog), by command path.
EXAMPLES: dict[str, list[str]] = {
    "": ["gpuradar demo --keep demo.db", "gpuradar prices --gpu H100 --database-url "
         "sqlite:///demo.db", "gpuradar rules test 'H100 under $2/h'", "gpuradar run"],
    "demo": ["gpuradar demo", "gpuradar demo --keep demo.db   # then: gpuradar prices "
             "--database-url sqlite:///demo.db", "gpuradar demo --timeline"],
    "prices": ["gpuradar prices --gpu H100", "gpuradar prices --gpu A100 --pricing spot "
               "--region 'us-*' --max-price 2", "gpuradar prices --kind TPU --group",
               "gpuradar prices --source lambda --csv > lambda.csv",
               "gpuradar prices --gpu H100 --watch 60"],
    "history": ["gpuradar history --gpu H100 --days 30", "gpuradar history aws p5.48xlarge "
                "--region us-east-1 --pricing on-demand", "gpuradar history vastai "
                "148199:1xH100_SXM --pricing spot --at yesterday"],
    "patterns": ["gpuradar patterns H100", "gpuradar patterns H100 --pricing spot --region "
                 "'us-*'", "gpuradar patterns A100 --days 30 --json"],
    "recommend": ["gpuradar recommend -p 7B -t qlora", "gpuradar recommend -p 70B -t "
                  "finetune --tokens 2B --spot no", "gpuradar recommend -p 8B -t inference "
                  "--precision fp8 --budget '$3/h' -r 'us-*'", "gpuradar recommend -p 70B -t "
                  "pretrain --tokens 1T --deadline 60d"],
    "sources": ["gpuradar sources", "gpuradar sources --check", "gpuradar sources --check "
                "--json"],
    "crawl": ["gpuradar crawl", "gpuradar crawl fx lambda vastai", "gpuradar crawl --record "
              "rec/   # then: gpuradar crawl --replay rec/"],
    "parse": ["gpuradar parse azure page1.json", "gpuradar parse vastai bundles.json --url "
              "https://console.vast.ai/api/v0/bundles/"],
    "run": ["gpuradar run --config config.yaml", "gpuradar run --replay "
            "gpuradar/recordings --interval 60   # offline, with the web page on "
            "http://127.0.0.1:9109/", "gpuradar run --log-format json --log-level warning"],
    "serve": ["gpuradar serve", "gpuradar serve --address 0.0.0.0 --port 8080 --threads 8",
              "GPURADAR_READ_DATABASE_URL=postgresql://reader@replica/gpuradar gpuradar "
              "serve"],
    "healthcheck": ["gpuradar healthcheck", "gpuradar healthcheck --metrics-port 9200"],
    "alerts": ["gpuradar alerts", "gpuradar alerts --all --limit 50", "gpuradar alerts "
               "--json"],
    "rules check": ["gpuradar rules check", "gpuradar rules check rules.yaml"],
    "rules test": ["gpuradar rules test 'H100 under $2/h'", "gpuradar rules test '8x A100 "
                   "spot under $10/h region us-*' --top 10", "gpuradar rules test cheap-h100 "
                   "--render"],
    "notify test": ["gpuradar notify test", "gpuradar notify test slack"],
    "notify preview": ["gpuradar notify preview cheap-h100", "gpuradar notify preview "
                       "'H100 under $2/h' --top 3"],
    "config check": ["gpuradar config check", "gpuradar config check config.yaml --json"],
    "config init": ["gpuradar config init", "gpuradar config init ./config.yaml --force"],
    "db prune": ["gpuradar db prune --older-than 400d --dry-run", "gpuradar db prune "
                 "--older-than 58w --vacuum"],
    "db upgrade": ["gpuradar db upgrade"],
    "export": ["gpuradar export dataset/", "gpuradar export dataset/ --format csv,jsonl",
               "gpuradar export dataset/ --verify"],
    "index reproduce": ["gpuradar index reproduce dataset/"],
}


def _examples(path: str) -> str | None:
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return "[bold]Examples[/bold]\n" + "\n".join(f"  $ {escape(x)}" for x in lines)


def _help_keeps_names_whole() -> None:
    """Typer's help tables cut what does not fit with "…" (`--grad-checkpoin…`,
    `GPURADAR_METRICS_ADDRES…` at 80 columns): there, option names stay whole and the
    description column wraps instead; a word still too long folds onto the next line rather
    than being cut."""
    from typer import rich_utils

    if getattr(rich_utils.Table, "keeps_names_whole", False):
        return

    class _Table(rich_utils.Table):
        keeps_names_whole = True

        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            super().add_row(*cells, **kwargs)
            for column in self.columns:
                column.overflow = "fold"
                if _NAME.search(str(getattr(cells[column._index], "plain", ""))):
                    column.no_wrap = True
            for cell in cells:  # the description: its parts (help, env var, default)
                for part in getattr(cell, "renderables", ()):
                    if isinstance(part, Text):
                        part.overflow = "fold"

    # typer's help draws its tables with rich_utils.Table: the subclass is put in its place
    rich_utils.Table = _Table  # type: ignore[misc]


_NAME = re.compile(r"^-[-\w]+$|^--[\w-]+(,--[\w-]+)*$")


def _usage_error(exc: TyperException, ctx: Any) -> typer.Exit:
    """A usage error (missing argument, unknown option or command, bad value) as one line,
    like every other error: Typer's own is a usage line, a hint and a boxed panel."""
    message = exc.format_message().replace("Value error, ", "")  # pydantic's prefix
    err_console.print(f"[red]error:[/red] {escape(message)} (see "
                      f"`{escape(ctx.command_path)} --help`)", highlight=False)
    return typer.Exit(getattr(exc, "exit_code", EXIT_USAGE))


def _is_usage_error(exc: Exception) -> bool:
    # a command without arguments shows its help through this exception: let it
    return (isinstance(exc, TyperException) and hasattr(exc, "format_message")
            and type(exc).__name__ != "NoArgsIsHelpError")


class _FlagsAsFlags:
    """A flag is shown as a flag in the help (`--wide`), not as an option taking `<bool>`;
    a usage error is one line."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _help_keeps_names_whole()
        super().format_help(ctx, formatter)  # type: ignore[misc]

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except TyperException as exc:
            if not _is_usage_error(exc):
                raise
            raise _usage_error(exc, ctx) from None

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            if hasattr(param, "get_runtime_param") and not isinstance(
                    param.get_runtime_param, _GivenValues):
                param.get_runtime_param = _GivenValues(param)
        return params


class _GivenValues:
    """A Typer parameter's coercion, built for a value the command line gave only.

    Typer 0.29 builds a pydantic TypeAdapter for each parameter of the command it runs,
    also for an option left out (None) or at its default, whose value it passes on as it is:
    18 for `gpuradar prices`, and with them most of pydantic's import, about a sixth of the
    command's start-up (issue #54). Those two values are passed on here as Typer passes them
    (None; () for a repeatable option), and so is text given for a text option (`--gpu
    H100`, `--source a --source b`), which Typer's coercion returns unchanged (a list);
    any other value (a number, a choice, a path) goes through Typer's own coercion and
    checks, built on first use. Called as Typer calls `get_runtime_param()`."""

    def __init__(self, param: Any) -> None:
        self._param = param
        self._build = param.get_runtime_param  # Typer's own, which keeps what it builds

    def __call__(self) -> "_GivenValues":
        return self

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        described = param.type_descriptor
        if described.parameter_info.parser is None:
            if value is param.default and _as_written(value, described.annotation):
                return value
            if described.annotation is str and isinstance(value, str):
                return value  # text as typed: what Typer's coercion returns for it
            if (described.annotation == list[str] and isinstance(value, list | tuple)
                    and all(isinstance(v, str) for v in value)):
                return list(value)
        return self._build().coerce(value, param=param, ctx=ctx)


def _as_written(value: Any, annotation: Any) -> bool:
    """Whether a default is already what Typer's coercion would make of it: a number, text
    or enum member of the parameter's own type (a default Path or list is still coerced)."""
    if isinstance(value, bool) or not isinstance(annotation, type):
        return False
    return isinstance(value, annotation) and (issubclass(annotation, Enum)
                                              or annotation in (int, float, str))


class _Command(_FlagsAsFlags, TyperCommand):
    pass


class _Group(_FlagsAsFlags, TyperGroup):
    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except TyperException as exc:
            if not _is_usage_error(exc):
                raise
            raise _usage_error(exc, ctx) from None

    def list_commands(self, ctx: Any) -> list[str]:
        """The root's panels in the order of PANEL_ORDER (Typer lists them as met)."""
        names = super().list_commands(ctx)
        order = {panel: i for i, panel in enumerate(PANEL_ORDER)}
        return sorted(names, key=lambda n: order.get(PANELS.get(n, ""), len(order)))


def _plain(cls: Any, base: type) -> bool:
    """Whether a command or group was left to Typer's own class (unset, Typer's default
    placeholder, or the base class itself)."""
    return cls is None or cls is base or isinstance(cls, DefaultPlaceholder)


def command_name(info: CommandInfo) -> str:
    """A registered command's name: given, or its function's (as Typer names it)."""
    if info.name:
        return info.name
    return info.callback.__name__.replace("_", "-") if info.callback else ""


def decorate(group: typer.Typer, path: str = "") -> None:
    """Every command's help, once all are registered: docstrings unwrapped, flags shown as
    flags, the panel it is listed in, its Examples (EXAMPLES)."""
    group.info.cls = _Group if _plain(group.info.cls, TyperGroup) else group.info.cls
    if not path and group.info.epilog == EXIT_HELP:
        group.info.epilog = f"{_examples('')}\n\n{EXIT_HELP}"
    for info in group.registered_commands:
        if info.help:
            info.help = _unwrap(info.help)
        elif info.callback is not None and info.callback.__doc__:
            info.callback.__doc__ = _unwrap(info.callback.__doc__)
        name = command_name(info)
        full = f"{path} {name}".strip()
        info.cls = _Command if _plain(info.cls, TyperCommand) else info.cls
        info.epilog = info.epilog or _examples(full)
        if not path:
            info.rich_help_panel = info.rich_help_panel or PANELS.get(name)
    for sub in group.registered_groups:
        full = f"{path} {sub.name}".strip()
        if not path:
            sub.rich_help_panel = sub.rich_help_panel or PANELS.get(sub.name or "")
        if sub.typer_instance is not None:
            sub.cls = _Group if _plain(sub.cls, TyperGroup) else sub.cls
            decorate(sub.typer_instance, full)


# add_completion: `gpuradar --install-completion` installs tab completion for the shell in
# use (bash, zsh, fish, PowerShell); `--show-completion` prints the script instead.
app = typer.Typer(help="Track GPU cloud prices and availability; alert when rules match.",
                  epilog=EXIT_HELP, no_args_is_help=True, add_completion=True, cls=_Group,
                  context_settings={"help_option_names": ["-h", "--help"]})
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")

# -- shell completion of values (`gpuradar --install-completion`): what a user may type ------
def _starting(words: list[str], incomplete: str) -> list[str]:
    """The words that begin with what is typed so far, case-insensitively."""
    return [w for w in words if w.lower().startswith(incomplete.lower())]


def complete_pricing(incomplete: str) -> list[str]:
    """--pricing: the kinds as users write them (on-demand, spot, capacity-block, ...)."""
    from gpuradar.core.pricing import PRICINGS, label

    return _starting([label(k) for k in PRICINGS], incomplete)


def complete_gpu(incomplete: str) -> list[str]:
    """--gpu: the catalog's families (H100), then its exact models (H100-SXM-80GB)."""
    from gpuradar.core.gpus import CATALOG, families

    return _starting(families() + sorted(set(CATALOG) - set(families())), incomplete)


def complete_source(incomplete: str) -> list[str]:
    """A source name (crawl SOURCE, --source): the registry's providers."""
    from gpuradar.core.sources import providers

    return _starting(list(providers()), incomplete)


ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Config file (YAML).",
                                                 envvar="GPURADAR_CONFIG")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="Database URL (overrides "
                                           "GPURADAR_DATABASE_URL and the config file).")]
FormatOpt = Annotated[Format, typer.Option("--format", "-o", help="Output format.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Same as --format csv.")]
WideOpt = Annotated[bool, typer.Option("--wide", help="Show every column of a table, each as "
                                       "wide as it needs (a narrow terminal leaves out the "
                                       "least important ones and says which).",
                                       callback=set_wide)]


def finite(value: float | None) -> float | None:
    """Option callback: NaN and infinity pass a `min=` range (every comparison with NaN is
    false) but mean nothing as a price, count or interval: a usage error."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def is_file(path: Path, kind: str = "is_file") -> bool:
    """Whether `path` is a file (`kind` "exists": anything); False for a name the system
    refuses (over 255 bytes: an inline rule is tried as a file first, and pathlib raises
    ENAMETOOLONG on it)."""
    try:
        return bool(getattr(path, kind)())
    except OSError:
        return False


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


def get_config(config: Path | None, database_url: str | None = None, *,
               check: bool = False, rules: bool = True) -> "Config":
    """The configuration, checked by the schema (every command). `check` also checks what
    `gpuradar run` checks on top (targets, rules, alert settings, every source's schedule):
    the commands that act on the configuration (crawl, sources, rules check) use it, so a
    file `run` refuses is refused by them too; `rules=False` leaves the rules to the caller."""
    from gpuradar.core.config import ConfigError, load_config

    if check:
        return check_setup(config, database_url, rules=rules).cfg
    try:
        cfg = load_config(config, database_url=database_url, scrapy_names=scrapy_names)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    _mask_secrets(cfg)
    return cfg


def get_database(config: Path | None, database_url: str | None = None
                 ) -> "Config | DatabaseOnly":
    """What a command that only uses the database needs of the configuration: with nothing
    but the database configured, its URL without loading the schema (pydantic is a sixth of
    `gpuradar prices`' start-up, issue #54); else the configuration as get_config checks it,
    so a file or variable every command refuses is refused here too."""
    from gpuradar.core.config.paths import database_only

    plain = database_only(config, database_url)
    if plain is None:
        return get_config(config, database_url)
    _mask_secrets(plain)
    return plain


def scrapy_names() -> set[str]:
    """Scrapy's setting names, for the wording of a refused `scrapy:` key (Scrapy is loaded
    only when the file has one)."""
    from gpuradar.crawler.crawl_settings import scrapy_setting_names

    return scrapy_setting_names()


def get_sources(config: Path | None, database_url: str | None = None):
    """The configuration checked as `gpuradar run` checks it and each source's schedule and
    status, without loading Scrapy (gpuradar.scheduler.setup.sources_in_force), or a
    one-line error and exit 2."""
    from gpuradar.scheduler.setup import sources_in_force

    return _loaded(sources_in_force, config, database_url, True, {})


def check_setup(config: Path | None, database_url: str | None = None, *, rules: bool = True):
    """The configuration with every check `gpuradar run` makes, without loading Scrapy
    (gpuradar.scheduler.setup.check_setup), or a one-line error and exit 2."""
    from gpuradar.scheduler.setup import check_setup as check

    return _loaded(check, config, database_url, rules, {})


def _loaded(load: Any, config: Path | None, database_url: str | None, rules: bool,
            options: dict[str, Any]) -> Any:
    from gpuradar.alerts.rules import RuleError
    from gpuradar.core.config import ConfigError
    from gpuradar.scheduler.setup import RunOptions

    try:
        loaded = load(RunOptions(config=config, database_url=database_url, **options),
                      rules=rules)
    except (ConfigError, RuleError) as exc:
        raise fail(str(exc)) from None
    _mask_secrets(loaded.cfg)
    return loaded


def _mask_secrets(cfg: "Config | DatabaseOnly") -> None:
    """Mask the configuration's secrets in everything this command logs (a library's debug
    line, apprise's "Loaded JSON URL ..." with a webhook token, included), as the daemon
    does."""
    from gpuradar.core.logs import REDACT, config_secrets, credential_env_values

    REDACT.set_secrets(config_secrets(cfg, credential_env_values()))


def missing_database(cfg: "Config | DatabaseOnly") -> Path | None:
    """The SQLite file of the configuration when it does not exist (else None)."""
    from gpuradar.storage.db import sqlite_file

    path = sqlite_file(cfg.database_url)
    return path if path is not None and not path.exists() else None


def get_engine(cfg: "Config | DatabaseOnly", *, write: bool = False,
               existing: bool = False):
    """The database, migrated; crawls a dead process left `running` are marked failed
    (gpuradar.storage.owner). `write`: check now that this process can write (crawls).
    `existing`: a command that only reads refuses a SQLite file that is not there rather
    than create it (a mistyped path, or a relative URL from another directory, made an
    empty database and folders). A database that cannot be used is one line naming the
    cause, exit 3."""
    from gpuradar.storage.db import check_writable, open_database
    from gpuradar.storage.owner import mark_dead_crawls

    missing = missing_database(cfg) if existing else None
    if missing is not None:
        raise fail(f"no database at {missing.resolve()} (a command that only reads creates "
                   "none): check --database-url or GPURADAR_DATABASE_URL (sqlite:///name.db "
                   "is relative to the current directory), or store offers first (`gpuradar "
                   "crawl`, or try `gpuradar demo`)", EXIT_DATABASE)
    try:
        engine = open_database(cfg.database_url)
        if write:
            check_writable(engine)
        mark_dead_crawls(engine)
    except Exception as exc:
        problem = database_failure(exc, cfg.database_url)
        if problem is None:
            raise
        raise fail(problem, EXIT_DATABASE) from None
    return engine


def read_engine(url: str) -> Any:
    """The engine of a database read as it is (serve, export from a replica): never
    migrated nor written, as a replica's user may not and a reader must not; one line and
    exit 3 when it cannot be read."""
    from gpuradar.storage.dataset import open_read_only
    from gpuradar.storage.db import DatabaseError

    try:
        return open_read_only(url)
    except DatabaseError as exc:
        raise fail(str(exc), EXIT_DATABASE) from None


def database_failure(exc: Exception, url: str) -> str | None:
    """One line saying why the database at `url` cannot be used, or None when `exc` is not
    about it: a database error, or a SQLite file whose folder cannot be made."""
    from gpuradar.storage.db import database_problem, redact_url

    problem = database_problem(exc, url)
    if problem is None and isinstance(exc, OSError):
        problem = (f"database {redact_url(url)} cannot be opened: {exc.strerror or exc}: "
                   f"{exc.filename}")
    return problem


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


def _print_version(value: bool) -> None:
    if value:
        console.print(f"gpuradar {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.",
                                                callback=_print_version, is_eager=True)] = False
          ) -> None:
    """Track GPU cloud prices and availability; alert when rules match."""
