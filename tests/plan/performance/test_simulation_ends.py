"""Every load ends: a request that can never be scheduled (no KV blocks, a prompt and output longer than the
whole pool, no sequence slot, no token budget) and a load that never sends one are refused in one line, fast;
the tightest limits that still serve a request do serve every one."""

import math
import time

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.performance.hardware import catalog_figures
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.predict import ServingSetup, predict
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.errors import UsageError

SPEC = resolve_model_spec("Qwen/Qwen3-8B")
H100 = catalog_figures("H100-80GB")
KV_BYTES = 36 * 2 * 8 * 128 * 2
CLIENTS = Load(8, math.inf, 4)
ONE_REQUEST_BLOCKS = (8192 + 1024 - 1 + 15) // 16  # 576: the last token sampled takes no slot


def setup(num_blocks: int = 30_000, **scheduler) -> ServingSetup:
    config = EngineConfig.of(**({"max_num_seqs": 256, "max_num_batched_tokens": 8192} | scheduler))
    return ServingSetup(SPEC, H100, config, KV_BYTES, num_blocks)


def refused(serving: ServingSetup, load: Load = CLIENTS) -> str:
    start = time.process_time()
    with pytest.raises(UsageError) as raised:
        predict(serving, 8192, 1024, load)
    assert time.process_time() - start < 0.5
    return str(raised.value)


@pytest.mark.parametrize("num_blocks", [0, 1, 500, ONE_REQUEST_BLOCKS])
def test_a_kv_cache_that_cannot_hold_one_request_is_refused(num_blocks):
    """The pool less vLLM's null block: 0 blocks (weights fill the GPU), a prompt's first chunk that does not
    fit, a prompt that fits but not with its output."""
    message = refused(setup(num_blocks))
    assert f"needs {ONE_REQUEST_BLOCKS} KV blocks and the KV cache holds {max(num_blocks - 1, 0)}" in message
    assert "--gpu-memory-utilization" in message


def test_a_kv_cache_that_holds_exactly_one_request_serves_them_one_at_a_time():
    """Four clients or eight requests at once: either way one request runs at a time, at the same rate."""
    run = predict(setup(ONE_REQUEST_BLOCKS + 1), 8192, 1024, CLIENTS)
    flood = predict(setup(ONE_REQUEST_BLOCKS + 1), 8192, 1024, Load(8))
    assert run.metrics["completed"] == 8 and run.bound == "kv_capacity"
    assert run.metrics["request_throughput"] == pytest.approx(flood.metrics["request_throughput"], rel=0.02)


@pytest.mark.parametrize("limit", ["max_num_seqs", "max_num_batched_tokens", "block_size"])
def test_scheduler_limits_that_run_no_request_are_refused(limit):
    assert f"{limit} 0 lets the scheduler run no request" in refused(setup(**{limit: 0}))


def test_a_token_budget_smaller_than_a_block_still_serves_every_request():
    run = predict(setup(max_num_batched_tokens=8), 1000, 20, Load(4, math.inf, 2))
    assert run.metrics["completed"] == 4 and run.bound == "step_budget"


@pytest.mark.parametrize(
    "load, flag",
    [
        (dict(request_rate=0.0), "--request-rate"),
        (dict(num_prompts=0), "--num-prompts"),
        (dict(max_concurrency=0), "--max-concurrency"),
        (dict(burstiness=0.0), "--burstiness"),
    ],
)
def test_loads_that_send_nothing_are_refused(load, flag):
    with pytest.raises(UsageError, match=f"{flag} 0"):
        Load(**load)


@pytest.mark.parametrize("flag", ["--request-rate", "--max-concurrency", "--num-prompts"])
def test_zero_loads_on_the_command_line_are_one_line_exit_2(flag):
    result = CliRunner().invoke(app, ["plan", "-m", "qwen3-8b", "--gpu", "H100", "--workload", "512:64", flag, "0"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and flag in result.stderr
