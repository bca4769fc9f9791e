"""Prompts given as embeddings (vLLM's `prompt_embeds`): positions whose input vector is the client's own.

Such a prompt keeps a token id at every position (PLACEHOLDER_TOKEN_ID where an embedding stands in) and the
embeddings as spans of rows, each replacing the looked-up embeddings of positions start .. start + rows - 1.
The model runner swaps the rows in for the positions a step computes (with --enable-prompt-embeds only); the
prefix cache keys a block that holds any of them by their bytes as well as by its token ids, so that equal
placeholder ids never match different embeddings (vLLM hashes the embeddings into the block hash too).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
from dataclasses import dataclass

import torch

from kvtool.engine.sizing import messages as msg
from kvtool.engine.sizing.defaults import MAX_EMBED_DECODE_BYTES
from kvtool.errors import InvalidRequestError

PLACEHOLDER_TOKEN_ID = 0  # any id in the vocabulary: its embedding is replaced
PARAM = "prompt_embeds"
MAX_REASON_CHARS = 200  # torch's reason is built from the client's bytes: bounded, as vLLM bounds it


@dataclass(frozen=True)
class EmbedsSpan:
    start: int  # the first prompt position the rows stand for
    rows: torch.Tensor  # (num_rows, hidden_size), in the model's dtype

    @property
    def end(self) -> int:
        return self.start + len(self.rows)


@dataclass(frozen=True)
class EmbedsPrompt:
    """A prompt some of whose positions are embeddings: token ids (placeholders there) and the spans of rows."""

    prompt_token_ids: list[int]
    spans: tuple[EmbedsSpan, ...]

    @classmethod
    def of_rows(cls, rows: torch.Tensor) -> EmbedsPrompt:
        """Every position an embedding (a completions `prompt_embeds`)."""
        return cls([PLACEHOLDER_TOKEN_ID] * len(rows), (EmbedsSpan(0, rows),))

    def __len__(self) -> int:
        return len(self.prompt_token_ids)

    def __getitem__(self, kept: slice) -> EmbedsPrompt:
        """The positions `kept` keeps (truncate_prompt_tokens cuts the embeddings as it cuts token ids)."""
        start, stop, _ = kept.indices(len(self))
        spans = tuple(EmbedsSpan(at, rows) for at, rows in _chunk_rows(self.spans, start, stop))
        return EmbedsPrompt(self.prompt_token_ids[start:stop], spans)


@dataclass(frozen=True)
class EmbedsShape:
    """What a payload must hold for this model: (num_tokens, hidden_size) rows, cast to the model's dtype."""

    hidden_size: int
    dtype: torch.dtype

    def load(self, data: str) -> torch.Tensor:
        """Base64 of a torch-saved tensor -> its rows, with vLLM's checks (InvalidRequestError when refused)."""
        try:
            payload = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as err:
            raise _invalid(msg.PROMPT_EMBEDS_NOT_BASE64.format(reason=err)) from None
        tensor = _dense(_deserialized(payload))
        if tensor.dim() > 2:
            tensor = tensor.squeeze(0)
        if tensor.dim() != 2:
            raise _invalid(msg.PROMPT_EMBEDS_NOT_2D.format(shape=tuple(tensor.shape)))
        if tensor.shape[1] != self.hidden_size:
            raise _invalid(msg.PROMPT_EMBEDS_HIDDEN_SIZE.format(got=tensor.shape[1], expected=self.hidden_size))
        if not tensor.is_floating_point():
            raise _invalid(msg.PROMPT_EMBEDS_NOT_FLOAT.format(dtype=tensor.dtype, expected=self.dtype))
        return tensor.detach().to(self.dtype)  # a tensor saved with requires_grad loads with it


def block_key(spans: tuple[EmbedsSpan, ...], start: int, end: int) -> bytes | None:
    """A digest of the rows that positions start .. end - 1 take from `spans`, with their positions; None when
    those positions hold none."""
    digest = None
    for span in spans:
        low, high = max(start, span.start), min(end, span.end)
        if low < high:
            digest = digest or hashlib.sha256()
            digest.update(low.to_bytes(8, "little"))
            rows = span.rows[low - span.start : high - span.start].detach().contiguous()
            digest.update(rows.view(torch.uint8).numpy())
    return digest.digest() if digest is not None else None


def step_inputs_embeds(embed_input_ids, seqs, num_new_tokens: list[int], input_ids: torch.Tensor):
    """A step's first-layer input with the clients' rows swapped in (`seqs` computing `num_new_tokens` each, their
    ids flattened into `input_ids`); None when no chunk covers a prompt position given as an embedding."""
    swaps, offset = [], 0
    for seq, num_new in zip(seqs, num_new_tokens):
        start = seq.num_computed_tokens
        if seq.prompt_embeds and start < seq.num_prompt_tokens:
            swaps += [(offset + at, rows) for at, rows in _chunk_rows(seq.prompt_embeds, start, start + num_new)]
        offset += num_new
    if not swaps:
        return None
    embeds = embed_input_ids(input_ids)
    for at, rows in swaps:
        embeds[at : at + len(rows)] = rows.to(embeds.device, embeds.dtype, non_blocking=True)
    return embeds


def _chunk_rows(spans: tuple[EmbedsSpan, ...], start: int, end: int) -> list[tuple[int, torch.Tensor]]:
    """(offset within the chunk, rows) for the span rows that positions start .. end - 1 take."""
    parts = []
    for span in spans:
        low, high = max(start, span.start), min(end, span.end)
        if low < high:
            parts.append((low - start, span.rows[low - span.start : high - span.start]))
    return parts


def _deserialized(payload: bytes) -> object:
    with torch.sparse.check_sparse_tensor_invariants():
        try:
            return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
        except (torch.OutOfMemoryError, MemoryError):
            raise  # the server's condition, not the client's
        except Exception as err:  # torch has no one error type for "not a tensor file"
            reason = str(err).strip() or type(err).__name__
            if len(reason) > MAX_REASON_CHARS:
                reason = f"{reason[:MAX_REASON_CHARS]}... ({len(reason) - MAX_REASON_CHARS} more characters truncated)"
            raise _invalid(msg.PROMPT_EMBEDS_NOT_LOADED.format(reason=reason)) from None


def _dense(tensor: object) -> torch.Tensor:
    """A sparse tensor declares its own shape: its dense size is bounded before it is allocated."""
    if not isinstance(tensor, torch.Tensor):
        raise _invalid(msg.PROMPT_EMBEDS_NOT_TENSOR)
    name, default = MAX_EMBED_DECODE_BYTES
    limit = int(os.environ.get(name, default))
    num_bytes = tensor.numel() * tensor.element_size()
    if 0 < limit < num_bytes:
        message = msg.PROMPT_EMBEDS_TOO_LARGE.format(
            shape=tuple(tensor.shape), num_bytes=num_bytes, mib=num_bytes / (1 << 20), limit=limit
        )
        raise InvalidRequestError(msg.with_parameter(message, PARAM, num_bytes), PARAM)
    return tensor if tensor.layout == torch.strided else tensor.to_dense()


def _invalid(message: str) -> InvalidRequestError:
    return InvalidRequestError(msg.with_parameter(message, PARAM), PARAM)
