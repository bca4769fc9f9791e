"""The `kvtool plan --json` contract (docs/design.md): a PlanReport as one JSON object."""

from dataclasses import asdict

from kvtool.engine.plan.planner import PlanReport, WorkloadFit
from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.units import GiB


def report_to_json(report: PlanReport) -> dict:
    """The `kvtool plan --json` contract (docs/design.md)."""
    kv, budget, spec, band = report.kv, report.budget, report.spec, report.kv_range
    gpu = report.request.gpu
    return {
        "kv_bytes_per_token": kv.kv_bytes_per_token,
        "kv_bytes_per_token_fp8": report.fp8_kv.kv_bytes_per_token,
        "block_size": kv.block_size,
        "block_bytes": kv.block_bytes,
        "num_blocks": kv.num_blocks,
        "kv_cache_tokens": kv.kv_cache_tokens,
        "kv_cache_tokens_range": list(band.tokens),
        "kv_cache_bytes_range": list(band.bytes),
        "max_model_len": kv.max_model_len,
        "safe_max_model_len": kv.safe_max_model_len,
        "safe_max_model_len_range": list(band.safe_max_model_len),
        "fits": report.fits,
        "fits_margin": report.fits_margin.to_json(),
        "max_concurrency": round(kv.max_concurrency, 4),
        "max_concurrency_range": list(band.max_concurrency),
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
            "kv_headroom_bytes": budget.kv_headroom_bytes,
            "ranges": {name: list(ends) for name, ends in band.parts.items()},
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
            "log_lines": report.log_lines,
            "checks": [
                {"name": c.name, "passed": c.passed, **({"message": c.message} if not c.passed else {})}
                for c in report.checks
            ],
        },
        **({"from_log": report.from_log.to_json()} if report.from_log else {}),
    }


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
