"""`gpuradar config check [FILE]`: the configuration checked exactly as `gpuradar run` checks
it, and what is in force: sources with their intervals and credentials, targets (redacted),
rules as read, the daemon's and the metrics endpoint's settings."""


import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from gpuradar.cli.common import EXIT_USAGE, ConfigOpt, DbOpt
from gpuradar.cli.output import Format as _Format
from gpuradar.cli.output import console, emit, err_console
from gpuradar.core.units import format_duration

if TYPE_CHECKING:
    from gpuradar.core.config import SourceOptions

config_app = typer.Typer(help="Write a starter configuration file, or check one.",
                         no_args_is_help=True)


def _error_lines(exc: Exception) -> list[str]:
    from gpuradar.core.config import ConfigError

    if isinstance(exc, ConfigError):
        return exc.problems
    errors = getattr(exc, "errors", None)  # several bad rules at once
    return [str(e) for e in errors] if errors else [str(exc)]


def _credentials(name: str, opts: "SourceOptions") -> str:
    """Where each credential of source `name` comes from, never its value."""
    import os

    from gpuradar.core.providers import get

    out = []
    for opt, env in get(name).credentials.items():
        if opts.get(opt):
            out.append(f"{opt}: in the file")
        elif os.environ.get(env):
            out.append(f"{opt}: from {env}")
        else:
            out.append(f"{opt}: not set ({env})")
    return "; ".join(out) or "none needed"


def _interval_origin(setup: Any, name: str) -> str:
    from gpuradar.core.sources import source_kind

    if setup.cfg.source_options(name).get("interval") is not None:
        return f"sources.{name}.interval"
    if source_kind(name) in setup.opts.intervals:
        return f"daemon.intervals.{source_kind(name)}"
    return "default"


def describe(setup: Any) -> dict[str, Any]:
    """What is in force, as plain data (the table view and --json print it)."""
    from gpuradar.storage.db import redact_url

    cfg = setup.cfg
    sources = []
    for name, plan in setup.schedule.items():
        enabled, why = setup.status[name]
        sources.append({
            "source": name, "enabled": enabled, "why": why,
            "interval_s": plan.interval, "interval": format_duration(plan.interval),
            "interval_from": _interval_origin(setup, name),
            "jitter": format_duration(plan.jitter), "timeout": format_duration(plan.timeout),
            "credentials": _credentials(name, cfg.source_options(name))})
    targets = [{"target": name, "channel": t.channel, "urls": t.redacted(),
                "tags": ", ".join(sorted(t.tags)) or "-"} for name, t in setup.targets.items()]
    rules = [{"name": r.name, "rule": r.text, "notify": ", ".join(r.targets or ()) or "-"}
             for r in setup.rules]
    database_from = cfg.where("database_url") if ("database_url",) in (
        cfg.located().lines.keys() | cfg.located().origins.keys()) else "default"
    o, m = setup.opts, setup.metrics
    return {
        "file": str(cfg.path) if cfg.path else None,
        "database": redact_url(cfg.database_url), "database_from": database_from,
        "sources": sources, "targets": targets, "rules": rules,
        "rules_file": str(cfg.rules_file) if cfg.rules_file else None,
        "daemon": {"grace_period": o.grace_period, "crawl_timeout": o.crawl_timeout,
                   "outbox_interval": o.outbox_interval, "backoff_max": o.backoff_max,
                   "jitter": o.jitter, "misfire_grace": o.misfire_grace,
                   "watch_interval": o.watch_interval, "intervals": dict(o.intervals)},
        "metrics": {"enabled": m.enabled, "address": m.address, "port": m.port},
    }


def _seconds(value: float | None, none: str) -> str:
    return none if value is None else format_duration(value)


def _print(info: dict[str, Any]) -> None:
    console.print(f"configuration: {info['file'] or 'no file (the defaults)'}", highlight=False)
    console.print(f"database: {info['database']} (from {info['database_from']})",
                  highlight=False)
    rows = [{**r, "enabled": "yes" if r["enabled"] else "no"} for r in info["sources"]]
    # (key, header, priority): in a narrow terminal the highest priority goes first; the
    # credentials stay (this is where they are checked), `why` is `gpuradar sources`' too
    emit(rows, [("source", "source"), ("enabled", "enabled"), ("interval", "interval"),
                ("interval_from", "set by", 1), ("jitter", "jitter", 3),
                ("timeout", "timeout", 2), ("credentials", "credentials"),
                ("why", "why", 4)], _Format.table, title="sources")
    if info["targets"]:
        emit(info["targets"], [("target", "target"), ("channel", "channel"),
                               ("urls", "URL (redacted)"), ("tags", "tags")], _Format.table,
             title="targets")
    else:
        console.print("targets: none")
    if info["rules"]:
        emit(info["rules"], [("name", "name"), ("rule", "rule as read"),
                             ("notify", "notifies")], _Format.table, title="rules")
    else:
        console.print("rules: none")
    d, m = info["daemon"], info["metrics"]
    intervals = ", ".join(f"{k} {format_duration(v)}" for k, v in d["intervals"].items())
    console.print(
        f"daemon: grace period {_seconds(d['grace_period'], '-')}, crawl timeout "
        f"{_seconds(d['crawl_timeout'], 'Scrapy default')}, outbox every "
        f"{_seconds(d['outbox_interval'], '-')}, backoff up to {_seconds(d['backoff_max'], '-')}, "
        f"watch every {_seconds(d['watch_interval'], '-')}"
        + (f", intervals by kind: {intervals}" if intervals else ""), highlight=False)
    console.print("metrics: " + (f"http://{m['address']}:{m['port']}/metrics"
                                  if m["enabled"] else "disabled"), highlight=False)
    console.print("[green]configuration OK[/green]")


@config_app.command("check")
def config_check(
    file: Annotated[Path | None, typer.Argument(help="The config file (default: --config, "
                                                "GPURADAR_CONFIG, ~/.config/gpuradar/"
                                                "config.yaml).")] = None,
    config: ConfigOpt = None, database_url: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print what is in force as JSON "
                                          "(sources, targets redacted, rules, daemon, "
                                          "metrics).")] = False,
) -> None:
    """Check the configuration as `gpuradar run` would; show what is in force.

    Every problem is listed with its file, line and key (exit 2); a good configuration
    shows its sources with their intervals and credentials, targets, rules (exit 0)."""
    from gpuradar.alerts.rules import RuleError
    from gpuradar.core.config import ConfigError
    from gpuradar.scheduler.setup import RunOptions, load_setup

    path = file or config
    if path is not None and not path.exists():
        err_console.print(f"[red]error:[/red] config file {path} does not exist",
                          highlight=False)
        raise typer.Exit(EXIT_USAGE)
    try:
        setup = load_setup(RunOptions(config=path, database_url=database_url))
    except (ConfigError, RuleError) as exc:
        lines = _error_lines(exc)
        for line in lines:
            err_console.print(f"[red]error:[/red] {escape(line)}", highlight=False)
        count = getattr(exc, "count", len(lines))
        err_console.print(f"{count:,} problem{'s' if count != 1 else ''}: the "
                          "configuration is not valid", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    info = describe(setup)
    if as_json:
        json.dump(info, sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    _print(info)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
