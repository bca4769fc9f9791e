"""The InputProcessor: every field checked at admission, named in the error, so that no step can raise on it."""

import pytest
from engine_cases import prompts_of

from kvtool.engine.runtime.config import SEED_MAX, SamplingParams
from kvtool.errors import InvalidRequestError

VOCAB = 256  # tests/engine/conftest.py TINY


@pytest.mark.parametrize(
    "params, field",
    [
        (dict(seed=2**64), "seed"),
        (dict(seed=-(2**63) - 1), "seed"),
        (dict(top_k=-2), "top_k"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(temperature=2.5), "temperature"),
        (dict(repetition_penalty=float("inf")), "repetition_penalty"),
        (dict(min_tokens=5, max_tokens=2), "min_tokens"),
        (dict(stop=[""]), "stop"),
    ],
)
def test_sampling_params_name_the_field_out_of_range(params, field):
    with pytest.raises(InvalidRequestError) as failure:
        SamplingParams(**params)
    assert failure.value.param == field


@pytest.mark.parametrize(
    "prompt, params, field, message",
    [
        ([VOCAB], {}, "prompt", f"Token id {VOCAB} is out of vocabulary"),
        ([-5], {}, "prompt", "Token id -5 is out of vocabulary"),
        (
            [1, 2],
            dict(stop_token_ids=[10**9], min_tokens=2),
            "stop_token_ids",
            f"token_id(s) [1000000000] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: {VOCAB} "
            "(parameter=stop_token_ids, value=[1000000000])",
        ),
        (
            [1, 2],
            dict(logit_bias={str(VOCAB): 5}),
            "logit_bias",
            f"token_id(s) [{VOCAB}] in logit_bias contain out-of-vocab token ids. Vocabulary size: {VOCAB} "
            f"(parameter=logit_bias, value=[{VOCAB}])",
        ),
        (
            [1, 2],
            dict(allowed_token_ids=[3, -1]),
            "allowed_token_ids",
            "allowed_token_ids contains out-of-vocab token id! (parameter=allowed_token_ids, value=[-1])",
        ),
        ([1, 2], dict(allowed_token_ids=[]), "allowed_token_ids", "allowed_token_ids is not None and empty!"),
        ([1, 2], dict(stop_token_ids=[-1]), "stop_token_ids", None),
        (
            [1, 2],
            dict(logprobs=21),
            "logprobs",
            "Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)",
        ),
        ([], {}, "prompt", "The decoder prompt cannot be empty"),
    ],
)
def test_the_offline_engine_refuses_what_would_break_a_step(tiny_llm, prompt, params, field, message):
    with pytest.raises(InvalidRequestError) as failure:
        tiny_llm.generate([prompt], SamplingParams(max_tokens=4, **params), use_tqdm=False)
    assert failure.value.param == field
    assert message is None or failure.value.message == message
    assert not tiny_llm.engine.has_unfinished_requests()


def test_text_with_a_lone_surrogate_is_refused_before_tokenizing(tiny_llm):
    processor = tiny_llm.engine.input_processor
    from kvtool.engine.runtime.input_processor import check_text

    with pytest.raises(InvalidRequestError) as failure:
        check_text("a\ud800b", "prompt")
    assert failure.value.param == "prompt" and "surrogate" in failure.value.message
    with pytest.raises(InvalidRequestError):
        processor.check_params(SamplingParams(stop=["\udfff"]))


def test_the_largest_seed_runs_n_sequences(tiny_llm):
    params = SamplingParams(n=2, max_tokens=3, seed=SEED_MAX, ignore_eos=True)
    output = tiny_llm.generate(prompts_of([5]), params, use_tqdm=False)[0]
    assert [c.index for c in output.outputs] == [0, 1] and all(len(c.token_ids) == 3 for c in output.outputs)
