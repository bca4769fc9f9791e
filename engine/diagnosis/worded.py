"""Numbers named by the words of prose around them (words.py), among the quantities of the number's kind: its unit
picks GiB, a percent, a latency or a count, so "KV cache usage reached 98 %" and "24 GB" never compete. The words
closest before the number name it, within BEFORE characters, or words right after it ("3.1 GiB free", "20.67 GiB in
use"). Two numbers at once after words of free memory or of utilization: `(free/total GiB)`, `(utilization,
requested GiB)`."""

import re
from bisect import bisect_right
from collections.abc import Iterator

from kvtool.engine.diagnosis.keys import Reading
from kvtool.engine.diagnosis.quantities import BY_NAME, Quantity, kind_of
from kvtool.engine.diagnosis.values import NUMBER, UNITS, convert
from kvtool.engine.diagnosis.words import (
    AFTER_WORDS,
    MEMORY_AFTER,
    MEMORY_WORDS,
    STATUS_AFTER,
    STATUS_BEFORE,
    WORDS,
    Words,
)

# a number glued to letters that are no unit is part of a name ("8b", "A100"), not a quantity
NUMBER_WITH_UNIT = re.compile(rf"(?<![A-Za-z0-9_.])(?P<number>{NUMBER})(?:\s?(?P<unit>{UNITS})|(?![A-Za-z]))")
_OF = r"[/,]|\s(?:out )?of\s|\sde\s|\svon\s|\sиз\s"  # "3.1/24", "3.1 of 24", "3,1 de 24", "6 von 24"
PAIR = re.compile(
    rf"\(?(?P<a>{NUMBER})\s*(?:GiB|GB|MiB)?\s*(?P<sep>{_OF})\s*(?P<b>{NUMBER})\s*(?P<unit>GiB|GB|MiB)\)?", re.IGNORECASE
)
_UNIT_CASE = {unit.lower(): unit for unit in ("GiB", "GB", "MiB")}
_FREE_WORDS = re.compile(r"free|available|可用|空闲|libre|disponible|frei|свободн", re.IGNORECASE)
# the words before a pair, and what its two numbers are: `(free/total GiB)`, `(utilization, requested GiB)`
PAIR_WORDS = (
    (_FREE_WORDS, "/", ("free_gib", "total_gib")),
    (re.compile(r"utili[sz]ation|利用率", re.IGNORECASE), ",", ("gpu_memory_utilization", "requested_gib")),
)
_ASSIGNED = re.compile(r"=['\"]?$")
_PORT = re.compile(r"\w:$")
LABEL_SET = re.compile(r'\{\s*\w+="[^"\n]*"(?:\s*,\s*\w+="[^"\n]*")*\s*,?\s*\}')  # a sample's labels
# an HTTP status: `400 Bad Request`, `Error code: 400`, `HTTP 400`, `HTTP/1.1" 400`, `status 400`
_STATUS_AFTER = re.compile(r"\s?" + STATUS_AFTER, re.I)
_STATUS_BEFORE = re.compile(STATUS_BEFORE + r"\W{0,3}$", re.I)
_STATUS_CODE = re.compile(r"\d{3}")  # digit-blind: the line's shape reads 400 as 000
_AFTER_FILLER = re.compile(r"\s*(?:is |are |of |requests |reqs )?")
BEFORE, AFTER = 56, 28  # how far words may be from their number, in characters


def pairs(text: str) -> Iterator[Reading]:
    """`(free/total GiB)` after words of free memory and `(utilization, requested GiB)` after words of
    utilization: vLLM's way (and people's) to give two numbers at once."""
    for match in PAIR.finditer(text):
        around = text[max(0, match.start() - BEFORE) : match.start()] + " " + text[match.end() : match.end() + AFTER]
        sep = "," if match.group("sep") == "," else "/"  # "3.1 of 24 GiB" is free of total, as "3.1/24 GiB" is
        found = [(words.search(around), names) for words, own, names in PAIR_WORDS if own == sep]
        names = next((names for words, names in found if words), None)
        if names is None:
            continue
        unit = _UNIT_CASE[match.group("unit").lower()]
        for name, group in zip(names, "ab"):
            own = unit if name.endswith("_gib") else None
            if (value := convert(BY_NAME[name], match.group(group), own)) is not None:
                yield name, value, own, match.span(group)


def worded(text: str) -> Iterator[Reading]:
    ends: dict[bool, list] = {}  # for sizes and for the rest: each quantity's words, where they end in the line
    lower = text.lower()
    labels = [match.span() for match in LABEL_SET.finditer(text)] if '="' in text else []
    for match in NUMBER_WITH_UNIT.finditer(text):
        if _ASSIGNED.search(text, max(0, match.start() - 2), match.start()):
            continue  # the value of a key of its own (`engine="0"`), known or not
        if any(start < match.start() < end for start, end in labels):
            continue  # inside a Prometheus sample's labels (`modelName="NVIDIA H100 80GB HBM3"`): a name
        unit = match.group("unit")
        if unit is None and _PORT.search(text, max(0, match.start() - 2), match.start()):
            continue  # a port (`localhost:8000`, `"10.0.0.5:8000"`)
        if unit is None and _status(text, match.start(), match.end()):
            continue
        kinds = kind_of(unit)
        memory = "gib" in kinds
        if memory not in ends:
            ends[memory] = [
                (q, words, [m.end() for m in words.finditer(text)])
                for q, words, gates in _words_of(memory)
                if any(gate in lower for gate in gates)
            ]
        quantity = _named_by_words(text, match.start(), match.end(), kinds, ends[memory])
        if quantity is None:
            continue
        value = convert(quantity, match.group("number"), unit)
        if value is not None:
            yield quantity.name, value, unit, match.span("number")


def _status(text: str, start: int, end: int) -> bool:
    if not _STATUS_CODE.fullmatch(text, start, end):
        return False
    return bool(_STATUS_AFTER.match(text, end) or _STATUS_BEFORE.search(text, max(0, start - 16), start))


def _words_of(memory: bool) -> Words:
    return MEMORY_WORDS if memory else WORDS


def _named_by_words(text: str, start: int, end: int, kinds: tuple[str, ...], ends: list) -> Quantity | None:
    """The quantity whose words end closest before the number, within BEFORE characters (or start right after
    it), among those of the number's kind; the closest words of a quantity of another kind stand between the number
    and any farther ones ("Waiting: 0 reqs, KV cache usage: 100% ... 120k-token documents" names no waiting count).
    `ends`: each quantity's words and where they end in the line."""
    best, distance, after, closest = None, BEFORE + AFTER, False, BEFORE + 1
    filler = _AFTER_FILLER.match(text, end).end()
    for quantity, words, word_ends in ends:
        before = bisect_right(word_ends, start) - 1
        gap = start - word_ends[before] if before >= 0 else BEFORE + 1
        if quantity.kind not in kinds:
            closest = min(closest, gap)
            continue
        if gap <= BEFORE and gap < distance:
            best, distance, after = quantity, gap, False
        after_words = MEMORY_AFTER.get(quantity.name) if "gib" in kinds else AFTER_WORDS.get(quantity.name, words)
        named = after_words and after_words.match(text, filler, end + AFTER)
        if named and "_" not in named.group(0) and filler - end < distance:  # a key after it names what follows
            best, distance, after = quantity, filler - end, True
    return None if best is not None and not after and closest < distance else best
