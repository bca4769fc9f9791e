/* Activations quantized the way llama.cpp quantizes them for its integer dot products: per group of
 * QUANT_GROUP values along k, a scale d = amax / 127 and int8 codes rint(x / d), rounded to nearest even.
 * Same as `_quantize_groups` in kernels/reference.py. */
#ifndef KVTOOL_QUANTIZE_ROWS_H
#define KVTOOL_QUANTIZE_ROWS_H

#include <math.h>

#include "common.h"
#include "vectors.h"

enum { QUANT_GROUP = 32 };

#if defined(__AVX2__)

/* codes [QUANT_GROUP] of v [QUANT_GROUP]; *scale = d and *code_sum = d times the sum of the codes */
INLINE void quantize_group(const float *v, int8_t *codes, float *scale, float *code_sum) {
    __m256 x[4], sign = _mm256_set1_ps(-0.0f), amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        x[i] = _mm256_loadu_ps(v + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, x[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    float d = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m))) / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q[4];  /* cvtps rounds to nearest even, as rintf does */
    for (int i = 0; i < 4; i++) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(x[i], _mm256_set1_ps(inv)));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    /* packs interleave the 128-bit halves: the permute puts the 32 codes back in order */
    __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)codes, bytes);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    *scale = d;
    *code_sum = d * (float)_mm_cvtsi128_si32(s);
}

#else

INLINE void quantize_group(const float *v, int8_t *codes, float *scale, float *code_sum) {
    float amax = 0;
    for (int i = 0; i < QUANT_GROUP; i++) amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < QUANT_GROUP; i++) {
        int32_t q = (int32_t)__builtin_rintf(v[i] * inv);
        codes[i] = (int8_t)q;
        sum += q;
    }
    *scale = d;
    *code_sum = d * (float)sum;
}

#endif

#endif
