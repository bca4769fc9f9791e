"""The served-performance model's constants: each the achieved share of a datasheet peak, or a fixed cost of
one mechanism (docs/plan.md "Served performance" says which were fitted, and on what)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Efficiencies:
    # Streaming weights and KV through HBM: what a large memcpy-like read reaches of the datasheet figure.
    hbm: float = 0.90
    # Large dense GEMMs (thousands of tokens): what cuBLAS / CUTLASS reach of the dense tensor-core peak.
    gemm: float = 0.75
    # FlashAttention's prefill kernels against the same peak (softmax and masking between the two GEMMs).
    attention: float = 0.50
    # All-reduce payload against one direction of the link (ring / one-shot protocol overheads).
    link: float = 0.80
    # One all-reduce's fixed cost: the cross-GPU barrier and the kernel (vLLM's custom all-reduce or NCCL).
    allreduce_latency_s: float = 20e-6
    # One layer's fixed cost beyond bytes and FLOPs: its ~10 kernel boundaries (launch, ramp-up, tail).
    layer_overhead_s: float = 15e-6
    # One step's fixed cost: scheduling, input preparation, the graph launch, sampling and output handling.
    step_overhead_s: float = 1.0e-3
    # Each scheduled request's share of the step's CPU work (block tables, sampling metadata, outputs).
    sequence_overhead_s: float = 50e-6
    # A request's way in and out of the server: HTTP, tokenization, the engine-core queue, detokenization.
    request_overhead_s: float = 0.04
    # Weight-only 4-bit / 8-bit GEMMs dequantize on CUDA cores inside the tile loop: compute time x this.
    dequantize: float = 1.3


EFFICIENCIES = Efficiencies()
