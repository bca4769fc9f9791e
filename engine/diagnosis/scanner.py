"""One pass over the logical lines: collect the log's context and every recognised failure.

What a line can give is planned once per shape (shapes.py): the recognisers that can match it, what
reads the facts it states, its stage markers, whether the truncation trackers want it, where it holds an
elision the recognisers that read numbers around it (elided.py), and where its recognisers are all
digit-blind, their matches (a line of the shape only converts its numbers there, each as chosen for the
shape). A line that can give nothing only feeds the stage tracker.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kvtool.engine.diagnosis import errors, startup, truncation
from kvtool.engine.diagnosis.context import LogContext, Readers, fact_readers
from kvtool.engine.diagnosis.elided import ELISION_MARKS, read_elided
from kvtool.engine.diagnosis.facts import MESSAGE, Fact, Facts, Template, from_template, template
from kvtool.engine.diagnosis.findings import EVIDENCE_CHARS, Observation, evidence_window
from kvtool.engine.diagnosis.patterns import NumberReader, Pattern, Where
from kvtool.engine.diagnosis.reader import WRAP
from kvtool.engine.diagnosis.recognisers import PATTERNS
from kvtool.engine.diagnosis.shapes import MASK, ShapeCache, masked, screen
from kvtool.engine.diagnosis.stage import LOOK_AHEAD, Markers, StageTracker, shape_markers
from kvtool.engine.diagnosis.truncation import CutShortWithoutMaxTokens, OfflineDefaults

# Categories reported once per value of these numbers, keeping the worst reading (the largest numbers).
MERGED_CATEGORIES = {
    "preemption": (),
    "kv_cache_near_full": (),
    "max_tokens_default_truncation": (),
    "request_too_long": ("max_model_len",),
}
# messages that hold several parts their recognisers match (PyTorch's several signs of an out-of-memory error,
# the start and the end of the 0.22+ text with no number, vLLM's preemption warning with or without its counter): one a
# line
ONE_PER_LINE = {"cuda_oom", "no_cache_blocks", "preemption"}
MAX_DISTINCT = 50
MAX_CACHED_LINES, MAX_CACHED_LINE = 4096, 2048  # repeated lines (retry storms, pasted loops) are matched once
# Every line that can matter holds an anchor and, where refinements are listed, one of them too (a
# refinement starts with its anchor; a space in it matches any whitespace, a wrapped line's break too).
# The reader decodes those lines and their neighbours. Each pattern's gate passes this filter (a test
# checks it), and so do the lines context.py and stage.py read.
CATEGORY_ORDER = {category: i for i, category in reversed(list(enumerate(p.category for p in PATTERNS)))}
ANCHORS = {
    # a traceback's frames first: in a log dense with errors they alone keep every line (reader.py stops there)
    b'File "': (),
    b"max": (b"max seq len", b"max model len", b"max_model_len", b"max_tokens must", b"max_tokens=16",
             b"max_num_batched_tokens (", b"max_num_scheduled_tokens is"),
    b"aximum": (), b"emory": (), b"allocate": (), b"blocks": (), b"reempt": (), b"odel": (),
    b"too": re.compile(rb"too" + WRAP + rb"long"), b"serve": (),
    b"usage:": re.compile(rb"usage:" + WRAP + rb"(?:[7-9]\d|100)\."),  # a KV cache 70 % full or fuller
    b"cache size": (), b"_cache_usage_perc": (), b"completion_tokens": (), b"prompt_tokens": (), b"finish_reason": (),
    b"_OUT_OF_MEMORY": (), b"_ALLOC_FAILED": (), b"RESOURCE_EXHAUSTED": (),  # CUDA's, cuBLAS's and XLA's status names
    b"template": (), b"tool choice": (), b"startup complete": (), b"apturing": (),
    b"SamplingParams(": re.compile(rb"SamplingParams\((?![^)\n]*max_tokens)"),  # offline code, not request logs
    b"fatal error": (), b"Core failed": (), b"core initialization": (),  # stage.py's markers
    b"hunked prefill": (),
    b"LLM Version": (), b"device_name=": (),  # the release (collect_env) and the GPU, for the start-up reader
    **errors.ANCHORS,  # error lines, alone
    # signs that the server was serving: the first in each chunk is enough
    b"POST /v1/": None, b"Received request": None, b"Added request": None,
}  # fmt: skip
# What people write rather than what a server prints (answers said to be cut short, truncation.py): looked for in
# the first chunk only, since a paste is smaller and a larger input is a machine's log.
PROSE_ANCHORS = {gate.encode(): () for gate in truncation.CUT_SHORT_GATES}
# vLLM's wordings matched in any case, with their gates in lowercase: tried on a paste's lines no recogniser read
ANYCASE = [
    replace(pattern, gate=pattern.gate.lower(), regex=re.compile(pattern.regex.pattern, re.IGNORECASE))
    for pattern in PATTERNS
    if pattern.template is not None
]
ANYCASE_GATES = frozenset(pattern.gate for pattern in ANYCASE)
# (pattern, its gate masked, a digit-blind regex that matches a shape wherever the pattern matches a line of it)
_SCREENS = [(pattern, masked(pattern.gate), screen(pattern.regex)) for pattern in PATTERNS]


@dataclass(frozen=True)
class Plan:
    """What the lines of one shape can give."""

    patterns: tuple[Pattern, ...]  # those that may match, in PATTERNS' order
    # each match of theirs in the shape, the same in every line of it, where they are all digit-blind,
    # with how its numbers are read (Pattern.readers)
    matches: tuple[tuple[Pattern, Where, tuple[NumberReader, ...]], ...] | None
    settled: bool  # whether `matches` are already those chosen, in order (no recogniser judges its numbers)
    facts: Readers  # what reads the facts it states for the context
    markers: Markers  # for the stage tracker
    requests: bool  # whether the truncation trackers want it
    elided: tuple[Pattern, ...]  # where the shape has an elision: those whose numbers are read around it
    startup: bool  # whether the start-up reader reads something in it (startup.py)
    error: bool  # whether it is an error line (errors.py)
    consequence: frozenset[str]  # the symptoms whose consequence it names (errors.py)
    gives: bool  # whether a line of it can give a fact or an observation (the others only mark the stage)
    stated: Template  # where the facts it states are, read by a key or by words (facts.py)

    @classmethod
    def of(cls, shape: str) -> "Plan":
        patterns = tuple(
            pattern for pattern, gate, regex in _SCREENS if gate in shape and (regex is None or regex.search(shape))
        )
        matches, settled = _matches(patterns, shape)
        requests = any(gate in shape for gate in truncation.GATES + truncation.COMPLAINT_GATES)
        elided = ()
        if any(mark in shape for mark in ELISION_MARKS):
            elided = tuple(pattern for pattern in PATTERNS if read_elided(pattern.template, shape))
        read_at_startup = startup.reads(shape)
        facts = fact_readers(shape)
        gives = bool(patterns or facts or elided)
        markers, (error, consequence) = shape_markers(shape), errors.kinds(shape)
        stated = template(shape)
        return cls(
            patterns, matches, settled, facts, markers, requests, elided, read_at_startup, error, consequence, gives,
            stated,
        )  # fmt: skip


def _matches(patterns: tuple[Pattern, ...], shape: str) -> tuple[tuple | None, bool]:
    """The matches of `patterns` in `shape` where every line of it has them, and whether those chosen among
    them are the same in every line too: the counts of numbers read and the spans are the shape's."""
    if not all(pattern.digit_blind for pattern in patterns):
        return None, False
    wheres = ((pattern, where) for pattern in patterns for where in pattern.matches(shape))
    matches = tuple((pattern, where, pattern.readers(shape, where)) for pattern, where in wheres)
    if any(pattern.accept for pattern, *_ in matches):
        return matches, False
    found = [(match[0], *match[0].reading(shape, *match[1:]), match) for match in matches]
    return tuple(match for *_, match in _chosen(found, shape)), True


