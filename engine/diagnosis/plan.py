"""What the lines of one shape (shapes.py: the line with its digits masked) can give, worked out once per shape: the
recognisers that can match it, what reads the facts it states, its stage markers, whether the truncation trackers
want it, where it holds an elision the recognisers that read numbers around it (elided.py), and where its
recognisers are all digit-blind, their matches (a line of the shape only converts its numbers there, each as chosen
for the shape)."""

from dataclasses import dataclass
from functools import cached_property

from kvtool.engine.diagnosis import errors, startup, truncation
from kvtool.engine.diagnosis.elided import ELISION_MARKS, read_elided
from kvtool.engine.diagnosis.facts import Template, template
from kvtool.engine.diagnosis.findings import Observation, evidence_window
from kvtool.engine.diagnosis.patterns import NumberReader, Pattern, Where
from kvtool.engine.diagnosis.recognisers import PATTERNS
from kvtool.engine.diagnosis.shapes import masked, screen
from kvtool.engine.diagnosis.signs import Readers, fact_readers
from kvtool.engine.diagnosis.stage import Markers, shape_markers
from kvtool.engine.diagnosis.told_signs import told_readers

# messages that hold several parts their recognisers match (PyTorch's several signs of an out-of-memory error,
# the start and the end of the 0.22+ text with no number, vLLM's preemption warning with or without its counter): one a
# line
ONE_PER_LINE = {"cuda_oom", "no_cache_blocks", "preemption"}
CATEGORY_ORDER = {category: i for i, category in reversed(list(enumerate(p.category for p in PATTERNS)))}
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
    ranks: tuple[tuple[int, int], ...]  # where not settled, the best place in `_chosen`'s order each match can take
    facts: Readers  # what reads the facts it states for the context
    told: Readers  # what reads a failure told in words (in a paste only: signs.told_readers)
    markers: Markers  # for the stage tracker
    requests: bool  # whether the truncation trackers want it
    signs: truncation.Signs  # what it tells the tracker of cut answers
    elided: tuple[Pattern, ...]  # where the shape has an elision: those whose numbers are read around it
    startup: bool  # whether the start-up reader reads something in it (startup.py)
    error: bool  # whether it is an error line (errors.py)
    consequence: frozenset[str]  # the symptoms whose consequence it names (errors.py)
    gives: bool  # whether a line of it can give a fact or an observation (the others only mark the stage)
    shape: str

    @cached_property
    def stated(self) -> Template:
        """Where the facts it states are, read by a key or by words (facts.py): worked out the first time a line of
        the shape is asked for them (a machine's log does not ask the lines a wording read)."""
        return template(self.shape)

    @classmethod
    def of(cls, shape: str) -> "Plan":
        patterns = tuple(
            pattern for pattern, gate, regex in _SCREENS if gate in shape and (regex is None or regex.search(shape))
        )
        matches, settled = _matches(patterns, shape)
        ranks = () if settled or matches is None else tuple(_best_rank(*match) for match in matches)
        requests = any(gate in shape for gate in truncation.GATES + truncation.COMPLAINT_GATES)
        signs = truncation.signs_of(shape)
        elided = ()
        if any(mark in shape for mark in ELISION_MARKS):
            elided = tuple(pattern for pattern in PATTERNS if read_elided(pattern.template, shape))
        read_at_startup = startup.reads(shape)
        facts, told = fact_readers(shape), told_readers(shape)
        gives = bool(patterns or facts or elided)
        markers, (error, consequence) = shape_markers(shape), errors.kinds(shape)
        return cls(
            patterns, matches, settled, ranks, facts, told, markers, requests, signs, elided, read_at_startup, error,
            consequence, gives, shape,
        )  # fmt: skip

    def observations(self, text: str, original: str) -> list[Observation]:
        """What the plan's patterns find in the line, as `_chosen` chooses."""
        if self.matches is None:
            found = [(pattern, *match) for pattern in self.patterns for match in pattern.read_all(text)]
        elif self.settled:  # read the numbers where the shape has them
            return [_observation(original, pattern, *pattern.reading(text, *read)) for pattern, *read in self.matches]
        else:
            found = self._readings(text)
        return chosen_observations(found, original)

    def _readings(self, text: str) -> list[tuple]:
        """The readings of the shape's matches in the line, but those `_chosen` would drop whatever they read: of a
        category one a line, after a reading of it already ahead of the best place they can take."""
        found, ahead = [], {}
        for (pattern, *read), best in zip(self.matches, self.ranks):
            if ahead.get(pattern.category, best) < best:
                continue
            if (reading := pattern.reading(text, *read)) is not None:
                found.append(item := (pattern, *reading))
                if pattern.category in ONE_PER_LINE:
                    rank = _rank(item)
                    ahead[pattern.category] = min(ahead.get(pattern.category, rank), rank)
        return found

    def around_elisions(self, text: str, original: str) -> list[Observation]:
        """What the recognisers that read numbers around an elision find in the line."""
        readings = ((pattern, read_elided(pattern.template, text)) for pattern in self.elided)
        found = [(pattern, *reading, pattern.label) for pattern, reading in readings if reading is not None]
        return chosen_observations([item for item in found if not item[0].accept or item[0].accept(item[1])], original)


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


def _rank(item: tuple) -> tuple[int, int]:
    """The place of (pattern, numbers, span, ...) in `_chosen`'s order: the most numbers read, then the longest."""
    return -len(item[1]), item[2][0] - item[2][1]


def _best_rank(pattern: Pattern, where: Where, readers: tuple[NumberReader, ...]) -> tuple[int, int]:
    """The best place a match can take: with every number it can read (a conversion may give none)."""
    return _rank((pattern, {**pattern.constants, **{key: None for key, _ in readers}}, where[0]))


def _chosen(found: list[tuple], original: str) -> list[tuple]:
    """Of (pattern, numbers, span, ...) found in a line: where matches of one category overlap, the one that
    read the most numbers, then the longest (an older wording is often the start of a newer one); in the
    order they are reported."""
    found.sort(key=_rank)
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


def chosen_observations(found: list[tuple], original: str) -> list[Observation]:
    """The observations of (pattern, numbers, span, detail) found in a line, as `_chosen` chooses."""
    return [_observation(original, *item) for item in _chosen(found, original)]


def _observation(original: str, pattern: Pattern, numbers: dict, span: tuple[int, int], detail) -> Observation:
    evidence, window = evidence_window(original, span)
    if pattern.category == "cuda_oom_startup":
        detail = f"{detail} warm-up"
    return Observation(pattern.category, pattern.stage, numbers, evidence, window, detail)
