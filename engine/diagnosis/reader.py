"""Stream a log of any size and hand back only the lines worth a regex.

The log is read in chunks of whole lines. Each chunk is scanned once per anchor with `bytes.find`
(in C, about 1 GB/s); a hit counts only if one of the anchor's refinements (longer words that
contain it) surrounds it, when it has any. Only lines with a hit are decoded and cleaned.
Few coarse anchors keep the scan fast; refinements keep busy lines (request logs full of
`max_tokens=...`) away from the regexes. A hit brings its neighbours along (NEIGHBOURS lines on
each side, merged where they overlap), because a wrapped message has its numbers on other lines
than its anchor; normalize.py then joins them back. A line longer than LONG_LINE is cut to a window
around each hit, so a 10 MB line costs no more than a short one.
"""

import codecs
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import BinaryIO

from kvtool.engine.diagnosis.normalize import logical_lines

Anchors = dict[
    bytes, tuple[bytes, ...] | re.Pattern | None
]  # anchor -> refinements: longer words, each starting with the
#                                                 anchor, one of which must be found where it is; None: only
#                                                 its first hit in a chunk counts; a regex: matched
#                                                 where the anchor is

CHUNK_BYTES = 1 << 20
LONG_LINE = 16 << 10
WINDOW = 4 << 10
MAX_WINDOWS = 64  # per chunk, for lines longer than LONG_LINE
# a space, a line break and the next line's prefix, or a line break escaped in JSON
WRAP = rb"(?:[ \t]*\r?\n[^\n]{0,120}?\s|[ \t]*\\n\s*|\s+)"
NEIGHBOURS, NEIGHBOUR_BYTES = 12, 3 << 10  # lines (and at most this many bytes) kept on each side of a hit

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
    """Blocks of whole lines; a line with no end in sight is passed on in CHUNK_BYTES pieces."""
    carry = b""
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
        yield block[:cut]
    if carry:
        yield carry


def line_spans(chunk: bytes, anchors: Anchors) -> list[tuple[int, int]]:
    """(start, end) of every stretch of `chunk` around a line that holds an anchor and one of its
    refinements, merged, in order."""
    spans, windows = set(), 0
    for anchor, refinements in anchors.items():
        around = _refinements(anchor, refinements)
        hit = chunk.find(anchor)
        while hit >= 0:
            if around is not None and not around.match(chunk, hit):
                hit = chunk.find(anchor, hit + 1)
                continue
            start = chunk.rfind(b"\n", 0, hit) + 1
            end = chunk.find(b"\n", hit)
            end = len(chunk) if end < 0 else end
            if end - start > LONG_LINE:
                windows += 1
                if windows > MAX_WINDOWS:  # a line made of matches: enough has been seen
                    break
                start, end = max(start, hit - WINDOW), min(end, hit + WINDOW)
                spans.add((start, end, False))
            else:  # a sign of serving needs no neighbours
                spans.add((start, end, refinements is not None))
            hit = -1 if refinements is None else chunk.find(anchor, end + 1)
    return _merged(sorted(spans), chunk)


@lru_cache(maxsize=256)
def _refinements(anchor: bytes, refinements: tuple[bytes, ...] | None) -> re.Pattern | None:
    """One regex matched where the anchor was found; a space in a refinement matches any whitespace, or a
    line break followed by the next line's prefix (a wrapped line)."""
    if not refinements or isinstance(refinements, re.Pattern):
        return refinements or None
    return re.compile(b"|".join(re.escape(word).replace(b"\\ ", WRAP) for word in refinements))


def _with_neighbours(chunk: bytes, start: int, end: int) -> tuple[int, int]:
    low, high = max(0, start - NEIGHBOUR_BYTES), min(len(chunk), end + NEIGHBOUR_BYTES)
    for _ in range(NEIGHBOURS):
        if start <= low:
            break
        start = chunk.rfind(b"\n", low, start - 1) + 1 or low
    for _ in range(NEIGHBOURS):
        if end >= high:
            break
        found = chunk.find(b"\n", end + 1, high)
        end = high if found < 0 else found
    return start, end


def _merged(spans: list[tuple[int, int, bool]], chunk: bytes) -> list[tuple[int, int]]:
    """Overlapping or adjacent stretches as one, each widened by its neighbours once (hits are often dense)."""
    merged: list[list] = []
    for start, end, widen in spans:
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1], merged[-1][2] = max(end, merged[-1][1]), merged[-1][2] or widen
        else:
            merged.append([start, end, widen])
    widened = [_with_neighbours(chunk, start, end) if widen else (start, end) for start, end, widen in merged]
    out: list[tuple[int, int]] = []
    for start, end in widened:
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


@lru_cache(maxsize=4096)  # repeated lines are common: retry storms, periodic warnings
def clean(raw: bytes) -> tuple[str, ...]:
    """Decoded text without colours or carriage returns; one entry per \\r-piece."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_ESCAPE.sub("", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    pieces = (piece.rstrip() for piece in text.split("\r"))
    return tuple(piece for piece in pieces if piece)


def physical_lines(stream: BinaryIO, anchors: Anchors) -> Iterator[str]:
    """The cleaned lines of `stream` near one of `anchors`, in log order; an empty string between
    stretches that are not adjacent, so nothing is joined across a gap."""
    touching = False  # the last stretch ran to the end of its chunk
    for chunk in read_chunks(stream):
        for start, end in line_spans(chunk, anchors):
            if not (touching and start == 0):
                yield ""
            lines = chunk[start:end].split(b"\n")
            if len(lines) > 1 and not lines[-1]:
                lines.pop()
            for line in lines:
                yield from clean(line) or ("",)  # a blank line ends a paragraph
            touching = end >= len(chunk) - 1


def candidate_lines(stream: BinaryIO, anchors: Anchors) -> Iterator[tuple[str, str]]:
    """Logical lines (text, original) around every anchor of `stream`, normalised, in log order."""
    return logical_lines(physical_lines(stream, anchors))
