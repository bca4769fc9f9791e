"""`kvtool profiles`: list the ready-made workload profiles and show one as YAML or vLLM flags."""

from enum import Enum
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from kvtool.profiles.vllm_flags import vllm_config_yaml, vllm_serve_command
from kvtool.profiles.workload import list_profiles, load_profile, profile_to_dict

app = typer.Typer(
    help="Ready-made workload profiles: list them, show one, turn one into `vllm serve` flags.", no_args_is_help=True
)


class ShowFormat(str, Enum):
    yaml = "yaml"
    vllm = "vllm"
    vllm_config = "vllm-config"


@app.command("list")
def list_command() -> None:
    """List the profiles shipped with kvtool."""
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for column in ("profile", "max_model_len", "max_tokens", "kv dtype", "max_num_seqs", "tp", "overflow"):
        table.add_column(column, no_wrap=True)
    profiles = list_profiles()
    for p in profiles:
        table.add_row(
            p.name,
            str(p.max_model_len),
            str(p.max_tokens),
            p.kv_cache_dtype,
            str(p.max_num_seqs),
            str(p.tensor_parallel_size),
            p.overflow,
        )
    console = Console()
    console.print(table)
    for p in profiles:
        console.print(f"\n[bold]{p.name}[/]: {p.description}\n  for {p.hardware}", highlight=False)


@app.command("show")
def show_command(
    profile: Annotated[
        str, typer.Argument(help="A profile name (see `kvtool profiles list`) or a path to a YAML file.")
    ],
    format: Annotated[
        ShowFormat,
        typer.Option(
            "--format",
            "-f",
            help="yaml: the profile; vllm: `vllm serve` flags; vllm-config: a YAML file for `vllm serve --config`.",
        ),
    ] = ShowFormat.yaml,
    model: Annotated[str | None, typer.Option(help="Model to put in the vLLM command.")] = None,
) -> None:
    """Show one profile, or the equivalent `vllm serve` command."""
    loaded = load_profile(profile)
    if format is ShowFormat.vllm:
        text = vllm_serve_command(loaded, model)
    elif format is ShowFormat.vllm_config:
        text = vllm_config_yaml(loaded, model)
    else:
        text = f"# profile {loaded.name} ({loaded.source})\n" + yaml.safe_dump(
            profile_to_dict(loaded), sort_keys=False, width=1000
        )
    typer.echo(text, nl=False)
