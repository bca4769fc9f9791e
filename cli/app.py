"""The `kvtool` command: one Typer app, one module per subcommand."""

import sys

import typer
from rich.console import Console

from kvtool import __version__
from kvtool.cli import alerts, bench, diagnose, plan, profiles, serve, watch
from kvtool.cli.exit_codes import ExitCode
from kvtool.errors import KvtoolError

app = typer.Typer(
    name="kvtool",
    help="Plan, serve, benchmark and diagnose LLM serving limits: context length, output length, KV-cache memory.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
app.command("plan")(plan.plan)
app.command("serve")(serve.serve)
app.command("bench")(bench.bench)
app.command("diagnose")(diagnose.diagnose)
app.command("watch")(watch.watch)
app.command("alerts")(alerts.alerts)
app.add_typer(profiles.app, name="profiles")


def _version(value: bool) -> None:
    if value:
        print(f"kvtool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """kvtool: the tool for when length and memory limits bite."""


def _bare_gpu_means_local(argv: list[str]) -> list[str]:
    """`--gpu` with no value reads the local devices, as `--gpu local` does."""
    out = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg == "--gpu" and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append("local")
    return out


def main() -> None:
    try:
        app(args=_bare_gpu_means_local(sys.argv[1:]), prog_name="kvtool")
    except KvtoolError as err:
        Console(stderr=True).print(f"[bold red]kvtool: error:[/] {err}", highlight=False, soft_wrap=True)
        sys.exit(ExitCode.USAGE)
    except KeyboardInterrupt:
        sys.exit(ExitCode.INTERRUPTED)
