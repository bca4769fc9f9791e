"""A pasted vLLM log as log records: colours and Windows line ends gone, hard wraps joined back.

vLLM writes every line of a record with its prefix: `LEVEL MM-DD HH:MM:SS file.py:N]` (0.2 - 0.7),
`LEVEL MM-DD HH:MM:SS [file.py:N]` (0.8+), behind the process that wrote it, `(VllmWorkerProcess pid=N)`
(V0 workers, 0.4 - 0.10), `(VllmWorker rank=N pid=N)` (0.7 - 0.10.0), `(VllmWorker TP1 pid=N)` (0.10.1),
`(Worker_TP1 pid=N)`, `(Worker_PP1_TP0 pid=N)` (0.11+), `(EngineCore_DP0 pid=N)`, `(APIServer pid=N)`, Ray's
`(RayWorkerWrapper pid=N, ip=A)`. Multi-line messages repeat the prefix on each line (NewLineFormatter), so a
line without one is the rest of the line above it, cut by whoever pasted it: it is joined back as it was.
"""

import re
from dataclasses import dataclass

WRAP_WIDTH_MIN = 60  # a shorter line ended where its writer ended it, not at a paste's wrap (80, 120, 140)
_ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[A-Za-z]")
_ANSI_WITHOUT_ESCAPE = re.compile(r"\[[0-9]{1,3}(?:;[0-9]{1,3})*m")  # a paste that dropped the escape character
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
RECORD_START = re.compile(
    r"\s*(?:\(\w[^()\n]*\bpid=\d+[^()\n]*\)"  # a process prefix
    rf"|.{{0,120}}?\b{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d"  # vLLM's own format, behind any other prefix
    r"|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d"  # a timestamp added by docker, kubectl or a notebook
    rf"|{_LEVEL}:"  # uvicorn
    r"|\[rank\d+\]:"  # torch.distributed's prefix on a rank's traceback
    r"|Traceback \(most recent call last\)|[\w.]*(?:Error|Exception):)"
)
VLLM_PREFIX = re.compile(rf"\b{_LEVEL} \d\d-\d\d \d\d:\d\d:\d\d \[?[\w.]+\.py:\d+\]")
_RAY_REPEATS = re.compile(r"\[repeated(\d+)xacrosscluster\]")


@dataclass(frozen=True)
class LogRecord:
    text: str  # the record as vLLM wrote it, wraps joined
    compact: str  # the same without any whitespace, which a paste may have added or lost at a wrap
    repeats: int  # Ray prints one line for N identical ones: "[repeated Nx across cluster]"


def log_records(text: str) -> list[LogRecord]:
    """The records of a pasted log, in the order pasted."""
    text = _without_colours(text).replace("\r\n", "\n").replace("\r", "\n")
    records = []
    lines: list[str] = []
    for line in text.split("\n"):
        if lines and len(lines[-1]) >= WRAP_WIDTH_MIN and line.strip() and not RECORD_START.match(line):
            lines.append(line)  # a hard wrap: the rest of the line above
            continue
        if lines:
            records.append(_record("".join(lines)))
        lines = [line] if line.strip() else []
    if lines:
        records.append(_record("".join(lines)))
    return records


def _without_colours(text: str) -> str:
    if "\x1b" in text or "^[" in text:
        text = _ANSI.sub("", text)
    return _ANSI_WITHOUT_ESCAPE.sub("", text) if "[0m" in text or "[0;0m" in text else text


def _record(text: str) -> LogRecord:
    if "\x1b" in text:
        text = _ANSI.sub("", text).replace("\x1b", "")  # a colour code cut in two by a wrap
    compact = "".join(text.split())
    repeats = _RAY_REPEATS.search(compact) if "[repeated" in text else None
    return LogRecord(text, compact, int(repeats[1]) if repeats else 1)
