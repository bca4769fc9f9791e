/* AVX-512 path of paged_decode.c: 16 fp32 lanes, one tile of 16 tokens per score vector. */
#include "vectors.h"

/* exp(x) for x <= 0: Cody-Waite reduction by ln 2, a degree-6 polynomial, then scalef by 2^n */
INLINE __m512 exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-103.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* lane j of the result = the sum of the 16 lanes of v[j] */
INLINE __m512 transpose_sum16(const __m512 v[16]) {
    __m512 pairs[8], quads[4];
    for (int i = 0; i < 8; i++)
        pairs[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(pairs[2 * i]), _mm512_castps_pd(pairs[2 * i + 1]));
        __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(pairs[2 * i]), _mm512_castps_pd(pairs[2 * i + 1]));
        quads[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
    }
    __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x88), _mm512_shuffle_f32x4(quads[0], quads[1], 0xdd));
    __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x88), _mm512_shuffle_f32x4(quads[2], quads[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xdd));
}

/* scores[g * stride + t] = scale * q_h . k_t for the group's query heads h and one tile of n <= 16 tokens
 * from t0 */
INLINE void score_tile(const DecodeArgs *a, const int64_t *rows, int64_t kh, const float *q, float *k_tile, int64_t t0,
                       int n, float *scores, int64_t stride, int cache_dtype, int chunks) {
    int64_t group = a->num_heads / a->num_kv_heads, d = a->head_dim;
    for (int j = 0; j < n; j++) {
        int64_t base = (rows[t0 + j] + kh) * d;
        for (int c = 0; c < chunks; c++) _mm512_storeu_ps(k_tile + j * d + c * 16, load16(a->k_cache, base + c * 16, cache_dtype));
    }
    for (int64_t g = 0; g < group; g++) {
        const float *qh = q + (kh * group + g) * d;
        __m512 dots[TILE];
        for (int j = 0; j < TILE; j++) {
            __m512 acc = _mm512_setzero_ps();
            for (int c = 0; c < chunks && j < n; c++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(qh + c * 16), _mm512_loadu_ps(k_tile + j * d + c * 16), acc);
            dots[j] = acc;
        }
        _mm512_storeu_ps(scores + g * stride + t0, transpose_sum16(dots));
    }
}

#if defined(__AVX512BF16__)
/* score_tile for bf16 caches: pairs of bf16 products summed in fp32 by one instruction, no conversion */
INLINE void score_tile_bf16(const DecodeArgs *a, const int64_t *rows, int64_t kh, const uint16_t *query, int64_t t0,
                            int n, float *scores, int64_t stride, int pairs) {
    int64_t group = a->num_heads / a->num_kv_heads, d = a->head_dim;
    const uint16_t *keys[TILE];
    for (int j = 0; j < n; j++) keys[j] = (const uint16_t *)a->k_cache + (rows[t0 + j] + kh) * d;
    for (int64_t g = 0; g < group; g++) {
        const uint16_t *qh = query + (kh * group + g) * d;
        __m512 dots[TILE];
        for (int j = 0; j < TILE; j++) {
            __m512 acc = _mm512_setzero_ps();
            for (int c = 0; c < pairs && j < n; c++)
                acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(qh + c * 32),
                                       (__m512bh)_mm512_loadu_si512(keys[j] + c * 32));
            dots[j] = acc;
        }
        __m512 s = _mm512_mul_ps(transpose_sum16(dots), _mm512_set1_ps(a->scale));
        _mm512_storeu_ps(scores + g * stride + t0, s);
    }
}
#define HAVE_DPBF16 1
#else
#define HAVE_DPBF16 0
#define score_tile_bf16(...) ((void)0)
#endif

/* scores of one head -> unnormalized probabilities in place; returns their sum */
INLINE float softmax_row(float *s, int64_t ctx) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t t = 0; t < ctx; t += TILE)
        m = _mm512_mask_max_ps(m, (__mmask16)(ctx - t >= TILE ? 0xffff : (1u << (ctx - t)) - 1), m, _mm512_loadu_ps(s + t));
    __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(m)), sum = _mm512_setzero_ps();
    for (int64_t t = 0; t < ctx; t += TILE) {
        __mmask16 live = ctx - t >= TILE ? 0xffff : (1u << (ctx - t)) - 1;
        __m512 p = _mm512_maskz_mov_ps(live, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), top)));
        _mm512_storeu_ps(s + t, p);
        sum = _mm512_add_ps(sum, p);
    }
    return _mm512_reduce_add_ps(sum);
}

