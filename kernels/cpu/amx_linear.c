/* bf16 linear layer on AMX tiles for decode-sized batches: out = x W^T + bias, reading W once per call.
 *
 * Same contract as `amx_linear` in kernels/reference.py. x [rows, k] and out [rows, n] bf16, bias [n] bf16 or
 * NULL, W packed by `reference.pack_amx_tiles`: for each block of 16 output columns and 32 k-steps, one 1 KiB
 * tile of 16 k-pairs by 16 columns (two bf16 each), blocks of one column block consecutive. Products are
 * summed in fp32 by the tiles, the bias added and the sum rounded to bf16 once.
 *
 * Each thread takes whole column blocks and streams their tiles once: for every 32 k-steps it loads one W
 * tile and multiplies it with the x tile of each 16 rows (at most MAX_ROWS / 16 of them, held in L1/L2), so
 * the weight comes from memory once whatever the row count. The caller must hold the kernel's permission to
 * use AMX state (arch_prctl ARCH_REQ_XCOMP_PERM, kernels/cpu_amx.py): the first tile instruction without it
 * kills the process.
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"

/* AHEAD: how many W tiles ahead a thread asks for the next one's lines */
enum { TILE_ROWS = 16, TILE_K = 32, TILE_COLS = 16, MAX_ROWS = 64, AHEAD = 8 };

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#include "tile_config.h"
#include "vectors.h"

int32_t kvtool_amx_linear_built(void) { return MAX_ROWS; }

/* tiles 0-3: the fp32 sums of up to 4 row tiles, 4: an x tile, 5: a W tile; each 16 rows of 64 bytes */
static void configure_tiles(void) {
    static const uint8_t rows[6] = {16, 16, 16, 16, 16, 16};
    static const uint16_t colsb[6] = {64, 64, 64, 64, 64, 64};
    load_tile_config(6, rows, colsb);
}

/* the 16 x 16 fp32 sums of row tile r into sums, for the column block whose tiles start at w */
#define ROW_TILE_SUMS(R)                                                                        \
    if (R < row_tiles) {                                                                        \
        _tile_zero(R);                                                                          \
    }
#define ROW_TILE_STEP(R)                                                                        \
    if (R < row_tiles) {                                                                        \
        _tile_loadd(4, xp + (R * TILE_ROWS) * k + kb * TILE_K, k * 2);                           \
        _tile_dpbf16ps(R, 4, 5);                                                                \
    }
#define ROW_TILE_STORE(R)                                                                       \
    if (R < row_tiles) _tile_stored(R, sums + R * TILE_ROWS * TILE_COLS, TILE_COLS * 4);

static void column_block(const uint16_t *xp, const uint16_t *w, int64_t k, int row_tiles, float *sums) {
    ROW_TILE_SUMS(0) ROW_TILE_SUMS(1) ROW_TILE_SUMS(2) ROW_TILE_SUMS(3)
    for (int64_t kb = 0; kb < k / TILE_K; kb++) {
        const uint16_t *tile = w + kb * TILE_K * TILE_COLS;
        for (int line = 0; line < 16; line++)  /* the whole tile AHEAD tiles on: 16 lines of 64 bytes */
            _mm_prefetch((const char *)(tile + AHEAD * TILE_K * TILE_COLS) + 64 * line, _MM_HINT_T0);
        _tile_loadd(5, tile, TILE_COLS * 4);
        ROW_TILE_STEP(0) ROW_TILE_STEP(1) ROW_TILE_STEP(2) ROW_TILE_STEP(3)
    }
    ROW_TILE_STORE(0) ROW_TILE_STORE(1) ROW_TILE_STORE(2) ROW_TILE_STORE(3)
}

/* out[r, j0 .. j0 + 15] = sums + bias, rounded to bf16 (to nearest even, as torch rounds), for the rows of x */
static void store_block(const float *sums, const uint16_t *bias, uint16_t *out, int64_t rows, int64_t n, int64_t j0) {
    __m512 b = bias ? load16(bias, j0, DTYPE_BF16) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; r++) {
        __m256bh y = _mm512_cvtneps_pbh(_mm512_add_ps(_mm512_loadu_ps(sums + r * TILE_COLS), b));
        _mm256_storeu_si256((__m256i *)(out + r * n + j0), (__m256i)y);
    }
}

/* x padded with zero rows to whole row tiles, so that every tile load reads 16 rows */
static uint16_t *padded_rows(const uint16_t *x, int64_t rows, int64_t k, int row_tiles) {
    uint16_t *xp = aligned_alloc(64, (size_t)(row_tiles * TILE_ROWS * k * 2 + 63) / 64 * 64);
    if (xp == NULL) return NULL;
    memcpy(xp, x, (size_t)(rows * k * 2));
    memset(xp + rows * k, 0, (size_t)((row_tiles * TILE_ROWS - rows) * k * 2));
    return xp;
}

int32_t kvtool_amx_linear(const void *x, const void *tiles, const void *bias, void *out, int64_t rows, int64_t k,
                          int64_t n, int32_t num_threads) {
    if (rows < 1 || rows > MAX_ROWS || k % TILE_K || n % TILE_COLS) return STATUS_OK;
    int row_tiles = (int)((rows + TILE_ROWS - 1) / TILE_ROWS);
    uint16_t *xp = padded_rows(x, rows, k, row_tiles);
    if (xp == NULL) return STATUS_NO_MEMORY;
    #pragma omp parallel num_threads(num_threads)
    {
        float sums[MAX_ROWS * TILE_COLS] __attribute__((aligned(64)));
        configure_tiles();
        #pragma omp for schedule(static)
        for (int64_t block = 0; block < n / TILE_COLS; block++) {
            column_block(xp, (const uint16_t *)tiles + block * k * TILE_COLS, k, row_tiles, sums);
            store_block(sums, bias, out, rows, n, block * TILE_COLS);
        }
        _tile_release();
    }
    free(xp);
    return STATUS_OK;
}

#else

int32_t kvtool_amx_linear_built(void) { return 0; }

int32_t kvtool_amx_linear(const void *x, const void *tiles, const void *bias, void *out, int64_t rows, int64_t k,
                          int64_t n, int32_t num_threads) {
    (void)x, (void)tiles, (void)bias, (void)out, (void)rows, (void)k, (void)n, (void)num_threads;
    return STATUS_OK;
}

#endif
