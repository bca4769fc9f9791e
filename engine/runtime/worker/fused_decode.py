"""All the decoder layers of a small decode step in one C call (kernels/cpu/decode_step.c).

The C code runs the kernels the Python layers call, in their order, so a step gives what they give,
bit for bit; what goes away is the Python between the kernels (about half a batch-1 step). It is taken
for a plain Llama-family model on the CPU kernels whose linear layers are dense with column panels
or plain weights kept, or kept quantized (GGUF, fp32), a KV cache in the model's dtype or bf16, one KV cache
group, and a decode-only step of no more rows than the kernels take (`PackedLinear.panel_rows` or
`plain_rows`; quantized codes at any row count); every other step runs the
layers. Where every row is sampled and the output layer is one the C code computes, the same call also
gathers the embeddings and ends with the final norm and the output layer (`logits`): after a step has
streamed every weight, the Python of each torch op runs cold, so those three cost about 0.4 ms at batch 1
(docs/engine.md). The C side (the structs the step reads, the linear layers and shapes it computes) is
kernels/cpu_decode_step.py, which `get_ops` hands out as `decode_step` where the C kernels run.
"""

import ctypes

import torch

from kvtool.engine.runtime.layers.attention import AttentionMetadata
from kvtool.engine.runtime.models.llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM, LlamaMLP, RMSNorm


