"""Undo what copying and pasting does to a log before any recogniser sees it.

A message reaches `kvtool diagnose` wrapped by a terminal, an e-mail client or an issue tracker,
behind log prefixes (timestamps, levels, `(APIServer pid=1)`, `[rank0]:`, Docker and Kubernetes
prefixes), quoted in Markdown, escaped inside a JSON string or a Python repr, or HTML-escaped.
`logical_lines` turns physical lines into logical ones: each piece of text stripped of what sits in
front of it, escapes undone, wrapped lines joined back with one space. The same text joined with
newlines is the original as pasted, kept for the evidence (both have the same length, so a match's
span is the same in both). Where a physical line's prefix ends and whether it opens a record is
worked out once per shape (shapes.py): lines that differ only in their numbers are cut alike.
"""

import html
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import chain

from kvtool.engine.diagnosis.shapes import ShapeCache, shape_of

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_STAMP = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
# Everything that can sit in front of a message, any number of times, in any order.
PREFIX = re.compile(
    r"^(?:"
    + "|".join(
        (
            r"\s+",
            r"[>▎▍▌│┃║]",  # Markdown quotes, chat quote bars, rich traceback frames
            r"\|(?=\s)",  # a table cell or a `docker compose` bar
            r"[-*•+]\s",  # list bullets
            r"```\w*|~~~\w*",  # code fences (alone on their line)
            r"\[rank\d+\]:",  # torch.distributed
            # (APIServer pid=1), (EngineCore_DP0 pid=7), (RayWorkerWrapper pid=5, ip=10.0.0.2)
            r"\([A-Za-z_][^()]{0,80}?\bpid=\d+[^()]{0,60}\)",
            r"\(pid=\d+[^()]{0,60}\)",
            _STAMP + r"(?:\s+-)?",  # docker --timestamps, kubectl --timestamps, Python's asctime
            r"\[pod/[^\]\s]{1,200}\]",  # kubectl logs --prefix
            # docker compose: `vllm-1  | ` (not a flag, nor a table's first cell: a row ends with its bar)
            r"(?!-)[\w.-]{1,60}\s{1,20}\|(?=\s(?!.*\|\s*$))",
            # vLLM: INFO 10-11 12:27:29 [x.py:157] (0.8 onwards), INFO 10-11 12:27:29 x.py:157] (before)
            _LEVEL + r"\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:\s+\[?[\w./-]+:\d+\])?",
            _LEVEL + r":(?:[\w.]{1,80}:)?(?=\s|\S)",  # Python's default format (ERROR:root:) and uvicorn (INFO:)
            r"(?:[\w.]{1,80}\s+-\s+)?" + _LEVEL + r"\s+-\s",  # asctime - name - LEVEL - message
            r'\{\s*"(?:log|message|msg|text)"\s*:\s*"',  # a JSON log record whose text comes first
        )
    )
    + r")+"
)
TRAILING_FRAME = re.compile(r"\s+[│┃║]\s*$")
FENCE = re.compile(r"^\s*(?:[>▎│|]\s*)*(?:```|~~~)[\w-]*\s*$")
# A line that opens a new record rather than continuing the previous one.
RECORD_START = re.compile(
    r"(?:Traceback \(|File \"|During handling|The above exception|[\w.]*(?:Error|Exception|Warning|Interrupt)\b"
    r"|" + _LEVEL + r"\b|[{}\[\]]|\"\s*[,}:]|\^|~~|raise\b|return\b|vllm:|# (?:HELP|TYPE))"
)
# Where a paste lost its line breaks: an HTML <br>, a process prefix glued to the text before it, a vLLM
# record (level, date, time) run into the end of the one before.
BREAKS = re.compile(
    r"<[bB][rR]\s*/?>"
    r"|(?<=\S)(?=\([A-Za-z_][^()\n]{0,80}?\bpid=\d+[^()\n]{0,60}\))"
    r"|(?<=[^\s)])\s?(?=" + _LEVEL + r"\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2})"
)
_BREAKS_IN_SHAPE = re.compile(BREAKS.pattern.encode())
_A_TIME = b"00-00 00:00:00"  # a vLLM record's date and time, masked
# the typographic quotes a web page or a chat client puts in place of the ASCII ones vLLM prints
QUOTES = str.maketrans("\u2018\u2019\u201a\u201b\u2032\u201c\u201d\u201e\u201f\u2033", "'''''" + '"' * 5)
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(.))", re.DOTALL)
_ESCAPED = {"n": "\n", "r": "\n", "t": " ", '"': '"', "'": "'", "\\": "\\", "/": "/"}
QUOTE_MARKS = ">▎▍▌│┃║|"
JOIN_MIN_CHARS = 30  # a wrapped line is at least this long (wrapping happens at 60 to 80 columns)
MAX_JOINED_LINES = 40
MAX_LOGICAL_CHARS = 16 << 10


@lru_cache(maxsize=8192)  # repeated lines: retry storms, a log pasted twice
def strip_prefix(line: str) -> tuple[str, str]:
    """(what sits in front of the message, the message)."""
    if not line:
        return "", ""
    match = PREFIX.match(line)
    prefix, content = (match.group(0), line[match.end() :]) if match else ("", line)
    if "│" in content or "┃" in content or "║" in content:
        content = TRAILING_FRAME.sub("", content)
    return prefix, content.rstrip()


