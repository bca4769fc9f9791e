"""Logprobs as vLLM 0.33 writes them: completions (parallel lists), chat (token objects), prompt_logprobs.

Each position's candidates keep the engine's order: the sampled (or prompt) token first, then the top ones.
A logprob of -inf (a token the grammar masked) is written as -9999.0, which JSON can carry. With
`return_tokens_as_token_ids` every token reads `token_id:{id}`, so that a token that is not valid UTF-8
on its own stays identifiable.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from kvtool.engine.runtime.outputs import Logprob, PromptLogprobs

LOWEST_LOGPROB = -9999.0  # OpenAI's stand-in for -inf, and vLLM's


def clamped(logprob: float) -> float:
    return max(logprob, LOWEST_LOGPROB)


@dataclass
class TokenNames:
    """How a response names tokens: their text, or `token_id:{id}`."""

    tokenizer: object
    as_token_ids: bool = False

    def __call__(self, token_id: int, logprob: Logprob | None = None) -> str:
        if self.as_token_ids:
            return f"token_id:{token_id}"
        if logprob is not None and logprob.decoded_token is not None:
            return logprob.decoded_token
        return self.tokenizer.decode([token_id])


def completion_top_limit(logprobs: int | None, return_all: bool) -> int | None:
    """Candidates per position for /v1/completions: `logprobs` + 1 (OpenAI's), all for -1 or logprob_token_ids."""
    if return_all or logprobs is None or logprobs == -1:
        return None
    return max(logprobs + 1, 0)


def chat_top_limit(top_logprobs: int | None, return_all: bool) -> int | None:
    """Candidates per position for /v1/chat/completions: the first `top_logprobs`, all for -1 or logprob_token_ids."""
    if return_all or top_logprobs == -1:
        return None
    return top_logprobs or 0


def completion_logprobs(
    names: TokenNames, token_ids, logprobs: list[dict | None], limit: int | None, text_offset: int = 0
) -> dict:
    """{"text_offset", "token_logprobs", "tokens", "top_logprobs"}; a position without logprobs (the first
    prompt token's) has null ones."""
    result = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for token_id, candidates in zip(token_ids, logprobs):
        sampled = candidates[token_id] if candidates is not None else None
        token = names(token_id, sampled)
        result["text_offset"].append(text_offset)
        result["tokens"].append(token)
        result["token_logprobs"].append(None if sampled is None else clamped(sampled.logprob))
        top = None
        if candidates is not None:
            top = {names(t, lp): clamped(lp.logprob) for t, lp in islice(candidates.items(), limit)}
        result["top_logprobs"].append(top)
        text_offset += len(token)
    return result


def chat_logprobs(names: TokenNames, token_ids, logprobs: list[dict | None], limit: int | None) -> dict:
    """{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}."""
    content = []
    for token_id, candidates in zip(token_ids, logprobs):
        sampled = candidates.get(token_id) if candidates is not None else None
        if sampled is None:
            token = names(token_id)
            content.append({"token": token, "logprob": LOWEST_LOGPROB, "bytes": _bytes(token), "top_logprobs": []})
            continue
        decoded = sampled.decoded_token
        content.append(
            {
                "token": names(token_id, sampled),
                "logprob": clamped(sampled.logprob),
                "bytes": None if decoded is None else _bytes(decoded),
                "top_logprobs": [_chat_candidate(names, t, lp) for t, lp in islice(candidates.items(), limit)],
            }
        )
    return {"content": content}


def prompt_logprobs_body(prompt_logprobs: PromptLogprobs | None) -> list | None:
    """vLLM's `prompt_logprobs`: per prompt token null (the first) or token id -> {logprob, rank, decoded_token}."""
    if prompt_logprobs is None:
        return None
    return [
        None
        if entry is None
        else {
            token_id: {"logprob": clamped(lp.logprob), "rank": lp.rank, "decoded_token": lp.decoded_token}
            for token_id, lp in entry.items()
        }
        for entry in prompt_logprobs
    ]


def _chat_candidate(names: TokenNames, token_id: int, logprob: Logprob) -> dict:
    token = names(token_id, logprob)
    return {"token": token, "logprob": clamped(logprob.logprob), "bytes": _bytes(token)}


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8", errors="replace"))
