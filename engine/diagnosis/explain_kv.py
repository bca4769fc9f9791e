"""The KV cache cannot hold one request of max_model_len: the length that fits, and what each fix gives, sized on
the run's budget as vLLM measured it where the paste shows it (measured.py).

The length a KV budget holds comes from kvtool's KV model of the model where that model reproduces vLLM's own
estimate for this run (to a block, or AGREEMENT), or where vLLM printed none; else from vLLM's estimate scaled
by the memory (exact for full attention, an estimate for sliding-window and hybrid models and for a pipeline
split kvtool does not know)."""

from dataclasses import dataclass

from kvtool.engine.diagnosis.context import LogContext
from kvtool.engine.diagnosis.findings import Finding, Fix, Numbers, Observation
from kvtool.engine.diagnosis.measured import DERIVED, ESTIMATED, MEASURED, RunBudget, run_budget
from kvtool.engine.diagnosis.memory_model import MemoryModel
from kvtool.engine.sizing.defaults import HIGHEST_ADVISED_UTILIZATION
from kvtool.engine.sizing.memory_budget import utilization_for

AGREEMENT = 0.02  # kvtool's length within this of vLLM's estimate: its KV model is this run's
SMALLEST_PROFILING_BATCH = 512
PRINTED_GIB_ROUNDING = 0.005  # vLLM prints sizes to two decimals


@dataclass(frozen=True)
class Lengths:
    """The longest request a KV budget holds, for the run of a failure whose numbers are `n`."""

    memory: MemoryModel
    available_gib: float | None  # the run's KV budget
    printed: int | None  # vLLM's estimate for it
    limit: int | None  # the max_model_len asked for: no fix needs more
    own: bool  # kvtool's KV model holds for this run

    @classmethod
    def of(cls, n: dict, memory: MemoryModel) -> "Lengths":
        available, printed, limit = n.get("kv_available_gib"), n.get("estimated_max_model_len"), n.get("max_model_len")
        own = memory.spec is not None and available is not None and available > 0
        if own and printed:
            mine = memory.max_len_for(available, limit=limit) or 0
            own = abs(mine - printed) <= max(memory.block_size, AGREEMENT * printed)
        return cls(memory, available, printed, limit, own)

    def fits(self, kv_gib: float, kv_cache_dtype: str | None = None) -> tuple[int | None, str]:
        """(the longest request a KV budget of `kv_gib` holds, its source); None where nothing tells."""
        if self.own:
            return self.memory.max_len_for(kv_gib, kv_cache_dtype, limit=self.limit), DERIVED
        if not self.printed or not self.available_gib:
            return None, ESTIMATED
        factor = self.memory.fp8_factor() if kv_cache_dtype == "fp8" else 1
        scaled = int(self.printed * factor * kv_gib / self.available_gib)
        return min(self.memory.round_down(scaled)[0], self.limit or scaled), ESTIMATED


def kv_cache_too_small(obs: Observation, context: LogContext, memory: MemoryModel) -> Finding:
    n = Numbers(obs.numbers)
    limit = n.get("max_model_len") or context.max_model_len
    if limit:
        n["max_model_len"] = limit
    if "kv_available_gib" not in n and context.available_kv_gib is not None:
        n.put("kv_available_gib", context.available_kv_gib, MEASURED)
    if "kv_cache_tokens" in n and limit:
        n["kv_shortfall_tokens"] = limit - n["kv_cache_tokens"]
    budget, lengths = run_budget(context, memory), Lengths.of(n, memory)
    asked = f"max_model_len {limit} tokens" if limit else "max_model_len (the paste does not show it)"
    summary = f"The KV cache cannot hold one request of {asked}, so the engine refuses to start."
    fixes = []
    if estimate := _estimate(n, lengths):
        n["max_model_len_block"], n["max_model_len_1024"] = memory.round_down(estimate)
        summary += f" About {estimate} tokens fit."
        fixes.append(Fix("lower the context to what fits", flag="--max-model-len", value=n["max_model_len_1024"]))
    fixes += _more_kv_memory(n, memory, budget)
    fixes.append(smaller_profiling_batch(n, memory, budget, lengths))
    fixes += _fp8(n, memory, lengths, limit)
    fixes.append(_tensor_parallel(n, lengths))
    return Finding(obs.category, obs.stage, summary, n, fixes, obs.evidence, obs.span)


def _estimate(n: Numbers, lengths: Lengths) -> int | None:
    """vLLM's estimate where printed; else what the KV budget holds, V0's token count, or 0.8.5's needed and
    available memory scaled (full attention scales linearly)."""
    if n.get("estimated_max_model_len"):
        return n["estimated_max_model_len"]
    if lengths.available_gib and (fits := lengths.fits(lengths.available_gib))[0]:
        return n.put("estimated_max_model_len", *fits)
    if "kv_cache_tokens" in n:  # v0 and the computed case: the whole cache in tokens
        return n.put("estimated_max_model_len", n["kv_cache_tokens"], DERIVED)
    if n.get("kv_needed_gib"):  # the low end of what the two-decimal sizes allow
        available, needed = n["kv_available_gib"] - PRINTED_GIB_ROUNDING, n["kv_needed_gib"] + PRINTED_GIB_ROUNDING
        scaled = int(n["max_model_len"] * available / needed)
        return n.put("estimated_max_model_len", lengths.memory.round_down(scaled)[0], ESTIMATED)
    return None