def _chosen(found: list[tuple], original: str) -> list[tuple]:
    """Of (pattern, numbers, span, ...) found in a line: where matches of one category overlap, the one that
    read the most numbers, then the longest (an older wording is often the start of a newer one); in the
    order they are reported."""
    found.sort(key=lambda item: (-len(item[1]), item[2][0] - item[2][1]))
    chosen, taken = [], {}
    for item in found:
        span, spans = item[2], taken.setdefault(item[0].category, [])
        if spans and item[0].category in ONE_PER_LINE:
            continue
        if not any(span[0] < end and start < span[1] for start, end in spans):
            spans.append(span)
            chosen.append(item)
    chosen.sort(key=lambda item: (CATEGORY_ORDER.get(item[0].category, 0), evidence_window(original, item[2])[1][0]))
    return chosen


def _elided_observations(patterns: tuple[Pattern, ...], text: str, original: str) -> list[Observation]:
    readings = ((pattern, read_elided(pattern.template, text)) for pattern in patterns)
    found = [(pattern, *reading, pattern.label) for pattern, reading in readings if reading is not None]
    found = [item for item in found if not item[0].accept or item[0].accept(item[1])]
    return [_observation(original, *item) for item in _chosen(found, original)]


def _observation(original: str, pattern: Pattern, numbers: dict, span: tuple[int, int], detail) -> Observation:
    evidence, window = evidence_window(original, span)
    if pattern.category == "cuda_oom_startup":
        detail = f"{detail} warm-up"
    return Observation(pattern.category, pattern.stage, numbers, evidence, window, detail)


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
        if not read and self.paste and any(word in text.lower() for word in ANYCASE_GATES):
            read = self._in_any_case(text, original)
        if read:
            self.context.read_lines.add(self.line_index)
        if plan.stated and len(self.facts) < MAX_FACTS and (self.paste or not read):
            facts = from_template(plan.stated, text, self.line_index)
            self.facts += _outside(facts, read, len(original) > EVIDENCE_CHARS) if read else facts
        if plan.error and not read or plan.consequence:  # an error no recogniser read, or its detail
            self.errors.feed(self.line_index, original, plan.error and not read, plan.consequence)
        if plan.requests or self.offline_defaults.call:
            if observation := self.offline_defaults.feed(original):
                self._add(observation)
            if observation := self.cut_short.feed(text, self.line_index):
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
            observations = self._observations_in(plan, text, original) if plan.patterns else []
            if not observations and plan.elided:
                observations = _elided_observations(plan.elided, text, original)
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
        observations = [_observation(original, *item) for item in _chosen(found, original)]
        for observation in observations:
            self._add(observation)
        return observations

    def finish(self) -> "Scanner":
        self._resolve(self.line_index)
        self.context.take_facts(self.facts)
        self.context.take_startup(self.startup_lines)
        self.context.errors = self.errors.finish()
        return self

    @staticmethod
    def _observations_in(plan: Plan, text: str, original: str) -> list[Observation]:
        """What the plan's patterns find in the line, as chosen by `_chosen`."""
        if plan.matches is None:
            found = [(pattern, *match) for pattern in plan.patterns for match in pattern.read_all(text)]
        elif plan.settled:  # read the numbers where the shape has them
            return [_observation(original, pattern, *pattern.reading(text, *read)) for pattern, *read in plan.matches]
        else:
            readings = ((pattern, pattern.reading(text, *read)) for pattern, *read in plan.matches)
            found = [(pattern, *reading) for pattern, reading in readings if reading is not None]
        return [_observation(original, *item) for item in _chosen(found, original)]

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
