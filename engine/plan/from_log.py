"""`kvtool plan --from-log`: the budget a vLLM start-up log measured, answered for other settings.

The log's run is planned twice with kvtool's estimator, at the log's own settings and at the new ones, and
each part of the log's budget (startup_log/budget.py) moves with the estimate between the two: a part the log
prints by itself by the estimate's difference; the weights (split over tp x pp) and the parts solved from the
log's budget (shares of it in the proportion of their estimates) by its ratio. A part the log does not print
keeps the estimate, and a part the new settings do not charge (CUDA graphs under --enforce-eager) is gone.
The KV cache then follows from the moved budget with vLLM's arithmetic, as in any plan.
"""

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from kvtool.engine.plan.from_log_notes import gpu_notes, kv_notes, printed_figures
from kvtool.engine.plan.from_log_run import (
    given_gpu,
    log_release,
    log_request,
    run_gpu,
    run_model_spec,
    same_card,
)
from kvtool.engine.plan.planner import PlanReport, PlanRequest, PlanTarget, Workload, make_plan
from kvtool.engine.plan.stages import kv_cache_spec
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.memory_budget import MemoryBudget
from kvtool.engine.sizing.units import GiB
from kvtool.engine.startup_log.budget import (
    DERIVED,
    ESTIMATED,
    GIVE_A_GPU,
    GIVEN,
    MEASURED,
    PARTS,
    LogBudget,
    log_budget,
)
from kvtool.engine.startup_log.reader import VllmStartupLog, read_startup_log_file
from kvtool.errors import UsageError

SCALED = ("weights_bytes",)  # split over tp x pp: they move by the estimate's ratio
NO_GPU_MEMORY = "The log prints no GPU memory, and an answer at another --gpu-memory-utilization needs it."


@dataclass(frozen=True)
class FromLog:
    """What the answer took from the log, and what it changed."""

    source: str
    log: VllmStartupLog
    gpu_name: str  # the GPU the log ran on, as far as known
    measured: LogBudget  # the log's run, at its settings
    sources: dict[str, str]  # each part of the answer's budget -> measured | derived | estimated
    changed: dict[str, tuple[object, object]]  # setting -> (the log's, the answer's)
    moved: dict[str, int]  # part -> bytes it moved by
    printed: dict[str, float]  # the KV cache figures the log printed
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The `from_log` object of `kvtool plan --json` (docs/plan.md)."""
        measured = self.measured
        return {
            "source": self.source,
            "vllm_version": self.log.vllm_version,
            "engine": self.log.engine,
            "num_ranks": self.log.num_ranks,
            "gpu_memory": measured.sources["total_bytes"],
            "measured": measured.figures(MEASURED),
            "derived": measured.figures(DERIVED),
            "estimated": sorted(measured.figures(ESTIMATED)),
            "answer": self.sources,
            "changed": {name: {"log": old, "now": new} for name, (old, new) in self.changed.items()},
            "moved": self.moved,
            "printed": self.printed,
            "notes": list(self.notes),
        }


def plan_from_log(
    path: str | Path,
    args: EngineArgs = EngineArgs(),
    target: PlanTarget = PlanTarget(),
    workloads: list[Workload] | None = None,
) -> PlanReport:
    """The plan for the settings `args` give (each replaces the log's; None keeps it; the model, dtype and
    quantization stand in where the log names none), each measured part of the budget taken from the start-up
    log at `path`. `target` names another GPU or release to answer for."""
    log = read_startup_log_file(path)
    release, notes = log_release(log, target.vllm_version)
    spec = run_model_spec(log, args.model)
    given = given_gpu(target)
    gpu, total_source = run_gpu(log, given)
    request_on = partial(log_request, log, spec, args, release=release, workloads=workloads or [])
    at_log, cache, measured, gpu = _measure(log, spec, request_on, gpu, total_source)
    if total_source is None and _takes_another_share(at_log.request, args):
        raise UsageError(NO_GPU_MEMORY, GIVE_A_GPU)
    answer_gpu = gpu if total_source in (GIVEN, None) or same_card(given, gpu) else given
    at_new = make_plan(spec, _what_if_request(at_log, args, target.num_gpus, answer_gpu))
    budget, moved = moved_budget(measured, at_log.budget, at_new.budget)
    notes += gpu_notes(measured, gpu, answer_gpu) + kv_notes(log, cache, measured, at_log.kv.max_model_len)
    facts = FromLog(
        source=str(path),
        log=log,
        gpu_name=gpu.name,
        measured=measured,
        sources=answer_sources(measured, at_log.budget, at_new.budget),
        changed=_changed(at_log, at_new, measured.budget.total_bytes),
        moved=moved,
        printed=printed_figures(log),
        notes=tuple(notes),
    )
    return replace(make_plan(spec, at_new.request, budget=budget), from_log=facts)


def _measure(log, spec, request_on, gpu: GpuInfo, total_source: str | None):
    """The estimate at the log's settings, its KV cache, the log's budget and the GPU it ran on. A GPU memory
    solved from the budget is estimated on once more: its scheduler defaults may differ from the first guess's."""
    for _ in range(1 if total_source else 2):
        at_log = make_plan(spec, request_on(gpu))
        cache = kv_cache_spec(at_log.spec, at_log.request, at_log.v0, at_log.max_num_batched_tokens)
        measured = log_budget(log, at_log.budget, cache, at_log.kv.max_model_len, total_source)
        gpu = gpu if total_source else _derived_gpu(gpu, measured)
    return at_log, cache, measured, gpu


