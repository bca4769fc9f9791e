"""The memory model against values computed by hand from the models' config.json."""

import pytest

from kvtool.engine.discovery.models import resolve_model_spec
from kvtool.engine.sizing import kv_cache
from kvtool.engine.sizing.context_length import resolve_max_model_len
from kvtool.engine.sizing.engine_args import check_parallel_sizes
from kvtool.engine.sizing.kv_cache import KVCacheSpec, KVCacheTooSmallError
from kvtool.engine.sizing.kv_layout import KVLayout, KVRules
from kvtool.engine.sizing.spec import spec_from_hf_config
from kvtool.engine.sizing.units import GiB
from kvtool.errors import UsageError

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def llama():
    return resolve_model_spec(LLAMA_8B)


def cache(spec, kv_cache_dtype="auto", **layout) -> KVCacheSpec:
    return KVCacheSpec(spec, KVLayout(kv_cache_dtype=kv_cache_dtype, **layout))


def test_llama_3_1_8b_bytes_per_token_bf16_and_fp8(llama):
    # 32 layers x 2 (K, V) x 8 KV heads x 128 head_dim x 2 bytes
    assert cache(llama).bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072
    assert cache(llama, "fp8").bytes_per_token == 65_536
    assert cache(llama, "fp8_e5m2").bytes_per_token == 65_536
    assert cache(llama).block_bytes == 16 * 131_072


