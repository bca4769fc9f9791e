/* The arguments of kvtool_paged_decode (paged_decode.c), mirrored by `DecodeArgs` in kernels/cpu_ops.py. */
#ifndef KVTOOL_PAGED_DECODE_H
#define KVTOOL_PAGED_DECODE_H

#include <stdint.h>

typedef struct {
    const void *query, *k_cache, *v_cache;
    const int32_t *block_tables, *context_lens;
    void *out;
    int64_t num_seqs, num_heads, num_kv_heads, head_dim, block_size, table_stride;
    float scale;
    int32_t dtype, num_threads;   /* dtype: query and out's */
    int32_t cache_dtype;          /* k_cache and v_cache's: dtype's, or bf16 beside an fp32 query */
    int64_t sliding_window;   /* 0: the whole context; else only its last sliding_window tokens */
} DecodeArgs;

void kvtool_paged_decode(const DecodeArgs *a);

#endif
