"""`kvtool plan` as a library: model + GPU + settings in, memory budget and KV-cache plan out."""

from dataclasses import asdict, dataclass, field, replace

from kvtool.engine.plan.advice import recommendations, warnings
from kvtool.engine.sizing import kv_cache, vllm_startup
from kvtool.engine.sizing.gguf_spec import engine_quantization
from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.memory_budget import MemoryBudget, memory_budget, resolve_dtype
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import VllmRelease
from kvtool.errors import UsageError

CONCURRENCY_COLUMNS = (16, 64)


@dataclass(frozen=True)
class Workload:
    name: str
    prompt_tokens: int
    output_tokens: int


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
    vllm_version: str | None = None  # None: the newest release modelled
    limit_mm_per_prompt: dict[str, int] | None = None
    block_size_given: bool = False


@dataclass(frozen=True)
class WorkloadFit:
    workload: Workload
    kv_bytes_per_sequence: int
    sequences_that_fit: int
    vram_bytes: dict[int, int]  # concurrent sequences -> GPU memory they need (non-KV + their KV), per GPU


@dataclass(frozen=True)
class PlanReport:
    spec: ModelSpec
    request: PlanRequest
    dtype: str
    max_num_seqs: int
    max_num_batched_tokens: int
    budget: MemoryBudget
    kv: kv_cache.KVCachePlan
    fp8_kv: kv_cache.KVCachePlan
    workloads: list[WorkloadFit]
    recommendations: dict
    warnings: list[str]
    release: VllmRelease = VllmRelease()
    v0: bool = False
    checks: list[vllm_startup.StartupCheck] = field(default_factory=list)
    num_cpu_blocks: int = 0

    @property
    def fits(self) -> bool:
        """Would the engine start: every start-up check passes, within the model's context."""
        checks_pass = all(check.passed for check in self.checks) if self.checks else self.kv.fits
        return checks_pass and self.kv.max_model_len <= self.spec.derived_max_model_len

    @property
    def failed_check(self) -> vllm_startup.StartupCheck | None:
        return next((check for check in self.checks if not check.passed), None)


def make_plan(spec: ModelSpec, request: PlanRequest) -> PlanReport:
    kv_cache.check_parallel_sizes(spec, request.tp, request.pp)
    release = VllmRelease.parse(request.vllm_version)
    _check_kv_cache_dtype(release, request.kv_cache_dtype)
    gpu = min(request.gpus, key=lambda g: g.total_bytes)
    v0 = release.uses_v0(request.kv_cache_dtype, gpu.compute_capability)
    request = _fill_defaults(request, spec, release, gpu)
    batched, seqs = _scheduler_limits(request, spec, release, v0, gpu)
    budget = memory_budget(
        spec,
        gpu.total_bytes,
        request.gpu_memory_utilization,
        request.tp,
        request.pp,
        request.dtype,
        request.quantization,
        batched,
        seqs,
        request.enforce_eager,
        request.kv_cache_memory,
        _budget_rules(spec, request, release, v0, batched, seqs),
        other_process_bytes=gpu.total_bytes - gpu.free_bytes if gpu.free_bytes is not None else 0,
    )
    dtype = "float32" if cpu_engine_quantizes(spec, request) else resolve_dtype(request.dtype, spec.dtype)
    mixed = "full_attention" in spec.layer_types and "sliding_attention" in spec.layer_types
    rules = vllm_startup.kv_rules(release, v0, request.pp, mixed)
    kv_args = dict(block_size=request.block_size, tp=request.tp, pp=request.pp, max_num_batched_tokens=batched)
    run_spec = replace(spec, dtype=dtype)
    max_model_len = kv_cache.resolve_max_model_len(
        run_spec,
        request.max_model_len,
        budget.kv_cache_bytes,
        kv_cache_dtype=request.kv_cache_dtype,
        rules=rules,
        **kv_args,
    )
    kv = kv_cache.plan_kv_cache(
        budget.kv_cache_bytes, run_spec, max_model_len, kv_cache_dtype=request.kv_cache_dtype, rules=rules, **kv_args
    )
    fp8 = kv_cache.plan_kv_cache(
        budget.kv_cache_bytes, run_spec, max_model_len, kv_cache_dtype="fp8", rules=rules, **kv_args
    )
    estimate = kv_cache.estimate_max_model_len(
        kv.available_bytes, run_spec, kv_cache_dtype=request.kv_cache_dtype, limit=max_model_len, rules=rules, **kv_args
    )
    checks = vllm_startup.startup_checks(release, v0, budget, kv, gpu, estimate)
    fits = [_workload_fit(run_spec, w, budget, request, {**kv_args, "rules": rules}) for w in request.workloads]
    report = PlanReport(
        run_spec,
        request,
        dtype,
        seqs,
        batched,
        budget,
        kv,
        fp8,
        fits,
        {},
        [],
        release,
        v0,
        checks,
        vllm_startup.cpu_swap_blocks(v0, kv.block_bytes),
    )
    return replace(report, recommendations=recommendations(report), warnings=warnings(report, gpu))


