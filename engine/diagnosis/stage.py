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
  `AsyncLLM.output_handler`, "EngineCore encountered a fatal error" (0.8.5 onwards), v0's
  `AsyncLLMEngine` loop (`_log_task_completion`, `run_engine_loop`), `LLM.generate`
- progress lines say which phase is next: "Model loading took" (profiling), "Available KV cache
  memory" and "GPU KV cache size" (KV cache allocation, then graph capture); serving shows in access
  lines, request logs, stats lines and LLM.generate's progress bar
A start-up frame decides over a run-time one in the same traceback (v0 profiles through execute_model).
With no sign either way the stage is "unknown": the explainer then gives the fixes of both.
"""

import re
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from operator import itemgetter

from kvtool.engine.diagnosis.shapes import masked

DUMMY_RUN = "dummy run"  # a start-up frame unless a run-time one is in the same traceback
WEIGHT_SYNC = "weight sync"  # a run-time frame that decides over the weight loading it calls
STARTUP_MARKERS = (  # (marker, phase), the most specific first
    ("_dummy_sampler_run", "sampler warm-up"),
    ("warming up sampler", "sampler warm-up"),
    ("sampling_metadata=dummy_metadata", "sampler warm-up"),  # the sampler's call in _dummy_sampler_run
    ("_dummy_pooler_run", "pooler warm-up"),
    ("warming up pooler", "pooler warm-up"),
    ("capture_model", "CUDA graph capture"),
    ("_capture_cudagraphs", "CUDA graph capture"),
    ("capture_end", "CUDA graph capture"),  # torch.cuda.graph's exit, a frame only capture has
    ("capture_begin", "CUDA graph capture"),
    ("torch/cuda/graphs.py", "CUDA graph capture"),
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
    ("Failed to load model - not enough GPU memory", "weight loading"),
    ("load_model", "weight loading"),
    ("load_weights", "weight loading"),
    ("model_loader/", "weight loading"),  # the loader package in a frame's path
    ("Starting to load model", "weight loading"),
    ("_initialize_kv_caches", "start-up"),
    ("compile_or_warm_up_model", "start-up"),
    ("_dummy_run", DUMMY_RUN),  # profiling, warm-up and capture run it; so do idle data-parallel ranks while serving
    ("Engine core initialization failed", "start-up"),
    ("EngineCore failed to start", "start-up"),
    ("WorkerProc failed to start", "start-up"),
)
# Lines a start-up prints as it goes: what follows them is the next phase. They decide only where no frame
# or sign of serving does, and a new traceback does not forget them.
PROGRESS_MARKERS = (
    ("Graph capturing finished", "start-up"),
    ("Available KV cache memory", "KV cache allocation"),
    ("KV cache size:", "KV cache allocation"),
    ("# GPU blocks:", "KV cache allocation"),
    ("Estimated CUDA graph memory", "memory profiling"),
    ("Model loading took", "memory profiling"),
    ("model weights took", "memory profiling"),
    ("checkpoint shards", "weight loading"),  # the loading progress bar
)
# an RL trainer's weight sync into a colocated engine, between generations: run time, though it loads weights
WEIGHT_SYNC_MARKERS = ("update_weights", "sync_weights", "sharding_manager", "wake_up(")
RUNTIME_MARKERS = (
    "in step",
    "in execute_model",
    "in sample_tokens",
    "in compute_logprobs",  # the sampler's and prompt logprobs' frames: a start-up's warm-up names itself first
    "in _get_prompt_logprobs",
    "in _get_logprobs",
    "in gather_logprobs",
    "in step_with_batch_queue",
    "execute_dummy_batch",  # data parallel ranks with nothing to do run a dummy batch while serving
    "run_busy_loop",
    "_process_engine_step",
    ", in generate",  # LLM.generate and LLM.chat: offline requests
    ", in chat",
    ", in _run_engine",
    "output_handler",
    "_log_task_completion",  # v0's AsyncLLMEngine: the engine loop died while serving
    "run_engine_loop",
    "engine_step",
    "Engine background task failed",
    "during streaming",
    "stream generator",
    "EngineCore encountered a fatal error",
    "EngineCore encountered an issue",
    "EngineDeadError",
    "AsyncEngineDeadError",
)
SERVED_MARKERS = (
    "Application startup complete",
    "Uvicorn running on",
    "Starting vLLM API server",
    "Avg prompt throughput",
    "POST /v1/",
    ' - "GET /',  # uvicorn's access lines: it serves only once the engine is up
    "Received request",
    "Added request",
    "Finished request",
    "Processed prompts",  # LLM.generate's progress bar: offline requests
    "Adding requests",
)
CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
TRACEBACK = "Traceback (most recent call last)"
LOOK_BACK, LOOK_AHEAD = 80, 30  # lines
_PHASES = dict(STARTUP_MARKERS + PROGRESS_MARKERS)
_CHAINS, _SERVED, _RUNTIME = set(CHAIN_MARKERS), set(SERVED_MARKERS), set(RUNTIME_MARKERS)
_MARKERS = (*_PHASES, *RUNTIME_MARKERS, *WEIGHT_SYNC_MARKERS, *SERVED_MARKERS, *CHAIN_MARKERS)
_ANY_MARKER = re.compile("|".join(re.escape(m) for m in _MARKERS))
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
    if found.intersection(WEIGHT_SYNC_MARKERS):
        return "runtime", WEIGHT_SYNC
    for marker, phase in STARTUP_MARKERS:  # the most specific first
        if marker in found:
            return "startup", phase
    if found & _RUNTIME:
        return "runtime", None
    for marker, phase in PROGRESS_MARKERS:
        if marker in found:
            return "progress", phase
    return None


@dataclass
class Stage:
    stage: str  # "startup" | "runtime" | "unknown"
    phase: str | None
    evidence: str  # the line that decided it ("" when nothing did)


class StageTracker:
    """Fed every logical line in order; says where an out-of-memory error belongs."""

    def __init__(self):
        # kind -> (line, phase, text) of the frames of that kind in this traceback (progress lines: in the whole
        # log), in order
        self.frames: dict[str, deque[tuple[int, str | None, str]]] = {
            "startup": deque(),
            "runtime": deque(),
            "progress": deque(),
        }
        self.served: tuple[int, str] | None = None  # (line, text) of the first sign the server was serving
        self.index = 0
        self._chained = False

    def feed(self, line: str, markers: Markers | None = None) -> None:
        """`markers`: shape_markers of the line's shape, where the caller has them."""
        self.index += 1
        marker, chained, served, opens = markers or shape_markers(masked(line))
        if opens and not self._chained:  # the line before it is its own ("EngineCore encountered a fatal error.")
            for kind in ("startup", "runtime"):
                _keep_from(self.frames[kind], self.index - 1)
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
            startup = _between(self.frames["startup"], first, last)
            runtime = _between(self.frames["runtime"], first, last)
            if synced := [frame for frame in runtime if frame[1] == WEIGHT_SYNC]:
                return Stage("runtime", None, synced[0][2])
            runtime = runtime[-1:]
            if startup and not (runtime and all(f[1] == DUMMY_RUN for f in startup)):
                specific = [f for f in startup if f[1] not in ("start-up", DUMMY_RUN)] or startup
                chosen = specific[-1] if last < at else specific[0]
                return Stage("startup", None if chosen[1] in ("start-up", DUMMY_RUN) else chosen[1], chosen[2])
            if runtime:
                return Stage("runtime", None, runtime[0][2])
        if served_at is not None:
            return Stage("runtime", None, self.served[1])
        if progress := _between(self.frames["progress"], at - LOOK_BACK, at - 1)[-1:]:
            return Stage("startup", progress[0][1] if progress[0][1] != "start-up" else None, progress[0][2])
        return Stage("unknown", None, "")


def _keep_from(frames: deque, first: int) -> None:
    """Forget the frames read before line `first`."""
    while frames and frames[0][0] < first:
        frames.popleft()


def _between(frames: deque, first: int, last: int) -> list:
    """The frames read from line `first` to line `last`."""
    low, high = bisect_left(frames, first, key=_LINE), bisect_right(frames, last, key=_LINE)
    return list(islice(frames, low, high))
