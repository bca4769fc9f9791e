"""One pass over the logical lines: collect the log's context, its facts and every recognised failure. What a line
can give is planned once per shape (plan.py); a line that can give nothing only feeds the stage tracker."""

import re
from collections.abc import Iterable
from dataclasses import replace

from kvtool.engine.diagnosis import errors, startup
from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.facts import MESSAGE, Fact, Facts, from_template
from kvtool.engine.diagnosis.findings import EVIDENCE_CHARS, Observation
from kvtool.engine.diagnosis.plan import Plan, chosen_observations
from kvtool.engine.diagnosis.recognisers import PATTERNS
from kvtool.engine.diagnosis.shapes import MASK, ShapeCache
from kvtool.engine.diagnosis.stage import LOOK_AHEAD, StageTracker
from kvtool.engine.diagnosis.truncation import CutShortWithoutMaxTokens, OfflineDefaults

# Categories reported once per value of these numbers, keeping the worst reading (the largest numbers).
MERGED_CATEGORIES = {
    "preemption": (),
    "kv_cache_near_full": (),
    "max_tokens_default_truncation": (),
    "request_too_long": ("max_model_len",),
}
MAX_DISTINCT = 50
MAX_CACHED_LINES, MAX_CACHED_LINE = 4096, 2048  # repeated lines (retry storms, pasted loops) are matched once
# vLLM's wordings matched in any case, with their gates in lowercase: tried on a paste's lines no recogniser read
ANYCASE = [
    replace(pattern, gate=pattern.gate.lower(), regex=re.compile(pattern.regex.pattern, re.IGNORECASE))
    for pattern in PATTERNS
    if pattern.template is not None
]
ANYCASE_GATES = frozenset(pattern.gate for pattern in ANYCASE)
MAX_FACTS = 20_000  # a machine's log states its settings early; the rest is the same lines again


