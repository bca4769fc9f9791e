/* AVX2 path of paged_decode.c: 8 fp32 lanes, the scores of 8 tokens per vector. */
#include "vectors.h"

enum { LANES = 8 };

/* exp(x) for x <= 0: Cody-Waite reduction by ln 2, a degree-6 polynomial, 2^n written into the exponent.
 * Below -87, where 2^n would leave the normal range, it gives exp(-87) (about 2e-38), which no softmax
 * sum that holds its maximum's 1 can tell from 0. */
INLINE __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
}

/* lane j of the result = the sum of the 8 lanes of v[j] */
INLINE __m256 transpose_sum8(const __m256 v[LANES]) {
    __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

/* lanes from `live` on set to 0 */
INLINE __m256 keep_lanes(__m256 v, int64_t live) {
    __m256 index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_ps(v, _mm256_cmp_ps(index, _mm256_set1_ps((float)live), _CMP_LT_OQ));
}

/* scores[g * stride + t] = q_h . k_t (q already scaled) for the group's query heads h and n <= 8 tokens from
 * t0; lanes past n hold 0 */
INLINE void score_tile(const DecodeArgs *a, const int64_t *rows, int64_t kh, const float *q, float *k_tile, int64_t t0,
                       int n, float *scores, int64_t stride, int cache_dtype, int chunks) {
    int64_t group = a->num_heads / a->num_kv_heads, d = a->head_dim;
    for (int j = 0; j < n; j++) {
        int64_t base = (rows[t0 + j] + kh) * d;
        for (int c = 0; c < chunks; c++) _mm256_storeu_ps(k_tile + j * d + c * 8, load8(a->k_cache, base + c * 8, cache_dtype));
    }
    for (int64_t g = 0; g < group; g++) {
        const float *qh = q + (kh * group + g) * d;
        __m256 dots[LANES];
        for (int j = 0; j < LANES; j++) {
            __m256 acc = _mm256_setzero_ps();
            for (int c = 0; c < chunks && j < n; c++)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + c * 8), _mm256_loadu_ps(k_tile + j * d + c * 8), acc);
            dots[j] = acc;
        }
        _mm256_storeu_ps(scores + g * stride + t0, transpose_sum8(dots));
    }
}

INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* scores of one head -> unnormalized probabilities in place (lanes past ctx: 0); returns their sum */
INLINE float softmax_row(float *s, int64_t ctx) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t t = 0;
    for (; t + LANES <= ctx; t += LANES) m = _mm256_max_ps(m, _mm256_loadu_ps(s + t));
    float top = hmax8(m);
    for (; t < ctx; t++) top = s[t] > top ? s[t] : top;
    __m256 sum = _mm256_setzero_ps();
    for (t = 0; t < ctx; t += LANES) {
        __m256 p = keep_lanes(exp8(_mm256_sub_ps(_mm256_loadu_ps(s + t), _mm256_set1_ps(top))), ctx - t);
        _mm256_storeu_ps(s + t, p);
        sum = _mm256_add_ps(sum, p);
    }
    return hsum8(sum);
}

/* out for one query head h of KV head kh: sum_t p[t] * v_t divided by the row sum (one head at a time keeps
 * the sums in registers; its KV head's rows are back from L2 for the next). The group's heads take turns at
 * asking for the next item's tokens, so that their requests spread over all of the group's passes. */
INLINE void weigh_values(const DecodeArgs *a, const int64_t *rows, int64_t ctx, int64_t kh, int64_t h, const float *p,
                         float sum, void *out, const Upcoming *next, int cache_dtype, int chunks) {
    int64_t d = a->head_dim, group = a->num_heads / a->num_kv_heads;
    __m256 acc[chunks];
    for (int c = 0; c < chunks; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t t = 0; t < ctx; t++) {
        if (t % group == h % group) prefetch_upcoming(a, next, t);
        int64_t base = (rows[t] + kh) * d;
        __m256 w = _mm256_set1_ps(p[t]);
        for (int c = 0; c < chunks; c++) acc[c] = _mm256_fmadd_ps(w, load8(a->v_cache, base + c * 8, cache_dtype), acc[c]);
    }
    for (int c = 0; c < chunks; c++) {
        float x[8];
        _mm256_storeu_ps(x, _mm256_div_ps(acc[c], _mm256_set1_ps(sum)));
        for (int i = 0; i < 8; i++) store_scalar(out, h * d + c * 8 + i, x[i], a->dtype);
    }
}

/* one sequence's query heads of KV head kh over the tokens whose cache rows `rows` lists */
INLINE void attend_typed(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next, int cache_dtype, int chunks) {
    int64_t hq = a->num_heads, d = a->head_dim, group = hq / a->num_kv_heads;
    int64_t stride = (ctx + TILE - 1) / TILE * TILE;
    float *q = scratch, *k_tile = q + hq * d, *sums = k_tile + TILE * d, *s = sums + hq;
    for (int64_t i = kh * group * d; i < (kh + 1) * group * d; i++)
        q[i] = load_scalar(a->query, b * hq * d + i, a->dtype) * a->scale;
    for (int64_t t0 = 0; t0 < ctx; t0 += LANES) {
        int n = ctx - t0 < LANES ? (int)(ctx - t0) : LANES;
        for (int j = 0; j < LANES; j++) prefetch_token(a, rows, kh, t0 + AHEAD + j, ctx);
        score_tile(a, rows, kh, q, k_tile, t0, n, s, stride, cache_dtype, chunks);
    }
    for (int64_t g = 0; g < group; g++) sums[g] = softmax_row(s + g * stride, ctx);
    char *out = (char *)a->out + b * hq * d * element_size(a->dtype);
    for (int64_t g = 0; g < group; g++)
        weigh_values(a, rows, ctx, kh, kh * group + g, s + g * stride, sums[g], out, next, cache_dtype, chunks);
}

/* constant cache dtype and chunk count per call, so that the compiler unrolls the inner loops */
static void attend_group(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next) {
    int chunks = (int)(a->head_dim / 8);
    #define ATTEND(DT) (chunks == 8 ? attend_typed(a, b, kh, rows, ctx, scratch, next, DT, 8) : chunks == 16 ? \
                        attend_typed(a, b, kh, rows, ctx, scratch, next, DT, 16) : attend_typed(a, b, kh, rows, ctx, scratch, next, DT, chunks))
    if (a->cache_dtype == DTYPE_BF16) ATTEND(DTYPE_BF16);
    else ATTEND(DTYPE_F32);
    #undef ATTEND
}
