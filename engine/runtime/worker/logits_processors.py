"""Per-request logits rules, as vLLM's built-in logits processors: allowed_token_ids, bad_words, logit_bias."""

import torch


def apply_request_rules(logits: torch.Tensor, seqs) -> torch.Tensor:
    rows = [
        i
        for i, s in enumerate(seqs)
        if s.params.allowed_token_ids or s.params.bad_words_token_ids or s.params.logit_bias
    ]
    if not rows:
        return logits
    logits = logits.clone()
    for i in rows:
        params = seqs[i].params
        if params.allowed_token_ids:
            allowed = torch.tensor(params.allowed_token_ids, device=logits.device)
            kept = logits[i, allowed]
            logits[i] = -float("inf")
            logits[i, allowed] = kept
        for token_id in _banned_next_tokens(params.bad_words_token_ids, seqs[i].output_token_ids):
            logits[i, token_id] = -float("inf")
        for token_id, bias in (params.logit_bias or {}).items():
            logits[i, token_id] += bias
    return logits


def _banned_next_tokens(bad_words: list[list[int]] | None, output: list[int]) -> list[int]:
    """The last token of each bad word whose other tokens the output ends with."""
    banned = []
    for word in bad_words or []:
        prefix = word[:-1]
        if len(prefix) <= len(output) and (not prefix or output[-len(prefix) :] == prefix):
            banned.append(word[-1])
    return banned
