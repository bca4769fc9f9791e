"""A line's shape: its text with every ASCII digit read as 0.

Lines that differ only in their numbers share a shape, and a regex with no digit and no
backreference of its own (digit-blind) treats every digit alike: it matches a line exactly where it
matches the line's shape, with the same spans. So what lines of one shape can give (which
recognisers to run, whether the context or the stage tracker has anything in them) is worked out
once per shape; a dense log has thousands of lines of each.
"""

import re

MASK = bytes.maketrans(b"123456789", b"000000000")
_NOT_ITS_OWN_DIGITS = re.compile(r"\\d|\{\d+(?:,\d*)?\}")  # a digit class and counted repeats


def shape_of(text: str) -> bytes:
    """The text's shape as UTF-8 (a digit is one byte there, and a lone surrogate passes)."""
    return text.encode("utf-8", "surrogatepass").translate(MASK)


def masked(text: str) -> str:
    return shape_of(text).decode("utf-8", "surrogatepass")


def digit_blind(regex: re.Pattern) -> bool:
    """Whether `regex` treats every digit alike (no digit of its own, no backreference)."""
    source = _NOT_ITS_OWN_DIGITS.sub("", regex.pattern)
    return not re.search(r"\d", source) and "(?P=" not in source


def screen(regex: re.Pattern) -> re.Pattern | None:
    """A digit-blind regex that matches a shape wherever `regex` matches a line of that shape: its digits
    read as any digit, its backreferences as anything. None where that cannot be said so simply (a digit
    escaped or in a class, a negative lookaround)."""
    if digit_blind(regex):
        return regex
    if "(?!" in regex.pattern or "(?<!" in regex.pattern:
        return None
    pieces = []
    for token in _TOKEN.findall(regex.pattern):
        if token.startswith("(?P="):
            token = r"[\s\S]*?"
        elif len(token) == 1 and token in "0123456789":
            token = r"\d"
        elif re.search(r"\d", token.replace(r"\d", "")) and not _NOT_ITS_OWN_DIGITS.fullmatch(token):
            return None
        pieces.append(token)
    try:
        relaxed = re.compile("".join(pieces), regex.flags)
    except re.error:
        return None
    return relaxed if digit_blind(relaxed) else None


# an escape, a character class, a counted repeat, a named group or backreference, or one character
_TOKEN = re.compile(
    r"\\(?:x\w{2}|u\w{4}|U\w{8}|N\{[^}]*\}|\d+|.)|\[(?:\\.|[^\]])*\]|\{\d*(?:,\d*)?\}|\(\?P[<=]\w+[>)]|.",
    re.DOTALL,
)


MAX_SHAPES, MAX_SHAPE_CHARS = 4096, 2048  # a longer line is worked out each time


class ShapeCache(dict):
    """shape -> what was worked out for it; emptied when full."""

    def keep(self, shape, value):
        if len(shape) <= MAX_SHAPE_CHARS:
            if len(self) >= MAX_SHAPES:
                self.clear()
            self[shape] = value
        return value
