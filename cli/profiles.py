"""`kvtool profiles` (being built)."""

import typer

app = typer.Typer(help="Ready-made workload profiles.", no_args_is_help=True)


@app.command("list")
def list_profiles() -> None:
    """(being built)"""
