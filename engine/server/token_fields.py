"""vLLM 0.33's checks of the logprob and token-id request fields (its `check_logprobs` validators), per route.

vLLM runs them on the raw body before anything else; here they run first in each route, with the same
messages and `param`.
"""

from __future__ import annotations

from kvtool.engine.server.chat.protocol import ChatCompletionRequest
from kvtool.engine.server.errors import APIError
from kvtool.engine.server.protocol import CompletionRequest
from kvtool.engine.sizing import messages


def check_completion_fields(body: CompletionRequest) -> None:
    beam_search = _beam_search(body)
    if body.logprob_token_ids and beam_search:
        raise APIError(messages.LOGPROB_TOKEN_IDS_WITH_BEAM_SEARCH, param="logprob_token_ids")
    if beam_search and body.echo and body.logprobs is not None:
        raise APIError(messages.ECHO_LOGPROBS_WITH_BEAM_SEARCH, param="echo")
    if body.logprob_token_ids and body.echo_without_generation():
        raise APIError(messages.LOGPROB_TOKEN_IDS_WITHOUT_OUTPUT, param="logprob_token_ids")
    if body.logprob_token_ids and body.logprobs is None:
        raise APIError(messages.LOGPROB_TOKEN_IDS_WITHOUT_LOGPROBS, param="logprob_token_ids")
    _check_prompt_logprobs(body)
    _check_positive_or_minus_one("logprobs", body.logprobs)


def check_chat_fields(body: ChatCompletionRequest) -> None:
    if body.logprob_token_ids and _beam_search(body):
        raise APIError(messages.LOGPROB_TOKEN_IDS_WITH_BEAM_SEARCH, param="logprob_token_ids")
    if body.logprob_token_ids and not body.logprobs:
        raise APIError(messages.LOGPROB_TOKEN_IDS_WITHOUT_LOGPROBS_CHAT, param="logprob_token_ids")
    _check_prompt_logprobs(body)
    _check_positive_or_minus_one("top_logprobs", body.top_logprobs)
    if body.top_logprobs is not None and body.top_logprobs != 0 and not body.logprobs:
        raise APIError(messages.TOP_LOGPROBS_WITHOUT_LOGPROBS, param="top_logprobs")


def _check_prompt_logprobs(body) -> None:
    asked = body.prompt_logprobs
    if asked is not None and body.stream and (asked > 0 or asked == -1):
        raise APIError(messages.PROMPT_LOGPROBS_WITH_STREAM, param="prompt_logprobs")
    _check_positive_or_minus_one("prompt_logprobs", asked)


def _check_positive_or_minus_one(param: str, value: int | None) -> None:
    if value is not None and value < -1:
        raise APIError(messages.FIELD_NOT_POSITIVE_OR_MINUS_ONE.format(param=param), param=param)


def _beam_search(body) -> bool:
    """`use_beam_search`, which kvtool keeps among the extra fields (request_fields.py refuses it)."""
    return bool((body.model_extra or {}).get("use_beam_search", getattr(body, "use_beam_search", False)))
