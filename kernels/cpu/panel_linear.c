/* Dense linear layer over a weight packed in column panels: out = x W^T + bias, at any row count.
 *
 * Same contract as `panel_linear` in kernels/reference.py. W [n, k] is packed once, at load time, into
 * panels of PANEL output columns stored k-major ([n / PANEL][k][PANEL], the last one zero-padded), so
 * that one 64-byte line holds a k-step of a whole fp32 panel and a thread reads its panels as one
 * stream. x is packed per call into tiles of TILE rows, k-major. A panel is taken DEPTH k-steps at a
 * time (16 KiB of fp32, which stays in L1 while every tile of a block of rows takes its turn): broadcast
 * elements of x multiply-add into 2 x TILE vectors of sums (12 of AVX2's 16 registers), in fp32, carried
 * from one DEPTH block to the next; the bias is added and the sum rounded to the dtype once. While the
 * first tile runs, each k-step asks for the same line of the next panel, so reading W from memory
 * overlaps the other tiles' FMAs. A single row has a loop of its own (row_sums). GGUF-style codes kept in
 * panels have their own tiles (quant_panel_linear.c).
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"
#include "panels.h"
#include "vectors.h"

/* k-steps of a panel taken at a time: 16 KiB of fp32 in L1, and a block's tiles of x over them 120 KiB in L2 */
enum { DEPTH = 256 };

/* W [n, k] as panels [ceil(n / PANEL)][k][PANEL] in the dtype */
typedef struct {
    const char *panels;
    int64_t n, k;
    int dtype;
} Weights;

#if defined(__AVX2__) && defined(__FMA__)

#define FMA_ROW(r, lo, hi)                                         \
    if (rows > r) {                                                \
        __m256 a = _mm256_broadcast_ss(x + i * TILE + r);          \
        lo = _mm256_fmadd_ps(a, w0, lo);                           \
        hi = _mm256_fmadd_ps(a, w1, hi);                           \
    }
#define LOAD_ROW(r, lo, hi)                                        \
    if (rows > r) {                                                \
        lo = _mm256_loadu_ps(sums + r * PANEL);                    \
        hi = _mm256_loadu_ps(sums + r * PANEL + 8);                \
    }
/* k-step i of the panel times the tile's x, into the 12 sums */
#define TILE_STEP                                                                               \
    __m256 w0 = load8(panel, i * PANEL, dtype), w1 = load8(panel, i * PANEL + 8, dtype);       \
    FMA_ROW(0, s00, s01) FMA_ROW(1, s10, s11) FMA_ROW(2, s20, s21)                              \
    FMA_ROW(3, s30, s31) FMA_ROW(4, s40, s41) FMA_ROW(5, s50, s51)
#define STORE_ROW(r, lo, hi)                                       \
    if (rows > r) {                                                \
        _mm256_storeu_ps(sums + r * PANEL, lo);                    \
        _mm256_storeu_ps(sums + r * PANEL + 8, hi);                \
    }

/* sums [rows][PANEL] += a packed tile of x ([depth][TILE] fp32) times `depth` k-steps of a panel (sums
 * start from zero where `first`); `rows` is a constant once inlined */
INLINE void tile_sums(const float *x, const void *panel, int64_t rows, int64_t depth, int dtype,
                      const char *next, int first, float sums[TILE * PANEL]) {
    __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00;
    __m256 s30 = s00, s31 = s00, s40 = s00, s41 = s00, s50 = s00, s51 = s00;
    if (!first) {
        LOAD_ROW(0, s00, s01) LOAD_ROW(1, s10, s11) LOAD_ROW(2, s20, s21)
        LOAD_ROW(3, s30, s31) LOAD_ROW(4, s40, s41) LOAD_ROW(5, s50, s51)
    }
    int64_t line = PANEL * element_size(dtype);
    /* two loops: with the test for `next` inside one loop, fp32 tiles ran up to 30 % slower */
    if (next) {
        #pragma GCC unroll 4
        for (int64_t i = 0; i < depth; i++) {
            _mm_prefetch(next + i * line, _MM_HINT_T0);
            TILE_STEP
        }
    } else {
        #pragma GCC unroll 4
        for (int64_t i = 0; i < depth; i++) {
            TILE_STEP
        }
    }
    STORE_ROW(0, s00, s01) STORE_ROW(1, s10, s11) STORE_ROW(2, s20, s21)
    STORE_ROW(3, s30, s31) STORE_ROW(4, s40, s41) STORE_ROW(5, s50, s51)
}

