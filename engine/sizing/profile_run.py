"""The peak of vLLM's profiling run, estimated without a GPU.

V1 (`v1/worker/gpu_model_runner.py:profile_run`): the multimodal encoder runs on dummy items and keeps
their outputs; one forward of max_num_batched_tokens tokens; then, on the last pipeline stage, the
sampler warm-up on one row per sequence. The forward's intermediates are freed before the sampler runs,
so the peak is the larger of the two, not their sum. V0 (`worker/model_runner.py:profile_run`) runs the
sampler inside the profile step with top_k = vocab - 1, which forces its sort path.
"""

from dataclasses import dataclass

from kvtool.engine.sizing.spec import ModelSpec
from kvtool.engine.sizing.weights import element_bytes

# Bytes alive per logit (rows x vocab) at the sampler's peak, by the path the release takes:
# flashinfer (top_k_top_p_sampling_from_logits): model-dtype logits 2, fp32 copy 4, masked logits 4, probs 4;
# triton (v1/sample/ops/topk_topp_triton.py, in place): 2 + 4 + softmax 4 + exponential draw 4;
# native and V0 (apply_top_k_top_p / _apply_top_k_top_p): the peak is inside logits.sort(): 2 + 4, the sorted
# values 4 and int64 indices 8, the int64 index input 8 and the radix sort's double buffers 4 + 8: 38.
# Eight V0 logs (0.7.1 - 0.8.5, docs/plan.md) print 38.5 - 40 bytes per logit; two V1 0.10.1 logs 14.5.
SAMPLER_BYTES_PER_LOGIT = {"flashinfer": 14, "triton": 14, "native": 38, "v0": 38}
# V0 0.2.6 - 0.6.3 measure the memory still held after the profile run (free memory before and after, with no
# empty_cache() between), so the peak is what torch's caching allocator reserved, not what it allocated: blocks
# cached at one size are not reused for a larger one. Fitted, not derived: three logs of 0.3.3, 0.5.1 and 0.5.5
# (24 and 48 GB cards, 512 to 163,840 profiled tokens) hold 1.33 - 1.41 times the allocated estimate.
RESERVED_OVER_ALLOCATED = 1.35
# fused_moe runs at most this many tokens at once (VLLM_FUSED_MOE_CHUNK_SIZE), its workspaces sized to them
FUSED_MOE_CHUNK_TOKENS = 32768


@dataclass(frozen=True)
class ProfileRules:
    """What differs between releases in the profiling run (the defaults are vLLM 0.33's)."""

    sampler: str = "flashinfer"  # a key of SAMPLER_BYTES_PER_LOGIT
    logits_for_every_token: bool = False  # V1 0.7.0-0.7.2: logits over all batched tokens (model dtype), no sampler
    v0: bool = False  # the V0 engine: mamba state allocated inside the profile step
    encoder_items: int | None = None  # multimodal profile: items of the largest size (None: vLLM's choice)
    reserved: bool = False  # V0 0.2.6 - 0.6.3: the peak is the caching allocator's reserved memory
    data_parallel_experts: int = 0  # expert parallelism: whole experts on the tokens of this many DP ranks


def forward_bytes_per_token(spec: ModelSpec, dtype: str = "auto", tp: int = 1, gathered: float = 0.0) -> int:
    """Live tensors of one layer per token: the residual stream and the normed input, plus the larger of
    q/k/v and the MLP's gate-up output with its activation (fused MoE: per routed slot, the w13 output, the
    activation and the w2 output). With expert parallelism over data-parallel ranks each rank runs whole
    experts on `gathered` times its own tokens (every rank's, by the all-gather all2all, vLLM's default)."""
    qkv = (spec.num_attention_heads + 2 * spec.num_key_value_heads) * spec.head_dim // tp
    mlp = 3 * spec.intermediate_size // tp
    if spec.is_moe:
        split = 1 if gathered else tp
        expert = 3 * (spec.moe_intermediate_size or spec.intermediate_size) // split + spec.hidden_size
        mlp = round((spec.num_experts_per_tok or 1) * expert * (gathered or 1))
    return element_bytes(spec, dtype) * (2 * spec.hidden_size + max(qkv, mlp))


