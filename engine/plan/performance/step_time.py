"""How long one engine step takes on one rank: per layer, bytes moved over HBM bandwidth against FLOPs over
the tensor-core peak, the all-reduces, and fixed per-layer, per-step and per-request costs."""

import math
from dataclasses import dataclass, field
from functools import cached_property

from kvtool.engine.plan.performance.constants import EFFICIENCIES, Efficiencies
from kvtool.engine.plan.performance.hardware import GpuFigures
from kvtool.engine.plan.performance.model_cost import GemmCost, ModelCost

LOW_PRECISION = ("fp8", "fp4", "int8")


@dataclass(frozen=True)
class StepTime:
    """One step's seconds, and the part of them spent where FLOPs, not bytes, set the pace."""

    seconds: float
    compute_seconds: float = 0.0


@dataclass(frozen=True)
class StepModel:
    cost: ModelCost
    gpu: GpuFigures
    eff: Efficiencies = field(default=EFFICIENCIES)
    overlap_host: bool = False  # vLLM's async scheduling: the next step is planned while this one runs
    _batches: dict = field(default_factory=dict, compare=False, repr=False)
    _last_run: list = field(default_factory=lambda: [None, None], compare=False, repr=False)

    @cached_property
    def _bandwidth(self) -> float:
        return self.gpu.hbm_bytes_per_s * self.eff.hbm

    def step(self, decodes: int, decode_context: int, chunks: list[tuple[int, int]]) -> StepTime:
        """A step that runs `decodes` requests one token each (their KV `decode_context` tokens in all) and
        prefill `chunks` of (new tokens, tokens already cached)."""
        tokens, requests = decodes + sum(new for new, _ in chunks), decodes + len(chunks)
        seconds, compute = self.batch(tokens, requests)
        prefill = self._prefill_attention(chunks) if chunks else 0.0
        device = seconds + prefill + self._decode_attention(decodes, decode_context)
        return StepTime(self._with_host(device, requests), compute + prefill)

    def decode_run(self, decodes: int, decode_context: int) -> tuple[StepTime, float]:
        """The first of a run of decode-only steps of the same requests, and how much longer each next one takes:
        their KV grows a token each (nothing while the overlapped host work is the longer part)."""
        key = (decodes, decode_context)
        if self._last_run[0] != key:
            device = self.batch(decodes, decodes)[0] + self._decode_attention(decodes, decode_context)
            hidden = self.overlap_host and device < self._host(decodes)
            growth = 0.0 if hidden else self.kv_seconds_per_token * decodes
            self._last_run[:] = [key, (self.step(decodes, decode_context, []), growth)]
        return self._last_run[1]

    def _host(self, requests: int) -> float:
        """The step's CPU work: scheduling, input preparation, sampling and output handling."""
        return self.eff.step_overhead_s + requests * self.eff.sequence_overhead_s

    def _with_host(self, device: float, requests: int) -> float:
        host = self._host(requests)
        return max(device, host) if self.overlap_host else device + host

    @cached_property
    def kv_seconds_per_token(self) -> float:
        """A decode step's growth per token of context: the KV the full-attention layers read."""
        return self.cost.full_attention_layers * self.cost.kv_bytes_per_token / self._bandwidth

    def batch(self, tokens: int, requests: int) -> tuple[float, float]:
        """What a step of `tokens` for `requests` costs the GPU besides attention: (seconds, of which FLOP-bound)."""
        key = (tokens, requests)
        if key not in self._batches:
            weights, compute = self._layers(tokens)
            head, head_compute = self._gemm(self.cost.lm_head, requests)
            self._batches[key] = (self._fixed(tokens) + weights + head, compute + head_compute)
        return self._batches[key]

    def _fixed(self, tokens: int) -> float:
        cost, eff = self.cost, self.eff
        allreduce = 2 * cost.layers * self._allreduce(tokens) if cost.tp > 1 else 0.0
        return cost.layers * eff.layer_overhead_s + allreduce

    def _layers(self, tokens: int) -> tuple[float, float]:
        """All layers' GEMMs and elementwise kernels: (seconds, of which FLOP-bound)."""
        cost = self.cost
        dense, dense_flops = self._gemm(cost.dense, tokens)
        dense += cost.dense.launches * self.eff.block_gemm_overhead_s if cost.dense.block_scaled else 0.0
        experts, expert_flops = self._experts(tokens)
        elementwise = tokens * cost.activation_bytes_per_token / self._bandwidth
        return cost.layers * (dense + experts + elementwise), cost.layers * (dense_flops + expert_flops)

    def _gemm(self, gemm: GemmCost, tokens: int, weight_bytes: float | None = None) -> tuple[float, float]:
        """max(weights over bandwidth, FLOPs over the achieved peak): (seconds, seconds if FLOP-bound else 0)."""
        moved = (gemm.weight_bytes if weight_bytes is None else weight_bytes) / self._bandwidth
        computed = tokens * self._flop_seconds(gemm, self._gemm_efficiency(gemm))
        return max(moved, computed), computed if computed > moved else 0.0

    def _experts(self, tokens: int) -> tuple[float, float]:
        """Routed experts as vLLM's fused-MoE kernels run them: the touched experts' weights streamed, each
        expert's rows padded to the kernel's tile, plus the MoE layer's fixed cost. Weight-only experts
        (Marlin, MXFP4 before Blackwell) widen their weights under the same gather-bound tile loop: no extra
        dequantization time."""
        cost, eff = self.cost, self.eff
        if cost.expert is None or tokens == 0:
            return 0.0, 0.0
        touched = expected_distinct_experts(tokens, cost.experts_per_token, cost.num_experts)
        rows = padded_expert_rows(tokens * cost.experts_per_token, touched, moe_tile_rows(tokens, cost.num_experts))
        moved = touched * cost.expert.weight_bytes / (self.gpu.hbm_bytes_per_s * eff.moe_hbm)
        computed = rows * cost.expert.flops_per_token / (self._peak(cost.expert.dtype) * eff.moe_gemm)
        return eff.moe_layer_overhead_s + max(moved, computed), computed if computed > moved else 0.0

    def _gemm_efficiency(self, gemm: GemmCost) -> float:
        """The share of the dtype's peak a dense GEMM reaches: cuBLAS-class in 16 bits and fp8 on Hopper, less
        where blocks of scales are applied between tensor-core steps, and less for Blackwell's 8- and 4-bit."""
        efficiency = self.eff.block_gemm if gemm.block_scaled else self.eff.gemm
        if self.gpu.blackwell and gemm.dtype in LOW_PRECISION:
            return min(efficiency, self.eff.gemm_low_precision_blackwell)
        return efficiency

    def _peak(self, dtype: str) -> float:
        """The dense tensor-core peak for `dtype`, lowered where the board's power limit holds its clocks down."""
        return self.gpu.peak_flops(dtype) * self._power_share

    @cached_property
    def _power_share(self) -> float:
        """The share of its clocks a board keeps under sustained tensor-core work: what its power limit feeds
        at the architecture's FLOPs per watt against what η_gemm of its 16-bit peak would draw (1 where that is
        more than enough, or where no architecture's figure is measured)."""
        per_watt = self.eff.tensor_flops_per_watt.get(self.gpu.arch or "")
        peak = self.gpu.peak_flops("bf16")
        if not (per_watt and peak and self.gpu.board_watts):
            return 1.0
        return min(1.0, per_watt * self.gpu.board_watts / (self.eff.gemm * peak))

    def _flop_seconds(self, gemm: GemmCost, efficiency: float) -> float:
        """Seconds for one token (row) of `gemm` at `efficiency` of the tensor-core peak."""
        seconds = gemm.flops_per_token / (self._peak(gemm.dtype) * efficiency)
        return seconds * (self.eff.dequantize if gemm.dequantize else 1.0)

    def _decode_attention(self, decodes: int, decode_context: int) -> float:
        """The decodes' KV read; a sliding-window layer reads at most the window per request."""
        cost = self.cost
        sliding = min(decode_context, decodes * cost.sliding_window) * cost.sliding_layers
        return decode_context * self.kv_seconds_per_token + sliding * cost.kv_bytes_per_token / self._bandwidth

    def _prefill_attention(self, chunks: list[tuple[int, int]]) -> float:
        """Causal attention of each chunk over its cache and itself; sliding layers see at most the window."""
        cost = self.cost
        pairs = sum(new * cached + new * (new + 1) / 2 for new, cached in chunks) * cost.full_attention_layers
        pairs += sum(new * min(cached + new, cost.sliding_window) for new, cached in chunks) * cost.sliding_layers
        return pairs * cost.attention_flops_per_pair / (self._peak(cost.lm_head.dtype) * self.eff.attention)

    def _allreduce(self, tokens: int) -> float:
        cost = self.cost
        moved = 2 * (cost.tp - 1) / cost.tp * tokens * cost.allreduce_bytes_per_token
        return self.eff.allreduce_latency_s + moved / (self.gpu.link_bytes_per_s(cost.tp) * self.eff.link)


