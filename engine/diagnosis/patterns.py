"""A recogniser is data: the category it reports, a cheap substring gate, and a regex whose
named groups are the numbers it reads. Sizes such as "1.25 GiB" or "120.54 MiB" become GiB.

Most regexes are derived from a message template (wordings.py, kvtool's messages.py): the text
from a few words (LEAD_CHARS letters) before the first number to just after the last one, each
space matching any run of whitespace, each placeholder a number (or the text it stands for).
Starting a few words before the first number, the first of them possibly cut, keeps a message
recognisable when a paste lost its first characters; the sentences after the one that holds the second
number are optional, so a message cut short at the end of a sentence is read as far as it goes.
"""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache, partial
from string import Formatter

from kvtool.engine.diagnosis.findings import Number
from kvtool.engine.diagnosis.shapes import digit_blind
from kvtool.engine.diagnosis.values import MAX_NUMBER

_UNITS_IN_GIB = {"bytes": 1 / (1 << 30), "KiB": 1 / (1 << 20), "MiB": 1 / 1024, "GiB": 1.0, "GB": 1.0, "TiB": 1024.0}
_SIZE_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)"  # a digit at least: "." alone is no size
_SIZE = re.compile(rf"({_SIZE_NUMBER}) ?(bytes|KiB|MiB|GiB|GB|TiB)")
SIZE = rf"{_SIZE_NUMBER} ?(?:bytes|KiB|MiB|GiB|GB|TiB)"
NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?"
TEXT = {
    "param": r"\w+",
    "tp_param": r"\w+",
    "prompt_type": r"\w+",
    "operation": r"[\w ]{1,40}?",
    "device": r"\S+",
    "url": r"\S+",
    "request_id": r"\S+",
    "preemption_mode": r"[\w.]+",
    "task": r"[^()]{0,40}",
    "derived_key": r"\w+",
    "requested_model": r"[^`\n]{1,300}",
    "aliases": r"[^\n]{1,300}?",
    "mm_placeholders": r"[^\n]{1,200}?",  # a count, or a dict of them by modality
}
DETAIL_GROUPS = ("requested_model",)  # TEXT placeholders an explainer reads as the finding's detail
SPECIAL = {
    "qualifier": r"(?:at least )?",
    "url_sentence": r"(?: See \S+ for more details\.)?",  # the docs link some releases add
    "prefix": r"(?:[^\n]{0,400}?\(original error: )?",  # vLLM 0.13+'s words before torch's OOM on loading
}
# kvtool's own templates name some numbers differently from the findings
ALIASES = {
    "needed_gib": "kv_needed_gib",
    "available_gib": "kv_available_gib",
    "estimate": "estimated_max_model_len",
    "derived": "derived_max_model_len",
    "total_tokens": "requested_tokens",
}
MAX_MATCHES_PER_LINE = 64
SENTENCE_END = re.compile(r"\.(?=\s+[A-Z])")
MIN_NUMBERS_BEFORE_CUT = 2  # a message cut short at the end of a sentence is recognised once it has read this many
LEAD_CHARS = 20
TAIL_CHARS = 80
# a match: its span, (name, start, end) of each number it reads (its extras' too, in order), its detail's span
Where = tuple[tuple[int, int], tuple[tuple[str, int, int], ...], tuple[int, int] | None]
NumberReader = tuple[str, Callable[[str], "Number | None"]]  # (the key a number goes under, its conversion)
# the shape of a number that int() or float() reads as to_number does (int() refuses thousands of digits),
# and of a size in GiB whose number is one of those
_PLAIN = re.compile(r"0{1,20}(\.0+)?")
_PLAIN_SIZE = re.compile(r"(0{1,20}(?:\.0+)?) ?(" + "|".join(_UNITS_IN_GIB) + ")")


