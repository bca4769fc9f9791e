"""The memory budget of the paste's run, as diagnose sizes its fixes on it: each figure as vLLM measured it where
the paste's start-up lines print it (the start-up reader's tightest rank, startup.py), else solved from the log's
budget (kvtool.engine.startup_log.budget) or estimated by kvtool, with its source.

vLLM sizes the KV cache as  total x gpu_memory_utilization - weights - activation peak - non-torch memory - CUDA
graphs (where the release sets them aside, 0.21 on by default), so a fix moves the KV cache by what it moves in
that sum: a higher utilization by its share of the GPU, a smaller profiling batch by the activation it saves,
--enforce-eager by the graphs' share.
"""

from dataclasses import dataclass

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.defaults import ASSUMED_MAX_NUM_BATCHED_TOKENS, ASSUMED_MAX_NUM_SEQS
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.memory_budget import memory_budget
from kvtool.engine.sizing.profile_run import activation_bytes
from kvtool.engine.sizing.release_rules import budget_rules, scheduler_limits, v0_chunked_prefill
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import NEWEST, VllmRelease, default_gpu_memory_utilization, version_tuple
from kvtool.engine.startup_log.budget import DERIVED, ESTIMATED, MEASURED, log_budget
from kvtool.errors import UsageError

GIVEN = "given"  # on the command line (--gpu-mem, --gpu)
SOURCES = (MEASURED, DERIVED, ESTIMATED, GIVEN)
_TOTAL_SOURCES = {"log": MEASURED, "given": GIVEN, "catalog": ESTIMATED}  # LogContext.total_gpu_source -> source


@dataclass(frozen=True)
class RunBudget:
    """The run's budget as far as the paste and kvtool's estimates tell it, in GiB, each figure's source by the
    name findings give it (total_gpu_gib, gpu_memory_utilization, max_num_batched_tokens, activation_peak_gib,
    cuda_graph_estimate_gib)."""

    total_gib: float | None
    utilization: float
    batched_tokens: int
    activation_gib: float | None
    graphs_gib: float  # set aside for CUDA graphs before the KV cache was sized; 0 where the run set none aside
    sources: dict[str, str]
    unchunked_v0: bool = False  # V0 without chunked prefill: a step holds a whole max_model_len prompt

    def activation_saved_gib(self, memory: MemoryModel, batched_tokens: int) -> float | None:
        """What a profiling batch of `batched_tokens` takes off the activation peak: its forward pass shrinks with
        the batch, the sampler's rows do not (kvtool's activation model; half the peak without the model)."""
        if self.activation_gib is None:
            return None
        if memory.spec is None:
            return round(self.activation_gib * (1 - batched_tokens / self.batched_tokens), 2)
        before, after = (
            activation_bytes(memory.spec, tokens, ASSUMED_MAX_NUM_SEQS, memory.model_dtype, memory.tp)
            for tokens in (self.batched_tokens, batched_tokens)
        )
        return round(self.activation_gib * (1 - after / before), 2) if before else None


def run_budget(context: LogContext, memory: MemoryModel) -> RunBudget:
    sources = {}
    total = context.total_gpu_gib
    if total:
        sources["total_gpu_gib"] = _TOTAL_SOURCES.get(context.total_gpu_source or "", MEASURED)
    utilization = default_utilization(context)
    sources["gpu_memory_utilization"] = MEASURED if context.gpu_memory_utilization else ESTIMATED  # vLLM's default
    batched = context.max_num_batched_tokens or _default_batched_tokens(context)
    sources["max_num_batched_tokens"] = MEASURED if context.max_num_batched_tokens else ESTIMATED
    graphs = context.cuda_graph_estimate_gib if graphs_set_aside(context) else 0.0
    if graphs:
        sources["cuda_graph_estimate_gib"] = MEASURED
    activation, sources["activation_peak_gib"] = context.activation_peak_gib, MEASURED
    if activation is None:
        activation, sources["activation_peak_gib"] = _activation(context, memory, total, utilization, batched)
    return RunBudget(total, utilization, batched, activation, graphs, sources, _v0(context) and not _chunked(context))


def default_utilization(context: LogContext) -> float:
    """The utilization the log names, else vLLM's default for the log's release (0.90 where it names none)."""
    return context.gpu_memory_utilization or default_gpu_memory_utilization(context.version or "0.0")


def graphs_set_aside(context: LogContext) -> bool:
    """Whether the run took the CUDA graphs' estimate off the KV cache budget: where vLLM says its graph memory
    profiling is on, or, where it does not say, from 0.20 (0.18 - 0.19 print the estimate as advice only)."""
    if not context.cuda_graph_estimate_gib or context.cuda_graph_profiling is False:
        return False
    return bool(context.cuda_graph_profiling) or _release(context).reached("cudagraph_subtracted")


def _release(context: LogContext) -> VllmRelease:
    version = version_tuple(context.version) if context.version else None
    return VllmRelease(min(version, NEWEST) if version else NEWEST)


def _v0(context: LogContext) -> bool:
    return bool(context.startup and context.startup.engine == "V0")


def _chunked(context: LogContext) -> bool:
    """Whether the run prefilled in chunks: as the log says, else V0's own choice (on above 32k tokens)."""
    if context.enable_chunked_prefill is not None:
        return context.enable_chunked_prefill
    return not _v0(context) or v0_chunked_prefill(_release(context), context.max_model_len or 0, False, False, False)


def _default_batched_tokens(context: LogContext) -> int:
    """vLLM's default profiling batch for the run's release and GPU (an assumption without the GPU, but for V0,
    which does not look at the GPU)."""
    if not context.total_gpu_gib and not _v0(context):
        return ASSUMED_MAX_NUM_BATCHED_TOKENS
    device = (context.startup and context.startup.device_name) or ""
    total = int((context.total_gpu_gib or 0) * GiB)
    release, chunked_off = _release(context), not _chunked(context)
    return scheduler_limits(release, _v0(context), total, device, None, context.max_model_len or 0, chunked_off)[0]


def _activation(context, memory, total, utilization, batched) -> tuple[float | None, str]:
    """The activation peak the log does not print: solved from its budget where it prints the rest (the weights,
    the KV cache, the GPU), else kvtool's estimate; None without the model or the GPU."""
    if memory.spec is None or not total:
        return None, ESTIMATED
    try:
        budget = _estimated_budget(context, memory, total, utilization, batched)
    except UsageError:  # a utilization or a GPU no run has
        return None, ESTIMATED
    estimate = round(budget.activation_bytes / GiB, 2), ESTIMATED
    if context.startup is None or context.available_kv_gib is None:
        return estimate
    try:
        measured = log_budget(context.startup, budget, memory.cache(), context.max_model_len or 1, MEASURED)
    except UsageError:
        return estimate
    if measured.budget.activation_bytes <= 0:  # the log's figures and the GPU's memory disagree
        return estimate
    source = measured.sources.get("activation_bytes", ESTIMATED)
    return round(measured.budget.activation_bytes / GiB, 2), source


def _estimated_budget(context, memory, total, utilization, batched):
    """kvtool's estimate of the run's budget, at its settings."""
    return memory_budget(
        memory.spec,
        int(total * GiB),
        EngineConfig.of(
            gpu_memory_utilization=utilization,
            tensor_parallel_size=memory.tp,
            pipeline_parallel_size=memory.layout.pp,
            max_num_batched_tokens=batched,
            max_num_seqs=context.max_num_seqs or ASSUMED_MAX_NUM_SEQS,
            enforce_eager=bool(context.enforce_eager),
        ),
        rules=budget_rules(_release(context), _v0(context)),
    )