/* out for the query heads of KV head kh: sum_t p[g][t] * v_t, divided by the row sums */
INLINE void weigh_values(const DecodeArgs *a, const int64_t *rows, int64_t ctx, int64_t kh, const float *p,
                         int64_t stride, const float *sums, void *out, const Upcoming *next, int cache_dtype, int chunks) {
    int64_t group = a->num_heads / a->num_kv_heads, d = a->head_dim;
    __m512 acc[group * chunks];
    for (int64_t i = 0; i < group * chunks; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t t = 0; t < ctx; t++) {
        prefetch_upcoming(a, next, t);
        int64_t base = (rows[t] + kh) * d;
        __m512 v[chunks];
        for (int c = 0; c < chunks; c++) v[c] = load16(a->v_cache, base + c * 16, cache_dtype);
        for (int64_t g = 0; g < group; g++) {
            __m512 w = _mm512_set1_ps(p[g * stride + t]);
            for (int c = 0; c < chunks; c++) acc[g * chunks + c] = _mm512_fmadd_ps(w, v[c], acc[g * chunks + c]);
        }
    }
    for (int64_t g = 0; g < group; g++)
        for (int c = 0; c < chunks; c++) {
            __m512 x = _mm512_div_ps(acc[g * chunks + c], _mm512_set1_ps(sums[g]));
            for (int i = 0; i < 16; i++) store_scalar(out, (kh * group + g) * d + c * 16 + i, x[i], a->dtype);
        }
}

/* one sequence's query heads of KV head kh over the tokens whose cache rows `rows` lists */
INLINE void attend_typed(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next, int cache_dtype, int chunks) {
    int64_t hq = a->num_heads, d = a->head_dim, group = hq / a->num_kv_heads;
    int64_t stride = (ctx + TILE - 1) / TILE * TILE;
    float *q = scratch, *k_tile = q + hq * d, *sums = k_tile + TILE * d, *s = sums + hq;
    int direct_bf16 = HAVE_DPBF16 && cache_dtype == DTYPE_BF16 && a->dtype == DTYPE_BF16 && chunks % 2 == 0;
    for (int64_t i = kh * group * d; i < (kh + 1) * group * d && !direct_bf16; i++)
        q[i] = load_scalar(a->query, b * hq * d + i, a->dtype) * a->scale;
    for (int64_t t0 = 0; t0 < ctx; t0 += TILE) {
        int n = ctx - t0 < TILE ? (int)(ctx - t0) : TILE;
        for (int j = 0; j < TILE; j++) prefetch_token(a, rows, kh, t0 + AHEAD + j, ctx);
        if (direct_bf16)
            score_tile_bf16(a, rows, kh, (const uint16_t *)a->query + b * hq * d, t0, n, s, stride, chunks / 2);
        else
            score_tile(a, rows, kh, q, k_tile, t0, n, s, stride, cache_dtype, chunks);
    }
    for (int64_t g = 0; g < group; g++) sums[g] = softmax_row(s + g * stride, ctx);
    weigh_values(a, rows, ctx, kh, s, stride, sums, (char *)a->out + b * hq * d * element_size(a->dtype), next,
                 cache_dtype, chunks);
}

/* constant cache dtype and chunk count per call, so that the compiler unrolls the inner loops */
static void attend_group(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next) {
    int chunks = (int)(a->head_dim / 16);
    #define ATTEND(DT) (chunks == 4 ? attend_typed(a, b, kh, rows, ctx, scratch, next, DT, 4) : chunks == 8 ? \
                        attend_typed(a, b, kh, rows, ctx, scratch, next, DT, 8) : attend_typed(a, b, kh, rows, ctx, scratch, next, DT, chunks))
    if (a->cache_dtype == DTYPE_BF16) ATTEND(DTYPE_BF16);
    else ATTEND(DTYPE_F32);
    #undef ATTEND
}
