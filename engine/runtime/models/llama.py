"""The Llama-family decoder (Llama, Mistral, Qwen2, SmolLM, Phi-3) on the paged KV cache.

Weights keep HF names, except that q/k/v and gate/up projections are packed into one matrix each
(`qkv_proj`, `gate_up_proj`) so that a layer runs two matmuls fewer; Phi-3 checkpoints come packed.
Other families subclass these modules (qwen3.py, gemma.py, moe.py).
"""

import torch
from torch import nn

from kvtool.engine.runtime.layers.attention import AttentionMetadata, PagedAttention
from kvtool.engine.runtime.models.rotary import build_cos_sin_cache, head_dim, rotary_dim
from kvtool.engine.sizing import hf_config

# HF weight name -> (packed parameter, shard index)
LAYER_KINDS = ("full_attention", "sliding_attention")
PACKED_SHARDS = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, ops):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps
        self.ops = ops

    def forward(self, x, residual=None):
        return self.ops.rms_norm(x, self.weight, self.eps, residual)


def layer_types(config) -> tuple[str, ...]:
    """Each layer's attention kind ("full_attention" or "sliding_attention"), as `kvtool plan` reads it."""
    return hf_config.layer_types(config.to_dict(), config.num_hidden_layers)


def sliding_window(config, layer_idx: int) -> int | None:
    """The window of a sliding layer (it sees its last `window` tokens, itself included); None for full layers."""
    window = getattr(config, "sliding_window", None)
    if layer_types(config)[layer_idx] != "sliding_attention" or getattr(config, "use_sliding_window", None) is False:
        return None
    return window or None


class LlamaAttention(nn.Module):
    def __init__(self, config, ops, cos_sin_cache, layer_idx: int = 0):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = head_dim(config)
        self.rotary_dim = rotary_dim(config)
        self.shard_sizes = [self.num_heads * self.head_dim] + [self.num_kv_heads * self.head_dim] * 2
        qkv_bias = config.model_type == "qwen2" or getattr(config, "attention_bias", False)
        self.qkv_proj = nn.Linear(config.hidden_size, sum(self.shard_sizes), bias=qkv_bias)
        o_bias = getattr(config, "attention_bias", False) and config.model_type != "qwen2"
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=o_bias)
        self.attn = PagedAttention(ops, self.head_dim**-0.5, sliding_window(config, layer_idx))
        self.ops = ops
        self.cos_sin_cache = cos_sin_cache

    def forward(self, positions, x, meta: AttentionMetadata):
        q, k, v = self.qkv_proj(x).split(self.shard_sizes, dim=-1)
        q = q.view(-1, self.num_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        q, k = self.rotate(positions, q, k)
        out = self.attn(q, k, v, meta)
        return self.o_proj(out.reshape(len(x), -1))

    def rotate(self, positions, q, k):
        if self.rotary_dim == self.head_dim:
            return self.ops.rotary_embedding(positions, q, k, self.cos_sin_cache)
        r = self.rotary_dim  # partial rotary: the rest of each head passes through
        q_rot, k_rot = self.ops.rotary_embedding(positions, q[..., :r], k[..., :r], self.cos_sin_cache)
        return torch.cat((q_rot, q[..., r:]), -1), torch.cat((k_rot, k[..., r:]), -1)


class LlamaMLP(nn.Module):
    def __init__(self, config, ops):
        super().__init__()
        bias = getattr(config, "mlp_bias", False)
        self.shard_sizes = [config.intermediate_size] * 2
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=bias)
        self.ops = ops

    def forward(self, x):
        return self.down_proj(self.ops.silu_and_mul(self.gate_up_proj(x)))


class LlamaDecoderLayer(nn.Module):
    attention_class = LlamaAttention

    def __init__(self, config, ops, cos_sin_cache, layer_idx: int = 0):
        super().__init__()
        self.self_attn = self.attention_class(config, ops, cos_sin_cache, layer_idx)
        self.mlp = self.make_mlp(config, ops, layer_idx)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, ops)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, ops)

    def make_mlp(self, config, ops, layer_idx):
        return LlamaMLP(config, ops)

    def forward(self, positions, x, residual, meta):
        if residual is None:
            residual, x = x, self.input_layernorm(x)
        else:
            x, residual = self.input_layernorm(x, residual)
        x = self.self_attn(positions, x, meta)
        x, residual = self.post_attention_layernorm(x, residual)
        return self.mlp(x), residual


