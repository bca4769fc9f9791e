"""What a log says about the server that wrote it: launch settings, model, memory profile, KV size, and what
only diagnose reads (whether it served, whether its start-up failed, priority scheduling, a benchmark of random
prompts, vLLM's advice on the utilization).

vLLM's own start-up lines (the banner, the flags and the engine's config line, every memory figure of every
rank) are read by kvtool's start-up log reader (startup.py), and what it reads wins. The same settings where
people state them otherwise (a wrapper's or LLM(...)'s arguments, another launcher's flags, prose) are read
here too, where the reader states nothing; what a line says in words is read by signs.py. Fixes are computed from
these facts; the command line (`--model`, `--gpu-mem`) may add or override them.
"""

from dataclasses import dataclass, field

from kvtool.engine.diagnosis.facts import Facts
from kvtool.engine.diagnosis.signs import Readers, facts_in
from kvtool.engine.diagnosis.startup import CONTEXT_NAMES, StartupLines, context_facts
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import catalog_gpu
from kvtool.engine.startup_log.reader import VllmStartupLog

# the settings read from the text's facts (quantities.py names them as LogContext does)
SETTINGS = (
    "max_model_len",
    "gpu_memory_utilization",
    "block_size",
    "kv_cache_dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "served_model_name",
    "enable_chunked_prefill",
    "enforce_eager",
)


@dataclass
class LogContext:
    """Facts read from the log (or given on the command line); None when unknown."""

    model: str | None = None
    served_model_name: str | None = None
    version: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    total_gpu_source: str | None = None  # "log" (printed), "catalog" (the device it names), "given" (--gpu-mem)
    non_torch_gib: float | None = None
    activation_peak_gib: float | None = None
    available_kv_gib: float | None = None
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    cuda_graph_estimate_gib: float | None = None  # what the budget set aside for CUDA graphs (0.19 onwards)
    cuda_graph_gib: float | None = None  # what the capture took
    cuda_graph_profiling: bool | None = None  # whether the KV cache budget leaves room for the graphs
    suggested_gpu_memory_utilization: float | None = None  # vLLM's own advice on the CUDA graph line
    server_up: bool = False
    startup_failed: bool = False
    chunked_prefill_forced_off: bool = False
    random_prompts: bool = False  # a benchmark of random prompts: a prefix cache hit means a recomputed request
    gpu_name: str | None = None  # a GPU the text names ("RTX 4090", "A100 80GB")
    serving_told: bool = False  # the paste says in words that the server was serving (under load, during inference)
    unified_memory: bool = False  # a device whose GPU shares the system's memory (GB10, Jetson, Ryzen AI APUs)
    cache_check_failed: bool = False  # a traceback through the check that the KV cache holds one request
    request_accepted: bool = False  # the OpenAI server took a request (its id logged): it passed the length check
    priority_scheduling: bool = False  # requests preempted to admit higher-priority ones
    request_refused: str | None = None  # a line that tells a request was refused (a 4xx, a length refusal's words)
    scheduler_refused: bool = False  # pydantic refused the scheduler's settings (its detail may be cut off)
    probe_killed: bool = False  # a kubelet killed the container for a failed liveness or startup probe
    no_blocks_told: str | None = None  # the line that tells vLLM's "No available memory for the cache blocks"
    free_below_told: str | None = None  # the line that tells its "Free memory ... is less than desired ..."
    preemption_told: str | None = None  # the line that quotes vLLM's preemption warning loosely
    step_below_told: str | None = None  # the line that retells SchedulerConfig's refusal of the step budget
    up_told: str | None = None  # the line that tells the server started and serves ("it starts fine", 服务起来了)
    grew_told: str | None = None  # the line that tells it fails once a conversation grows or a long document comes
    down_told: str | None = None  # the line that tells a launch does not start ("no longer starts", 起動しない)
    other_limit_refused: str | None = None  # a refusal for a limit of another kind: images per prompt, LoRA rank
    score_drop_told: str | None = None  # the line that tells a harness's score far below another backend's
    cut_told: str | None = None  # the line that says an answer was cut short (cut_words.answer_cut)
    client: str | None = None  # a client, harness or trainer with an output cap of its own (clients.py)
    client_line: str | None = None  # the line that shows it
    unlimited_told: bool = False  # the paste says a setting means "no limit"
    facts: Facts = field(default_factory=Facts)  # every fact of the text (facts.py)
    read_lines: set[int] = field(default_factory=set)  # the lines a wording read (their facts are its numbers)
    errors: dict[frozenset[str], str] = field(default_factory=dict)  # error lines: consequence kinds -> the first
    startup: VllmStartupLog | None = None  # what the start-up reader read
    startup_lines: StartupLines | None = None  # the lines it read

    def read(self, line: str, readers: "Readers | None" = None) -> dict:
        """Take every fact `line` states (later lines win); returns them for `apply` to replay. `readers`: those of
        the line's shape, where the caller has them."""
        facts = facts_in(line, readers)
        self.apply(facts)
        return facts

    def apply(self, facts: dict) -> None:
        for name, value in facts.items():
            setattr(self, name, value)

    def take_facts(self, facts: Facts) -> None:
        """The launch settings the text states (flags, config keys, a wrapper's arguments, prose, a table), where
        vLLM's own start-up lines (take_startup, after) do not."""
        self.facts = facts
        for name in SETTINGS:
            if (fact := facts.setting(name)) is not None:
                setattr(self, name, fact.value)
        if self.model is None and (model := facts.setting("model")) is not None:  # a launcher's argument list
            self.model = model.value
        if (total := facts.setting("total_gib")) is not None:  # the GPU's memory as the text states it
            self.total_gpu_gib, self.total_gpu_source = total.value, "log"
        elif self.gpu_name and (gpu := catalog_gpu(self.gpu_name)) is not None:  # the GPU it names
            self.total_gpu_gib, self.total_gpu_source = round(gpu.total_bytes / GiB, 2), "catalog"

    def take_startup(self, lines: StartupLines) -> None:
        """What the start-up reader reads in the paste's start-up lines, over what was read before."""
        self.startup, self.startup_lines = lines.read(), lines
        if self.startup is not None:
            self.apply(context_facts(self.startup))

    def evidence(self, name: str) -> str:
        """The start-up line that prints the figure `name` holds (a failure the figures alone show)."""
        field = CONTEXT_NAMES[name].rpartition(".")[2]
        found = self.startup_lines and self.startup_lines.line_of(field, getattr(self, name))
        return found or ""

    def update(self, **facts) -> None:
        """Facts from the command line override the log."""
        for name, value in facts.items():
            if value is not None:
                setattr(self, name, value)
