"""`python -m gpuradar`, and the `gpuradar` script (pyproject's entry point), is the
`gpuradar` command (gpuradar.cli).

`gpuradar --version` alone is answered here, before Typer and every command module are
imported: it prints what the command line's `--version` prints, in a blink.
"""

import os
import sys

#: Commands that run long and allocate in volume (the service, a crawl, the demo's crawls):
#: they keep Python's collector settings.
LONG_RUNNING = ("run", "crawl", "demo")


def main() -> None:
    """Run the `gpuradar` command with sys.argv."""
    if sys.argv[1:] == ["--version"]:
        from gpuradar import __version__

        print(f"gpuradar {__version__}")
        return
    from gpuradar.core import collector

    short = sys.argv[1] not in LONG_RUNNING if len(sys.argv) > 1 else True
    if short:  # full collections were a share of `prices` worth saving (docs/benchmark.md)
        collector.for_short_command()
    # pydantic looks for plugins in the entry points of every installed distribution when
    # it builds its first model (the configuration's): gpuradar uses none, and the scan is a
    # measurable share of `gpuradar prices` (docs/benchmark.md). A user who sets the
    # variable keeps their value.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from gpuradar.cli import main as run

    try:
        run()
    finally:
        if sys.argv[1:2] != ["run"]:
            skip_last_collection()


def skip_last_collection() -> None:
    """End a command's process without the interpreter's last garbage collection: over the
    objects SQLAlchemy, pydantic and Typer leave behind it is a large share of a short
    command's CPU (docs/benchmark.md). The one resource of a command that only that
    collection would release, its database connections, is closed here (SQLite removes its
    -wal and -shm files); the service (`gpuradar run`) exits as usual."""
    from gpuradar.core import collector

    db = sys.modules.get("gpuradar.storage.db")
    if db is not None:
        db.dispose_engines()
    collector.skip_at_exit()


if __name__ == "__main__":
    main()
