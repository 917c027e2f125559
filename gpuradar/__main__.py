"""`python -m gpuradar`, and the `gpuradar` script (pyproject's entry point), is the
`gpuradar` command (gpuradar.cli).

`gpuradar --version` alone is answered here, before Typer and every command module are
imported: it prints what the command line's `--version` prints, in a blink.
"""

import sys


def main() -> None:
    """Run the `gpuradar` command with sys.argv."""
    if sys.argv[1:] == ["--version"]:
        from gpuradar import __version__

        print(f"gpuradar {__version__}")
        return
    from gpuradar.cli import main as run

    run()


if __name__ == "__main__":
    main()
