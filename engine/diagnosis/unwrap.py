"""A paste's layout undone over a whole stretch, before its lines are cut from their prefixes.

- Hard wraps at a fixed width (a terminal or an editor that cuts mid-word: every wrapped line exactly as long,
  the space at the cut kept at the end of one piece or the start of the next) are joined back with nothing
  between the pieces. A width counts as a hard wrap when at least two lines have it and it is a spike: such
  lines outnumber those one to three characters shorter SPIKE times over (a soft wrap at spaces leaves lines of
  every length just under its width).
- A double-spaced paste (a blank line after every line, as some web pages copy) loses its blank lines, which
  would otherwise end every paragraph.
"""

import re

from kvtool.engine.diagnosis.normalize import strip_prefix

HARD_WRAP_MIN = 100  # hard wraps are at least this wide
SPIKE = 3
MAX_WIDTHS = 4  # the longest line lengths looked at (a paste may hold a few unwrapped long lines)
DOUBLE_SPACED = 0.4  # blank lines after at least this share of line breaks
_BLANK_LINE = re.compile(r"\n[ \t]*(?=\n)")


def undoubled(text: str) -> str:
    """The text without its blank lines, where nearly every line is followed by one."""
    if text.count("\n\n") < DOUBLE_SPACED * text.count("\n"):
        return text
    return _BLANK_LINE.sub("", text)


def hard_wrap_widths(lines: list[str]) -> set[int]:
    lengths = list(map(len, lines))
    widths = set()
    for width in sorted(set(lengths), reverse=True)[:MAX_WIDTHS]:
        if width < HARD_WRAP_MIN:
            break
        count = lengths.count(width)
        if count >= 2 and count >= SPIKE * max(1, *(lengths.count(width - less) for less in (1, 2, 3))):
            widths.add(width)
    return widths


def unwrapped(lines: list[str]) -> list[str]:
    """The lines with each hard-wrapped one joined to the rest of it (lines without a prefix of their own)."""
    widths = hard_wrap_widths(lines)
    if not widths:
        return lines
    out: list[str] = []
    cut = False  # the last physical line was cut at a hard-wrap width
    for line in lines:
        if cut and line and not strip_prefix(line)[0].strip():
            out[-1] += line
        else:
            out.append(line)
        cut = len(line) in widths
    return out
