"""`kvtool bench --offline`: the workload through the embedded engine in this process, no HTTP.

Every request is submitted at once (rate inf); `--max-concurrency` becomes the engine's
max_num_seqs, and `--dtype` / `--quantization` its own. Latencies come from the engine's per-request
timestamps (arrival, first token, last token); there are no chunks, so ITL is each request's mean gap (its TPOT).
With `--vs hf` the same prompts also run through HF transformers `generate` (see hf_baseline).
"""

import time

from rich.table import Table

from kvtool.bench.client import RequestRecord
from kvtool.bench.metrics import summarize
from kvtool.bench.runner import BenchConfig, workload


def run_offline(config: BenchConfig, vs_hf: bool = False, llm=None) -> dict:
    from kvtool.engine.runtime.config import SamplingParams

    samples = workload(config)
    llm = llm or _make_llm(config)
    sampling = dict(config.sampling)
    params = [SamplingParams(max_tokens=s.max_tokens, ignore_eos=config.ignore_eos, **sampling) for s in samples]
    start = time.perf_counter()
    outputs = llm.generate([s.prompt for s in samples], params, use_tqdm=False)
    duration_s = time.perf_counter() - start
    records = [_record(i, output) for i, output in enumerate(outputs)]
    result = {
        "engine": "kvtool",
        "model": llm.engine.model_name,
        "dtype": llm.engine.spec.dtype,
        "summary": summarize(records, duration_s, config.slo, config.percentiles),
    }
    if vs_hf:
        result["hf"] = _hf_result(config, llm, samples)
        result["speedup_vs_hf"] = result["summary"]["output_throughput"] / result["hf"]["output_throughput"]
    return result


def _make_llm(config: BenchConfig):
    from kvtool.engine.runtime.llm import LLM

    engine_args = {"max_num_seqs": config.max_concurrency} if config.max_concurrency else {}
    return LLM(model=config.model or "smollm2", seed=config.seed, **engine_args, **config.engine_args)


def _record(index: int, output) -> RequestRecord:
    completion, times = output.outputs[0], output.metrics
    ttft = times.first_token_time - times.arrival_time
    latency = (times.last_token_time or times.first_token_time) - times.arrival_time
    num_tokens = len(completion.token_ids)
    return RequestRecord(
        index=index,
        request_id=output.request_id,
        max_tokens=num_tokens,
        success=True,
        prompt_tokens=len(output.prompt_token_ids),
        output_tokens=num_tokens,
        usage_reported=True,
        finish_reason=completion.finish_reason,
        ttft=ttft,
        latency=latency,
        chunk_times=[ttft, latency] if num_tokens > 1 else [ttft],
        chunk_tokens=[1, num_tokens - 1] if num_tokens > 1 else [1],
    )


def _hf_result(config: BenchConfig, llm, samples) -> dict:
    from kvtool.bench.hf_baseline import run_hf
    from kvtool.engine.runtime.worker.loader import resolve_model_source

    # the same weights and dtype the engine runs
    folder = resolve_model_source(llm.engine.config.model_config.model).folder
    runs = run_hf(folder, llm.engine.spec.dtype, samples, config.ignore_eos)
    best = runs[0]
    return {
        "best_batch_size": best.batch_size,
        "duration_s": best.duration_s,
        "total_input_tokens": best.input_tokens,
        "total_output_tokens": best.output_tokens,
        "output_throughput": best.output_throughput,
        "by_batch_size": {run.batch_size: run.output_throughput for run in runs},
    }


def offline_table(result: dict) -> Table:
    s = result["summary"]
    table = Table(title=f"kvtool bench --offline: {result['model']}, {result['dtype']}", title_justify="left")
    for heading in ("engine", "requests", "out tokens", "seconds", "out tok/s", "mean TTFT ms", "mean TPOT ms"):
        table.add_column(heading, justify="right")
    table.add_row(
        "kvtool",
        str(s["completed"]),
        str(s["total_output_tokens"]),
        f"{s['duration']:.2f}",
        f"{s['output_throughput']:.1f}",
        f"{s['mean_ttft_ms']:.0f}",
        f"{s['mean_tpot_ms']:.1f}",
    )
    if "hf" in result:
        hf = result["hf"]
        table.add_row(
            f"HF batch {hf['best_batch_size']}",
            str(s["completed"]),
            str(hf["total_output_tokens"]),
            f"{hf['duration_s']:.2f}",
            f"{hf['output_throughput']:.1f}",
            "",
            "",
        )
        table.caption = f"kvtool / HF output throughput: {result['speedup_vs_hf']:.2f}x"
    return table
