"""The real vLLM serving measurements kvtool's served-performance model is checked against, and kvtool's
forecast of each, planned as `kvtool plan` plans it.

`serving_measurements.jsonl` holds 213 runs, each copied from a public, pinned source named in its
`source_url` (and `source_row_id` where the source has one):

* 198 rows of NVIDIA AIConfigurator's `silicon_sample.csv` (ai-dynamo/aiconfigurator at 095f58a5): vLLM
  0.12 on H100 SXM (Qwen3-32B, Llama-3.1-70B FP8) and H200 SXM (Llama-3.1-70B FP8), tp 1 - 8, fixed
  input / output lengths, closed loops of 4 - 144 clients; one TTFT and one TPOT per run. The source
  states neither the number of requests (planned here as 10 per client) nor the release of the Llama rows
  (planned as 0.12).
* 15 rows of GPUStack's performance-lab documents (gpustack/gpustack at 47277d7): `vllm bench serve` result
  blocks, vLLM 0.11, Qwen3-8B / 14B / 32B on one H100, ShareGPT prompts (planned at their measured mean
  lengths, spread exponentially about them: `dataset`) or random ones (every prompt the same length), in a
  closed loop of 1 - 8 clients or 100 - 1,000 prompts at once (saturation).
  `gpu_planned` says which datasheet the row is planned with; `gpu_note` why, where it is not the name the
  source gives.
"""

import json
import math
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kvtool.cli.plan_forecast import planned_setup
from kvtool.engine.plan.performance.lengths import Lengths
from kvtool.engine.plan.performance.load import Load
from kvtool.engine.plan.performance.predict import predict
from kvtool.engine.sizing.engine_args import EngineArgs

DATA = Path(__file__).with_name("serving_measurements.jsonl")
REQUESTS_PER_CLIENT = 10  # AIConfigurator's rows do not say how many requests a run sent
UNSTATED_RELEASE = "0.12.0"


@dataclass(frozen=True)
class Comparison:
    row: dict
    figure: str  # ttft, tpot or output_throughput
    kvtool: float
    measured: float

    @property
    def error(self) -> float:
        return self.kvtool / self.measured - 1


@cache
def rows() -> tuple[dict, ...]:
    return tuple(json.loads(line) for line in DATA.read_text().splitlines() if line.strip())


def row(row_id: str) -> dict:
    return next(r for r in rows() if r["id"] == row_id)


def saturated(item: dict) -> bool:
    return item["regime"] == "saturation"


@cache
def _setup(model: str, gpu: str, tp: int, quantization: str | None, release: str):
    args = EngineArgs(model=model, quantization=quantization, tensor_parallel_size=tp)
    return planned_setup(args, gpu, release)


@cache
def forecast(row_id: str) -> dict[str, float]:
    """kvtool's `vllm bench serve` metrics for one measured run."""
    item = row(row_id)
    release = item["engine_version"] if item["engine_version"][0].isdigit() else UNSTATED_RELEASE
    setup = _setup(item["model"], item["gpu_planned"], item["tp"], item["quantization"], release)
    clients = item["max_concurrency"]
    lengths = Lengths("exponential" if item.get("dataset", "").startswith("ShareGPT") else "fixed")
    load = Load(item["num_prompts"] or REQUESTS_PER_CLIENT * clients, math.inf, clients, lengths=lengths)
    return predict(setup, item["input_tokens"], item["output_tokens"], load).metrics


def comparisons(row_id: str) -> list[Comparison]:
    """What each run is judged on: output throughput at saturation (TTFT there is mostly queueing), else TTFT
    and TPOT (the means where the source gives `vllm bench serve`'s, else its one figure)."""
    item, predicted = row(row_id), forecast(row_id)
    measured = item["metrics"]
    if saturated(item):
        return [Comparison(item, "output_throughput", predicted["output_throughput"], measured["output_throughput"])]
    return [
        Comparison(
            item, name, predicted[f"mean_{name}_ms"], measured.get(f"{name}_ms", measured.get(f"mean_{name}_ms"))
        )
        for name in ("ttft", "tpot")
    ]


def median_error(figure: str, in_saturation: bool) -> float:
    errors = [
        abs(c.error)
        for r in rows()
        if saturated(r) == in_saturation
        for c in comparisons(r["id"])
        if c.figure == figure
    ]
    return statistics.median(errors)


def errors(figure: str) -> list[float]:
    return [abs(c.error) for r in rows() for c in comparisons(r["id"]) if c.figure == figure]
