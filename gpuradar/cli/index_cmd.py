"""`gpuradar index reproduce EXPORT_DIR`: recompute every published index point from an
export, without the database, and say whether each still reproduces (docs/index.md)."""


from pathlib import Path
from typing import Annotated

import typer

from gpuradar.cli.common import EXIT_FAILED, app, fail
from gpuradar.cli.output import console

index_app = typer.Typer(help="The market index as a reference rate (docs/index.md).",
                        no_args_is_help=True)
app.add_typer(index_app, name="index")


@index_app.command("reproduce")
def reproduce(
    directory: Annotated[Path, typer.Argument(help="An export (`gpuradar export DIR`) with "
                                              "its JSON Lines or CSV files.")],
) -> None:
    """Recompute every published index point from an export with the documented method
    (v2) and its recorded parameters: each point's figures, status and input digest from its
    votes, and each point in force from the exported offers and crawls. Says every point
    equal, or names each point that no longer reproduces (exit 1)."""
    from gpuradar.storage.export import ExportError
    from gpuradar.storage.reproduce import reproduce as check

    try:
        checked, problems = check(directory)
    except ExportError as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    for line in problems:
        console.print(f"does not reproduce: {line}", highlight=False)
    if problems:
        raise typer.Exit(EXIT_FAILED)
    console.print(f"{checked} index points recomputed from {directory}: every point equal",
                  highlight=False)