def steps_to_reach(first: float, growth: float, gap: float) -> int:
    """Decode steps until one starts `gap` seconds from now, the first taking `first` and each the next `growth`
    more: the smallest k with k first + growth k (k - 1) / 2 >= gap (at least one)."""
    quadratic, linear = growth / 2, first - growth / 2
    if quadratic <= 0:
        return max(1, math.ceil(gap / linear))
    return max(1, math.ceil((-linear + math.sqrt(linear * linear + 4 * quadratic * gap)) / (2 * quadratic)))


def moe_tile_rows(tokens: int, experts: int) -> int:
    """The rows of one tile of vLLM's fused-MoE GEMM: 16 while a step has no more tokens than experts, else 64
    (fused_moe.py get_default_config, and the tuned configs' choice)."""
    return 16 if tokens <= experts else 64


def padded_expert_rows(routed: float, touched: float, tile: int) -> float:
    """Rows the grouped GEMM computes: each touched expert's tokens rounded up to whole tiles."""
    if touched <= 0:
        return 0.0
    return touched * tile * math.ceil(routed / touched / tile)


def expected_distinct_experts(tokens: int, top_k: int, experts: int) -> float:
    """Experts a batch touches when each of `tokens` routes to `top_k` of `experts` uniformly:
    E x (1 - (1 - k/E)^tokens)."""
    if experts <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)
