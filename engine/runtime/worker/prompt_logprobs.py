"""Prompt logprobs, computed during prefill for the requests that ask (vLLM's `prompt_logprobs`).

Position p's logits predict prompt token p + 1, so a prompt of n tokens has n - 1 scored positions; each
prefill chunk scores the positions it computes, so a chunked prefill gives what one whole prefill gives.
Other requests, and decode steps, never pay for it: only a step that holds such a chunk keeps the hidden
states of every row.
"""

from dataclasses import dataclass

import torch

from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.worker.sampler import gather_logprobs

ROWS_PER_LOGITS = 256  # scored positions per vocabulary-wide logits tensor


@dataclass
class PromptRows:
    """A sequence's prompt positions scored this step: `count` batch rows from `row`, at positions from `first`."""

    seq: Sequence
    first: int
    row: int
    count: int


def prompt_rows(seq: Sequence, start: int, end: int, row: int) -> PromptRows | None:
    """The positions of the chunk [start, end) (at batch row `row`) still to score, if any."""
    if not seq.scores_prompt:
        return None
    first = max(start, seq.num_scored_prompt_rows)  # after a preemption, positions already scored are not redone
    count = min(end, seq.num_prompt_tokens - 1) - first
    return PromptRows(seq, first, row + first - start, count) if count > 0 else None


def score_prompts(model, hidden: torch.Tensor, rows_list: list[PromptRows], to_device) -> dict:
    """request id -> (first position, [{token_id: Logprob}]): the next prompt token first, then the top
    `prompt_logprobs` (-1: every token), from the log-softmax of each position's logits."""
    result = {}
    for rows in rows_list:
        seq, scored = rows.seq, []
        targets = seq.token_ids[rows.first + 1 : rows.first + 1 + rows.count]
        for at in range(0, rows.count, ROWS_PER_LOGITS):
            span = slice(rows.row + at, rows.row + min(rows.count, at + ROWS_PER_LOGITS))
            logprobs = model.compute_logits(hidden[span]).float().log_softmax(-1)
            target = to_device(targets[at : at + ROWS_PER_LOGITS], torch.long)
            scored += gather_logprobs(logprobs, seq.params.prompt_logprobs, target).to_dicts()
        result[seq.request_id] = (rows.first, scored)
    return result


def mark_scored(rows_list: list[PromptRows]) -> None:
    for rows in rows_list:
        rows.seq.num_scored_prompt_rows = rows.first + rows.count
