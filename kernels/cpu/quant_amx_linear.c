/* quant_linear.c's contract on AMX-INT8 tiles, for batches of MIN_ROWS rows and more.
 *
 * Same weights (GGUF-style codes row by row, fp32 scales and mins per group of QUANT_GROUP k-steps), same
 * int8 activations (quantize_rows.h) and the same exact integer dot product per group; only the order of
 * the fp32 sums differs. Each thread takes whole blocks of 16 output columns. For a block it first turns
 * the codes of every group into one weight tile (8 rows of 4 k-steps by 16 columns, int8, 512 bytes) by
 * gathering 4 bytes of each column at a time, then for every 16 rows of x and every group one tdpbssd gives
 * the 16 x 16 int32 dot products, which are scaled (weight scale times activation scale) and summed in fp32
 * with the mins' term (min times the activation codes' sum). Below MIN_ROWS rows, for widths that are not
 * whole blocks and in a build without AMX-INT8 it is quant_linear.c. The caller must hold the kernel's
 * permission to use AMX state (kernels/cpu_amx.py).
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"
#include "quantize_rows.h"

/* MIN_ROWS: from how many rows the tiles beat quant_linear.c's VNNI loop (docs/engine.md) */
enum { GROUP = QUANT_GROUP, TILE_ROWS = 16, TILE_COLS = 16, QUADS = GROUP / 4, MIN_ROWS = 6 };

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__)
#include <omp.h>

#include "tile_config.h"

int32_t kvtool_quant_amx_linear_built(void) { return MIN_ROWS; }

/* tiles 0-1: int32 sums of two groups, 2-3: their x tiles (16 rows by 32 codes), 4-5: their weight tiles */
static void configure_tiles(void) {
    static const uint8_t rows[6] = {TILE_ROWS, TILE_ROWS, TILE_ROWS, TILE_ROWS, QUADS, QUADS};
    static const uint16_t colsb[6] = {TILE_COLS * 4, TILE_COLS * 4, GROUP, GROUP, TILE_COLS * 4, TILE_COLS * 4};
    load_tile_config(6, rows, colsb);
}

/* x quantized, padded with zero rows to whole tiles: codes [rows, k], scales and code sums [rows, groups] */
typedef struct {
    int8_t *qx;
    float *dx, *xsum;
} Rows;

/* one block of 16 columns: its weight tiles [groups][QUADS][16 x 4 bytes], scales and mins [groups][16] */
typedef struct {
    int32_t *tiles;
    float *scales, *mins;
} Block;

/* the block of columns j0 .. j0 + 15 in tiles: 4-bit codes are widened to bytes 0-15, as signed int8 */
static void fill_block(const uint8_t *codes, const float *scales, const float *mins, int64_t k, int64_t j0,
                       int bits, Block *b) {
    int64_t groups = k / GROUP, row_bytes = bits == 8 ? k : k / 2, group_bytes = bits == 8 ? GROUP : GROUP / 2;
    __m512i columns = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32((int32_t)row_bytes));
    __m512i group_columns = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32((int32_t)groups));
    __m512i nibble = _mm512_set1_epi8(0x0F);
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *base = codes + j0 * row_bytes + g * group_bytes;
        int32_t *tile = b->tiles + g * QUADS * TILE_COLS;
        for (int quad = 0; quad < (bits == 8 ? QUADS : QUADS / 2); quad++) {
            __m512i v = _mm512_i32gather_epi32(columns, base + 4 * quad, 1);
            if (bits == 8) {
                _mm512_store_si512(tile + quad * TILE_COLS, v);
                continue;
            }  /* byte i of a group holds code i in its low nibble and code i + 16 in its high one */
            _mm512_store_si512(tile + quad * TILE_COLS, _mm512_and_si512(v, nibble));
            _mm512_store_si512(tile + (quad + QUADS / 2) * TILE_COLS, _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble));
        }
        const float *at = scales + j0 * groups + g;
        _mm512_store_ps(b->scales + g * TILE_COLS, _mm512_i32gather_ps(group_columns, at, 4));
        __m512 m = mins ? _mm512_i32gather_ps(group_columns, mins + j0 * groups + g, 4) : _mm512_setzero_ps();
        _mm512_store_ps(b->mins + g * TILE_COLS, m);
    }
}

/* acc[r] += the group's int32 sums of row r, times the column scales and the row's, plus min times code sum */
INLINE void add_group(__m512 *acc, const int32_t *sums, const Block *b, const Rows *x, int64_t r0, int64_t g,
                      int64_t groups) {
    __m512 scale = _mm512_load_ps(b->scales + g * TILE_COLS), min = _mm512_load_ps(b->mins + g * TILE_COLS);
    #pragma GCC unroll 16
    for (int r = 0; r < TILE_ROWS; r++) {
        int64_t at = (r0 + r) * groups + g;
        __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * TILE_COLS));
        acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(scale, _mm512_set1_ps(x->dx[at])), acc[r]);
        acc[r] = _mm512_fmadd_ps(min, _mm512_set1_ps(x->xsum[at]), acc[r]);
    }
}

