"""How the KV cache is laid out on one GPU, whatever the model: the request's layout (block size, cache dtype,
parallel sizes), the release's rules, the layers of a pipeline stage, and vLLM's grouping of layer kinds into
equal-sized groups that share one block pool (`v1/core/kv_cache_utils.py:_get_kv_cache_groups_uniform_page_size`)."""

from dataclasses import dataclass

from kvtool.engine.sizing.defaults import DEFAULT_BLOCK_SIZE
from kvtool.errors import UsageError

FULL, SLIDING, STATE = "full_attention", "sliding_attention", "state"
STATE_KINDS = ("mamba", "linear_attention")


@dataclass(frozen=True)
class KVRules:
    """What differs between vLLM releases in the KV arithmetic (the defaults are vLLM 0.33's at pp = 1, with
    kvtool's engine's pool: one block per layer kind, no padded groups)."""

    sliding_batches: int = 2  # batches of max_num_batched_tokens a sliding layer keeps beyond its window; 0: full
    null_block_in_check: bool = True  # 0.29+: the start-up check keeps one block back
    tokens_from_concurrency: bool = True  # 0.20.1+: logged tokens = int(concurrency x max_model_len)
    v0_check: bool = False  # V0: starts when max_model_len <= block_size x num_gpu_blocks (0.2.7+; before: any block)
    v0_length_check: bool = True
    hybrid_groups: bool = False  # vLLM V1 0.9.1+: padded groups of layer kinds, one shared pool of blocks
    group_size_heuristic: bool = True  # 0.18+: the largest kind's count when under 1.5 x the smallest's
    whole_model_check: bool = False  # 0.14-0.16: the start-up check takes every stage's layers together
    state_blocks_per_request: int = 1  # mamba groups: 1 ('none'), 2 from 0.28 (prefix caching on: 'align')
    mla_cache: str = "latent"  # MLA: one latent per token (0.7.1+); "heads" K and V per head (0.7.0), padded to 256
    # ("heads_256", FlashAttention's head sizes, before 0.7.0)


V033 = KVRules()


@dataclass(frozen=True)
class KVLayout:
    """How one GPU holds the KV cache, whatever the model: vLLM's block_size and cache dtype, the GPU's
    share of the KV heads (tp) and of the layers (pp: `stage` of `partition`), the tokens one step schedules
    (they bound what a sliding-window layer keeps), and the release's rules."""

    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_dtype: str = "auto"
    tp: int = 1
    pp: int = 1
    max_num_batched_tokens: int | None = None  # None: vLLM 0.33's default
    rules: KVRules = V033
    stage: int | None = None  # the pipeline stage; None: the stage that stores the most KV
    partition: tuple[int, ...] | None = None  # layers per stage (VLLM_PP_LAYER_PARTITION); None: vLLM's split


@dataclass(frozen=True)
class KVGroups:
    """Layer kinds in groups of `size` layers; every group takes blocks from one pool, a block holding one
    page of each of `size` layers. kvtool's engine (hybrid_groups off) keeps a pool of every layer instead."""

    size: int  # layers a pool block spans
    layers: tuple[tuple[str, int], ...]  # kind -> layers counted (n_groups x size, or the layers themselves)
    count: int  # groups (what 'GPU KV cache size' divides the pool by, to 0.20.0)


def stage_partition(num_layers: int, pp: int, partition: tuple[int, ...] | None = None) -> list[int]:
    """Layers per pipeline stage (distributed/utils.py get_pp_indices): an even split whose remainder goes to
    the stages before the last, or VLLM_PP_LAYER_PARTITION."""
    if partition:
        if len(partition) != pp or sum(partition) != num_layers:
            raise UsageError(
                f"the layer partition {','.join(map(str, partition))} does not split {num_layers} layers "
                f"over {pp} pipeline stages.",
                f"Give {pp} counts that add up to {num_layers}.",
            )
        return list(partition)
    stages = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        stages[-i] += 1
    return stages


def stage_kinds(kinds: tuple[str, ...], layout: KVLayout) -> tuple[str, ...]:
    """The layer kinds of the layout's stage, or of the stage that stores the most KV."""
    stages, start = [], 0
    for size in stage_partition(len(kinds), layout.pp, layout.partition):
        stages.append(kinds[start : start + size])
        start += size
    if layout.stage is not None:
        return stages[layout.stage]
    return max(stages, key=lambda layers: sum(kind in (FULL, SLIDING) for kind in layers))


def kv_groups(kinds: tuple[str, ...], rules: KVRules, sliding_window: int | None) -> KVGroups:
    """The pool's grouping for these layers under the release's rules."""
    counts = {FULL: kinds.count(FULL), SLIDING: kinds.count(SLIDING)}
    counts[STATE] = sum(kind in STATE_KINDS for kind in kinds)
    if not rules.hybrid_groups:
        counts.pop(STATE)  # V0 keeps mamba state outside the KV cache
    if not rules.sliding_batches or not sliding_window:  # windows not kept: sliding layers sized as full
        counts = {FULL: counts[FULL] + counts[SLIDING], STATE: counts.get(STATE, 0)}
    counts = {kind: n for kind, n in counts.items() if n}
    if not counts:
        return KVGroups(0, (), 0)
    if not rules.hybrid_groups:
        return KVGroups(sum(counts.values()), tuple(counts.items()), 1)
    low, high = min(counts.values()), max(counts.values())
    size = high if rules.group_size_heuristic and high < 1.5 * low else low
    groups = {kind: -(-n // size) for kind, n in counts.items()}
    return KVGroups(size, tuple((kind, n * size) for kind, n in groups.items()), sum(groups.values()))


def parse_layer_partition(text: str | None) -> tuple[int, ...] | None:
    """VLLM_PP_LAYER_PARTITION as vLLM reads it: layers per pipeline stage, e.g. `16,32`."""
    if not text:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(
            f"VLLM_PP_LAYER_PARTITION '{text}' is not a list of layer counts.", "Set it like vLLM's, e.g. 16,32."
        ) from None
