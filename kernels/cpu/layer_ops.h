/* The per-layer kernels that decode_step.c chains, declared once: the files that define them include this
 * too, so a signature that changes in one place is a compile error, not a wrong call. */
#ifndef KVTOOL_LAYER_OPS_H
#define KVTOOL_LAYER_OPS_H

#include <stdint.h>

void kvtool_rms_norm(const void *x, const void *residual, const void *weight, void *out, void *residual_out,
                     int64_t rows, int64_t hidden, float eps, int32_t dtype, int32_t num_threads);
void kvtool_silu_and_mul(const void *x, void *out, int64_t rows, int64_t width, int32_t dtype, int32_t num_threads);
void kvtool_rotary(const int64_t *positions, const void *query, int64_t q_row_stride, const void *key,
                   int64_t k_row_stride, const float *cos_sin, void *q_out, void *k_out, int64_t tokens,
                   int64_t q_heads, int64_t k_heads, int64_t head_dim, int32_t dtype, int32_t num_threads);
void kvtool_small_linear(const void *x, const void *w, const void *bias, void *out, int64_t rows, int64_t k,
                         int64_t n, int32_t dtype, int32_t num_threads);
/* these five allocate scratch memory: STATUS_OK, or STATUS_NO_MEMORY with out left unwritten */
int32_t kvtool_panel_linear(const void *x, const void *panels, const void *bias, void *out, int64_t rows, int64_t k,
                            int64_t n, int32_t dtype, int32_t num_threads);
int32_t kvtool_quant_panel_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n,
                                  const uint8_t *codes, const float *scales, const float *mins, int32_t bits,
                                  int32_t num_threads);
int32_t kvtool_amx_linear(const void *x, const void *tiles, const void *bias, void *out, int64_t rows, int64_t k,
                          int64_t n, int32_t num_threads);
int32_t kvtool_quant_amx_linear(const float *x, float *out, int64_t rows, int64_t k, int64_t n, const uint8_t *codes,
                                const float *scales, const float *mins, int32_t bits, int32_t num_threads);
void kvtool_store_kv(const void *key, const void *value, int64_t key_stride, int64_t value_stride, void *k_cache,
                     void *v_cache, const int64_t *slot_mapping, int64_t tokens, int64_t row, int32_t dtype,
                     int32_t cache_dtype);

#endif