class Scanner:
    """`facts`: those read before the lines are (layouts.py's, in a paste). `paste`: the input is a paste, not a
    machine's log: the facts beside a message a wording read are read too (a paste's lines may be joined into one
    with the message); a machine's log states its settings on lines of their own."""

    def __init__(self, context: LogContext | None = None, facts: Facts | None = None, paste: bool = True):
        self.context = context or LogContext()
        self.facts = facts if facts is not None else Facts()
        self.paste = paste
        self.stage = StageTracker()
        self.observations: dict[tuple, Observation] = {}
        self.line_index = 0
        self.offline_defaults = OfflineDefaults()
        self.cut_short = CutShortWithoutMaxTokens()
        self.startup_lines = startup.StartupLines()
        self.errors = errors.ErrorLines()
        self._seen: dict[str, tuple[dict, list]] = {}  # line -> (facts for the context, pattern matches)
        self._plans = ShapeCache()  # shape -> Plan
        self._pending: list[tuple[int, Observation]] = []  # out-of-memory errors waiting for what follows them
        self._oom_numbers: set[tuple] = set()  # the numbers of the out-of-memory errors kept

    def scan(self, lines: Iterable[str | tuple[str, str]]) -> "Scanner":
        for line in lines:
            self.feed(line)
        return self.finish()

    def feed(self, line: str | tuple[str, str]) -> None:
        text, original = line if isinstance(line, tuple) else (line, line)
        self.line_index += 1
        shape = text.encode("utf-8", "surrogatepass").translate(MASK)  # shape_of, inline: every line pays it
        if (plan := self._plans.get(shape)) is None:
            plan = self._plans.keep(shape, Plan.of(shape.decode("utf-8", "surrogatepass")))
        self.stage.feed(text, plan.markers)
        if plan.startup:
            self.startup_lines.add(text, shape)
        read = plan.gives and self._match(plan, text, original)
        if self.paste:
            read = self._in_paste(plan, text, original, read)
        elif not read and plan.stated and len(self.facts) < MAX_FACTS:  # a line a wording read gives no facts
            self.facts += from_template(plan.stated, text, self.line_index)
        if plan.error and not read or plan.consequence:  # an error no recogniser read, or its detail
            self.errors.feed(self.line_index, original, plan.error and not read, plan.consequence)
        if plan.requests or self.offline_defaults.call:
            if observation := self.offline_defaults.feed(original):
                self._add(observation)
            if observation := self.cut_short.feed(text, self.line_index, plan.signs):
                self._add(observation)
        if self._pending and self._pending[0][0] <= self.line_index - LOOK_AHEAD:
            self._resolve(self.line_index - LOOK_AHEAD)

    def _match(self, plan: Plan, text: str, original: str) -> list[Observation]:
        # A line that can give something goes through the cache: a cached line keeps the evidence of the
        # first original seen (its line breaks), so when the cache is emptied decides what is shown.
        if (seen := self._seen.get(text)) is not None:
            facts, observations = seen
            self.context.apply(facts)
        else:
            facts = self.context.read(text, plan.facts) if plan.facts else {}
            observations = plan.observations(text, original) if plan.patterns else []
            if not observations and plan.elided:
                observations = plan.around_elisions(text, original)
            if len(text) <= MAX_CACHED_LINE:
                self._seen = self._seen if len(self._seen) < MAX_CACHED_LINES else {}
                self._seen[text] = facts, observations
        for observation in observations:
            if observation.category != "cuda_oom":
                self._add(observation)
            elif len(self.observations) < MAX_DISTINCT or _numbers(observation) in self._oom_numbers:
                self._pending.append((self.line_index, observation))
            # else: a new error once MAX_DISTINCT are kept, dropped without placing it
        return observations

    def _in_paste(self, plan: Plan, text: str, original: str, read: list[Observation] | bool) -> list | bool:
        """What a paste's line gives besides its recognisers' matches: vLLM's wordings in another case, a failure
        told in words, the facts beside a message a wording read; the line's observations."""
        if not read and any(word in text.lower() for word in ANYCASE_GATES):
            read = self._in_any_case(text, original)
        if read:
            self.context.read_lines.add(self.line_index)
        if plan.told:
            self.context.read(text, plan.told)
        if len(self.facts) < MAX_FACTS and plan.stated:
            facts = from_template(plan.stated, text, self.line_index)
            self.facts += _outside(facts, read, len(original) > EVIDENCE_CHARS) if read else facts
        return read

    def _in_any_case(self, text: str, original: str) -> list[Observation]:
        """vLLM's wordings retyped in another case ("no available memory for the cache blocks"), in a paste."""
        lower = text.lower()
        found = [
            (pattern, *reading)
            for pattern in ANYCASE
            if pattern.gate in lower
            for where in pattern.matches(text)
            if (reading := pattern.reading(text, where)) is not None
        ]
        observations = chosen_observations(found, original)
        for observation in observations:
            self._add(observation)
        return observations

    def finish(self) -> "Scanner":
        self._resolve(self.line_index)
        self.context.take_facts(self.facts)
        self.context.take_startup(self.startup_lines)
        self.context.errors = self.errors.finish()
        return self

    def _resolve(self, up_to: int) -> None:
        """Decide the stage of the out-of-memory errors read at or before line `up_to`."""
        while self._pending and self._pending[0][0] <= up_to:
            at, observation = self._pending.pop(0)
            stage = self.stage.decide(at)
            # a stage unknown is explained with the fixes of both, start-up's first
            category = "cuda_oom_runtime" if stage.stage == "runtime" else "cuda_oom_startup"
            numbers, evidence, span = observation.numbers, observation.evidence, observation.span
            self._add(
                Observation(category, stage.stage, numbers, evidence, span, stage.phase, 1, stage.evidence or None)
            )

    def _add(self, observation: Observation) -> None:
        key = observation.key(MERGED_CATEGORIES.get(observation.category))
        if (seen := self.observations.get(key)) is not None:
            seen.count += 1
            _keep_largest(seen, observation)
        elif len(self.observations) < MAX_DISTINCT:
            self.observations[key] = replace(observation)  # a copy: the line cache keeps the original
            if observation.category.startswith("cuda_oom"):
                self._oom_numbers.add(_numbers(observation))


def _outside(facts: list[Fact], observations: list[Observation], cut: bool) -> list[Fact]:
    """The facts of a line a wording read, those its messages state marked as theirs (MESSAGE: not a setting); in
    a line whose evidence is cut to a window, all of them."""
    spans = [obs.span for obs in observations]
    return [fact if not cut and _beside(fact, spans) else replace(fact, how=MESSAGE) for fact in facts]


def _beside(fact: Fact, spans: list[tuple[int, int]]) -> bool:
    return not any(start <= fact.span[0] < end for start, end in spans)


def _numbers(observation: Observation) -> tuple:
    return tuple(sorted(observation.numbers.items()))


def _keep_largest(seen: Observation, new: Observation) -> None:
    """Merged categories keep the worst reading (most preemptions, fullest cache, longest request) as evidence."""
    if sum(new.numbers.values()) > sum(seen.numbers.values()):
        seen.numbers, seen.evidence, seen.span = new.numbers, new.evidence, new.span
