"""Whether a CUDA out-of-memory error happened at start-up or while serving, read from what
surrounds it: the traceback's frames, the log lines before it, and what follows it.

Function names by vLLM release (v0 is 0.2 to 0.10.2, v1 is 0.6.4 to 0.33):
- weight loading: `load_model`, `load_weights`, "Starting to load model"
- memory profiling: `profile_num_available_blocks` (0.2 to 0.4.0), `determine_num_available_blocks` (v0),
  `determine_available_memory` (v1), `profile_run` (both; v0's profile_run calls execute_model)
- KV cache allocation: `_init_cache` (0.2 to 0.3), `initialize_cache`, `_allocate_kv_cache`,
  `initialize_kv_cache`, `_initialize_kv_caches` (v1)
- CUDA graph capture: `capture_model`, "Capturing CUDA graph", "Graph capturing"
- sampler or pooler warm-up: `_dummy_sampler_run`, `_dummy_pooler_run` (0.8 onwards)
- run time: `LLMEngine.step` and `EngineCore.step` ("in step"), `execute_model`, `sample_tokens`,
  `AsyncLLM.output_handler`, "EngineCore encountered a fatal error" (0.8.5 onwards)
A start-up frame decides over a run-time one in the same traceback (v0 profiles through execute_model).
"""

import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from kvtool.engine.diagnosis.shapes import masked

STARTUP_MARKERS = (  # (marker, phase), the most specific first
    ("_dummy_sampler_run", "sampler warm-up"),
    ("warming up sampler", "sampler warm-up"),
    ("_dummy_pooler_run", "pooler warm-up"),
    ("warming up pooler", "pooler warm-up"),
    ("capture_model", "CUDA graph capture"),
    ("apturing CUDA graph", "CUDA graph capture"),
    ("Graph capturing", "CUDA graph capture"),
    ("CUDA graph capture", "CUDA graph capture"),  # as people describe it next to a quoted error
    ("_allocate_kv_cache", "KV cache allocation"),
    ("initialize_kv_cache", "KV cache allocation"),
    ("_init_cache", "KV cache allocation"),
    ("initialize_cache", "KV cache allocation"),
    ("profile_run", "memory profiling"),
    ("determine_available_memory", "memory profiling"),
    ("determine_num_available_blocks", "memory profiling"),
    ("profile_num_available_blocks", "memory profiling"),
    ("Memory profiling takes", "memory profiling"),
    ("load_model", "weight loading"),
    ("load_weights", "weight loading"),
    ("Starting to load model", "weight loading"),
    ("_initialize_kv_caches", "start-up"),
    ("Engine core initialization failed", "start-up"),
    ("EngineCore failed to start", "start-up"),
)
RUNTIME_MARKERS = (
    "in step",
    "in execute_model",
    "in sample_tokens",
    "in step_with_batch_queue",
    "output_handler",
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "AsyncEngineDeadError",
)
SERVED_MARKERS = (
    "Application startup complete",
    "Uvicorn running on",
    "Starting vLLM API server",
    "Avg prompt throughput",
    "POST /v1/",
    "Received request",
    "Added request",
)
CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
TRACEBACK = "Traceback (most recent call last)"
LOOK_BACK, LOOK_AHEAD = 80, 30  # lines
_PHASES = dict(STARTUP_MARKERS)
_CHAINS, _SERVED, _RUNTIME = set(CHAIN_MARKERS), set(SERVED_MARKERS), set(RUNTIME_MARKERS)
_ANY_MARKER = re.compile("|".join(re.escape(m) for m in (*_PHASES, *RUNTIME_MARKERS, *SERVED_MARKERS, *CHAIN_MARKERS)))
# A shape masks their digit: the line itself says whether it holds one (no other marker can overlap them).
_DIGIT_SERVED = tuple(marker for marker in SERVED_MARKERS if re.search(r"\d", marker))
_MASKED_SERVED = tuple(map(masked, _DIGIT_SERVED))
Markers = tuple[tuple[str, str | None] | None, bool, bool | None, bool]


def shape_markers(shape: str) -> Markers:
    """What every line of this shape marks: (the frame kind and phase, whether it chains exceptions, whether
    it shows serving, whether it opens a traceback); "shows serving" is None where only the line can say."""
    marker, chained, served = _read_markers(shape)
    if not served and any(m in shape for m in _MASKED_SERVED):
        served = None
    return marker, chained, served, shape.startswith(TRACEBACK)


@lru_cache(maxsize=4096)  # tracebacks and retry storms repeat the same lines
def _read_markers(line: str) -> tuple[tuple[str, str | None] | None, bool, bool]:
    """(the frame kind and phase the line marks, if any; whether it chains exceptions; whether it shows serving)."""
    found = {match.group(0) for match in _ANY_MARKER.finditer(line)}
    if not found:
        return None, False, False
    return _marker(found), bool(found & _CHAINS), bool(found & _SERVED)


def _marker(found: set[str]) -> tuple[str, str | None] | None:
    for marker, phase in STARTUP_MARKERS:  # the most specific first
        if marker in found:
            return "startup", phase
    if found & _RUNTIME:
        return "runtime", None
    return None


@dataclass
class Stage:
    stage: str  # "startup" | "runtime"
    phase: str | None
    evidence: str  # the line that decided it ("" when nothing did)


class StageTracker:
    """Fed every logical line in order; says where an out-of-memory error belongs."""

    def __init__(self):
        # (line, kind, phase, text) in this traceback, only those an error still waiting could look back at
        self.frames: deque[tuple[int, str, str | None, str]] = deque()
        self.served: tuple[int, str] | None = None  # (line, text) of the first sign the server was serving
        self.index = 0
        self._chained = False

    def feed(self, line: str, markers: Markers | None = None) -> None:
        """`markers`: shape_markers of the line's shape, where the caller has them."""
        self.index += 1
        marker, chained, served, opens = markers or shape_markers(masked(line))
        if opens and not self._chained:
            self.frames.clear()
        self._chained = chained
        if marker:
            self.frames.append((self.index, *marker, line))
        while self.frames and self.frames[0][0] < self.index - LOOK_AHEAD - LOOK_BACK:
            self.frames.popleft()  # a dense log holds thousands of frames: keep the search short
        if self.served is None and (served or served is None and any(m in line for m in _DIGIT_SERVED)):
            self.served = (self.index, line)

    def decide(self, at: int) -> Stage:
        """The stage of an error read at line `at`, from the lines seen up to now."""
        served_at = self.served[0] if self.served and self.served[0] <= at else None
        before = [f for f in self.frames if max(at - LOOK_BACK, served_at or 0) <= f[0] < at]
        after = [f for f in self.frames if at <= f[0] <= at + LOOK_AHEAD]  # from the error's own line on
        for frames in (before, after):
            startup = [f for f in frames if f[1] == "startup"]
            if startup:
                specific = [f for f in startup if f[2] != "start-up"] or startup
                chosen = specific[-1] if frames is before else specific[0]
                return Stage("startup", None if chosen[2] == "start-up" else chosen[2], chosen[3])
            if runtime := [f for f in frames if f[1] == "runtime"]:
                return Stage("runtime", None, runtime[-1][3])
        if served_at is not None:
            return Stage("runtime", None, self.served[1])
        return Stage("startup", None, "")
