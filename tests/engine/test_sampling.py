"""Sampling parameters and stop conditions, through the real SmolLM2 engine."""

import pytest
import torch

from kvtool.engine.runtime.config import SamplingParams
from kvtool.errors import UsageError

PROMPT = "List three colours:"


def first(llm, prompt=PROMPT, **params):
    return llm.generate([prompt], SamplingParams(**params), use_tqdm=False)[0].outputs[0]


def test_default_max_tokens_is_16_as_in_vllm(smollm2_llm):
    output = first(smollm2_llm, ignore_eos=True)
    assert len(output.token_ids) == 16 and output.finish_reason == "length"


def test_seeded_sampling_repeats_and_top_k_1_is_greedy(smollm2_llm):
    seeded = dict(max_tokens=6, temperature=1.5, seed=7, ignore_eos=True)
    assert first(smollm2_llm, **seeded).token_ids == first(smollm2_llm, **seeded).token_ids
    greedy = first(smollm2_llm, max_tokens=6, temperature=0.0, ignore_eos=True).token_ids
    assert first(smollm2_llm, max_tokens=6, temperature=1.0, top_k=1, seed=3, ignore_eos=True).token_ids == greedy
    assert first(smollm2_llm, max_tokens=6, temperature=1.0, top_p=1e-6, ignore_eos=True).token_ids == greedy


def test_penalties_change_a_repetitive_greedy_output(smollm2_llm):
    prompt = "one one one one one one one one"
    plain = first(smollm2_llm, prompt, max_tokens=8, temperature=0.0).token_ids
    penalised = first(
        smollm2_llm, prompt, max_tokens=8, temperature=0.0, repetition_penalty=2.0, frequency_penalty=1.5
    ).token_ids
    assert plain != penalised


def test_logprobs_hold_the_sampled_token_and_the_top_n(smollm2_llm):
    output = first(smollm2_llm, max_tokens=4, temperature=0.0, logprobs=3)
    assert len(output.logprobs) == 4
    for token_id, entry in zip(output.token_ids, output.logprobs):
        assert entry[token_id].rank == 1  # greedy picks the most likely token
        assert len(entry) == 3 and all(lp.logprob <= 0 for lp in entry.values())


def test_logprob_token_ids_give_exactly_those_ids_as_the_top_n_ranks_them(smollm2_llm):
    top = first(smollm2_llm, max_tokens=1, temperature=0.0, logprobs=5).logprobs[0]
    listed = [t for t in top if top[t].rank > 1][::-1]  # ranks 2.. in reverse: listed order, not value order
    output = first(smollm2_llm, max_tokens=1, temperature=0.0, logprob_token_ids=listed)
    entry = output.logprobs[0]
    assert list(entry) == output.token_ids + listed
    assert [entry[t].rank for t in listed] == list(range(1, len(listed) + 1))
    assert [entry[t].logprob for t in listed] == pytest.approx([top[t].logprob for t in listed], abs=1e-5)


def test_stop_string_is_cut_unless_included(smollm2_llm):
    free = first(smollm2_llm, "Count: 1, 2, 3,", max_tokens=20, temperature=0.0, ignore_eos=True)
    assert " 5" in free.text
    cut = first(smollm2_llm, "Count: 1, 2, 3,", max_tokens=20, temperature=0.0, stop=[" 5"])
    assert (cut.finish_reason, cut.stop_reason) == ("stop", " 5")
    assert cut.text == free.text[: free.text.index(" 5")]
    kept = first(
        smollm2_llm, "Count: 1, 2, 3,", max_tokens=20, temperature=0.0, stop=" 5", include_stop_str_in_output=True
    )
    assert kept.text.endswith(" 5")


def test_stop_token_ids_and_min_tokens(smollm2_llm):
    free = first(smollm2_llm, max_tokens=10, temperature=0.0, ignore_eos=True)
    stop_token = free.token_ids[2]
    stopped = first(smollm2_llm, max_tokens=10, temperature=0.0, stop_token_ids=[stop_token])
    assert stopped.token_ids == free.token_ids[:3] and stopped.stop_reason == stop_token
    held = first(smollm2_llm, max_tokens=10, temperature=0.0, stop_token_ids=[stop_token], min_tokens=5)
    assert len(held.token_ids) >= 5 and stop_token not in held.token_ids[:5]


def test_n_gives_independent_samples(smollm2_llm):
    result = smollm2_llm.generate(
        [PROMPT], SamplingParams(n=3, max_tokens=8, temperature=1.0, seed=1, ignore_eos=True), use_tqdm=False
    )[0]
    assert [o.index for o in result.outputs] == [0, 1, 2]
    assert len({tuple(o.token_ids) for o in result.outputs}) > 1


@pytest.mark.parametrize(
    "bad",
    [
        dict(max_tokens=0),
        dict(temperature=-1),
        dict(top_p=0),
        dict(top_k=-5),
        dict(min_p=2),
        dict(min_tokens=20, max_tokens=10),
        dict(n=0),
    ],
)
def test_bad_sampling_params_are_usage_errors(bad):
    with pytest.raises(UsageError):
        SamplingParams(**bad)


def test_greedy_takes_the_first_of_equal_maxima_as_torch_argmax_does():
    """The sampler's own argmax (numpy's, on CPU) against torch.argmax over rows with ties, a NaN and a
    uniform row, in a batch that mixes greedy and random rows."""
    from kvtool.engine.runtime.core.sequence import Sequence
    from kvtool.engine.runtime.worker.sampler import Sampler

    logits = torch.randn(4, 49152, generator=torch.Generator().manual_seed(0))
    logits[0, [17, 4096, 40000]] = 50.0
    logits[1, 123] = float("nan")
    logits[2] = 0.0
    greedy = [Sequence(f"g{i}", [1], SamplingParams(temperature=0.0), 4) for i in range(4)]
    sampler = Sampler(eos_token_ids={0}, seed=0, device=torch.device("cpu"))
    assert (
        sampler(logits.clone(), greedy).token_ids == logits.argmax(-1).tolist() == [17, 123, 0, int(logits[3].argmax())]
    )
    mixed = greedy[:2] + [Sequence("r", [1], SamplingParams(temperature=1.0, seed=1), 4)]
    assert sampler(logits[[0, 1, 3]].clone(), mixed).token_ids[:2] == [17, 123]
