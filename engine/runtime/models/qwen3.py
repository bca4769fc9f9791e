"""Qwen3: the Llama decoder with an RMSNorm over each query and key head before rotary."""

from kvtool.engine.runtime.models.llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM, RMSNorm


class Qwen3Attention(LlamaAttention):
    def __init__(self, config, ops, cos_sin_cache, layer_idx: int = 0):
        super().__init__(config, ops, cos_sin_cache, layer_idx)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, ops)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, ops)

    def forward(self, positions, x, meta):
        q, k, v = self.qkv_proj(x).split(self.shard_sizes, dim=-1)
        q = self.q_norm(q.reshape(-1, self.num_heads, self.head_dim))
        k = self.k_norm(k.reshape(-1, self.num_kv_heads, self.head_dim))
        q, k = self.rotate(positions, q, k)
        out = self.attn(q, k, v.view(-1, self.num_kv_heads, self.head_dim), meta)
        return self.o_proj(out.reshape(len(x), -1))


class Qwen3DecoderLayer(LlamaDecoderLayer):
    attention_class = Qwen3Attention


class Qwen3ForCausalLM(LlamaForCausalLM):
    layer_class = Qwen3DecoderLayer
