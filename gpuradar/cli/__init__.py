"""The `gpuradar` command line: one Typer app; each module adds its commands.

Exit codes scripts can rely on are defined in gpuradar.core.units and listed in `--help`.
"""


from gpuradar.cli import (
    alerts,
    config,
    config_init,
    crawl,
    db,
    demo,
    export,
    healthcheck,
    index,
    patterns,
    prices,
    recommend,
    run,
    serve,
    sources,
)
from gpuradar.cli.common import app, decorate, run_app

# Each module adds its commands to `app` when imported (decorators) or in register(app).
_MODULES = (crawl, sources, prices, db, demo, alerts, recommend, run, serve, config,
            config_init, healthcheck, export, index, patterns)
for _module in _MODULES:
    if hasattr(_module, "register"):
        _module.register(app)
decorate(app)  # panels, examples, flags shown as flags: once every command is there


def main() -> None:
    run_app()
