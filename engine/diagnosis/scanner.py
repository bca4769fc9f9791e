"""One pass over the candidate lines: collect the log's context and every recognised failure."""

from collections.abc import Iterable
from dataclasses import replace

from kvtool.engine.diagnosis import api_patterns, length_patterns, memory_patterns
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.diagnosis.truncation import TruncatedResponses

PATTERNS = length_patterns.PATTERNS + memory_patterns.PATTERNS + api_patterns.PATTERNS
# Categories reported once per value of these numbers, keeping the worst reading (the largest numbers).
MERGED_CATEGORIES = {"preemption": (), "kv_cache_near_full": (), "max_tokens_default_truncation": (),
                     "request_too_long": ("max_model_len",)}
MAX_DISTINCT = 50
MAX_CACHED_LINES, MAX_CACHED_LINE = 4096, 2048  # repeated lines (retry storms, pasted loops) are matched once
# Every line that can matter holds an anchor and, where refinements are listed, one of them too; the
# reader decodes only those lines. Each pattern's gate passes this filter (a test checks it), and so
# do the lines context.py reads.
ANCHORS = {
    b"max": (b"max seq len", b"max model len", b"max_model_len", b"max_tokens must", b"max_tokens=16",
             b"max_num_batched_tokens ("),
    b"aximum": (), b"emory": (), b"blocks": (), b"reempt": (), b"too long": (), b"odel": (), b"serve": (),
    b"KV cache": (b"KV cache size", b"KV cache usage: 9", b"KV cache usage: 100"),
    b"_cache_usage_perc": (), b"completion_tokens": (), b"prompt_tokens": (), b"finish_reason": (),
    b"template": (), b"tool choice": (), b"startup complete": (), b"apturing": (),
}


class Scanner:
    def __init__(self, context: LogContext | None = None):
        self.context = context or LogContext()
        self.observations: dict[tuple, Observation] = {}
        self.line_index = 0
        self.truncated_responses = TruncatedResponses()
        self._seen: dict[str, tuple[dict, list]] = {}  # line -> (facts for the context, pattern matches)

    def scan(self, lines: Iterable[str]) -> "Scanner":
        for line in lines:
            self.feed(line)
        return self

    def feed(self, line: str) -> None:
        self.line_index += 1
        if (seen := self._seen.get(line)) is not None:
            facts, observations = seen
            self.context.apply(facts)
        else:
            facts, observations = self.context.read(line), self._observations_in(line)
            if len(line) <= MAX_CACHED_LINE:
                self._seen = self._seen if len(self._seen) < MAX_CACHED_LINES else {}
                self._seen[line] = facts, observations
        for observation in observations:
            self._add(self._oom_stage(observation) if observation.category == "cuda_oom" else observation)
        if observation := self.truncated_responses.feed(line, self.line_index):
            self._add(observation)

    @staticmethod
    def _observations_in(line: str) -> list[Observation]:
        """One observation per category: its first pattern that matches `line`."""
        observations, categories = [], set()
        for pattern in PATTERNS:
            if pattern.category not in categories and (found := pattern.read(line)):
                categories.add(pattern.category)
                numbers, span, detail = found
                evidence, span = evidence_window(line, span)
                if pattern.category == "cuda_oom_startup":
                    detail = f"{detail} warm-up"
                observations.append(Observation(pattern.category, pattern.stage, numbers, evidence, span, detail))
        return observations

    def _oom_stage(self, observation: Observation) -> Observation:
        """Whether an OOM is a start-up or a run-time one depends on what the log showed before it."""
        if self.context.server_up:
            return replace(observation, category="cuda_oom_runtime", stage="runtime", detail=None)
        return replace(observation, category="cuda_oom_startup", detail=self.context.startup_phase)

    def _add(self, observation: Observation) -> None:
        key = observation.key(MERGED_CATEGORIES.get(observation.category))
        if (seen := self.observations.get(key)) is not None:
            seen.count += 1
            _keep_largest(seen, observation)
        elif len(self.observations) < MAX_DISTINCT:
            self.observations[key] = replace(observation)  # a copy: the line cache keeps the original


def _keep_largest(seen: Observation, new: Observation) -> None:
    """Merged categories keep the worst reading (most preemptions, fullest cache, longest request) as evidence."""
    if sum(new.numbers.values()) > sum(seen.numbers.values()):
        seen.numbers, seen.evidence, seen.span = new.numbers, new.evidence, new.span
