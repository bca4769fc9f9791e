"""The grammar's token bitmask on a batch of logits: tokens the grammar forbids get -inf.

xgrammar fills one packed int32 row per sequence; `apply_token_bitmask_inplace` is a torch op on CPU
and a kernel on CUDA, so the same call serves both.
"""

import torch
import xgrammar as xgr


def apply_grammar_bitmask(logits: torch.Tensor, seqs) -> torch.Tensor:
    rows = [i for i, seq in enumerate(seqs) if seq.grammar is not None and not seq.grammar.is_terminated()]
    if not rows:
        return logits
    bitmask = xgr.allocate_token_bitmask(len(seqs), logits.shape[-1])
    for i in rows:
        seqs[i].grammar.fill_next_token_bitmask(bitmask, i)
    xgr.apply_token_bitmask_inplace(logits, bitmask.to(logits.device), indices=rows)
    return logits


def accept_tokens(seqs, token_ids: list[int]) -> None:
    """Advance each sequence's grammar by the token just sampled for it."""
    for seq, token_id in zip(seqs, token_ids):
        if seq.grammar is not None and not seq.grammar.is_terminated():
            seq.grammar.accept_token(token_id)
