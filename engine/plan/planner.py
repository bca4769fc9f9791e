"""`kvtool plan` as a library: model + GPU + settings in, memory budget and KV-cache plan out.

The settings come as EngineArgs (from flags or a start-up log); the planner fills in what the release it
predicts would (its utilization, block size and scheduler limits) and hands the memory model the EngineConfig
that release would run with.
"""

from dataclasses import dataclass, field, replace

from kvtool.engine.plan import advice
from kvtool.engine.plan.stages import binding_stage, stage_budget, stage_gpu
from kvtool.engine.sizing import context_length, release_rules, vllm_startup
from kvtool.engine.sizing.context_length import AUTO_MAX_MODEL_LEN, parse_max_model_len
from kvtool.engine.sizing.defaults import DEFAULT_BLOCK_SIZE
from kvtool.engine.sizing.engine_args import EngineArgs, check_parallel_sizes
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.kv_cache import KVCachePlan, KVCacheSpec
from kvtool.engine.sizing.memory_budget import MemoryBudget
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.errors import UsageError

CONCURRENCY_COLUMNS = (16, 64)


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class PlanTarget:
    """What a plan is for beside the engine settings, as the user named it: the GPUs and the vLLM release."""

    gpu: str | None = None  # a catalog name, device indices or "local"
    gpu_mem: str | None = None  # the memory of one GPU, e.g. 23.58GiB
    gpu_free: int | None = None  # bytes other processes leave free on each GPU
    num_gpus: int | None = None
    vllm_version: str | None = None


@dataclass(frozen=True)
class PlanRequest:
    gpus: list[GpuInfo]
    model: str = ""  # as the user named it (an alias or path), for the serve commands
    tp: int = 1
    pp: int = 1
    gpu_memory_utilization: float | None = None  # None: the release's default
    max_model_len: str | int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None  # vLLM's: 16, or 64 for MLA models (FlashMLA)
    enforce_eager: bool = False
    kv_cache_memory: int | None = None  # bytes for the KV cache, given outright (the CPU engine's budget)
    workloads: list[Workload] = field(default_factory=list)
    release: VllmRelease = VllmRelease()  # the newest release modelled unless named
    limit_mm_per_prompt: dict[str, int] | None = None
    block_size_given: bool = False
    engine: str | None = None  # "V0" / "V1" where a log shows which one the release ran (VLLM_USE_V1)
    cudagraphs_subtracted: bool | None = None  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS as a log states it
    pp_layer_partition: tuple[int, ...] | None = None  # layers per pipeline stage (VLLM_PP_LAYER_PARTITION)
    flashinfer_sampler: bool | None = None  # VLLM_USE_FLASHINFER_SAMPLER; None: unset

    @property
    def gpu(self) -> GpuInfo:
        """The GPU the plan sizes for: the smallest of the group."""
        return min(self.gpus, key=lambda g: g.total_bytes)

    @classmethod
    def from_engine_args(cls, args: EngineArgs, **context) -> "PlanRequest":
        """The plan of EngineArgs as given (what they leave out, the release decides), with the GPUs, release and
        workloads in `context`."""
        request = cls(
            model=args.model_name,
            dtype=args.dtype,
            quantization=args.quantization,
            limit_mm_per_prompt=args.limit_mm_per_prompt,
            **context,
        )
        return request.with_engine_args(args)

    def with_engine_args(self, args: EngineArgs) -> "PlanRequest":
        """This request with each engine setting `args` give in place of its own (a start-up log's, or a
        default), by vLLM's names."""
        given = {
            "tp": args.tensor_parallel_size,
            "pp": args.pipeline_parallel_size,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "max_model_len": args.max_model_len,
            "kv_cache_dtype": args.kv_cache_dtype,
            "max_num_seqs": args.max_num_seqs,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "block_size": args.block_size,
            "enforce_eager": args.enforce_eager,
            "kv_cache_memory": args.kv_cache_memory,
        }
        changes = {name: value for name, value in given.items() if value is not None}
        return replace(self, **changes, block_size_given=self.block_size_given or "block_size" in changes)

    def engine_config(self, max_num_batched_tokens: int, max_num_seqs: int) -> EngineConfig:
        """What the release runs with once its defaults are in and its scheduler limits read: the memory model's
        input (max_model_len is fitted after, to the budget it gives)."""
        return EngineConfig.of(
            model=self.model,
            dtype=self.dtype,
            quantization=self.quantization,
            enforce_eager=self.enforce_eager,
            block_size=self.block_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_memory=self.kv_cache_memory,
            kv_cache_dtype=self.kv_cache_dtype,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            tensor_parallel_size=self.tp,
            pipeline_parallel_size=self.pp,
        )


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

    @property
    def log_lines(self) -> list[str]:
        return vllm_startup.startup_log_lines(self.release, self.v0, self.kv, self.num_cpu_blocks)

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
