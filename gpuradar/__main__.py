"""`python -m gpuradar` is the `gpuradar` command."""

from gpuradar.cli import main

main()
