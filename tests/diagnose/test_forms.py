"""Each kind of failure diagnose used to miss, the same facts written several ways: prose, a table, another order,
a wrapper's form, another language. The cause comes from what the numbers say (rules.py), not from a wording."""

import pytest

from kvtool.engine.diagnosis import diagnose_text
from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES


def causes(text: str) -> list:
    """The memory and length findings of `text`, in order."""
    return [f for f in diagnose_text(text).findings if f.category in MEMORY_AND_LENGTH_CATEGORIES]


def first(text: str):
    found = causes(text)
    assert found, "no memory or length finding"
    return found[0]


# -- answers cut at a default cap, told as symptoms --------------------------------------------------------------

CUT_AT_A_DEFAULT = {
    "prose": "Our answers get cut off after a sentence or two. We call the OpenAI-compatible endpoint from our RAG tool "
    "and do not pass max_tokens at all.",
    "chinese": "回答总是被截断，只输出了一半。请求里没有设置 max_tokens，用的是默认参数。",
    "server flag": "I start the server with --max-tokens 4096 --max-model-len 16384, yet every reply still ends with "
    "finish_reason: length.",
    "usage block": '{"choices": [{"text": "The capital of France is Paris, a city", "finish_reason": "length"}], '
    '"usage": {"prompt_tokens": 12, "completion_tokens": 16, "total_tokens": 28}}',
    "a chat UI that ignores the setting": "Open WebUI in front of vLLM: replies are cropped after about 16 tokens. "
    "The max tokens setting in the UI seems ignored.",
    "chinese, a wrapper": "通过 Dify 调用 vLLM，回答输出不全。max_tokens 不生效。",
    "wrapper default": "llm = VLLMOpenAI(openai_api_base='http://localhost:8000/v1', model_name='qwen')\n"
    "print(llm.invoke('Write an essay about the sea'))  # the essay is truncated mid-sentence",
    "round cap in a repr": "client.completions.create(model='qwen', prompt=essay_prompt)\n"
    "Completion(choices=[Choice(finish_reason='length', text='...')], "
    "usage=CompletionUsage(completion_tokens=256, prompt_tokens=40, total_tokens=296))",
}


@pytest.mark.parametrize("text", CUT_AT_A_DEFAULT.values(), ids=CUT_AT_A_DEFAULT)
def test_answers_cut_at_a_default_cap(text):
    finding = first(text)
    assert finding.category == "max_tokens_default_truncation"
    assert finding.fixes[0].param == "max_tokens"


def test_the_cap_an_answer_stopped_at_is_the_default_it_got():
    assert first(CUT_AT_A_DEFAULT["usage block"]).numbers["default_max_tokens"] == 16
    assert first(CUT_AT_A_DEFAULT["round cap in a repr"]).numbers["default_max_tokens"] == 256
    assert first(CUT_AT_A_DEFAULT["wrapper default"]).numbers["default_max_tokens"] == 256  # LangChain's VLLMOpenAI


@pytest.mark.parametrize(
    "text",
    [
        '{"choices": [{"text": "Hello! How can I help?", "finish_reason": "stop"}], "usage": {"completion_tokens": 16}}'
        "\nThe answers are truncated, we send no max_tokens.",
        "回答被截断了，没有设置 max_tokens。\n"
        '{"choices":[{"message":{"content":"你好"},"finish_reason":"stop"}],"usage":{"completion_tokens":97}}',
        "Completion(choices=[Choice(finish_reason='length')], usage=CompletionUsage(completion_tokens=256)) "
        "for a request with max_tokens=256",
    ],
    ids=["stop in English", "stop in Chinese", "the cap it asked for"],
)
def test_an_answer_that_ended_by_itself_or_at_its_own_cap_is_no_default(text):
    assert "max_tokens_default_truncation" not in [f.category for f in causes(text)]


# -- throughput or latency collapsing near a full KV cache ------------------------------------------------------

