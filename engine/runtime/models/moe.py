"""Mixture-of-experts decoders: Mixtral (Llama attention) and Qwen3-MoE (Qwen3 attention).

Each MoE layer routes a token to its top-k experts (softmax over the router logits, then the k
largest, renormalised to sum to 1 for Mixtral and for Qwen3-MoE with norm_topk_prob) and runs
them through the `fused_moe` op: a grouped GEMM in Triton, on CPU one matmul per expert over the
tokens sorted to it. Expert weights are stacked, gate and up in one tensor: w13 [E, 2I, H], w2 [E, H, I].
"""

import re

import torch
from torch import nn

from kvtool.engine.runtime.models.llama import LlamaDecoderLayer, LlamaForCausalLM, LlamaMLP
from kvtool.engine.runtime.models.qwen3 import Qwen3Attention

# checkpoint names of one expert's matrices -> (stacked parameter, half of w13 or None)
EXPERT_WEIGHTS = {
    "gate_proj": ("w13", 0),
    "w1": ("w13", 0),
    "up_proj": ("w13", 1),
    "w3": ("w13", 1),
    "down_proj": ("w2", None),
    "w2": ("w2", None),
}
EXPERT_NAME = re.compile(r"(.*\.experts)\.(\d+)\.(\w+)\.weight$")
FUSED_NAMES = {"experts.gate_up_proj": "experts.w13", "experts.down_proj": "experts.w2"}


class FusedExperts(nn.Module):
    def __init__(self, num_experts: int, hidden: int, intermediate: int):
        super().__init__()
        self.w13 = nn.Parameter(torch.empty(num_experts, 2 * intermediate, hidden))
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden, intermediate))


class SparseMoeBlock(nn.Module):
    def __init__(self, config, ops, num_experts: int, intermediate: int, renormalize: bool):
        super().__init__()
        self.gate = nn.Linear(config.hidden_size, num_experts, bias=False)
        self.experts = FusedExperts(num_experts, config.hidden_size, intermediate)
        self.top_k = config.num_experts_per_tok
        self.renormalize = renormalize
        self.ops = ops

    def forward(self, x):
        probs = self.gate(x).float().softmax(dim=-1)
        weights, ids = probs.topk(self.top_k, dim=-1)
        if self.renormalize:
            weights /= weights.sum(dim=-1, keepdim=True)
        return self.ops.fused_moe(x, self.experts.w13, self.experts.w2, weights.to(x.dtype), ids)


class MixtralDecoderLayer(LlamaDecoderLayer):
    def make_mlp(self, config, ops, layer_idx):
        return SparseMoeBlock(config, ops, config.num_local_experts, config.intermediate_size, renormalize=True)


class Qwen3MoeDecoderLayer(LlamaDecoderLayer):
    attention_class = Qwen3Attention

    def make_mlp(self, config, ops, layer_idx):
        sparse = (
            layer_idx not in (config.mlp_only_layers or [])
            and config.num_experts > 0
            and (layer_idx + 1) % config.decoder_sparse_step == 0
        )
        if not sparse:
            return LlamaMLP(config, ops)
        return SparseMoeBlock(config, ops, config.num_experts, config.moe_intermediate_size, config.norm_topk_prob)


class MoeForCausalLM(LlamaForCausalLM):
    def load_weights(self, weights) -> None:
        """Per-expert checkpoint matrices go into their slice of the stacked expert weights."""
        dense = []
        params = dict(self.named_parameters())
        for name, tensor in weights:
            name = name.replace(".block_sparse_moe.", ".mlp.")
            for fused, ours in FUSED_NAMES.items():
                name = name.replace(f".{fused}", f".{ours}")
            match = EXPERT_NAME.match(name)
            if match is None:
                dense.append((name, tensor))
                continue
            prefix, expert, kind = match.groups()
            stacked, half = EXPERT_WEIGHTS[kind]
            target = params[f"{prefix}.{stacked}"].data[int(expert)]
            rows = len(target) // 2
            (target if half is None else target[half * rows : (half + 1) * rows]).copy_(tensor)
        super().load_weights(dense)


class MixtralForCausalLM(MoeForCausalLM):
    layer_class = MixtralDecoderLayer


class Qwen3MoeForCausalLM(MoeForCausalLM):
    layer_class = Qwen3MoeDecoderLayer
