"""From last-position logits to one token per sequence, batched.

Order as in vLLM: the grammar's bitmask, raw logprobs, allowed_token_ids / bad_words / logit_bias,
penalties, min_tokens masking, temperature, top-k / top-p / min-p,
then a draw. Greedy rows take the argmax; random rows draw by the exponential-race trick
(argmax of probs / Exp(1) noise), with a per-request generator when the request has a seed.
"""

from dataclasses import dataclass

import torch

from kvtool.engine.runtime.core.sequence import Sequence
from kvtool.engine.runtime.outputs import Logprob
from kvtool.engine.runtime.structured_output.bitmask import accept_tokens, apply_grammar_bitmask
from kvtool.engine.runtime.worker.logits_processors import apply_request_rules


@dataclass
class SamplerOutput:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob] | None]


@dataclass
class LogprobsTensors:
    """Per scored position (vLLM's shape): the target token then the top k, their logprobs, the target's rank."""

    token_ids: torch.Tensor  # [positions, 1 + k]
    logprobs: torch.Tensor  # [positions, 1 + k]
    ranks: torch.Tensor  # [positions]

    def to_dicts(self) -> list[dict[int, Logprob]]:
        """Token id -> Logprob per position, the target first (a top-k entry equal to it keeps that place)."""
        result = []
        for ids, values, rank in zip(self.token_ids.tolist(), self.logprobs.tolist(), self.ranks.tolist()):
            entry = {ids[0]: Logprob(values[0], rank)}
            for top_rank, (token_id, value) in enumerate(zip(ids[1:], values[1:]), start=1):
                entry.setdefault(token_id, Logprob(value, top_rank))
            result.append(entry)
        return result


def gather_logprobs(logprobs: torch.Tensor, num: int, targets: torch.Tensor) -> LogprobsTensors:
    """Rows of logprobs -> each row's target and top `num` (-1: the whole vocabulary, ranked)."""
    num = logprobs.shape[-1] if num == -1 else num
    chosen = logprobs.gather(-1, targets[:, None])
    ranks = (logprobs > chosen).sum(-1) + 1
    top_values, top_ids = logprobs.topk(num, dim=-1)
    return LogprobsTensors(torch.cat([targets[:, None], top_ids], -1), torch.cat([chosen, top_values], -1), ranks)


class Sampler:
    def __init__(self, eos_token_ids: set[int], seed: int, device):
        self.eos_token_ids = sorted(eos_token_ids)
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, logits: torch.Tensor, seqs: list[Sequence]) -> SamplerOutput:
        logits = apply_grammar_bitmask(logits, seqs)
        raw_logprobs = logits.log_softmax(-1) if any(s.params.num_logprobs is not None for s in seqs) else None
        logits = apply_request_rules(logits, seqs)
        logits = self._apply_penalties(logits, seqs)
        logits = self._mask_stops_before_min_tokens(logits, seqs)
        if all(s.params.greedy for s in seqs):
            tokens = _argmax(logits)
        else:
            tokens = self._sample(logits, seqs)
        token_ids = tokens.tolist()
        accept_tokens(seqs, token_ids)
        return SamplerOutput(token_ids, self._logprobs(raw_logprobs, seqs, token_ids))

    def _sample(self, logits, seqs):
        greedy = torch.tensor([s.params.greedy for s in seqs], device=logits.device)
        temperature = torch.tensor([s.params.temperature for s in seqs], device=logits.device)
        logits = logits / torch.where(greedy, 1.0, temperature)[:, None]
        logits = _top_k_top_p(logits, seqs)
        probs = logits.softmax(-1)
        probs = _min_p(probs, seqs)
        drawn = _argmax(probs / self._exponential_noise(probs, seqs))
        return torch.where(greedy, _argmax(logits), drawn)

    def _exponential_noise(self, probs, seqs):
        noise = torch.empty_like(probs).exponential_(generator=self.generator)
        for i, seq in enumerate(seqs):
            if seq.params.seed is not None:
                if seq.generator is None:
                    seq.generator = torch.Generator(device=probs.device).manual_seed(seq.params.seed + seq.index)
                noise[i].exponential_(generator=seq.generator)
        return noise

    def _apply_penalties(self, logits, seqs):
        rows = [i for i, s in enumerate(seqs) if _has_penalties(s.params)]
        if not rows:
            return logits
        logits = logits.clone()
        for i in rows:
            logits[i] = _penalize(logits[i], seqs[i])
        return logits

    def _mask_stops_before_min_tokens(self, logits, seqs):
        rows = [i for i, s in enumerate(seqs) if s.num_output_tokens < s.params.min_tokens]
        if not rows:
            return logits
        logits = logits.clone()
        for i in rows:
            stops = list(seqs[i].params.stop_token_ids) + ([] if seqs[i].params.ignore_eos else self.eos_token_ids)
            logits[i, stops] = -float("inf")
        return logits

    def _logprobs(self, raw_logprobs, seqs, token_ids):
        if raw_logprobs is None:
            return [None] * len(seqs)
        return [
            None if s.params.num_logprobs is None else _sample_logprobs(raw_logprobs[i], token_ids[i], s.params)
            for i, s in enumerate(seqs)
        ]


