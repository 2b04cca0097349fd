/* SPDX-License-Identifier: Apache-2.0 */
/* dispatch_model.c — a kernel's estimated time on a call (see the header).
 *
 * The constants are H200's (sm_90a), per SM at the 1.75 GHz the model
 * counts in.  Where a datasheet number and the measurements disagree the
 * measurement wins: the corpus runs (docs/results/session6-corpus-tune-h200-
 * 2026-11-23.csv, every candidate on every corpus shape) are what the
 * ranking must reproduce, and docs/dispatch.md ("The cost model") shows
 * the cells each constant comes from. */
#include <math.h>
#include <string.h>

#include "dispatch_model.h"
#include "kernel_abi.h"

#define CLOCK_HZ 1.75e9
/* Dense bf16/fp16 wgmma as sustained: the fastest compute-bound corpus
 * cells reach ~810 TFLOP/s (balanced32 fprop 128x128 pingpong 796,
 * mixtral8x7b_fc2_bal fprop 128x256 809), i.e. 3506 FLOP per clock per SM
 * over 132 SMs at 1.75 GHz (the datasheet's 989 TFLOP/s is 4096). */
#define MMA_FLOP_PER_CLK_16 3506.0
/* Shared memory: 32 banks x 4 bytes per clock (the Hopper tuning guide). */
#define SMEM_BYTES_PER_CLK 128.0
/* An SM's share of L2 bandwidth when every SM reads (~15 TB/s in all).
 * Measured two ways: 64x256 pingpong tiles, which ask 68 B/clk at the MMA
 * rate above, run ~5% behind 128x128 ones (55 B/clk) on compute-bound
 * shapes (balanced32, dsv3_fc1_ep8, qwen2_57b_fc1_bal); and decode tiles of
 * 128x128, whose L2 moves the A box, the B tile and B's fill from HBM
 * (3 bytes per weight byte), stream weights at 4.1 TB/s (dsv3_fc1_dec,
 * dsv2_fc1_dec): 12.3 TB/s of L2 traffic. */
#define L2_BYTES_PER_CLK 65.0
/* An SM's share of HBM bandwidth: decode tiles of 64x256, which move little
 * but the weights, stream them at 4.2-4.4 TB/s (dsv3_fc1_dec 4.37,
 * llama4scout_fc1_dec 4.36; the datasheet's 4.8 is not reached). */
#define HBM_BYTES_PER_CLK 18.8
/* What one SM's TMA loads bring in when few SMs run (a tile's A box and B
 * tile a k-block, however much of HBM the others leave): decode-sized
 * calls of 16-22 tiles streaming a 14336-deep reduction took 57-67 B/clk
 * (mixtral fc2 after expert parallelism 8: 64x256 pingpong 63, 64x192 67,
 * 128x256 cooperative unsplit 57; H200, eightieth session).  Without it the
 * model let a last, partial wave of a few tiles share all of HBM, and took
 * 64x256 pingpong for such a call at 0.73x torch, where the cooperative
 * kernel's cut reduction ran 1.4x faster. */
#define SM_LOAD_BYTES_PER_CLK 62.0
/* An epilogue's output, per SM, where nothing overlaps it with the main
 * loop.  wgrad: 16 B/clk (its tiles' stores, fitted on the wgrad corpus
 * runs).  The cooperative fprop/dgrad kernels stage the tile into boxes
 * and leave it to TMA stores (sm90_gemm_roles.cuh, kiln_epilogue_tma): on the
 * eleventh session's corpus run (docs/results/session11-corpus-tune-h200-
 * 2026-11-23.csv) the model's ranking improves from 16 up to 128 B/clk and
 * is the same within a case from 128 to 512 (docs/dispatch.md).  Pingpong
 * hides its epilogue under the other consumer's main loop: no term. */
