"""`kvtool plan` as a library: model + GPU + settings in, memory budget and KV-cache plan out.

The settings come as EngineArgs (from flags or a start-up log); the planner fills in what the release it
predicts would (its utilization, block size and scheduler limits) and hands the memory model the EngineConfig
that release would run with.
"""

from dataclasses import dataclass, field, replace
from functools import cached_property

from kvtool.engine.plan import advice
from kvtool.engine.plan.request import PlanRequest, Workload
from kvtool.engine.plan.stages import binding_stage, stage_budget, stage_gpu
from kvtool.engine.sizing import context_length, release_rules, vllm_startup
from kvtool.engine.sizing.context_length import AUTO_MAX_MODEL_LEN, parse_max_model_len
from kvtool.engine.sizing.defaults import DEFAULT_BLOCK_SIZE
from kvtool.engine.sizing.engine_args import check_parallel_sizes
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.kv_cache import KVCachePlan, KVCacheSpec
from kvtool.engine.sizing.memory_budget import MemoryBudget
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.errors import UsageError

CONCURRENCY_COLUMNS = (16, 64)


@dataclass(frozen=True)
class WorkloadFit:
    workload: Workload
    kv_bytes_per_sequence: int
    sequences_that_fit: int
    vram_bytes: dict[int, int]  # concurrent sequences -> GPU memory they need (non-KV + their KV), per GPU


@dataclass(frozen=True)
class PlanReport:
    spec: ModelSpec  # in the dtype the model runs in
    request: PlanRequest  # with the release's defaults filled in
    max_num_seqs: int
    max_num_batched_tokens: int
    budget: MemoryBudget
    kv: KVCachePlan
    fp8_kv: KVCachePlan
    workloads: list[WorkloadFit]
    v0: bool
    checks: list[vllm_startup.StartupCheck]
    num_cpu_blocks: int
    from_log: object | None = None  # from_log.FromLog: what a start-up log measured, when the plan answers from one
    stage: int = 0  # the pipeline stage with the fewest blocks: vLLM sizes every stage by it
    scheduler_readings: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # limits -> GPUs of a size

    @property
    def release(self) -> VllmRelease:
        return self.request.release

    @property
    def dtype(self) -> str:
        return self.spec.dtype

    @property
    def fits(self) -> bool:
        """Would the engine start: every start-up check passes, within the model's context."""
        checks_pass = all(check.passed for check in self.checks) if self.checks else self.kv.fits
        return checks_pass and context_length.within_model(self.kv.max_model_len, self.spec)

    @property
    def failed_check(self) -> vllm_startup.StartupCheck | None:
        return next((check for check in self.checks if not check.passed), None)

    @property
    def recommendations(self) -> dict:
        return advice.recommendations(self)

    @property
    def warnings(self) -> list[str]:
        return advice.warnings(self)

    @cached_property
    def kv_range(self):
        """The range of the KV cache (and what follows from it) over the estimates' bands (kv_range.py)."""
        from kvtool.engine.plan.kv_range import kv_range

        return kv_range(self)

    @cached_property
    def fits_margin(self):
        """How far the plan is from vLLM's start-up line, and how sure (fits_margin.py)."""
        from kvtool.engine.plan.fits_margin import fits_margin

        return fits_margin(self, self.kv_range)

    @property
    def log_lines(self) -> list[str]:
        return vllm_startup.startup_log_lines(self.release, self.v0, self.kv, self.num_cpu_blocks)

    @property
    def engine_config(self) -> EngineConfig:
        """What the release runs with, as this plan decided it (max_model_len the fitted one)."""
        config = self.request.engine_config(self.max_num_batched_tokens, self.max_num_seqs)
        return config.with_max_model_len(self.kv.max_model_len)

    def kv_cache_bytes_with(self, max_num_batched_tokens: int, max_num_seqs: int) -> int:
        """This plan's KV budget under other scheduler limits (another reading of a GPU given by size)."""
        budget = stage_budget(self.spec, self.request, self.v0, max_num_batched_tokens, max_num_seqs, self.stage)
        return budget.kv_cache_bytes


