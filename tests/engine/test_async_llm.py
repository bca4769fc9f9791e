"""The async front: streaming deltas, abort by request or by closing the stream, shutdown."""

import asyncio

import pytest
from engine_cases import prompts_of

from kvtool.engine.runtime.async_llm import AsyncLLM
from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.sizing.request_length import RequestTooLongError

GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def async_llm(tiny_llm):
    return AsyncLLM(tiny_llm.engine)


async def collect(llm, prompt, request_id, params=GREEDY):
    return [out async for out in llm.generate(prompt, params, request_id)]


async def wait_until_idle(llm):
    for _ in range(200):
        stats = llm.stats()
        if stats.num_running == stats.num_waiting == 0 and stats.kv_cache_usage == 0.0:
            return stats
        await asyncio.sleep(0.01)
    raise AssertionError(f"engine still busy: {llm.stats()}")


def test_streams_deltas_that_add_up_and_match_offline(async_llm, tiny_llm):
    prompts = prompts_of([9, 30])
    expected = [o.outputs[0].token_ids for o in tiny_llm.generate(prompts, GREEDY, use_tqdm=False)]

    async def main():
        return await asyncio.gather(*(collect(async_llm, p, f"s{i}") for i, p in enumerate(prompts)))

    for stream, tokens in zip(asyncio.run(main()), expected):
        assert stream[-1].finished and not any(o.finished for o in stream[:-1])
        assert [t for o in stream for t in o.outputs[0].delta_token_ids] == tokens


def test_abort_and_closed_streams_free_their_blocks(async_llm):
    long = SamplingParams(max_tokens=200, ignore_eos=True)

    async def main():
        aborted = asyncio.create_task(collect(async_llm, prompts_of([20])[0], "a", long))
        stream = async_llm.generate(prompts_of([25])[0], long, "b")
        await stream.__anext__()
        await stream.aclose()  # a client that went away
        await asyncio.sleep(0.05)
        await async_llm.abort("a")
        outputs = await aborted
        return outputs[-1], await wait_until_idle(async_llm)

    last, stats = asyncio.run(main())
    assert last.finished and last.outputs[0].finish_reason == "abort"
    assert stats.num_free_blocks == stats.num_blocks - 1


def test_too_long_request_raises_before_the_first_output(async_llm):
    async def main():
        await collect(async_llm, prompts_of([600])[0], "long")

    with pytest.raises(RequestTooLongError):
        asyncio.run(main())


def test_shutdown_aborts_running_requests(tiny_llama):
    from kvtool.engine.sizing.engine_args import EngineArgs

    llm = AsyncLLM.from_engine_args(EngineArgs(model=str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20))
    assert llm.config.model_config.max_model_len == 512 and llm.kv_cache_info.num_blocks > 0

    async def main():
        outputs = []
        stream = llm.generate(prompts_of([10])[0], SamplingParams(max_tokens=400, ignore_eos=True), "x")
        async for output in stream:
            outputs.append(output)
            if len(outputs) == 1:  # running, with 399 tokens to go: a fixed sleep could outlast them
                await llm.shutdown()
        return outputs

    outputs = asyncio.run(main())
    assert outputs[-1].outputs[0].finish_reason == "abort"
    assert llm.stats().kv_cache_usage == 0.0


def test_the_model_loads_on_the_thread_that_runs_every_step(tiny_llama, monkeypatch):
    import threading

    from kvtool.engine.runtime import llm_engine
    from kvtool.engine.sizing.engine_args import EngineArgs

    threads = {"load": set(), "step": set()}
    original_init, original_step = llm_engine.LLMEngine.__init__, llm_engine.LLMEngine.step

    def init(self, config):
        threads["load"].add(threading.get_ident())
        original_init(self, config)

    def step(self):
        threads["step"].add(threading.get_ident())
        return original_step(self)

    monkeypatch.setattr(llm_engine.LLMEngine, "__init__", init)
    monkeypatch.setattr(llm_engine.LLMEngine, "step", step)
    llm = AsyncLLM.from_engine_args(EngineArgs(model=str(tiny_llama[0]), dtype="float32", kv_cache_memory=1 << 20))

    async def main():
        await collect(llm, prompts_of([10])[0], "a")
        await collect(llm, prompts_of([7])[0], "b")
        await llm.shutdown()

    asyncio.run(main())
    assert len(threads["step"]) == 1 and threads["step"] == threads["load"] != {threading.get_ident()}