#define EPILOGUE_BYTES_PER_CLK 16.0
#define EPILOGUE_TMA_BYTES_PER_CLK 128.0
/* A k-cut cluster's sum (sm90_gemm_cut.cuh, KCUT), per piece: it sends
 * its fp32 partial tile to the pieces that sum its parts (through the
 * cluster's shared memories), adds a partial tile's worth of parts, and
 * waits on the cluster three times.  Guesses, not
 * fits: 32 bytes a clock (a quarter of a shared memory's own rate) and
 * 2000 clocks of handovers.  The eighty-sixth session's runs found cuts in
 * 4 faster than these price them, so dispatch.c ranks those first.  The
 * eighty-ninth session timed the sum itself (pushed, sm90_gemm_cut.cuh):
 * 3.8 us a piece of a half tile cut in 4 on an H100, about 6500 clocks
 * where these give about 4000.  Not refitted: cuts in 4 rank by
 * kcut4_priced whatever their estimate, and no run has yet priced the
 * others against a refit. */
#define KCUT_BYTES_PER_CLK 32.0
#define KCUT_SYNC_CLK 2000.0
/* Per tile: the tile scheduler and the pipeline's turn-around, in clocks. */
#define TILE_OVERHEAD_CLK 200.0
/* Routed group sizes are not all equal (dispatch cannot see them): the last
 * m tile of a group is on average half full, so a group computes at least
 * rows/BM + 1/2 tiles of BM rows.  Exactly balanced routing pads less, but
 * never occurs in training; skewed corpus shapes pay for bigger m tiles
 * (256x128 dgrad 1.08-1.35x the best on skew and Dirichlet routing). */
#define ROUTING_SLACK_TILES 0.5

static double cdiv(double a, double b) { return b > 0 ? ceil(a / b) : 0; }
static double dmax(double a, double b) { return a > b ? a : b; }
static double dmin(double a, double b) { return a < b ? a : b; }

/* The shape of one call as the tiles see it. */
typedef struct tiling {
    double groups;
    double rows;                 /* output rows a group has (fprop/dgrad: tokens) */
    double cols;                 /* output columns */
    double red;                  /* reduction length */
    double bm, bn;               /* the tile */
    double split;                /* CTAs a reduction is split over (wgrad; k-cut clusters) */
    double m_tiles, n_tiles;     /* a group's; m_tiles may be fractional (slack) */
} tiling;

static void tiling_of(const kiln_kernel_desc *d, const kiln_problem *p, tiling *t)
{
    double g = p->groups > 0 ? (double)p->groups : 1.0;
    double tpg = (double)(p->capacity > 0 ? p->capacity : 0) / g;
    t->groups = g;
    t->bm = d->tile_m;
    t->bn = d->tile_n;
    t->split = 1;
    if (p->op == KILN_OP_WGRAD) {
        /* dW_g [N,K] = dY_gᵀ X_g: the tokens are the reduction. */
        t->rows = (double)p->n;
        t->cols = (double)p->k;
        t->red = ceil(tpg);
        t->split = d->split > 1 ? d->split : 1;
        t->m_tiles = cdiv(t->rows, t->bm);
    } else {
        t->rows = ceil(tpg);
        t->split = d->k_cluster > 1 ? d->k_cluster : 1;
        t->cols = (double)(p->op == KILN_OP_FPROP ? p->n : p->k);
        t->red = (double)(p->op == KILN_OP_FPROP ? p->k : p->n);
        t->m_tiles = tpg > 0 ? dmax(cdiv(t->rows, t->bm), tpg / t->bm + ROUTING_SLACK_TILES) : 0;
    }
    t->n_tiles = cdiv(t->cols, t->bn);
}

/* One tile's demands: clocks on its own SM, bytes through L2 and from HBM. */
typedef struct tile_cost {
    double sm_clk;               /* main loop (MMA or shared memory) + epilogue + overhead */
    double mma_clk;
    double load_bytes;           /* what its SM's TMA loads: A's boxes and the B tile */
    double l2_bytes, hbm_bytes;
} tile_cost;

