"""A failure inside an engine step fails only the request that caused it; a fatal one marks the engine dead.

The fault is injected here, in the test: the server runs in this process (a real uvicorn on 127.0.0.1) so that the
sampler of its engine can be wrapped to raise for requests whose x-request-id holds a marker.
"""

import concurrent.futures
import http.client
import json
import time

import httpx
import openai
import pytest
import torch

from kvtool.engine.runtime.async_llm import AsyncLLM
from kvtool.engine.server.app import build_app
from kvtool.engine.server.serving import ServerSettings
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.messages import ENGINE_DEAD_CLIENT

pytestmark = pytest.mark.slow
POISON = "poison"
STREAM_TOKENS = 40


class Fault:
    """Raises `error` in the sampler for any batch holding a request whose id contains POISON."""

    def __init__(self, sampler):
        self.sampler, self.error = sampler, RuntimeError("injected fault in the sampler")

    def __call__(self, logits, seqs):
        if any(POISON in seq.request_id for seq in seqs):
            raise self.error
        return self.sampler(logits, seqs)


@pytest.fixture(scope="module")
def faulty_server(smollm2_dir, in_process_server):
    engine = AsyncLLM.from_engine_args(
        EngineArgs(model=str(smollm2_dir), dtype="float32", max_model_len=512, kv_cache_memory=32 << 20, max_num_seqs=8)
    )
    runner = engine.engine.model_runner
    runner.sampler = fault = Fault(runner.sampler)
    server = in_process_server(build_app(engine, ServerSettings("smollm2")))
    yield server.base_url, fault
    server.stop()


def _stream(base_url: str, prompt: str) -> int:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    stream = client.completions.create(
        model="smollm2",
        prompt=prompt,
        max_tokens=STREAM_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    return [chunk.usage.completion_tokens for chunk in stream if chunk.usage is not None][-1]


def test_a_request_that_breaks_the_step_fails_alone(faulty_server):
    base_url, _ = faulty_server
    poisoned = {"model": "smollm2", "prompt": "Hello", "max_tokens": 5}
    with concurrent.futures.ThreadPoolExecutor(3) as pool, httpx.Client(base_url=base_url, timeout=120) as client:
        streams = [pool.submit(_stream, base_url, p) for p in ("One day", "The sea", "Bread is")]
        time.sleep(1.0)  # the streams are running: the poisoned request joins their batch
        failed = client.post("/v1/completions", json=poisoned, headers={"x-request-id": f"{POISON}-1"})
        assert failed.status_code == 500
        error = failed.json()["error"]
        assert error["type"] == "InternalServerError" and f"cmpl-{POISON}-1-0" in error["message"]
        assert "injected fault" in error["message"]
        streamed = client.post(
            "/v1/completions", json={**poisoned, "stream": True}, headers={"x-request-id": f"{POISON}-2"}
        )
        events = [line for line in streamed.text.splitlines() if line.startswith("data: ")]
        assert json.loads(events[-2][6:])["error"]["code"] == 500 and events[-1] == "data: [DONE]"
        assert client.get("/health").status_code == 200  # the same connection, and the engine is alive
        assert [s.result() for s in streams] == [STREAM_TOKENS] * 3


def test_an_unexpected_error_in_a_route_keeps_the_connection_open(faulty_server, monkeypatch):
    base_url, _ = faulty_server
    from kvtool.engine.runtime.input_processor import InputProcessor

    def broken_encode(self, text, param="prompt", add_special_tokens=True):
        raise OverflowError("injected fault in the tokenizer")

    monkeypatch.setattr(InputProcessor, "encode", broken_encode)
    connection = http.client.HTTPConnection("127.0.0.1", int(base_url.rsplit(":", 1)[1]), timeout=60)
    connection.request(
        "POST", "/tokenize", body=json.dumps({"prompt": "Hi"}), headers={"content-type": "application/json"}
    )
    reply = connection.getresponse()
    body = json.loads(reply.read())
    assert reply.status == 500 and body["error"]["type"] == "InternalServerError" and not reply.will_close
    sock = connection.sock
    connection.request("GET", "/v1/models")  # on the same socket: the server did not close it
    assert connection.getresponse().status == 200 and connection.sock is sock
    connection.close()


def test_a_fatal_error_marks_the_engine_dead_on_health_and_metrics(faulty_server):
    base_url, fault = faulty_server
    fault.error = torch.OutOfMemoryError("injected: out of memory")
    with httpx.Client(base_url=base_url, timeout=120) as client:
        failed = client.post(
            "/v1/completions", json={"prompt": "Hi", "max_tokens": 3}, headers={"x-request-id": f"{POISON}-3"}
        )
        assert failed.status_code == 500 and failed.json()["error"]["message"] == ENGINE_DEAD_CLIENT
        assert client.get("/health").status_code == 503
        after = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 3})
        assert after.status_code == 500 and after.json()["error"]["message"] == ENGINE_DEAD_CLIENT
        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        assert 'vllm:request_success_total{engine="0",finished_reason="error",model_name="smollm2"}' in metrics.text
