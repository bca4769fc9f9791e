"""A message with part of it left out: "..." or "…" where the paste skipped words (often a number with them),
so the whole-message regex cannot match. Each number is then read from the words next to it in the template
(those before it, or those after it), and the message counts once MIN_NUMBERS of them are found in a line
that holds an elision. The regexes are digit-blind: which recognisers can read a line is decided on its shape.
"""

import re
from dataclasses import dataclass
from functools import cache
from string import Formatter

from kvtool.engine.diagnosis.patterns import ALIASES, NUMBER, SPECIAL, TEXT, NumberReader, literal, number_reader

ELISION = re.compile(r"\.\.\.|…")
ELISION_MARKS = ("...", "…")
MIN_NUMBERS = 2
CONTEXT_LETTERS, MAX_CONTEXT_WORDS = 8, 5  # the words a number is known by, on one side of it


@dataclass(frozen=True)
class Fragment:
    """One number of a template and the regexes that find it: its words before, its words after."""

    reader: NumberReader
    regexes: tuple[re.Pattern, ...]


@cache  # built when a line first holds an elision: most inputs never need them
def fragments_of(template: str) -> tuple[Fragment, ...]:
    parts = [(text, name) for text, name, _, _ in Formatter().parse(template)]
    found = []
    for i, (before, name) in enumerate(parts):
        if not name or name in TEXT or name in SPECIAL:
            continue
        after = parts[i + 1][0] if i + 1 < len(parts) else ""
        number, ahead, behind = f"(?P<n>{NUMBER})", _words(before, from_end=True), _words(after, from_end=False)
        sides = ([literal(ahead) + number] if ahead else []) + ([number + literal(behind)] if behind else [])
        regexes = tuple(map(re.compile, sides))
        if regexes:
            found.append(Fragment(number_reader(ALIASES.get(name, name)), regexes))
    return tuple(found)


def _words(text: str, from_end: bool) -> str:
    """The words next to a number, CONTEXT_LETTERS letters of them at least (none where the text has fewer)."""
    words = text.split(" ")
    for count in range(1, min(len(words), MAX_CONTEXT_WORDS) + 1):
        side = " ".join(words[-count:] if from_end else words[:count])
        if sum(char.isalpha() for char in side) >= CONTEXT_LETTERS:
            return side
    return ""


def read_elided(template: str | None, line: str) -> tuple[dict, tuple[int, int]] | None:
    """(numbers, the span from the first number's words to the last's) where enough of the template's numbers
    are found."""
    numbers, spans = {}, []
    for fragment in fragments_of(template) if template else ():
        match = next(filter(None, (regex.search(line) for regex in fragment.regexes)), None)
        key, convert = fragment.reader
        if match and (value := convert(match.group("n"))) is not None:
            numbers[key] = value
            spans.append(match.span())
    if len(numbers) < MIN_NUMBERS:
        return None
    return numbers, (min(start for start, _ in spans), max(end for _, end in spans))
