/* Every decoder layer of a Llama-family model for a decode step of a few sequences, in one call.
 *
 * At batch 1 a layer's own work is a few tens of microseconds per kernel, and calling each kernel
 * from Python cost about as much again. This runs the same kernels, in the same order, on the same
 * buffers as the Python layers do (RMSNorm, qkv, rotary, the KV write, decode attention, o, RMSNorm,
 * gate_up, SiLU-and-mul, down), so its results are theirs bit for bit. A linear layer is a plain weight
 * (small_linear.c), a weight packed in column panels (panel_linear.c), bf16 AMX tiles (amx_linear.c) or
 * GGUF-style codes in column panels (quant_panel_linear.c, or quant_amx_linear.c on AMX-INT8 tiles; fp32 steps
 * only). Given token ids, it also gathers their embeddings first; given a logits buffer, it ends
 * with the final norm and the output layer, as compute_logits does. Contract:
 * engine/runtime/models/fused_decode.py.
 */
#include "common.h"
#include "layer_ops.h"
#include "paged_decode.h"

enum { PLAIN = 0, PANELS = 1, AMX_TILES = 2 };  /* Linear.panels: how a weight is laid out or multiplied */

/* a weight [n, k] in the step's dtype, plain, packed in column panels or in AMX tiles, or (scales set)
 * codes in column panels with fp32 scales and mins (or NULL), for quant_panel_linear.c (panels 1) or, from a few
 * rows on AMX-INT8 tiles, quant_amx_linear.c (panels 2) */
typedef struct {
    const void *weight, *bias;                    /* bias [n] or NULL */
    const float *scales, *mins;
    int64_t bits, panels;
} Linear;

typedef struct {
    const void *input_norm, *post_norm;           /* [hidden] */
    Linear qkv, o, gate_up, down;
    void *k_cache, *v_cache;
    const float *cos_sin;                         /* [max_positions, head_dim] */
    int64_t sliding_window;
} Layer;

typedef struct {
    const Layer *layers;
    int64_t num_layers, rows, hidden, num_heads, num_kv_heads, head_dim, intermediate;
    int64_t block_size, table_stride;
    float eps, scale;
    int32_t dtype, num_threads;
    int32_t cache_dtype;                          /* the KV cache's: dtype's, or bf16 beside fp32 */
    const int64_t *positions, *slot_mapping;
    const int32_t *block_tables, *context_lens;
    void *x, *residual;                           /* [rows, hidden]: the embeddings in, the last layer's out */
    void *normed, *qkv, *q_rot, *k_rot, *attn, *gate_up, *act;  /* scratch, sized for `rows` */
    const int64_t *input_ids;                     /* or NULL: x holds the embeddings already */
    const void *embed;                            /* [vocab, hidden], read where input_ids is set */
    const void *final_norm;                       /* [hidden] */
    Linear lm_head;                               /* [vocab, hidden] */
    int64_t vocab;
    void *head_out;                               /* [rows, vocab] in a bf16 step (widened into logits), else NULL */
    float *logits;                                /* [rows, vocab], or NULL: x is the step's result */
} Step;

/* out [rows, n] = x [rows, k] W^T + bias, as PackedLinear or QuantLinear computes it; STATUS_NO_MEMORY where a
 * kernel's scratch could not be allocated */
static int32_t linear(const Step *s, const Linear *l, const void *x, void *out, int64_t k, int64_t n) {
    if (!l->scales && l->panels == AMX_TILES)
        return kvtool_amx_linear(x, l->weight, l->bias, out, s->rows, k, n, s->num_threads);
    if (!l->scales && l->panels == PANELS)
        return kvtool_panel_linear(x, l->weight, l->bias, out, s->rows, k, n, s->dtype, s->num_threads);
    if (!l->scales) {
        kvtool_small_linear(x, l->weight, l->bias, out, s->rows, k, n, s->dtype, s->num_threads);
        return STATUS_OK;
    }
    float *y = out;
    int32_t bits = (int32_t)l->bits, threads = s->num_threads, status =
        l->panels == AMX_TILES ? kvtool_quant_amx_linear(x, y, s->rows, k, n, l->weight, l->scales, l->mins, bits, threads)
                               : kvtool_quant_panel_linear(x, y, s->rows, k, n, l->weight, l->scales, l->mins, bits, threads);
    if (l->bias)
        for (int64_t i = 0; i < s->rows * n; i++) y[i] += ((const float *)l->bias)[i % n];
    return status;
}