/* sums [PANEL] = one row of x (fp32, contiguous) times a whole panel of k steps. Each column keeps two partial
 * sums, of the even and of the odd k-steps, added at the end: with one, each k-step waited on the last one's
 * FMA, and bf16 panels already in cache ran at 0.7x the pace of two */
INLINE void row_sums(const float *x, const void *panel, int64_t k, int dtype, float sums[PANEL]) {
    __m256 even0 = _mm256_setzero_ps(), even1 = even0, odd0 = even0, odd1 = even0;
    int64_t i = 0;
    for (; i + 1 < k; i += 2) {
        __m256 a = _mm256_broadcast_ss(x + i), b = _mm256_broadcast_ss(x + i + 1);
        even0 = _mm256_fmadd_ps(a, load8(panel, i * PANEL, dtype), even0);
        even1 = _mm256_fmadd_ps(a, load8(panel, i * PANEL + 8, dtype), even1);
        odd0 = _mm256_fmadd_ps(b, load8(panel, (i + 1) * PANEL, dtype), odd0);
        odd1 = _mm256_fmadd_ps(b, load8(panel, (i + 1) * PANEL + 8, dtype), odd1);
    }
    if (i < k) {
        __m256 a = _mm256_broadcast_ss(x + i);
        even0 = _mm256_fmadd_ps(a, load8(panel, i * PANEL, dtype), even0);
        even1 = _mm256_fmadd_ps(a, load8(panel, i * PANEL + 8, dtype), even1);
    }
    _mm256_storeu_ps(sums, _mm256_add_ps(even0, odd0));
    _mm256_storeu_ps(sums + 8, _mm256_add_ps(even1, odd1));
}

int32_t kvtool_panel_linear_vectorized(void) { return 8; }

#else

INLINE void tile_sums(const float *x, const void *panel, int64_t rows, int64_t depth, int dtype,
                      const char *next, int first, float sums[TILE * PANEL]) {
    (void)next;
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < PANEL; c++) {
            float acc = first ? 0.0f : sums[r * PANEL + c];
            for (int64_t i = 0; i < depth; i++) acc += x[i * TILE + r] * load_scalar(panel, i * PANEL + c, dtype);
            sums[r * PANEL + c] = acc;
        }
}

INLINE void row_sums(const float *x, const void *panel, int64_t k, int dtype, float sums[PANEL]) {
    for (int c = 0; c < PANEL; c++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < k; i++) acc += x[i] * load_scalar(panel, i * PANEL + c, dtype);
        sums[c] = acc;
    }
}

int32_t kvtool_panel_linear_vectorized(void) { return 0; }

#endif

/* sums [rows][PANEL] (+)= a packed tile of x times a chunk of `depth` k-steps; `rows` a constant once inlined */
INLINE void any_tile(const float *tile, const char *chunk, int64_t rows, int64_t depth, int dtype, const char *ahead,
                     int first, float *sums) {
    switch (rows) {
        case 1: tile_sums(tile, chunk, 1, depth, dtype, ahead, first, sums); break;
        case 2: tile_sums(tile, chunk, 2, depth, dtype, ahead, first, sums); break;
        case 3: tile_sums(tile, chunk, 3, depth, dtype, ahead, first, sums); break;
        case 4: tile_sums(tile, chunk, 4, depth, dtype, ahead, first, sums); break;
        case 5: tile_sums(tile, chunk, 5, depth, dtype, ahead, first, sums); break;
        default: tile_sums(tile, chunk, TILE, depth, dtype, ahead, first, sums); break;
    }
}

/* out [rows, j0 .. j0 + PANEL that exist) = sums + bias, rounded to the dtype */
static void store_panel(const float *sums, const void *bias, void *out, int64_t rows, int64_t n, int64_t j0,
                        int dtype) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < PANEL && j0 + c < n; c++) {
            float b = bias ? load_scalar(bias, j0 + c, dtype) : 0.0f;
            store_scalar(out, r * n + j0 + c, sums[r * PANEL + c] + b, dtype);
        }
}

/* rows [r0, r0 + rows) (at most BLOCK_TILES tiles) of panel p's columns of out; each k-step of the first
 * tile asks for the same line of panel p + 1 */
