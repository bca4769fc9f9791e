"""A workload profile as `vllm serve` flags, or as a vLLM `--config` YAML file."""

from __future__ import annotations

import shlex

import yaml

from kvtool.profiles.workload import WorkloadProfile

DEFAULT_HF_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
ENGINE_KEYS = ("max_model_len", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens",
               "gpu_memory_utilization", "tensor_parallel_size")


def vllm_engine_settings(profile: WorkloadProfile) -> dict:
    """The profile's settings that have a `vllm serve` flag of the same name."""
    return {key: getattr(profile, key) for key in ENGINE_KEYS}


def vllm_serve_argv(model: str, settings: dict) -> list[str]:
    """`vllm serve MODEL --max-model-len ...`, as an argv list; settings are named as vLLM's engine arguments."""
    argv = ["vllm", "serve", model]
    for key, value in settings.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def vllm_serve_command(profile: WorkloadProfile, model: str | None = None) -> str:
    """The profile as a shell command, one flag per line, followed by notes on what has no flag."""
    argv = vllm_serve_argv(model or profile.model or DEFAULT_HF_MODEL, vllm_engine_settings(profile))
    argv = [shlex.quote(arg) for arg in argv]
    lines = [" ".join(argv[:3])] + [f"  {flag} {value}" for flag, value in zip(argv[3::2], argv[4::2])]
    return " \\\n".join(lines) + "\n" + "".join(f"# {note}\n" for note in vllm_notes(profile))


def vllm_config_yaml(profile: WorkloadProfile, model: str | None = None) -> str:
    """A file for `vllm serve --config FILE`: keys are the long flag names."""
    settings = {"model": model or profile.model or DEFAULT_HF_MODEL}
    settings |= {key.replace("_", "-"): value for key, value in vllm_engine_settings(profile).items()}
    header = f"# vLLM config for profile {profile.name}: vllm serve --config FILE\n"
    notes = "".join(f"# {note}\n" for note in vllm_notes(profile))
    return header + notes + yaml.safe_dump(settings, sort_keys=False)


def vllm_notes(profile: WorkloadProfile) -> list[str]:
    notes = [f"Requests without max_tokens: vLLM gives completions 16 tokens and chat the remaining context; "
             f"this profile's default is {profile.max_tokens}, so send max_tokens={profile.max_tokens} from clients."]
    if profile.overflow == "reject":
        notes.append("overflow reject: vLLM <= 0.31 rejects prompt + max_tokens > max_model_len with HTTP 400; "
                     "vLLM >= 0.32 clamps max_tokens instead.")
    else:
        notes.append("overflow clamp: vLLM >= 0.32 clamps max_tokens to the room left; vLLM <= 0.31 answers HTTP 400.")
    return notes