KV_PRESSURE = {
    "markdown table": "| concurrency | KV cache usage (%) | TPOT (ms) | waiting |\n|---|---|---|---|\n"
    "| 32 | 70.1 | 28 | 0 |\n| 64 | 96.8 | 212 | 45 |\n",
    "csv": "concurrency,gpu_kv_cache_usage,median_tpot_ms\n16,0.58,30.1\n128,0.99,402.7\n",
    "prose": "Once the KV cache usage passes 95%, TPOT jumps from 30 ms to 400 ms; running stays at 48 while waiting "
    "grows to 300.",
    "chinese": "并发 64 时 KV 缓存使用率达到 98%，TPOT 从 30 ms 涨到 210 ms，排队 120 个请求。",
    "two requests": "Only two requests are running and the KV cache usage is 100%, throughput dropped to nothing.",
    "stats lines rising": "\n".join(
        f"INFO 07-28 06:4{minute}:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
        f"generation throughput: 239.2 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: {usage:.1f}%, "
        "Prefix cache hit rate: 0.0%"
        for minute, usage in ((0, 88.0), (1, 90.5), (2, 92.9))
    ),
}


@pytest.mark.parametrize("text", KV_PRESSURE.values(), ids=KV_PRESSURE)
def test_a_full_kv_cache_under_load_is_preemption(text):
    finding = first(text)
    assert finding.category == "preemption" and finding.stage == "runtime"
    assert finding.numbers["kv_cache_usage_percent"] >= 90
    assert any(fix.flag == "--max-num-seqs" or fix.flag == "--gpu-memory-utilization" for fix in finding.fixes)


@pytest.mark.parametrize(
    "text",
    [
        "| concurrency | KV cache usage (%) | TPOT (ms) |\n|---|---|---|\n| 8 | 12.0 | 25 |\n| 16 | 31.5 | 27 |\n",
        "KV cache usage is 45% and TPOT is a steady 30 ms.",
        "Running: 48 reqs, Waiting: 0 reqs, GPU KV cache usage: 92.4%, Prefix cache hit rate: 10.0%",
    ],
    ids=["a cache half empty", "prose, a cache half empty", "one stats line, nothing waiting"],
)
def test_a_cache_with_room_or_no_sign_of_load_is_no_pressure(text):
    assert "preemption" not in [f.category for f in causes(text)]


# -- new or reworded messages, and old ones retyped -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "We run it with tp 4 and see 'No available memory for the cache blocks' right after loading.",
        "vLLM says “no available memory for the cache blocks” and exits",
        "报错 No available memory for the cache blocks，已经把 gpu_memory_utilization 调到 0.95 了",
    ],
    ids=["quoted in prose", "curly quotes, lowercase", "in a Chinese sentence"],
)
def test_a_message_quoted_in_a_sentence_is_still_the_message(text):
    assert first(text).category == "no_cache_blocks"


HELD_ELSEWHERE = {
    "newer wording": "ValueError: Available memory on device cuda:0 (10.2/24.0 GiB) is below required GPU memory "
    "utilization (0.9, 21.6 GiB).",
    "retyped in lowercase": "the error says free memory on device (10.2/24.0 gib) on startup is less than desired gpu "
    "memory utilization (0.9, 21.6 gib)",
    "prose": "Only 10.2 GiB free out of 24 GB when vLLM starts, but gpu_memory_utilization is 0.9, so it fails.",
}


@pytest.mark.parametrize("text", HELD_ELSEWHERE.values(), ids=HELD_ELSEWHERE)
def test_free_memory_below_the_utilization_is_memory_held_elsewhere(text):
    finding = first(text)
    assert finding.category == "gpu_memory_held_by_others"
    assert (finding.numbers["free_gib"], finding.numbers["total_gib"]) == (10.2, 24.0)
    assert finding.fixes[0].flag == "--gpu-memory-utilization" and finding.fixes[0].value == 0.42


