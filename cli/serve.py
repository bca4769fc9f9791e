"""`kvtool serve` (being built)."""

import typer


def serve() -> None:
    """(being built)"""
    raise typer.Exit(2)
