"""The `kvtool` command: one Typer app, one module per subcommand."""

import functools
import sys

import typer
from rich.console import Console

from kvtool import __version__
from kvtool.cli import alerts, bench, diagnose, plan, profiles, serve, watch
from kvtool.errors import ExitCode, KvtoolError

app = typer.Typer(
    name="kvtool",
    help="Plan, serve, benchmark and diagnose LLM serving limits: context length, output length, KV-cache memory.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def report_errors(command):
    """Every command's KvtoolError ends here: one line on stderr and the exit status the error carries."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KvtoolError as err:
            print_error(err)
            raise typer.Exit(err.exit_code) from None

    return run


def print_error(err: KvtoolError) -> None:
    Console(stderr=True).print(f"[bold red]kvtool: error:[/] {err}", highlight=False, soft_wrap=True)


for name, command in (
    ("plan", plan.plan),
    ("serve", serve.serve),
    ("bench", bench.bench),
    ("diagnose", diagnose.diagnose),
    ("watch", watch.watch),
    ("alerts", alerts.alerts),
):
    app.command(name)(report_errors(command))
app.add_typer(profiles.app, name="profiles")


def _version(value: bool) -> None:
    if value:
        print(f"kvtool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
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
        print_error(err)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        sys.exit(ExitCode.INTERRUPTED)
