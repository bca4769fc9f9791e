"""Stream a log of any size and hand back only the lines worth a regex.

The log is read in chunks of whole lines. Each chunk is scanned once per anchor with `bytes.find`
(in C, about 1 GB/s), or until its stretches keep every line (line_spans); a hit counts only if one
of the anchor's refinements (longer words that contain it) surrounds it, when it has any. Only the
stretches around hits are decoded and cleaned, each at once. Few coarse anchors keep the scan fast;
refinements keep busy lines (request logs full of `max_tokens=...`) away from the regexes. A hit
brings its neighbours along (NEIGHBOURS lines on each side, merged where they overlap: widening.py),
because a wrapped message has its numbers on other lines than its anchor; normalize.py then joins
them back.
A line longer than LONG_LINE is cut to a window around each hit, so a 10 MB line costs no more than
a short one.
"""

import codecs
import io
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import BinaryIO

from kvtool.engine.diagnosis.normalize import logical_lines
from kvtool.engine.diagnosis.unwrap import undoubled, unwrapped
from kvtool.engine.diagnosis.widening import NEIGHBOUR_BYTES, keeps_every_line, merged


class Lone:
    """An anchor's mark: every hit of it is kept with DETAIL_LINES lines after it only (an error line and its
    detail: pydantic's lines under "1 validation error for ..."), not widened."""


LONE = Lone()
# anchor -> refinements: longer words, each starting with the anchor, one of which must be found where it is;
# None: only its first hit in a chunk counts; a regex: matched where the anchor is; LONE: every hit, alone
Anchors = dict[bytes, tuple[bytes, ...] | re.Pattern | Lone | None]

