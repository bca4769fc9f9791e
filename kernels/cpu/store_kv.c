/* The KV cache write of the CPU path: each new token's K and V rows copied to its slot.
 *
 * Same contract as `store_kv` in kernels/reference.py for fp32 and bf16 caches (fp8 caches quantize, and go
 * to the reference). key [tokens, row] and value [tokens, row] in `dtype` with row = num_kv_heads * head_dim
 * elements, rows `key_stride` / `value_stride` elements apart (a view of the fused qkv output); caches
 * [num_blocks * block_size, row] in `cache_dtype`; slot -1 is skipped. Plain copies where the dtypes match,
 * else each element rounded to the cache's dtype as torch rounds it; no threads.
 */
#include "common.h"
#include "layer_ops.h"

/* cache row `slot` = the row at src, from dtype to cache_dtype */
static void store_row(void *cache, int64_t slot, const void *src, int64_t row, int32_t dtype, int32_t cache_dtype) {
    int64_t element = element_size(cache_dtype);
    if (dtype == cache_dtype) {
        memcpy((char *)cache + slot * row * element, src, row * element);
        return;
    }
    for (int64_t i = 0; i < row; i++) store_scalar(cache, slot * row + i, load_scalar(src, i, dtype), cache_dtype);
}

void kvtool_store_kv(const void *key, const void *value, int64_t key_stride, int64_t value_stride, void *k_cache,
                     void *v_cache, const int64_t *slot_mapping, int64_t tokens, int64_t row, int32_t dtype,
                     int32_t cache_dtype) {
    int64_t element = element_size(dtype);
    for (int64_t t = 0; t < tokens; t++) {
        int64_t slot = slot_mapping[t];
        if (slot < 0) continue;
        store_row(k_cache, slot, (const char *)key + t * key_stride * element, row, dtype, cache_dtype);
        store_row(v_cache, slot, (const char *)value + t * value_stride * element, row, dtype, cache_dtype);
    }
}
