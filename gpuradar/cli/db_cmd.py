"""`gpuradar db prune` (retention) and `gpuradar db upgrade` (schema migrations)."""


import json
import sys
from datetime import timedelta
from typing import Annotated

import typer

from gpuradar.cli.common import (
    EXIT_DATABASE,
    ConfigOpt,
    DbOpt,
    database_failure,
    db_app,
    fail,
    get_config,
    get_engine,
)
from gpuradar.cli.output import console
from gpuradar.core.clock import SYSTEM
from gpuradar.core.units import parse_duration


def parse_age(value: str) -> timedelta:
    """'400d', '58w', '12h': a unit is required, so a bare '400' (seconds) cannot prune
    nearly everything by accident."""
    try:
        return parse_duration(value, unit_required=True)
    except ValueError as exc:
        raise ValueError(f"--older-than {exc}") from None


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


@db_app.command("prune")
def db_prune(
    older_than: Annotated[str, typer.Option(
        "--older-than", help="Delete history older than this (e.g. 400d, 58w): change points "
        "before the one in force at the cutoff (prices and interruption signals), crawl records, "
        "sent or failed notifications.",
        show_default=False)],
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Count what would be deleted; delete nothing.")] = False,
    vacuum: Annotated[bool, typer.Option(
        "--vacuum", help="Afterwards give the space back (SQLite VACUUM rewrites the file; "
        "PostgreSQL VACUUM ANALYZE).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    config: ConfigOpt = None, database_url: DbOpt = None,
) -> None:
    """Retention: keep what the last --older-than answers exactly, drop what is older."""
    from sqlalchemy.exc import SQLAlchemyError

    from gpuradar.storage import maintenance

    try:
        cutoff = SYSTEM.now() - parse_age(older_than)
    except (ValueError, OverflowError) as exc:
        raise fail(str(exc)) from None
    engine = get_engine(get_config(config, database_url), existing=True)
    try:
        result = maintenance.prune(engine, cutoff, dry_run=dry_run)
    except SQLAlchemyError as exc:
        raise fail(f"prune failed, nothing was deleted: {_reason(exc)}", EXIT_DATABASE) from None
    if vacuum and not dry_run:
        try:
            maintenance.vacuum(engine)
        except SQLAlchemyError as exc:
            raise fail(f"pruned, but VACUUM failed: {_reason(exc)}", EXIT_DATABASE) from None
    if as_json:
        sys.stdout.write(json.dumps(result.as_dict()) + "\n")
        return
    verb = "would delete" if dry_run else "deleted"
    console.print(f"cutoff {cutoff:%Y-%m-%d %H:%M} UTC: {verb} "
                  f"{result.price_changes} change point(s), {result.signal_changes} "
                  f"interruption-signal change(s), {result.crawls} crawl record(s), "
                  f"{result.notifications} notification(s)", highlight=False)


# -- db ----------------------------------------------------------------------------------
@db_app.command("upgrade")
def db_upgrade(config: ConfigOpt = None, database_url: DbOpt = None,
               revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Apply the schema migrations (also done on every start)."""
    from alembic.util.exc import CommandError

    from gpuradar.storage.db import DatabaseError, redact_url, upgrade
    from gpuradar.storage.db import get_engine as engine_for

    cfg = get_config(config, database_url)
    try:
        upgrade(engine_for(cfg.database_url), revision)
    except DatabaseError as exc:
        raise fail(str(exc), EXIT_DATABASE) from None
    except CommandError as exc:  # a revision alembic does not know
        raise fail(f"--revision {revision}: {exc}") from None
    except OSError as exc:  # the SQLite file's folder cannot be made
        raise fail(database_failure(exc, cfg.database_url) or str(exc), EXIT_DATABASE) from None
    console.print(f"database {redact_url(cfg.database_url)} is at {revision}")
