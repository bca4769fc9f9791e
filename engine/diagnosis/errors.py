"""The errors a paste shows, for the rule that an error outranks a symptom (docs/diagnose.md, "An error outranks
a symptom").

Three findings are read from symptoms, not from an error: preemption and a full KV cache (stats lines, /metrics,
vLLM's preemption warning) and a default output cap (answers cut short, code or requests without max_tokens).
People paste whole server logs and their scripts, so such symptoms sit beside failures of every other kind.
Where the paste shows an error and no memory or length failure is found, that error is what the paste is about,
and the symptoms are not reported; unless every error there is one the symptom itself causes (a client's
timeout or a dropped connection under preemption, a JSON parser failing on a cut answer): then the paste is
about the symptom.
"""

import re

from kvtool.engine.diagnosis.findings import MEMORY_AND_LENGTH_CATEGORIES, Finding
from kvtool.engine.diagnosis.reader import DETAIL_LINES, LONE

# lines that may be errors, read with their detail lines only (nearly every exception's name ends so, and so do
# vLLM's, NCCL's, CUDA's, uvicorn's and the OpenAI client's words for one; a bare "Exception:" is read where a
# traceback's frames bring it)
ANCHORS = {b"rror": LONE}
ERROR = re.compile(  # digit-blind: read on a line's shape
    r"\b[A-Z]\w*(?:Error|Exception)(?:\[\w+\])?:(?:\s|$)|\bException:"
    r"|\bError code: \d{3}\b|\bAPI Error: \d{3}\b|['\"]object['\"]:\s*['\"]error['\"]|\{\s*['\"]error['\"]\s*:\s*\{"
    r"|\b(?:NCCL|CUDA|CUBLAS|cuDNN|HIP) error\b|\[Errno \d+\]|^Error \d+:|\bError (?:in|while|during) [a-z]"
    r"|error while attempting to bind|\bSegmentation fault\b"
)
_GATES = ("rror", "xception", "Errno", "Segmentation")  # one of which every error line holds
# what a request or a reply carries (a prompt about code quotes errors; a cut answer may hold any text)
NOT_ERRORS = re.compile(r"Received request|\bprompt: |['\"](?:role|prompt|messages|choices|finish_reason)['\"]")
SYMPTOMS = {"preemption": "pressure", "kv_cache_near_full": "pressure", "max_tokens_default_truncation": "cap"}
CONSEQUENCES = {  # errors a symptom causes
    "pressure": re.compile(
        r"Timeout|[Tt]imed? ?out|ServerDisconnected|RemoteProtocolError|Connection(?:Reset|Aborted)Error"
        r"|Service Unavailable|Too Many Requests"
    ),
    "cap": re.compile(r"JSONDecodeError|Unterminated string|EOF while parsing|json_invalid|Invalid JSON"),
}


def kinds(shape: str) -> tuple[bool, frozenset[str]]:
    """(whether a line of this shape is an error, the symptoms whose consequence it names)."""
    named = frozenset(kind for kind, pattern in CONSEQUENCES.items() if pattern.search(shape))
    error = any(gate in shape for gate in _GATES) and bool(ERROR.search(shape)) and not NOT_ERRORS.search(shape)
    return error, named


class ErrorLines:
    """The paste's error lines no recogniser read, by the symptoms each is a consequence of (its own words or
    its detail lines'), the first line of each kind kept."""

    def __init__(self):
        self.found: dict[frozenset[str], str] = {}
        self._open: tuple[int, str, frozenset[str]] | None = None  # an error whose detail lines may follow

    def feed(self, index: int, line: str, error: bool, named: frozenset[str]) -> None:
        if self._open and index - self._open[0] > DETAIL_LINES:
            self._close()
        if self._open and named:
            self._open = (self._open[0], self._open[1], self._open[2] | named)
        if error:
            self._close()
            self._open = (index, line, named)

    def finish(self) -> dict[frozenset[str], str]:
        self._close()
        return self.found

    def _close(self) -> None:
        if self._open:
            self.found.setdefault(self._open[2], self._open[1])
            self._open = None


def _failure_first(findings: list[Finding]) -> list[Finding]:
    """The findings in the paste's order, but a memory or length failure first where a symptom came before it."""
    failure = next(f for f in findings if f.category in MEMORY_AND_LENGTH_CATEGORIES and f.category not in SYMPTOMS)
    return [failure, *(f for f in findings if f is not failure)]


def outranked(findings: list[Finding], errors: dict[frozenset[str], str]) -> list[Finding]:
    """The findings without the symptoms an error outranks: `errors` maps the consequence kinds of the paste's
    error lines to the first such line. A memory or length failure found keeps them all: the paste is about
    memory, and its other errors (vLLM's wrappers of it, say) follow from it."""
    if any(f.category in MEMORY_AND_LENGTH_CATEGORIES and f.category not in SYMPTOMS for f in findings):
        return _failure_first(findings)
    return [f for f in findings if f.category not in SYMPTOMS or all(SYMPTOMS[f.category] in kinds for kinds in errors)]
