"""A workload profile as `vllm serve` flags, or as a vLLM `--config` YAML file."""

from __future__ import annotations

import shlex

import yaml

from kvtool.errors import UsageError
from kvtool.profiles.workload import WorkloadProfile

DEFAULT_HF_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
ENGINE_KEYS = (
    "max_model_len",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "tensor_parallel_size",
)


def vllm_engine_settings(profile: WorkloadProfile) -> dict:
    """The profile's settings that have a `vllm serve` flag of the same name."""
    return {key: getattr(profile, key) for key in ENGINE_KEYS}


def check_settings_for_model(model: str, settings: dict, where: str = "the settings") -> None:
    """Refuse settings vLLM would refuse for this model (tensor parallel size, context length), when the model
    is known without the network (catalog or local files)."""
    from pathlib import Path

    from kvtool.engine.discovery.models import resolve_model_spec
    from kvtool.engine.sizing import catalog, context_length
    from kvtool.engine.sizing.engine_args import check_parallel_sizes

    if catalog.find(model) is None and not Path(model).expanduser().exists():
        return
    spec = resolve_model_spec(model)
    try:
        check_parallel_sizes(spec, settings.get("tensor_parallel_size") or 1)
    except UsageError as err:
        raise UsageError(
            f"{where} do not suit {model}: {err.message}",
            "Name a model that suits them with --model, or change tensor_parallel_size.",
        ) from None
    length = settings.get("max_model_len")
    if length and not context_length.within_model(length, spec):
        raise UsageError(
            f"{where} ask for max_model_len {length}, more than the {spec.derived_max_model_len} tokens of {model}.",
            "Name a model with a longer context with --model, or lower max_model_len.",
        )


def vllm_serve_argv(model: str, settings: dict) -> list[str]:
    """`vllm serve MODEL --max-model-len ...`, as an argv list; settings are named as vLLM's engine arguments.

    Settings the model cannot run with are refused (UsageError), so that the command always starts.
    """
    check_settings_for_model(model, settings)
    argv = ["vllm", "serve", model]
    for key, value in settings.items():
        if value is True:  # a switch: the flag alone
            argv.append(f"--{key.replace('_', '-')}")
        elif value is not None and value is not False:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def vllm_serve_command(profile: WorkloadProfile, model: str | None = None) -> str:
    """The profile as a shell command, one flag per line, followed by notes on what has no flag."""
    model = model or profile.model or DEFAULT_HF_MODEL
    check_settings_for_model(model, vllm_engine_settings(profile), f"profile {profile.name}'s settings")
    argv = vllm_serve_argv(model, vllm_engine_settings(profile))
    argv = [shlex.quote(arg) for arg in argv]
    lines = [" ".join(argv[:3])] + [f"  {flag} {value}" for flag, value in zip(argv[3::2], argv[4::2])]
    return " \\\n".join(lines) + "\n" + "".join(f"# {note}\n" for note in vllm_notes(profile))


def vllm_config_yaml(profile: WorkloadProfile, model: str | None = None) -> str:
    """A file for `vllm serve --config FILE`: keys are the long flag names."""
    settings = {"model": model or profile.model or DEFAULT_HF_MODEL}
    check_settings_for_model(settings["model"], vllm_engine_settings(profile), f"profile {profile.name}'s settings")
    settings |= {key.replace("_", "-"): value for key, value in vllm_engine_settings(profile).items()}
    header = f"# vLLM config for profile {profile.name}: vllm serve --config FILE\n"
    notes = "".join(f"# {note}\n" for note in vllm_notes(profile))
    return header + notes + yaml.safe_dump(settings, sort_keys=False)


def vllm_notes(profile: WorkloadProfile) -> list[str]:
    notes = [
        f"Requests without max_tokens: vLLM gives completions 16 tokens and chat the remaining context; "
        f"this profile's default is {profile.max_tokens}, so send max_tokens={profile.max_tokens} from clients."
    ]
    if profile.overflow == "reject":
        notes.append(
            "overflow reject: vLLM <= 0.31 rejects prompt + max_tokens > max_model_len with HTTP 400; "
            "vLLM >= 0.32 clamps max_tokens instead."
        )
    else:
        notes.append("overflow clamp: vLLM >= 0.32 clamps max_tokens to the room left; vLLM <= 0.31 answers HTTP 400.")
    return notes