class FusedDecode:
    def __init__(self, model: LlamaForCausalLM, kernel):
        self.kernel = kernel  # kernels/cpu_decode_step.py, as get_ops gives it
        self.layers = list(model.model.layers)
        first = self.layers[0]
        self.attn, self.mlp = first.self_attn, first.mlp
        self.dtype = first.input_layernorm.weight.dtype
        self.max_rows = min(kernel.row_limit(linear) for layer in self.layers for linear in _linears(layer))
        self._bound: tuple[int, ctypes.Array] | None = None  # (first K cache's address, the Layer structs)
        self._buffers: dict[int, list[torch.Tensor]] = {}  # rows -> residual and scratch
        self.embed, self.norm, self.lm_head = model.model.embed_tokens.weight, model.model.norm, model.lm_head
        self.logits_rows = min(self.max_rows, kernel.row_limit(self.lm_head)) if self._fuses_output_layer() else 0
        self._outputs: dict[int, tuple] = {}  # rows -> x, the output layer's bf16 out (or None), the logits

    @classmethod
    def for_model(cls, model, ops) -> "FusedDecode | None":
        """A FusedDecode where the kernels `ops` have the step and the model is one it gives the same results
        for, else None."""
        kernel = ops.decode_step
        if type(model) is not LlamaForCausalLM or kernel is None:
            return None
        return cls(model, kernel) if all(_plain_layer(layer, kernel) for layer in model.model.layers) else None

    def applies(self, x: torch.Tensor, meta: AttentionMetadata) -> bool:
        return x.dtype == self.dtype and self._takes(meta, self.max_rows)

    def gives_logits(self, meta: AttentionMetadata) -> bool:
        """Whether `logits` takes this step (the caller knows that every row is sampled)."""
        return self._takes(meta, self.logits_rows)

    def _takes(self, meta: AttentionMetadata, max_rows: int) -> bool:
        cache = self.layers[0].self_attn.attn.k_cache
        return (
            meta.num_prefills == 0
            and 0 < meta.num_decodes <= max_rows
            and not meta.group_metadata
            and cache is not None
            and cache.is_contiguous()
            and cache.dtype in (self.dtype, torch.bfloat16)
        )

    def __call__(self, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """x + residual after every layer, for the embeddings `x` of a decode step (x is overwritten and returned)."""
        step, held = self._step(x, positions, meta)
        self._run(step, len(x))
        return x

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """compute_logits of every row of a decode step of `input_ids`, as fp32 [rows, vocab]; the tensor is
        this object's, overwritten by the next step."""
        ids = _contiguous(input_ids, torch.int64)
        x, head_out, logits = self._output_buffers(len(ids))
        step, held = self._step(x, positions, meta)
        step.input_ids, step.embed, step.final_norm = ids.data_ptr(), self.embed.data_ptr(), self.norm.weight.data_ptr()
        step.lm_head, step.vocab = self.kernel.linear_struct(self.lm_head), logits.shape[1]
        step.head_out, step.logits = self.kernel.address(head_out), logits.data_ptr()
        self._run(step, len(ids))
        return logits

    def _step(self, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> tuple:
        """The Step of the layers, and the tensors it points at: the caller holds them until the C code returns."""
        rows, hidden = x.shape
        held = [
            _contiguous(positions, torch.int64),
            _contiguous(meta.slot_mapping, torch.int64),
            _contiguous(meta.decode_block_tables, torch.int32),
            _contiguous(meta.decode_context_lens, torch.int32),
            x,
            *self._scratch(rows),
        ]
        step = self.kernel.Step(
            ctypes.addressof(self._layer_structs()),
            len(self.layers),
            rows,
            hidden,
            self.attn.num_heads,
            self.attn.num_kv_heads,
            self.attn.head_dim,
            self.mlp.shard_sizes[0],
            self.attn.attn.k_cache.shape[1],
            held[2].shape[1],
            self.layers[0].input_layernorm.eps,
            self.attn.attn.scale,
            self.kernel.DTYPE_CODES[x.dtype],
            torch.get_num_threads(),
            self.kernel.DTYPE_CODES[self.attn.attn.k_cache.dtype],
            *(t.data_ptr() for t in held),
        )
        return step, held

    def _run(self, step, rows: int) -> None:
        self.kernel.run(step, rows)

    def _scratch(self, rows: int) -> list[torch.Tensor]:
        """The residual and the scratch buffers for `rows` rows, made once per row count: after a step has
        streamed every weight, each tensor made anew costs tens of microseconds of cold code."""
        if rows not in self._buffers:
            attn, hidden = self.attn, self.layers[0].input_layernorm.weight.shape[0]
            q, kv = attn.num_heads * attn.head_dim, attn.num_kv_heads * attn.head_dim
            sizes = (hidden, hidden, q + 2 * kv, q, kv, q, 2 * self.mlp.shard_sizes[0], self.mlp.shard_sizes[0])
            self._buffers[rows] = [torch.empty(rows, size, dtype=self.dtype) for size in sizes]
        return self._buffers[rows]

    def _output_buffers(self, rows: int) -> tuple:
        """The embeddings, the output layer's out where the step is not fp32 (its logits are widened from it; a
        quantized output layer is in an fp32 step) and the fp32 logits of `rows` rows, made once."""
        if rows not in self._outputs:
            hidden, vocab = self.embed.shape[1], self.lm_head.out_features
            head_out = None if self.dtype == torch.float32 else torch.empty(rows, vocab, dtype=self.dtype)
            logits = torch.empty(rows, vocab, dtype=torch.float32)
            self._outputs[rows] = torch.empty(rows, hidden, dtype=self.dtype), head_out, logits
        return self._outputs[rows]

    def _fuses_output_layer(self) -> bool:
        """An output layer the C code computes after the final norm of the layers' eps, and embeddings to gather."""
        return (
            type(self.norm) is RMSNorm
            and self.norm.eps == self.layers[0].input_layernorm.eps
            and self.norm.weight.dtype == self.dtype
            and self.embed.dtype == self.dtype
            and self.embed.is_contiguous()
            and self.kernel.fusable(self.lm_head, self.dtype)
        )

    def _layer_structs(self) -> ctypes.Array:
        """The Layer structs, made again when the KV cache was (re)allocated."""
        address = self.layers[0].self_attn.attn.k_cache.data_ptr()
        if self._bound is None or self._bound[0] != address:
            layers = (_layer(layer, self.kernel) for layer in self.layers)
            self._bound = address, (self.kernel.Layer * len(self.layers))(*layers)
        return self._bound[1]


def _plain_layer(layer, kernel) -> bool:
    """A Llama layer as llama.py has it, every linear one the C step computes, shapes the kernels take."""
    attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    if type(layer) is not LlamaDecoderLayer or type(attn) is not LlamaAttention or type(mlp) is not LlamaMLP:
        return False
    dtype = layer.input_layernorm.weight.dtype
    return (
        all(kernel.fusable(linear, dtype) for linear in _linears(layer))
        and attn.rotary_dim == attn.head_dim
        and attn.head_dim % kernel.DECODE_HEAD_DIM_MULTIPLE == 0
        and attn.attn.logits_soft_cap is None
        and attn.cos_sin_cache.dtype == torch.float32
        and attn.cos_sin_cache.is_contiguous()
        and attn.ops.backend == "cpu"
        and layer.input_layernorm.weight.dtype in kernel.DTYPE_CODES
    )


def _linears(layer) -> tuple:
    attn, mlp = layer.self_attn, layer.mlp
    return attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj


def _contiguous(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return tensor if tensor.dtype == dtype and tensor.is_contiguous() else tensor.to(dtype).contiguous()


def _layer(layer, kernel):
    attn, address = layer.self_attn, kernel.address
    norms = (address(layer.input_layernorm.weight), address(layer.post_attention_layernorm.weight))
    caches = (address(attn.attn.k_cache), address(attn.attn.v_cache), address(attn.cos_sin_cache))
    linears = (kernel.linear_struct(linear) for linear in _linears(layer))
    return kernel.Layer(*norms, *linears, *caches, attn.attn.sliding_window or 0)