def _argmax(values: torch.Tensor) -> torch.Tensor:
    """Each row's index of its largest value, the first of equals, as torch.argmax gives it. Over a
    vocabulary-wide fp32 row on CPU, numpy's vectorized argmax takes about a tenth of torch's time."""
    if values.device.type == "cpu" and values.dtype == torch.float32:
        return torch.from_numpy(values.numpy().argmax(-1))
    return values.argmax(-1)


def _has_penalties(params) -> bool:
    return params.repetition_penalty != 1.0 or params.presence_penalty != 0.0 or params.frequency_penalty != 0.0


def _penalize(row: torch.Tensor, seq: Sequence) -> torch.Tensor:
    """vLLM's penalties: repetition over prompt and output, presence / frequency over output only."""
    params, vocab = seq.params, row.shape[-1]
    if params.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(seq.token_ids)), dtype=torch.long, device=row.device)
        picked = row[seen]
        row[seen] = torch.where(picked > 0, picked / params.repetition_penalty, picked * params.repetition_penalty)
    output = torch.tensor(seq.output_token_ids, dtype=torch.long, device=row.device)
    counts = torch.bincount(output, minlength=vocab)[:vocab].to(row.dtype)
    return row - params.frequency_penalty * counts - params.presence_penalty * (counts > 0).to(row.dtype)


def _top_k_top_p(logits, seqs):
    top_k = [s.params.top_k for s in seqs]
    top_p = [s.params.top_p for s in seqs]
    if all(k == -1 for k in top_k) and all(p >= 1.0 for p in top_p):
        return logits
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    k = torch.tensor([vocab if v == -1 else min(v, vocab) for v in top_k], device=logits.device)
    ranks = torch.arange(vocab, device=logits.device)[None, :]
    sorted_logits = sorted_logits.masked_fill(ranks >= k[:, None], -float("inf"))
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # mass of the tokens ranked above this one
    drop = before >= torch.tensor(top_p, device=logits.device)[:, None]
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, -float("inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def _min_p(probs, seqs):
    min_p = [s.params.min_p for s in seqs]
    if all(p == 0.0 for p in min_p):
        return probs
    threshold = torch.tensor(min_p, device=probs.device)[:, None] * probs.max(-1, keepdim=True).values
    return probs.masked_fill(probs < threshold, 0.0)


def _sample_logprobs(row: torch.Tensor, token_id: int, params) -> dict[int, Logprob]:
    """The sampled token first, then its top `logprobs`, or exactly the `logprob_token_ids` (ranked 1.. in the
    order listed, as vLLM ranks them)."""
    target = torch.tensor([token_id], device=row.device)
    if not params.logprob_token_ids:
        return gather_logprobs(row[None], params.logprobs, target).to_dicts()[0]
    ids = torch.tensor([token_id, *params.logprob_token_ids], device=row.device)
    rank = (row > row[token_id]).sum(-1, keepdim=True) + 1
    return LogprobsTensors(ids[None], row[ids][None], rank).to_dicts()[0]
