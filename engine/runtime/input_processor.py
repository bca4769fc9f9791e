"""InputProcessor: the one place a request is tokenized, validated and fitted to max_model_len.

Both the offline LLM and the server hand their prompts here (text, token ids, or chat messages through
the tokenizer's chat template). What comes out is a ProcessedRequest whose every field is known to be
in range for this model, so that nothing reaching an engine step can raise because of its inputs: the
length checks in vLLM 0.33's order and words (request_length.py), the token ids a request names, and its
structured-output constraint, compiled here so that a schema the grammar engine refuses is a 400.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import cached_property

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.defaults import MAX_LOGPROB_TOKEN_IDS, MAX_LOGPROBS
from kvtool.engine.sizing.request_length import MaxTokens, check_max_tokens, check_prompt_characters, decide_max_tokens
from kvtool.errors import InvalidRequestError, UsageError

TRUNCATE = "truncate_prompt_tokens"


@dataclass(frozen=True)
class Truncation:
    """vLLM's truncate_prompt_tokens and truncation_side: keep `tokens` prompt tokens (-1: max_model_len - 1)."""

    tokens: int
    side: str | None = None  # "left" keeps the last ones, "right" the first ones; None: the tokenizer's side


@dataclass
class ProcessedRequest:
    """A request ready for the scheduler (vLLM's EngineCoreRequest)."""

    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    max_tokens: MaxTokens  # what it runs with, after the overflow policy, and what it asked for
    arrival_time: float