CHUNK_BYTES = 1 << 20
PASTE_BYTES = 1 << 20  # an input this small is a paste: read whole, every line
LONG_LINE = 16 << 10
WINDOW = 4 << 10
MAX_WINDOWS = 64  # per chunk, for lines longer than LONG_LINE
DETAIL_LINES = 2
# a space, a line break and the next line's prefix, or a line break escaped in JSON
WRAP = rb"(?:[ \t]*\r?\n[^\n]{0,120}?\s|[ \t]*\\n\s*|\s+)"

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def utf8_blocks(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's bytes, re-encoded to UTF-8 when it starts with a UTF-16 byte-order mark
    (what PowerShell's `>` writes)."""
    first = stream.read(CHUNK_BYTES)
    if not _utf16(first):
        yield first
        yield from iter(lambda: stream.read(CHUNK_BYTES), b"")
        return
    decoder = codecs.getincrementaldecoder("utf-16")("replace")
    while first:
        yield decoder.decode(first).encode("utf-8", "surrogatepass")
        first = stream.read(CHUNK_BYTES)
    yield decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")


def _utf16(block: bytes) -> bool:
    """A UTF-16 byte-order mark followed by text that looks like UTF-16 (every other byte NUL, for the Latin
    script of logs); invalid UTF-8 may start with the same two bytes."""
    sample = block[2:258]
    return block.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and sample.count(0) * 4 >= len(sample)


def read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    """Blocks of whole lines; a line with no end in sight is passed on in CHUNK_BYTES pieces. The last line,
    where nothing ends it, goes with the block before it (a paste is one stretch)."""
    carry = pending = b""
    for block in utf8_blocks(stream):
        if not block:
            continue
        block = carry + block
        cut = block.rfind(b"\n") + 1
        if cut == 0 and len(block) < CHUNK_BYTES:
            carry = block
            continue
        cut = cut or len(block)
        carry = block[cut:]
        if pending:
            yield pending
        pending = block[:cut]
    if pending or carry:
        yield pending + carry


def line_spans(chunk: bytes, anchors: Anchors) -> list[tuple[int, int]]:
    """(start, end) of every stretch of `chunk` around a line that holds an anchor and one of its
    refinements, merged, in order.

    In a chunk with no line longer than LONG_LINE (no window is cut) the order of the anchors does not
    matter: the serving signs go first, then once the stretches so far surely keep every line of the chunk
    (keeps_every_line: a test that may say no where they do, never yes where they do not), the other
    anchors are not searched for. Their hits could only add widened short lines, and a widened line
    reaches back at least as far as any widened line after it, so no line can be dropped."""
    short = not _may_hold_long_line(chunk)
    spans, windows, check_at = set(), 0, max(1, len(chunk) // (2 * NEIGHBOUR_BYTES))
    order = sorted(anchors.items(), key=lambda item: item[1] is not None) if short else anchors.items()
    for anchor, refinements in order:
        windows = _add_hits(spans, chunk, anchor, refinements, windows)
        if short and refinements is not None and len(spans) >= check_at:
            if keeps_every_line(spans, chunk):
                return [(0, len(chunk))]
            check_at = 2 * len(spans)  # the checks cost at most twice the last
    return merged(sorted(spans), chunk)


def _may_hold_long_line(chunk: bytes) -> bool:
    """Whether some line may be longer than LONG_LINE: such a line spans a whole block of half that."""
    block = LONG_LINE // 2
    return any(chunk.find(b"\n", start, start + block) < 0 for start in range(0, len(chunk) - block + 1, block))


def _add_hits(spans: set, chunk: bytes, anchor: bytes, refinements, windows: int) -> int:
    """Add the stretch of each hit of `anchor` to `spans`; returns the windows cut from long lines so far."""
    around = None if refinements is LONE else _refinements(anchor, refinements)
    widen = refinements is not None and refinements is not LONE
    hit = _next_hit(chunk, anchor, around, 0)
    while hit >= 0:
        start = chunk.rfind(b"\n", 0, hit) + 1
        end = chunk.find(b"\n", hit)
        end = len(chunk) if end < 0 else end
        if end - start > LONG_LINE:
            windows += 1
            if windows > MAX_WINDOWS:  # a line made of matches: enough has been seen
                break
            start, end = max(start, hit - WINDOW), min(end, hit + WINDOW)
            spans.add((start, end, False))
        else:  # a sign of serving needs no neighbours, an error line only its detail
            if refinements is LONE:
                end = _lines_on(chunk, end, DETAIL_LINES)
            spans.add((start, end, widen))
        hit = -1 if refinements is None else _next_hit(chunk, anchor, around, end + 1)
    return windows


def _lines_on(chunk: bytes, end: int, lines: int) -> int:
    """The end of the line `lines` lines after the one that ends at `end` (or of the chunk), within LONG_LINE."""
    for _ in range(lines):
        found = chunk.find(b"\n", end + 1, end + 1 + LONG_LINE)
        if found < 0:
            return end if end + 1 + LONG_LINE < len(chunk) else len(chunk)
        end = found
    return end


def _next_hit(chunk: bytes, anchor: bytes, around: re.Pattern | None, start: int) -> int:
    """Where the next anchor with one of its refinements (which all start with it) is, or -1."""
    if around is None:
        return chunk.find(anchor, start)
    match = around.search(chunk, start)
    return match.start() if match else -1


@lru_cache(maxsize=256)
def _refinements(anchor: bytes, refinements: tuple[bytes, ...] | None) -> re.Pattern | None:
    """One regex matched where the anchor was found; a space in a refinement matches any whitespace, or a
    line break followed by the next line's prefix (a wrapped line)."""
    if not refinements or isinstance(refinements, re.Pattern):
        return refinements or None
    return re.compile(b"|".join(re.escape(word).replace(b"\\ ", WRAP) for word in refinements))


def _decoded(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_ESCAPE.sub("", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text


def _pieces(line: str) -> tuple[str, ...]:
    pieces = (piece.rstrip() for piece in line.split("\r"))
    return tuple(piece for piece in pieces if piece)


def clean(raw: bytes) -> list[str]:
    """The cleaned lines of a stretch, decoded at once (no escape sequence or invalid UTF-8 spans a line
    break), double spacing and hard wraps undone (unwrap.py); a line that cleans to nothing is a blank line,
    which ends a paragraph. Trailing whitespace stays: normalize cuts each line's content without it."""
    text = undoubled(_decoded(raw))
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    lines = unwrapped(lines)
    if "\r" not in text:
        return lines
    return [piece for line in lines for piece in _pieces(line) or ("",)]


class Pasted:
    """A stream whose first PASTE_BYTES (and one more) were read to tell a paste from a machine's log."""

    def __init__(self, stream: BinaryIO):
        self._head, self._stream = stream.read(PASTE_BYTES + 1), stream
        self.whole = len(self._head) <= PASTE_BYTES

    def lines(self) -> list[str]:
        """The whole paste's cleaned physical lines (before any is read)."""
        return clean(b"".join(utf8_blocks(io.BytesIO(self._head)))) if self.whole else []

    def read(self, size: int) -> bytes:
        if self._head:
            out, self._head = self._head[:size], self._head[size:]
            return out
        return b"" if self.whole else self._stream.read(size)


def stretches(stream: BinaryIO, anchors: Anchors, first: Anchors | None = None) -> Iterator[list[str]]:
    """The cleaned lines of each stretch of `stream` near one of `anchors` (in the first chunk, of `first` too),
    in log order; one that does not continue the stretch before it starts with an empty line, so nothing is
    joined across a gap. A paste (Pasted.whole) is one stretch."""
    if isinstance(stream, Pasted) and stream.whole:
        whole = b"".join(read_chunks(stream))
        yield clean(whole) if whole else []
        return
    touching = False  # the last stretch ran to the end of its chunk
    in_first = {**anchors, **first} if first else anchors
    for index, chunk in enumerate(read_chunks(stream)):
        for start, end in line_spans(chunk, anchors if index else in_first):
            lines = clean(chunk[start:end])
            yield lines if touching and start == 0 else ["", *lines]
            touching = end >= len(chunk) - 1


def candidate_lines(stream: BinaryIO, anchors: Anchors, first: Anchors | None = None) -> Iterator[tuple[str, str]]:
    """Logical lines (text, original) around every anchor of `stream` (and of `first` in its first chunk),
    normalised, in log order."""
    return logical_lines(stretches(stream, anchors, first))
