"""One start of vLLM within a log: its lines gathered, each figure kept with the rank that printed it.

A log may hold several starts (a file appended to by each run): the API server's version banner or its args
seen a second time begin a new one. Lines picked out of order hold each once, and nothing else here depends
on their order.
"""

import re
from collections import defaultdict

from kvtool.engine.startup_log.lines import KEYWORDS, LINES, LogLine
from kvtool.engine.startup_log.records import VLLM_PREFIX, LogRecord
from kvtool.engine.startup_log.settings import COMMAND_LINE, LOG_LINE, SETTINGS, stated_args, typed_settings

# The rank with the least room decides: vLLM sizes every rank's KV cache to the smallest. For the
# overheads that is the largest one.
OVERHEADS = (
    "weights_memory_gib",
    "peak_activation_memory_gib",
    "peak_torch_memory_gib",
    "non_torch_memory_gib",
    "consumed_memory_gib",
    "non_kv_cache_memory_gib",
    "cudagraph_memory_gib",
    "cudagraph_memory_estimate_gib",
)
_FLAG_SETTINGS = SETTINGS + ("cudagraph_memory_profiling",)
_NOT_FIGURES = ("vllm_version", "device_name") + _FLAG_SETTINGS
_V0_UNTIL = (0, 8)  # V1 is the default from 0.8.0; V0 is gone in 0.11


class Launch:
    """The lines of one start, as they are read."""

    def __init__(self):
        # figure -> (index of the line in LINES, value, lines it stands for, printed by every rank) per print
        self.figures: dict[str, list[tuple[int, float, int, bool]]] = defaultdict(list)
        self.failure_category: str | None = None
        self.failure_message = ""
        self.failure_figures: dict[str, float] = {}
        self.args: dict[str, object] = {}
        self.device_name: str | None = None
        self.started = False  # the banner, the args or the engine's config line was seen
        self.records: list[LogRecord] = []
        self._vllm_lines_seen = False
        self._settings: dict[str, tuple[int, object]] = {}
        self._args_trust = COMMAND_LINE - 1
        self._versions: list[tuple[int, str]] = []
        self._engines: dict[str, set[str]] = defaultdict(set)  # "named" / "only" -> engines

    @property
    def vllm_version(self) -> str | None:
        return min(self._versions)[1] if self._versions else None

    @property
    def engine(self) -> str | None:
        for engines in (self._engines["named"], self._engines["only"]):
            if len(engines) == 1:
                return next(iter(engines))
        release = re.match(r"(\d+)\.(\d+)", self.vllm_version or "")
        return None if not release else "V0" if (int(release[1]), int(release[2])) < _V0_UNTIL else "V1"

    def settings(self) -> dict[str, object]:
        return {name: self._settings[name][1] if name in self._settings else None for name in _FLAG_SETTINGS}

    def tightest(self, name: str) -> float | None:
        values = self._best(name)
        return (max if name in OVERHEADS else min)(values, default=None)

    def rank_figures(self) -> dict[str, tuple[float, ...]]:
        """Each rank's value of each figure that every rank prints, as printed."""
        return {name: values for name in self.figures if (values := self._best(name, per_rank=True))}

    def _best(self, name: str, per_rank: bool = False) -> tuple[float, ...]:
        entries = self.figures.get(name, [])
        best = min((line for line, *_ in entries), default=None)
        chosen = [(value, repeats, every_rank) for line, value, repeats, every_rank in entries if line == best]
        return tuple(
            value for value, repeats, every_rank in chosen if every_rank or not per_rank for _ in range(repeats)
        )

    @property
    def is_vllm(self) -> bool:
        """Whether vLLM wrote any of the lines: one of its messages, or its log format."""
        return self._vllm_lines_seen or any(VLLM_PREFIX.search(record.text) for record in self.records)

    @property
    def last_vllm_line(self) -> str:
        """The message of the last line in vLLM's log format."""
        prefixes = (VLLM_PREFIX.search(record.text) for record in reversed(self.records))
        return next((prefix.string[prefix.end() :] for prefix in prefixes if prefix), "")

    def read(self, record: LogRecord) -> None:
        """Take every figure and setting the record states."""
        self.records.append(record)
        if KEYWORDS.search(record.compact):
            for index, line in enumerate(LINES):
                if line.gate in record.compact:
                    for reading in line.readings(record.compact):
                        self._take(index, line, reading, record)
        if ("args:" in record.compact or "config:" in record.compact or "vllm" in record.compact) and (
            stated := stated_args(record.text)
        ):
            self._take_args(*stated)

    def _take(self, index: int, line: LogLine, reading: dict[str, object], record: LogRecord) -> None:
        self._vllm_lines_seen = True
        self.started = self.started or line.starts_launch or line.engine is not None
        for kind, engine in (("named", line.engine), ("only", line.only)):
            if engine:
                self._engines[kind].add(engine)
        if line.failure:
            self._take_failure(line, reading, record)
            return
        for name, value in (*reading.items(), *line.sets):
            self._take_figure(index, line, name, value, record)

    def _take_figure(self, index: int, line: LogLine, name: str, value: object, record: LogRecord) -> None:
        if name == "vllm_version":
            self._versions.append((index, str(value)))
        elif name == "device_name":
            self.device_name = self.device_name or str(value).replace("_", " ")
        elif name in _NOT_FIGURES:
            self._set(name, value, LOG_LINE)
        else:
            self.figures[name].append((index, value, record.repeats, line.per_rank))

    def _take_failure(self, line: LogLine, reading: dict[str, object], record: LogRecord) -> None:
        self.failure_category = self.failure_category or line.failure
        self.failure_message = self.failure_message or " ".join(record.text.split())
        for name, value in reading.items():
            self.failure_figures.setdefault(name, value)

    def _take_args(self, trust: int, args: dict[str, object]) -> None:
        self._vllm_lines_seen = self._vllm_lines_seen or trust > COMMAND_LINE
        self.started = self.started or trust > COMMAND_LINE
        if self._args_trust < trust < LOG_LINE:
            self.args, self._args_trust = args, trust
        for name, value in typed_settings(args).items():
            self._set(name, value, trust)

    def _set(self, name: str, value: object, trust: int) -> None:
        if name not in self._settings or self._settings[name][0] < trust:
            self._settings[name] = (trust, value)


def launches(records: list[LogRecord]) -> list[Launch]:
    """The starts in a log, each with its records read: the API server's banner or args seen a second time
    begin a new one (lines picked out of order hold each once)."""
    starts, banners = [Launch()], set()
    for record in records:
        if banner := _banner(record):
            if banner in banners:
                starts.append(Launch())
                banners.clear()
            banners.add(banner)
        starts[-1].read(record)
    return starts


_VERSION_BANNERS = tuple(line.gate for line in LINES if line.starts_launch)


def _banner(record: LogRecord) -> str | None:
    """Which of the API server's first two lines the record is: its version, or its args."""
    if "non-defaultargs:" in record.compact or "args:Namespace(" in record.compact:
        return "args"
    if "version" in record.compact and any(banner in record.compact for banner in _VERSION_BANNERS):
        return "version"
    return None
