"""The served-performance model's constants: each the achieved share of a datasheet peak, or a fixed cost of
one mechanism (docs/plan.md "Served performance" says which were fitted, and on what)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Efficiencies:
    # Streaming weights and KV through HBM: what a large memcpy-like read reaches of the datasheet figure.
    hbm: float = 0.90
    # Large dense GEMMs (thousands of tokens): what cuBLAS / CUTLASS reach of the dense tensor-core peak.
    gemm: float = 0.75
    # 16-bit dense tensor-core FLOP/s a board sustains per watt of its power limit, by architecture: a board
    # whose limit feeds less than `gemm` of its peak runs its GEMMs at lower clocks (Hopper: the H100 PCIe's
    # prefill steps, 350 W; docs/plan.md says how it was set). Architectures without a measured figure are
    # taken to hold their clocks.
    tensor_flops_per_watt: dict[str, float] = field(default_factory=lambda: {"sm90": 1.2e12})
    # Blackwell's fp8 and fp4 GEMMs, measured as vLLM's linear op on B200 (0.19 - 0.24): the share of the fp8 /
    # fp4 datasheet peak they reach (its bf16 GEMMs stay near the Hopper share).
    gemm_low_precision_blackwell: float = 0.45
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
    # Block-scaled fp8 GEMMs (128 x 128 weight blocks; DeepGEMM, CUTLASS or Triton) apply each K block's scales
    # between tensor-core steps and quantize their input per 128 values first, measured as vLLM's linear op on
    # H100, H200 and B200: the share of the fp8 peak they reach,
    block_gemm: float = 0.45
    # and what each launch costs beyond a 16-bit GEMM's (the quantization kernel, the small-batch path).
    block_gemm_overhead_s: float = 20e-6
    # Weight-only 4-bit / 8-bit GEMMs dequantize on CUDA cores inside the tile loop: compute time x this.
    dequantize: float = 1.3
    # vLLM's fused-MoE kernels (Triton fused_moe, FlashInfer / CUTLASS grouped GEMM, Marlin MoE), measured as
    # vLLM's own MoE layer on H100, H200 and B200 (docs/plan.md "Served performance", the fused-MoE kernels):
    # the share of the HBM peak they reach streaming the experts a batch touches,
    moe_hbm: float = 0.80
    # the share of the tensor-core peak their grouped GEMMs reach at prefill sizes (rows gathered by token,
    # small tiles, one expert's rows at a time),
    moe_gemm: float = 0.22
    # and one MoE layer's fixed cost: top-k, sorting the tokens by expert, the grouped GEMMs' launch and tail,
    # the weighted reduce.
    moe_layer_overhead_s: float = 25e-6


EFFICIENCIES = Efficiencies()
