/* SPDX-License-Identifier: Apache-2.0 */
/* dispatch_model.c — a kernel's estimated time on a call (see the header). */
#include <string.h>

#include "dispatch_model.h"

/* H100/H200 SXM per SM, at the ~1.75 GHz they hold under load. */
#define CLOCK_HZ 1.75e9
#define MMA_FLOP_PER_CLK_16 4096.0 /* dense bf16/fp16 wgmma: 989 TFLOP/s over 132 SMs */
#define SMEM_BYTES_PER_CLK 128.0
/* An SM's share of L2 bandwidth (~12 TB/s over 132 SMs): it makes 128×128
 * tiles reach ~80% of the tensor peak and 128×256 reach it, as measured. */
#define L2_BYTES_PER_CLK 52.0
/* An SM's share of HBM bandwidth (H200 ~4.8 TB/s; H100's 3.35 only scales
 * every memory-bound kernel alike). */
#define HBM_BYTES_PER_CLK 20.8
/* Per tile: the pipeline's refill and the tile scheduler, in clocks. */
#define TILE_OVERHEAD_CLK 200.0

static double cdiv(double a, double b) { return b > 0 ? (double)(long long)((a + b - 1) / b) : 0; }
static double dmax(double a, double b) { return a > b ? a : b; }
static double dmin(double a, double b) { return a < b ? a : b; }

/* The shape of one call as the tiles see it. */
typedef struct tiling {
    double groups;
    double rows;                 /* output rows a group has (fprop/dgrad: tokens) */
    double cols;                 /* output columns */
    double red;                  /* reduction length */
    double bm, bn;               /* the tile */
    double split;                /* CTAs a reduction is split over (wgrad) */
} tiling;

static void tiling_of(const kiln_kernel_desc *d, const kiln_problem *p, tiling *t)
{
    double g = p->groups > 0 ? (double)p->groups : 1.0;
    double tpg = cdiv((double)(p->capacity > 0 ? p->capacity : 0), g);
    t->groups = g;
    t->bm = d->tile_m;
    t->bn = d->tile_n;
    t->split = 1;
    if (p->op == KILN_OP_WGRAD) {
        /* dW_g [N,K] = dY_gᵀ X_g: the tokens are the reduction. */
        t->rows = (double)p->n;
        t->cols = (double)p->k;
        t->red = tpg;
        t->split = d->split > 1 ? d->split : 1;
    } else {
        t->rows = tpg;
        t->cols = (double)(p->op == KILN_OP_FPROP ? p->n : p->k);
        t->red = (double)(p->op == KILN_OP_FPROP ? p->k : p->n);
    }
}

/* Clocks of one tile: the slowest of its tensor time, its shared-memory
 * reads, its operand reads from L2, and its share of the call's HBM
 * traffic, plus the epilogue's store where nothing overlaps it. */
static double tile_clk(const kiln_kernel_desc *d, const kiln_problem *p, const tiling *t,
                       double m_tiles, double n_tiles, double hbm_rate, double *efficiency)
{
    double in = (double)kiln_dtype_size(p->a_type), out = (double)kiln_dtype_size(p->out_type);
    double mma_rate = MMA_FLOP_PER_CLK_16 * (in == 1 ? 2 : 1);
    double red = cdiv(t->red / t->split, d->tile_k) * d->tile_k; /* whole k blocks */
    double mma = 2.0 * t->bm * t->bn * red / mma_rate;
    /* wgmma is m64: each 64-row slab reads the B tile from shared memory. */
    double slabs = t->bm > 64 ? t->bm / 64 : 1;
    double smem = in * red * (t->bm + slabs * t->bn) / SMEM_BYTES_PER_CLK;
    /* A's valid rows only: TMA fills rows past a group's end without
     * reading memory. */
    double a_rows = p->op == KILN_OP_WGRAD ? t->bm : dmin(t->bm, t->rows);
    double a_bytes = in * red * a_rows, b_bytes = in * red * t->bn;
    double l2 = (a_bytes + b_bytes) / L2_BYTES_PER_CLK;
    /* Each byte comes from HBM once: the A tile is shared by the group's n
     * tiles, the B tile by its m tiles (decode: one m tile, every weight
     * byte streamed for this tile alone). */
    double hbm = (a_bytes / n_tiles + b_bytes / m_tiles) / hbm_rate;
    double body = dmax(dmax(mma, smem), dmax(l2, hbm));
    *efficiency = body > 0 ? mma / body : 1;
    double epi = 0;
    if (!strcmp(d->schedule, "cooperative") || p->op == KILN_OP_WGRAD)
        epi = a_rows * t->bn * out / hbm_rate;
    return body + epi + TILE_OVERHEAD_CLK;
}

/* Bytes every kernel must move at least once: A, B and D. */
static double compulsory_bytes(const kiln_problem *p)
{
    double in = (double)kiln_dtype_size(p->a_type), out = (double)kiln_dtype_size(p->out_type);
    double tok = (double)(p->capacity > 0 ? p->capacity : 0), n = (double)p->n, k = (double)p->k;
    double g = p->groups > 0 ? (double)p->groups : 1.0;
    switch (p->op) {
    case KILN_OP_FPROP: return in * (tok * k + g * n * k) + out * tok * n;
    case KILN_OP_DGRAD: return in * (tok * n + g * n * k) + out * tok * k;
    default: return in * (tok * n + tok * k) + out * g * n * k;
    }
}

void kiln_dispatch_model_estimate(const kiln_kernel_desc *d, const kiln_launch_desc *launch,
                                  const kiln_problem *p, int sms, kiln_dispatch_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (d->tile_m <= 0 || d->tile_n <= 0 || d->tile_k <= 0) {
        out->us = 1e30;
        return;
    }
    if (sms <= 0) sms = KILN_DISPATCH_MODEL_SMS;
    /* A persistent kernel runs ctas_per_sm tiles an SM at once, each at
     * that share of the SM: the same wave arithmetic over more slots. */
    int per_sm = launch && launch->persistent && launch->ctas_per_sm > 1 ? launch->ctas_per_sm : 1;
    tiling t;
    tiling_of(d, p, &t);
    double m_tiles = cdiv(t.rows, t.bm), n_tiles = cdiv(t.cols, t.bn);
    double tiles = t.groups * m_tiles * n_tiles * t.split;
    out->tiles = (long long)tiles;
    out->padding = m_tiles > 0 && p->op != KILN_OP_WGRAD ? 1.0 - t.rows / (m_tiles * t.bm) : 0;
    if (tiles <= 0) {
        out->wave_efficiency = 1;
        out->tile_efficiency = 1;
        return;
    }
    double slots = (double)sms * per_sm;
    out->waves = tiles / slots;
    double full = cdiv(tiles, slots);
    out->wave_efficiency = out->waves / full;
    /* HBM is shared by the SMs that have work: a call of fewer tiles than
     * SMs gives each a larger share, up to what one SM takes in (its L2
     * rate). */
    double active = dmin(tiles, slots);
    double hbm_rate = dmin(L2_BYTES_PER_CLK, HBM_BYTES_PER_CLK * sms / active);
    double clk = full * tile_clk(d, p, &t, m_tiles, n_tiles, hbm_rate, &out->tile_efficiency) * per_sm;
    double floor_clk = compulsory_bytes(p) / (HBM_BYTES_PER_CLK * sms);
    out->us = dmax(clk, floor_clk) / CLOCK_HZ * 1e6;
}
