"""An abort reaches a request in every state: waiting, running, preempted, mid-step, during its add, and
finished in the engine but not yet delivered. Nothing is left behind for it.

The test holds the step thread inside the model step (or inside the engine's add) and lets it go one call
at a time, so each state is reached exactly, whatever the speed of the machine.
"""

import asyncio
import threading

import pytest
from engine_cases import prompts_of

from kvtool.engine.runtime.async_llm import AsyncLLM
from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm_engine import LLMEngine
from kvtool.engine.sizing.engine_args import EngineArgs

LONG = SamplingParams(max_tokens=300, ignore_eos=True)
BLOCK_BYTES = 8 << 10  # one 16-token block of the tiny Llama's fp32 KV cache


@pytest.fixture(scope="module")
def small_engine(tiny_llama):
    """Two sequences at a time and 40 blocks: a third request waits, two long ones preempt each other."""
    config = EngineArgs(
        model=str(tiny_llama[0]), dtype="float32", kv_cache_memory=40 * BLOCK_BYTES, max_num_seqs=2, seed=0
    )
    return LLMEngine(config)


class Gate:
    """Wraps a function the step thread calls: each call waits inside until the test releases it.

    `await gate.entered()` returns a held call's arguments. While a call is held nothing else touches the
    engine, so the test reads the state and acts between exactly the steps it chooses.
    """

    def __init__(self, function):
        self.function, self.loop = function, asyncio.get_running_loop()
        self.calls: asyncio.Queue = asyncio.Queue()
        self.permits = threading.Semaphore(0)
        self.opened = False
        self.seen: list[tuple] = []

    def __call__(self, *args):
        self.seen.append(args)
        if not self.opened:
            self.loop.call_soon_threadsafe(self.calls.put_nowait, args)
            self.permits.acquire()
        return self.function(*args)

    async def entered(self) -> tuple:
        return await self.calls.get()

    def release(self) -> None:
        self.permits.release()

    def open(self) -> None:
        """Every call from now on goes through."""
        self.opened = True
        self.permits.release()


async def step_until(gate: Gate, predicate):
    """Release model steps until one is entered with `predicate(scheduled)` true; that step stays held."""
    while not predicate(scheduled := (await gate.entered())[0]):
        gate.release()
    return scheduled


def ids(seqs) -> list[str]:
    return [seq.request_id for seq in seqs]


async def consume(stream) -> list:
    return [output async for output in stream]


def start(llm: AsyncLLM, request_ids: list[str], params=LONG) -> dict[str, asyncio.Task]:
    prompts = prompts_of([40] * len(request_ids), seed=len(request_ids))
    return {r: asyncio.create_task(consume(llm.generate(p, params, r))) for r, p in zip(request_ids, prompts)}


def finish_reason(outputs) -> str:
    return outputs[-1].outputs[0].finish_reason


async def finish(llm: AsyncLLM, gate: Gate, tasks: dict[str, asyncio.Task]) -> dict[str, list]:
    """Abort what still runs, let the engine go, and check that nothing is kept for any request."""
    for request_id in tasks:
        await llm.abort(request_id)
    gate.open()
    results = dict(zip(tasks, await asyncio.gather(*tasks.values())))
    await llm.shutdown()
    engine = llm.engine
    assert llm._queues == {} and engine.seqs_by_request == {} and engine.output_processor.requests == {}
    stats = engine.stats()
    assert stats.num_running == stats.num_waiting == 0 and stats.num_free_blocks == stats.num_blocks - 1
    return results


def run_held(small_engine, monkeypatch, scenario):
    """Run `scenario(llm, gate)` with the engine's model steps held by `gate`."""

    async def main():
        gate = Gate(small_engine.model_runner.execute)
        monkeypatch.setattr(small_engine.model_runner, "execute", gate)
        try:
            return await scenario(AsyncLLM(small_engine), gate)
        finally:
            gate.open()  # a failed check must not leave the step thread held

    return asyncio.run(main())


def test_abort_reaches_a_waiting_request(small_engine, monkeypatch):
    async def scenario(llm, gate):
        tasks = start(llm, ["a", "b", "c"])
        await step_until(gate, lambda _: ids(small_engine.scheduler.waiting) == ["c"])
        await llm.abort("c")
        gate.release()
        after = await gate.entered()  # the abort was applied before this step was scheduled
        assert "c" not in ids(after[0].seqs) + ids(small_engine.scheduler.waiting)
        results = await finish(llm, gate, tasks)
        assert [o.outputs[0].token_ids for o in results["c"]] == [[]] and finish_reason(results["c"]) == "abort"

    run_held(small_engine, monkeypatch, scenario)


