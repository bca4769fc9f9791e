"""Every shipped profile's `vllm serve` flags are checked against the model, and parsed by vLLM's own
argument parser when vLLM is importable."""

import shlex

import pytest

from kvtool.errors import UsageError
from kvtool.profiles.vllm_flags import vllm_engine_settings, vllm_serve_argv, vllm_serve_command
from kvtool.profiles.workload import list_profiles, load_profile

MODEL_FOR_PROFILE = {"multi-gpu-synthesis": "meta-llama/Llama-3.1-70B-Instruct"}  # tp 4 needs heads divisible by 4
PROFILES = [p.name for p in list_profiles()]


def argv_for(name: str) -> list[str]:
    profile = load_profile(name)
    model = MODEL_FOR_PROFILE.get(name, "meta-llama/Llama-3.1-8B-Instruct")
    return vllm_serve_argv(model, vllm_engine_settings(profile))


def test_a_profile_is_checked_against_the_model_it_is_shown_for():
    with pytest.raises(UsageError, match=r"attention heads \(9\) must be divisible by tensor parallel size \(4\)"):
        vllm_serve_command(load_profile("multi-gpu-synthesis"))  # the default model, SmolLM2, has 9 heads
    with pytest.raises(UsageError, match="more than the 8192 tokens"):
        vllm_serve_command(load_profile("multi-gpu-synthesis"), "meta-llama/Meta-Llama-3-8B-Instruct")
    assert "--tensor-parallel-size 4" in vllm_serve_command(
        load_profile("multi-gpu-synthesis"), MODEL_FOR_PROFILE["multi-gpu-synthesis"]
    )


@pytest.mark.parametrize("name", PROFILES)
def test_vllms_own_parser_accepts_every_profiles_flags(name):
    arg_utils = pytest.importorskip("vllm.engine.arg_utils", reason="vLLM is not installed here")
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # vLLM >= 0.11; older: vllm.utils

    argv = argv_for(name)
    parser = arg_utils.AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    parsed = parser.parse_args(["--model", argv[2], *argv[3:]])
    args = arg_utils.AsyncEngineArgs.from_cli_args(parsed)
    assert args.max_model_len == load_profile(name).max_model_len, shlex.join(argv)
    assert args.tensor_parallel_size == load_profile(name).tensor_parallel_size
