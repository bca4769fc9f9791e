/* Elementwise ops for the CPU, one pass over memory each: RMSNorm (with the residual add),
 * SiLU-and-mul and rotary embedding. Each keeps the rounding steps of its torch reference in
 * kernels/reference.py: an intermediate the reference holds in bf16 is rounded to bf16 here too.
 * Plain loops over rows, split across OpenMP threads; the compiler vectorizes the inner loops.
 */
#include <math.h>

#include "common.h"
#include "layer_ops.h"

/* small inputs stay on the calling thread: waking the others costs more than the work */
static int threads_for(int64_t elements, int32_t num_threads) {
    return elements >= 32768 ? num_threads : 1;
}

/* exp(x) within a few ulp, in a form the compiler vectorizes: 2^n in the exponent bits times a
 * degree-6 polynomial of the remainder */
INLINE float exp_approx(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = __builtin_rintf(x * 1.44269504f);
    float r = x - n * 0.693147182f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, 4);
    return p * two_n;
}

INLINE void rms_norm_row(const void *x, const void *residual, const void *weight, void *out, void *residual_out,
                         int64_t base, int64_t hidden, float eps, int dtype) {
    float sum_sq = 0;
    for (int64_t i = 0; i < hidden; i++) {
        float v = load_scalar(x, base + i, dtype);
        if (residual) {
            v = round_to(v + load_scalar(residual, base + i, dtype), dtype);
            store_scalar(residual_out, base + i, v, dtype);
        }
        sum_sq += v * v;
    }
    float inv_rms = 1.0f / sqrtf(sum_sq / (float)hidden + eps);
    const void *summed = residual ? residual_out : x;
    for (int64_t i = 0; i < hidden; i++) {
        float normed = round_to(load_scalar(summed, base + i, dtype) * inv_rms, dtype);
        store_scalar(out, base + i, normed * load_scalar(weight, i, dtype), dtype);
    }
}

/* out = rms_norm(x + residual) * weight; residual_out = x + residual. residual may be NULL. */
void kvtool_rms_norm(const void *x, const void *residual, const void *weight, void *out, void *residual_out,
                     int64_t rows, int64_t hidden, float eps, int32_t dtype, int32_t num_threads) {
    #pragma omp parallel for schedule(static) num_threads(threads_for(rows * hidden, num_threads))
    for (int64_t r = 0; r < rows; r++) {
        if (dtype == DTYPE_BF16) rms_norm_row(x, residual, weight, out, residual_out, r * hidden, hidden, eps, DTYPE_BF16);
        else rms_norm_row(x, residual, weight, out, residual_out, r * hidden, hidden, eps, DTYPE_F32);
    }
}

INLINE void silu_and_mul_row(const void *x, void *out, int64_t row, int64_t width, int dtype) {
    for (int64_t i = 0; i < width; i++) {
        float gate = load_scalar(x, row * 2 * width + i, dtype);
        float silu = round_to(gate / (1.0f + exp_approx(-gate)), dtype);
        store_scalar(out, row * width + i, silu * load_scalar(x, row * 2 * width + width + i, dtype), dtype);
    }
}

/* x [rows, 2 * width] -> out [rows, width] = silu(x[:, :width]) * x[:, width:] */
void kvtool_silu_and_mul(const void *x, void *out, int64_t rows, int64_t width, int32_t dtype, int32_t num_threads) {
    #pragma omp parallel for schedule(static) num_threads(threads_for(rows * width, num_threads))
    for (int64_t r = 0; r < rows; r++) {
        if (dtype == DTYPE_BF16) silu_and_mul_row(x, out, r, width, DTYPE_BF16);
        else silu_and_mul_row(x, out, r, width, DTYPE_F32);
    }
}

/* one head: out = x * cos + rotate_half(x) * sin, each product and the sum rounded as torch does */
INLINE void rotate_head(const void *x, int64_t x_base, void *out, int64_t out_base, const float *cos_sin,
                        int64_t half, int dtype) {
    for (int64_t i = 0; i < half; i++) {
        float c = round_to(cos_sin[i], dtype), s = round_to(cos_sin[half + i], dtype);
        float x1 = load_scalar(x, x_base + i, dtype), x2 = load_scalar(x, x_base + half + i, dtype);
        store_scalar(out, out_base + i, round_to(x1 * c, dtype) + round_to(-x2 * s, dtype), dtype);
        store_scalar(out, out_base + half + i, round_to(x2 * c, dtype) + round_to(x1 * s, dtype), dtype);
    }
}

INLINE void rotate_token(const void *x, int64_t x_row_stride, void *out, int64_t heads, int64_t head_dim,
                         int64_t t, const float *cos_sin, int dtype) {
    for (int64_t h = 0; h < heads; h++)
        rotate_head(x, t * x_row_stride + h * head_dim, out, (t * heads + h) * head_dim, cos_sin, head_dim / 2, dtype);
}

/* query [T, Hq, D] and key [T, Hkv, D] (rows `*_row_stride` elements apart) rotated at `positions`
 * into q_out / k_out (contiguous); cos_sin [max_positions, D] fp32 holds cos then sin halves */
void kvtool_rotary(const int64_t *positions, const void *query, int64_t q_row_stride, const void *key,
                   int64_t k_row_stride, const float *cos_sin, void *q_out, void *k_out, int64_t tokens,
                   int64_t q_heads, int64_t k_heads, int64_t head_dim, int32_t dtype, int32_t num_threads) {
    #pragma omp parallel for schedule(static) num_threads(threads_for(tokens * (q_heads + k_heads) * head_dim, num_threads))
    for (int64_t t = 0; t < tokens; t++) {
        const float *cs = cos_sin + positions[t] * head_dim;
        if (dtype == DTYPE_BF16) {
            rotate_token(query, q_row_stride, q_out, q_heads, head_dim, t, cs, DTYPE_BF16);
            rotate_token(key, k_row_stride, k_out, k_heads, head_dim, t, cs, DTYPE_BF16);
        } else {
            rotate_token(query, q_row_stride, q_out, q_heads, head_dim, t, cs, DTYPE_F32);
            rotate_token(key, k_row_stride, k_out, k_heads, head_dim, t, cs, DTYPE_F32);
        }
    }
}
