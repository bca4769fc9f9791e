"""`kvtool diagnose` (being built)."""

import typer


def diagnose() -> None:
    """(being built)"""
    raise typer.Exit(2)
