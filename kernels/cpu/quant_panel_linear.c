/* Linear layer over GGUF-style codes kept in column panels: out = x W^T, at any row count.
 *
 * Same contract as `quant_panel_linear` in kernels/reference.py and the same arithmetic as quant_amx_linear.c:
 * w = scale * code + min per group of QUANT_GROUP k-steps, x quantized to int8 per group
 * (quantize_rows.h), each group's dot product exact in integers and scaled once. The codes are laid out
 * in panel_linear.c's panels of PANEL output columns, k-major, LANE k-steps at a time: for each LANE
 * k-steps a panel holds every column's LANE codes side by side (bits 8: 64 bytes; bits 4: 32 bytes, the
 * first 8 columns in the low nibbles and the last 8 in the high ones). One 32-bit lane is then one
 * column's LANE codes, and maddubs multiplies it by LANE codes of x broadcast to every lane, as
 * llama.cpp's dot products do on AVX2.
 * x is packed per call into tiles of TILE rows. Through a group a tile's sums for one panel stay in 12
 * AVX2 registers: int16 for 4-bit codes (8 lanes of at most 2 * 15 * 127 fit), int32 for 8-bit ones;
 * then they are widened, scaled by the column's scale times the row's and added to fp32 sums.
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"
#include "panels.h"
#include "quantize_rows.h"
#include "vectors.h"

enum { LANE = 4, LANES_PER_GROUP = QUANT_GROUP / LANE };

/* x quantized and packed: tile t's codes at codes + t * k * TILE ([k / LANE][TILE][LANE]), its scales
 * and code sums at + t * groups * TILE ([groups][TILE]) */
typedef struct {
    int8_t *codes;
    float *scales, *code_sums;
} Tiles;

/* W: codes [panels][k / LANE][PANEL * LANE * bits / 8], scales and mins (or NULL) [panels][groups][PANEL] */
typedef struct {
    const uint8_t *codes;
    const float *scales, *mins;
    int64_t n, k, bits;
} Panels;

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "quant_panel_linear_avx512.h"

#elif defined(__AVX2__) && defined(__FMA__)

/* one lane step of a tile's integer sums: rows < `rows` of xq (TILE lanes of LANE codes) times w0 (columns
 * 0-7) and w1 (8-15); 4-bit codes are unsigned and sum in int16, 8-bit ones signed, through their magnitude */
#define DOT_ROW(r, lo, hi)                                                                          \
    if (rows > r) {                                                                                 \
        int32_t lane;                                                                               \
        memcpy(&lane, xq + r * LANE, LANE);                                                         \
        __m256i a = _mm256_set1_epi32(lane);                                                        \
        if (bits == 4) {                                                                            \
            lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(w0, a));                                 \
            hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(w1, a));                                 \
        } else {                                                                                    \
            __m256i ones = _mm256_set1_epi16(1);                                                    \
            __m256i p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(w0), _mm256_sign_epi8(a, w0));        \
            __m256i p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(w1), _mm256_sign_epi8(a, w1));        \
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(p0, ones));                                 \
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(p1, ones));                                 \
        }                                                                                           \
    }
/* sums [r] += the row's integer sums times scale * the row's scale, plus min * the row's code sum */
#define SCALE_ROW(r, lo, hi)                                                                        \
    if (rows > r) {                                                                                 \
        __m256 d = _mm256_set1_ps(scales[r]), m = _mm256_set1_ps(code_sums[r]);                     \
        __m256 s0 = _mm256_loadu_ps(sums + r * PANEL), s1 = _mm256_loadu_ps(sums + r * PANEL + 8);  \
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(widen(lo, bits)), _mm256_mul_ps(sc0, d), s0);       \
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(widen(hi, bits)), _mm256_mul_ps(sc1, d), s1);       \
        _mm256_storeu_ps(sums + r * PANEL, _mm256_fmadd_ps(mn0, m, s0));                            \
        _mm256_storeu_ps(sums + r * PANEL + 8, _mm256_fmadd_ps(mn1, m, s1));                        \
    }

INLINE __m256i widen(__m256i v, int64_t bits) {
    return bits == 4 ? _mm256_madd_epi16(v, _mm256_set1_epi16(1)) : v;
}

/* the two vectors of a lane step's codes: columns 0-7 in *w0, 8-15 in *w1 */
INLINE void load_codes(const uint8_t *step, int64_t bits, __m256i *w0, __m256i *w1) {
    if (bits == 8) {
        *w0 = _mm256_loadu_si256((const __m256i *)step);
        *w1 = _mm256_loadu_si256((const __m256i *)(step + 32));
        return;
    }
    __m256i both = _mm256_loadu_si256((const __m256i *)step), nibble = _mm256_set1_epi8(15);
    *w0 = _mm256_and_si256(both, nibble);
    *w1 = _mm256_and_si256(_mm256_srli_epi16(both, 4), nibble);
}

