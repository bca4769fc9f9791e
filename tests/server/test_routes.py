"""vLLM's other routes and headers on the session's real `kvtool serve`: /version, SageMaker's /ping and
/invocations, the batch chat route, the ORCA load header, and content parts named in their refusals."""

import json

import httpx
import pytest
from greedy_paths import assert_same_greedy_tokens

import kvtool
from kvtool.engine.server.defaults import VLLM_API_VERSION

pytestmark = pytest.mark.slow
GREEDY = {"temperature": 0.0}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def post(base_url: str, path: str, body: dict, **headers) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=120)


def refusal(response: httpx.Response) -> dict:
    assert response.status_code == 400, response.text
    return response.json()["error"]


def test_version_answers_the_vllm_api_it_follows_and_kvtools_own(kvtool_server):
    assert httpx.get(f"{kvtool_server}/version").json() == {
        "version": VLLM_API_VERSION,
        "kvtool_version": kvtool.__version__,
    }


def test_load_is_0_without_load_tracking(kvtool_server):
    assert httpx.get(f"{kvtool_server}/load").json() == {"server_load": 0}


def test_without_their_flags_there_is_no_tokenizer_info_and_no_made_up_request_id(kvtool_server):
    assert httpx.get(f"{kvtool_server}/tokenizer_info").status_code == 404
    assert "x-request-id" not in httpx.get(f"{kvtool_server}/health").headers


@pytest.mark.parametrize("asked", ["TEXT", "json"])
def test_a_whole_answer_carries_the_orca_load_report_in_the_format_asked(kvtool_server, asked):
    body = {"prompt": "Hello", "max_tokens": 3}
    report = post(kvtool_server, "/v1/completions", body, **{"endpoint-load-metrics-format": asked})
    header = report.headers["endpoint-load-metrics"]
    if asked == "TEXT":
        assert header.startswith("TEXT named_metrics.num_requests_waiting=0.0, named_metrics.kv_cache_usage_perc=")
    else:
        assert header.startswith("JSON ")
        named = json.loads(header.removeprefix("JSON "))["named_metrics"]
        assert (
            list(named) == ["num_requests_waiting", "kv_cache_usage_perc"] and 0.0 <= named["kv_cache_usage_perc"] < 1
        )
    for headers in ({}, {"endpoint-load-metrics-format": "xml"}):
        assert "endpoint-load-metrics" not in post(kvtool_server, "/v1/completions", body, **headers).headers


def test_ping_answers_get_and_post_as_health(kvtool_server):
    assert httpx.get(f"{kvtool_server}/ping").status_code == 200
    assert httpx.post(f"{kvtool_server}/ping").status_code == 200