def test_tensor_parallel_splits_kv_heads_until_one_per_rank(llama):
    assert cache(llama, tp=4).bytes_per_token == 32 * 2 * (8 // 4) * 128 * 2
    # TP 16 > 8 KV heads: heads are replicated, each rank still stores one head
    assert cache(llama, tp=16).bytes_per_token == 32 * 2 * 1 * 128 * 2
    assert cache(llama, tp=8).bytes_per_token == cache(llama, tp=16).bytes_per_token


def test_pipeline_parallel_splits_layers(llama):
    assert cache(llama, pp=2).bytes_per_token == 16 * 2 * 8 * 128 * 2
    assert cache(llama, pp=3).bytes_per_token == 11 * 2 * 8 * 128 * 2  # 32 = 11 + 11 + 10


def test_qwen3_head_dim_is_not_hidden_over_heads():
    spec = resolve_model_spec("Qwen/Qwen3-32B")
    assert spec.hidden_size // spec.num_attention_heads == 80
    assert spec.head_dim == 128
    assert cache(spec).bytes_per_token == 64 * 2 * 8 * 128 * 2


def test_deepseek_v3_mla_stores_one_latent_not_split_by_tp():
    spec = resolve_model_spec("deepseek-ai/DeepSeek-V3")
    assert spec.is_mla
    assert cache(spec).bytes_per_token == 61 * 576 * 2 == 70_272
    assert cache(spec, tp=8).bytes_per_token == 70_272
    assert cache(spec, "fp8").bytes_per_token == 61 * 576


def test_sliding_window_layers_keep_only_the_window():
    spec = resolve_model_spec("google/gemma-3-27b-it")
    assert cache(spec).stage_layer_counts == (10, 52)  # every 6th of 62 layers is global
    page = 16 * 2 * 16 * 128 * 2
    # vLLM 0.33 (async scheduling, two steps in flight): cdiv(W - 1 + 2 x max_num_batched_tokens, 16) + 1
    window_blocks = -(-(1024 - 1 + 2 * 2048) // 16) + 1
    expected = 10 * (131072 // 16) * page + 52 * window_blocks * page
    assert cache(spec, max_num_batched_tokens=2048).request_bytes(131072) == expected
    one_step = KVRules(sliding_batches=1)  # 0.8.3 - 0.25: cdiv(W - 1 + max_num_batched_tokens, 16) + 1
    expected = 10 * (131072 // 16) * page + 52 * (-(-(1024 - 1 + 2048) // 16) + 1) * page
    assert cache(spec, max_num_batched_tokens=2048, rules=one_step).request_bytes(131072) == expected
    short = cache(spec).request_bytes(512)
    assert short == 62 * (512 // 16) * page + 52 * page  # window not reached: full length + 1 block


def test_all_sliding_model_fits_any_length_once_the_window_fits():
    spec = resolve_model_spec("mistralai/Mistral-7B-Instruct-v0.1")
    small = cache(spec).request_bytes(8192)
    assert cache(spec).request_bytes(32768) == small
    assert cache(spec).estimate_max_model_len(small + cache(spec).block_bytes) == 32768


def test_linear_attention_layers_hold_no_per_token_kv():
    spec = resolve_model_spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.num_attention_layers == 12
    assert cache(spec).bytes_per_token == 12 * 2 * 2 * 256 * 2


def test_plan_kv_cache_blocks_tokens_and_concurrency(llama):
    plan = cache(llama).plan(5 * GiB, 20_000)
    assert plan.num_blocks == 5 * GiB // (2 * 1024 * 1024) == 2560
    assert plan.kv_cache_tokens == 2560 * 16
    assert plan.max_concurrency == pytest.approx(2560 / 1250)
    assert plan.fits
    assert plan.log_line() == (
        "GPU KV cache size: 40,960 tokens, Maximum concurrency for 20,000 tokens per request: 2.05x"
    )
    # one 2 MiB block is the null block: 2559 usable blocks hold 40,944 tokens
    assert plan.safe_max_model_len == 2559 * 16


def test_too_small_cache_raises_vllm_wording_with_estimate(llama):
    with pytest.raises(KVCacheTooSmallError) as caught:
        cache(llama).check_fits(1 * GiB, 131072)
    err = caught.value
    assert err.needed_bytes == 131072 * 131072
    assert err.estimated_max_model_len == (512 - 1) * 16
    assert str(err).startswith(
        "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (1.0 GiB). Based "
        "on the available memory, the estimated maximum model length is 8176."
    )
    cache(llama).check_fits(1 * GiB, 8176)
    with pytest.raises(KVCacheTooSmallError, match="No available memory for the cache blocks"):
        cache(llama).check_fits(0, 16)


@pytest.mark.parametrize(
    "requested, expected", [(None, 131072), ("8k", 8000), ("8K", 8192), ("25.6k", 25600), (4096, 4096)]
)
def test_resolve_max_model_len(llama, requested, expected):
    assert resolve_max_model_len(requested, cache(llama)) == expected


def test_resolve_max_model_len_auto_is_largest_that_fits(llama):
    assert resolve_max_model_len("auto", cache(llama), 1 * GiB) == 8176
    assert resolve_max_model_len(-1, cache(llama), 40 * GiB) == 131072
    with pytest.raises(UsageError, match="Cannot auto-fit"):
        resolve_max_model_len("auto", cache(llama), 1024)
    with pytest.raises(UsageError):
        resolve_max_model_len("1.5K", cache(llama))


def test_parallel_sizes_must_divide_heads(llama):
    check_parallel_sizes(llama, tp=16)
    with pytest.raises(UsageError, match=r"attention heads \(32\) must be divisible by tensor parallel size \(3\)"):
        check_parallel_sizes(llama, tp=3)
    odd = spec_from_hf_config(
        {
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
            "vocab_size": 10,
        }
    )
    with pytest.raises(UsageError, match="4 KV heads"):
        check_parallel_sizes(odd, tp=6)


@pytest.mark.parametrize(
    "kv_dtype, model_dtype, size",
    [("auto", "bfloat16", 2), ("auto", "float32", 4), ("float16", "float32", 2), ("fp8_e4m3", "bfloat16", 1)],
)
def test_kv_cache_dtype_bytes(kv_dtype, model_dtype, size):
    assert kv_cache.kv_cache_dtype_bytes(kv_dtype, model_dtype) == size


def test_unknown_kv_cache_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown kv-cache dtype"):
        kv_cache.kv_cache_dtype_bytes("int3", "bfloat16")
