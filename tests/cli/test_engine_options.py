"""The engine flags `plan` and `serve` share: one declaration, one parser, the same values and the same errors."""

import importlib

import pytest
import typer
from typer.testing import CliRunner

from kvtool.cli.app import app, load_command
from kvtool.engine.sizing.context_length import AUTO_MAX_MODEL_LEN
from kvtool.engine.sizing.defaults import CPU_OMP_ENVIRONMENT

SHARED = (
    "dtype",
    "quantization",
    "max_model_len",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_memory",
)
PARSED = [
    (["--max-model-len", "20000"], "max_model_len", 20_000),
    (["--max-model-len", "8k"], "max_model_len", 8_000),
    (["--max-model-len", "8K"], "max_model_len", 8_192),
    (["--max-model-len", "25.6k"], "max_model_len", 25_600),
    (["--max-model-len", "auto"], "max_model_len", AUTO_MAX_MODEL_LEN),
    (["--max-model-len", "-1"], "max_model_len", AUTO_MAX_MODEL_LEN),
    (["--kv-cache-memory", "512MiB"], "kv_cache_memory", 512 << 20),
    (["--kv-cache-memory", "2GB"], "kv_cache_memory", 2 * 10**9),
    (["--max-num-seqs", "8"], "max_num_seqs", 8),
    (["--gpu-memory-utilization", "0.5"], "gpu_memory_utilization", 0.5),
]
REFUSED = [
    (["--max-model-len", "lots"], "max_model_len 'lots' is not a whole number."),
    (["--max-model-len", "1.5K"], "max_model_len '1.5K' is not a whole number."),
    (["--max-model-len", "0"], "max_model_len must be positive, got 0."),
    (["--kv-cache-memory", "2X"], "--kv-cache-memory '2X' is not a memory size."),
    (["--max-num-seqs", "0"], "--max-num-seqs must be at least 1, got 0."),
    (["--max-num-batched-tokens", "-5"], "--max-num-batched-tokens must be at least 1, got -5."),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1], got 1.5."),
]


def options(command: str) -> dict:
    return {param.name: param for param in load_command(command).params}


@pytest.mark.parametrize("name", SHARED)
def test_plan_and_serve_declare_each_shared_flag_alike(name):
    plan, serve = options("plan")[name], options("serve")[name]
    assert plan.opts == serve.opts and plan.help == serve.help and plan.rich_help_panel == serve.rich_help_panel
    assert type(plan.type) is type(serve.type)


def test_every_flag_keeps_its_name_and_default():
    plan, serve = options("plan"), options("serve")
    # plan's None is "not given": vLLM's default (auto, tp 1), or with --from-log the log's setting
    assert (plan["kv_cache_dtype"].default, serve["kv_cache_dtype"].default) == (None, None)
    assert (plan["dtype"].default, serve["dtype"].default) == ("auto", "auto")
    assert plan["tp"].opts == ["--tp", "--tensor-parallel-size"] and plan["tp"].default is None
    assert all(plan[name].default is None for name in SHARED if name not in ("dtype", "kv_cache_dtype"))


@pytest.fixture
def received(monkeypatch):
    """What `plan` and `serve` hand on for a command line: the planner's request, the server's engine args."""
    for name, value in CPU_OMP_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    seen = {}

    def keep(command):
        def record(*args):
            seen[command] = args[-1]  # make_plan(spec, request), plan_startup(request)
            raise typer.Exit()

        return record

    monkeypatch.setattr(importlib.import_module("kvtool.cli.plan"), "make_plan", keep("plan"))
    monkeypatch.setattr(importlib.import_module("kvtool.cli.serve_startup"), "plan_startup", keep("serve"))

    def run(command: str, args: list[str]) -> dict:
        extra = ["--gpu-mem", "80GiB"] if command == "plan" else []
        result = CliRunner().invoke(app, [command, *args, *extra])
        assert result.exit_code == 0, result.output
        return vars(seen[command]) if command == "plan" else vars(seen[command].engine_args)

    return run


@pytest.mark.parametrize("args, name, value", PARSED)
def test_plan_and_serve_read_a_value_the_same(received, args, name, value):
    assert received("plan", args)[name] == received("serve", args)[name] == value


@pytest.mark.parametrize("args, problem", REFUSED)
@pytest.mark.parametrize("command", ["plan", "serve"])
def test_plan_and_serve_refuse_a_value_with_the_same_line(command, args, problem):
    result = CliRunner().invoke(app, [command, *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kvtool: error: {problem}") and len(result.stderr.splitlines()) == 1
