"""POST /v1/decisions: vLLM 0.33's structured decisions, read from the model's next-token probabilities.

Each question is one engine request (vLLM's NextTokenStrategy, vllm/entrypoints/openai/decisions/): the input
text, then the question with its options labelled A, B, C..., rendered as a user turn by the chat template, and
one greedy token whose logprobs are read for exactly the label tokens. The label probabilities, renormalised,
are the answer; their total over the vocabulary scales its confidence. The labels must each be one token right
after the template's generation prompt; for a model where they are not, the route answers 501, as vLLM's does.
"""

from __future__ import annotations

import json
import logging
import math
import string
import uuid
from dataclasses import dataclass
from http import HTTPStatus

from fastapi import FastAPI

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.server.decisions_protocol import (
    ChoiceQuestion,
    DecisionRequest,
    DecisionResponse,
    PredicateQuestion,
)
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.generation import final_outputs
from kvtool.engine.server.serving import ServerState, make_requests
from kvtool.engine.sizing import messages

logger = logging.getLogger("kvtool.serve")
LABELS = tuple(string.ascii_uppercase)  # a choice's options, in order
LABEL_SETS = (LABELS, ("yes", "no"), tuple(string.digits))  # every label set vLLM checks a model's tokens for
REPLY = "Answer with the letter of one option only."
MAX_QUESTIONS = 64


@dataclass(frozen=True)
class Read:
    """One question's read: the label probabilities (summing to 1), their mass over the vocabulary, the tokens."""

    probs: list[float]
    label_mass: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int


class LabelReader:
    """The model's prompt tail after its last added token, and each label's token right after it."""

    def __init__(self, processor):
        self.processor = processor
        self.tail = prompt_tail(processor.tokenizer, self.prompt_ids("x"))
        self.label_ids = {}
        for labels in LABEL_SETS:
            self.label_ids.update(zip(labels, reply_label_ids(processor.tokenizer, self.tail, labels)))

    def prompt_ids(self, content: str) -> list[int]:
        conversation = [{"role": "user", "content": content}]
        return self.processor.chat_prompt_ids(conversation, add_generation_prompt=True, enable_thinking=False)

    def prompt(self, state: str, question: str) -> list[int]:
        ids = self.prompt_ids(f"{state}\n\n{question}")
        if ids[len(ids) - len(self.tail) :] != self.tail:
            raise APIError(messages.DECISIONS_ENDS_DIFFERENTLY)
        return ids


def prompt_tail(tokenizer, prompt_ids: list[int]) -> list[int]:
    added = set(tokenizer.get_added_vocab().values())
    start = max((i + 1 for i, token in enumerate(prompt_ids) if token in added), default=0)
    return list(prompt_ids[start:])


def reply_label_ids(tokenizer, tail: list[int], labels: tuple[str, ...]) -> list[int]:
    """Each label's token as the reply's first; ValueError when one is not a single distinct token there."""
    text, ids = tokenizer.decode(tail), []
    for label in labels:
        extended = tokenizer.encode(text + label, add_special_tokens=False)
        if extended[:-1] != tail or extended[-1] in ids:
            raise ValueError(messages.DECISIONS_LABEL_NOT_ONE_TOKEN.format(label=label))
        ids.append(extended[-1])
    return ids


def options(question) -> list[tuple[str, str]]:
    """(name, description) of each option, as vLLM's adapters name them."""
    if isinstance(question, PredicateQuestion):
        return [("false", ""), ("true", "")]
    if isinstance(question, ChoiceQuestion):
        return [(json.dumps(c.value, ensure_ascii=False), c.description) for c in question.choices]
    return [(level.label, level.description) for level in question.levels]


def question_text(question) -> str:
    lines = [
        f"{label}: {name} - {about}" if about else f"{label}: {name}"
        for label, (name, about) in zip(LABELS, options(question))
    ]
    body = "\n".join([*lines, REPLY])
    return f"Question: {question.instructions}\n{body}" if question.instructions else body


def label_softmax(logprobs: list[float]) -> list[float]:
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


