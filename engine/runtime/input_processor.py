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
from kvtool.engine.runtime.prompt_embeds import PARAM as EMBEDS_PARAM
from kvtool.engine.runtime.prompt_embeds import EmbedsPrompt, EmbedsShape, EmbedsSpan
from kvtool.engine.runtime.token_checks import check_logprobs, check_named_token_ids
from kvtool.engine.runtime.truncation import Truncation, cut
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing import request_length
from kvtool.engine.sizing.engine_config import ModelConfig
from kvtool.engine.sizing.request_length import MaxTokens, MaxTokensField, check_max_tokens, check_prompt_characters
from kvtool.errors import InvalidRequestError, UsageError


@dataclass
class ProcessedRequest:
    """A request ready for the scheduler (vLLM's EngineCoreRequest)."""

    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    max_tokens: MaxTokens  # what it runs with, after the overflow policy, and what it asked for
    arrival_time: float
    prompt_embeds: tuple[EmbedsSpan, ...] = ()  # rows that stand in for some prompt positions' embeddings


class InputProcessor:
    """Reads its limits (max_model_len, overflow, max_logprobs) from the resolved ModelConfig; the tokenizer and the
    model's facts come beside it."""

    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        config: ModelConfig,
        stop_token_ids=frozenset(),
        embeds_shape: EmbedsShape | None = None,
    ):
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_model_len = config.max_model_len
        self.overflow = config.overflow
        self.max_logprobs = vocab_size if config.max_logprobs == -1 else config.max_logprobs
        self.embeds_shape = embeds_shape  # what prompt_embeds must be; None without --enable-prompt-embeds
        self.stop_token_ids = set(stop_token_ids)  # end the grammar's output as they end free generation
        self._grammar_compiler = None
        self._grammar_lock = threading.Lock()  # the server's threads and the step thread may all ask first

    def process(
        self,
        prompt: str | list[int] | EmbedsPrompt,
        params: SamplingParams,
        *,
        max_tokens: MaxTokensField | None = None,
        add_special_tokens: bool = True,
        truncation: Truncation | None = None,
    ) -> ProcessedRequest:
        """Tokenize and check one prompt; RequestTooLongError or InvalidRequestError (HTTP 400) when it cannot run.

        `max_tokens` is the request's field as its route read it (by default the params' max_tokens, as sent);
        request_length.decide_max_tokens fixes what the request runs with. A chat request hands its rendered text
        here.
        """
        self.check_params(params)
        field = max_tokens or MaxTokensField(params.max_tokens)
        requested = field.requested(self.max_model_len)
        check_max_tokens(requested, self.max_model_len, field.name)  # named after the field the client sent
        if isinstance(prompt, str) and truncation is not None:
            text, ids = self.truncated(prompt, truncation, requested, add_special_tokens)
        else:
            if truncation is not None:  # token ids, or embeddings with their rows
                prompt = cut(prompt, truncation.kept(self.max_model_len, requested), truncation.side_of(self.tokenizer))
            elif isinstance(prompt, str) and self.tokenizer is not None:
                check_prompt_characters(
                    len(prompt), requested, self.max_model_len, self.overflow, self.max_chars_per_token
                )
            text, ids = self.tokenize(prompt, add_special_tokens=add_special_tokens)
        decided = request_length.decide_max_tokens(
            len(ids), self.max_model_len, requested, field.default_max_tokens, self.overflow, text is not None
        )
        spans = prompt.spans if isinstance(prompt, EmbedsPrompt) else ()
        return ProcessedRequest(text, ids, params, decided, time.monotonic(), spans)

    def truncated(
        self, prompt: str, truncation: Truncation, requested: int | None, add_special_tokens: bool
    ) -> tuple[str, list[int]]:
        """A text prompt's tokens, cut as vLLM 0.33's renderer cuts them (vllm/renderers/params.py).

        Without a side the tokenizer truncates on its own side (keeping its special tokens); with one, the whole
        text is tokenized (a text past max_model_len x the longest token is first cut to that, from that side)
        and the tokens are sliced.
        """
        keep, side = truncation.kept(self.max_model_len, requested), truncation.side_of(self.tokenizer)
        if truncation.side is not None and self.tokenizer is not None:
            prompt = cut(prompt, self.max_model_len * self.max_chars_per_token, side)
        ids = self.encode(prompt, "prompt", add_special_tokens, None if truncation.side else keep)
        return prompt, self.non_empty(cut(ids, keep, side))

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
        self, prompt: str | list[int] | EmbedsPrompt, param: str = "prompt", add_special_tokens: bool = True
    ) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            ids = self.encode(prompt, param, add_special_tokens)
            text = prompt
        elif isinstance(prompt, EmbedsPrompt):
            self.check_prompt_embeds_enabled()
            text, ids = None, list(prompt.prompt_token_ids)
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

    def check_prompt_embeds_enabled(self) -> None:
        if self.embeds_shape is None:
            raise InvalidRequestError(msg.with_parameter(msg.PROMPT_EMBEDS_DISABLED, EMBEDS_PARAM), EMBEDS_PARAM)

    def load_prompt_embeds(self, data: str):
        """A `prompt_embeds` payload (base64 of a torch-saved tensor) as rows in the model's dtype; a 400 when the
        server does not take embeddings or the payload is not a (num_tokens, hidden_size) float tensor."""
        self.check_prompt_embeds_enabled()
        return self.embeds_shape.load(data)

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
        check_named_token_ids(params, self.vocab_size)
        check_logprobs(params, self.vocab_size, self.max_logprobs)
        for stop in params.stop:
            check_text(stop, "stop")
        if params.bad_words and params.bad_words_token_ids is None:
            params.bad_words_token_ids = bad_words_token_ids(self.tokenizer, params.bad_words)
        self.compile_constraint(params)


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
