"""`kvtool bench` (being built)."""

import typer


def bench() -> None:
    """(being built)"""
    raise typer.Exit(2)