def _more_kv_memory(n: Numbers, memory: MemoryModel, budget: RunBudget) -> list[Fix]:
    """The utilization whose share of the GPU holds the KV cache one request needs."""
    needed, available = n.get("kv_needed_gib"), n.get("kv_available_gib")
    if needed is None and memory.spec and available is not None and n.get("max_model_len"):
        needed = n.put("kv_needed_gib", memory.needed_gib(n["max_model_len"]), DERIVED)
    if needed is not None and available is not None:
        n["kv_shortfall_gib"] = round(needed - available, 2)
    total = budget.total_gib
    if "kv_shortfall_gib" not in n or not total or total <= 0:
        more = f"{n['kv_shortfall_gib']} GiB " if "kv_shortfall_gib" in n else ""
        action = f"give the KV cache {more}more of the GPU (give --gpu-mem to compute the value)"
        return [Fix(action, flag="--gpu-memory-utilization", value=None)]
    inputs = [budget.sources[name] for name in ("total_gpu_gib", "gpu_memory_utilization")]
    n.put("total_gpu_gib", total, inputs[0])
    n.put("gpu_memory_utilization", budget.utilization, inputs[1])
    target = utilization_for(budget.utilization * total + n["kv_shortfall_gib"], total)
    n.put("gpu_memory_utilization_needed", target, ESTIMATED if ESTIMATED in inputs else DERIVED)
    if target > HIGHEST_ADVISED_UTILIZATION:  # no headroom left for anything else: not a fix
        return []
    action = f"give the KV cache {n['kv_shortfall_gib']} GiB more of the {total} GiB GPU"
    return [Fix(action, flag="--gpu-memory-utilization", value=target)]


def smaller_profiling_batch(n: Numbers, memory: MemoryModel, budget: RunBudget, lengths: Lengths | None = None) -> Fix:
    """The profiling run's activation peak, which grows with max_num_batched_tokens, is taken from the KV budget:
    half the batch gives back what its forward pass took of it."""
    half = max(SMALLEST_PROFILING_BATCH, budget.batched_tokens // 2)
    action = "shrink the profiling batch: its activation peak comes out of the KV cache budget"
    chunks = ", with --enable-chunked-prefill (without it V0 needs a batch of max_model_len)" * budget.unchunked_v0
    saved = budget.activation_saved_gib(memory, half)
    if not saved or saved <= 0:
        return Fix(action + chunks, flag="--max-num-batched-tokens", value=half)
    n.put("max_num_batched_tokens", budget.batched_tokens, budget.sources["max_num_batched_tokens"])
    n.put("activation_peak_gib", budget.activation_gib, budget.sources["activation_peak_gib"])
    n.put("activation_saved_gib", saved, ESTIMATED)
    action += f" (about {saved} GiB back at {half} tokens"
    if lengths and lengths.available_gib and (fits := lengths.fits(lengths.available_gib + saved))[0]:
        n.put("batched_tokens_max_model_len", fits[0], ESTIMATED)
        action += f": max_model_len {fits[0]} fits"
    return Fix(action + ")" + chunks, flag="--max-num-batched-tokens", value=half)


def _fp8(n: Numbers, memory: MemoryModel, lengths: Lengths, limit: int) -> list[Fix]:
    factor = memory.fp8_factor()
    if factor <= 1:
        return []
    n["fp8_kv_token_factor"] = factor
    fp8_len, source = lengths.fits(lengths.available_gib, "fp8") if lengths.available_gib else (None, ESTIMATED)
    if not fp8_len and n.get("estimated_max_model_len"):
        fp8_len = min(n["estimated_max_model_len"] * factor, limit or n["estimated_max_model_len"] * factor)
    if fp8_len:
        n.put("fp8_estimated_max_model_len", fp8_len, source)
    starts = (
        f"max_model_len {limit} starts" if fp8_len and limit and fp8_len >= limit else f"max_model_len {fp8_len} starts"
    )
    action = f"store the KV cache in fp8: the same memory holds {factor}x the tokens"
    return [Fix(f"{action}: {starts}" if fp8_len else action, flag="--kv-cache-dtype", value="fp8")]


def _tensor_parallel(n: Numbers, lengths: Lengths) -> Fix:
    memory = lengths.memory
    tp = memory.tp * 2
    split = (
        "the weights (MLA's latent KV is not split)"
        if memory.spec and memory.spec.is_mla
        else "the weights and of the KV heads"
    )
    action = f"shard the model over {tp} GPUs: each keeps 1/{tp} of {split}"
    if lengths.own and (fits := memory.max_len_for(lengths.available_gib, tp=tp)):
        n.put(f"tp{tp}_estimated_max_model_len", fits, ESTIMATED)
        action += f" (at least {memory.round_down(fits)[0]} tokens fit)"
    return Fix(action, flag="--tensor-parallel-size", value=tp)
