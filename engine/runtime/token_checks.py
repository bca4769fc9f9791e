"""vLLM 0.33's checks of the token ids and logprob counts a request names, against the served model: its
vocabulary and the server's --max-logprobs (-1: the vocabulary)."""

from __future__ import annotations

from kvtool.engine.runtime.config import SamplingParams
from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.defaults import MAX_LOGPROB_TOKEN_IDS
from kvtool.errors import InvalidRequestError


def check_logprobs(params: SamplingParams, vocab_size: int, max_logprobs: int) -> None:
    """max_logprobs bounds sample and prompt logprobs (-1 asks for the vocabulary); then logprob_token_ids."""
    for name, template, asked in (
        ("logprobs", msg.LOGPROBS_OVER_MAX, params.logprobs),
        ("prompt_logprobs", msg.PROMPT_LOGPROBS_OVER_MAX, params.prompt_logprobs),
    ):
        value = vocab_size if asked == -1 else asked
        if value and value > max_logprobs:
            message = template.format(value=value, max_logprobs=max_logprobs)
            raise InvalidRequestError(msg.with_parameter(message, name, value), name)
    if params.logprob_token_ids is not None:
        check_logprob_token_ids(params.logprob_token_ids, params.logprobs, vocab_size)


def check_logprob_token_ids(token_ids: list[int], logprobs: int | None, vocab_size: int) -> None:
    count, name = len(token_ids), "logprob_token_ids"
    invalid = [t for t in token_ids if not 0 <= t < vocab_size]
    if count > MAX_LOGPROB_TOKEN_IDS:
        message = msg.LOGPROB_TOKEN_IDS_TOO_MANY.format(value=count, max_ids=MAX_LOGPROB_TOKEN_IDS)
    elif invalid:
        message = msg.LOGPROB_TOKEN_IDS_OUT_OF_VOCAB.format(token_ids=invalid, vocab_size=vocab_size)
    elif logprobs is not None and logprobs != count:
        message = msg.LOGPROB_TOKEN_IDS_LOGPROBS_MISMATCH.format(logprobs=logprobs, value=count)
    else:
        return
    raise InvalidRequestError(msg.with_parameter(message, name, invalid or count), name)


def check_named_token_ids(params: SamplingParams, vocab_size: int) -> None:
    """stop_token_ids, logit_bias's keys and allowed_token_ids, each in the vocabulary (with vLLM's suffix)."""
    for name, ids in (("stop_token_ids", params.stop_token_ids), ("logit_bias", list(params.logit_bias or {}))):
        invalid = [t for t in ids if not 0 <= t < vocab_size]
        if invalid:
            message = msg.TOKEN_IDS_OUT_OF_VOCAB.format(token_ids=invalid, param=name, vocab_size=vocab_size)
            raise InvalidRequestError(msg.with_parameter(message, name, invalid), name)
    invalid = [t for t in params.allowed_token_ids or [] if not 0 <= t < vocab_size]
    if invalid:
        message = msg.with_parameter(msg.ALLOWED_TOKEN_IDS_OUT_OF_VOCAB, "allowed_token_ids", invalid)
        raise InvalidRequestError(message, "allowed_token_ids")