def answer(question, read: Read) -> dict:
    probs = read.probs
    if isinstance(question, PredicateQuestion):
        return {"type": "predicate", "name": question.name, "probability": probs[1]}
    top = max(range(len(probs)), key=probs.__getitem__)
    confidence = probs[top] * read.label_mass
    if isinstance(question, ChoiceQuestion):
        chances = [{"value": c.value, "probability": p} for c, p in zip(question.choices, probs)]
        choice = question.choices[top].value
        return {
            "type": "choice",
            "name": question.name,
            "choice": choice,
            "probabilities": chances,
            "confidence": confidence,
        }
    chances = [
        {"value": i, "label": level.label, "probability": p} for i, (level, p) in enumerate(zip(question.levels, probs))
    ]
    score = sum(i * p for i, p in enumerate(probs))
    return {"type": "score", "name": question.name, "score": score, "probabilities": chances, "confidence": confidence}


def decision_read(output, label_ids: list[int]) -> Read:
    completion = output.outputs[0]
    candidates = completion.logprobs[0]
    logprobs = [candidates[token].logprob for token in label_ids]
    return Read(
        label_softmax(logprobs),
        sum(math.exp(lp) for lp in logprobs),
        len(output.prompt_token_ids),
        len(completion.token_ids),
        output.num_cached_tokens,
    )


async def read_questions(state: ServerState, reader: LabelReader, body: DecisionRequest) -> list[Read]:
    """One engine request per question, all at once: one greedy token, with the logprobs of its labels."""
    text, processor = body.input_text(), state.engine.input_processor
    label_ids = [[reader.label_ids[label] for label in LABELS[: len(options(q))]] for q in body.questions]
    processed = [
        processor.process(reader.prompt(text, question_text(q)), read_params(ids))
        for q, ids in zip(body.questions, label_ids)
    ]
    finals = await final_outputs(state, make_requests(f"decision-{uuid.uuid4().hex}", processed, 1))
    return [decision_read(finals[i], ids) for i, ids in enumerate(label_ids)]


def read_params(label_ids: list[int]) -> SamplingParams:
    return SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=label_ids)


def decision_usage(reads: list[Read]) -> dict:
    input_tokens, output_tokens = sum(r.input_tokens for r in reads), sum(r.output_tokens for r in reads)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": sum(r.cached_tokens for r in reads), "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def check_decision(body: DecisionRequest) -> None:
    """What vLLM refuses before reading: too many questions or options, joint reads; and a cache salt."""
    if body.cache_salt is not None:
        message = messages.FIELD_NOT_SUPPORTED.format(param="cache_salt", default="null")
        raise APIError(message, param="cache_salt")
    if len(body.questions) > MAX_QUESTIONS:
        raise APIError(messages.DECISIONS_TOO_MANY_QUESTIONS.format(limit=MAX_QUESTIONS))
    if any(len(options(question)) > len(LABELS) for question in body.questions):
        raise APIError(messages.DECISIONS_TOO_MANY_CHOICES.format(limit=len(LABELS)))
    if body.joint:
        raise APIError(messages.DECISIONS_JOINT)


def label_reader(processor) -> LabelReader | None:
    try:
        return LabelReader(processor)
    except Exception as err:  # no tokenizer, no chat template, labels that are not one token each
        logger.info("POST /v1/decisions answers 501 for this model: %s", err)
        return None


def add_decisions_route(app: FastAPI, state: ServerState) -> None:
    reader = label_reader(state.engine.input_processor)

    @app.post("/v1/decisions", response_model=DecisionResponse)
    async def decisions(body: DecisionRequest) -> dict:
        """Answer each question with the probability of each of its options."""
        if reader is None:
            raise APIError(messages.DECISIONS_NOT_SUPPORTED, HTTPStatus.NOT_IMPLEMENTED, "NotImplementedError")
        state.check_model(body.model)
        check_decision(body)
        reads = await read_questions(state, reader, body)
        answers = [answer(question, read) for question, read in zip(body.questions, reads)]
        return {"model": state.settings.model_name, "answers": answers, "usage": decision_usage(reads)}
