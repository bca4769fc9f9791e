/* The column-panel layout that panel_linear.c and quant_panel_linear.c share: PANEL output columns per
 * panel (reference.PANEL_WIDTH), x in tiles of TILE rows, and the blocks of rows a thread takes. */
#ifndef KVTOOL_PANELS_H
#define KVTOOL_PANELS_H

#include "common.h"

/* BLOCK_TILES tiles of x (120 rows) stay in L2 while a thread's panels pass */
enum { PANEL = 16, TILE = 6, BLOCK_TILES = 20 };

/* rows per block: at most BLOCK_TILES tiles, the blocks as even as whole tiles allow, so that the threads'
 * shares match */
INLINE int64_t block_rows(int64_t rows) {
    int64_t tiles = (rows + TILE - 1) / TILE, blocks = (tiles + BLOCK_TILES - 1) / BLOCK_TILES;
    return (tiles + blocks - 1) / blocks * TILE;
}

#endif
