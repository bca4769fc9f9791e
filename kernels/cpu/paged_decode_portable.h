/* Portable path of paged_decode.c: plain loops the compiler vectorizes as far as the target allows. */

INLINE void attend_typed(const DecodeArgs *a, int64_t b, float *scratch, int cache_dtype) {
    int64_t first = first_visible(a, a->context_lens[b]), ctx = a->context_lens[b] - first;
    int64_t hq = a->num_heads, d = a->head_dim, group = hq / a->num_kv_heads;
    const int32_t *table = a->block_tables + b * a->table_stride;
    float *q = scratch, *acc = q + hq * d, *s = acc + hq * d;
    for (int64_t i = 0; i < hq * d; i++) q[i] = load_scalar(a->query, b * hq * d + i, a->dtype) * a->scale;
    for (int64_t t = 0; t < ctx; t++) {
        int64_t row = row_of(a, table, first + t);
        for (int64_t h = 0; h < hq; h++) {
            int64_t base = (row + h / group) * d;
            float dot = 0;
            for (int64_t i = 0; i < d; i++) dot += q[h * d + i] * load_scalar(a->k_cache, base + i, cache_dtype);
            s[h * ctx + t] = dot;
        }
    }
    for (int64_t h = 0; h < hq; h++) {
        float top = -INFINITY, sum = 0;
        for (int64_t t = 0; t < ctx; t++) top = s[h * ctx + t] > top ? s[h * ctx + t] : top;
        for (int64_t t = 0; t < ctx; t++) sum += (s[h * ctx + t] = expf(s[h * ctx + t] - top));
        for (int64_t i = 0; i < d; i++) acc[h * d + i] = 0;
        for (int64_t t = 0; t < ctx; t++) s[h * ctx + t] /= sum;
    }
    for (int64_t t = 0; t < ctx; t++) {
        int64_t row = row_of(a, table, first + t);
        for (int64_t h = 0; h < hq; h++) {
            int64_t base = (row + h / group) * d;
            float w = s[h * ctx + t];
            for (int64_t i = 0; i < d; i++) acc[h * d + i] += w * load_scalar(a->v_cache, base + i, cache_dtype);
        }
    }
    for (int64_t i = 0; i < hq * d; i++) store_scalar(a->out, b * hq * d + i, acc[i], a->dtype);
}

static void attend_sequence(const DecodeArgs *a, int64_t b, float *scratch) {
    if (a->cache_dtype == DTYPE_BF16) attend_typed(a, b, scratch, DTYPE_BF16);
    else attend_typed(a, b, scratch, DTYPE_F32);
}