def _takes_another_share(request: PlanRequest, args: EngineArgs) -> bool:
    """Whether the answer takes another share of the GPU than the log's run (then its memory matters)."""
    utilization = args.gpu_memory_utilization
    if utilization is None:
        return False
    profiled_again = request.kv_cache_memory is not None and args.kv_cache_memory is None
    return utilization != request.gpu_memory_utilization or profiled_again


def _derived_gpu(gpu: GpuInfo, measured: LogBudget) -> GpuInfo:
    total = measured.budget.total_bytes
    return replace(gpu, total_bytes=total, name=f"{total / GiB:.2f} GiB GPU")


def moved_budget(measured: LogBudget, at_log: MemoryBudget, at_new: MemoryBudget) -> tuple[MemoryBudget, dict]:
    """The log's budget moved to the new settings, and by how much each part moved."""
    log = measured.budget
    parts = {
        name: _moved(getattr(log, name), getattr(at_log, name), getattr(at_new, name), _scales(name, measured))
        for name in PARTS
    }
    moved = {name: parts[name] - getattr(log, name) for name in PARTS if parts[name] != getattr(log, name)}
    return replace(at_new, **parts), moved


def _scales(name: str, measured: LogBudget) -> bool:
    """Weights split over tp x pp, and a part solved from the log's budget is a share of it in proportion to
    the estimates: both keep their ratio to the estimate. A part printed alone moves by its difference."""
    return name in SCALED or measured.sources.get(name) == DERIVED


def _moved(value: int, at_log: int, at_new: int, scales: bool) -> int:
    if not at_new:
        return 0  # the new settings do not charge it
    if not at_log:
        return at_new  # the log's run did not charge it: the estimate
    if at_new == at_log:
        return value
    return max(0, round(value * at_new / at_log) if scales else value + at_new - at_log)


def answer_sources(measured: LogBudget, at_log: MemoryBudget, at_new: MemoryBudget) -> dict[str, str]:
    """Where each part of the answer's budget comes from."""
    sources = {}
    for name in PARTS:
        if getattr(at_new, name):
            charged = getattr(at_log, name) and name in measured.sources
            sources[name] = measured.sources[name] if charged else ESTIMATED
    return sources


def _what_if_request(at_log: PlanReport, args: EngineArgs, num_gpus: int | None, gpu: GpuInfo) -> PlanRequest:
    """The log's settings as planned, with those given (`num_gpus` sets tp = num_gpus / pp when tp is not). V1
    keeps the scheduler limits it ran with; V0 keeps its flags, so that its profile batch follows a new
    max_model_len as vLLM's default does."""
    request = at_log.request
    if num_gpus and args.tensor_parallel_size is None:
        args = replace(args, tensor_parallel_size=max(1, num_gpus // (args.pipeline_parallel_size or request.pp)))
    if args.gpu_memory_utilization is not None and args.kv_cache_memory is None:
        request = replace(request, kv_cache_memory=None)  # a fraction asked for: vLLM profiles the budget again
    if not at_log.v0:
        request = replace(
            request, max_num_seqs=at_log.max_num_seqs, max_num_batched_tokens=at_log.max_num_batched_tokens
        )
    request = request.with_engine_args(args)
    return replace(request, gpus=[gpu] * (request.tp * request.pp))


def _changed(at_log: PlanReport, at_new: PlanReport, log_total: int) -> dict[str, tuple[object, object]]:
    """Each setting of the answer that is not the log's (the log's GPU memory as its budget has it)."""

    def settings(report: PlanReport, total: int) -> dict[str, object]:
        request = report.request
        return {
            "tp": request.tp,
            "pp": request.pp,
            "gpu_memory_utilization": request.gpu_memory_utilization,
            "max_model_len": report.kv.max_model_len,
            "kv_cache_dtype": request.kv_cache_dtype,
            "max_num_seqs": report.max_num_seqs,
            "max_num_batched_tokens": report.max_num_batched_tokens,
            "enforce_eager": request.enforce_eager,
            "kv_cache_memory": request.kv_cache_memory,
            "block_size": request.block_size,
            "gpu_memory_bytes": total,
        }

    before, after = settings(at_log, log_total), settings(at_new, at_new.budget.total_bytes)
    return {name: (before[name], after[name]) for name in before if before[name] != after[name]}
