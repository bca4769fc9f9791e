"""Incremental detokenization with stop strings, one instance per sequence.

Text grows by decoding a small window of tokens (vLLM's prefix/read offsets), so each new token
costs a short decode, and a token that ends inside a multi-byte character waits for the next one.
While streaming, the last (longest stop string - 1) characters are held back, because they may
turn out to be the start of a stop string.
"""


class IncrementalDetokenizer:
    def __init__(self, tokenizer, stop: list[str], include_stop: bool, skip_special_tokens: bool):
        self.tokenizer = tokenizer
        self.stop = stop
        self.include_stop = include_stop
        self.skip_special_tokens = skip_special_tokens
        self.token_ids: list[int] = []
        self.text = ""
        self.prefix_offset = 0
        self.read_offset = 0
        self.num_sent = 0  # characters of `text` already handed out
        self.hold_back = max((len(s) for s in stop), default=1) - 1

    def append(self, token_id: int, decode: bool = True) -> str | None:
        """Add one token; returns the stop string it completed, if any (the text is then cut).

        `decode=False` keeps the token out of the text (the end-of-sequence or stop token that ended it).
        """
        self.token_ids.append(token_id)
        if self.tokenizer is None or not decode:
            return None
        before = len(self.text)
        self.text += self._decode_new()
        return self._check_stop(before) if self.stop else None

    def take_delta(self, finished: bool) -> str:
        """Text not handed out yet; before the end, minus what may still become a stop string."""
        end = len(self.text) if finished else max(self.num_sent, len(self.text) - self.hold_back)
        delta, self.num_sent = self.text[self.num_sent : end], end
        return delta

    def _decode_new(self) -> str:
        ids = self.token_ids
        prefix = self._decode(ids[self.prefix_offset : self.read_offset])
        full = self._decode(ids[self.prefix_offset :])
        if len(full) <= len(prefix) or full.endswith("\ufffd"):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(ids)
        return full[len(prefix) :]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens) if ids else ""

    def _check_stop(self, new_from: int) -> str | None:
        start = max(0, new_from - self.hold_back)
        found = [(at, stop) for stop in self.stop if (at := self.text.find(stop, start)) != -1]
        if not found:
            return None
        at, stop = min(found)
        self.text = self.text[: at + len(stop)] if self.include_stop else self.text[:at]
        self.num_sent = min(self.num_sent, len(self.text))
        return stop
