/* Dense linear layer for decode-sized batches: out = x W^T + bias, reading W once per call.
 *
 * Same contract as `small_linear` in kernels/reference.py. x [rows, k], W [n, k] (plain row-major),
 * bias [n] or NULL and out [rows, n] share one dtype (fp32 or bf16); products are summed in fp32 and
 * rounded to the dtype once. At a few rows a step is bound by streaming W from memory, and a GEMM
 * library tuned for large tiles leaves part of the bandwidth unused. Here each thread streams its own
 * stretch of W's rows, COLS of them at a time: while those sit in L1, every GROUP rows of x (all of x
 * stays in L2) take their dot products with them, so W comes from memory once whatever the row count.
 */
#include "common.h"
#include "layer_ops.h"
#include "vectors.h"

/* PREFETCH_AHEAD: how far ahead in W each load asks for its cache line (the hardware prefetcher alone
 * leaves about a third of the bandwidth unused on these short rows) */
enum { COLS = 4, GROUP = 4, MAX_ROWS = 64, PREFETCH_AHEAD = 16 << 10 };

#if defined(__AVX512F__)

INLINE void prefetch(const void *w, int64_t i, int64_t element) {
    _mm_prefetch((const char *)w + i * element + PREFETCH_AHEAD, _MM_HINT_T0);
}

/* sums[4 * r + c] = the lane sum of v[4 * c + r], for 16 vectors: a transposing tree of 3 levels
 * (the order is a row of out: COLS consecutive columns for each row of a group) */
INLINE void reduce16(const __m512 v[16], float sums[16]) {
    __m512 a[8], b[4];
    for (int i = 0; i < 8; i++)  /* blocks: v[2i] (0+2, 1+3), v[2i+1] (0+2, 1+3) */
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)  /* block j: four partial sums of v[4i + j] */
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    __m512 c0 = _mm512_add_ps(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
    __m512 c1 = _mm512_add_ps(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
    __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1));
    __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1));
    _mm512_storeu_ps(sums, _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)));
}

/* dots[4 * r + c] for COLS weight rows w[c] and `rows` (<= GROUP) rows of x, over k elements (k % 16 == 0);
 * `fetch`: W comes from memory (the first group), so each load asks for the line PREFETCH_AHEAD on */
INLINE void group_dots(const void *x, const void *const w[COLS], int64_t rows, int64_t k, int dtype, int fetch,
                       float dots[COLS * GROUP]) {
    __m512 acc[COLS * GROUP];
    for (int j = 0; j < COLS * GROUP; j++) acc[j] = _mm512_setzero_ps();
    int64_t i = 0;
#if defined(__AVX512BF16__)
    if (dtype == DTYPE_BF16) {  /* pairs of bf16 products, exact in fp32, summed into fp32 lanes */
        for (; i + 32 <= k; i += 32) {
            __m512bh wv[COLS], xv;
            for (int c = 0; c < COLS; c++) {
                if (fetch) prefetch(w[c], i, 2);
                wv[c] = (__m512bh)_mm512_loadu_si512((const uint16_t *)w[c] + i);
            }
            for (int r = 0; r < rows; r++) {
                xv = (__m512bh)_mm512_loadu_si512((const uint16_t *)x + r * k + i);
                for (int c = 0; c < COLS; c++) acc[c * GROUP + r] = _mm512_dpbf16_ps(acc[c * GROUP + r], wv[c], xv);
            }
        }
    }
#endif
    for (; i < k; i += 16) {
        __m512 wv[COLS];
        for (int c = 0; c < COLS; c++) {
            if (fetch) prefetch(w[c], i, element_size(dtype));
            wv[c] = load16(w[c], i, dtype);
        }
        for (int r = 0; r < rows; r++) {
            __m512 xv = load16(x, r * k + i, dtype);
            for (int c = 0; c < COLS; c++) acc[c * GROUP + r] = _mm512_fmadd_ps(wv[c], xv, acc[c * GROUP + r]);
        }
    }
    reduce16(acc, dots);
}

INLINE int vector_width(void) { return 16; }

int32_t kvtool_small_linear_vectorized(void) { return 16; }

#else

INLINE void group_dots(const void *x, const void *const w[COLS], int64_t rows, int64_t k, int dtype, int fetch,
                       float dots[COLS * GROUP]) {
    (void)fetch;
    for (int c = 0; c < COLS; c++)
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0;
            for (int64_t i = 0; i < k; i++) acc += load_scalar(w[c], i, dtype) * load_scalar(x, r * k + i, dtype);
            dots[r * COLS + c] = acc;
        }
}

INLINE int vector_width(void) { return 1; }

/* without AVX-512 PackedLinear takes panel_linear.c (AVX2) or the GEMM library's packed weights (0: no vectors) */
int32_t kvtool_small_linear_vectorized(void) { return 0; }

#endif

/* one group of x's rows against the tile; `rows` and `fetch` become constants once inlined, so the
 * accumulators stay in registers */
INLINE void tile_group(const void *x, const void *const w[COLS], const void *bias, void *out, int64_t rows,
                       int64_t k, int64_t n, int64_t j0, int dtype, int fetch) {
    float dots[COLS * GROUP];
    group_dots(x, w, rows, k, dtype, fetch, dots);
    for (int c = 0; c < COLS && j0 + c < n; c++) {
        float b = bias ? load_scalar(bias, j0 + c, dtype) : 0.0f;
        for (int64_t r = 0; r < rows; r++) store_scalar(out, r * n + j0 + c, dots[r * COLS + c] + b, dtype);
    }
}

INLINE void any_group(const void *x, const void *const w[COLS], const void *bias, void *out, int64_t rows,
                      int64_t k, int64_t n, int64_t j0, int dtype, int fetch) {
    switch (rows) {
        case 1: tile_group(x, w, bias, out, 1, k, n, j0, dtype, fetch); break;
        case 2: tile_group(x, w, bias, out, 2, k, n, j0, dtype, fetch); break;
        case 3: tile_group(x, w, bias, out, 3, k, n, j0, dtype, fetch); break;
        default: tile_group(x, w, bias, out, GROUP, k, n, j0, dtype, fetch); break;
    }
}

/* out[r, j0 + c] for the COLS weight rows from j0 (the last ones may repeat row n - 1: not stored) */
INLINE void column_tile(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k,
                        int64_t n, int64_t j0, int dtype) {
    int64_t element = element_size(dtype);
    const void *rows_of_w[COLS];
    for (int c = 0; c < COLS; c++) rows_of_w[c] = (const char *)w + (j0 + c < n ? j0 + c : n - 1) * k * element;
    for (int64_t r0 = 0; r0 < rows; r0 += GROUP) {
        int64_t group = rows - r0 < GROUP ? rows - r0 : GROUP;
        const char *xg = (const char *)x + r0 * k * element;
        char *og = (char *)out + r0 * n * element;
        if (r0 == 0)
            any_group(xg, rows_of_w, bias, og, group, k, n, j0, dtype, 1);
        else
            any_group(xg, rows_of_w, bias, og, group, k, n, j0, dtype, 0);
    }
}

/* out [rows, n] = x [rows, k] W^T + bias; rows <= MAX_ROWS and k a multiple of the vector width */
void kvtool_small_linear(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k,
                         int64_t n, int32_t dtype, int32_t num_threads) {
    if (k % vector_width() || rows < 1 || rows > MAX_ROWS) return;
    int64_t tiles = (n + COLS - 1) / COLS;
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t t = 0; t < tiles; t++) column_tile(x, w, bias, out, rows, k, n, t * COLS, dtype);
}
