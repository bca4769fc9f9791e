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

/* 16 int32 sums of code * qx, 4 bytes each: lanes 0-7 group g, lanes 8-15 group g + 1 */
INLINE __m512i pair_dot(__m512i w, __m512i xq, int bits) {
    if (bits == 4) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xq);
    /* signed codes: |w| times x with w's sign (x is never -128: it is rounded from amax / 127) */
    __m512i x_signed = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(w), _mm512_setzero_si512(), xq);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), x_signed);
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
        __m512i w = load_codes(codes + g * group_bytes, bits, pair);
        for (int r = 0; r < tile; r++) {
            int64_t at = (r0 + r) * groups + g;
            __m512i xq = _mm512_maskz_loadu_epi8(pair ? ~0ULL : 0xFFFFFFFFULL, q->qx + at * GROUP);
            float second = pair ? scales[g + 1] * q->dx[at + 1] : 0.0f;
            __m512 scale = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(scales[g] * q->dx[at]), _mm512_set1_ps(second));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_dot(w, xq, bits)), scale, acc[r]);
        }
    }
    for (int r = 0; r < tile; r++) dots[r] = _mm512_reduce_add_ps(acc[r]);
}
