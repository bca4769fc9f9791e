"""The options of `kvtool plan` beside the engine flags it shares with serve (engine_options.py): the log to
answer from, the model, the GPUs and parallel sizes, the release and its install, the workloads, the served
performance forecast's load and the output.
"""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.engine_options import BYTE_SIZE, COUNT, ENGINE, INSTALLS, MODEL
from kvtool.engine.plan.performance.load import DEFAULT_NUM_PROMPTS
from kvtool.engine.sizing import defaults
from kvtool.engine.sizing.vllm_versions import DEFAULT_RELEASE_NAME, NEWEST_NAME

GPU, WORKLOAD, OUTPUT, LOG = "GPU", "Workload", "Output", "From a start-up log"
PERFORMANCE = "Served performance (with --workload)"

FromLog = Annotated[
    Path | None,
    typer.Option(
        "--from-log",
        help="A vLLM start-up log: what it measured, answered for the settings given here (the others as in the log).",
        rich_help_panel=LOG,
    ),
]

Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Catalog name or alias, HF id, config.json, model folder or .gguf file "
        f"\\[default: {defaults.DEFAULT_MODEL}; with --from-log the log's].",
        rich_help_panel=MODEL,
    ),
]

Gpu = Annotated[
    str | None,
    typer.Option(
        help="A GPU name (H100-80GB, L4, ...), device indices (0,1), or local \\[default: the local devices].",
        rich_help_panel=GPU,
    ),
]

GpuMem = Annotated[str | None, typer.Option(help="Memory of one GPU, e.g. 23.58GiB or 80GB.", rich_help_panel=GPU)]

NumGpus = Annotated[
    int | None, typer.Option(click_type=COUNT, help="How many GPUs \\[default: tp x pp].", rich_help_panel=GPU)
]

TensorParallelSize = Annotated[
    int | None,
    typer.Option(
        "--tp",
        "--tensor-parallel-size",
        click_type=COUNT,
        help="Tensor-parallel size \\[default: 1].",
        rich_help_panel=GPU,
    ),
]

PipelineParallelSize = Annotated[
    int | None,
    typer.Option(
        "--pp",
        "--pipeline-parallel-size",
        click_type=COUNT,
        help="Pipeline-parallel size \\[default: 1].",
        rich_help_panel=GPU,
    ),
]

DataParallelSize = Annotated[
    int | None,
    typer.Option(
        "--dp",
        "--data-parallel-size",
        click_type=COUNT,
        help="Data-parallel ranks, each a tp x pp group \\[default: 1].",
        rich_help_panel=GPU,
    ),
]

EnableExpertParallel = Annotated[
    bool | None,
    typer.Option(
        "--enable-expert-parallel",
        help="Split a MoE model's experts whole over tp x dp ranks (each rank runs them on every DP rank's "
        "tokens) \\[default: no].",
        rich_help_panel=GPU,
    ),
]

GpuFree = Annotated[
    int | None,
    typer.Option(
        click_type=BYTE_SIZE,
        help="Memory other processes leave free on each GPU, e.g. 60GiB \\[default: NVML's reading].",
        rich_help_panel=GPU,
    ),
]

VllmVersion = Annotated[
    str | None,
    typer.Option(
        help=f"The vLLM release to predict, 0.2 to {NEWEST_NAME} (V0 before 0.8) "
        f"\\[default: {DEFAULT_RELEASE_NAME}; with --from-log the log's].",
        rich_help_panel=ENGINE,
    ),
]

VllmInstall = Annotated[
    str,
    typer.Option(
        help="How vLLM was installed: its Docker image, or a pip wheel (0.8 - 0.11.0: without FlashInfer, so the "
        f"sampler warm-up sorts in PyTorch) \\[default: {defaults.DEFAULT_VLLM_INSTALL}].",
        click_type=INSTALLS,
        show_default=False,
        rich_help_panel=ENGINE,
    ),
]

BlockSize = Annotated[
    int | None,
    typer.Option(
        click_type=COUNT, help="Tokens per KV block \\[default: 16; 64 for MLA models].", rich_help_panel=ENGINE
    ),
]

EnforceEager = Annotated[
    bool | None,
    typer.Option(
        "--enforce-eager/--no-enforce-eager",
        help="No CUDA graphs (their memory goes to the KV cache) \\[default: no].",
        rich_help_panel=ENGINE,
    ),
]

LimitMmPerPrompt = Annotated[
    str | None,
    typer.Option(
        help="Items per prompt by modality: image=2,audio=0 or '{\"image\": 2}' \\[default: vLLM's].",
        rich_help_panel=ENGINE,
    ),
]

Workloads = Annotated[
    list[str] | None,
    typer.Option(
        help="PROMPT:OUTPUT tokens, e.g. 6144:2048 (repeatable) \\[default: the shipped profiles].",
        rich_help_panel=WORKLOAD,
    ),
]

MaxConcurrency = Annotated[
    str | None,
    typer.Option(
        help="Clients of a closed loop, or a list: 1,8,32 (vllm bench serve's --max-concurrency).",
        rich_help_panel=PERFORMANCE,
    ),
]

RequestRate = Annotated[
    str | None,
    typer.Option(
        help="Poisson requests per second, a list, or inf: all at once \\[default: inf].", rich_help_panel=PERFORMANCE
    ),
]

NumPrompts = Annotated[
    int | None,
    typer.Option(
        click_type=COUNT, help=f"Requests per run \\[default: {DEFAULT_NUM_PROMPTS}].", rich_help_panel=PERFORMANCE
    ),
]

Lengths = Annotated[
    str | None,
    typer.Option(
        help="How lengths spread about IN:OUT: fixed (vllm bench serve's random dataset), uniform:R (its "
        "--random-range-ratio) or exponential (a chat dataset such as ShareGPT) \\[default: fixed].",
        rich_help_panel=PERFORMANCE,
    ),
]

Slo = Annotated[
    str | None,
    typer.Option(
        help="Targets, e.g. ttft_p99=2s,tpot_mean=50ms: adds the most clients and the highest rate that meet them.",
        rich_help_panel=PERFORMANCE,
    ),
]

GpuBandwidth = Annotated[
    float | None,
    typer.Option(
        min=1.0, help="The GPU's memory bandwidth in GB/s, where the catalog has none.", rich_help_panel=PERFORMANCE
    ),
]

GpuTflops = Annotated[
    str | None,
    typer.Option(
        help="The GPU's dense tensor-core TFLOP/s, where the catalog has none: 312, or bf16=312,fp8=624.",
        rich_help_panel=PERFORMANCE,
    ),
]

AsJson = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.", rich_help_panel=OUTPUT)]

ListModels = Annotated[
    bool, typer.Option("--list-models", help="List the model catalog and exit.", rich_help_panel=OUTPUT)
]

ListGpus = Annotated[bool, typer.Option("--list-gpus", help="List the GPU catalog and exit.", rich_help_panel=OUTPUT)]
