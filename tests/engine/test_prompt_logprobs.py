"""Prompt logprobs and the logprob fields, against HF transformers' logits of the same tiny model."""

import pytest
import torch
from engine_cases import prompts_of

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM
from kvtool.errors import InvalidRequestError

PROMPT = prompts_of([45], seed=3)[0]


def hf_logprobs(hf_model, token_ids: list[int]) -> torch.Tensor:
    """[positions, vocab]: position p's log-softmax, which predicts token p + 1."""
    with torch.no_grad():
        logits = hf_model(torch.tensor([token_ids])).logits[0]
    return logits.float().log_softmax(-1)


def prompt_logprobs(llm: LLM, prompt=PROMPT, num: int = 3) -> list:
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=num)
    return llm.generate([prompt], params, use_tqdm=False)[0].prompt_logprobs


def test_prompt_logprobs_equal_hf_at_every_position(tiny_llm, tiny_llama):
    scored = prompt_logprobs(tiny_llm)
    reference = hf_logprobs(tiny_llama[1], PROMPT)
    assert len(scored) == len(PROMPT) and scored[0] is None
    for position, entry in enumerate(scored[1:]):
        row, token = reference[position], PROMPT[position + 1]
        first_id, first = next(iter(entry.items()))
        assert first_id == token  # the prompt token comes first, with its rank in the vocabulary
        assert first.logprob == pytest.approx(float(row[token]), abs=1e-4)
        assert first.rank == int((row > row[token]).sum()) + 1
        top3 = row.topk(3).indices.tolist()
        assert set(entry) == {token, *top3} and len(entry) == len({token, *top3})


def test_a_chunked_prefill_scores_what_a_whole_one_does(tiny_llm, tiny_llama):
    chunked = LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20, max_num_batched_tokens=8)
    whole, pieces = prompt_logprobs(tiny_llm), prompt_logprobs(chunked)
    assert [None if e is None else list(e) for e in pieces] == [None if e is None else list(e) for e in whole]
    for a, b in zip(whole[1:], pieces[1:]):
        assert [lp.logprob for lp in a.values()] == pytest.approx([lp.logprob for lp in b.values()], abs=1e-4)


def test_a_prefix_cache_hit_does_not_skip_the_positions_asked_for(tiny_llama):
    llm = LLM(str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20)
    llm.generate([PROMPT], SamplingParams(max_tokens=1), use_tqdm=False)  # its full blocks are now cached
    again = llm.generate([PROMPT], SamplingParams(max_tokens=1), use_tqdm=False)[0]
    assert again.num_cached_tokens > 0
    params = SamplingParams(max_tokens=1, prompt_logprobs=0)
    scored = llm.generate([PROMPT], params, use_tqdm=False)[0]
    assert scored.num_cached_tokens == 0 and all(entry is not None for entry in scored.prompt_logprobs[1:])
    assert [next(iter(e)) for e in scored.prompt_logprobs[1:]] == PROMPT[1:]


def test_requests_that_do_not_ask_get_none(tiny_llm):
    assert tiny_llm.generate([PROMPT], SamplingParams(max_tokens=2), use_tqdm=False)[0].prompt_logprobs is None


def test_logprob_token_ids_give_exactly_those_ids_after_the_sampled_one(tiny_llm, tiny_llama):
    listed = [5, 77, 200]
    params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=listed)
    completion = tiny_llm.generate([PROMPT], params, use_tqdm=False)[0].outputs[0]
    entry, sampled = completion.logprobs[0], completion.token_ids[0]
    reference = hf_logprobs(tiny_llama[1], PROMPT)[-1]
    assert list(entry)[0] == sampled and set(entry) == {sampled, *listed}
    for token_id, logprob in entry.items():
        assert logprob.logprob == pytest.approx(float(reference[token_id]), abs=1e-4)


def test_logprobs_minus_one_is_the_whole_vocabulary(tiny_llm):
    with pytest.raises(InvalidRequestError, match="greater than max allowed: 20"):
        tiny_llm.generate([PROMPT], SamplingParams(max_tokens=1, logprobs=-1), use_tqdm=False)
    whole = LLM(tiny_llm.engine.config.model_config.model, dtype="float32", kv_cache_memory=1 << 20, max_logprobs=-1)
    completion = whole.generate([PROMPT], SamplingParams(max_tokens=1, logprobs=-1), use_tqdm=False)[0].outputs[0]
    assert len(completion.logprobs[0]) == 256  # the tiny model's vocabulary


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(prompt_logprobs=-2), "prompt_logprobs must be non-negative or -1, got -2."),
        (dict(prompt_logprobs=21), "Requested prompt logprobs of 21, which is greater than max allowed: 20"),
        (dict(logprob_token_ids=[300]), "token_id(s) [300] in logprob_token_ids contain out-of-vocab token ids"),
        (dict(logprob_token_ids=list(range(129))), "Requested logprob_token_ids of length 129"),
    ],
)
def test_out_of_range_logprob_fields_are_refused_in_vllms_words(tiny_llm, params, message):
    with pytest.raises(InvalidRequestError) as refused:
        tiny_llm.generate([PROMPT], SamplingParams(max_tokens=1, **params), use_tqdm=False)
    assert message in str(refused.value)
