"""`kvtool plan` predicts the KV cache the engine allocates for the same budget."""

import json

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.engine.sizing.messages import kv_cache_size_log


@pytest.mark.slow
def test_plan_predicts_the_engine_kv_cache(smollm2_llm):
    engine = smollm2_llm.engine
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--model",
            "smollm2",
            "--dtype",
            "float32",
            "--kv-cache-memory",
            "256MiB",
            "--max-model-len",
            str(engine.config.model_config.max_model_len),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    predicted, allocated = json.loads(result.stdout), engine.kv_cache_info
    assert predicted["num_blocks"] == allocated.num_blocks
    assert predicted["kv_cache_tokens"] == allocated.kv_cache_tokens
    assert predicted["kv_bytes_per_token"] == allocated.kv_bytes_per_token
    logged = kv_cache_size_log(allocated.kv_cache_tokens, allocated.max_model_len, allocated.max_concurrency, "CPU")
    assert (
        kv_cache_size_log(predicted["kv_cache_tokens"], predicted["max_model_len"], predicted["max_concurrency"], "CPU")
        == logged
    )
