"""InputProcessor: the one place a request is tokenized, validated and fitted to max_model_len.

Both the offline LLM and the server hand their prompts here (text, token ids, or chat messages through
the tokenizer's chat template). What comes out is a ProcessedRequest whose every field is known to be
in range for this model, so that nothing reaching an engine step can raise because of its inputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.request_length import check_request_length
from kvtool.errors import InvalidRequestError, UsageError

MAX_LOGPROBS = 20  # vLLM's default max_logprobs


@dataclass
class ProcessedRequest:
    """A request ready for the scheduler (vLLM's EngineCoreRequest)."""

    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    max_tokens: int  # after the overflow policy
    requested_max_tokens: int | None  # what the request asked for (or its default)
    arrival_time: float

    @property
    def clamped(self) -> bool:
        return self.requested_max_tokens is not None and self.max_tokens < self.requested_max_tokens


class InputProcessor:
    def __init__(self, tokenizer, vocab_size: int, max_model_len: int, overflow: str = "reject"):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self.overflow = overflow

    def process(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        *,
        max_tokens_param: str = "max_tokens",
        default_max_tokens: int | None = None,
    ) -> ProcessedRequest:
        """Tokenize and check one prompt; RequestTooLongError or InvalidRequestError (HTTP 400) when it cannot run.

        `default_max_tokens` (a serving profile's default, used when the request set none) is lowered to the
        room left rather than failing the request.
        """
        text, ids = self.tokenize(prompt)
        self.check_params(params)
        requested = params.max_tokens
        if requested is not None and requested > self.max_model_len:
            # checked first, and named after the field the client sent (max_tokens or max_completion_tokens)
            message = msg.MAX_TOKENS_TOO_LARGE.format(
                param=max_tokens_param, max_tokens=requested, max_model_len=self.max_model_len
            )
            raise InvalidRequestError(message, max_tokens_param)
        if default_max_tokens is not None and requested is None:
            requested = min(default_max_tokens, max(self.max_model_len - len(ids), 1))
        max_tokens = check_request_length(len(ids), requested, self.max_model_len, self.overflow)
        return ProcessedRequest(text, ids, params, max_tokens, requested, time.monotonic())

    def tokenize(
        self, prompt: str | list[int], param: str = "prompt", add_special_tokens: bool = True
    ) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            ids = self.encode(prompt, param, add_special_tokens)
            text = prompt
        else:
            text, ids = None, list(prompt)
            self.check_token_ids(ids, param)
        if not ids:
            raise InvalidRequestError(msg.EMPTY_PROMPT, param)
        return text, ids

    def encode(self, text: str, param: str = "prompt", add_special_tokens: bool = True) -> list[int]:
        if self.tokenizer is None:
            raise UsageError(
                "This model has no tokenizer, so prompts must be token-id lists.",
                fix="Pass a list of token ids, or a model folder with tokenizer files.",
            )
        check_text(text, param)
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)

    def render_chat(self, conversation: list[dict], add_generation_prompt: bool = True) -> list[int]:
        """The prompt ids of a conversation, rendered by the tokenizer's chat template."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise InvalidRequestError(msg.NO_CHAT_TEMPLATE, "messages")
        for i, message in enumerate(conversation):
            check_text(message["content"], f"messages.{i}.content")
        try:
            text = self.tokenizer.apply_chat_template(
                conversation, add_generation_prompt=add_generation_prompt, tokenize=False
            )
        except Exception as err:  # jinja raises for conversations a template refuses (e.g. roles out of order)
            raise InvalidRequestError(f"The chat template cannot render these messages: {err}", "messages") from err
        return self.encode(text, "messages", add_special_tokens=False)

    def detokenize(self, token_ids: list[int], param: str = "tokens") -> str:
        self.check_token_ids(token_ids, param)
        return self.tokenizer.decode(token_ids)

    def check_token_ids(self, token_ids: list[int], param: str) -> None:
        """vLLM's check: the lowest id, then the highest, against the model's vocabulary."""
        if not all(type(t) is int for t in token_ids):
            raise InvalidRequestError(f"{param} must be a list of integer token ids.", param)
        for token_id in (min(token_ids, default=0), max(token_ids, default=0)):
            if not 0 <= token_id < self.vocab_size:
                raise InvalidRequestError(msg.TOKEN_OUT_OF_VOCAB.format(token_id=token_id), param)

    def check_params(self, params: SamplingParams) -> None:
        """What SamplingParams cannot check alone: bounds that depend on the model."""
        invalid = [t for t in params.stop_token_ids if not 0 <= t < self.vocab_size]
        if invalid:
            raise InvalidRequestError(
                msg.STOP_TOKEN_IDS_OUT_OF_VOCAB.format(token_ids=invalid, vocab_size=self.vocab_size), "stop_token_ids"
            )
        num_logprobs = self.vocab_size if params.logprobs == -1 else params.logprobs
        if num_logprobs is not None and num_logprobs > MAX_LOGPROBS:
            raise InvalidRequestError(
                msg.LOGPROBS_OVER_MAX.format(value=num_logprobs, max_logprobs=MAX_LOGPROBS), "logprobs"
            )
        for stop in params.stop:
            check_text(stop, "stop")


def check_text(text: str, param: str) -> None:
    """Text must encode as UTF-8 (a lone surrogate such as "\\ud800" does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidRequestError(msg.TEXT_NOT_ENCODABLE.format(param=param, detail=err.reason), param) from err
