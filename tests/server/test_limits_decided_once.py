"""Each limit is decided in one function: a fake decision put in its place reaches every consumer.

max_tokens: request_length.decide_max_tokens, for every route (completions, chat and its batch route, Responses,
beam search) whatever field a request sends, or none (the route's default, the serving profile's): generation
stops where that one decision says. max_model_len: context_length.resolve_max_model_len, from serve's flag to the
engine's scheduler, its request checks and the server's answers, and from plan's flag to its report.
"""

import json
from dataclasses import replace

import httpx
import openai
import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.cli.serve_startup import ServeRequest, plan_startup
from kvtool.engine.runtime.async_llm import AsyncLLM
from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.runtime.llm_engine import LLMEngine
from kvtool.engine.server.app import build_app
from kvtool.engine.server.serving import ServerSettings
from kvtool.engine.sizing import context_length, request_length
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.request_length import RequestTooLongError

pytestmark = pytest.mark.slow
FAKE_MAX_TOKENS = 3  # fewer than any request below asks for, or than a route or the profile gives by default
FAKE_MAX_MODEL_LEN = 300
ASKED = 10
GO_ON = {"ignore_eos": True}


@pytest.fixture(scope="module")
def server(smollm2_dir, in_process_server):
    engine = AsyncLLM.from_engine_args(
        EngineArgs(model=str(smollm2_dir), dtype="float32", max_model_len=512, kv_cache_memory=32 << 20, max_num_seqs=8)
    )
    running = in_process_server(build_app(engine, ServerSettings("smollm2", default_max_tokens=50)))
    yield running.base_url
    running.stop()


@pytest.fixture
def fake_max_tokens(monkeypatch):
    """decide_max_tokens, its value held to FAKE_MAX_TOKENS (a beam search's one-token steps keep theirs)."""
    decide = request_length.decide_max_tokens

    def fake(*args, **kwargs):
        decided = decide(*args, **kwargs)
        return replace(decided, value=min(decided.value, FAKE_MAX_TOKENS))

    monkeypatch.setattr(request_length, "decide_max_tokens", fake)


def completion_tokens(base_url: str, path: str, body: dict) -> list[int]:
    reply = httpx.post(f"{base_url}{path}", json={"model": "smollm2", **GO_ON, **body}, timeout=300)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    if "output" in answer:  # a Responses answer
        return [answer["usage"]["output_tokens"]]
    return [len(choice["token_ids"]) for choice in answer["choices"]]


ROUTES = {
    "completions, max_tokens": ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": ASKED}),
    "completions, the profile's 50": ("/v1/completions", {"prompt": "Once upon a time"}),
    "chat, max_completion_tokens": ("/v1/chat/completions", {"max_completion_tokens": ASKED}),
    "chat, max_tokens": ("/v1/chat/completions", {"max_tokens": ASKED}),
    "chat, the profile's 50": ("/v1/chat/completions", {}),
    "chat batch": ("/v1/chat/completions/batch", {"max_tokens": ASKED, "batch": True}),
    "beam search": ("/v1/completions", {"prompt": "Once", "max_tokens": ASKED, "n": 2, "use_beam_search": True}),
}
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_stops_where_the_one_max_tokens_decision_says(server, fake_max_tokens, route):
    path, body = ROUTES[route]
    if path.startswith("/v1/chat"):
        body = {**body, "messages": [HELLO, HELLO] if body.pop("batch", False) else HELLO}
    counts = completion_tokens(server, path, {**body, "return_token_ids": True})
    assert counts and all(count == FAKE_MAX_TOKENS for count in counts)


def test_a_responses_request_stops_where_the_one_max_tokens_decision_says(server, fake_max_tokens):
    body = {"input": "Say hello.", "max_output_tokens": ASKED}
    assert completion_tokens(server, "/v1/responses", body) == [FAKE_MAX_TOKENS]


def test_the_offline_engine_stops_where_the_one_max_tokens_decision_says(smollm2_llm, fake_max_tokens):
    output = smollm2_llm.generate([[1, 2, 3]], SamplingParams(max_tokens=ASKED, ignore_eos=True), use_tqdm=False)
    assert len(output[0].outputs[0].token_ids) == FAKE_MAX_TOKENS


@pytest.fixture
def fake_max_model_len(monkeypatch):
    monkeypatch.setattr(context_length, "resolve_max_model_len", lambda *args, **kwargs: FAKE_MAX_MODEL_LEN)


def test_plan_reports_the_one_max_model_len_decision(fake_max_model_len):
    args = ["plan", "--model", "smollm2", "--kv-cache-memory", "64MiB", "--max-model-len", "1000", "--json"]
    planned = CliRunner().invoke(app, args)
    assert json.loads(planned.stdout)["max_model_len"] == FAKE_MAX_MODEL_LEN


def test_serve_runs_engine_and_server_at_the_one_max_model_len_decision(
    smollm2_dir, fake_max_model_len, in_process_server
):
    flags = EngineArgs(device="cpu", max_model_len=1000, kv_cache_memory=32 << 20, max_num_seqs=8)
    startup = plan_startup(ServeRequest(model=str(smollm2_dir), engine_args=flags))
    assert startup.engine_args.max_model_len == FAKE_MAX_MODEL_LEN
    engine = LLMEngine(replace(startup.engine_args, dtype="float32"))
    assert engine.config.model_config.max_model_len == FAKE_MAX_MODEL_LEN
    assert engine.scheduler.max_model_len == engine.input_processor.max_model_len == FAKE_MAX_MODEL_LEN
    with pytest.raises(RequestTooLongError, match=f"maximum context length is {FAKE_MAX_MODEL_LEN} tokens"):
        engine.input_processor.process([1] * (FAKE_MAX_MODEL_LEN + 1), SamplingParams(max_tokens=1))
    running = in_process_server(build_app(AsyncLLM(engine), ServerSettings("smollm2")))
    try:
        card = httpx.get(f"{running.base_url}/v1/models", timeout=60).json()["data"][0]
        client = openai.OpenAI(base_url=f"{running.base_url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match=f"max_model_len={FAKE_MAX_MODEL_LEN}"):
            client.completions.create(model="smollm2", prompt="Hi", max_tokens=FAKE_MAX_MODEL_LEN + 1)
    finally:
        running.stop()
    assert card["max_model_len"] == FAKE_MAX_MODEL_LEN
