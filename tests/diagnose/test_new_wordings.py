"""The wordings of vLLM 0.2x and of servers in front of vLLM, each pasted the ways people paste it: bare,
behind each process prefix, wrapped in a traceback, inside a JSON error body and a client's repr of one."""

import json
import textwrap

import pytest

from kvtool.engine.diagnosis import diagnose_text

PREFIXES = (
    "(APIServer pid=1) ERROR 08-12 10:11:12 [serving.py:123] ",
    "(EngineCore_DP0 pid=812) ERROR 08-12 10:11:12 [core.py:708] ",
    "(VllmWorker rank=3 pid=4711) ERROR 08-12 10:11:12 [multiproc_executor.py:470] ",
)
HOW = ("bare", "prefixed 0", "prefixed 1", "prefixed 2", "traceback", "JSON body", "client repr")


def pasted(message: str, how: str) -> str:
    if how == "bare":
        return message
    if how.startswith("prefixed"):
        prefix = PREFIXES[int(how[-1])]
        return "".join(prefix + line + "\n" for line in textwrap.wrap(message, 100))
    if how == "traceback":
        lines = ["Traceback (most recent call last):", '  File "/usr/lib/python3.12/site-packages/vllm/x.py", line 9']
        lines += textwrap.wrap(message, 80)
        return "".join(PREFIXES[1] + line + "\n" for line in lines)
    body = {"error": {"message": message, "type": "BadRequestError", "param": "max_tokens", "code": 400}}
    if how == "JSON body":
        return json.dumps(body)
    return f"openai.BadRequestError: Error code: 400 - {body!r}"


WORDINGS = [
    (
        "VLLMValidationError, 0.32+",
        "vllm.exceptions.VLLMValidationError: This model's maximum context length is 32768 tokens. However, your "
        "prompt contains 33000 input tokens, which exceeds this limit even without any output tokens. Please reduce "
        "the length of the input prompt. (parameter=input_tokens, value=33000)",
        "request_too_long",
        dict(max_model_len=32768, prompt_tokens=33000, trim_tokens=233),
    ),
    (
        "'max_tokens' or 'max_completion_tokens' is too large",
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 16384 "
        "tokens and your request has 13000 input tokens (4096 > 16384 - 13000).",
        "request_too_long",
        dict(max_model_len=16384, prompt_tokens=13000, max_tokens=4096, largest_max_tokens=3384),
    ),
    (
        "a gateway's input tokens plus max_tokens",
        "This model's maximum context length is 8192 tokens. However, your request has 7000 input tokens plus 2000 "
        "'max_tokens'.",
        "request_too_long",
        dict(max_model_len=8192, prompt_tokens=7000, max_tokens=2000, overflow_tokens=808),
    ),
    (
        "max_tokens=Ncannot, 0.16-0.19",
        "max_tokens=8192cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output "
        "tokens. (parameter=max_tokens, value=8192)",
        "request_too_long",
        dict(max_model_len=4096, max_tokens=8192),
    ),
    (
        "despite its name, 0.22+",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its "
        "name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
        "no_cache_blocks",
        {},
    ),
    (
        "max_num_scheduled_tokens is set to -N, 0.20+",
        "ValueError: max_num_scheduled_tokens is set to -1024 based on the speculative decoding settings, which does "
        "not allow any tokens to be scheduled. Increase max_num_batched_tokens to accommodate the additional draft "
        "token slots, or decrease num_speculative_tokens.",
        "batched_tokens_lt_model_len",
        dict(max_num_scheduled_tokens=-1024),
    ),
    (
        "pydantic's SchedulerConfig error, 0.24+",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig Value error, "
        "max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively limits the maximum "
        "sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
        "max_num_batched_tokens or decrease max_model_len. [type=value_error, input_value=ArgsKwargs((), {}), "
        "input_type=ArgsKwargs]",
        "batched_tokens_lt_model_len",
        dict(max_num_batched_tokens=2048, max_model_len=8192),
    ),
    (
        "vllm-ascend's scheduler without chunked prefill",
        "Value error, Ascend scheduler is enabled without chunked prefill feature. Argument max_num_batched_tokens "
        "(4096) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to "
        "max_num_batched_tokens and makes vLLM reject longer sequences.",
        "batched_tokens_lt_model_len",
        dict(max_num_batched_tokens=4096, max_model_len=32768),
    ),
    (
        "the multimodal profiling length, 0.8.5-0.11",
        "The sequence length used for profiling (max_num_batched_tokens / max_num_seqs = 32) is too short to hold "
        "the multi-modal embeddings in the worst case (16384 tokens in total, out of which {'image': 16384} are "
        "reserved for multi-modal embeddings). This may cause certain multi-modal inputs to fail during inference, "
        "even when the input text is short.",
        "batched_tokens_lt_model_len",
        dict(profiling_seq_len=32, mm_worst_case_tokens=16384),
    ),
    (
        "the multimodal context length, 0.6.6-0.7.3",
        "The context length (2048) of the model is too short to hold the multi-modal embeddings in the worst case "
        "(2880 tokens in total, out of which {'image': 2880} are reserved for multi-modal embeddings).",
        "batched_tokens_lt_model_len",
        dict(profiling_seq_len=2048, mm_worst_case_tokens=2880),
    ),
    (
        "v0's prompt limit",
        "Input prompt (36893 tokens) is too long and exceeds limit of 2048",
        "request_too_long",
        dict(prompt_tokens=36893, prompt_limit=2048),
    ),
    (
        "a KV cache too small, 0.34, without its stray parenthesis",
        "ValueError: To serve at least one request with the model's max seq len (1048576), 22.5 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (17.39 GiB). Based on the available memory, the "
        "estimated maximum model length is 810208. The KV cache gets what is left after the model and its "
        "activations within `gpu_memory_utilization`=0.9; increase it.",
        "kv_cache_too_small_at_startup",
        dict(max_model_len=1048576, kv_needed_gib=22.5, kv_available_gib=17.39, estimated_max_model_len=810208),
    ),
]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name, message, category, numbers", WORDINGS, ids=[w[0] for w in WORDINGS])
def test_a_wording_is_read_however_pasted(name, message, category, numbers, how):
    findings = diagnose_text(pasted(message, how)).findings
    assert findings and findings[0].category == category, [f.category for f in findings]
    assert {key: findings[0].numbers.get(key) for key in numbers} == numbers


