/* Paged decode attention for the CPU: one query token per sequence over its whole cached context,
 * read in place through the block table (no gather, no padding).
 *
 * Same contract as `paged_decode_attention` in kernels/reference.py: query [B, Hq, D], caches
 * [num_blocks, block_size, Hkv, D], block_tables [B, table_stride] int32, context_lens [B] int32,
 * out [B, Hq, D]. Query and out share one dtype, fp32 or bf16; the caches hold that dtype, or bf16 beside
 * an fp32 query (a 16-bit KV cache for an fp32 model). Math is fp32.
 *
 * Two passes per sequence and KV head: scores for every cached token (16 tokens at a time), then the
 * softmax and the weighted sum of V. (sequence, KV head) pairs are spread over OpenMP threads, each thread
 * claiming its next pair before it works on one, so that the weighted sum (which reads V from L2) asks for
 * the next pair's lines. Built at run time with -march=native (or KVTOOL_CPU_MARCH) by kernels/cpu_build.py;
 * the AVX-512 or AVX2 path is taken where the compiler offers it.
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

/* rows[t] = the cache row (block slot times num_kv_heads) of the t-th token a sequence attends to: read once
 * per sequence, so the loops over tokens do no division */
static void token_rows(const DecodeArgs *a, const int32_t *table, int64_t first, int64_t ctx, int64_t *rows) {
    for (int64_t t = 0, block = first / a->block_size, slot = first % a->block_size; t < ctx; t++) {
        rows[t] = ((int64_t)table[block] * a->block_size + slot) * a->num_kv_heads;
        if (++slot == a->block_size) slot = 0, block++;
    }
}

/* tokens ahead whose K and V lines a thread asks for: a sequence's blocks lie anywhere in the cache, and
 * the hardware prefetcher starts anew at each */
enum { AHEAD = 8 };

/* asks for the K and V lines of KV head kh of token t (the V lines for the weighted sum after the scores),
 * into L2: prefetches into L1 got in each other's way and read the cache slower */
INLINE void prefetch_token(const DecodeArgs *a, const int64_t *rows, int64_t kh, int64_t t, int64_t ctx) {
    if (t >= ctx) return;
    int64_t bytes = a->head_dim * element_size(a->cache_dtype), offset = (rows[t] + kh) * bytes;
    for (int64_t i = 0; i < bytes; i += 64) {
        __builtin_prefetch((const char *)a->k_cache + offset + i, 0, 2);
        __builtin_prefetch((const char *)a->v_cache + offset + i, 0, 2);
    }
}

/* the item a thread takes after the one it works on: while the weighted sum of V reads lines already in L2,
 * the next item's K and V lines are asked for, token by token, instead of only as its scores reach them */
typedef struct {
    const int64_t *rows;
    int64_t kh, ctx;
} Upcoming;

INLINE void prefetch_upcoming(const DecodeArgs *a, const Upcoming *next, int64_t t) {
    if (next) prefetch_token(a, next->rows, next->kh, t, next->ctx);
}

#if defined(__AVX512F__)
#include "paged_decode_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include "paged_decode_avx2.h"
#else
#include "paged_decode_portable.h"
#endif

static int64_t longest_context(const DecodeArgs *a) {
    int64_t longest = 0;
    for (int64_t b = 0; b < a->num_seqs; b++)
        if (a->context_lens[b] > longest) longest = a->context_lens[b];
    return longest;
}

/* floats one thread needs: the scaled query, a K tile or the output sums, and the scores */
static int64_t scratch_floats(const DecodeArgs *a, int64_t longest) {
    return 2 * a->num_heads * a->head_dim + TILE * a->head_dim + a->num_heads + (longest + TILE) * a->num_heads;
}

/* the next unclaimed item, longest sequences first (the runner sorts them last in the batch), or -1 */
static int64_t claim_item(int64_t *claimed, int64_t items) {
    int64_t taken;
    #pragma omp atomic capture
    taken = (*claimed)++;
    return taken < items ? items - 1 - taken : -1;
}

/* the sequence's first visible token and how many it attends to; rows gets their cache rows */
static int64_t list_rows(const DecodeArgs *a, int64_t item, int64_t *rows) {
    int64_t b = item / a->num_kv_heads, first = first_visible(a, a->context_lens[b]), ctx = a->context_lens[b] - first;
    token_rows(a, a->block_tables + b * a->table_stride, first, ctx, rows);
    return ctx;
}

/* Work items are (sequence, KV head) pairs: a KV head's query heads read only its lines of the cache, and a
 * batch of one still keeps every thread busy. A thread claims its next item before it works on one, so
 * that the current item's weighted sum can prefetch the next one's lines. An item's results do not depend
 * on which thread takes it. */
void kvtool_paged_decode(const DecodeArgs *a) {
    int64_t longest = longest_context(a), floats = scratch_floats(a, longest), hkv = a->num_kv_heads;
    int64_t items = a->num_seqs * hkv, claimed = 0;
    #pragma omp parallel num_threads(a->num_threads)
    {
        int64_t *buffer = malloc(sizeof(int64_t) * 2 * longest + sizeof(float) * floats);
        int64_t *rows[2] = {buffer, buffer + longest};  /* the current item's and the next one's */
        float *scratch = (float *)(buffer + 2 * longest);
        int64_t item = claim_item(&claimed, items), ctx = item < 0 ? 0 : list_rows(a, item, rows[0]);
        for (int now = 0; item >= 0; now ^= 1) {
            int64_t next = claim_item(&claimed, items);
            Upcoming upcoming = {rows[now ^ 1], next % hkv, next < 0 ? 0 : list_rows(a, next, rows[now ^ 1])};
            attend_group(a, item / hkv, item % hkv, rows[now], ctx, scratch, next < 0 ? NULL : &upcoming);
            item = next, ctx = upcoming.ctx;
        }
        free(buffer);
    }
}
