"""vLLM's hybrid KV-cache arithmetic: layer kinds in equal groups sharing one block pool, mamba and
linear-attention state per request, and the tokens each release logs for them."""

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.plan.planner import PlanRequest, make_plan
from kvtool.engine.sizing.gpus import GpuInfo, find_gpu
from kvtool.engine.sizing.kv_cache import KVCacheSpec
from kvtool.engine.sizing.kv_layout import KVLayout
from kvtool.engine.sizing.mamba_state import mamba_state
from kvtool.engine.sizing.release_rules import kv_rules
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.engine.sizing.units import GiB
from kvtool.engine.sizing.vllm_versions import VllmRelease

NEXT = resolve_model_spec("qwen3-next")  # 12 full-attention layers, 36 Gated-DeltaNet layers


def cache(spec, version: str, tp: int = 1, batched: int = 2048) -> KVCacheSpec:
    rules = kv_rules(VllmRelease.parse(version), False, 1, "sliding_attention" in spec.layer_types)
    return KVCacheSpec(spec, KVLayout(tp=tp, max_num_batched_tokens=batched, rules=rules))


def test_gated_delta_net_state_per_request():
    # mamba_utils.py gated_delta_net_state_shape: conv (2 x 16 x 128 + 32 x 128) x (4 - 1), recurrent 32 x 128 x 128
    state = NEXT.mamba_state
    assert state.page_bytes(1, 2) == 8192 * 3 * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert state.page_bytes(2, 2) == 4096 * 3 * 2 + 16 * 128 * 128 * 2


def test_the_attention_block_grows_until_one_page_holds_a_state():
    # platforms/interface.py _align_hybrid_block_size: 16 x cdiv(mamba page, 16 x attention bytes per token)
    spec = cache(NEXT, "0.26.0")
    assert spec.block_size == 16 * -(-1_097_728 // (16 * 2 * 2 * 256 * 2)) == 544  # K and V, 2 heads, 256, bf16
    assert spec.page_bytes == 544 * 2048 and spec.block_bytes == 12 * 544 * 2048  # groups of 12 layers
    groups = spec.groups
    assert (groups.size, groups.count) == (12, 4)  # one full-attention group, three state groups


@pytest.mark.parametrize(
    "version, tokens_rule, state_blocks",
    [
        ("0.20.0", "pool", 1),  # kv_cache_utils.py: num_blocks // len(groups) x block_size
        ("0.20.1", "concurrency", 1),  # int(max_concurrency x max_model_len)
        ("0.28.0", "concurrency", 2),  # prefix caching on for hybrid models: mamba_cache_mode 'align'
    ],
)
def test_the_tokens_vllm_logs_for_a_hybrid_model(version, tokens_rule, state_blocks):
    report = make_plan(
        NEXT, PlanRequest(gpus=[find_gpu("H200")], tp=2, release=VllmRelease.parse(version), max_model_len=32768)
    )
    blocks, per_request = report.kv.num_blocks, -(-32768 // 544) + 3 * state_blocks
    assert report.kv.max_concurrency == pytest.approx(blocks / per_request)
    expected = blocks // 4 * 544 if tokens_rule == "pool" else int(blocks / per_request * 32768)
    assert report.kv.kv_cache_tokens == expected > 0


def test_hybrid_models_ran_on_v0_until_0_10_2():
    # engine/arg_utils.py _is_v1_supported_oracle: "Mamba is experimental on VLLM_USE_V1=1. Falling back to V0"
    assert VllmRelease.parse("0.10.1").uses_v0(stateful=True)
    assert not VllmRelease.parse("0.10.2").uses_v0(stateful=True)


JAMBA = {
    "model_type": "jamba",
    "num_hidden_layers": 8,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 2048,
    "vocab_size": 1000,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "max_position_embeddings": 4096,
}


def test_v0_keeps_mamba_state_for_max_num_seqs_inside_the_profile():
    # model_executor/models/mamba_cache.py MambaCacheManager: (layers, max_num_seqs) x conv and ssm state
    spec = spec_from_hf_config(JAMBA, "jamba")
    state = mamba_state(JAMBA).page_bytes(1, 2)
    assert state == 2048 * 3 * 2 + 2048 * 16 * 2
    gpu = GpuInfo("gpu", 24 * GiB, source="size", arch="sm89")
    v0 = make_plan(spec, PlanRequest(gpus=[gpu], release=VllmRelease.parse("0.6.3"), max_model_len=4096))
    text_only = make_plan(
        spec_from_hf_config({**JAMBA, "model_type": "llama"}, "llama"),
        PlanRequest(gpus=[gpu], release=VllmRelease.parse("0.6.3"), max_model_len=4096),
    )
    forward = v0.budget.activation_bytes - 256 * 7 * state
    assert forward <= text_only.budget.activation_bytes and v0.kv.kv_bytes_per_token == 1 * 2 * 2 * 128 * 2


def sliding(full: int, windowed: int) -> dict:
    kinds = ["full_attention"] * full + ["sliding_attention"] * windowed
    return {"num_hidden_layers": len(kinds), "hidden_size": 512, "num_attention_heads": 4, "vocab_size": 100,
            "sliding_window": 512, "layer_types": kinds, "max_position_embeddings": 32768}  # fmt: skip


def test_layer_kinds_are_padded_into_equal_groups():
    # _get_kv_cache_groups_uniform_page_size: the smallest kind's count, or from 0.18 the largest when it is under
    # 1.5 x the smallest (gpt-oss-20b + eagle: 12 sliding, 13 full -> 13 and 13, not 12 and 24)
    spec = spec_from_hf_config(sliding(13, 12), "m")
    assert (cache(spec, "0.17.1").groups.size, cache(spec, "0.17.1").groups.count) == (12, 3)
    assert (cache(spec, "0.18.0").groups.size, cache(spec, "0.18.0").groups.count) == (13, 2)
    gemma = cache(resolve_model_spec("gemma-3-27b"), "0.33.0")  # 10 full, 52 sliding: 8 padding layers
    assert (gemma.groups.size, gemma.groups.count) == (10, 7)
    plan = gemma.plan(20 * GiB, 32768)
    per_request = 32768 // 16 + 6 * (-(-(1024 - 1 + 2 * 2048) // 16) + 1)
    assert plan.num_blocks == 20 * GiB // (10 * 16 * 2 * 16 * 128 * 2)
    assert plan.max_concurrency == pytest.approx(plan.num_blocks / per_request)


def test_kvtools_engine_keeps_its_own_pool_per_layer():
    # the embedded engine groups by gcd without padding (engine/runtime/core/kv_cache_groups.py): plan's default
    gemma = KVCacheSpec(resolve_model_spec("gemma-3-27b"))
    assert gemma.block_bytes == 62 * 16 * 2 * 16 * 128 * 2
