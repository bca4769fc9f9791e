/* Dense linear layer for decode-sized batches: out = x W^T + bias, reading W once per call.
 *
 * Same contract as `small_linear` in kernels/reference.py. x [rows, k], W [n, k] (plain row-major),
 * bias [n] or NULL and out [rows, n] share one dtype (fp32 or bf16); products are summed in fp32 and
 * rounded to the dtype once. At a few rows a step is bound by streaming W from memory, and a GEMM
 * library tuned for large tiles leaves part of the bandwidth unused. Here each thread streams its own
 * stretch of W's rows, COLS of them at a time, and every weight loaded serves all the rows of x while
 * it is in registers (x, a few KiB, stays in L1).
 */
#include "common.h"
#include "layer_ops.h"

/* PREFETCH_AHEAD: how far ahead in W each load asks for its cache line (the hardware prefetcher alone
 * leaves about a third of the bandwidth unused on these short rows) */
enum { COLS = 4, MAX_ROWS = 4, PREFETCH_AHEAD = 16 << 10 };

#if defined(__AVX512F__)
#include <immintrin.h>

INLINE void prefetch(const void *w, int64_t i, int64_t element) {
    _mm_prefetch((const char *)w + i * element + PREFETCH_AHEAD, _MM_HINT_T0);
}

/* 16 fp32 lanes of x or w at element i, widened from bf16 where needed */
INLINE __m512 load16(const void *base, int64_t i, int dtype) {
    if (dtype == DTYPE_F32) return _mm512_loadu_ps((const float *)base + i);
    __m256i half = _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

/* dots[c][r] for COLS weight rows w[c] and `rows` rows of x, over k elements (k % 16 == 0) */
INLINE void tile_dots(const void *x, const void *const w[COLS], int64_t rows, int64_t k, int dtype,
                      float dots[COLS][MAX_ROWS]) {
    __m512 acc[COLS][MAX_ROWS];
    for (int c = 0; c < COLS; c++)
        for (int r = 0; r < MAX_ROWS; r++) acc[c][r] = _mm512_setzero_ps();
    int64_t i = 0;
#if defined(__AVX512BF16__)
    if (dtype == DTYPE_BF16) {  /* pairs of bf16 products, exact in fp32, summed into fp32 lanes */
        for (; i + 32 <= k; i += 32) {
            __m512bh wv[COLS], xv;
            for (int c = 0; c < COLS; c++) {
                prefetch(w[c], i, 2);
                wv[c] = (__m512bh)_mm512_loadu_si512((const uint16_t *)w[c] + i);
            }
            for (int r = 0; r < rows; r++) {
                xv = (__m512bh)_mm512_loadu_si512((const uint16_t *)x + r * k + i);
                for (int c = 0; c < COLS; c++) acc[c][r] = _mm512_dpbf16_ps(acc[c][r], wv[c], xv);
            }
        }
    }
#endif
    for (; i < k; i += 16) {
        __m512 wv[COLS];
        for (int c = 0; c < COLS; c++) {
            prefetch(w[c], i, dtype == DTYPE_F32 ? 4 : 2);
            wv[c] = load16(w[c], i, dtype);
        }
        for (int r = 0; r < rows; r++) {
            __m512 xv = load16(x, r * k + i, dtype);
            for (int c = 0; c < COLS; c++) acc[c][r] = _mm512_fmadd_ps(wv[c], xv, acc[c][r]);
        }
    }
    for (int c = 0; c < COLS; c++)
        for (int r = 0; r < rows; r++) dots[c][r] = _mm512_reduce_add_ps(acc[c][r]);
}

INLINE int vector_width(void) { return 16; }

int32_t kvtool_small_linear_vectorized(void) { return 1; }

#else

INLINE void tile_dots(const void *x, const void *const w[COLS], int64_t rows, int64_t k, int dtype,
                      float dots[COLS][MAX_ROWS]) {
    for (int c = 0; c < COLS; c++)
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0;
            for (int64_t i = 0; i < k; i++) acc += load_scalar(w[c], i, dtype) * load_scalar(x, r * k + i, dtype);
            dots[c][r] = acc;
        }
}

INLINE int vector_width(void) { return 1; }

/* without AVX-512 the GEMM library's packed weights are the faster choice at every row count */
int32_t kvtool_small_linear_vectorized(void) { return 0; }

#endif

/* out[r, j0 + c] for the COLS weight rows from j0 (the last ones may repeat row n - 1: not stored) */
INLINE void column_tile(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k,
                        int64_t n, int64_t j0, int dtype) {
    int64_t element = dtype == DTYPE_F32 ? 4 : 2;
    const void *rows_of_w[COLS];
    for (int c = 0; c < COLS; c++) rows_of_w[c] = (const char *)w + (j0 + c < n ? j0 + c : n - 1) * k * element;
    float dots[COLS][MAX_ROWS];
    tile_dots(x, rows_of_w, rows, k, dtype, dots);
    for (int c = 0; c < COLS && j0 + c < n; c++) {
        float b = bias ? load_scalar(bias, j0 + c, dtype) : 0.0f;
        for (int64_t r = 0; r < rows; r++) store_scalar(out, r * n + j0 + c, dots[c][r] + b, dtype);
    }
}

/* every tile of W's rows for a fixed row count (a constant once inlined: the accumulators stay in registers) */
INLINE void all_tiles(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k, int64_t n,
                      int dtype, int num_threads) {
    int64_t tiles = (n + COLS - 1) / COLS;
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t t = 0; t < tiles; t++) column_tile(x, w, bias, out, rows, k, n, t * COLS, dtype);
}

/* out [rows, n] = x [rows, k] W^T + bias; rows <= MAX_ROWS and k a multiple of the vector width */
void kvtool_small_linear(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k,
                         int64_t n, int32_t dtype, int32_t num_threads) {
    if (k % vector_width()) return;
    switch (rows) {
        case 1: all_tiles(x, w, bias, out, 1, k, n, dtype, num_threads); break;
        case 2: all_tiles(x, w, bias, out, 2, k, n, dtype, num_threads); break;
        case 3: all_tiles(x, w, bias, out, 3, k, n, dtype, num_threads); break;
        case 4: all_tiles(x, w, bias, out, 4, k, n, dtype, num_threads); break;
    }
}
