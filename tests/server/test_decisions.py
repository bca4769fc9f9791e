"""POST /v1/decisions on the real server: answers read from the model's next-token probabilities of the labels."""

import math

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow
INPUT = "The package arrived with a broken screen."
QUESTIONS = [
    {"type": "predicate", "instructions": "Is the screen broken?"},
    {
        "type": "choice",
        "name": "department",
        "instructions": "Which department should handle this?",
        "choices": [{"value": "returns"}, {"value": "billing", "description": "payments and invoices"}],
    },
    {
        "type": "score",
        "name": "damage",
        "instructions": "Rate the damage.",
        "levels": [{"label": "undamaged"}, {"label": "scratched"}, {"label": "broken"}],
    },
]
PREDICATE_PROMPT = (
    f"{INPUT}\n\nQuestion: Is the screen broken?\nA: false\nB: true\nAnswer with the letter of one option only."
)


def decide(base_url: str, **body) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/decisions", json={"model": "smollm2", **body}, timeout=120)


def test_each_question_is_answered_with_the_probability_of_each_option(kvtool_server):
    reply = decide(kvtool_server, input=INPUT, questions=QUESTIONS)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == {"model", "answers", "usage"} and body["model"] == "smollm2"
    predicate, choice, score = body["answers"]
    assert predicate["type"] == "predicate" and predicate["name"] is None and 0 <= predicate["probability"] <= 1
    assert [p["value"] for p in choice["probabilities"]] == ["returns", "billing"]
    assert sum(p["probability"] for p in choice["probabilities"]) == pytest.approx(1)
    best = max(choice["probabilities"], key=lambda p: p["probability"])
    assert choice["choice"] == best["value"] and 0 < choice["confidence"] <= best["probability"]
    assert [(p["value"], p["label"]) for p in score["probabilities"]] == [
        (0, "undamaged"),
        (1, "scratched"),
        (2, "broken"),
    ]
    assert score["score"] == pytest.approx(sum(p["value"] * p["probability"] for p in score["probabilities"]))


def test_usage_counts_one_prompt_and_one_token_per_question(kvtool_server):
    usage = decide(kvtool_server, input=INPUT, questions=QUESTIONS[:1]).json()["usage"]
    messages = [{"role": "user", "content": PREDICATE_PROMPT}]
    count = httpx.post(f"{kvtool_server}/tokenize", json={"messages": messages}).json()["count"]
    assert usage["input_tokens"] == count and usage["output_tokens"] == 1
    assert usage["total_tokens"] == count + 1 and usage["output_tokens_details"] == {"reasoning_tokens": 0}


def test_a_predicate_is_the_softmax_of_the_two_labels_first_token_logprobs(kvtool_server):
    """The same prompt through chat completions: the labels' logprobs among its top candidates give the answer."""
    probability = decide(kvtool_server, input=INPUT, questions=QUESTIONS[:1]).json()["answers"][0]["probability"]
    client = openai.OpenAI(base_url=f"{kvtool_server}/v1", api_key="unused", max_retries=0, timeout=120)
    reply = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": PREDICATE_PROMPT}],
        max_tokens=1,
        temperature=0.0,
        logprobs=True,
        top_logprobs=20,
    )
    top = {c.token: c.logprob for c in reply.choices[0].logprobs.content[0].top_logprobs}
    assert {"A", "B"} <= set(top), top  # SmolLM2 answers with a letter here
    assert probability == pytest.approx(1 / (1 + math.exp(top["A"] - top["B"])), rel=1e-4)


@pytest.mark.parametrize(
    "body, message",
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]},
            "Decisions supports text input only; images are not supported",
        ),
        ({"joint": True}, "joint: this model reads each question on its own"),
        (
            {"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": "a"}, {"value": "a"}]}]},
            "choice values must be distinct",
        ),
        (
            {"questions": [{"type": "choice", "instructions": "?", "choices": [{"value": str(i)} for i in range(27)]}]},
            "This model supports at most 26 choices per question",
        ),
        ({"questions": [{"type": "predicate", "instructions": "?"}] * 65}, "questions: at most 64 for this model"),
        ({"questions": [{"type": "predicate", "instructions": "?", "name": None}]}, "name must be a string"),
    ],
)
def test_questions_it_cannot_read_are_refused_with_vllms_words(kvtool_server, body, message):
    reply = decide(kvtool_server, **{"input": INPUT, "questions": QUESTIONS[:1], **body})
    assert reply.status_code == 400 and message in reply.json()["error"]["message"]


def test_another_model_name_is_not_found(kvtool_server):
    reply = httpx.post(f"{kvtool_server}/v1/decisions", json={"model": "qwen", "input": INPUT, "questions": QUESTIONS})
    assert reply.status_code == 404
