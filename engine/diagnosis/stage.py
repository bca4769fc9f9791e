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
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from operator import itemgetter

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
_LINE = itemgetter(0)  # a frame's line


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
        # kind -> (line, phase, text) of the frames of that kind in this traceback, in order
        self.frames: dict[str, deque[tuple[int, str | None, str]]] = {"startup": deque(), "runtime": deque()}
        self.served: tuple[int, str] | None = None  # (line, text) of the first sign the server was serving
        self.index = 0
        self._chained = False

    def feed(self, line: str, markers: Markers | None = None) -> None:
        """`markers`: shape_markers of the line's shape, where the caller has them."""
        self.index += 1
        marker, chained, served, opens = markers or shape_markers(masked(line))
        if opens and not self._chained:
            for frames in self.frames.values():
                frames.clear()
        self._chained = chained
        if marker:
            frames = self.frames[marker[0]]
            frames.append((self.index, marker[1], line))
            while frames[0][0] < self.index - LOOK_AHEAD - LOOK_BACK:
                frames.popleft()  # a dense log holds thousands of frames: only keep those an error can look at
        if self.served is None and (served or served is None and any(m in line for m in _DIGIT_SERVED)):
            self.served = (self.index, line)

    def decide(self, at: int) -> Stage:
        """The stage of an error read at line `at`, from the lines seen up to now: the frames before it (down
        to the first sign of serving), then those from its own line on."""
        served_at = self.served[0] if self.served and self.served[0] <= at else None
        for first, last in ((max(at - LOOK_BACK, served_at or 0), at - 1), (at, at + LOOK_AHEAD)):
            if startup := _between(self.frames["startup"], first, last):
                specific = [f for f in startup if f[1] != "start-up"] or startup
                chosen = specific[-1] if last < at else specific[0]
                return Stage("startup", None if chosen[1] == "start-up" else chosen[1], chosen[2])
            if runtime := _between(self.frames["runtime"], first, last)[-1:]:
                return Stage("runtime", None, runtime[0][2])
        if served_at is not None:
            return Stage("runtime", None, self.served[1])
        return Stage("startup", None, "")


def _between(frames: deque, first: int, last: int) -> list:
    """The frames read from line `first` to line `last`."""
    low, high = bisect_left(frames, first, key=_LINE), bisect_right(frames, last, key=_LINE)
    return list(islice(frames, low, high))