@pytest.mark.parametrize(
    "route, body",
    [
        ("/v1/chat/completions", {"messages": QUESTION, "max_completion_tokens": 5, **GREEDY}),
        ("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 5, **GREEDY}),
    ],
)
def test_invocations_answers_a_chat_or_a_completion_body_as_its_route(kvtool_server, route, body):
    direct, invoked = post(kvtool_server, route, body).json(), post(kvtool_server, "/invocations", body).json()
    assert invoked["object"] == direct["object"] and invoked.keys() == direct.keys()
    assert invoked["choices"] == direct["choices"]


def test_invocations_refuses_a_body_of_neither_kind_and_what_is_not_json(kvtool_server):
    assert refusal(post(kvtool_server, "/invocations", {"prompt": 5}))["message"] == (
        "Cannot find suitable handler for request. Expected one of: ['ChatCompletionRequest', 'CompletionRequest']"
    )
    # as in vLLM, the completions check of a body with no prompt at all answers first
    no_prompt = refusal(post(kvtool_server, "/invocations", {"foo": 1}))
    assert no_prompt["message"] == "Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)"
    not_json = httpx.post(f"{kvtool_server}/invocations", content=b"{", headers={"content-type": "application/json"})
    assert refusal(not_json)["message"].startswith("JSON decode error")
    form = httpx.post(f"{kvtool_server}/invocations", content=b"{}", headers={"content-type": "text/plain"})
    assert refusal(form)["message"] == "Unsupported Media Type: Only 'application/json' is allowed"
    session = post(kvtool_server, "/invocations", {"requestType": "NEW_SESSION"})
    assert refusal(session)["message"] == "Invalid payload. stateful sessions not enabled"


def test_the_batch_route_answers_each_conversation_as_the_chat_route_does(fp32_server):
    conversations = [QUESTION, [{"role": "user", "content": "Name a colour."}]]
    body = {
        "messages": conversations,
        "max_tokens": 6,
        "return_token_ids": True,
        "logprobs": True,
        "top_logprobs": 2,
        **GREEDY,
    }
    batch = post(fp32_server, "/v1/chat/completions/batch", body).json()
    singles = [post(fp32_server, "/v1/chat/completions", {**body, "messages": chat}).json() for chat in conversations]
    assert [choice["index"] for choice in batch["choices"]] == [0, 1]
    for choice, single in zip(batch["choices"], singles):
        steps = single["choices"][0]["logprobs"]["content"]
        tops = [{top["token"]: top["logprob"] for top in step["top_logprobs"]} for step in steps]
        tokens = [step["token"] for step in choice["logprobs"]["content"]]
        assert_same_greedy_tokens(tokens, [step["token"] for step in steps], tops)
    # one answer for several prompts: vLLM's batch answer leaves the prompt's own fields unset
    assert batch["prompt_token_ids"] is None and singles[0]["prompt_token_ids"]
    for key in ("prompt_tokens", "completion_tokens"):
        assert batch["usage"][key] == sum(single["usage"][key] for single in singles)


def test_a_batch_schema_constrains_every_answer(kvtool_server):
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"]}
    conversations = [[{"role": "user", "content": f"Is {thing}? Answer in JSON."}] for thing in ("fire hot", "ice hot")]
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    body = {"messages": conversations, "response_format": response_format, "max_tokens": 20}
    for choice in post(kvtool_server, "/v1/chat/completions/batch", body).json()["choices"]:
        assert json.loads(choice["message"]["content"])["answer"] in ("yes", "no")


@pytest.mark.parametrize(
    "extra, param, message",
    [
        ({"n": 2}, "n", "Batch chat completions do not support `n > 1`. Please set `n` to 1. (parameter=n, value=2)"),
        ({"use_beam_search": True}, "use_beam_search", "do not support beam search"),
        ({"stream": True}, "stream", "do not support streaming"),
        ({"logprob_token_ids": [1]}, "logprob_token_ids", "when using `logprob_token_ids`, `logprobs` must be set"),
        ({"kv_transfer_params": {"prompt_token_ids": [1]}}, "kv_transfer_params.prompt_token_ids", "pre-tokenized"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "do not support tools"),
    ],
)
def test_the_batch_route_refuses_what_it_cannot_do_naming_it(kvtool_server, extra, param, message):
    error = refusal(post(kvtool_server, "/v1/chat/completions/batch", {"messages": [QUESTION], **extra}))
    assert error["param"] == param and message in error["message"]


@pytest.mark.parametrize(
    "part, param, message",
    [
        ({"type": "video"}, "type", "Unsupported chat content part type: 'video'. Supported types: input_text, "),
        ({"type": "image_url", "image_url": {"url": "x"}}, "type", "'image_url' needs a multimodal model"),
        ({"text": "no type"}, "type", "Missing 'type' field in multimodal part."),
        ({"type": "prompt_embeds"}, "prompt_embeds", "requires a non-empty `data` field"),
        ({"type": "prompt_embeds", "data": "AAAA"}, "prompt_embeds", "You must set `--enable-prompt-embeds`"),
    ],
)
def test_a_content_part_that_cannot_be_read_is_named(kvtool_server, part, param, message):
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, part]}], "max_tokens": 2}
    error = refusal(post(kvtool_server, "/v1/chat/completions", body))
    assert error["param"] == param and message in error["message"]


def test_completions_prompt_embeds_need_the_flag_and_a_prompt_needs_one_or_the_other(kvtool_server):
    embeds = refusal(post(kvtool_server, "/v1/completions", {"prompt_embeds": "AAAA", "max_tokens": 2}))
    assert embeds == {
        "message": "You must set `--enable-prompt-embeds` to input `prompt_embeds`. (parameter=prompt_embeds)",
        "type": "BadRequestError",
        "param": "prompt_embeds",
        "code": 400,
    }
    for body in ({"prompt": None}, {"prompt": "", "prompt_embeds": []}):
        error = refusal(post(kvtool_server, "/v1/completions", body))
        assert error["message"].startswith("Either prompt or prompt_embeds must be provided and non-empty.")


def test_text_parts_are_joined_with_newlines_as_vllm_joins_them(kvtool_server):
    parts = [{"type": "text", "text": "Hello"}, {"type": "input_text", "text": "world"}]
    as_parts = post(kvtool_server, "/tokenize", {"messages": [{"role": "user", "content": parts}]}).json()
    as_text = post(kvtool_server, "/tokenize", {"messages": [{"role": "user", "content": "Hello\nworld"}]}).json()
    assert as_parts["tokens"] == as_text["tokens"]
