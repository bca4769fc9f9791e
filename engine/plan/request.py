"""What a plan is asked: the engine settings as the planner reads them (PlanRequest, filled from EngineArgs by
vLLM's names), the GPUs and release it is for (PlanTarget), and the workloads to price."""

from dataclasses import dataclass, field, replace

from kvtool.engine.sizing.defaults import DEFAULT_VLLM_INSTALL
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.engine_config import EngineConfig
from kvtool.engine.sizing.gpus import GpuInfo
from kvtool.engine.sizing.vllm_versions import VllmRelease


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
    vllm_install: str = DEFAULT_VLLM_INSTALL  # its Docker image or a pip wheel


@dataclass(frozen=True)
class PlanRequest:
    gpus: list[GpuInfo]
    model: str = ""  # as the user named it (an alias or path), for the serve commands
    tp: int = 1
    pp: int = 1
    dp: int = 1  # data-parallel ranks, each a tp x pp group of its own
    expert_parallel: bool = False  # MoE experts split whole over tp x dp ranks
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
    install: str = DEFAULT_VLLM_INSTALL  # how vLLM was installed: its Docker image or a pip wheel

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
            "dp": args.data_parallel_size,
            "expert_parallel": args.enable_expert_parallel,
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
            data_parallel_size=self.dp,
            enable_expert_parallel=self.expert_parallel,
            async_scheduling=self.release.reached("async_scheduling") and self.pp == 1,
        )