static int32_t attention(const Step *s, const Layer *l, int64_t element) {
    int64_t q = s->num_heads * s->head_dim, kv = s->num_kv_heads * s->head_dim, width = q + 2 * kv;
    int32_t dt = s->dtype, threads = s->num_threads;
    if (linear(s, &l->qkv, s->normed, s->qkv, s->hidden, width)) return STATUS_NO_MEMORY;
    const char *qkv = s->qkv;
    kvtool_rotary(s->positions, qkv, width, qkv + q * element, width, l->cos_sin, s->q_rot, s->k_rot, s->rows,
                  s->num_heads, s->num_kv_heads, s->head_dim, dt, threads);
    kvtool_store_kv(s->k_rot, qkv + (q + kv) * element, kv, width, l->k_cache, l->v_cache, s->slot_mapping, s->rows,
                    kv, dt, s->cache_dtype);
    DecodeArgs args = {s->q_rot, l->k_cache, l->v_cache, s->block_tables, s->context_lens, s->attn,
                       s->rows, s->num_heads, s->num_kv_heads, s->head_dim, s->block_size, s->table_stride,
                       s->scale, dt, threads, s->cache_dtype, l->sliding_window};
    kvtool_paged_decode(&args);
    return linear(s, &l->o, s->attn, s->x, q, s->hidden);
}

static int32_t mlp(const Step *s, const Layer *l) {
    int32_t dt = s->dtype, threads = s->num_threads;
    if (linear(s, &l->gate_up, s->normed, s->gate_up, s->hidden, 2 * s->intermediate)) return STATUS_NO_MEMORY;
    kvtool_silu_and_mul(s->gate_up, s->act, s->rows, s->intermediate, dt, threads);
    return linear(s, &l->down, s->act, s->x, s->intermediate, s->hidden);
}

/* x [r] = embed [input_ids [r]], the rows nn.Embedding gives (the input processor has checked every id
 * against the vocabulary) */
static void gather_embeddings(const Step *s, int64_t element) {
    int64_t row = s->hidden * element;
    for (int64_t r = 0; r < s->rows; r++)
        memcpy((char *)s->x + r * row, (const char *)s->embed + s->input_ids[r] * row, row);
}

/* logits = lm_head(norm(x)), widened to fp32 */
static int32_t output_logits(const Step *s) {
    kvtool_rms_norm(s->x, NULL, s->final_norm, s->normed, NULL, s->rows, s->hidden, s->eps, s->dtype, s->num_threads);
    void *out = s->head_out ? s->head_out : (void *)s->logits;
    if (linear(s, &s->lm_head, s->normed, out, s->hidden, s->vocab)) return STATUS_NO_MEMORY;
    if (s->head_out)
        for (int64_t i = 0; i < s->rows * s->vocab; i++) s->logits[i] = load_scalar(s->head_out, i, s->dtype);
    return STATUS_OK;
}

/* x holds the embeddings on entry (or input_ids their rows), and on return the last layer's output plus its
 * residual, rounded to the dtype as torch's add rounds it; logits (where set) the rows' logits. STATUS_NO_MEMORY
 * where a linear layer's scratch could not be allocated (x and logits are then no step's result) */
int32_t kvtool_decode_step(const Step *s) {
    int64_t element = element_size(s->dtype);
    int32_t dt = s->dtype, threads = s->num_threads;
    if (s->input_ids) gather_embeddings(s, element);
    memcpy(s->residual, s->x, s->rows * s->hidden * element);  /* the first layer: residual = x, x = norm(x) */
    kvtool_rms_norm(s->x, NULL, s->layers[0].input_norm, s->normed, NULL, s->rows, s->hidden, s->eps, dt, threads);
    for (int64_t i = 0; i < s->num_layers; i++) {
        const Layer *l = &s->layers[i];
        if (i > 0)
            kvtool_rms_norm(s->x, s->residual, l->input_norm, s->normed, s->residual, s->rows, s->hidden, s->eps, dt,
                            threads);
        if (attention(s, l, element)) return STATUS_NO_MEMORY;
        kvtool_rms_norm(s->x, s->residual, l->post_norm, s->normed, s->residual, s->rows, s->hidden, s->eps, dt,
                        threads);
        if (mlp(s, l)) return STATUS_NO_MEMORY;
    }
    for (int64_t i = 0; i < s->rows * s->hidden; i++)
        store_scalar(s->x, i, load_scalar(s->x, i, dt) + load_scalar(s->residual, i, dt), dt);
    return s->logits ? output_logits(s) : STATUS_OK;
}
