/* AMX's tile configuration (palette 1), for the kernels that use tiles; include only where __AMX_TILE__ is set. */
#ifndef KVTOOL_TILE_CONFIG_H
#define KVTOOL_TILE_CONFIG_H

#include <immintrin.h>
#include <string.h>

#include "common.h"

typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* this thread's tiles 0 .. count - 1 shaped rows[t] rows of colsb[t] bytes, the others unused */
INLINE void load_tile_config(int count, const uint8_t *rows, const uint16_t *colsb) {
    TileConfig c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < count; t++) c.rows[t] = rows[t], c.colsb[t] = colsb[t];
    _tile_loadconfig(&c);
}

#endif
