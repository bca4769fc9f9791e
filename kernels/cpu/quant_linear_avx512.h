/* AVX-512 VNNI body of quant_linear.c: two groups of 32 codes per 512-bit vector, their int8 dot
 * products summed by vpdpbusd (unsigned codes times signed activations) into 8 lanes each. */
#include <immintrin.h>

/* how far ahead in the codes each pair asks for its cache line: a column's codes are a short stream, and
 * without it the hardware prefetcher leaves most of the bandwidth unused (as in small_linear.c) */
enum { PREFETCH_AHEAD = 16 << 10 };

/* the codes of groups g and g + 1 (only g when `pair` is 0) as 64 bytes, 4-bit codes widened */
INLINE __m512i load_codes(const uint8_t *codes, int bits, int pair) {
    if (bits == 8) return _mm512_maskz_loadu_epi8(pair ? ~0ULL : 0xFFFFFFFFULL, codes);
    __m128i a = _mm_loadu_si128((const __m128i *)codes);
    __m128i b = pair ? _mm_loadu_si128((const __m128i *)(codes + GROUP / 2)) : _mm_setzero_si128();
    __m512i v = _mm512_castsi128_si512(a);  /* per group: code i in the low nibble, i + 16 in the high */
    v = _mm512_inserti32x4(v, _mm_srli_epi16(a, 4), 1);
    v = _mm512_inserti32x4(v, b, 2);
    v = _mm512_inserti32x4(v, _mm_srli_epi16(b, 4), 3);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

/* the codes as vpdpbusd takes them (unsigned) and, for signed 8-bit codes, where they are negative */
typedef struct {
    __m512i magnitude;
    __mmask64 negative;
} PairCodes;

INLINE PairCodes unsigned_codes(__m512i w, int bits) {
    if (bits == 4) return (PairCodes){w, 0};
    return (PairCodes){_mm512_abs_epi8(w), _mm512_movepi8_mask(w)};
}

/* 16 int32 sums of code * qx, 4 bytes each: lanes 0-7 group g, lanes 8-15 group g + 1; a negative code's
 * activation changes sign instead (x is never -128: it is rounded from amax / 127) */
INLINE __m512i pair_dot(PairCodes w, __m512i xq, int bits) {
    if (bits == 8) xq = _mm512_mask_sub_epi8(xq, w.negative, _mm512_setzero_si512(), xq);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.magnitude, xq);
}

/* lanes 0-7 a[0] * b[0], lanes 8-15 a[1] * b[1] (b[1] unread unless `pair`) */
INLINE __m512 pair_scales(const float *a, const float *b, int pair) {
    __m128 x = pair ? _mm_castpd_ps(_mm_load_sd((const double *)a)) : _mm_load_ss(a);
    __m128 y = pair ? _mm_castpd_ps(_mm_load_sd((const double *)b)) : _mm_load_ss(b);
    __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(_mm_mul_ps(x, y)));
}

/* out[r, j] for `tile` rows starting at r0 and one weight row j, read once for all of them */
INLINE void column_tile(const QuantizedRows *q, int64_t r0, int tile, int64_t k, const uint8_t *codes,
                        const float *scales, float *dots, int bits) {
    int64_t groups = k / GROUP, group_bytes = bits == 8 ? GROUP : GROUP / 2;
    __m512 acc[ROW_TILE];
    for (int r = 0; r < tile; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g += 2) {
        int pair = g + 1 < groups;
        _mm_prefetch((const char *)codes + g * group_bytes + PREFETCH_AHEAD, _MM_HINT_T0);
        PairCodes w = unsigned_codes(load_codes(codes + g * group_bytes, bits, pair), bits);
        for (int r = 0; r < tile; r++) {
            int64_t at = (r0 + r) * groups + g;
            __m512i xq = _mm512_maskz_loadu_epi8(pair ? ~0ULL : 0xFFFFFFFFULL, q->qx + at * GROUP);
            __m512 scale = pair_scales(scales + g, q->dx + at, pair);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(w, xq, bits)), scale, acc[r]);
        }
    }
    for (int r = 0; r < tile; r++) dots[r] = _mm512_reduce_add_ps(acc[r]);
}
