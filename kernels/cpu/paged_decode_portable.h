/* Portable path of paged_decode.c: plain loops the compiler vectorizes as far as the target allows. */

/* one sequence's query heads of KV head kh over the tokens whose cache rows `rows` lists */
INLINE void attend_typed(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next, int cache_dtype) {
    (void)next;
    int64_t hq = a->num_heads, d = a->head_dim, group = hq / a->num_kv_heads;
    float *q = scratch, *acc = q + group * d, *s = acc + group * d;
    for (int64_t i = 0; i < group * d; i++) q[i] = load_scalar(a->query, (b * hq + kh * group) * d + i, a->dtype) * a->scale;
    for (int64_t t = 0; t < ctx; t++) {
        int64_t base = (rows[t] + kh) * d;
        for (int64_t g = 0; g < group; g++) {
            float dot = 0;
            for (int64_t i = 0; i < d; i++) dot += q[g * d + i] * load_scalar(a->k_cache, base + i, cache_dtype);
            s[g * ctx + t] = dot;
        }
    }
    for (int64_t g = 0; g < group; g++) {
        float top = -INFINITY, sum = 0;
        for (int64_t t = 0; t < ctx; t++) top = s[g * ctx + t] > top ? s[g * ctx + t] : top;
        for (int64_t t = 0; t < ctx; t++) sum += (s[g * ctx + t] = expf(s[g * ctx + t] - top));
        for (int64_t i = 0; i < d; i++) acc[g * d + i] = 0;
        for (int64_t t = 0; t < ctx; t++) s[g * ctx + t] /= sum;
    }
    for (int64_t t = 0; t < ctx; t++) {
        int64_t base = (rows[t] + kh) * d;
        for (int64_t g = 0; g < group; g++) {
            float w = s[g * ctx + t];
            for (int64_t i = 0; i < d; i++) acc[g * d + i] += w * load_scalar(a->v_cache, base + i, cache_dtype);
        }
    }
    for (int64_t i = 0; i < group * d; i++) store_scalar(a->out, (b * hq + kh * group) * d + i, acc[i], a->dtype);
}

static void attend_group(const DecodeArgs *a, int64_t b, int64_t kh, const int64_t *rows, int64_t ctx, float *scratch,
                         const Upcoming *next) {
    if (a->cache_dtype == DTYPE_BF16) attend_typed(a, b, kh, rows, ctx, scratch, next, DTYPE_BF16);
    else attend_typed(a, b, kh, rows, ctx, scratch, next, DTYPE_F32);
}
