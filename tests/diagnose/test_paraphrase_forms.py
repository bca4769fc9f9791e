"""vLLM's messages told in other words, and what a paste shows beside them: a KV shortage paraphrased in chat, a
client's "no limit" max_tokens that vLLM refuses (no long prompt), another process nvidia-smi lists beside a start-up
that left no KV cache."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES


def causes(text: str) -> list:
    return [f for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


@pytest.mark.parametrize(
    "text",
    [
        "vllm won't come up: it says 16 GiB of KV cache is needed for the max seq len but only 7.2 GiB is available, "
        "and suggests an estimated max model length of 58976.",
        "The engine refuses to start because the KV cache needs 16 GiB and the available KV cache memory is 7.2 GiB "
        "(estimated maximum model length 58976).",
        "启动失败：KV cache is needed 16 GiB, but only 7.2 GiB available, estimated max model length of 58976",
    ],
    ids=["chat", "another order", "chinese and english"],
)
def test_a_kv_shortage_told_in_other_words(text):
    [finding, *_] = causes(text)
    assert finding.category == "kv_cache_too_small_at_startup"
    assert (finding.numbers["kv_needed_gib"], finding.numbers["kv_available_gib"]) == (16.0, 7.2)
    assert finding.numbers["estimated_max_model_len"] == 58976


NO_LIMIT = {
    "a chat app's node": 'Node error: "400 max_tokens must be at least 1, got -1." In the node options "Maximum Number '
    'of Tokens" is -1, which the tooltip says means no limit.',
    "a client's config": "openai.BadRequestError: Error code: 400 - {'error': {'message': 'max_tokens must be at least "
    "1, got -1.'}}\nour gateway config: max_tokens: -1  # unlimited",
    "spanish": "Error 400: max_tokens must be at least 1, got -1. En la app puse max_tokens = -1 (sin límite).",
}


@pytest.mark.parametrize("text", NO_LIMIT.values(), ids=NO_LIMIT)
def test_a_clients_no_limit_max_tokens_is_no_long_prompt(text):
    diagnosis = diagnose_text(text)
    assert causes(text) == []
    [finding] = diagnosis.findings
    assert finding.category == "max_tokens_not_positive" and finding.fixes[0].param == "max_tokens"


def test_minus_one_alone_is_a_prompt_one_over_with_the_clients_literal_as_the_alternative():
    [finding] = causes("ValueError: max_tokens must be at least 1, got -1.")
    assert finding.category == "request_too_long"
    assert [a.category for a in finding.alternatives] == ["max_tokens_not_positive"]


def test_a_larger_negative_max_tokens_is_a_long_prompt_even_beside_no_limit_words():
    text = "max_tokens must be at least 1, got -239. We never set max_tokens (no limit on our side)."
    assert causes(text)[0].category == "request_too_long"


NO_BLOCKS = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."
SMI = {
    "csv query": "pid, process_name, used_memory [MiB]\n18233, /usr/bin/python3, 30718 MiB\n19102, python3, 518 MiB",
    "the table": "|    0   N/A  N/A     18233      C   /usr/bin/python3                          30718MiB |",
    "markdown": "| pid | process | used_memory (MiB) |\n|---|---|---|\n| 18233 | train.py | 30718 |",
}


@pytest.mark.parametrize("smi", SMI.values(), ids=SMI)
def test_another_process_listed_beside_no_blocks_is_the_alternative(smi):
    [finding] = causes(f"vllm serve m --gpu-memory-utilization 0.5\n{NO_BLOCKS}\n$ nvidia-smi\n{smi}")
    assert finding.category == "no_cache_blocks"
    assert [a.category for a in finding.alternatives] == ["gpu_memory_held_by_others"]
    assert finding.numbers["other_process_gib"] == pytest.approx(30.0, abs=0.01)


def test_no_blocks_alone_has_no_other_process_to_blame():
    [finding] = causes(NO_BLOCKS)
    assert finding.alternatives == []
