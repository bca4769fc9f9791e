"""A live server's numbers -> findings. The caller reads /metrics and /v1/models; this module takes plain
numbers, builds the same observations a log's /metrics lines give, and explains them as diagnose does."""

from dataclasses import dataclass

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.explain import explain
from kvtool.engine.diagnosis.findings import Diagnosis, Finding, Fix, Observation
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.diagnosis.recognisers import NEAR_FULL_PERCENT
from kvtool.engine.sizing.spec import ModelSpec


@dataclass(frozen=True)
class ServerNumbers:
    """What a server's /metrics and /v1/models say; None when it does not say."""

    source: str  # where they were read, e.g. the /metrics URL
    model: str | None = None
    num_preemptions: float = 0.0  # since the server started
    kv_cache_usage: float | None = None  # 0-1
    num_running: float | None = None
    num_waiting: float | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    mean_prompt_tokens: float | None = None

    def evidence(self) -> str:
        read = {
            "vllm:num_preemptions_total": self.num_preemptions,
            "kv_cache_usage": self.kv_cache_usage,
            "vllm:num_requests_running": self.num_running,
            "vllm:num_requests_waiting": self.num_waiting,
        }
        return f"{self.source}: " + ", ".join(f"{name} {value:g}" for name, value in read.items() if value is not None)


def diagnose_server(numbers: ServerNumbers, spec: ModelSpec | None = None) -> Diagnosis:
    """Preemption and a near-full KV cache, with the fixes diagnose computes, plus a max_tokens cap."""
    context = server_context(numbers)
    memory = MemoryModel.from_context(context, spec)
    findings = explain(observations(numbers), context, memory)
    for finding in findings:
        _add_max_tokens_fix(finding, numbers)
    return Diagnosis(findings, context)


def server_context(numbers: ServerNumbers) -> LogContext:
    return LogContext(
        model=numbers.model,
        max_model_len=numbers.max_model_len,
        num_gpu_blocks=numbers.num_gpu_blocks,
        block_size=numbers.block_size,
        kv_cache_dtype=numbers.kv_cache_dtype,
        gpu_memory_utilization=numbers.gpu_memory_utilization,
        server_up=True,
    )


def observations(numbers: ServerNumbers) -> list[Observation]:
    found, evidence = [], numbers.evidence()
    load = {
        name: value
        for name, value in (("num_running", numbers.num_running), ("num_waiting", numbers.num_waiting))
        if value is not None
    }
    if numbers.num_preemptions > 0:
        found.append(
            Observation("preemption", "runtime", {"num_preemptions": int(numbers.num_preemptions), **load}, evidence)
        )
    if numbers.kv_cache_usage is not None and numbers.kv_cache_usage * 100 >= NEAR_FULL_PERCENT:
        found.append(
            Observation("kv_cache_near_full", "runtime", {"kv_cache_usage": numbers.kv_cache_usage, **load}, evidence)
        )
    return found


def max_tokens_cap(numbers: ServerNumbers) -> int | None:
    """The largest max_tokens with which every running and waiting request fits the cache at once."""
    demand = (numbers.num_running or 0) + (numbers.num_waiting or 0)
    if not (numbers.num_gpu_blocks and numbers.block_size and demand and numbers.mean_prompt_tokens is not None):
        return None
    cap = int(numbers.num_gpu_blocks * numbers.block_size // demand - numbers.mean_prompt_tokens)
    return cap if cap > 0 else None


def _add_max_tokens_fix(finding: Finding, numbers: ServerNumbers) -> None:
    if (cap := max_tokens_cap(numbers)) is None:
        return
    finding.numbers["max_tokens_to_fit_all"] = cap
    demand = int((numbers.num_running or 0) + (numbers.num_waiting or 0))
    action = (
        f"have clients ask for fewer tokens: {demand} requests of ~{numbers.mean_prompt_tokens:.0f} prompt tokens fit"
    )
    finding.fixes.insert(
        1 if finding.fixes and finding.fixes[0].flag == "--max-num-seqs" else 0,
        Fix(action, param="max_tokens", value=cap),
    )
