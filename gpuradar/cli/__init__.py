"""The `gpuradar` command line: one Typer app; each module adds its commands.

Exit codes scripts can rely on are defined in gpuradar.core.units and listed in `--help`.
"""

from __future__ import annotations

from gpuradar.cli import alerts, commands, db_prune, healthcheck, recommend, run
from gpuradar.cli.common import app

for _module in (alerts, db_prune, healthcheck, recommend, run):
    _module.register(app)
del _module
_ = commands  # its commands register themselves on import


def main() -> None:
    app()