class InputProcessor:
    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        max_model_len: int,
        overflow: str = "reject",
        stop_token_ids=frozenset(),
        max_logprobs: int = MAX_LOGPROBS,
    ):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self.overflow = overflow
        self.max_logprobs = vocab_size if max_logprobs == -1 else max_logprobs
        self.stop_token_ids = set(stop_token_ids)  # end the grammar's output as they end free generation
        self._grammar_compiler = None
        self._grammar_lock = threading.Lock()  # the server's threads and the step thread may all ask first

    def process(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        *,
        max_tokens_param: str = "max_tokens",
        default_max_tokens: int | None = None,
        add_special_tokens: bool = True,
        truncation: Truncation | None = None,
    ) -> ProcessedRequest:
        """Tokenize and check one prompt; RequestTooLongError or InvalidRequestError (HTTP 400) when it cannot run.

        `default_max_tokens` is a serving profile's default, for a request that set none (decide_max_tokens).
        A chat request hands its rendered text here.
        """
        self.check_params(params)
        requested = params.max_tokens
        check_max_tokens(requested, self.max_model_len, max_tokens_param)  # named after the field the client sent
        if truncation is not None:
            text, ids = self.truncated(prompt, truncation, requested, add_special_tokens)
        else:
            if isinstance(prompt, str) and self.tokenizer is not None:
                check_prompt_characters(
                    len(prompt), requested, self.max_model_len, self.overflow, self.max_chars_per_token
                )
            text, ids = self.tokenize(prompt, add_special_tokens=add_special_tokens)
        max_tokens = decide_max_tokens(
            len(ids), self.max_model_len, requested, default_max_tokens, self.overflow, text is not None
        )
        return ProcessedRequest(text, ids, params, max_tokens, time.monotonic())

    def truncated(
        self, prompt: str | list[int], truncation: Truncation, requested: int | None, add_special_tokens: bool
    ) -> tuple[str | None, list[int]]:
        """The prompt cut to `truncation.tokens` tokens, as vLLM 0.33's renderer cuts it (vllm/renderers/params.py).

        Without a side the tokenizer truncates on its own side (keeping its special tokens); with one, the whole
        text is tokenized (a text past max_model_len x the longest token is first cut to that, from that side)
        and the tokens are sliced.
        """
        keep = self.kept_tokens(truncation.tokens, requested)
        side = truncation.side or getattr(self.tokenizer, "truncation_side", None) or "right"
        if not isinstance(prompt, str):
            return self.tokenize(prompt[max(len(prompt) - keep, 0) :] if side == "left" else prompt[:keep])
        if truncation.side is not None and self.tokenizer is not None:
            max_chars = self.max_model_len * self.max_chars_per_token
            prompt = prompt[-max_chars:] if side == "left" else prompt[:max_chars]
        ids = self.encode(prompt, "prompt", add_special_tokens, None if truncation.side else keep)
        return prompt, self.non_empty(ids[max(len(ids) - keep, 0) :] if side == "left" else ids[:keep])

    def kept_tokens(self, truncate_prompt_tokens: int, requested: int | None) -> int:
        if truncate_prompt_tokens > self.max_model_len:
            message = msg.TRUNCATE_PROMPT_TOKENS_TOO_LARGE.format(
                truncate_prompt_tokens=truncate_prompt_tokens, max_input_tokens=self.max_model_len
            )
            raise InvalidRequestError(msg.with_parameter(message, TRUNCATE, truncate_prompt_tokens), TRUNCATE)
        if truncate_prompt_tokens == -1:  # the whole context but the one token to generate
            return self.max_model_len if requested == 0 else self.max_model_len - 1
        return truncate_prompt_tokens

    @staticmethod
    def non_empty(ids: list[int], param: str = "prompt") -> list[int]:
        if not ids:
            raise InvalidRequestError(msg.EMPTY_PROMPT, param)
        return ids

    @cached_property
    def max_chars_per_token(self) -> int:
        """The longest token's length: vLLM refuses text longer than that many characters per input token."""
        return max(len(token) for token in self.tokenizer.get_vocab())

    @property
    def grammar_compiler(self):
        """The xgrammar compiler for this tokenizer, built on first use (it reads the whole vocabulary)."""
        with self._grammar_lock:
            if self._grammar_compiler is None:
                from kvtool.engine.runtime.structured_output.compiler import GrammarCompiler

                if self.tokenizer is None:
                    raise InvalidRequestError(msg.NO_GRAMMAR_WITHOUT_TOKENIZER, "structured_outputs")
                self._grammar_compiler = GrammarCompiler(self.tokenizer, self.vocab_size, self.stop_token_ids)
            return self._grammar_compiler

    def compile_constraint(self, params: SamplingParams) -> None:
        """Compile (or find in the cache) the request's grammar; StructuredOutputError (HTTP 400) says why not.

        The server calls this in a worker thread before `process`, which then finds the grammar cached.
        """
        if params.structured_outputs is not None:
            self.grammar_compiler.compile(params.structured_outputs)

    def tokenize(
        self, prompt: str | list[int], param: str = "prompt", add_special_tokens: bool = True
    ) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            ids = self.encode(prompt, param, add_special_tokens)
            text = prompt
        else:
            text, ids = None, list(prompt)
            self.check_token_ids(ids, param)
        return text, self.non_empty(ids, param)

    def encode(
        self, text: str, param: str = "prompt", add_special_tokens: bool = True, max_length: int | None = None
    ) -> list[int]:
        """The text's tokens; with `max_length`, the tokenizer truncates them on its own side."""
        if self.tokenizer is None:
            raise UsageError(
                "This model has no tokenizer, so prompts must be token-id lists.",
                fix="Pass a list of token ids, or a model folder with tokenizer files.",
            )
        check_text(text, param)
        truncation = {} if max_length is None else {"truncation": True, "max_length": max_length}
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens, **truncation)

    def render_chat(self, conversation: list[dict], add_generation_prompt: bool = True, **template_kwargs) -> str:
        """A conversation as the tokenizer's chat template writes it; kwargs reach the template (tools, documents)."""
        if not (template_kwargs.get("chat_template") or getattr(self.tokenizer, "chat_template", None)):
            raise InvalidRequestError(msg.NO_CHAT_TEMPLATE, "messages")
        for i, message in enumerate(conversation):
            check_text(message["content"], f"messages.{i}.content")
        try:
            return self.tokenizer.apply_chat_template(
                conversation, add_generation_prompt=add_generation_prompt, tokenize=False, **template_kwargs
            )
        except Exception as err:  # jinja raises for conversations a template refuses (e.g. roles out of order)
            raise InvalidRequestError(f"The chat template cannot render these messages: {err}", "messages") from err

    def chat_prompt_ids(self, conversation: list[dict], add_generation_prompt: bool = True, **template_kwargs):
        text = self.render_chat(conversation, add_generation_prompt, **template_kwargs)
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
        """What SamplingParams cannot check alone: bounds that depend on the model, then the request's grammar."""
        self.check_named_token_ids(params)
        self.check_logprobs(params)
        for stop in params.stop:
            check_text(stop, "stop")
        if params.bad_words and params.bad_words_token_ids is None:
            params.bad_words_token_ids = bad_words_token_ids(self.tokenizer, params.bad_words)
        self.compile_constraint(params)

    def check_logprobs(self, params: SamplingParams) -> None:
        """vLLM 0.33's bounds: max_logprobs for sample and prompt logprobs (-1: the vocabulary), logprob_token_ids."""
        for name, template, asked in (
            ("logprobs", msg.LOGPROBS_OVER_MAX, params.logprobs),
            ("prompt_logprobs", msg.PROMPT_LOGPROBS_OVER_MAX, params.prompt_logprobs),
        ):
            value = self.vocab_size if asked == -1 else asked
            if value and value > self.max_logprobs:
                message = template.format(value=value, max_logprobs=self.max_logprobs)
                raise InvalidRequestError(msg.with_parameter(message, name, value), name)
        if params.logprob_token_ids is not None:
            self._check_logprob_token_ids(params.logprob_token_ids, params.logprobs)

    def _check_logprob_token_ids(self, token_ids: list[int], logprobs: int | None) -> None:
        count, name = len(token_ids), "logprob_token_ids"
        invalid = [t for t in token_ids if not 0 <= t < self.vocab_size]
        if count > MAX_LOGPROB_TOKEN_IDS:
            message = msg.LOGPROB_TOKEN_IDS_TOO_MANY.format(value=count, max_ids=MAX_LOGPROB_TOKEN_IDS)
        elif invalid:
            message = msg.LOGPROB_TOKEN_IDS_OUT_OF_VOCAB.format(token_ids=invalid, vocab_size=self.vocab_size)
        elif logprobs is not None and logprobs != count:
            message = msg.LOGPROB_TOKEN_IDS_LOGPROBS_MISMATCH.format(logprobs=logprobs, value=count)
        else:
            return
        raise InvalidRequestError(msg.with_parameter(message, name, invalid or count), name)

    def check_named_token_ids(self, params: SamplingParams) -> None:
        """vLLM 0.33's checks (with its parameter suffix) of the token ids a request names."""
        for name, ids in (("stop_token_ids", params.stop_token_ids), ("logit_bias", list(params.logit_bias or {}))):
            invalid = [t for t in ids if not 0 <= t < self.vocab_size]
            if invalid:
                message = msg.TOKEN_IDS_OUT_OF_VOCAB.format(token_ids=invalid, param=name, vocab_size=self.vocab_size)
                raise InvalidRequestError(msg.with_parameter(message, name, invalid), name)
        invalid = [t for t in params.allowed_token_ids or [] if not 0 <= t < self.vocab_size]
        if invalid:
            message = msg.with_parameter(msg.ALLOWED_TOKEN_IDS_OUT_OF_VOCAB, "allowed_token_ids", invalid)
            raise InvalidRequestError(message, "allowed_token_ids")


def check_text(text: str, param: str) -> None:
    """Text must encode as UTF-8 (a lone surrogate such as "\\ud800" does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidRequestError(msg.TEXT_NOT_ENCODABLE.format(param=param, detail=err.reason), param) from err


def bad_words_token_ids(tokenizer, bad_words: list[str]) -> list[list[int]]:
    """Each word as tokens, alone and after a space (a word can start a text or follow one), as vLLM does."""
    words: list[list[int]] = []
    for bad_word in bad_words:
        for prefix in ("", " "):
            ids = tokenizer.encode(prefix + bad_word.lstrip(), add_special_tokens=False)
            if not ids:
                if not prefix:
                    raise InvalidRequestError(msg.BAD_WORD_WITHOUT_TOKENS, "bad_words")
                continue
            if not prefix or (ids[0] != words[-1][0] and len(ids) == len(words[-1])):
                words.append(ids)
    return words
