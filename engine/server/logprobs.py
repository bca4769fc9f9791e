"""Logprobs in the two OpenAI shapes: completions (parallel lists) and chat (a list of token objects)."""

from __future__ import annotations

from kvtool.engine.runtime.outputs import Logprob


def _token_text(tokenizer, token_id: int, logprob: Logprob | None) -> str:
    if logprob is not None and logprob.decoded_token is not None:
        return logprob.decoded_token
    return tokenizer.decode([token_id])


def _ranked(candidates: dict[int, Logprob]) -> list[tuple[int, Logprob]]:
    return sorted(candidates.items(), key=lambda item: -item[1].logprob)


def completion_logprobs(
    tokenizer, token_ids: list[int], logprobs: list[dict[int, Logprob]], num_top: int, text_offset: int = 0
) -> dict:
    """{"tokens", "token_logprobs", "top_logprobs", "text_offset"} for /v1/completions."""
    result = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    for token_id, candidates in zip(token_ids, logprobs):
        sampled = candidates.get(token_id)
        text = _token_text(tokenizer, token_id, sampled)
        result["text_offset"].append(text_offset)
        result["tokens"].append(text)
        result["token_logprobs"].append(sampled.logprob if sampled else None)
        # as vLLM: the top num_top candidates, plus the sampled token when it is not among them (a beam search's
        # steps hold more candidates than that)
        top = {_token_text(tokenizer, t, lp): lp.logprob for t, lp in _ranked(candidates)[: num_top + 1]}
        result["top_logprobs"].append(top if num_top else None)
        text_offset += len(text)
    return result


def _chat_token(tokenizer, token_id: int, logprob: Logprob | None) -> dict:
    text = _token_text(tokenizer, token_id, logprob)
    return {"token": text, "logprob": logprob.logprob if logprob else -9999.0, "bytes": list(text.encode())}


def chat_logprobs(tokenizer, token_ids: list[int], logprobs: list[dict[int, Logprob]], num_top: int) -> dict:
    """{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]} for /v1/chat/completions."""
    content = []
    for token_id, candidates in zip(token_ids, logprobs):
        entry = _chat_token(tokenizer, token_id, candidates.get(token_id))
        entry["top_logprobs"] = [_chat_token(tokenizer, t, lp) for t, lp in _ranked(candidates)[:num_top]]
        content.append(entry)
    return {"content": content}
