/* Weight-only quantized linear layer for the CPU: y = x W^T with W kept as GGUF-style codes.
 *
 * Same contract as `quant_linear` in kernels/reference.py. W [n, k] is held in groups of 32
 * consecutive weights along k, each with an fp32 scale and an optional fp32 min: w = scale * code + min.
 * - bits 4: codes [n, k / 2] bytes; byte i of a group holds code i (low nibble) and code i + 16 (high).
 * - bits 8: codes [n, k] int8.
 * x [rows, k] fp32 is first quantized the way llama.cpp quantizes activations (per group of 32: a
 * scale amax / 127 and int8 codes rounded to nearest even); each group's dot product is then exact
 * in int32 and scaled once. out [rows, n] fp32. Output columns are spread over OpenMP threads.
 */
#include <stdlib.h>

#include "common.h"
#include "layer_ops.h"
#include "quantize_rows.h"
#include "vectors.h"

enum { GROUP = QUANT_GROUP, ROW_TILE = 4 };

typedef struct {
    const int8_t *qx;   /* [rows, k] */
    const float *dx;    /* [rows, k / GROUP]: the activation scales */
    const float *xsum;  /* [rows, k / GROUP]: dx * the sum of the group's codes */
} QuantizedRows;

/* x [rows, k] quantized group by group (quantize_rows.h) */
static void quantize_rows(const float *x, int64_t rows, int64_t k, int8_t *qx, float *dx, float *xsum) {
    for (int64_t g = 0; g < rows * (k / GROUP); g++) quantize_group(x + g * GROUP, qx + g * GROUP, dx + g, xsum + g);
}

/* sum over the row's groups of min * xsum: the part of the dot product the mins contribute */
INLINE float min_term(const float *mins, const float *xsum, int64_t groups) {
    float acc = 0;
    for (int64_t g = 0; g < groups; g++) acc += mins[g] * xsum[g];
    return acc;
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "quant_linear_avx512.h"

#elif defined(__AVX2__)

INLINE __m256i load_codes(const uint8_t *codes, int bits) {
    if (bits == 8) return _mm256_loadu_si256((const __m256i *)codes);
    __m128i packed = _mm_loadu_si128((const __m128i *)codes);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* 8 partial int32 sums of code * qx: maddubs wants its first operand unsigned */
INLINE __m256i group_dot(__m256i w, __m256i xq, int bits) {
    __m256i pairs = bits == 8 ? _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w))
                              : _mm256_maddubs_epi16(w, xq);
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* out[r, j] for `tile` rows starting at r0 and one weight row j, read once for all of them */
INLINE void column_tile(const QuantizedRows *q, int64_t r0, int tile, int64_t k, const uint8_t *codes,
                        const float *scales, float *dots, int bits) {
    int64_t groups = k / GROUP, group_bytes = bits == 8 ? GROUP : GROUP / 2;
    __m256 acc[ROW_TILE];
    for (int r = 0; r < tile; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m256i w = load_codes(codes + g * group_bytes, bits);
        for (int r = 0; r < tile; r++) {
            int64_t at = (r0 + r) * groups + g;
            __m256i xq = _mm256_loadu_si256((const __m256i *)(q->qx + at * GROUP));
            __m256 sum = _mm256_cvtepi32_ps(group_dot(w, xq, bits));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(scales[g] * q->dx[at]), sum, acc[r]);
        }
    }
    for (int r = 0; r < tile; r++) dots[r] = hsum8(acc[r]);
}

#else

INLINE int32_t code_at(const uint8_t *group, int i, int bits) {
    if (bits == 8) return ((const int8_t *)group)[i];
    return i < GROUP / 2 ? group[i] & 0x0F : group[i - GROUP / 2] >> 4;
}

INLINE void column_tile(const QuantizedRows *q, int64_t r0, int tile, int64_t k, const uint8_t *codes,
                        const float *scales, float *dots, int bits) {
    int64_t groups = k / GROUP, group_bytes = bits == 8 ? GROUP : GROUP / 2;
    for (int r = 0; r < tile; r++) {
        float acc = 0;
        for (int64_t g = 0; g < groups; g++) {
            int64_t at = (r0 + r) * groups + g;
            int32_t sum = 0;
            for (int i = 0; i < GROUP; i++) sum += code_at(codes + g * group_bytes, i, bits) * q->qx[at * GROUP + i];
            acc += scales[g] * q->dx[at] * (float)sum;
        }
        dots[r] = acc;
    }
}

#endif

INLINE void output_column(const QuantizedRows *q, int64_t rows, int64_t k, int64_t n, int64_t j, const uint8_t *codes,
                          const float *scales, const float *mins, float *out, int bits) {
    int64_t groups = k / GROUP, row_bytes = bits == 8 ? k : k / 2;
    const uint8_t *w = codes + j * row_bytes;
    float dots[ROW_TILE];
    for (int64_t r0 = 0; r0 < rows; r0 += ROW_TILE) {
        int tile = rows - r0 < ROW_TILE ? (int)(rows - r0) : ROW_TILE;
        switch (tile) {  /* a constant tile once inlined, so that the accumulators stay in registers */
            case 1: column_tile(q, r0, 1, k, w, scales + j * groups, dots, bits); break;
            case 2: column_tile(q, r0, 2, k, w, scales + j * groups, dots, bits); break;
            case 3: column_tile(q, r0, 3, k, w, scales + j * groups, dots, bits); break;
            default: column_tile(q, r0, ROW_TILE, k, w, scales + j * groups, dots, bits); break;
        }
        for (int r = 0; r < tile; r++) {
            float extra = mins ? min_term(mins + j * groups, q->xsum + (r0 + r) * groups, groups) : 0.0f;
            out[(r0 + r) * n + j] = dots[r] + extra;
        }
    }
}

/* out [rows, n] = x [rows, k] W^T for W given by codes, scales and mins (mins may be NULL) */
int32_t kvtool_quant_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                            const float *scales, const float *mins, int32_t bits, int32_t num_threads) {
    int64_t groups = k / GROUP;
    int8_t *qx = malloc(rows * k);
    float *dx = malloc(sizeof(float) * rows * groups), *xsum = malloc(sizeof(float) * rows * groups);
    if (!qx || !dx || !xsum) {
        free(qx);
        free(dx);
        free(xsum);
        return STATUS_NO_MEMORY;
    }
    quantize_rows(x, rows, k, qx, dx, xsum);
    QuantizedRows q = {qx, dx, xsum};
    /* a small matrix stays on the calling thread: waking the others costs more than the work */
    int threads = n * k * (rows < ROW_TILE ? rows : ROW_TILE) >= 65536 ? num_threads : 1;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t j = 0; j < n; j++) {
        if (bits == 8) output_column(&q, rows, k, n, j, codes, scales, mins, out, 8);
        else output_column(&q, rows, k, n, j, codes, scales, mins, out, 4);
    }
    free(qx);
    free(dx);
    free(xsum);
    return STATUS_OK;
}