/* sums [rows][PANEL] += group g of a tile times group g of a panel; `rows` and `bits` constants once inlined */
INLINE void group_sums(const Tiles *x, const Panels *w, int64_t t, int64_t p, int64_t g, int64_t rows,
                       int64_t bits, float *sums) {
    int64_t steps = w->k / LANE, step_bytes = PANEL * LANE * bits / 8, groups = w->k / QUANT_GROUP;
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00;
    __m256i s30 = s00, s31 = s00, s40 = s00, s41 = s00, s50 = s00, s51 = s00;
    const uint8_t *codes = w->codes + (p * steps + g * LANES_PER_GROUP) * step_bytes;
    const int8_t *tile = x->codes + (t * steps + g * LANES_PER_GROUP) * TILE * LANE;
    for (int64_t i = 0; i < LANES_PER_GROUP; i++) {
        const int8_t *xq = tile + i * TILE * LANE;
        __m256i w0, w1;
        load_codes(codes + i * step_bytes, bits, &w0, &w1);
        DOT_ROW(0, s00, s01) DOT_ROW(1, s10, s11) DOT_ROW(2, s20, s21)
        DOT_ROW(3, s30, s31) DOT_ROW(4, s40, s41) DOT_ROW(5, s50, s51)
    }
    const float *column_scales = w->scales + (p * groups + g) * PANEL;
    const float *column_mins = w->mins ? w->mins + (p * groups + g) * PANEL : NULL;
    __m256 sc0 = _mm256_loadu_ps(column_scales), sc1 = _mm256_loadu_ps(column_scales + 8);
    __m256 mn0 = column_mins ? _mm256_loadu_ps(column_mins) : _mm256_setzero_ps();
    __m256 mn1 = column_mins ? _mm256_loadu_ps(column_mins + 8) : _mm256_setzero_ps();
    const float *scales = x->scales + (t * groups + g) * TILE, *code_sums = x->code_sums + (t * groups + g) * TILE;
    SCALE_ROW(0, s00, s01) SCALE_ROW(1, s10, s11) SCALE_ROW(2, s20, s21)
    SCALE_ROW(3, s30, s31) SCALE_ROW(4, s40, s41) SCALE_ROW(5, s50, s51)
}

int32_t kvtool_quant_panel_linear_vectorized(void) { return 8; }

#else

INLINE int32_t code_at(const uint8_t *step, int64_t c, int64_t i, int64_t bits) {
    if (bits == 8) return ((const int8_t *)step)[c * LANE + i];
    return c < PANEL / 2 ? step[c * LANE + i] & 15 : step[(c - PANEL / 2) * LANE + i] >> 4;
}

INLINE void group_sums(const Tiles *x, const Panels *w, int64_t t, int64_t p, int64_t g, int64_t rows,
                       int64_t bits, float *sums) {
    int64_t steps = w->k / LANE, step_bytes = PANEL * LANE * bits / 8, groups = w->k / QUANT_GROUP;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < PANEL; c++) {
            int32_t dot = 0;
            for (int64_t s = g * LANES_PER_GROUP; s < (g + 1) * LANES_PER_GROUP; s++)
                for (int64_t i = 0; i < LANE; i++)
                    dot += code_at(w->codes + (p * steps + s) * step_bytes, c, i, bits) *
                           x->codes[((t * steps + s) * TILE + r) * LANE + i];
            int64_t at = (p * groups + g) * PANEL + c, row = (t * groups + g) * TILE + r;
            float sum = sums[r * PANEL + c] + (float)dot * (w->scales[at] * x->scales[row]);
            sums[r * PANEL + c] = sum + (w->mins ? w->mins[at] * x->code_sums[row] : 0.0f);
        }
}

int32_t kvtool_quant_panel_linear_vectorized(void) { return 0; }

#endif

/* sums [rows][PANEL] = tile t times panel p; `rows` and `bits` constants once inlined */
INLINE void tile_sums(const Tiles *x, const Panels *w, int64_t t, int64_t p, int64_t rows, int64_t bits,
                      float *sums) {
    memset(sums, 0, sizeof(float) * TILE * PANEL);
    for (int64_t g = 0; g < w->k / QUANT_GROUP; g++) group_sums(x, w, t, p, g, rows, bits, sums);
}

