"""Gemma 2 and Gemma 3 (text): the Llama decoder with Gemma's changes.

- RMSNorm scales by (1 + weight): the offset is added to the weights once, at load time;
- a norm after attention and after the MLP as well as before each (four per layer);
- embeddings scaled by sqrt(hidden_size), GeGLU (tanh-approximated GELU) MLP;
- attention scale query_pre_attn_scalar ** -0.5, sliding-window layers between global ones;
- Gemma 2: attention-logit and final-logit soft-capping;
- Gemma 3: RMSNorm on each query and key head, a RoPE base (and scaling) per layer type.
"""

import torch
import torch.nn.functional as F
from torch import nn

from kvtool.engine.runtime.models.llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM, LlamaModel, RMSNorm


class GemmaAttention(LlamaAttention):
    def __init__(self, config, ops, cos_sin_cache, layer_idx: int = 0):
        super().__init__(config, ops, cos_sin_cache, layer_idx)
        self.attn.scale = config.query_pre_attn_scalar**-0.5
        self.attn.logits_soft_cap = getattr(config, "attn_logit_softcapping", None)
        self.q_norm = self.k_norm = None
        if config.model_type == "gemma3_text":
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, ops)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, ops)

    def forward(self, positions, x, meta):
        q, k, v = self.qkv_proj(x).split(self.shard_sizes, dim=-1)
        q = q.reshape(-1, self.num_heads, self.head_dim)
        k = k.reshape(-1, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = self.rotate(positions, q, k)
        out = self.attn(q, k, v.view(-1, self.num_kv_heads, self.head_dim), meta)
        return self.o_proj(out.reshape(len(x), -1))


class GemmaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.shard_sizes = [config.intermediate_size] * 2
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.gelu(gate, approximate="tanh") * up)


class GemmaDecoderLayer(LlamaDecoderLayer):
    attention_class = GemmaAttention

    def __init__(self, config, ops, cos_sin_cache, layer_idx: int = 0):
        super().__init__(config, ops, cos_sin_cache, layer_idx)
        self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, ops)
        self.post_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, ops)

    def make_mlp(self, config, ops, layer_idx):
        return GemmaMLP(config)

    def forward(self, positions, x, residual, meta):
        if residual is None:
            residual, x = x, self.input_layernorm(x)
        else:
            x, residual = self.input_layernorm(x, residual)
        x = self.post_attention_layernorm(self.self_attn(positions, x, meta))
        x, residual = self.pre_feedforward_layernorm(x, residual)
        return self.post_feedforward_layernorm(self.mlp(x)), residual


class GemmaModel(LlamaModel):
    def __init__(self, config, ops, cos_sin_caches, layer_class):
        super().__init__(config, ops, cos_sin_caches, layer_class)
        self.embed_scale = config.hidden_size**0.5

    def embed_input_ids(self, input_ids):
        x = self.embed_tokens(input_ids)
        return x * torch.tensor(self.embed_scale, dtype=x.dtype)

    def forward(self, input_ids, positions, meta, inputs_embeds=None):
        x, residual = self.embed_input_ids(input_ids) if inputs_embeds is None else inputs_embeds, None
        for layer in self.layers:
            x, residual = layer(positions, x, residual, meta)
        return x + residual


class Gemma2ForCausalLM(LlamaForCausalLM):
    model_class = GemmaModel
    layer_class = GemmaDecoderLayer

    def __init__(self, config, ops, max_positions: int):
        super().__init__(config, ops, max_positions)
        self.final_logit_softcapping = getattr(config, "final_logit_softcapping", None)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = super().compute_logits(hidden)
        if self.final_logit_softcapping:
            logits = torch.tanh(logits / self.final_logit_softcapping) * self.final_logit_softcapping
        return logits

    def load_weights(self, weights) -> None:
        """Gemma's norms scale by (1 + weight): store the sum."""
        super().load_weights(
            (name, tensor + 1.0 if name.endswith("norm.weight") else tensor) for name, tensor in weights
        )


class Gemma3ForCausalLM(Gemma2ForCausalLM):
    pass
