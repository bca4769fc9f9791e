"""One pass over the candidate lines: collect the log's context and every recognised failure."""

from collections.abc import Iterable

from kvtool.engine.diagnosis import api_patterns, length_patterns, memory_patterns
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Observation
from kvtool.engine.diagnosis.length_patterns import FINISH_REASON_LENGTH, PROMPT_TOKENS, SIXTEEN_COMPLETION_TOKENS

PATTERNS = length_patterns.PATTERNS + memory_patterns.PATTERNS + api_patterns.PATTERNS
EVIDENCE_CHARS = 600
PAIRING_LINES = 40  # how far apart "finish_reason: length" and "completion_tokens: 16" may be
MERGED_CATEGORIES = {"preemption", "kv_cache_near_full", "max_tokens_default_truncation"}
MAX_DISTINCT = 50
# Every line that can matter holds one of these; the reader decodes only those lines. Each
# pattern's gate contains one (a test checks it), and so do the context lines of context.py.
ANCHORS = (b"maximum", b"max seq len", b"max_model_len", b"'max_tokens'", b"max_tokens must", b"max_tokens=16",
           b"max model len", b"max_num_batched_tokens (", b"oncurrency", b"emory", b"blocks", b"KV cache size",
           b"KV cache usage: 9", b"KV cache usage: 100", b"cache_usage_perc", b"reempt", b"too long", b"took",
           b"template", b"tool choice", b"does not exist", b"finish_reason", b"completion_tokens", b"prompt_tokens",
           b"serve ", b"model", b"API server", b"startup complete", b"Uvicorn", b"_dummy", b"apturing", b"profile")


class Scanner:
    def __init__(self, context: LogContext | None = None):
        self.context = context or LogContext()
        self.observations: dict[tuple, Observation] = {}
        self.line_index = 0
        self._length_at = self._sixteen_at = -PAIRING_LINES - 1
        self._usage_line, self._usage_span = "", (0, 0)
        self._prompt_tokens: int | None = None

    def scan(self, lines: Iterable[str]) -> "Scanner":
        for line in lines:
            self.feed(line)
        return self

    def feed(self, line: str) -> None:
        self.line_index += 1
        self.context.read(line)
        matched = set()
        for pattern in PATTERNS:
            if pattern.category in matched or not (found := pattern.read(line)):
                continue
            matched.add(pattern.category)
            numbers, span, detail = found
            self._add(self._observation(pattern.category, pattern.stage, numbers, line, span, detail))
        self._pair_truncation(line)

    def _observation(self, category, stage, numbers, line, span, detail) -> Observation:
        if category == "cuda_oom":
            category, stage, detail = self._oom_stage()
        elif category == "cuda_oom_startup":
            detail = f"{detail} warm-up"
        evidence, span = evidence_window(line, span)
        return Observation(category, stage, numbers, evidence, span, detail)

    def _oom_stage(self) -> tuple[str, str, str | None]:
        if self.context.server_up:
            return "cuda_oom_runtime", "runtime", None
        return "cuda_oom_startup", "startup", self.context.startup_phase

    def _pair_truncation(self, line: str) -> None:
        if "finish_reason" in line and FINISH_REASON_LENGTH.search(line):
            self._length_at = self.line_index
        if "completion_tokens" in line and (match := SIXTEEN_COMPLETION_TOKENS.search(line)):
            self._sixteen_at, self._usage_line = self.line_index, line
            self._usage_span = match.span()
        if "prompt_tokens" in line and (match := PROMPT_TOKENS.search(line)):
            self._prompt_tokens = int(match.group("prompt_tokens"))
        if min(self._length_at, self._sixteen_at) > 0 and abs(self._length_at - self._sixteen_at) <= PAIRING_LINES:
            numbers = {"completion_tokens": 16}
            if self._prompt_tokens is not None:
                numbers["prompt_tokens"] = self._prompt_tokens
            evidence, span = evidence_window(self._usage_line, self._usage_span)
            self._add(Observation("max_tokens_default_truncation", "request", numbers, evidence, span))
            self._length_at = self._sixteen_at = -PAIRING_LINES - 1
            self._prompt_tokens = None

    def _add(self, observation: Observation) -> None:
        if observation.category in MERGED_CATEGORIES:
            key = (observation.category,)
        else:
            key = (observation.category, observation.detail, tuple(sorted(observation.numbers.items())))
        if (seen := self.observations.get(key)) is not None:
            seen.count += 1
            _keep_largest(seen, observation)
        elif len(self.observations) < MAX_DISTINCT:
            self.observations[key] = observation


def _keep_largest(seen: Observation, new: Observation) -> None:
    """Merged categories keep the worst reading (most preemptions, fullest cache) as evidence."""
    if any(value > seen.numbers.get(name, value) for name, value in new.numbers.items()):
        seen.numbers, seen.evidence, seen.span = new.numbers, new.evidence, new.span


def evidence_window(line: str, span: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """The line, or for a long one the stretch around the match; span re-based onto it."""
    if len(line) <= EVIDENCE_CHARS:
        return line, span
    start = max(0, min(span[0] - 100, span[1] - EVIDENCE_CHARS))
    end = min(len(line), max(span[1] + 100, start + EVIDENCE_CHARS))
    return line[start:end], (span[0] - start, span[1] - start)
