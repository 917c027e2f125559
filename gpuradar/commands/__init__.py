"""Command groups contributed by the other parts (alerts, daemon, recommend, ...).

Each module here defines `register(app: typer.Typer) -> None`; gpuradar.cli calls it."""