def cpu_engine_quantizes(spec, request) -> bool:
    """A KV budget given outright is the CPU engine's case, which keeps a GGUF file's weights quantized by
    default and then computes in float32 (gguf_spec.engine_quantization)."""
    if request.kv_cache_memory is None:
        return False
    return engine_quantization(spec.source, "cpu", request.dtype, request.quantization) == "gguf"


def _check_kv_cache_dtype(release: VllmRelease, kv_cache_dtype: str) -> None:
    choices = release.kv_cache_dtypes()
    if kv_cache_dtype not in choices:
        raise UsageError(
            f"vLLM {release.name} does not accept --kv-cache-dtype {kv_cache_dtype}.",
            f"Use one of: {', '.join(choices)}.",
        )


def _fill_defaults(request: PlanRequest, spec: ModelSpec, release: VllmRelease, gpu: GpuInfo) -> PlanRequest:
    """The release's utilization and block size for the model and GPU; a named GPU or size stands for
    every GPU of the tp x pp group."""
    from kvtool.engine.sizing.defaults import DEFAULT_BLOCK_SIZE, default_gpu_memory_utilization

    if request.gpu_memory_utilization is None:
        request = replace(request, gpu_memory_utilization=default_gpu_memory_utilization(release.name))
    if request.block_size is None:
        size = release.mla_block_size(gpu.arch) if spec.is_mla else DEFAULT_BLOCK_SIZE
        request = replace(request, block_size=size)
    if len(request.gpus) < request.tp * request.pp:
        request = replace(request, gpus=[request.gpus[0]] * (request.tp * request.pp))
    return request


def _scheduler_limits(
    request: PlanRequest, spec: ModelSpec, release: VllmRelease, v0: bool, gpu: GpuInfo
) -> tuple[int, int]:
    length = _numeric_length(request.max_model_len) or spec.derived_max_model_len
    multimodal = bool(spec.modalities)
    chunked = vllm_startup.v0_chunked_prefill(release, length, bool(spec.sliding_window), spec.is_mla, multimodal)
    default_batched, default_seqs = vllm_startup.scheduler_limits(
        release, v0, gpu.total_bytes, gpu.name, gpu.arch, length, not chunked, multimodal
    )
    return request.max_num_batched_tokens or default_batched, request.max_num_seqs or default_seqs


def _numeric_length(value) -> int | None:
    try:
        given = value is not None and str(value).strip() not in ("auto", "-1")
        return kv_cache.parse_human_int(value) if given else None
    except UsageError:
        return None


