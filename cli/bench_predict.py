"""`kvtool bench --predict`: kvtool plan's forecast of the run just measured, beside what was measured, so an
operator sees the model's error on their own hardware."""

from typing import Annotated

import typer

from kvtool.errors import UsageError

PREDICT = "Predict"
NO_GPU = "--predict needs the GPU the server runs on."

Predict = Annotated[
    bool,
    typer.Option(
        "--predict",
        help="Beside each run, what kvtool plan forecasts for it (the served model on --gpu, --tp).",
        rich_help_panel=PREDICT,
    ),
]
Gpu = Annotated[
    str | None,
    typer.Option(help="--predict: the server's GPU, as kvtool plan --gpu names it.", rich_help_panel=PREDICT),
]
Tp = Annotated[
    int, typer.Option("--tp", min=1, help="--predict: the server's tensor-parallel size.", rich_help_panel=PREDICT)
]
VllmVersion = Annotated[
    str | None,
    typer.Option(help="--predict: the server's vLLM release \\[default: kvtool plan's].", rich_help_panel=PREDICT),
]


def check_options(predict: bool, gpu: str | None, offline: bool) -> None:
    """Before any load is sent: --predict forecasts a server on a named GPU."""
    if not predict:
        if gpu is not None:
            raise UsageError("--gpu names the server's GPU for --predict.", "Add --predict, or drop --gpu.")
        return
    if offline:
        raise UsageError("--predict forecasts a vLLM server, not the embedded engine offline.", "Drop --offline.")
    if gpu is None:
        raise UsageError(NO_GPU, "Add e.g. --gpu H100-80GB (and --tp when it runs tensor-parallel).")
    _check_datasheet(gpu)


def _check_datasheet(gpu: str) -> None:
    from kvtool.engine.plan.performance.hardware import catalog_figures
    from kvtool.engine.sizing.gpus import find_gpu

    name = gpu.split(",")[0]
    if not name.strip().isdigit() and name.strip().lower() not in ("local", "all"):
        if catalog_figures(find_gpu(name).name, name).hbm_gbps is None:
            raise UsageError(
                f"the catalog has no datasheet figures for '{name}' to forecast with.",
                "kvtool plan --workload takes them with --gpu-bandwidth and --gpu-tflops.",
            )


def predicted(result, gpu: str, tp: int, vllm_version: str | None) -> dict[str, float]:
    """kvtool plan's `vllm bench serve` metrics for the run: the served model on the GPU, with the run's own
    prompt and output lengths (its means where it recorded none) and its load."""
    from kvtool.cli.plan_forecast import planned_setup
    from kvtool.engine.plan.performance.lengths import Lengths
    from kvtool.engine.plan.performance.load import Load
    from kvtool.engine.plan.performance.predict import predict
    from kvtool.engine.sizing.engine_args import EngineArgs

    config, summary = result.config, result.summary
    done = max(1, summary["completed"])
    setup = planned_setup(EngineArgs(model=result.model, tensor_parallel_size=tp), gpu, vllm_version)
    measured = tuple((r.prompt_tokens, r.output_tokens) for r in result.records if r.success and r.output_tokens)
    lengths = Lengths(listed=measured) if measured else Lengths()
    load = Load(done, config.request_rate, config.max_concurrency, config.burstiness, config.seed, lengths)
    shape = (round(summary["total_input_tokens"] / done), max(1, round(summary["total_output_tokens"] / done)))
    return predict(setup, *shape, load).metrics
