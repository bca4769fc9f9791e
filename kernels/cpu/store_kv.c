/* The KV cache write of the CPU path: each new token's K and V rows copied to its slot.
 *
 * Same contract as `store_kv` in kernels/reference.py for caches of the tokens' own dtype (fp8 caches
 * quantize, and go to the reference). key [tokens, row] and value [tokens, row] with row = num_kv_heads *
 * head_dim elements, rows `key_stride` / `value_stride` elements apart (a view of the fused qkv output);
 * caches [num_blocks * block_size, row]; slot -1 is skipped. Plain copies: no rounding, no threads.
 */
#include "common.h"
#include "layer_ops.h"

void kvtool_store_kv(const void *key, const void *value, int64_t key_stride, int64_t value_stride, void *k_cache,
                     void *v_cache, const int64_t *slot_mapping, int64_t tokens, int64_t row, int32_t dtype) {
    int64_t element = dtype == DTYPE_F32 ? 4 : 2, bytes = row * element;
    for (int64_t t = 0; t < tokens; t++) {
        int64_t slot = slot_mapping[t];
        if (slot < 0) continue;
        memcpy((char *)k_cache + slot * bytes, (const char *)key + t * key_stride * element, bytes);
        memcpy((char *)v_cache + slot * bytes, (const char *)value + t * value_stride * element, bytes);
    }
}