class LlamaModel(nn.Module):
    def __init__(self, config, ops, cos_sin_caches: dict, layer_class=LlamaDecoderLayer, norm_class=RMSNorm):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        kinds = layer_types(config)
        self.layers = nn.ModuleList(
            layer_class(config, ops, cos_sin_caches.get(kinds[i], cos_sin_caches.get(None)), i)
            for i in range(config.num_hidden_layers)
        )
        self.norm = norm_class(config.hidden_size, config.rms_norm_eps, ops)
        self.fused_decode = None  # set by the model runner where every layer can run in one C call

    def embed_input_ids(self, input_ids):
        """What the first layer takes for these token ids (a client's prompt embeddings replace it)."""
        return self.embed_tokens(input_ids)

    def forward(self, input_ids, positions, meta, inputs_embeds=None):
        x, residual = self.embed_input_ids(input_ids) if inputs_embeds is None else inputs_embeds, None
        if self.fused_decode is not None and self.fused_decode.applies(x, meta):
            return self.fused_decode(x, positions, meta)
        for layer in self.layers:
            x, residual = layer(positions, x, residual, meta)
        return x + residual  # the final norm runs in compute_logits, on the rows that need logits


class LlamaForCausalLM(nn.Module):
    model_class = LlamaModel
    layer_class = LlamaDecoderLayer

    def __init__(self, config, ops, max_positions: int):
        super().__init__()
        self.config = config
        # fp32, kept out of .to(dtype); one per layer type when the config keys RoPE by layer type
        self.cos_sin_caches = {
            kind: build_cos_sin_cache(config, max_positions, kind)
            for kind in (getattr(config, "rope_parameters", None) or {})
            if kind in LAYER_KINDS
        }
        if not self.cos_sin_caches:
            self.cos_sin_caches[None] = build_cos_sin_cache(config, max_positions)
        self.model = self.model_class(config, ops, self.cos_sin_caches, self.layer_class)
        self.tie_word_embeddings = bool(getattr(config, "tie_word_embeddings", False))
        # A tied output layer is still its own module, sharing the embedding's weight, so that the
        # CPU path can swap every linear layer alike.
        self.lm_head = nn.Linear(
            config.hidden_size, config.vocab_size, bias=False, device="meta" if self.tie_word_embeddings else None
        )
        if self.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, positions, meta: AttentionMetadata, inputs_embeds=None) -> torch.Tensor:
        return self.model(input_ids, positions, meta, inputs_embeds)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model.norm(hidden)).float()

    def decode_logits(self, input_ids, positions, meta: AttentionMetadata) -> torch.Tensor | None:
        """compute_logits(forward(...)) of a step whose every row is sampled, in one C call where the fused
        decode step takes it, else None."""
        fused = self.model.fused_decode
        if fused is None or not fused.gives_logits(meta):
            return None
        return fused.logits(input_ids, positions, meta)

    def bind_kv_cache(self, k_caches, v_caches, k_scale=1.0, v_scale=1.0) -> None:
        for layer, k_cache, v_cache in zip(self.model.layers, k_caches, v_caches):
            attn = layer.self_attn.attn
            attn.k_cache, attn.v_cache, attn.k_scale, attn.v_scale = k_cache, v_cache, k_scale, v_scale

    def load_weights(self, weights) -> None:
        """Copy (HF name, tensor) pairs in, packing q/k/v and gate/up; a tied lm_head is skipped."""
        params = dict(self.named_parameters())
        for name, tensor in weights:
            if name == "lm_head.weight" and self.tie_word_embeddings:
                continue
            target, offset = self._locate(name, params)
            target.data[offset : offset + tensor.shape[0]].copy_(tensor)

    def _locate(self, name, params):
        for hf_part, (packed, shard) in PACKED_SHARDS.items():
            if f".{hf_part}." in name:
                module = self.get_submodule(name.rsplit(f".{hf_part}.", 1)[0])
                sizes = module.shard_sizes
                return params[name.replace(hf_part, packed)], sum(sizes[:shard])
        if name not in params:
            raise KeyError(f"unexpected weight {name}")
        return params[name], 0
