"""Click as Typer runs it: Typer 0.28 carries its own copy of Click, earlier releases use the click package."""

try:
    from typer._click.exceptions import ClickException
    from typer._click.types import FloatParamType, IntParamType, ParamType
except ImportError:
    from click.exceptions import ClickException
    from click.types import FloatParamType, IntParamType, ParamType

__all__ = ["ClickException", "FloatParamType", "IntParamType", "ParamType"]