TOO_LONG = {
    "Prompt length of": "ValueError: Prompt length of 9000 is longer than the maximum model length of 8192.",
    "retyped": "this model's maximum context length is 4096 tokens, however you requested 5000 tokens (4000 in the "
    "messages, 1000 in the completion)",
    "a wrapper's warning": "[WARNING:swift] max_model_len(8192) - num_tokens(9000) < max_tokens(512). Setting "
    "max_tokens: -1320",
    "chinese": "报错：输入长度 9000 超过了最大长度 8192",
}


@pytest.mark.parametrize(
    "text",
    [
        "Error: requested max_tokens 40000 exceeds the max_model_len 32768",
        '{"error": "max_new_tokens=40000 is larger than the context length of 32768"}',
        "报错：max_tokens 40000 超过了上下文长度 32768",
    ],
    ids=["prose", "a frontend's body", "chinese"],
)
def test_max_tokens_alone_over_the_context_is_request_too_long(text):
    finding = first(text)
    assert finding.category == "request_too_long" and finding.numbers["max_tokens"] == 40000


@pytest.mark.parametrize("text", TOO_LONG.values(), ids=TOO_LONG)
def test_a_prompt_over_the_context_in_any_words_is_request_too_long(text):
    finding = first(text)
    assert finding.category == "request_too_long"
    assert finding.numbers["prompt_tokens"] + finding.numbers.get("max_tokens", 0) > finding.numbers["max_model_len"]


KV_SHORT = {
    "prose": "vLLM fails: the KV cache needs 16 GiB but only 9.6 GiB is available, with --max-model-len 131072",
    "retyped v0 message": "error: max seq len 32768 is larger than what the KV cache can hold (16816 tokens)",
    "chinese": "启动报错：上下文长度 32768，KV cache 只能存 16816 个 token，超出了",
}


@pytest.mark.parametrize("text", KV_SHORT.values(), ids=KV_SHORT)
def test_a_kv_cache_short_of_one_request_in_any_words(text):
    finding = first(text)
    assert finding.category == "kv_cache_too_small_at_startup"
    assert finding.fixes[0].flag == "--max-model-len" and finding.fixes[0].value < finding.numbers["max_model_len"]


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: max_num_scheduled_tokens is set to -512, which does not allow any tokens to be scheduled.",
        "Value error, max_num_batched_tokens (2048) is smaller than max_model_len (40960).",
        "the step budget max_num_batched_tokens=4096 is less than max_model_len=32768 with chunked prefill off",
    ],
    ids=["no tokens to schedule, reworded", "pydantic's", "prose"],
)
def test_a_step_budget_below_what_it_must_hold(text):
    assert first(text).category == "batched_tokens_lt_model_len"


# -- unified-memory devices -------------------------------------------------------------------------------------

UNIFIED = {
    "DGX Spark": "Running on a DGX Spark (GB10).\nValueError: Free memory on device cuda:0 (78.3/119.7 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 107.73 GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes.",
    "Ryzen AI APU": "Ryzen AI Max+ 395 (gfx1151), 96 GB carved out for the GPU: free memory on device (78.3/119.7 "
    "GiB) is below the desired gpu memory utilization (0.9, 107.73 GiB)",
    "Jetson, in Chinese": "Jetson AGX Thor 上启动 vLLM 报错，可用显存 78.3/119.7 GiB，低于 gpu_memory_utilization 0.9 要求的 "
    "107.73 GiB",
}


@pytest.mark.parametrize("text", UNIFIED.values(), ids=UNIFIED)
def test_on_a_unified_memory_device_the_fix_is_the_largest_utilization_that_fits(text):
    finding = first(text)
    assert finding.category == "gpu_memory_held_by_others" and "unified-memory" in finding.summary
    assert (finding.fixes[0].flag, finding.fixes[0].value) == ("--gpu-memory-utilization", 0.65)