def split_line(line: str) -> list[str]:
    """The lines a physical line holds: escapes undone (escaped line breaks become lines), and broken where the
    paste lost a line break."""
    return [piece for part in unescape(line) for piece in BREAKS.split(part)]


def unescape(line: str) -> list[str]:
    """The text inside JSON strings and Python reprs, HTML entities undone; `\\n` escapes become lines."""
    if "&" in line and ";" in line:
        line = html.unescape(line)
    if "\\" not in line:
        return [line]
    for _ in range(2):  # a JSON body quoted inside a JSON log line is escaped twice
        if not re.search(r"\\[nrt\"'\\u/]", line):
            break
        line = _ESCAPE.sub(_unescape_one, line)
    return line.split("\n")


def _unescape_one(match: re.Match) -> str:
    if match.group(1) or match.group(2):
        return chr(int(match.group(1) or match.group(2), 16))
    return _ESCAPED.get(match.group(3), match.group(0))


def logical_lines(stretches: Iterable[list[str]]) -> Iterator[tuple[str, str]]:
    """(text joined with spaces, the same joined with newlines) for each logical line of the stretches'
    physical lines, in order; their shapes are masked a stretch at a time."""
    return _joined(chain.from_iterable(zip(lines, shape_of("\n".join(lines)).split(b"\n")) for lines in stretches))


def _joined(lines: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, str]]:
    """Logical lines from (physical line, its shape). A physical line of a known layout is cut inline: this
    loop runs for every line of a dense log."""
    pieces: list[str] = []
    last_prefix, last_length, last_indent = "", 0, 0  # the previous part's
    layouts = _LAYOUTS
    for line, shape in lines:
        layout = layouts.get(shape, False)
        if layout is False:
            layout = _new_layout(shape)
        if layout is None:  # escaped, or a line break lost: several parts
            parts = map(_part, split_line(line))
        else:
            cut, end, indent, opens = layout
            parts = ((line[:cut], line[cut:end], indent, opens),)
        for prefix, content, indent, opens in parts:
            if (
                pieces
                and content
                and not opens
                and last_length >= JOIN_MIN_CHARS
                and (prefix == last_prefix or _continues(last_prefix, last_indent, prefix, indent))
                and len(pieces) < MAX_JOINED_LINES
            ):
                pieces.append(content)
            else:
                if pieces:
                    yield _flushed(pieces)
                if content:
                    pieces.append(content)
            last_prefix, last_length, last_indent = prefix, len(content), indent
    if pieces:
        yield _flushed(pieces)


Part = tuple[str, str, int, bool]  # (prefix, content, the prefix's indent, whether content opens a record)
# shape (UTF-8, decoded only when first seen) -> (prefix end, content end, indent, opens a record), or None: escaped
_LAYOUTS = ShapeCache()
# PREFIX, TRAILING_FRAME, FENCE and RECORD_START are digit-blind: a line is laid out as its shape is.


def _new_layout(shape: bytes) -> tuple[int, int, int, bool] | None:
    """How lines of this shape are cut, kept for the next; None where a line must be split first (escapes, HTML,
    a lost line break)."""
    escaped = b"\\" in shape or (b"&" in shape and b";" in shape) or _lost_break(shape)
    return _LAYOUTS.keep(shape, None if escaped else _layout(_part(shape.decode("utf-8", "surrogatepass"))))


def _lost_break(shape: bytes) -> bool:
    """Whether a line of this shape holds a lost line break (the regex runs only where its signs are: lines may be
    windows of 8 KiB and more)."""
    signs = b"<" in shape or b"pid=" in shape or _A_TIME in shape
    return bool(signs and _BREAKS_IN_SHAPE.search(shape))


def _part(part: str) -> Part:
    fence = ("```" in part or "~~~" in part) and FENCE.match(part)
    prefix, content = ("", "") if fence else strip_prefix(part)
    return prefix, content, _indent(prefix), bool(RECORD_START.match(content))


def _layout(part: Part) -> tuple[int, int, int, bool]:
    prefix, content, indent, opens = part
    return len(prefix), len(prefix) + len(content), indent, opens


def _continues(last_prefix: str, last_indent: int, prefix: str, indent: int) -> bool:
    """Whether a part that opens no record, after a long enough one with another prefix (the same prefix, its quote
    marks, log prefix and indent, continues it), is the wrapped rest of it."""
    quote, record = _quote_and_record(prefix)
    last_quote, last_record = _quote_and_record(last_prefix)
    if quote != last_quote or (record and record != last_record):
        return False  # a new log record (a prefix that is not the one before)
    return indent <= last_indent  # traceback frames and code are indented under their record


def _indent(prefix: str) -> int:
    return len(prefix) - len(prefix.rstrip())


@lru_cache(maxsize=1024)
def _quote_and_record(prefix: str) -> tuple[str, str]:
    """(the quote marks, the log prefix) without whitespace: a wrapped line repeats the quote marks and
    either repeats the log prefix or has none."""
    bare = "".join(prefix.split())
    record = bare.lstrip(QUOTE_MARKS)
    return bare[: len(bare) - len(record)], record


def _flushed(pieces: list[str]) -> tuple[str, str]:
    if len(pieces) == 1:  # most records fit one line
        original = text = pieces.pop()[:MAX_LOGICAL_CHARS]
    else:
        original = "\n".join(pieces)[:MAX_LOGICAL_CHARS]
        pieces.clear()
        text = original.replace("\n", " ")
    return (text if text.isascii() else text.translate(QUOTES)), original
