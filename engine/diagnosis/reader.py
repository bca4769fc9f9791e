"""Stream a log of any size and hand back only the lines worth a regex.

The log is read in chunks of whole lines. Each chunk is scanned once per anchor with `bytes.find`
(in C, about 1 GB/s); a hit counts only if one of the anchor's refinements (longer words that
contain it) surrounds it, when it has any. Only lines with a hit are decoded and cleaned.
Few coarse anchors keep the scan fast; refinements keep busy lines (request logs full of
`max_tokens=...`) away from the regexes. A line longer than LONG_LINE is cut to a window around
each hit, so a 10 MB line costs no more than a short one.
"""

import codecs
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import BinaryIO

Anchors = dict[bytes, tuple[bytes, ...]]  # anchor -> refinements: longer words, each containing the anchor,
#                                          one of which must surround the hit

CHUNK_BYTES = 1 << 20
LONG_LINE = 16 << 10
WINDOW = 4 << 10
MAX_WINDOWS = 64  # per chunk, for lines longer than LONG_LINE

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# "(VllmWorker rank=0 pid=123) ", "(EngineCore_0 pid=77) ", "(RayWorkerWrapper pid=5, ip=10.0.0.2) "
WORKER_PREFIX = re.compile(r"^\s*\([A-Za-z_][^()]{0,80}?\bpid=\d+[^()]{0,60}\)\s*")


def utf8_blocks(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's bytes, re-encoded to UTF-8 when it starts with a UTF-16 byte-order mark
    (what PowerShell's `>` writes)."""
    first = stream.read(CHUNK_BYTES)
    if not first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        yield first
        yield from iter(lambda: stream.read(CHUNK_BYTES), b"")
        return
    decoder = codecs.getincrementaldecoder("utf-16")("replace")
    while first:
        yield decoder.decode(first).encode("utf-8", "surrogatepass")
        first = stream.read(CHUNK_BYTES)
    yield decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")


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
    """(start, end) of every line in `chunk` that holds an anchor and one of its refinements, in order."""
    spans, windows = set(), 0
    for anchor, refinements in anchors.items():
        around = _by_offset(anchor, refinements)
        hit = chunk.find(anchor)
        while hit >= 0:
            if around and not _surrounded(chunk, hit, around):
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
            hit = chunk.find(anchor, end + 1)
            spans.add((start, end))
    return sorted(spans)


def _surrounded(chunk: bytes, hit: int, around: list[tuple[int, tuple[bytes, ...]]]) -> bool:
    for offset, words in around:
        if chunk.startswith(words, hit - offset):
            return True
    return False


def _by_offset(anchor: bytes, refinements: tuple[bytes, ...]) -> list[tuple[int, tuple[bytes, ...]]]:
    """Refinements grouped by where the anchor sits inside them, so one `startswith` checks a group."""
    groups: dict[int, list[bytes]] = {}
    for word in refinements:
        groups.setdefault(word.index(anchor), []).append(word)
    return [(offset, tuple(words)) for offset, words in groups.items()]


@lru_cache(maxsize=4096)  # repeated lines are common: retry storms, periodic warnings
def clean(raw: bytes) -> tuple[str, ...]:
    """Decoded text without colours, worker prefixes or carriage returns; one entry per \\r-piece."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_ESCAPE.sub("", text)
    pieces = (WORKER_PREFIX.sub("", piece).strip() for piece in text.split("\r"))
    return tuple(piece for piece in pieces if piece)


def candidate_lines(stream: BinaryIO, anchors: Anchors) -> Iterator[str]:
    """The cleaned lines of `stream` that mention one of `anchors`, in log order."""
    for chunk in read_chunks(stream):
        for start, end in line_spans(chunk, anchors):
            yield from clean(chunk[start:end])