static void tile_cost_of(const kiln_kernel_desc *d, const kiln_problem *p, const tiling *t,
                         tile_cost *c)
{
    double in = (double)kiln_dtype_size(p->a_type), out = (double)kiln_dtype_size(p->out_type);
    double mma_rate = MMA_FLOP_PER_CLK_16 * (in == 1 ? 2 : 1);
    double red = cdiv(t->red / t->split, d->tile_k) * d->tile_k; /* whole k blocks */
    /* A k-cut kernel's half tiles (a group of at most BM / 2 rows: both
     * warp groups on those rows, sm90_gemm.cuh, HALF_TILES) do half the
     * tensor work.  Counted for those kernels only: the others' prices
     * are what the corpus runs fitted. */
    double mma_rows = d->k_cluster > 1 && t->rows <= t->bm / 2 ? t->bm / 2 : t->bm;
    c->mma_clk = 2.0 * mma_rows * t->bn * red / mma_rate;
    /* wgmma is m64: each 64-row slab reads the B tile from shared memory. */
    double slabs = t->bm > 64 ? t->bm / 64 : 1;
    double smem = in * red * (t->bm + slabs * t->bn) / SMEM_BYTES_PER_CLK;
    /* The rows a tile holds that are real (the others are padding). */
    double valid = p->op == KILN_OP_WGRAD ? t->bm : dmin(t->bm, t->rows);
    /* TMA loads A's whole box of BM rows (rows past a group's end belong
     * to the next group and come from L2); HBM supplies each byte once: the
     * A tile shared by the group's n tiles, the B tile by its m tiles (a
     * decode tile streams its weights alone), and L2 also takes every HBM
     * byte in (its fill). */
    double b_bytes = in * red * t->bn;
    c->hbm_bytes = in * red * valid / t->n_tiles + b_bytes / dmax(t->m_tiles, 1);
    c->load_bytes = in * red * t->bm + b_bytes;
    c->l2_bytes = c->load_bytes + c->hbm_bytes;
    double epi = 0;
    if (p->op == KILN_OP_WGRAD)
        epi = valid * t->bn * out / EPILOGUE_BYTES_PER_CLK;
    else if (!strcmp(d->schedule, "cooperative"))
        epi = valid * t->bn * out / EPILOGUE_TMA_BYTES_PER_CLK / t->split;   /* a piece stores its parts */
    if (p->op != KILN_OP_WGRAD && t->split > 1)
        epi += valid * t->bn * 4 / KCUT_BYTES_PER_CLK + KCUT_SYNC_CLK;
    c->sm_clk = dmax(c->mma_clk, smem) + epi + TILE_OVERHEAD_CLK;
}

/* Clocks of a wave of w tiles running at once, each on its own SM slot:
 * the slowest SM (its main loop, or its loads at what one SM brings in),
 * or the wave's L2 or HBM traffic over the whole chip's bandwidth.  A
 * last, partial wave of a memory-bound call is short: its tiles share all
 * of HBM (a decode call's tail costs what its bytes do, not a whole wave),
 * as far as each SM's loads can take it. */
static double wave_clk(const tile_cost *c, double w, int sms)
{
    double sm = dmax(c->sm_clk, c->load_bytes / SM_LOAD_BYTES_PER_CLK);
    return dmax(sm, dmax(w * c->l2_bytes / (L2_BYTES_PER_CLK * sms),
                         w * c->hbm_bytes / (HBM_BYTES_PER_CLK * sms)));
}

/* The pieces each tile of a persistent launch's only round is cut into
 * along k (1: none), as the cooperative sm90 fprop/dgrad kernels without a
 * cluster cut them (templates/sm90_gemm_cut.cuh, SPLIT; the rule itself is
 * kiln_split_ways, kernel_abi.h).  Only where the tiles are fewer than the
 * SMs: there the cut is most of the call (1.8x on a decode call of 16
 * tiles), where after full rounds it moved the long layers by -2% to +4.5%
 * (docs/sm90_kernel.md), less than the estimate can tell.  Assumes the
 * context's split workspace (not made under KILN_SPLIT=0). */
