"""A paste's layout undone over a whole stretch, before its lines are cut from their prefixes.

- Hard wraps at a fixed width (a terminal or an editor that cuts mid-word: every wrapped line exactly as long,
  the space at the cut kept at the end of one piece or the start of the next) are joined back with nothing
  between the pieces. A width counts as a hard wrap when it is a spike (its lines outnumber those one to three
  characters shorter SPIKE times over: a soft wrap at spaces leaves lines of every length just under its width)
  and at least two lines of it go on in a line with no prefix of its own.
- A double-spaced paste (a blank line after every line, as some web pages copy) loses its blank lines, which
  would otherwise end every paragraph.
"""

import heapq
import re
from collections import Counter

from kvtool.engine.diagnosis.normalize import strip_prefix

HARD_WRAP_MIN = 72  # hard wraps are at least this wide
# a narrower width (a terminal's 80 columns) is a hard wrap only where a cut fell on a space and kept it: a soft wrap
# (at spaces, which it drops) also leaves lines of exactly its width when a paste is short
SOFT_WRAP_MAX = 100
SPIKE = 3
MAX_WIDTHS = 4  # the longest line lengths looked at (a paste may hold a few unwrapped long lines)
CHECKED = 8  # lines of a width looked at for pieces that go on
DOUBLE_SPACED = 0.4  # blank lines after at least this share of line breaks
DOUBLE_SPACED_LINES = 16  # of at least this many
# a paste's layout is the same all through: it is read from the start of a stretch
SAMPLE_CHARS, SAMPLE_LINES = 16 << 10, 2048
_SENTENCE_END = re.compile(r"[.:!?。：！？]\s*$")
_BLANK_LINE = re.compile(r"\n[ \t]*(?=\n)")


def undoubled(text: str) -> str:
    """The text without its blank lines, where nearly every line is followed by one. In a paste of a few lines,
    only where they are the pieces of one message (they share a log prefix, or none but the last ends a sentence):
    else they are paragraphs."""
    sample = text[:SAMPLE_CHARS]
    breaks = sample.count("\n")
    if sample.count("\n\n") < DOUBLE_SPACED * breaks:
        return text
    if breaks < DOUBLE_SPACED_LINES and not _one_message([line for line in sample.split("\n") if line.strip()]):
        return text
    return _BLANK_LINE.sub("", text)


def _one_message(lines: list[str]) -> bool:
    prefixes = {strip_prefix(line)[0].strip() for line in lines}
    shared = len(prefixes) == 1 and "" not in prefixes
    return shared or not any(map(_SENTENCE_END.search, lines[:-1]))


def hard_wrap_widths(lines: list[str]) -> set[int]:
    lengths = list(map(len, lines))
    counts = Counter(lengths)
    widths = set()
    for width in heapq.nlargest(MAX_WIDTHS, counts):
        if width < HARD_WRAP_MIN:
            break
        count = counts[width]
        spike = count >= 2 and count > SPIKE * max(counts[width - less] for less in (1, 2, 3))
        if spike and _go_on(lines, lengths, width, width < SOFT_WRAP_MAX):
            widths.add(width)
    return widths


def _go_on(lines: list[str], lengths: list[int], width: int, space_kept: bool) -> bool:
    """Whether two of the first CHECKED lines of this width go on in the next line, one of them cut at a space it
    kept where `space_kept` is asked for (each is found in C: a log whose lines of one length are records, not
    pieces, costs a few checks)."""
    going_on, at, kept = 0, -1, not space_kept
    for _ in range(CHECKED):
        try:
            at = lengths.index(width, at + 1)
        except ValueError:
            break
        if at + 1 < len(lines) and _goes_on(lines[at + 1]):
            going_on += 1
            kept = kept or lines[at].endswith(" ") or lines[at + 1].startswith(" ")
        if going_on >= 2 and kept:
            return True
    return False


def unwrapped(lines: list[str]) -> list[str]:
    """The lines with each hard-wrapped one joined to the rest of it."""
    widths = hard_wrap_widths(lines[:SAMPLE_LINES])
    if not widths:
        return lines
    cut = {i for i, line in enumerate(lines[:-1]) if len(line) in widths and _goes_on(lines[i + 1])}
    out: list[str] = []
    for i, line in enumerate(lines):
        if i - 1 in cut and out:
            out[-1] += line
        else:
            out.append(line)
    return out


def _goes_on(line: str) -> bool:
    """Whether a line is the rest of the one before: it has no prefix of its own."""
    return bool(line) and not strip_prefix(line)[0].strip()
