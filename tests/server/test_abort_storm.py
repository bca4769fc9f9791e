"""A storm of clients that give up after 0.5 s leaves nothing running once they are gone.

Each client posts a chat request for 8000 tokens, streamed or not, and leaves after 0.5 s, again and again,
against four times as many clients as the engine runs sequences: requests are added, wait, run and are
aborted all the time, some while their add is still queued behind a step. The server runs in this process
(a real uvicorn on 127.0.0.1) so that the test can count the requests that reached the engine and look at
what the engine keeps once every client has left.
"""

import asyncio
import contextlib
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvtool.engine.runtime.async_llm import AsyncLLM
from kvtool.engine.server.app import build_app
from kvtool.engine.server.serving import ServerSettings
from kvtool.engine.sizing.engine_args import EngineArgs

pytestmark = pytest.mark.slow

MAX_NUM_SEQS = 16
CLIENTS = 4 * MAX_NUM_SEQS
STORM_SECONDS = 5.0
CLIENT_TIMEOUT = 0.5
SETTLE_SECONDS = 5.0
MAX_MODEL_LEN = 8192  # room for max_tokens 8000
BODY = {"messages": [{"role": "user", "content": "Write a long story"}], "max_tokens": 8000, "min_tokens": 8000}
IDLE = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0, "vllm:kv_cache_usage_perc": 0.0}


@pytest.fixture(scope="module")
def storm_server(smollm2_dir, in_process_server):
    """(base URL, engine, the ids of the requests that reached the engine)."""
    config = EngineArgs(
        model=str(smollm2_dir),
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
        kv_cache_memory=400 << 20,
        max_num_seqs=MAX_NUM_SEQS,
    )
    engine = AsyncLLM.from_engine_args(config)
    started, generate = [], engine.generate

    def counted(prompt, params, request_id):
        started.append(request_id)
        return generate(prompt, params, request_id)

    engine.generate = counted
    server = in_process_server(build_app(engine, ServerSettings("smollm2")))
    warm_up = {**BODY, "max_tokens": 2, "min_tokens": 0}  # the first step takes seconds: not during the storm
    assert httpx.post(f"{server.base_url}/v1/chat/completions", json=warm_up, timeout=120).status_code == 200
    yield server.base_url, engine, started
    server.stop()


def summed(metrics_text: str) -> dict[str, float]:
    """Each metric's value summed over its label sets."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def scrape(base_url: str) -> dict[str, float]:
    return summed(httpx.get(f"{base_url}/metrics", timeout=30).text)


async def chat(client: httpx.AsyncClient, stream: bool) -> None:
    if not stream:
        await client.post("/v1/chat/completions", json=BODY)
        return
    async with client.stream("POST", "/v1/chat/completions", json={**BODY, "stream": True}) as reply:
        async for _ in reply.aiter_bytes():
            pass


async def leaving_client(client: httpx.AsyncClient, stream: bool, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(chat(client, stream), CLIENT_TIMEOUT)


async def storm(base_url: str) -> float:
    """Run the clients; returns the most requests seen waiting at once."""
    deadline, most_waiting = time.monotonic() + STORM_SECONDS, 0.0
    limits = httpx.Limits(max_connections=2 * CLIENTS)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        clients = asyncio.gather(*(leaving_client(client, i % 2 == 0, deadline) for i in range(CLIENTS)))
        while not clients.done():
            metrics = summed((await client.get("/metrics")).text)
            most_waiting = max(most_waiting, metrics["vllm:num_requests_waiting"])
            await asyncio.wait({clients}, timeout=0.25)
        await clients
    return most_waiting


def settle(base_url: str) -> dict[str, float]:
    """The idle gauges, once they are all back at 0 or after SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        gauges = {name: value for name, value in scrape(base_url).items() if name in IDLE}
        if gauges == IDLE or time.monotonic() > deadline:
            return gauges
        time.sleep(0.1)


def test_a_storm_of_clients_that_leave_leaves_nothing_running(storm_server):
    base_url, engine, started = storm_server
    most_waiting = asyncio.run(storm(base_url))
    assert settle(base_url) == IDLE, f"still busy {SETTLE_SECONDS} s after the last client left"
    assert most_waiting > 0 and len(started) > CLIENTS  # requests did queue behind max_num_seqs
    counted = scrape(base_url)["vllm:request_success_total"]
    assert counted == len(started), "each request that reached the engine is counted once"
    core = engine.engine
    assert engine._queues == {} and core.seqs_by_request == {} and core.output_processor.requests == {}