static int split_ways(const kiln_kernel_desc *d, const kiln_launch_desc *launch,
                      const kiln_problem *p, int nkb, float part_kb, double tiles, double slots)
{
    if (p->op == KILN_OP_WGRAD || strcmp(d->family, "sm90") || strcmp(d->schedule, "cooperative"))
        return 1;
    if (!launch || !launch->persistent || launch->ctas_per_sm > 1 ||
        launch->cluster_m * launch->cluster_n > 1 || d->k_cluster > 1 ||
        (double)d->tile_m * d->tile_n * 4 > KILN_SPLIT_TILE_BYTES || tiles >= slots)
        return 1;
    return kiln_split_ways((int)tiles, (int)slots, nkb, part_kb, 0);
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
                                  const kiln_problem *p, int sms, int clusters,
                                  kiln_dispatch_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (d->tile_m <= 0 || d->tile_n <= 0 || d->tile_k <= 0) {
        out->us = KILN_DISPATCH_NOT_PRICED;
        return;
    }
    if (sms <= 0) sms = KILN_DISPATCH_MODEL_SMS;
    /* A persistent kernel runs ctas_per_sm tiles an SM at once, each at
     * that share of the SM: the same wave arithmetic over more slots. */
    int per_sm = launch && launch->persistent && launch->ctas_per_sm > 1 ? launch->ctas_per_sm : 1;
    tiling t;
    tiling_of(d, p, &t);
    double tiles = t.groups * t.m_tiles * t.n_tiles * t.split;
    out->tiles = (long long)ceil(tiles);
    out->padding = t.m_tiles > 0 && p->op != KILN_OP_WGRAD ? 1.0 - t.rows / (t.m_tiles * t.bm) : 0;
    if (tiles <= 0) {
        out->wave_efficiency = 1;
        out->tile_efficiency = 1;
        return;
    }
    double slots = (double)sms * per_sm;
    /* A k-cut cluster's pieces are priced in one round of the clusters
     * the device runs at once, each piece KILN_KCUT_MIN_PIECE_KB k-blocks
     * or more; nothing else is (see the header). */
    if (d->k_cluster > 1) {
        slots = (double)clusters * d->k_cluster;
        if (tiles > slots || cdiv(t.red, d->tile_k) < (double)KILN_KCUT_MIN_PIECE_KB * d->k_cluster) {
            out->us = out->us_tiles = KILN_DISPATCH_NOT_PRICED;
            return;
        }
    }
    out->waves = tiles / slots;
    double full = floor(tiles / slots), rest = tiles - full * slots;
    out->wave_efficiency = out->waves / ceil(out->waves);
    tile_cost c;
    tile_cost_of(d, p, &t, &c);
    c.sm_clk *= per_sm;
    double wave = wave_clk(&c, slots, sms);
    out->tile_efficiency = c.mma_clk * per_sm / wave;
    double clk = full * wave;
    const int nkb = (int)cdiv(t.red, d->tile_k);
    const float part_kb = KILN_SPLIT_PART_KB(d->tile_m, d->tile_n, d->tile_k,
                                             kiln_dtype_size(p->a_type));
    int ways = rest > 0 ? split_ways(d, launch, p, nkb, part_kb, ceil(tiles), slots) : 1;
    if (ways > 1) {
        /* each of the rest tiles in `ways` pieces of the reduction, one an
         * SM, and each piece's partial tile moved (ways + 1 moves of
         * part_kb k-blocks, priced at the piece's own k-block time) */
        tiling tp = t;
        int pkb = (int)cdiv(nkb, ways);
        tp.red = (double)pkb * d->tile_k;
        tile_cost piece;
        tile_cost_of(d, p, &tp, &piece);
        double per_kb = dmax(piece.sm_clk, piece.load_bytes / SM_LOAD_BYTES_PER_CLK) / pkb;
        piece.sm_clk += per_kb * part_kb * (ways + 1);
        clk += wave_clk(&piece, rest * ways, sms);
        out->split_ways = ways;
    } else if (rest > 0) {
        clk += wave_clk(&c, rest, sms);
    }
    double floor_clk = compulsory_bytes(p) / (HBM_BYTES_PER_CLK * sms);
    out->us_tiles = clk / CLOCK_HZ * 1e6;
    out->us = dmax(clk, floor_clk) / CLOCK_HZ * 1e6;
}
