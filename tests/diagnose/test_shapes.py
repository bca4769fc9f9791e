"""Plans made from a line's shape (its digits masked) give what the line itself gives."""

import dataclasses
import re
from pathlib import Path

from kvtool.engine.diagnosis import stage, truncation
from kvtool.engine.diagnosis.anchors import ANCHORS
from kvtool.engine.diagnosis.plan import Plan
from kvtool.engine.diagnosis.reader import candidate_lines
from kvtool.engine.diagnosis.recognisers import PATTERNS
from kvtool.engine.diagnosis.shapes import digit_blind, masked, screen
from kvtool.engine.diagnosis.signs import facts_in
from kvtool.engine.diagnosis.told_signs import told_readers

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.log"))
ALL_MARKERS = (*stage._PHASES, *stage.RUNTIME_MARKERS, *stage.SERVED_MARKERS, *stage.CHAIN_MARKERS)


def corpus_lines() -> list[str]:
    lines = []
    for log in CORPUS:
        with open(log, "rb") as stream:
            lines += [text for text, _ in candidate_lines(stream, ANCHORS)]
    return lines


def test_digit_blindness_is_read_from_the_regex():
    assert digit_blind(re.compile(r"max seq len \((?P<n>\d{1,3}(?:,\d{3})+|\d+)\)"))
    assert not digit_blind(re.compile(r"max_tokens=16"))
    assert not digit_blind(re.compile(r"(?P<n>\d+) > (?P=n)"))
    assert not digit_blind(re.compile(r"usage: (?:9\d|100)\."))


def test_a_screen_matches_a_shape_wherever_its_regex_matches_a_line():
    backreference = re.compile(r"(?P<n>\d+) > (?P=n) tokens \(at least 1\)")
    assert screen(backreference).search(masked("42 > 42 tokens (at least 1)"))
    assert not screen(backreference).search(masked("42 > 42 tokens (at most 1)"))
    assert screen(re.compile(r"[0-9]x")) is None and screen(re.compile(r"(?!16)\d+")) is None
    assert screen(re.compile(r"\x31 up")) is None


def test_a_marker_with_a_digit_overlaps_no_other_marker():
    for digit_marker in stage._DIGIT_SERVED:
        for other in set(ALL_MARKERS) - {digit_marker}:
            assert digit_marker not in other and other not in digit_marker
            for cut in range(1, min(len(other), len(digit_marker))):
                assert other[-cut:] != digit_marker[:cut] and digit_marker[-cut:] != other[:cut]


def test_the_plan_of_a_lines_shape_keeps_all_the_line_gives():
    lines = [*corpus_lines(), 'INFO:     10.0.0.1:4 - "POST /v1/completions HTTP/1.1" 200 OK', "POST /v2/x"]
    lines += ["The 3 answers are truncated after 120 tokens", "we never pass max_tokens on 2 routes", "only 12 tokens"]
    lines += ["outs = llm.generate(prompts2)", "VLLMOpenAI(model='q3', temperature=0.7)", "--max-tokens 4096"]
    lines += ["Error code: 400 on 3 calls", "Error code: 500 on 3 calls", "kein Speicher für die 2 Cache-Blöcke"]
    for line in lines:
        plan = Plan.of(masked(line))
        matching = {p.regex.pattern for p in PATTERNS if any(p.read_all(line))}
        assert matching <= {p.regex.pattern for p in plan.patterns}, line
        assert facts_in(line, plan.facts) == facts_in(line), line
        assert facts_in(line, plan.told) == facts_in(line, told_readers(line)), line
        by_line = dataclasses.replace(plan, matches=None, settled=False)  # every regex run on the line itself
        assert plan.observations(line, line) == by_line.observations(line, line), line
        assert plan.signs == truncation.signs_of(line), line
        tracker, direct = stage.StageTracker(), stage.StageTracker()
        tracker.feed(line, plan.markers)
        direct.feed(line, (*stage._read_markers(line), line.startswith(stage.TRACEBACK)))
        assert (tracker.frames, tracker.served) == (direct.frames, direct.served), line
