"""Prompts given as embeddings: the engine runs their positions from the rows, whatever the step's shape, and the
prefix cache matches them by their rows, never by their placeholder ids."""

import base64
import io

import pytest
import torch

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm import LLM
from kvtool.engine.runtime.prompt_embeds import (
    PLACEHOLDER_TOKEN_ID,
    EmbedsPrompt,
    EmbedsShape,
    EmbedsSpan,
    block_key,
)
from kvtool.engine.runtime.truncation import Truncation
from kvtool.errors import InvalidRequestError

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)


@pytest.fixture(scope="module")
def llm(tiny_llama):
    # 8-token steps: a 21-token prompt prefills in chunks that start and end inside the rows
    return LLM(
        str(tiny_llama[0]),
        dtype="float32",
        max_model_len=128,
        kv_cache_memory=1 << 20,
        max_num_batched_tokens=8,
        enable_prompt_embeds=True,
    )


@pytest.fixture(scope="module")
def embeddings(tiny_llama):
    table = tiny_llama[1].get_input_embeddings()
    return lambda ids: table(torch.tensor(ids)).detach()


def output_ids(llm, prompt) -> list[int]:
    return llm.generate(prompt, GREEDY, use_tqdm=False)[0].outputs[0].token_ids


def token_ids(seed: int, count: int = 21) -> list[int]:
    return torch.randint(0, 256, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_a_prompt_of_embeddings_answers_as_its_token_ids(llm, embeddings):
    ids = token_ids(1)
    assert output_ids(llm, EmbedsPrompt.of_rows(embeddings(ids))) == output_ids(llm, ids)


def test_rows_within_token_ids_answer_as_the_ids_they_replace(llm, embeddings):
    ids = token_ids(2)
    spliced = [PLACEHOLDER_TOKEN_ID if 5 <= i < 13 else token for i, token in enumerate(ids)]
    prompt = EmbedsPrompt(spliced, (EmbedsSpan(5, embeddings(ids[5:13])),))
    assert output_ids(llm, prompt) == output_ids(llm, ids)


def test_truncation_keeps_the_rows_of_the_positions_it_keeps(llm, embeddings):
    ids = token_ids(5)
    spliced = [PLACEHOLDER_TOKEN_ID if 5 <= i < 13 else token for i, token in enumerate(ids)]
    prompt = EmbedsPrompt(spliced, (EmbedsSpan(5, embeddings(ids[5:13])),))
    kept = llm.engine.input_processor.process(prompt, GREEDY, truncation=Truncation(12, "left"))
    assert kept.prompt_token_ids == spliced[-12:]
    [span] = kept.prompt_embeds
    assert span.start == 0 and torch.equal(span.rows, embeddings(ids[9:13]))
    assert output_ids(llm, EmbedsPrompt(kept.prompt_token_ids, kept.prompt_embeds)) == output_ids(llm, ids[-12:])


def test_the_prefix_cache_matches_equal_rows_and_never_placeholder_ids_alone(llm, embeddings):
    first, second = token_ids(3, 17), token_ids(4, 17)
    expected = {"first": output_ids(llm, first), "second": output_ids(llm, second)}
    hits = llm.engine.stats().prefix_cache_hits
    assert output_ids(llm, EmbedsPrompt.of_rows(embeddings(first))) == expected["first"]
    assert llm.engine.stats().prefix_cache_hits == hits
    # the same rows again: the first block comes from the cache, the last row is computed as a one-token step
    assert output_ids(llm, EmbedsPrompt.of_rows(embeddings(first))) == expected["first"]
    assert llm.engine.stats().prefix_cache_hits == hits + 16
    # other rows behind the same placeholder ids: nothing matches, and the answer is theirs
    assert output_ids(llm, EmbedsPrompt.of_rows(embeddings(second))) == expected["second"]
    assert llm.engine.stats().prefix_cache_hits == hits + 16


def test_an_engine_without_the_flag_refuses_embeddings_with_vllms_words(tiny_llama):
    plain = LLM(str(tiny_llama[0]), dtype="float32", max_model_len=64, kv_cache_memory=1 << 20)
    with pytest.raises(InvalidRequestError, match=r"You must set `--enable-prompt-embeds` to input `prompt_embeds`"):
        plain.generate(EmbedsPrompt.of_rows(torch.zeros(3, 64)), GREEDY, use_tqdm=False)


def payload(value) -> str:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return base64.b64encode(buffer.getvalue()).decode()


SHAPE = EmbedsShape(hidden_size=64, dtype=torch.bfloat16)


def test_a_payload_loads_as_rows_in_the_models_dtype_and_a_batch_of_one_is_squeezed():
    rows = SHAPE.load(payload(torch.ones(1, 3, 64, dtype=torch.float16)))
    assert rows.shape == (3, 64) and rows.dtype == torch.bfloat16


def test_rows_saved_with_their_gradient_load_without_it_and_key_a_cache_block():
    """An HF model's embeddings are saved with requires_grad (vLLM's tests send them so)."""
    rows = EmbedsShape(64, torch.float32).load(payload(torch.ones(16, 64, requires_grad=True)))
    assert not rows.requires_grad
    assert len(block_key((EmbedsSpan(0, rows),), 0, 16)) == 32


@pytest.mark.parametrize(
    "data, message",
    [
        ("invalid_base64", "`prompt_embeds` is not valid base64"),
        ("", "`prompt_embeds` could not be deserialized as a torch tensor: EOFError"),
        (payload({"rows": torch.zeros(2, 64)}), "`prompt_embeds` payload did not deserialize to a torch.Tensor."),
        (payload(torch.zeros(64)), "must be a 2D tensor of shape (num_tokens, hidden_size); got shape (64,)."),
        (payload(torch.zeros(2, 32)), "`prompt_embeds` hidden_size 32 does not match the model's hidden_size 64."),
        (payload(torch.zeros(2, 64, dtype=torch.int64)), "dtype torch.int64 is not a floating-point type"),
    ],
)
def test_a_payload_that_is_not_float_rows_of_the_models_width_is_refused(data, message):
    with pytest.raises(InvalidRequestError) as caught:
        SHAPE.load(data)
    assert message in caught.value.message and caught.value.message.endswith("(parameter=prompt_embeds)")
    assert caught.value.param == "prompt_embeds"


def test_a_sparse_payload_is_refused_by_the_size_it_declares_before_it_is_densified(monkeypatch):
    sparse = torch.sparse_coo_tensor(torch.tensor([[0], [0]]), torch.tensor([1.0]), (1 << 20, 64))
    monkeypatch.setenv("VLLM_MAX_EMBED_DECODE_BYTES", str(1 << 20))
    with pytest.raises(InvalidRequestError, match=r"declares shape \(1048576, 64\), which would allocate 268435456"):
        SHAPE.load(payload(sparse))
    monkeypatch.setenv("VLLM_MAX_EMBED_DECODE_BYTES", str(1 << 30))
    assert SHAPE.load(payload(sparse)).shape == (1 << 20, 64)