@dataclass(frozen=True)
class Pattern:
    category: str
    stage: str
    gate: str
    regex: re.Pattern
    extras: tuple[re.Pattern, ...] = ()  # more numbers from the same line, each optional
    detail: str | None = None  # a named group kept as text (a model name, a device)
    accept: Callable[[dict[str, Number]], bool] | None = None
    label: str | None = None  # a fixed detail (the warm-up kind)
    constants: dict = field(default_factory=dict)
    template: str | None = None  # the message it is derived from, for one with words left out (elided.py)

    def read(self, line: str) -> tuple[dict[str, Number], tuple[int, int], str | None] | None:
        """(numbers, span of the match, detail) for the first match in `line`, else None."""
        return next(self.read_all(line), None)

    def read_all(self, line: str) -> Iterator[tuple[dict[str, Number], tuple[int, int], str | None]]:
        """The same for every match in `line` (several messages may share a logical line)."""
        if self.gate not in line:
            return
        for where in self.matches(line):
            if (reading := self.reading(line, where)) is not None:
                yield reading

    def matches(self, text: str) -> Iterator[Where]:
        """Where each match in `text` is and where it reads its numbers and detail."""
        for count, match in enumerate(self.regex.finditer(text)):
            if count >= MAX_MATCHES_PER_LINE:
                return
            numbers = _number_spans(match)
            for extra in self.extras:
                if found := extra.search(text, match.start()):
                    numbers += _number_spans(found)
            detail = match.span(self.detail) if self.detail and match.group(self.detail) is not None else None
            yield match.span(), numbers, detail

    def reading(
        self, line: str, where: Where, readers: tuple[NumberReader, ...] | None = None
    ) -> tuple[dict[str, Number], tuple[int, int], str | None] | None:
        """(numbers, span, detail) read from `line` where a match is, or None if they are not accepted.
        `readers`: each number's key and conversion, where already chosen for the line's shape."""
        span, number_spans, detail = where
        numbers = dict(self.constants)
        readers = readers or [number_reader(name) for name, _, _ in number_spans]
        for (_, start, end), (key, convert) in zip(number_spans, readers):
            if (value := convert(line[start:end])) is not None:
                numbers[key] = value
        if self.accept and not self.accept(numbers):
            return None
        return numbers, span, self.label or (line[detail[0] : detail[1]] if detail else None)

    @staticmethod
    def readers(shape: str, where: Where) -> tuple[NumberReader, ...]:
        """How each number of a match in `shape` is read in every line of that shape."""
        return tuple(number_reader(name, shape[start:end]) for name, start, end in where[1])

    @property
    def digit_blind(self) -> bool:
        """Whether it matches a line exactly where it matches the line's shape (shapes.py), at the same spans."""
        return not re.search(r"\d", self.gate) and all(map(digit_blind, (self.regex, *self.extras)))


def compile_(text: str) -> re.Pattern:
    """Templates are written with single spaces; logs and JSON bodies may wrap or double them."""
    return re.compile(text.replace(" ", r"\s+"))


def from_template(template: str) -> tuple[str, str]:
    """(regex, gate) for a message template with str.format placeholders."""
    parts = [(between, name) for between, name, _, _ in Formatter().parse(template)]
    named = [i for i, (_, name) in enumerate(parts) if name and name not in TEXT and name not in SPECIAL]
    named = named or [i for i, (_, name) in enumerate(parts) if name in TEXT]  # a message with names only
    if not named:  # the first sentence, and the start of the next where it was pasted (it tells wordings apart)
        words = template.split(" ")
        first_sentence = template.split(". ")[0].count(" ") + 1
        sentence, rest = " ".join(words[:first_sentence]), " ".join(words[first_sentence : first_sentence + 4])
        ending = r"\.?" if sentence.endswith(".") else ""  # quoted in prose, the period may be gone
        return literal(sentence.removesuffix(".")) + ending + f"(?: {literal(rest)})?", _gate(sentence)
    first, last = named[0], named[-1]
    pieces, seen, kept, cuts = [], set(), [], 0
    for i, (between, name) in enumerate(parts[: last + 1]):
        if i < first:
            continue
        text = _lead(between) if i == first else between
        sentence_end = SENTENCE_END.search(text) if len(seen) >= MIN_NUMBERS_BEFORE_CUT else None
        if not cuts:  # the gate is a word every match has
            kept.append(text[: sentence_end.end()] if sentence_end else text)
        if sentence_end:  # a paste may stop at the end of this sentence: the rest is optional
            pieces += [literal(text[: sentence_end.end()]), "(?:", literal(text[sentence_end.end() :])]
            cuts += 1
        else:
            pieces.append(literal(text) if i != first else _cut_tolerant(text))
        pieces.append(_field(ALIASES.get(name, name), seen))
    tail = _tail(parts[last + 1][0] if last + 1 < len(parts) else "")
    ending = f"(?:{literal(tail)}|$)" if tail else ""  # a paste may stop right after the last number
    kept[0] = kept[0].split(None, 1)[-1] if kept[0].strip() else ""  # the first word may be cut: no gate on it
    return "".join(pieces) + ending + ")?" * cuts, _gate(" ".join(kept))


