"""Request checks: vLLM's length errors, the clamp policy, bad prompts."""

import pytest
from engine_cases import prompts_of

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.request_length import RequestTooLongError, decide_max_tokens
from kvtool.errors import UsageError


@pytest.fixture(scope="module")
def short_llm(tiny_llama):
    return LLM(str(tiny_llama[0]), dtype="float32", max_model_len=64, kv_cache_memory=1 << 20, overflow="reject")


def test_prompt_plus_max_tokens_over_the_context_is_rejected(short_llm):
    with pytest.raises(RequestTooLongError) as failure:
        short_llm.generate(prompts_of([40]), SamplingParams(max_tokens=30), use_tqdm=False)
    assert failure.value.param == "max_tokens" or failure.value.param == "input_tokens"
    assert "64" in str(failure.value)
    assert not short_llm.engine.has_unfinished_requests()


def test_prompt_alone_over_the_context_is_rejected(short_llm):
    with pytest.raises(RequestTooLongError) as failure:
        short_llm.generate(prompts_of([70]), SamplingParams(max_tokens=1), use_tqdm=False)
    assert failure.value.param == "input_tokens"


def test_clamp_lowers_max_tokens_to_the_room_left(tiny_llama):
    llm = LLM(str(tiny_llama[0]), dtype="float32", max_model_len=64, kv_cache_memory=1 << 20, overflow="clamp")
    output = llm.generate(prompts_of([40]), SamplingParams(max_tokens=30, ignore_eos=True), use_tqdm=False)[0]
    assert len(output.outputs[0].token_ids) == 24 and output.outputs[0].finish_reason == "length"


def test_max_tokens_none_means_the_rest_of_the_context(short_llm):
    output = short_llm.generate(prompts_of([50]), SamplingParams(max_tokens=None, ignore_eos=True), use_tqdm=False)[0]
    assert len(output.outputs[0].token_ids) == 14


@pytest.mark.parametrize(
    "requested, default, overflow, value, clamped",
    [
        (None, None, "reject", 24, False),  # the rest of the context
        (10, 100, "reject", 10, False),  # the request's own value wins over the profile's default
        (None, 100, "reject", 24, False),  # a profile's default is lowered to the room, never refused
        (None, 100, "clamp", 24, False),
        (30, None, "clamp", 24, True),  # a request's value over the room is lowered under clamp ...
    ],
)
def test_max_tokens_is_the_least_of_the_room_and_the_request_or_the_default(
    requested, default, overflow, value, clamped
):
    decided = decide_max_tokens(40, 64, requested, default, overflow)
    assert (decided.value, decided.clamped) == (value, clamped)


def test_a_requested_max_tokens_over_the_room_is_refused_under_reject():
    with pytest.raises(RequestTooLongError) as failure:  # ... and refused under reject, as vLLM <= 0.31
        decide_max_tokens(40, 64, 30, 100, "reject")
    assert failure.value.param == "input_tokens" and "for a total of 70 tokens" in str(failure.value)


@pytest.mark.parametrize("prompt", [[], [3, 9999], ["a"]])
def test_bad_token_prompts_are_usage_errors(short_llm, prompt):
    with pytest.raises(UsageError):
        short_llm.generate([prompt] if prompt else [[]], use_tqdm=False)


def test_text_prompt_without_a_tokenizer_is_a_usage_error(short_llm):
    with pytest.raises(UsageError, match="no tokenizer"):
        short_llm.generate("hello", use_tqdm=False)


@pytest.mark.parametrize(
    "bad",
    [
        dict(dtype="float64"),
        dict(kv_cache_dtype="int4"),
        dict(block_size=0),
        dict(overflow="drop"),
        dict(gpu_memory_utilization=1.5),
        dict(tensor_parallel_size=2),
    ],
)
def test_bad_engine_config_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        EngineArgs(**bad).check_for_engine()


def test_unknown_engine_argument_is_named():
    with pytest.raises(UsageError, match="max_num_seq"):
        EngineArgs.from_kwargs(max_num_seq=4)


def test_the_offline_engine_words_length_errors_as_the_server(short_llm):
    """One InputProcessor for every entry point: vLLM 0.33's messages, with the parameter suffix, offline too."""
    with pytest.raises(RequestTooLongError) as failure:
        short_llm.generate(prompts_of([40]), SamplingParams(max_tokens=30), use_tqdm=False)
    assert str(failure.value) == (
        "This model's maximum context length is 64 tokens. However, you requested 30 output tokens and your prompt "
        "contains 40 input tokens, for a total of 70 tokens. Please reduce the length of the input prompt or the "
        "number of requested output tokens. (parameter=input_tokens, value=40)"
    )
    with pytest.raises(RequestTooLongError) as failure:
        short_llm.generate(prompts_of([64]), SamplingParams(max_tokens=None), use_tqdm=False)
    assert (failure.value.param, str(failure.value)) == (
        "max_tokens",
        "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
    )