# -- out-of-memory errors whose traceback is elided, placed by the load ------------------------------------------

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.02 GiB is free.\n[... traceback elided ...]\n"
)
LOADED = {
    "a client's concurrency": "vllm bench serve --model m --max-concurrency 1024 --num-prompts 5000\n" + OOM,
    "prose": "Our client sends 1,024 requests at once (concurrency 1024) and after a minute:\n" + OOM,
    "chinese": "压测时并发 512，跑了几分钟后报错：\n" + OOM,
    "told in words": "The server ran fine for an hour under load, then:\n" + OOM,
    "stats line": "INFO 01-10 09:00:00 [loggers.py:259] Engine 000: Avg prompt throughput: 9000.0 tokens/s, Avg "
    "generation throughput: 800.0 tokens/s, Running: 200 reqs, Waiting: 57 reqs, GPU KV cache usage: 99.6%\n" + OOM,
}


@pytest.mark.parametrize("text", LOADED.values(), ids=LOADED)
def test_an_elided_oom_under_load_happened_while_serving(text):
    finding = first(text)
    assert finding.category == "cuda_oom_runtime" and finding.stage == "runtime"


def test_the_same_oom_alone_says_its_stage_is_unknown():
    assert first(OOM).stage == "unknown"


# -- NPU builds that print vLLM's messages behind their own prefixes -------------------------------------------

NPU = {
    "CANN prefix": "[ERROR] 2025-06-30-13:53:19 (PID:3926, Device:0, RankID:-1) ERR99999 UNKNOWN application "
    "exception\nValueError: Free memory on device npu:0 (16.61/61.27 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 55.14 GiB).",
    "torch_npu's OOM": "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; "
    "57.21 GiB already allocated; 1.31 GiB free; 57.82 GiB reserved in total by PyTorch)",
    "ascend scheduler": "(EngineCore_DP0 pid=9) [ascend] Value error, Ascend scheduler is enabled without chunked "
    "prefill feature. Argument max_num_batched_tokens (4096) is smaller than max_model_len (32768).",
}


@pytest.mark.parametrize(
    "text, category",
    list(zip(NPU.values(), ("gpu_memory_held_by_others", "cuda_oom_startup", "batched_tokens_lt_model_len"))),
    ids=NPU,
)
def test_npu_builds_read_as_vllm(text, category):
    assert first(text).category == category


# -- what is not a memory or length failure stays so -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "vllm serve m --max-model-len 131072 --gpu-memory-utilization 0.95\nRuntimeError: NCCL error: unhandled "
        "system error",
        "The answer is 16 tokens long and ends with finish_reason stop; max_tokens is 16 as we set it.",
        "| model | context length | price |\n|---|---|---|\n| a | 8192 | 0.5 |\n| b | 131072 | 2.0 |\n",
    ],
    ids=["launch beside an NCCL error", "a short answer on purpose", "a table of models"],
)
def test_numbers_alone_name_no_cause(text):
    assert not causes(text)


# -- a start-up whose error is cut off, sized by plan's memory model ----------------------------------------------

FAILED = "(EngineCore_DP0 pid=1) ERROR 01-01 10:00:00 [core.py:708] EngineCore failed to start.\n"
LAUNCHES = {
    "vllm serve on a named GPU": "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.9 on my RTX "
    "4090\n" + FAILED,
    "LLM() with the GPU's memory": "llm = LLM(model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=131072)\n"
    "The card has 24 GB VRAM.\nRuntimeError: Engine core initialization failed. See root cause above.\n",
    "compose command": "    command: --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072\n"
    "    # one L4 per replica\n" + FAILED,
}


@pytest.mark.parametrize("text", LAUNCHES.values(), ids=LAUNCHES)
def test_a_launch_whose_error_is_cut_off_is_sized_by_the_memory_model(text):
    finding = first(text)
    assert finding.category == "kv_cache_too_small_at_startup"
    assert finding.sources["estimated_max_model_len"] == "estimated" and any("estimate" in n for n in finding.notes)
    assert finding.fixes[0].flag == "--max-model-len" and finding.fixes[0].value < 131072


def test_a_launch_beside_an_error_of_another_kind_is_not_sized():
    text = LAUNCHES["vllm serve on a named GPU"] + "RuntimeError: NCCL error: unhandled system error\n"
    assert not causes(text)


def test_a_launch_that_fits_its_gpu_names_no_cause():
    text = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 on one H100\n" + FAILED
    assert not causes(text)
