/* GGUF-style codes kept in panel_linear.c's layout, dequantized a block of k-steps at a time.
 *
 * The layout of reference.pack_quant_panels: a panel of PANEL output columns holds, for each k-step, the
 * PANEL codes of its columns (bits 8: int8 bytes; bits 4: byte c holds column c in its low nibble and
 * column c + 8 in its high one), and each group of QUANT_GROUP k-steps has PANEL fp32 scales and mins:
 * w = scale * code + min. A panel's codes are one stream in memory, like a dense panel's weights, and a
 * k-step dequantizes into two vectors without a shuffle.
 */
#ifndef KVTOOL_DEQUANTIZE_H
#define KVTOOL_DEQUANTIZE_H

/* W as the tiles read it: packed panels in the dtype, or (codes set) codes dequantized a DEPTH block at a time */
typedef struct {
    const char *panels;
    const uint8_t *codes;
    const float *scales, *mins;
    int64_t n, k, bits;
    int dtype;
} Weights;

enum { QUANT_GROUP = 32 };

#if defined(__AVX2__) && defined(__FMA__)

/* the PANEL codes of one k-step as fp32 lanes: columns 0-7 in lo, 8-15 in hi */
INLINE void codes16(const uint8_t *step, int64_t bits, __m256 *lo, __m256 *hi) {
    if (bits == 8) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)step);
        *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
        *hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)));
        return;
    }
    __m128i bytes = _mm_loadl_epi64((const __m128i *)step), nibble = _mm_set1_epi8(15);
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(bytes, nibble)));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble)));
}

/* chunk [depth][PANEL] fp32 = panel p's weights over k-steps [i0, i0 + depth); i0 and depth multiples of
 * QUANT_GROUP */
static void dequantize_chunk(const Weights *w, int64_t p, int64_t i0, int64_t depth, float *chunk) {
    int64_t step_bytes = PANEL * w->bits / 8, groups = w->k / QUANT_GROUP;
    const uint8_t *codes = w->codes + (p * w->k + i0) * step_bytes;
    const float *scales = w->scales + (p * groups + i0 / QUANT_GROUP) * PANEL;
    const float *mins = w->mins ? w->mins + (p * groups + i0 / QUANT_GROUP) * PANEL : NULL;
    for (int64_t g = 0; g < depth / QUANT_GROUP; g++) {
        __m256 s0 = _mm256_loadu_ps(scales + g * PANEL), s1 = _mm256_loadu_ps(scales + g * PANEL + 8);
        __m256 m0 = mins ? _mm256_loadu_ps(mins + g * PANEL) : _mm256_setzero_ps();
        __m256 m1 = mins ? _mm256_loadu_ps(mins + g * PANEL + 8) : _mm256_setzero_ps();
        for (int64_t i = g * QUANT_GROUP; i < (g + 1) * QUANT_GROUP; i++) {
            __m256 lo, hi;
            codes16(codes + i * step_bytes, w->bits, &lo, &hi);
            _mm256_storeu_ps(chunk + i * PANEL, _mm256_fmadd_ps(s0, lo, m0));
            _mm256_storeu_ps(chunk + i * PANEL + 8, _mm256_fmadd_ps(s1, hi, m1));
        }
    }
}

#else

INLINE float code_at(const uint8_t *step, int64_t c, int64_t bits) {
    if (bits == 8) return (float)(int8_t)step[c];
    return (float)(c < PANEL / 2 ? step[c] & 15 : step[c - PANEL / 2] >> 4);
}

static void dequantize_chunk(const Weights *w, int64_t p, int64_t i0, int64_t depth, float *chunk) {
    int64_t step_bytes = PANEL * w->bits / 8, groups = w->k / QUANT_GROUP;
    for (int64_t i = 0; i < depth; i++)
        for (int64_t c = 0; c < PANEL; c++) {
            int64_t g = (p * groups + (i0 + i) / QUANT_GROUP) * PANEL + c;
            float code = code_at(w->codes + (p * w->k + i0 + i) * step_bytes, c, w->bits);
            chunk[i * PANEL + c] = w->scales[g] * code + (w->mins ? w->mins[g] : 0.0f);
        }
}

#endif

#endif
