/* Vector helpers the CPU kernels share: fp32 lanes loaded from fp32 or bf16, and a lane sum. */
#ifndef KVTOOL_VECTORS_H
#define KVTOOL_VECTORS_H

#include "common.h"

#if defined(__AVX2__)
#include <immintrin.h>

/* 8 fp32 lanes of base at element i, widened from bf16 where needed */
INLINE __m256 load8(const void *base, int64_t i, int dtype) {
    if (dtype == DTYPE_F32) return _mm256_loadu_ps((const float *)base + i);
    __m128i half = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#endif

#if defined(__AVX512F__)
/* 16 fp32 lanes of base at element i, widened from bf16 where needed */
INLINE __m512 load16(const void *base, int64_t i, int dtype) {
    if (dtype == DTYPE_F32) return _mm512_loadu_ps((const float *)base + i);
    __m256i half = _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}
#endif

#endif