/* the int32 sums of x tile xt with the block's groups g and g + 1 (where g + 1 < groups) into sums[0], sums[1] */
INLINE void pair_sums(const int8_t *xt, const Block *b, int64_t k, int64_t g, int32_t (*sums)[TILE_ROWS * TILE_COLS]) {
    int64_t groups = k / GROUP;
    _tile_zero(0);
    _tile_loadd(2, xt + g * GROUP, k);
    _tile_loadd(4, b->tiles + g * QUADS * TILE_COLS, TILE_COLS * 4);
    _tile_dpbssd(0, 2, 4);
    if (g + 1 < groups) {
        _tile_zero(1);
        _tile_loadd(3, xt + (g + 1) * GROUP, k);
        _tile_loadd(5, b->tiles + (g + 1) * QUADS * TILE_COLS, TILE_COLS * 4);
        _tile_dpbssd(1, 3, 5);
        _tile_stored(1, sums[1], TILE_COLS * 4);
    }
    _tile_stored(0, sums[0], TILE_COLS * 4);
}

/* out rows r0 .. r0 + 15 (those below `rows`), columns j0 .. j0 + 15: one x tile per group against the block.
 * The tiles of each pair of groups are stored one pair ahead of the vector work that scales them, so that
 * the vector loads do not wait on the tile stores just issued. */
static void row_tile(const Rows *x, const Block *b, int64_t r0, int64_t rows, int64_t k, int64_t n, int64_t j0,
                     float *out) {
    int64_t groups = k / GROUP;
    int32_t sums[2][2][TILE_ROWS * TILE_COLS] __attribute__((aligned(64)));  /* [pair parity][group of pair] */
    __m512 acc[TILE_ROWS];
    #pragma GCC unroll 16
    for (int r = 0; r < TILE_ROWS; r++) acc[r] = _mm512_setzero_ps();
    const int8_t *xt = x->qx + r0 * k;
    pair_sums(xt, b, k, 0, sums[0]);
    for (int64_t g = 0; g < groups; g += 2) {
        if (g + 2 < groups) pair_sums(xt, b, k, g + 2, sums[(g / 2 + 1) % 2]);
        add_group(acc, sums[(g / 2) % 2][0], b, x, r0, g, groups);
        if (g + 1 < groups) add_group(acc, sums[(g / 2) % 2][1], b, x, r0, g + 1, groups);
    }
    #pragma GCC unroll 16  /* whole, so that acc stays in registers */
    for (int r = 0; r < TILE_ROWS; r++)
        if (r0 + r < rows) _mm512_storeu_ps(out + (r0 + r) * n + j0, acc[r]);
}

static void free_rows(Rows *x) {
    free(x->qx);
    free(x->dx);
    free(x->xsum);
}

/* x [rows, k] quantized group by group into `padded` rows, the rows beyond `rows` zero */
static int32_t quantize_padded(const float *x, int64_t rows, int64_t padded, int64_t k, Rows *q) {
    int64_t groups = k / GROUP;
    q->qx = aligned_alloc(64, (size_t)(padded * k + 63) / 64 * 64);
    q->dx = calloc((size_t)(padded * groups), sizeof(float));
    q->xsum = calloc((size_t)(padded * groups), sizeof(float));
    if (!q->qx || !q->dx || !q->xsum) return free_rows(q), STATUS_NO_MEMORY;
    memset(q->qx + rows * k, 0, (size_t)((padded - rows) * k));
    for (int64_t i = 0; i < rows * groups; i++) quantize_group(x + i * GROUP, q->qx + i * GROUP, q->dx + i, q->xsum + i);
    return STATUS_OK;
}

static int32_t tile_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                           const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    int64_t groups = k / GROUP, padded = (rows + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS;
    Rows q;
    if (quantize_padded(x, rows, padded, k, &q)) return STATUS_NO_MEMORY;
    size_t block_floats = (size_t)(groups * TILE_COLS), block_bytes = block_floats * (QUADS + 2) * 4;
    char *scratch = aligned_alloc(64, block_bytes * (size_t)num_threads);  /* each thread's Block */
    if (scratch == NULL) return free_rows(&q), STATUS_NO_MEMORY;
    #pragma omp parallel num_threads(num_threads)
    {
        float *own = (float *)(scratch + block_bytes * (size_t)omp_get_thread_num());
        Block b = {(int32_t *)own, own + block_floats * QUADS, own + block_floats * (QUADS + 1)};
        configure_tiles();
        #pragma omp for schedule(static)
        for (int64_t j0 = 0; j0 < n; j0 += TILE_COLS) {
            fill_block(codes, scales, mins, k, j0, bits, &b);
            for (int64_t r0 = 0; r0 < rows; r0 += TILE_ROWS) row_tile(&q, &b, r0, rows, k, n, j0, out);
        }
        _tile_release();
    }
    free(scratch);
    free_rows(&q);
    return STATUS_OK;
}

int32_t kvtool_quant_amx_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                                const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    if (rows < MIN_ROWS || n % TILE_COLS || k % GROUP)
        return kvtool_quant_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
    return tile_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
}

#else

int32_t kvtool_quant_amx_linear_built(void) { return 0; }

int32_t kvtool_quant_amx_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                                const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    return kvtool_quant_linear(x, out, rows, k, n, codes, scales, mins, bits, num_threads);
}

#endif
