"""vLLM's truncate_prompt_tokens and truncation_side: which prompt tokens a request keeps, as vLLM 0.33's renderer
decides (vllm/renderers/params.py)."""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.engine.sizing import messages as msg
from kvtool.errors import InvalidRequestError

TRUNCATE = "truncate_prompt_tokens"


@dataclass(frozen=True)
class Truncation:
    """Keep `tokens` prompt tokens (-1: max_model_len - 1)."""

    tokens: int
    side: str | None = None  # "left" keeps the last ones, "right" the first ones; None: the tokenizer's side

    def kept(self, max_model_len: int, requested: int | None) -> int:
        """How many tokens stay; more than max_model_len is a 400 (-1: the whole context but the token to generate,
        all of it for a request that generates none)."""
        if self.tokens > max_model_len:
            message = msg.TRUNCATE_PROMPT_TOKENS_TOO_LARGE.format(
                truncate_prompt_tokens=self.tokens, max_input_tokens=max_model_len
            )
            raise InvalidRequestError(msg.with_parameter(message, TRUNCATE, self.tokens), TRUNCATE)
        if self.tokens == -1:
            return max_model_len if requested == 0 else max_model_len - 1
        return self.tokens

    def side_of(self, tokenizer) -> str:
        return self.side or getattr(tokenizer, "truncation_side", None) or "right"


def cut(tokens, keep: int, side: str):
    """The `keep` tokens a side keeps of a sequence (token ids, text, or an embeddings prompt): "left" drops the
    first ones, "right" the last ones."""
    return tokens[max(len(tokens) - keep, 0) :] if side == "left" else tokens[:keep]