def test_the_v0_prompt_limit_names_both_limits_unless_the_log_tells():
    message = (
        "WARNING 10-10 20:41:04 scheduler.py:1090] Input prompt (3000 tokens) is too long and exceeds limit of 2048\n"
    )
    [alone] = diagnose_text(message).findings
    assert alone.category == "request_too_long" and alone.alternatives[0].category == "batched_tokens_lt_model_len"
    context_len = "INFO 10-10 20:00:00 llm_engine.py:1] Initializing an LLM engine with config: max_seq_len=2048\n"
    [by_context] = diagnose_text(context_len + message).findings
    assert by_context.category == "request_too_long" and not by_context.alternatives
    budget = "INFO 10-10 20:00:00 config.py:1] Chunked prefill is enabled with max_num_batched_tokens=2048.\n"
    [by_budget] = diagnose_text(budget + message).findings
    assert (
        by_budget.category == "batched_tokens_lt_model_len" and by_budget.alternatives[0].category == "request_too_long"
    )
    assert by_budget.fixes[0].flag == "--max-num-batched-tokens" and by_budget.fixes[0].value == 3072
    mla = "INFO 02-01 10:00:00 config.py:3329] MLA is enabled; forcing chunked prefill and prefix caching to be disabled.\n"
    [forced] = diagnose_text(mla + message).findings
    assert forced.category == "batched_tokens_lt_model_len"
    assert [fix.flag for fix in forced.fixes] == ["--max-num-batched-tokens"]  # chunked prefill cannot come back


def test_the_speculative_budget_fix_leaves_the_tokens_vllm_asks_for():
    launch = "vllm serve m --max-num-batched-tokens 4096 --max-num-seqs 256\n"
    message = (
        "ValueError: max_num_scheduled_tokens is set to -1024 based on the speculative decoding settings, which does "
        "not allow any tokens to be scheduled.\n"
    )
    [finding] = diagnose_text(launch + message).findings
    assert finding.numbers["max_num_batched_tokens_needed"] == 4096 + 1024 + 8192
    assert [fix.value for fix in finding.fixes[:2]] == [13312, 128]


def test_the_multimodal_profiling_fix_gives_each_sequence_the_worst_case():
    launch = "vllm serve m --max-num-batched-tokens 8192 --max-num-seqs 256\n"
    message = WORDINGS[8][1]
    [finding] = diagnose_text(launch + message).findings
    assert finding.numbers["max_num_batched_tokens_needed"] == 16384 * 256
    assert [fix.flag for fix in finding.fixes] == [
        "--max-num-batched-tokens",
        "--max-num-seqs",
        "--limit-mm-per-prompt",
    ]
