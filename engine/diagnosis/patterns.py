"""A recogniser is data: the category it reports, a cheap substring gate, and a regex whose
named groups are the numbers it reads. Sizes such as "1.25 GiB" or "120.54 MiB" become GiB."""

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvtool.engine.diagnosis.findings import Number

_UNITS_IN_GIB = {"bytes": 1 / (1 << 30), "KiB": 1 / (1 << 20), "MiB": 1 / 1024, "GiB": 1.0, "GB": 1.0, "TiB": 1024.0}
_SIZE = re.compile(r"(-?[\d.]+) ?(bytes|KiB|MiB|GiB|GB|TiB)")
SIZE = r"-?[\d.]+ ?(?:bytes|KiB|MiB|GiB|GB|TiB)"


@dataclass(frozen=True)
class Pattern:
    category: str
    stage: str
    gate: str
    regex: re.Pattern
    extras: tuple[re.Pattern, ...] = ()  # more numbers from the same line, each optional
    detail: str | None = None  # a named group kept as text (a model name, a device)
    accept: Callable[[dict[str, Number]], bool] | None = None

    def read(self, line: str) -> tuple[dict[str, Number], tuple[int, int], str | None] | None:
        """(numbers, span of the match, detail) when `line` matches, else None."""
        if self.gate not in line or not (match := self.regex.search(line)):
            return None
        numbers = numbers_from(match)
        for extra in self.extras:
            if found := extra.search(line):
                numbers.update(numbers_from(found))
        if self.accept and not self.accept(numbers):
            return None
        detail = match.group(self.detail) if self.detail else None
        return numbers, match.span(), detail


def compile_(text: str) -> re.Pattern:
    """Templates are written with single spaces; logs and JSON bodies may wrap or double them."""
    return re.compile(text.replace(" ", r"\s+"))


def numbers_from(match: re.Match) -> dict[str, Number]:
    numbers = {}
    for name, text in match.groupdict().items():
        if text is not None and (value := to_number(text, in_gib=name.endswith("_gib"))) is not None:
            numbers[name] = value
    return numbers


def to_number(text: str, in_gib: bool = False) -> Number | None:
    text = text.replace(",", "")
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
