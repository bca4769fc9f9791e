"""Stream a log of any size and hand back only the lines worth a regex.

The log is read in chunks of whole lines. Each chunk is scanned once per anchor with `bytes.find`
(fast, in C); only the lines that hold an anchor are decoded and cleaned. A line longer than
LONG_LINE is cut to a window around each hit, so a 10 MB line costs no more than a short one.
"""

import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO

CHUNK_BYTES = 1 << 20
LONG_LINE = 16 << 10
WINDOW = 4 << 10

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# "(VllmWorker rank=0 pid=123) ", "(EngineCore_0 pid=77) ", "(RayWorkerWrapper pid=5, ip=10.0.0.2) "
WORKER_PREFIX = re.compile(r"^\s*\([A-Za-z_][^()]{0,80}?\bpid=\d+[^()]{0,60}\)\s*")


def read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    """Blocks of whole lines; a line with no end in sight is passed on in CHUNK_BYTES pieces."""
    carry = b""
    while block := stream.read(CHUNK_BYTES):
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


def line_spans(chunk: bytes, anchors: Iterable[bytes]) -> list[tuple[int, int]]:
    """(start, end) of every line in `chunk` that holds an anchor, in order."""
    spans = set()
    for anchor in anchors:
        hit = chunk.find(anchor)
        while hit >= 0:
            start = chunk.rfind(b"\n", 0, hit) + 1
            end = chunk.find(b"\n", hit)
            end = len(chunk) if end < 0 else end
            if end - start > LONG_LINE:
                start, end = max(start, hit - WINDOW), min(end, hit + WINDOW)
                hit = chunk.find(anchor, hit + len(anchor))
            else:
                hit = chunk.find(anchor, end + 1)
            spans.add((start, end))
    return sorted(spans)


def clean(raw: bytes) -> list[str]:
    """Decoded text without colours, worker prefixes or carriage returns; one entry per \\r-piece."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_ESCAPE.sub("", text)
    pieces = (WORKER_PREFIX.sub("", piece).strip() for piece in text.split("\r"))
    return [piece for piece in pieces if piece]


def candidate_lines(stream: BinaryIO, anchors: tuple[bytes, ...]) -> Iterator[str]:
    """The cleaned lines of `stream` that mention one of `anchors`, in log order."""
    for chunk in read_chunks(stream):
        for start, end in line_spans(chunk, anchors):
            yield from clean(chunk[start:end])