def _budget_rules(spec: ModelSpec, request: PlanRequest, release: VllmRelease, v0: bool, batched: int, seqs: int):
    rules = vllm_startup.budget_rules(release, v0)
    limits = request.limit_mm_per_prompt
    if spec.modalities and limits is not None:
        per_prompt = sum(limits.get(m, 0) for m in spec.modalities)
        fit = max(1, max(batched, spec.mm_tokens_per_item) // spec.mm_tokens_per_item) if per_prompt else 0
        rules = replace(rules, encoder_items=min(fit, seqs * per_prompt))
    return rules


def _workload_fit(
    spec: ModelSpec, workload: Workload, budget: MemoryBudget, request: PlanRequest, kv_args
) -> WorkloadFit:
    length = workload.prompt_tokens + workload.output_tokens
    per_sequence = kv_cache.request_kv_bytes(spec, length, kv_cache_dtype=request.kv_cache_dtype, **kv_args)
    block = kv_cache.block_bytes(spec, request.block_size, request.kv_cache_dtype, request.tp, request.pp)
    usable = max(0, budget.kv_cache_bytes - block)
    vram = {n: budget.non_kv_cache_bytes + n * per_sequence for n in CONCURRENCY_COLUMNS}
    return WorkloadFit(workload, per_sequence, usable // per_sequence if per_sequence else 0, vram)


def report_to_json(report: PlanReport) -> dict:
    """The `kvtool plan --json` contract (docs/design.md)."""
    kv, budget, spec = report.kv, report.budget, report.spec
    gpu = min(report.request.gpus, key=lambda g: g.total_bytes)
    return {
        "kv_bytes_per_token": kv.kv_bytes_per_token,
        "kv_bytes_per_token_fp8": report.fp8_kv.kv_bytes_per_token,
        "block_size": kv.block_size,
        "block_bytes": kv.block_bytes,
        "num_blocks": kv.num_blocks,
        "kv_cache_tokens": kv.kv_cache_tokens,
        "max_model_len": kv.max_model_len,
        "safe_max_model_len": kv.safe_max_model_len,
        "fits": report.fits,
        "max_concurrency": round(kv.max_concurrency, 4),
        "request_kv_bytes": kv.request_bytes,
        "max_num_seqs": report.max_num_seqs,
        "max_num_batched_tokens": report.max_num_batched_tokens,
        "memory": {
            "total_bytes": budget.total_bytes,
            "gpu_memory_utilization": budget.gpu_memory_utilization,
            "requested_bytes": budget.requested_bytes,
            "budget_bytes": budget.requested_bytes,
            "weights_bytes": budget.weights_bytes,
            "activation_bytes": budget.activation_bytes,
            "non_torch_bytes": budget.non_torch_bytes,
            "cudagraph_bytes": budget.cudagraph_bytes,
            "kv_cache_bytes": budget.kv_cache_bytes,
            "kv_cache_gib": round(budget.kv_cache_bytes / GiB, 2),
            "encoder_bytes": budget.encoder_bytes,
            "other_process_bytes": budget.other_process_bytes,
        },
        "model": _model_json(spec, report),
        "gpu": {
            **{k: v for k, v in asdict(gpu).items() if k != "processes"},
            "count": len(report.request.gpus),
            "tensor_parallel_size": report.request.tp,
            "pipeline_parallel_size": report.request.pp,
            "processes": [asdict(p) for p in gpu.processes],
        },
        "workloads": [_workload_json(fit) for fit in report.workloads],
        "recommendations": report.recommendations,
        "warnings": report.warnings,
        "vllm": {
            "version": report.release.name,
            "engine": "V0" if report.v0 else "V1",
            "num_cpu_blocks": report.num_cpu_blocks,
            "log_lines": log_lines(report),
            "checks": [
                {"name": c.name, "passed": c.passed, **({"message": c.message} if not c.passed else {})}
                for c in report.checks
            ],
        },
    }


def log_lines(report: PlanReport) -> list[str]:
    return vllm_startup.startup_log_lines(report.release, report.v0, report.kv, report.num_cpu_blocks)


def _model_json(spec: ModelSpec, report: PlanReport) -> dict:
    fields = (
        "name",
        "model_type",
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "derived_max_model_len",
        "num_parameters",
        "sliding_window",
        "kv_lora_rank",
        "num_experts",
        "quantization",
        "source",
        "modalities",
        "mm_tokens_per_item",
    )
    facts = {name: getattr(spec, name) for name in fields}
    kinds = {kind: spec.layer_types.count(kind) for kind in dict.fromkeys(spec.layer_types)}
    return {**facts, "dtype": report.dtype, "kv_cache_dtype": report.request.kv_cache_dtype, "layer_types": kinds}


def _workload_json(fit: WorkloadFit) -> dict:
    return {
        "name": fit.workload.name,
        "prompt_tokens": fit.workload.prompt_tokens,
        "output_tokens": fit.workload.output_tokens,
        "kv_bytes_per_sequence": fit.kv_bytes_per_sequence,
        "sequences_that_fit": fit.sequences_that_fit,
        "vram_bytes": {str(n): b for n, b in fit.vram_bytes.items()},
    }
