/* quant_panel_linear.c's contract on AMX-INT8 tiles, for batches of a few rows and more (MIN_ROWS_*).
 *
 * Same weights (GGUF-style codes in column panels of 16 output columns, reference.pack_quant_panels, with
 * fp32 scales and mins per group of QUANT_GROUP k-steps), same int8 activations (quantize_rows.h), the
 * same exact integer dot product per group and the same fp32 arithmetic after it: for each group in order,
 * the sum times (column scale times row scale) is fused-added, then min times the row's code sum. A panel's
 * 4 k-steps of 16 columns are one row of a weight tile (8 rows of 4 k-steps by 16 columns, int8, 512
 * bytes): 8-bit codes are read in place, 4-bit ones widened to bytes once per panel and thread. For every
 * 16 rows of x and every group one tdpbssd gives the 16 x 16 int32 dot products. So a row's output does not
 * depend on how many rows share its batch, on the tiles or below their few rows on quant_panel_linear.c. The
 * caller must hold the kernel's permission to use AMX state (kernels/cpu_amx.py).
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"
#include "panels.h"
#include "quantize_rows.h"

/* from how many rows the tiles beat quant_panel_linear.c (docs/engine.md): 4-bit codes are widened per call */
enum { GROUP = QUANT_GROUP, TILE_ROWS = 16, QUADS = GROUP / 4, MIN_ROWS_4BIT = 10, MIN_ROWS_8BIT = 7 };

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__)
#include <omp.h>

#include "tile_config.h"

int32_t kvtool_quant_amx_linear_built(void) { return 1; }

/* tiles 0-1: int32 sums of two groups, 2-3: their x tiles (16 rows by 32 codes), 4-5: their weight tiles */
static void configure_tiles(void) {
    static const uint8_t rows[6] = {TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS, QUADS, QUADS};
    static const uint16_t colsb[6] = {PANEL * 4, PANEL * 4, GROUP, GROUP, PANEL * 4, PANEL * 4};
    load_tile_config(6, rows, colsb);
}

/* x quantized, padded with zero rows to whole tiles: codes [rows, k], scales and code sums [rows, groups] */
typedef struct {
    int8_t *qx;
    float *dx, *xsum;
} Rows;

/* one panel: its weight tiles [groups][QUADS][16 x 4 bytes], scales and mins (or NULL) [groups][16] */
typedef struct {
    const int8_t *tiles;
    const float *scales, *mins;
} Panel;

/* panel p of 4-bit codes widened to bytes 0-15 in `tiles`: a k-step quad holds columns 0-7 in its low
 * nibbles and 8-15 in its high ones, and two quads are one 64-byte load */
static void widen_panel(const uint8_t *codes, int64_t k, int64_t p, int8_t *tiles) {
    const uint8_t *panel = codes + p * (k / 4) * (PANEL * 2);
    __m512i nibble = _mm512_set1_epi8(0x0F);
    for (int64_t quad = 0; quad < k / 4; quad += 2) {
        __m512i v = _mm512_loadu_si512(panel + quad * PANEL * 2);
        __m512i low = _mm512_and_si512(v, nibble), high = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        _mm512_store_si512(tiles + quad * PANEL * 4, _mm512_shuffle_i64x2(low, high, 0x44));
        _mm512_store_si512(tiles + (quad + 1) * PANEL * 4, _mm512_shuffle_i64x2(low, high, 0xEE));
    }
}

/* acc[r] += the group's int32 sums of row r times the column scales times the row's, then min times code sum */
INLINE void add_group(__m512 *acc, const int32_t *sums, const Panel *w, const Rows *x, int64_t r0, int64_t g,
                      int64_t groups) {
    __m512 scale = _mm512_loadu_ps(w->scales + g * PANEL);
    __m512 min = w->mins ? _mm512_loadu_ps(w->mins + g * PANEL) : _mm512_setzero_ps();
    #pragma GCC unroll 16
    for (int r = 0; r < TILE_ROWS; r++) {
        int64_t at = (r0 + r) * groups + g;
        __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * PANEL));
        acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(scale, _mm512_set1_ps(x->dx[at])), acc[r]);
        acc[r] = _mm512_fmadd_ps(min, _mm512_set1_ps(x->xsum[at]), acc[r]);
    }
}

/* the int32 sums of x tile xt with the panel's groups g and g + 1 (where g + 1 < groups) into sums[0], sums[1] */
INLINE void pair_sums(const int8_t *xt, const Panel *w, int64_t k, int64_t g, int32_t (*sums)[TILE_ROWS * PANEL]) {
    int64_t groups = k / GROUP;
    _tile_zero(0);
    _tile_loadd(2, xt + g * GROUP, k);
    _tile_loadd(4, w->tiles + g * QUADS * PANEL * 4, PANEL * 4);
    _tile_dpbssd(0, 2, 4);
    if (g + 1 < groups) {
        _tile_zero(1);
        _tile_loadd(3, xt + (g + 1) * GROUP, k);
        _tile_loadd(5, w->tiles + (g + 1) * QUADS * PANEL * 4, PANEL * 4);
        _tile_dpbssd(1, 3, 5);
        _tile_stored(1, sums[1], PANEL * 4);
    }
    _tile_stored(0, sums[0], PANEL * 4);
}