def _lead(between: str) -> str:
    """The last words before the first number, at least LEAD_CHARS letters of them (or all there is)."""
    words = between.split(" ")
    for count in range(1, len(words) + 1):
        lead = " ".join(words[-count:])
        if len(lead.replace(" ", "")) >= LEAD_CHARS:
            return lead
    return between


def _cut_tolerant(text: str) -> str:
    """The first word may have lost its first characters, or be gone (a paste cut at the start)."""
    word, space, rest = re.match(r"(\S*)(\s*)(.*)", text, re.DOTALL).groups()
    if len(word) <= 3 or not space:
        return literal(text)
    if len(re.sub(r"\W", "", rest)) >= LEAD_CHARS:  # the rest alone tells the message apart: the word may go
        suffixes = "|".join(re.escape(word[i:]) for i in range(len(word)))
        return f"(?:(?:{suffixes})\\s+)?" + literal(rest)
    suffixes = "|".join(re.escape(word[i:]) for i in range(len(word) - 2))
    return f"(?:{suffixes})" + literal(space + rest)


def _tail(between: str) -> str:
    """What follows the last placeholder to the end of its sentence (at most TAIL_CHARS)."""
    match = re.match(rf"[^.]{{0,{TAIL_CHARS}}}?(?:\.(?=\s|$)|$)", between)
    return match.group(0).rstrip() if match else between[:TAIL_CHARS].rsplit(" ", 1)[0]


def literal(text: str) -> str:
    """Each space any run of whitespace; a parenthesis may be missing (pastes drop vLLM's stray ones)."""
    escaped = (r"\s+" if part.isspace() else re.escape(part) for part in re.split(r"(\s+)", text) if part)
    return "".join(escaped).replace(r"\(", r"\(?").replace(r"\)", r"\)?")


def _field(name: str, seen: set) -> str:
    if name in SPECIAL:
        return SPECIAL[name]
    if name in seen:
        return f"(?P={name})"
    seen.add(name)
    return f"(?P<{name}>{TEXT.get(name, NUMBER)})"


def _gate(text: str) -> str:
    words = re.findall(r"[A-Za-z_]{4,}", text)
    return max(words, key=len) if words else text.split()[0]


def _number_spans(match: re.Match) -> tuple[tuple[str, int, int], ...]:
    """(name, start, end) of each number group that took part in the match, in the regex's order."""
    return tuple(
        (name, *match.span(name)) for name, text in match.groupdict().items() if text is not None and name not in TEXT
    )


@lru_cache(maxsize=1024)
def number_reader(name: str, shape: str | None = None) -> NumberReader:
    """(the key, the conversion) of a number read under `name`: a size in bytes goes under its name in GiB;
    one whose text has the shape `shape` of plain digits needs only int() or float()."""
    plain = shape is not None and _PLAIN.fullmatch(shape)
    size = name.endswith("_gib") and shape is not None and _PLAIN_SIZE.fullmatch(shape)
    if plain:
        convert = float if plain.group(1) else int
    elif size:
        convert = partial(_size_in_gib, len(size.group(1)), _UNITS_IN_GIB[size.group(2)])
    else:
        convert = partial(to_number, in_gib=name.endswith("_gib"))
    if name.endswith("_bytes"):
        return name[:-6] + "_gib", partial(_bytes_in_gib, convert)
    return name, convert


def _size_in_gib(digits: int, unit_in_gib: float, text: str) -> float:
    return round(float(text[:digits]) * unit_in_gib, 4)


def _bytes_in_gib(convert: Callable[[str], Number | None], text: str) -> Number | None:
    return None if (value := convert(text)) is None else round(value / (1 << 30), 4)


def to_number(text: str, in_gib: bool = False) -> Number | None:
    """The number `text` states, or None where it states none a log could mean (past 1e15, inf, nan)."""
    number = _parsed(text.replace(",", ""), in_gib)
    return number if number is not None and abs(number) <= MAX_NUMBER else None


def _parsed(text: str, in_gib: bool) -> Number | None:
    if in_gib and (size := _SIZE.fullmatch(text)):
        return round(float(size.group(1)) * _UNITS_IN_GIB[size.group(2)], 4)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None
