"""The `kvtool` command: one Typer app, one module per subcommand, imported only when that command runs
(or when `kvtool --help` lists them all), so that `kvtool plan` never pays for serve's or bench's imports."""

import errno
import importlib
import sys
import traceback
from collections.abc import MutableMapping

import typer
from typer.core import TyperGroup

from kvtool import __version__
from kvtool.cli.typer_click import ClickException
from kvtool.errors import ExitCode, KvtoolError

# name -> (module, attribute): a command function, or a Typer app of subcommands
COMMANDS = {
    "plan": ("kvtool.cli.plan", "plan"),
    "serve": ("kvtool.cli.serve", "serve"),
    "bench": ("kvtool.cli.bench", "bench"),
    "diagnose": ("kvtool.cli.diagnose", "diagnose"),
    "watch": ("kvtool.cli.watch", "watch"),
    "alerts": ("kvtool.cli.alerts", "alerts"),
    "profiles": ("kvtool.cli.profiles", "app"),
}


class LazyCommands(MutableMapping):
    """The group's commands: every name is known at once, a command is built on first lookup."""

    def __init__(self):
        self._built = {}

    def __getitem__(self, name):
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = load_command(name)
        return self._built[name]

    def __setitem__(self, name, command):
        self._built[name] = command

    def __delitem__(self, name):
        del self._built[name]

    def __iter__(self):
        return iter(dict.fromkeys([*COMMANDS, *self._built]))

    def __len__(self):
        return len(set(COMMANDS) | set(self._built))


# the ways out Typer renders itself: usage errors, typer.Exit (--help and every command's status), Abort
TYPER_EXITS = (ClickException, typer.Exit, typer.Abort, EOFError)


class LazyGroup(TyperGroup):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands()

    def invoke(self, ctx):
        """Every command's errors end here, its flags' parsing included: a KvtoolError as its one line and its
        status; any other exception as one line and status 70, or its frames with `kvtool --traceback`."""
        try:
            return super().invoke(ctx)
        except KvtoolError as err:
            print_error(str(err))
            raise typer.Exit(err.exit_code) from None
        except TYPER_EXITS:
            raise
        except Exception as err:
            if isinstance(err, OSError) and err.errno == errno.EPIPE:
                raise  # the reader of stdout left (`kvtool plan --list-models | head`): Typer exits quietly
            report_internal_error(err, ctx.params.get("show_traceback", False))
            raise typer.Exit(ExitCode.INTERNAL_ERROR) from None


def load_command(name: str):
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(rich_markup_mode="rich", pretty_exceptions_enable=False, add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
        return typer.main.get_command(holder).commands[name]
    holder.command(name)(target)
    return typer.main.get_command(holder)


app = typer.Typer(
    cls=LazyGroup,
    name="kvtool",
    help="Plan, serve, benchmark and diagnose LLM serving limits: context length, output length, KV-cache memory.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def print_error(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]kvtool: error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def report_internal_error(err: Exception, show_traceback: bool) -> None:
    """httpie's way: one line naming the exception, or with --traceback the frames Python would print."""
    if show_traceback:
        traceback.print_exception(err, file=sys.stderr)
        return
    text = " ".join(str(err).split())  # one line, whatever the message holds
    what = f"{type(err).__name__}: {text}" if text else type(err).__name__
    print_error(f"internal error: {what} (run with --traceback to see where)")


def _version(value: bool) -> None:
    if value:
        print(f"kvtool {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    show_traceback: bool = typer.Option(
        False, "--traceback", help="On an internal error, print the Python traceback instead of one line."
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
    except KeyboardInterrupt:  # before Typer's own handler is reached
        sys.exit(ExitCode.INTERRUPTED)
