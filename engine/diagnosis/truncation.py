"""The 16-token default, which vLLM never reports (SamplingParams.max_tokens is 16 in every release
from 0.2.0 to 0.33.0): a response with `finish_reason` "length" and exactly 16 completion tokens,
on one line (a repr) or on nearby lines (pretty-printed JSON); or offline code that builds
`SamplingParams(...)` without max_tokens (vLLM's own repr always prints max_tokens, so a call
without it is the user's code)."""

import re

from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.diagnosis.patterns import compile_

FINISH_REASON_LENGTH = compile_(r"""finish_reason['"]?\s*[:=]\s*['"]?length\b""")
SAMPLING_PARAMS_CALL = re.compile(r"\bSamplingParams\(")
MAX_CALL_LINES = 20  # a call spread over more lines than this is not followed
SIXTEEN_COMPLETION_TOKENS = compile_(r"""completion_tokens['"]?\s*[:=]\s*16\b""")
PROMPT_TOKENS = compile_(r"""prompt_tokens['"]?\s*[:=]\s*(?P<prompt_tokens>\d+)""")
PAIRING_LINES = 40  # how far apart the two may be
# A line with none of these (and no call still open) leaves both trackers as they were.
GATES = FINISH_GATE, COMPLETION_GATE, PROMPT_GATE, CALL_GATE = (
    "finish_reason",
    "completion_tokens",
    "prompt_tokens",
    "SamplingParams(",
)


class TruncatedResponses:
    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self._length_at = self._sixteen_at = -PAIRING_LINES - 1
        self._usage_line, self._usage_span = "", (0, 0)
        self._prompt_tokens: int | None = None

    def feed(self, line: str, index: int) -> Observation | None:
        """An observation once both halves have been seen within PAIRING_LINES lines."""
        if FINISH_GATE in line and FINISH_REASON_LENGTH.search(line):
            self._length_at = index
        if COMPLETION_GATE in line and (match := SIXTEEN_COMPLETION_TOKENS.search(line)):
            self._sixteen_at, self._usage_line, self._usage_span = index, line, match.span()
        if PROMPT_GATE in line and (match := PROMPT_TOKENS.search(line)):
            self._prompt_tokens = int(match.group("prompt_tokens"))
        if min(self._length_at, self._sixteen_at) < 0 or abs(self._length_at - self._sixteen_at) > PAIRING_LINES:
            return None
        numbers = {"completion_tokens": 16}
        if self._prompt_tokens is not None:
            numbers["prompt_tokens"] = self._prompt_tokens
        evidence, span = evidence_window(self._usage_line, self._usage_span)
        self._reset()
        return Observation("max_tokens_default_truncation", "request", numbers, evidence, span)


class OfflineDefaults:
    """`SamplingParams(` ... `)` (possibly over several lines) with no max_tokens in it."""

    def __init__(self):
        self._call: list[str] = []
        self._depth = 0

    @property
    def in_call(self) -> bool:
        return bool(self._call)

    def feed(self, line: str) -> Observation | None:
        if not self._call:
            if CALL_GATE not in line or not (match := SAMPLING_PARAMS_CALL.search(line)):
                return None
            line = line[match.start() :]
        self._call.append(line)
        self._depth += line.count("(") - line.count(")")
        if self._depth > 0 and len(self._call) < MAX_CALL_LINES:
            return None
        call, closed = "\n".join(self._call), self._depth <= 0
        self._call, self._depth = [], 0
        if not closed or "max_tokens" in call:
            return None
        evidence, span = evidence_window(call, (0, len(call)))
        return Observation("max_tokens_default_truncation", "request", {"max_tokens": 16}, evidence, span)
