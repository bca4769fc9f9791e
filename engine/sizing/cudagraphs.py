"""CUDA-graph memory, following vLLM's own estimate (`v1/worker/gpu_model_runner.py:profile_cudagraph_memory`,
subtracted from the KV budget from 0.20.0): the first capture of each mode (the graph pool), plus each further
captured batch size. A PIECEWISE capture is one CUDA graph per piece between attention (and mamba) layers, a
FULL capture one graph for the whole forward.

The bytes per graph piece are fitted, not derived: vLLM measures them with cudaMemGetInfo around each capture.
0.25 MiB a piece (x 1.6 for MoE layers, x 1.5 for 4-bit weight-only kernels) and 0.1 GiB for the first
capture reproduce the graph memory printed by the public logs in docs/plan.md within about 40 %.
"""

from dataclasses import dataclass

from kvtool.engine.sizing.spec import ModelSpec

MiB, GiB = 1 << 20, 1 << 30
FIRST_CAPTURE_BYTES = GiB // 10
PIECE_BYTES = MiB // 4
MOE_PIECE_FACTOR = 1.6
WEIGHT_ONLY_PIECE_FACTOR = 1.5


@dataclass(frozen=True)
class CaptureRules:
    """The batch sizes a release captures (`config/vllm.py:_set_cudagraph_sizes`); defaults: vLLM 0.33."""

    by_max_num_seqs: bool = True  # 0.10+: up to min(2 x max_num_seqs, largest); 512 before
    step_16: bool = True  # 0.12+: multiples of 8 below 256, of 16 from 256
    full_graphs: bool = True  # 0.11+: FULL_AND_PIECEWISE, FULL graphs for decode batches up to max_num_seqs
    largest: int = 512  # 1024 on data-centre Blackwell from 0.28


def capture_sizes(rules: CaptureRules, max_num_seqs: int, max_num_batched_tokens: int) -> tuple[list[int], list[int]]:
    """(PIECEWISE sizes, FULL sizes) in tokens."""
    cap = min(2 * max_num_seqs, rules.largest) if rules.by_max_num_seqs else 512
    cap = min(cap, max_num_batched_tokens)
    sizes = [size for size in (1, 2, 4) if size <= cap]
    sizes += range(8, min(cap + 1, 256) if rules.step_16 else cap + 1, 8)
    if rules.step_16:
        sizes += range(256, cap + 1, 16)
    full = [size for size in sizes if size <= max_num_seqs] if rules.full_graphs else []
    return sizes, full


def cudagraph_bytes(
    spec: ModelSpec,
    rules: CaptureRules,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    stage_layers: int | None = None,
    weight_only: bool = False,
) -> int:
    """Graph pool and per-graph memory of one GPU's captures (its pipeline stage's layers)."""
    piecewise, full = capture_sizes(rules, max_num_seqs, max_num_batched_tokens)
    layers = stage_layers if stage_layers is not None else spec.num_hidden_layers
    split = spec.num_attention_layers + spec.num_state_layers  # attention and mamba ops split the graph
    split_layers = round(layers * split / max(1, len(spec.layer_types)))
    pieces = len(piecewise) * (split_layers + 1) + len(full)
    per_piece = PIECE_BYTES * (MOE_PIECE_FACTOR if spec.is_moe else 1)
    per_piece *= WEIGHT_ONLY_PIECE_FACTOR if weight_only else 1
    return int(FIRST_CAPTURE_BYTES + pieces * per_piece)
