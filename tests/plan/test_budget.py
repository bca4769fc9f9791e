"""Client-side max_tokens budgeting."""

import pytest

from kvtool.budget import PromptTooLongError, budget_max_tokens, server_max_model_len
from kvtool.errors import UsageError


def test_desired_max_tokens_that_fit_are_sent_as_is():
    assert budget_max_tokens(prompt_tokens=1000, max_model_len=4096, desired_max_tokens=1024) == 1024


def test_desired_max_tokens_are_lowered_to_the_room_left_minus_the_margin():
    assert budget_max_tokens(3500, 4096, desired_max_tokens=1024, safety_margin=16) == 4096 - 3500 - 16


def test_without_a_desired_value_the_whole_room_is_used():
    assert budget_max_tokens(1000, 4096) == 3096


def test_fractional_margin_is_a_share_of_the_prompt():
    assert budget_max_tokens(1000, 4096, safety_margin=0.05) == 4096 - 1000 - 50


def test_prompt_alone_too_long_names_how_much_to_cut():
    with pytest.raises(PromptTooLongError) as caught:
        budget_max_tokens(4090, 4096, desired_max_tokens=10, safety_margin=16)
    assert "Shorten the prompt by at least 11 tokens" in str(caught.value)
    assert isinstance(caught.value, UsageError)


def test_bad_arguments():
    with pytest.raises(UsageError):
        budget_max_tokens(10, 4096, desired_max_tokens=0)
    with pytest.raises(UsageError):
        budget_max_tokens(10, 4096, safety_margin=-1)


def test_max_model_len_from_a_models_listing():
    from openai.types import Model

    card = Model.model_validate(
        {"id": "smollm2", "object": "model", "created": 0, "owned_by": "kvtool", "max_model_len": 2048}
    )
    assert server_max_model_len(card) == 2048
    assert server_max_model_len({"id": "smollm2", "max_model_len": 4096}) == 4096
    assert server_max_model_len({"id": "gpt-4o"}) is None
