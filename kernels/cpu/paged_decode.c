/* Paged decode attention for the CPU: one query token per sequence over its whole cached context,
 * read in place through the block table (no gather, no padding).
 *
 * Same contract as `paged_decode_attention` in kernels/reference.py: query [B, Hq, D], caches
 * [num_blocks, block_size, Hkv, D], block_tables [B, table_stride] int32, context_lens [B] int32,
 * out [B, Hq, D]. Query and out share one dtype, fp32 or bf16; the caches hold that dtype, or bf16 beside
 * an fp32 query (a 16-bit KV cache for an fp32 model). Math is fp32.
 *
 * Two passes per sequence: scores for every cached token (16 tokens at a time), then the softmax and
 * the weighted sum of V. Sequences are spread over OpenMP threads. Built at run time with
 * -march=native by kernels/cpu_build.py; the AVX-512 or AVX2 path is taken where the compiler offers it.
 */
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "paged_decode.h"

enum { TILE = 16 };


/* the first token a sequence of ctx tokens attends to */
static int64_t first_visible(const DecodeArgs *a, int64_t ctx) {
    return a->sliding_window > 0 && ctx > a->sliding_window ? ctx - a->sliding_window : 0;
}

static int64_t row_of(const DecodeArgs *a, const int32_t *table, int64_t t) {
    return ((int64_t)table[t / a->block_size] * a->block_size + t % a->block_size) * a->num_kv_heads;
}

#if defined(__AVX512F__)
#include "paged_decode_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "paged_decode_avx2.h"
#else
#include "paged_decode_portable.h"
#endif

/* floats one thread needs: the scaled query, a K tile or the output sums, and the scores */
static int64_t scratch_floats(const DecodeArgs *a) {
    int64_t longest = 0;
    for (int64_t b = 0; b < a->num_seqs; b++)
        if (a->context_lens[b] > longest) longest = a->context_lens[b];
    return 2 * a->num_heads * a->head_dim + TILE * a->head_dim + a->num_heads + (longest + TILE) * a->num_heads;
}

void kvtool_paged_decode(const DecodeArgs *a) {
    int64_t scratch_size = scratch_floats(a);
    #pragma omp parallel num_threads(a->num_threads)
    {
        float *scratch = malloc(sizeof(float) * scratch_size);
        /* longest sequences last in the batch (the runner sorts them); start there for balance */
        #pragma omp for schedule(dynamic, 1)
        for (int64_t b = a->num_seqs - 1; b >= 0; b--)
            attend_sequence(a, b, scratch);
        free(scratch);
    }
}
