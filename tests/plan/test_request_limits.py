"""Per-request length checks: vLLM's messages and the reject / clamp policies."""

import pytest

from kvtool.engine.sizing.request_length import RequestTooLongError, check_request_length


def test_room_left_when_max_tokens_is_omitted():
    assert check_request_length(1000, None, 4096) == 3096


def test_max_tokens_that_fit_are_kept():
    assert check_request_length(1000, 3096, 4096) == 3096


def test_prompt_alone_too_long_is_refused_even_when_clamping():
    with pytest.raises(RequestTooLongError) as caught:
        check_request_length(5000, None, 4096, overflow="clamp")
    assert caught.value.param == "input_tokens"
    assert str(caught.value) == (
        "This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens, "
        "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
    )


def test_prompt_filling_the_context_leaves_no_room():
    with pytest.raises(RequestTooLongError, match=r"plus the number of requested output tokens \(at least 1\)"):
        check_request_length(4096, 10, 4096)


def test_max_tokens_above_context_is_refused():
    with pytest.raises(RequestTooLongError) as caught:
        check_request_length(10, 5000, 4096, overflow="clamp")
    assert caught.value.param == "max_tokens"
    assert str(caught.value) == (
        "max_tokens=5000 cannot be greater than max_model_len=4096. Please request fewer output tokens."
    )


def test_overflow_reject_uses_the_total_message():
    with pytest.raises(RequestTooLongError) as caught:
        check_request_length(3000, 2000, 4096, overflow="reject")
    assert (
        "you requested 2000 output tokens and your prompt contains 3000 input tokens, for a total of 5000 "
        "tokens" in str(caught.value)
    )


def test_overflow_clamp_lowers_max_tokens_to_the_room_left():
    assert check_request_length(3000, 2000, 4096, overflow="clamp") == 1096
