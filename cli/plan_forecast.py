"""The glue from `kvtool plan`'s report to the served-performance forecast: the loads and the SLO parsed, the
GPU's datasheet figures found, the KV capacity and scheduler limits taken from the plan."""

import math

from kvtool.cli.plan_performance import PerformanceOptions
from kvtool.engine.plan.performance.forecast import Forecast, forecast, forecast_json
from kvtool.engine.plan.performance.hardware import GpuFigures, catalog_figures, parse_tflops, with_given
from kvtool.engine.plan.performance.lengths import parse_lengths
from kvtool.engine.plan.performance.load import DEFAULT_NUM_PROMPTS, Load
from kvtool.engine.plan.performance.predict import ServingSetup
from kvtool.engine.plan.performance.slo import parse_slo
from kvtool.engine.plan.request import PlanRequest, Workload
from kvtool.engine.sizing.engine_args import EngineArgs
from kvtool.engine.sizing.vllm_versions import DEFAULT_RELEASE_NAME, VllmRelease
from kvtool.errors import UsageError

NOT_STARTED = "served performance: not predicted, the engine would not start with these settings."


def parse_loads(options: PerformanceOptions) -> list[Load]:
    """One load per --max-concurrency x --request-rate value, as one `vllm bench serve` run each."""
    prompts, lengths = options.num_prompts or DEFAULT_NUM_PROMPTS, parse_lengths(options.lengths)
    clients = _values(options.max_concurrency, "--max-concurrency", int) or [None]
    rates = _values(options.request_rate, "--request-rate", float) or [math.inf]
    return [Load(prompts, rate, client, lengths=lengths) for client in clients for rate in rates]


def _values(text: str | None, flag: str, kind) -> list:
    if text is None:
        return []
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) <= 0 or (kind is int and math.inf in values):
        raise UsageError(f"{flag} '{text}' is not a list of positive numbers.", f"Use e.g. {flag} 1,8,32.")
    return values


def plan_forecast(report, workloads, options: PerformanceOptions, gpu_given: str | None) -> Forecast | None:
    """The forecast of each workload under each load, on the plan's GPU and KV cache; None when the engine
    would not start."""
    loads, slo = parse_loads(options), parse_slo(options.slo) if options.slo is not None else None
    _check_lengths(workloads, report.kv.max_model_len)
    _check_parallelism(report.request)
    if not report.fits:
        return None
    setup = serving_setup(report, gpu_figures(report, options, gpu_given))
    return forecast(setup, workloads, loads, slo, report.release.version)


def _check_parallelism(request) -> None:
    """One tensor-parallel group is what the forecast models: pipeline stages, data-parallel ranks and expert
    parallelism are refused, not forecast as if absent."""
    unmodelled = {
        "pipeline parallelism": ("--pp", request.pp > 1),
        "data parallelism": ("--dp", request.dp > 1),
        "expert parallelism": ("--enable-expert-parallel", request.expert_parallel),
    }
    for name, (flag, given) in unmodelled.items():
        if given:
            raise UsageError(f"served performance is not modelled with {name}.", f"Drop {flag}, or --workload.")


def serving_setup(report, figures: GpuFigures) -> ServingSetup:
    """The forecast's inputs from a plan report: the EngineConfig it planned with and the KV pool it sized."""
    return ServingSetup(report.spec, figures, report.engine_config, report.kv.kv_bytes_per_token, report.kv.num_blocks)


def planned_setup(args: EngineArgs, gpu: str, vllm_version: str | None = None) -> ServingSetup:
    """The forecast's inputs for `args` on a GPU named as `kvtool plan --gpu` names it, planned as plan plans
    it (the settings not given are the release's defaults). The KV pool is taken as planned even where the
    default max_model_len would not start: a server that ran chose a length that does."""
    from kvtool.engine.discovery.gpus import resolve_gpus
    from kvtool.engine.discovery.models import resolve_model_spec
    from kvtool.engine.plan.planner import make_plan

    release = VllmRelease.parse(vllm_version or DEFAULT_RELEASE_NAME)
    request = PlanRequest.from_engine_args(args, gpus=resolve_gpus(gpu, None, None), release=release)
    report = make_plan(resolve_model_spec(args.model_name), request)
    return serving_setup(report, gpu_figures(report, PerformanceOptions(), gpu))


def gpu_figures(report, options: PerformanceOptions, gpu_given: str | None) -> GpuFigures:
    """The datasheet of the planned GPU, with the figures given on the command line in place of it."""
    dtype = "fp16" if report.spec.dtype == "float16" else "bf16"
    given = gpu_given.split(",")[0] if gpu_given else None
    figures = with_given(
        catalog_figures(report.request.gpu.name, given), options.gpu_bandwidth, parse_tflops(options.gpu_tflops, dtype)
    )
    lacking = {"--gpu-bandwidth": figures.hbm_gbps is None, "--gpu-tflops": figures.peak_flops(dtype) is None}
    if any(lacking.values()):
        missing = " and ".join(flag for flag, lacks in lacking.items() if lacks)
        raise UsageError(
            f"the catalog has no {dtype} datasheet figures for '{figures.name}'.",
            f"Give {missing} from its datasheet (e.g. --gpu-bandwidth 3350 --gpu-tflops 989).",
        )
    return figures


def _check_lengths(workloads: list[Workload], max_model_len: int) -> None:
    for workload in workloads:
        if workload.prompt_tokens < 1 or workload.output_tokens < 1:
            raise UsageError(
                f"--workload {workload.name} needs at least one prompt and one output token for served performance.",
                "Use e.g. --workload 1024:512.",
            )
        if workload.prompt_tokens + workload.output_tokens > max_model_len:
            raise UsageError(
                f"--workload {workload.name}: {workload.prompt_tokens} + {workload.output_tokens} tokens exceed "
                f"max_model_len {max_model_len}; vLLM would refuse every request.",
                "Shorten the workload or raise --max-model-len.",
            )


def add_to_json(payload: dict, result: Forecast | None) -> dict:
    """The plan JSON with `performance` and `slo`, and the forecast's note among the warnings."""
    if result is None:
        payload["warnings"] = [*payload.get("warnings", []), NOT_STARTED]
        return payload | {"performance": [], "slo": []}
    payload |= forecast_json(result)
    if result.note:
        payload["warnings"] = [*payload.get("warnings", []), result.note]
    return payload
