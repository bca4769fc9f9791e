"""`kvtool plan` (being built)."""

import typer


def plan() -> None:
    """(being built)"""
    raise typer.Exit(2)