def make_plan(spec: ModelSpec, request: PlanRequest, budget: MemoryBudget | None = None) -> PlanReport:
    """The plan of `request`; `budget` replaces the estimated one (a start-up log's, moved to the request)."""
    check_parallel_sizes(spec, request.tp, request.pp)
    request.release.check_kv_cache_dtype(request.kv_cache_dtype)
    v0 = _uses_v0(request, spec)
    request = _fill_defaults(request, spec)
    readings = _scheduler_readings(request, spec, v0)
    default_batched, default_seqs = next(iter(readings))
    batched, seqs = request.max_num_batched_tokens or default_batched, request.max_num_seqs or default_seqs
    stage, estimated, cache = binding_stage(spec, request, v0, batched, seqs)
    budget = budget if budget is not None else estimated
    max_model_len = context_length.resolve_max_model_len(request.max_model_len, cache, budget.kv_cache_bytes)
    kv = cache.plan(budget.kv_cache_bytes, max_model_len)
    estimate = cache.estimate_max_model_len(kv.available_bytes, limit=max_model_len)
    return PlanReport(
        spec=cache.model,
        request=request,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        budget=budget,
        kv=kv,
        fp8_kv=cache.with_kv_cache_dtype("fp8").plan(budget.kv_cache_bytes, max_model_len),
        workloads=[_workload_fit(cache, workload, budget) for workload in request.workloads],
        v0=v0,
        checks=vllm_startup.startup_checks(request.release, v0, budget, kv, stage_gpu(request, stage), estimate),
        num_cpu_blocks=vllm_startup.cpu_swap_blocks(v0, kv.block_bytes),
        stage=stage,
        scheduler_readings=readings,
    )


def _uses_v0(request: PlanRequest, spec: ModelSpec) -> bool:
    if request.engine is not None:
        return request.engine == "V0"
    return request.release.uses_v0(request.kv_cache_dtype, request.gpu.compute_capability, spec.num_state_layers > 0)


def _fill_defaults(request: PlanRequest, spec: ModelSpec) -> PlanRequest:
    """The release's utilization and block size for the model and GPU; a named GPU or size stands for
    every GPU of the tp x pp group."""
    release, gpu = request.release, request.gpu
    if request.gpu_memory_utilization is None:
        request = replace(request, gpu_memory_utilization=release.default_gpu_memory_utilization)
    if request.block_size is None:
        size = release.mla_block_size(gpu.arch) if spec.is_mla else DEFAULT_BLOCK_SIZE
        request = replace(request, block_size=size)
    if len(request.gpus) < request.tp * request.pp:
        request = replace(request, gpus=[gpu] * (request.tp * request.pp))
    return request


def _scheduler_readings(request: PlanRequest, spec: ModelSpec, v0: bool) -> dict[tuple[int, int], list[str]]:
    release, gpu = request.release, request.gpu
    length = _numeric_length(request.max_model_len) or spec.derived_max_model_len
    multimodal = bool(spec.modalities)
    chunked = release_rules.v0_chunked_prefill(release, length, bool(spec.sliding_window), spec.is_mla, multimodal)
    return release_rules.scheduler_readings(release, v0, gpu, length, not chunked, multimodal)


def _numeric_length(value) -> int | None:
    try:
        length = parse_max_model_len(value) if value is not None else AUTO_MAX_MODEL_LEN
    except UsageError:
        return None
    return None if length == AUTO_MAX_MODEL_LEN else length


def _workload_fit(cache: KVCacheSpec, workload: Workload, budget: MemoryBudget) -> WorkloadFit:
    per_sequence = cache.request_bytes(workload.prompt_tokens + workload.output_tokens)
    usable = max(0, budget.kv_cache_bytes - cache.block_bytes)
    vram = {n: budget.non_kv_cache_bytes + n * per_sequence for n in CONCURRENCY_COLUMNS}
    return WorkloadFit(workload, per_sequence, usable // per_sequence if per_sequence else 0, vram)