static void panel_block(const float *packed, const Weights *w, int64_t p, const void *bias, void *out, int64_t r0,
                        int64_t rows) {
    float sums[BLOCK_TILES * TILE * PANEL];
    int64_t k = w->k, line = PANEL * element_size(w->dtype), last = (w->n + PANEL - 1) / PANEL - 1;
    for (int64_t i0 = 0; i0 < k; i0 += DEPTH) {
        int64_t depth = k - i0 < DEPTH ? k - i0 : DEPTH;
        const char *chunk = w->panels + (p * k + i0) * line, *ahead = p < last ? chunk + k * line : NULL;
        for (int64_t t = 0; t * TILE < rows; t++) {
            int64_t tile_rows = rows - t * TILE < TILE ? rows - t * TILE : TILE;
            any_tile(packed + (r0 + t * TILE) * k + i0 * TILE, chunk, tile_rows, depth, w->dtype, t == 0 ? ahead : NULL,
                     i0 == 0, sums + t * TILE * PANEL);
        }
    }
    store_panel(sums, bias, (char *)out + r0 * w->n * element_size(w->dtype), rows, w->n, p * PANEL, w->dtype);
}

/* out [1, n] for one row of x: a thread streams its panels whole, the sums in registers (summed in another
 * order than the tiles': within one rounding step of a row among others). The row is widened into a contiguous
 * copy: broadcast from a tile's 24-byte stride, a one-row call ran at about two thirds the pace on an AMD Zen 4 */
static int32_t one_row(const void *x, const Weights *w, const void *bias, void *out, int32_t num_threads) {
    float *row = malloc(w->k * sizeof(float));
    if (!row) return STATUS_NO_MEMORY;
    for (int64_t i = 0; i < w->k; i++) row[i] = load_scalar(x, i, w->dtype);
    int64_t count = (w->n + PANEL - 1) / PANEL, size = w->k * PANEL * element_size(w->dtype);
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t p = 0; p < count; p++) {
        float sums[PANEL];
        if (w->dtype == DTYPE_F32)  /* the dtype a constant in each loop */
            row_sums(row, w->panels + p * size, w->k, DTYPE_F32, sums);
        else
            row_sums(row, w->panels + p * size, w->k, DTYPE_BF16, sums);
        store_panel(sums, bias, out, 1, w->n, p * PANEL, w->dtype);
    }
    free(row);
    return STATUS_OK;
}

/* x [rows, k] as tiles of TILE rows, each k-major ([k][TILE] fp32, the last one zero-padded) */
static float *pack_tiles(const void *x, int64_t rows, int64_t k, int dtype, int32_t num_threads) {
    int64_t tiles = (rows + TILE - 1) / TILE;
    float *packed = malloc(tiles * TILE * k * sizeof(float));
    if (!packed) return NULL;
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t t = 0; t < tiles; t++)
        for (int64_t r = 0; r < TILE; r++)
            for (int64_t i = 0; i < k; i++)
                packed[(t * k + i) * TILE + r] = t * TILE + r < rows ? load_scalar(x, (t * TILE + r) * k + i, dtype) : 0;
    return packed;
}

/* out [rows, n] = x [rows, k] W^T + bias, W as panels [ceil(n / PANEL)][k][PANEL]; x, out and the panels in
 * the dtype */
int32_t kvtool_panel_linear(const void *x, const void *panels, const void *bias, void *out, int64_t rows, int64_t k,
                            int64_t n, int32_t dtype, int32_t num_threads) {
    if (rows < 1) return STATUS_OK;
    Weights w = {panels, n, k, dtype};
    if (rows == 1) return one_row(x, &w, bias, out, num_threads);
    float *packed = pack_tiles(x, rows, k, dtype, num_threads);
    if (!packed) return STATUS_NO_MEMORY;
    int64_t count = (n + PANEL - 1) / PANEL, rows_per_block = block_rows(rows);
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    /* a thread's share: consecutive panels of one block of rows, or whole blocks where there are several */
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t item = 0; item < blocks * count; item++) {
        int64_t r0 = item / count * rows_per_block, block = rows - r0 < rows_per_block ? rows - r0 : rows_per_block;
        panel_block(packed, &w, item % count, bias, out, r0, block);
    }
    free(packed);
    return STATUS_OK;
}