static void any_tile(const Tiles *x, const Panels *w, int64_t t, int64_t p, int64_t rows, float *sums) {
    int64_t bits = w->bits;
    switch (rows * 16 + bits) {
        case 1 * 16 + 4: tile_sums(x, w, t, p, 1, 4, sums); break;
        case 2 * 16 + 4: tile_sums(x, w, t, p, 2, 4, sums); break;
        case 3 * 16 + 4: tile_sums(x, w, t, p, 3, 4, sums); break;
        case 4 * 16 + 4: tile_sums(x, w, t, p, 4, 4, sums); break;
        case 5 * 16 + 4: tile_sums(x, w, t, p, 5, 4, sums); break;
        case TILE * 16 + 4: tile_sums(x, w, t, p, TILE, 4, sums); break;
        case 1 * 16 + 8: tile_sums(x, w, t, p, 1, 8, sums); break;
        case 2 * 16 + 8: tile_sums(x, w, t, p, 2, 8, sums); break;
        case 3 * 16 + 8: tile_sums(x, w, t, p, 3, 8, sums); break;
        case 4 * 16 + 8: tile_sums(x, w, t, p, 4, 8, sums); break;
        case 5 * 16 + 8: tile_sums(x, w, t, p, 5, 8, sums); break;
        default: tile_sums(x, w, t, p, TILE, 8, sums); break;
    }
}

/* out rows [r0, r0 + rows) (whole tiles) of panel p's columns */
static void panel_block(const Tiles *x, const Panels *w, int64_t p, float *out, int64_t r0, int64_t rows) {
    float sums[TILE * PANEL];
    for (int64_t t = r0 / TILE; t * TILE < r0 + rows; t++) {
        int64_t tile_rows = r0 + rows - t * TILE < TILE ? r0 + rows - t * TILE : TILE;
        any_tile(x, w, t, p, tile_rows, sums);
        for (int64_t r = 0; r < tile_rows; r++)
            for (int64_t c = 0; c < PANEL && p * PANEL + c < w->n; c++)
                out[(t * TILE + r) * w->n + p * PANEL + c] = sums[r * PANEL + c];
    }
}

/* x [rows, k] quantized into tiles of TILE rows (the last one padded with zeros) */
static void quantize_tiles(const float *x, int64_t rows, int64_t k, Tiles *tiles, int32_t num_threads) {
    int64_t count = (rows + TILE - 1) / TILE, groups = k / QUANT_GROUP;
    #pragma omp parallel for schedule(static) num_threads(rows * k >= 65536 ? num_threads : 1)
    for (int64_t t = 0; t < count; t++)
        for (int64_t r = 0; r < TILE; r++)
            for (int64_t g = 0; g < groups; g++) {
                int8_t codes[QUANT_GROUP] = {0};
                int64_t at = (t * groups + g) * TILE + r;
                tiles->scales[at] = tiles->code_sums[at] = 0.0f;
                if (t * TILE + r < rows)
                    quantize_group(x + (t * TILE + r) * k + g * QUANT_GROUP, codes, tiles->scales + at,
                                   tiles->code_sums + at);
                int8_t *lanes = tiles->codes + ((t * (k / LANE) + g * LANES_PER_GROUP) * TILE + r) * LANE;
                for (int64_t i = 0; i < QUANT_GROUP; i++) lanes[i / LANE * TILE * LANE + i % LANE] = codes[i];
            }
}

/* out [rows, n] fp32 = x [rows, k] fp32 times W held as codes in panels (reference.pack_quant_panels) */
int32_t kvtool_quant_panel_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n,
                                  const uint8_t *codes, const float *scales, const float *mins, int32_t bits,
                                  int32_t num_threads) {
    if (rows < 1) return STATUS_OK;
    int64_t count = (rows + TILE - 1) / TILE, groups = k / QUANT_GROUP;
    Tiles tiles = {malloc(count * TILE * k), malloc(sizeof(float) * count * TILE * groups),
                   malloc(sizeof(float) * count * TILE * groups)};
    if (!tiles.codes || !tiles.scales || !tiles.code_sums) {
        free(tiles.codes);
        free(tiles.scales);
        free(tiles.code_sums);
        return STATUS_NO_MEMORY;
    }
    quantize_tiles(x, rows, k, &tiles, num_threads);
    Panels w = {codes, scales, mins, n, k, bits};
    int64_t panels = (n + PANEL - 1) / PANEL, rows_per_block = block_rows(rows);
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    /* a thread's share: consecutive panels of one block of rows, or whole blocks where there are several */
    #pragma omp parallel for schedule(static) num_threads(num_threads)
    for (int64_t item = 0; item < blocks * panels; item++) {
        int64_t r0 = item / panels * rows_per_block, block = rows - r0 < rows_per_block ? rows - r0 : rows_per_block;
        panel_block(&tiles, &w, item % panels, out, r0, block);
    }
    free(tiles.codes);
    free(tiles.scales);
    free(tiles.code_sums);
    return STATUS_OK;
}