def activation_bytes(
    spec: ModelSpec,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    dtype: str = "auto",
    tp: int = 1,
    rules: ProfileRules = ProfileRules(),
    last_stage: bool = True,
) -> int:
    """Peak of the profile step beyond the weights: max(forward, kept hidden states + sampler), as the
    release measures it (allocated, or reserved by the caching allocator)."""
    peak = _allocated_peak(spec, max_num_batched_tokens, max_num_seqs, dtype, tp, rules, last_stage)
    return round(peak * RESERVED_OVER_ALLOCATED) if rules.reserved else peak


def _allocated_peak(spec, max_num_batched_tokens, max_num_seqs, dtype, tp, rules, last_stage) -> int:
    tokens, element = max_num_batched_tokens, element_bytes(spec, dtype)
    gathered = (
        min(rules.data_parallel_experts * tokens, FUSED_MOE_CHUNK_TOKENS) / tokens if rules.data_parallel_experts else 0
    )
    per_token = forward_bytes_per_token(spec, dtype, tp, gathered)
    forward = tokens * per_token + _v0_mamba_cache(spec, max_num_seqs, tp, rules)
    if rules.logits_for_every_token:  # the forward's intermediates are freed before compute_logits
        return max(forward, tokens * (spec.hidden_size + spec.vocab_size) * element)
    if not last_stage:
        return forward
    sampler = tokens * spec.hidden_size * element + sampler_rows(spec, tokens, max_num_seqs, rules) * (
        spec.vocab_size * SAMPLER_BYTES_PER_LOGIT[rules.sampler]
    )
    return max(forward, sampler)


def sampler_rows(spec: ModelSpec, tokens: int, max_num_seqs: int, rules: ProfileRules) -> int:
    """One logit row per profiled sequence; V0 gives a multimodal profile only as many sequences as
    max_num_batched_tokens holds items."""
    rows = min(max_num_seqs, tokens)
    if rules.v0 and spec.mm_tokens_per_item:
        rows = max(1, min(rows, tokens // spec.mm_tokens_per_item))
    return rows


def _v0_mamba_cache(spec: ModelSpec, max_num_seqs: int, tp: int, rules: ProfileRules) -> int:
    """V0 allocates every mamba layer's state for max_num_seqs (padded to a graph size) on the first forward
    (model_executor/models/mamba_cache.py MambaCacheManager), inside the profile step."""
    if not rules.v0 or spec.mamba_state is None:
        return 0
    padded = -(-max_num_seqs // 8) * 8
    return padded * spec.num_state_layers * spec.mamba_state.page_bytes(tp, element_bytes(spec, "auto"))


def encoder_bytes(
    spec: ModelSpec,
    max_num_batched_tokens: int,
    text_peak: int,
    dtype: str = "auto",
    tp: int = 1,
    items: int | None = None,
) -> int:
    """What the multimodal encoder adds to the profile peak: dummy items of the largest size, as many as a
    budget of max(max_num_batched_tokens, one item) tokens holds, go through the tower; their outputs stay
    alive through the text forward (V1: `encoder_cache` until profile_run ends; V0: the merged embeddings).
    The peak is max(tower forward, outputs + text peak), of which text_peak is already counted."""
    if not spec.mm_tokens_per_item or not spec.encoder_hidden_size:
        return 0
    budget = max(max_num_batched_tokens, spec.mm_tokens_per_item)
    count = items if items is not None else max(1, budget // spec.mm_tokens_per_item)
    tokens = count * spec.mm_tokens_per_item
    per_patch = 4 * spec.encoder_hidden_size + 2 * spec.encoder_intermediate_size // tp
    element = element_bytes(spec, dtype)
    tower = tokens * spec.encoder_patches_per_token * per_patch * element
    outputs = tokens * spec.hidden_size * element
    return max(tower, text_peak + outputs) - text_peak
