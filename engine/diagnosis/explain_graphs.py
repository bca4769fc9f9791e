"""CUDA graphs and the KV cache budget (vLLM 0.18 onwards): the memory the budget sets aside for the
graphs ("Estimated CUDA graph memory: X GiB total", on by default from 0.21) and a start-up that failed
after vLLM warned that it sets none aside (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`, or before 0.21)."""

from dataclasses import replace

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain_kv import Lengths
from kvtool.engine.diagnosis.findings import Alternative, Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import MEASURED, graphs_set_aside
from kvtool.engine.diagnosis.memory_model import MemoryModel

ESTIMATE_FLAG = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
BUDGET_CATEGORIES = ("no_cache_blocks", "kv_cache_too_small_at_startup")
GRAPHS_WHY = (
    "if the KV cache would have had room without the {estimate} GiB set aside for CUDA graphs, the graphs are "
    "what ran out of memory"
)
BUDGET_WHY = (
    "if the weights and the profiled activations alone fill the budget (the graphs' share is small beside them)"
)


def graph_budget(finding: Finding, context: LogContext, memory: MemoryModel) -> Finding:
    """A start-up finding about the KV cache budget, told what the CUDA graphs took from it where the run set
    their share aside; where that share covers what was missing, they are the cause and the budget finding the
    alternative."""
    if finding.category not in BUDGET_CATEGORIES or not graphs_set_aside(context):
        return finding
    estimate = context.cuda_graph_estimate_gib
    finding.numbers.put("cuda_graph_estimate_gib", estimate, MEASURED)
    skip = skip_graphs(estimate, _eager_length(finding.numbers, memory, estimate))
    finding.fixes.insert(1 if finding.category == "kv_cache_too_small_at_startup" else 0, skip)
    available = context.available_kv_gib
    # the graphs are the cause only where the printed budget shows they took what the KV cache lacked
    if finding.category != "no_cache_blocks" or available is None or available + estimate <= 0:
        finding.alternatives.append(Alternative("cuda_oom_startup", GRAPHS_WHY.format(estimate=estimate), [skip]))
        return finding
    summary = f"The {estimate} GiB the KV cache budget sets aside for CUDA graphs left nothing for the KV cache itself."
    return replace(
        finding,
        category="cuda_oom_startup",
        summary=summary,
        fixes=[skip, *graph_fixes(context)],
        alternatives=[Alternative(finding.category, BUDGET_WHY, finding.fixes[1:])],
    )


def skip_graphs(estimate: float, length: int | None = None) -> Fix:
    action = f"skip CUDA graphs: the {estimate} GiB set aside for them goes to the KV cache"
    if length:
        action += f" (max_model_len {length} fits)"
    return Fix(action, flag="--enforce-eager", value=True)


def _eager_length(numbers: Numbers, memory: MemoryModel, estimate: float) -> int | None:
    """The longest request the KV cache holds with the graphs' share in it, where the finding's budget says."""
    lengths = Lengths.of(numbers, memory)
    if not lengths.available_gib or lengths.available_gib + estimate <= 0:
        return None
    length, source = lengths.fits(lengths.available_gib + estimate)
    return length and numbers.put("enforce_eager_max_model_len", length, source)


def graph_fixes(context: LogContext) -> list[Fix]:
    """Room for the graphs: vLLM's own utilization advice, or a budget that sets memory aside for them."""
    fixes = []
    if context.cuda_graph_profiling is False:
        fixes.append(Fix("let the KV cache budget set memory aside for the CUDA graphs", flag=ESTIMATE_FLAG, value=1))
    if context.suggested_gpu_memory_utilization:
        fixes.append(
            Fix(
                "with the graphs' share set aside, vLLM's own advice to keep the KV cache as large",
                flag="--gpu-memory-utilization",
                value=context.suggested_gpu_memory_utilization,
            )
        )
    return fixes


def warned_graphs(seen: list[Observation], context: LogContext) -> list[Observation]:
    """A start-up that failed, with no other cause found, after the warning that graphs get no memory."""
    if seen or context.cuda_graph_profiling is not False or not context.startup_failed or context.server_up:
        return []
    line = context.evidence("cuda_graph_profiling")
    return [Observation("cuda_oom_startup", "startup", {}, line, (0, len(line)), "CUDA graph capture")]
