/* Shared by the CPU kernels: dtype codes and scalar conversions with torch's rounding. */
#ifndef KVTOOL_COMMON_H
#define KVTOOL_COMMON_H

#include <stdint.h>
#include <string.h>

enum { DTYPE_F32 = 0, DTYPE_BF16 = 1 };

/* what a kernel that allocates scratch memory returns (cpu_ops raises MemoryError on NO_MEMORY) */
enum { STATUS_OK = 0, STATUS_NO_MEMORY = 1 };

#define INLINE static inline __attribute__((always_inline))

/* bytes per element of the dtype */
INLINE int64_t element_size(int dtype) { return dtype == DTYPE_F32 ? 4 : 2; }

INLINE float load_scalar(const void *base, int64_t i, int dtype) {
    if (dtype == DTYPE_F32) return ((const float *)base)[i];
    uint32_t u = (uint32_t)((const uint16_t *)base)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x rounded to the dtype (round to nearest even for bf16) and back: the value torch would hold */
INLINE float round_to(float x, int dtype) {
    if (dtype == DTYPE_F32) return x;
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

INLINE void store_scalar(void *base, int64_t i, float x, int dtype) {
    if (dtype == DTYPE_F32) {
        ((float *)base)[i] = x;
    } else {
        uint32_t u;
        memcpy(&u, &x, 4);
        ((uint16_t *)base)[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    }
}

#endif
