/* AVX-512 VNNI body of quant_panel_linear.c: a group's integer sums for 16 columns in one vector per row, by
 * vpdpbusd (unsigned codes times signed activations), then the AVX2 body's fp32 steps on 16 lanes at once.
 * 4-bit codes: one 64-byte load is two lane steps, columns 0-7 in the low nibbles and 8-15 in the high ones,
 * so each half of a vector holds one step and the halves are added at the group's end. 8-bit codes: one lane
 * step is 64 bytes, all 16 columns, multiplied through their magnitude with the activation's sign changed
 * where a code is negative (an activation is never -128: it is rounded from amax / 127). */
#include <immintrin.h>

int32_t kvtool_quant_panel_linear_vectorized(void) { return 16; }

/* row r's 4 activation codes of one lane step */
INLINE int32_t x_lane(const int8_t *xq, int64_t r) {
    int32_t lane;
    memcpy(&lane, xq + r * LANE, LANE);
    return lane;
}

/* 16 columns' sums from a 4-bit tile's two halves: lanes 0-7 of lo (columns 0-7) and hi (8-15) hold the even
 * lane steps, lanes 8-15 the odd ones */
INLINE __m512i fold_steps(__m512i lo, __m512i hi) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(lo, hi, 0x44), _mm512_shuffle_i64x2(lo, hi, 0xEE));
}

/* sums [rows][PANEL] += group g of a tile times group g of a panel; `rows` and `bits` constants once inlined */
INLINE void group_sums(const Tiles *x, const Panels *w, int64_t t, int64_t p, int64_t g, int64_t rows,
                       int64_t bits, float *sums) {
    int64_t steps = w->k / LANE, step_bytes = PANEL * LANE * bits / 8, groups = w->k / QUANT_GROUP;
    const uint8_t *codes = w->codes + (p * steps + g * LANES_PER_GROUP) * step_bytes;
    const int8_t *tile = x->codes + (t * steps + g * LANES_PER_GROUP) * TILE * LANE;
    __m512i lo[TILE], hi[TILE], nibble = _mm512_set1_epi8(15);
    for (int64_t r = 0; r < rows; r++) lo[r] = hi[r] = _mm512_setzero_si512();
    for (int64_t i = 0; i < LANES_PER_GROUP; i += bits == 4 ? 2 : 1) {
        __m512i v = _mm512_loadu_si512(codes + i * step_bytes), w0, w1 = _mm512_setzero_si512();
        __mmask64 negative = 0;
        if (bits == 4) {
            w0 = _mm512_and_si512(v, nibble);
            w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
        } else {
            w0 = _mm512_abs_epi8(v);
            negative = _mm512_movepi8_mask(v);
        }
        const int8_t *xq = tile + i * TILE * LANE;
        for (int64_t r = 0; r < rows; r++) {
            __m512i a = _mm512_set1_epi32(x_lane(xq, r));
            if (bits == 4) {
                a = _mm512_mask_set1_epi32(a, 0xFF00, x_lane(xq + TILE * LANE, r));
                lo[r] = _mm512_dpbusd_epi32(lo[r], w0, a);
                hi[r] = _mm512_dpbusd_epi32(hi[r], w1, a);
            } else {
                a = _mm512_mask_sub_epi8(a, negative, _mm512_setzero_si512(), a);
                lo[r] = _mm512_dpbusd_epi32(lo[r], w0, a);
            }
        }
    }
    const float *column_mins = w->mins ? w->mins + (p * groups + g) * PANEL : NULL;
    __m512 sc = _mm512_loadu_ps(w->scales + (p * groups + g) * PANEL);
    __m512 mn = column_mins ? _mm512_loadu_ps(column_mins) : _mm512_setzero_ps();
    const float *scales = x->scales + (t * groups + g) * TILE, *code_sums = x->code_sums + (t * groups + g) * TILE;
    for (int64_t r = 0; r < rows; r++) {
        __m512i dot = bits == 4 ? fold_steps(lo[r], hi[r]) : lo[r];
        __m512 s = _mm512_loadu_ps(sums + r * PANEL);
        s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sc, _mm512_set1_ps(scales[r])), s);
        _mm512_storeu_ps(sums + r * PANEL, _mm512_fmadd_ps(mn, _mm512_set1_ps(code_sums[r]), s));
    }
}
