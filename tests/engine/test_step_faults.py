"""LLMEngine.step contains a failure to the request that caused it (the fault is injected by this test)."""

import pytest
import torch

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.exceptions import EngineDeadError


@pytest.fixture
def faulty_engine(tiny_llm, monkeypatch):
    engine, sampler = tiny_llm.engine, tiny_llm.engine.model_runner.sampler
    fault = {"error": RuntimeError("injected fault")}

    def faulty(logits, seqs):
        if any(seq.request_id.startswith("bad") for seq in seqs):
            raise fault["error"]
        return sampler(logits, seqs)

    monkeypatch.setattr(engine.model_runner, "sampler", faulty)
    yield engine, fault
    for request_id in list(engine.seqs_by_request):
        engine.abort_request(request_id)


def run(engine) -> dict:
    finished = {}
    while engine.has_unfinished_requests():
        finished.update((o.request_id, o) for o in engine.step() if o.finished)
    return finished


def test_only_the_request_whose_step_raises_fails(faulty_engine):
    engine, _ = faulty_engine
    params = SamplingParams(max_tokens=6, ignore_eos=True, temperature=0.0)
    for request_id, prompt in (("good-1", [1, 2, 3]), ("bad-1", [4, 5]), ("good-2", [6, 7, 8, 9])):
        engine.add_request(request_id, prompt, params)
    finished = run(engine)
    assert [len(finished[r].outputs[0].token_ids) for r in ("good-1", "good-2")] == [6, 6]
    assert finished["bad-1"].outputs[0].finish_reason == "error"
    assert "bad-1" in finished["bad-1"].error and "injected fault" in finished["bad-1"].error
    assert engine.stats().num_free_blocks == engine.stats().num_blocks - 1  # every block back (block 0 is null)


def test_an_out_of_memory_error_is_fatal(faulty_engine):
    engine, fault = faulty_engine
    fault["error"] = torch.OutOfMemoryError("injected")
    engine.add_request("bad-2", [1, 2], SamplingParams(max_tokens=2))
    with pytest.raises(EngineDeadError):
        engine.step()
