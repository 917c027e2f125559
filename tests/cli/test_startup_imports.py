"""The everyday commands start without loading what they do not use (issue #34): Scrapy,
Twisted, Playwright, apprise and Alembic take longer to import than these commands take to
do their work.

Each command runs as the installed `gpuradar` script in a process of its own, with
PYTHONPROFILEIMPORTTIME=1 (what `python -X importtime` sets): Python then lists every module
the process imported, nested under the module that imported it, so a failure names the
chain that pulled the library in. This asserts imports, never time (bench/startup.py
measures the time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuradar

#: What none of these commands needs: the crawler's libraries, the notification library,
#: the migration tool (a database already at the newest schema is not migrated).
HEAVY = ("scrapy", "scrapy_playwright", "twisted", "playwright", "apprise", "alembic")

RULES = """rules:
  - H100 under $2/h
  - name: cheap-a100-spot
    rule: 8x A100 spot under $10/h region us-*
  - any 80GB+ GPU under $1.5/h not on vastai
"""

#: command -> (arguments, a text its output must hold: the command really did its work)
COMMANDS: dict[str, tuple[list[str], str]] = {
    "--version": (["--version"], f"gpuradar {gpuradar.__version__}"),
    "--help": (["--help"], "Track GPU cloud prices and availability"),
    "prices": (["prices"], "no offers stored yet"),
    "sources": (["sources", "--json"], '"source": "azure"'),
    "rules check": (["rules", "check", "{rules}"], "3 rules OK"),
}


def _command() -> list[str]:
    """The installed `gpuradar` script (the user's entry point), else `python -m gpuradar`."""
    script = Path(sys.executable).with_name("gpuradar")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpuradar"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    """An environment with an empty data directory whose database is at the newest schema
    (as after any first command), no configuration file, and a small rules file."""
    root = tmp_path_factory.mktemp("startup")
    (root / "rules.yaml").write_text(RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPURADAR_")
           and k not in ("COLUMNS", "LINES", "PYTHONPROFILEIMPORTTIME")}
    env |= {"GPURADAR_DATA_DIR": str(root / "data"), "XDG_CONFIG_HOME": str(root / "config"),
            "COLUMNS": "200", "RULES": str(root / "rules.yaml")}
    done = subprocess.run([*_command(), "db", "upgrade"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return env


_RUNS: dict[tuple, tuple[subprocess.CompletedProcess, dict[str, list[str]]]] = {}


def imports_of(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess,
                                                                dict[str, list[str]]]:
    """Run `gpuradar ARGS`; (the process, each module it imported -> the chain of modules
    that imported it, outermost first). A command run with the same arguments and
    environment before in this module is not run again: its imports are the same (the
    tests only read its output), and a process costs a second of CPU."""
    key = (tuple(args), tuple(sorted(env.items())))
    if key not in _RUNS:
        _RUNS[key] = _imports_of(args, env)
    return _RUNS[key]


def _imports_of(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess,
                                                                 dict[str, list[str]]]:
    args = [a.format(rules=env["RULES"]) for a in args]
    proc = subprocess.run([*_command(), *args], env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
                          capture_output=True, text=True, timeout=120)
    # "import time: <self us> | <cumulative us> | <2 spaces per level><module>"; a module is
    # listed after the ones it imported, so its importer is the next line one level up.
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            raw = line.split("|", 2)[2]
            name = raw.strip()
            rows.append(((len(raw) - len(raw.lstrip()) - 1) // 2, name))
    chains: dict[str, list[str]] = {}
    for i, (depth, name) in enumerate(rows):
        chain, level = [name], depth
        for up_depth, up_name in rows[i + 1:]:
            if level == 0:
                break
            if up_depth < level:
                chain.insert(0, up_name)
                level = up_depth
        chains.setdefault(name, chain)
    return proc, chains


def heavy_imports(chains: dict[str, list[str]], roots: tuple[str, ...]) -> list[str]:
    """'alembic via gpuradar.storage.db -> alembic' for each library of `roots` imported."""
    out = []
    for root in roots:
        if root in chains:
            out.append(f"{root} via {' -> '.join(chains[root])}")
    return out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_everyday_command_loads_no_crawler_notifier_or_migration_library(command, home):
    args, expected = COMMANDS[command]
    proc, chains = imports_of(args, home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert expected in proc.stdout + proc.stderr, proc.stdout[-2000:]
    assert chains, "PYTHONPROFILEIMPORTTIME listed no import"
    pulled = heavy_imports(chains, HEAVY)
    assert not pulled, f"`gpuradar {' '.join(args)}` imported:\n  " + "\n  ".join(pulled)


def test_version_loads_neither_typer_nor_the_commands(home):
    """`gpuradar --version` is answered before the command line is built."""
    proc, chains = imports_of(["--version"], home)
    assert proc.stdout == f"gpuradar {gpuradar.__version__}\n"
    assert not heavy_imports(chains, ("typer", "rich", "pydantic", "sqlalchemy")), chains


def test_sources_loads_no_scrapy(home):
    """Each source's status (enabled or not, and why) comes from its provider's Scrapy-free
    declaration (gpuradar.core.providers), so `sources` loads no spider, hence neither
    Scrapy nor Twisted."""
    args, _ = COMMANDS["sources"]
    proc, chains = imports_of(args, home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pulled = heavy_imports(chains, ("scrapy", "twisted"))
    assert not pulled, "`gpuradar sources` imported:\n  " + "\n  ".join(pulled)


def test_sources_loads_no_botocore_when_no_aws_credentials_can_exist(home, tmp_path):
    """With no AWS_* variable and no AWS or boto credentials file, `sources` says that AWS
    credentials would add spot history and capacity blocks without loading botocore; with
    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set it loads botocore and finds them."""
    bare = {k: v for k, v in home.items() if not k.startswith("AWS_") and k != "BOTO_CONFIG"}
    bare["HOME"] = str(tmp_path)  # no ~/.aws, no ~/.boto
    proc, chains = imports_of(["sources", "--json"], bare)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "botocore" not in chains, " -> ".join(chains["botocore"])
    assert "would add per-zone spot prices" in proc.stdout
    keyed = bare | {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x" * 40}
    proc, chains = imports_of(["sources", "--json"], keyed)
    assert "botocore" in chains and "AWS credentials found (env)" in proc.stdout


#: What no everyday command needs either (issue #54): SQLAlchemy's ORM and SQLModel (the
#: tables are Core tables: storage/models.py) and the AWS SDK (botocore: only where AWS
#: credentials may exist, to look for them).
ORM_AND_SDK = ("sqlalchemy.orm", "sqlmodel", "botocore")


@pytest.mark.parametrize("command", ["prices", "sources", "rules check"])
def test_an_everyday_command_loads_no_orm_nor_the_aws_sdk(command, home, tmp_path):
    """On a machine whose environment holds only AWS SDK settings (AWS_CA_BUNDLE, a
    region), which never yield credentials, and no AWS or boto credentials file."""
    env = {k: v for k, v in home.items() if not k.startswith("AWS_") and k != "BOTO_CONFIG"}
    env |= {"HOME": str(tmp_path), "AWS_CA_BUNDLE": str(tmp_path / "ca.pem"),
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_EC2": "http://127.0.0.1:9"}
    args, expected = COMMANDS[command]
    proc, chains = imports_of(args, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert expected in proc.stdout + proc.stderr, proc.stdout[-2000:]
    assert "sqlalchemy" in chains or command == "rules check"  # it read the database
    pulled = heavy_imports(chains, ORM_AND_SDK)
    assert not pulled, f"`gpuradar {' '.join(args)}` imported:\n  " + "\n  ".join(pulled)


def test_rules_check_loads_no_database_library(home):
    """Checking a rules file reads no database: fit rules name a job (gpuradar.recommend)
    whose ranking takes the offers storage reads, but only as a type."""
    args, _ = COMMANDS["rules check"]
    proc, chains = imports_of(args, home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pulled = heavy_imports(chains, ("sqlalchemy", "sqlmodel", "psycopg"))
    assert not pulled, "`gpuradar rules check` imported:\n  " + "\n  ".join(pulled)


@pytest.mark.parametrize("command", ["prices", "sources"])
def test_a_command_leaves_the_sqlite_database_closed(command, home):
    """The process ends without Python's last garbage collection (gpuradar/__main__.py), so
    it closes its database connections itself: SQLite checkpoints its write-ahead log and
    removes the -wal and -shm files, as when that collection closed them."""
    args, _ = COMMANDS[command]
    proc = subprocess.run([*_command(), *args], env=home, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = Path(home["GPURADAR_DATA_DIR"])
    assert sorted(p.name for p in data.iterdir()) == ["gpuradar.db"]


def test_a_crawl_loads_no_remote_control_server(home):
    """Scrapy's remote-control extension (on by default since Scrapy 2.14) would listen for
    commands and load aiohttp's web server into every crawl and the daemon: it is off."""
    recordings = Path(gpuradar.__file__).parent / "recordings"
    proc, chains = imports_of(["crawl", "lambda", "--replay", str(recordings)], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scrapy.core.engine" in chains  # it really crawled
    pulled = heavy_imports(chains, ("aiohttp", "scrapy.extensions.remote_control"))
    assert not pulled, "`gpuradar crawl` imported:\n  " + "\n  ".join(pulled)


def test_prices_without_a_config_file_loads_no_yaml_library(home):
    """With no configuration file there is no YAML to read: PyYAML (~4 % of the command's
    start-up) is not imported."""
    proc, chains = imports_of(["prices", "--json"], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("["), proc.stdout[-2000:]  # it answered
    pulled = heavy_imports(chains, ("yaml",))
    assert not pulled, "`gpuradar prices` imported:\n  " + "\n  ".join(pulled)


def _callbacks(app) -> list:
    """Every function Typer reads a signature of: the commands, the group callbacks, and
    those of the sub-apps (gpuradar rules ..., gpuradar db ...)."""
    found = [c.callback for c in app.registered_commands]
    if app.registered_callback is not None:
        found.append(app.registered_callback.callback)
    for group in app.registered_groups:
        found += _callbacks(group.typer_instance)
    return [f for f in found if f is not None]


def test_no_command_option_is_an_annotation_string():
    """Typer reads every command's signature whenever it builds the command line, in every
    process: an annotation kept as a string (`from __future__ import annotations`) is then
    compiled and evaluated, ~370 of them, a few per cent of every command's start-up."""
    import inspect

    from gpuradar.cli import app  # every command

    callbacks = _callbacks(app)
    assert len(callbacks) >= 20, callbacks  # the whole command line was found
    strings = [f"{f.__module__}.{f.__name__}({name})" for f in callbacks
               for name, value in inspect.get_annotations(f).items() if isinstance(value, str)]
    assert not strings, strings


def test_prices_on_sqlite_loads_no_postgresql_dialect(home):
    """ix_crawl_not_ok's PostgreSQL condition is added only where PostgreSQL is used
    (storage/models.py): declared in the table, it imported SQLAlchemy's PostgreSQL dialect
    into every command on SQLite to validate it."""
    proc, chains = imports_of(["prices", "--json"], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sqlalchemy" in chains  # it read the database
    pulled = heavy_imports(chains, ("sqlalchemy.dialects.postgresql", "psycopg"))
    assert not pulled, "`gpuradar prices` imported:\n  " + "\n  ".join(pulled)


#: In a new process (nothing has added the condition yet), the schema built from
#: storage/models.py alone on PostgreSQL, by an engine storage.db did not make.
_CREATE_ON_POSTGRESQL = """
import sys
from sqlalchemy import create_engine, inspect
from gpuradar.storage.models import metadata
engine = create_engine(sys.argv[1])
metadata.create_all(engine)
(ix,) = [ix for ix in inspect(engine).get_indexes("crawl") if ix["name"] == "ix_crawl_not_ok"]
print(ix["dialect_options"].get("postgresql_where"))
engine.dispose()
"""


def test_the_schema_on_postgresql_keeps_the_partial_index_condition():
    """Moving the condition out of the table's declaration changes nothing on PostgreSQL:
    the index created from the tables still holds only the crawls that are not ok."""
    import uuid

    from tests.conftest import _pg_connect, pg_url

    name = f"gpuradar_pgwhere_{uuid.uuid4().hex[:10]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        proc = subprocess.run([sys.executable, "-c", _CREATE_ON_POSTGRESQL, pg_url(name)],
                              capture_output=True, text=True, timeout=120)
    finally:
        with _pg_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "((status)::text <> 'ok'::text)", proc.stdout


def test_a_config_file_builds_the_options_model_of_the_sources_it_names_only(tmp_path):
    """Loading the configuration builds the options model of each source the file names,
    not of all 25 (issue #54: `prices` paid for every one); a misspelt source is still
    refused with its file, line and the known name it resembles, and a source left out
    still has its defaults when asked (a crawl, `sources`)."""
    from gpuradar.core.config import ConfigError, load_config
    from gpuradar.core.config.sections import _schema, source_model

    path = tmp_path / "gpuradar.yaml"
    path.write_text("sources:\n  runpod:\n    enabled: false\n")
    # Both caches emptied together, before and after: a schema built earlier holds the
    # models it was built with, and later tests compare against source_model()'s.
    source_model.cache_clear()
    _schema.cache_clear()
    try:
        cfg = load_config(path)
        assert source_model.cache_info().currsize == 1
    finally:
        source_model.cache_clear()
        _schema.cache_clear()
    assert cfg.source_options("runpod").enabled is False
    assert cfg.source_options("lambda").enabled is True
    assert len(cfg.options) >= 23 and cfg.options["runpod"].enabled is False

    path.write_text("sources:\n  runpod:\n    enabled: false\n  lamda:\n    enabled: false\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value) == (f"{path}:4: unknown source 'lamda' in sources — did you "
                                  "mean 'lambda'?")


def test_prices_loads_no_emoji_table_and_prints_emoji_codes_as_written(home):
    """The consoles print text as it is: a provider's ':fire:' stays ':fire:' rather than
    becoming an emoji, so rich's emoji table is never loaded by `prices`."""
    from gpuradar.cli.output import console, err_console

    for out in (console, err_console):
        with out.capture() as captured:
            out.print("spot :fire: deal")
        assert captured.get() == "spot :fire: deal\n"
    proc, chains = imports_of(["prices"], home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rich.table" in chains  # it drew with rich
    assert not heavy_imports(chains, ("rich._emoji_codes",)), chains["rich._emoji_codes"]


#: What `prices` needs none of with nothing but the database configured (issue #54): the
#: other commands' modules (their imports, and Typer reading their signatures), pydantic
#: (Typer's coercion of options left out, the configuration's schema) and the schema.
NOT_FOR_PRICES = ("gpuradar.cli.alerts_cmd", "gpuradar.cli.crawl_cmd", "gpuradar.cli.demo_cmd",
                  "gpuradar.cli.recommend_cmd", "gpuradar.cli.run_cmd", "gpuradar.cli.sources_cmd",
                  "gpuradar.cli.config_cmd", "pydantic", "pydantic_core",
                  "gpuradar.core.config.sections", "gpuradar.core.config.load")


@pytest.mark.parametrize("args", [["prices"], ["prices", "--gpu", "H100", "--source", "aws",
                                               "--source", "lambda", "--region", "us-*"],
                                  ["history", "--gpu", "H100", "--json"]])
def test_prices_with_only_a_database_loads_no_other_command_nor_pydantic(args, home):
    proc, chains = imports_of(args, home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sqlalchemy" in chains and "gpuradar.cli.prices_cmd" in chains  # it did its work
    pulled = heavy_imports(chains, NOT_FOR_PRICES)
    assert not pulled, f"`gpuradar {' '.join(args)}` imported:\n  " + "\n  ".join(pulled)


def test_prices_still_checks_a_configuration_that_sets_more_than_the_database(home,
                                                                             tmp_path):
    """With a file, or a variable of another key, the schema checks the configuration as
    for any command: a bad value refuses `prices` (exit 2), a file's database is used."""
    proc, chains = imports_of(["prices"], home | {"GPURADAR_METRICS_PORT": "many"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "GPURADAR_METRICS_PORT: metrics.port: must be a whole number" in proc.stderr
    assert "pydantic" in chains
    config = tmp_path / "gpuradar.yaml"
    config.write_text("database_url: sqlite:///nowhere/at/all.db\n")
    proc = subprocess.run([*_command(), "prices", "--config", str(config)], env=home,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "nowhere/at/all.db" in proc.stderr, proc.stderr


def test_a_value_given_is_still_checked_by_typer(home):
    """Only an option left out or at its default skips Typer's coercion: a number given is
    still checked (and loads pydantic for it)."""
    proc, chains = imports_of(["prices", "--limit", "-1"], home)
    assert proc.returncode == 2 and "--limit" in proc.stderr, proc.stderr
    assert "pydantic" in chains


def test_each_command_is_loaded_from_the_modules_the_table_names():
    """gpuradar.cli.COMMANDS names, for every command and group `gpuradar.cli.app` has, the
    modules that add it; `gpuradar --help` lists them in that order within a panel."""
    from gpuradar.cli import COMMANDS, app, command_of
    from gpuradar.cli.common import command_name

    found = {command_name(c): c.callback.__module__ for c in app.registered_commands}
    found |= {g.name: {c.callback.__module__ for c in g.typer_instance.registered_commands}
              for g in app.registered_groups}
    assert set(found) == set(COMMANDS)
    for name, modules in found.items():
        for module in [modules] if isinstance(modules, str) else modules:
            assert module.removeprefix("gpuradar.cli.") in COMMANDS[name], (name, module)
    order = list(COMMANDS)
    listed = [command_name(c) for c in app.registered_commands]
    assert listed == sorted(listed, key=order.index)
    assert command_of(["prices", "--gpu", "H100"]) == "prices"
    assert command_of(["--help"]) is None and command_of(["pricez"]) is None