def test_a_running_request_whose_client_leaves_is_aborted(small_engine, monkeypatch):
    async def scenario(llm, gate):
        tasks = start(llm, ["a", "b"])
        await step_until(gate, lambda scheduled: scheduled.num_decodes == 2)
        leaving = tasks.pop("a")
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        gate.release()
        assert ids((await gate.entered())[0].seqs) == ["b"]
        await finish(llm, gate, tasks)

    run_held(small_engine, monkeypatch, scenario)


def test_abort_reaches_a_preempted_request(small_engine, monkeypatch):
    async def scenario(llm, gate):
        tasks = start(llm, ["a", "b"], SamplingParams(max_tokens=450, ignore_eos=True))
        await step_until(gate, lambda _: any(seq.num_preemptions for seq in small_engine.scheduler.waiting))
        (victim,) = small_engine.scheduler.waiting
        await llm.abort(victim.request_id)
        for _ in range(3):  # the survivor goes on alone; the victim is never scheduled again
            gate.release()
            assert victim.request_id not in ids((await gate.entered())[0].seqs)
        results = await finish(llm, gate, tasks)
        assert finish_reason(results[victim.request_id]) == "abort"

    run_held(small_engine, monkeypatch, scenario)


def test_abort_reaches_a_request_mid_step(small_engine, monkeypatch):
    async def scenario(llm, gate):
        tasks = start(llm, ["a"])
        await step_until(gate, lambda scheduled: scheduled.num_decodes == 1)  # held inside a's first decode
        await llm.abort("a")
        gate.release()  # that step's token is delivered, then the abort
        results = await finish(llm, gate, tasks)
        outputs = results["a"]
        assert [len(o.outputs[0].token_ids) for o in outputs] == [1, 2, 2] and finish_reason(outputs) == "abort"

    run_held(small_engine, monkeypatch, scenario)


@pytest.mark.parametrize("taken", [False, True], ids=["before-the-engine-takes-it", "while-the-engine-adds-it"])
def test_a_request_cancelled_during_its_add_never_runs(small_engine, monkeypatch, taken):
    async def scenario(llm, gate):
        tasks = start(llm, ["a"])
        await step_until(gate, lambda _: True)  # the step thread is busy with a's prefill
        adds = Gate(small_engine.add_request)
        monkeypatch.setattr(small_engine, "add_request", adds)
        if not taken:
            adds.open()
        leaving = start(llm, ["b"])["b"]
        if taken:
            gate.release()
            await adds.entered()  # the engine holds b's add
        else:
            await asyncio.sleep(0)  # b has sent its add and waits for it
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        adds.open()
        gate.release()
        scheduled = await gate.entered()
        assert "b" not in ids(scheduled[0].seqs) + list(small_engine.seqs_by_request)
        await finish(llm, gate, tasks)
        assert all("b" not in ids(args[0].seqs) for args in gate.seen)

    run_held(small_engine, monkeypatch, scenario)


def test_a_finished_request_whose_stream_closes_before_delivery_frees_its_id(small_engine, monkeypatch):
    async def scenario(llm, gate):
        tasks = start(llm, ["c"])
        stream = llm.generate(prompts_of([30])[0], SamplingParams(max_tokens=3, ignore_eos=True), "a")
        first = asyncio.ensure_future(stream.__anext__())
        await step_until(gate, lambda _: first.done() and "a" not in small_engine.seqs_by_request)
        await stream.aclose()  # a finished in the engine; its client leaves without reading the rest
        assert len(first.result().outputs[0].token_ids) == 1
        tasks["a"] = asyncio.create_task(consume(llm.generate(prompts_of([30])[0], LONG, "a")))  # the id again
        for _ in range(3):
            gate.release()
            assert "a" in ids((await gate.entered())[0].seqs)  # the late abort of the first "a" spares the second
        results = await finish(llm, gate, tasks)
        assert len(results["a"][-1].outputs[0].token_ids) >= 3

    run_held(small_engine, monkeypatch, scenario)