/* out rows r0 .. r0 + 15 (those below `rows`), the panel's `width` columns from j0: one x tile per group.
 * The tiles of each pair of groups are stored one pair ahead of the vector work that scales them, so that
 * the vector loads do not wait on the tile stores just issued. */
static void row_tile(const Rows *x, const Panel *w, int64_t r0, int64_t rows, int64_t k, int64_t n, int64_t j0,
                     float *out) {
    int64_t groups = k / GROUP;
    int32_t sums[2][2][TILE_ROWS * PANEL] __attribute__((aligned(64)));  /* [pair parity][group of pair] */
    __m512 acc[TILE_ROWS];
    #pragma GCC unroll 16
    for (int r = 0; r < TILE_ROWS; r++) acc[r] = _mm512_setzero_ps();
    const int8_t *xt = x->qx + r0 * k;
    pair_sums(xt, w, k, 0, sums[0]);
    for (int64_t g = 0; g < groups; g += 2) {
        if (g + 2 < groups) pair_sums(xt, w, k, g + 2, sums[(g / 2 + 1) % 2]);
        add_group(acc, sums[(g / 2) % 2][0], w, x, r0, g, groups);
        if (g + 1 < groups) add_group(acc, sums[(g / 2) % 2][1], w, x, r0, g + 1, groups);
    }
    __mmask16 columns = n - j0 < PANEL ? (__mmask16)((1u << (n - j0)) - 1) : (__mmask16)0xFFFF;
    #pragma GCC unroll 16  /* whole, so that acc stays in registers */
    for (int r = 0; r < TILE_ROWS; r++)
        if (r0 + r < rows) _mm512_mask_storeu_ps(out + (r0 + r) * n + j0, columns, acc[r]);
}

static void free_rows(Rows *x) {
    free(x->qx);
    free(x->dx);
    free(x->xsum);
}

/* x [rows, k] quantized group by group into `padded` rows, the rows beyond `rows` zero */
static int32_t quantize_padded(const float *x, int64_t rows, int64_t padded, int64_t k, int32_t num_threads,
                               Rows *q) {
    int64_t groups = k / GROUP;
    q->qx = aligned_alloc(64, (size_t)(padded * k + 63) / 64 * 64);
    q->dx = calloc((size_t)(padded * groups), sizeof(float));
    q->xsum = calloc((size_t)(padded * groups), sizeof(float));
    if (!q->qx || !q->dx || !q->xsum) return free_rows(q), STATUS_NO_MEMORY;
    memset(q->qx + rows * k, 0, (size_t)((padded - rows) * k));
    #pragma omp parallel for schedule(static) num_threads(rows * k >= 65536 ? num_threads : 1)
    for (int64_t i = 0; i < rows * groups; i++) quantize_group(x + i * GROUP, q->qx + i * GROUP, q->dx + i, q->xsum + i);
    return STATUS_OK;
}

static int32_t tile_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                           const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    int64_t groups = k / GROUP, padded = (rows + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS;
    Rows q;
    if (quantize_padded(x, rows, padded, k, num_threads, &q)) return STATUS_NO_MEMORY;
    size_t panel_bytes = (size_t)(k * PANEL);
    int8_t *scratch = bits == 4 ? aligned_alloc(64, panel_bytes * (size_t)num_threads) : NULL;  /* widened codes */
    if (bits == 4 && scratch == NULL) return free_rows(&q), STATUS_NO_MEMORY;
    #pragma omp parallel num_threads(num_threads)
    {
        int8_t *own = bits == 4 ? scratch + panel_bytes * (size_t)omp_get_thread_num() : NULL;
        configure_tiles();
        #pragma omp for schedule(static)
        for (int64_t p = 0; p < (n + PANEL - 1) / PANEL; p++) {
            Panel w = {(const int8_t *)codes + p * panel_bytes, scales + p * groups * PANEL,
                       mins ? mins + p * groups * PANEL : NULL};
            if (bits == 4) widen_panel(codes, k, p, own), w.tiles = own;
            for (int64_t r0 = 0; r0 < rows; r0 += TILE_ROWS) row_tile(&q, &w, r0, rows, k, n, p * PANEL, out);
        }
        _tile_release();
    }
    free(scratch);
    free_rows(&q);
    return STATUS_OK;
}

int32_t kvtool_quant_amx_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                                const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    if (rows < (bits == 4 ? MIN_ROWS_4BIT : MIN_ROWS_8BIT))
        return kvtool_quant_panel_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
    return tile_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
}

#else

int32_t kvtool_quant_amx_linear_built(void) { return 0; }

int32_t kvtool_quant_amx_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                                const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    return kvtool_quant_panel_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
}

#endif
