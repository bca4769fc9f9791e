"""The 15 real start-up logs of tests/plan/startup_logs/logs.jsonl through diagnose: what it reads from them is
what vLLM printed (its tightest rank where every rank prints its own), a log that started gives no finding, and
a failed one gets fixes whose numbers are vLLM's and would start."""

import json
from pathlib import Path

import pytest

from kvtool.engine.diagnosis import diagnose_text

LOGS = [json.loads(line) for line in (Path(__file__).parents[1] / "plan" / "startup_logs" / "logs.jsonl").open()]
# the log's record -> diagnose's context
PRINTED = {
    "reported_kv_tokens": "kv_cache_tokens",
    "reported_available_kv_gib": "available_kv_gib",
    "reported_weights_gib": "weights_gib",
    "reported_max_concurrency": "max_concurrency",
}


@pytest.mark.parametrize("log", LOGS, ids=[log["id"][:12] for log in LOGS])
def test_diagnose_reads_what_vllm_printed_and_a_started_log_is_no_failure(log):
    diagnosis = diagnose_text(log["log"])
    context = diagnosis.context
    for record, name in PRINTED.items():
        if log[record] is not None and log["startup_ok"]:
            assert getattr(context, name) == pytest.approx(log[record]), name
    if log["startup_ok"]:
        assert diagnosis.findings == []
        assert context.max_model_len == log["max_model_len"]


def test_of_ranks_that_printed_different_kv_caches_the_smallest_is_read():
    """vLLM 0.10.0 with TP 8: each rank prints its own budget (35.65 to 36.12 GiB), the engine keeps the least."""
    [log] = [log for log in LOGS if log["id"].startswith("s-11")]
    context = diagnose_text(log["log"]).context
    assert context.kv_cache_tokens == 99421 * 16 == 1_590_736  # the final num_gpu_blocks the engine printed
    assert (
        context.available_kv_gib == 35.65 and context.startup.rank_figures["available_kv_cache_memory_gib"][4] == 36.12
    )
