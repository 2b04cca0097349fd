/*
 * sm90_wgrad.cuh — persistent, warp-specialised k-grouped weight gradient
 * for sm_90a:  dW_g[N,K] = dY_gᵀ · X_g, the reduction over each group's own
 * tokens (rows [off_g, off_g + m_g) of dY [cap,N] and X [cap,K]), on the
 * device layer of sm90_common.cuh.  templates/sm90_wgrad.lua pastes
 * common/kernel_abi.h, a preamble and sm90_common.cuh before this text.  The
 * preamble defines, besides what sm90_common.cuh names:
 *
 *   KILN_ENTRY                    the extern "C" kernel name (macro)
 *   DISCRETE                      1: output g at args.d_ptrs[g]; 0: args.d + g*N*ldd
 *   ACCUMULATE                    1: D += result (f32 D); empty groups untouched
 *   SPLIT                         split the reduction of a tile over up to SPLIT
 *                                 CTAs (accumulate only; partials added atomically)
 *   STG_BUFS                      2 KiB swizzled boxes per consumer warp, from
 *                                 which dW goes out: TMA reduce-adds (accumulate,
 *                                 fp32) or TMA stores (overwrite) through tmap_d,
 *                                 dense: over dW as {K, G*N}; discrete: over one
 *                                 group's {K, N}, re-pointed per group (kiln_dmap)
 *   D_CHUNKS                      > 0 (16-bit dW, a warp's whole share staged):
 *                                 where K % 64 == 0, tmap_d is a 3-D map
 *                                 {64, K/64, G*N} (discrete: N; launch.c) and a warp's 16 rows
 *                                 of an m64 sub-tile go out as one box of
 *                                 D_CHUNKS 128-byte chunks a row (kiln_rowbox_*)
 *   DBIAS                         1: also the bias gradient db[g,n] = sum of dY[t,n]
 *                                 over the group's tokens (args.dbias / dbias_ptrs)
 *   IN_F16                        1: dY is fp16; 0: bf16
 *   CM CN                         cluster shape (1x1, 2x1 or 1x2): the pair
 *                                 works on two dW tiles along n (CM=2,
 *                                 sharing X's boxes) or along k (CN=2,
 *                                 sharing dY's) through TMA multicast
 *   kiln_wgmma(acc, desc_a, desc_b, scale_d)   m64n{BN}k16, A and B MN-major
 *
 * GEMM view: M = n (rows of dW, BM per tile), N = k (cols of dW, BN per
 * tile), reduction over tokens (BK per k-block).  Both operands arrive
 * MN-major: a TMA box {64, BK} of dY is BK token rows of 64 n-values (one
 * 128-byte swizzled row per token), likewise for X.
 *
 * Group edges: k-block kb of a group starts at token off_g + kb*BK (TMA takes
 * any row coordinate), so only the last k-block of a group can hold rows of
 * the next group (or rows past sum(m), which may hold anything).  The
 * consumers zero those token rows in shared memory (kiln_mask_tail).  Rows
 * past the capacity are zero-filled by TMA.
 *
 * The grid is persistent: cluster c walks work units c, c+clusters, ... of
 * all (split, group, n-unit, k-unit), each group's rotated when
 * overwriting (kiln_decode), or takes the next free one (DYN); discrete
 * dW of decode-sized groups in runs of consecutive units (kiln_next_item,
 * kiln_fetched_item); a unit is
 * CM x CN dW tiles of one group (one tile without a cluster), and its pair
 * of CTAs runs the same k-blocks.  Docs: docs/sm90_wgrad.md.
 */

/* per warp: STG_BUFS 128B-swizzled boxes of 16 rows x 128 bytes, 1024-byte
 * aligned */
constexpr int STG_WARP_BYTES = 2048 * STG_BUFS;
typedef kiln_layout<STG_WARP_BYTES, DBIAS ? 1024 : 0> kiln_wgrad_layout;

static_assert(!(SPLIT > 1) || ACCUMULATE, "split needs accumulate mode");
static_assert(CM == 1 || (BN / 64) % 2 == 0, "cluster m: 2 shares X's boxes in halves: BN 128 or 256");
static_assert(CN == 1 || (BM / 64) % 2 == 0, "cluster n: 2 shares dY's boxes in halves: BM 128 or 256");
static_assert(!ACCUMULATE || OUT_T == 2, "accumulate needs an f32 output");
/* overwrite: a warp's share of a tile in 2 KiB boxes */
constexpr int SHARE_BOXES = MI * BN * (OUT_T == 2 ? 4 : 2) / 128;
static_assert(ACCUMULATE || STG_BUFS <= SHARE_BOXES, "more store boxes per warp than a tile has");
static_assert(kiln_wgrad_layout::OFF_STG % 1024 == 0,
              "staging must be 1024-byte aligned for the swizzled boxes");
/* Overwriting cooperative 128x256 and 256x128 kernels that stage a
 * warp's whole share of a tile at once (a tile's boxes never wait for
 * each other's stores).  Two rules act on them alone (measured elsewhere,
 * they lost): */
constexpr bool BIG_STAGED = !ACCUMULATE && !PINGPONG && BM * BN >= 32768 && STG_BUFS >= SHARE_BOXES;
/* Tiles of one k-block (decode-sized groups) store with the evict-first
 * L2 hint: 5-12% faster on every decode shape measured.  Not elsewhere:
 * 128x128 tiles (either schedule) ran 2-5% slower with it, and a box at a
 * time (STG_BUFS < the share) from -7% to +4% (H200, docs/sm90_wgrad.md,
 * eighth session).  The other: discrete dW from registers
 * (kiln_wgrad::dregs). */
constexpr int EPI_EVICT_FIRST = BIG_STAGED;
/* The overwrite epilogue's boxes a batch (kiln_epilogue_tma_store): the
 * largest divisor of a warp's share that the staging holds. */
constexpr int kiln_epi_batch(int share, int bufs)
{
    int d = bufs < share ? bufs : share;
    while (share % d) --d;
    return d;
}
constexpr int EPI_BATCH = kiln_epi_batch(SHARE_BOXES, STG_BUFS);
static_assert(D_CHUNKS == 0 || (D_CHUNKS == BN / 64 && OSZ == 2 && !ACCUMULATE &&
                                 STG_BUFS >= SHARE_BOXES) ||
                                (!DISCRETE && D_CHUNKS == BN / 32 && ACCUMULATE &&
                                 STG_BUFS >= D_CHUNKS),
              "rows of D_CHUNKS boxes: 16-bit overwrite with a warp's share staged whole, "
              "or dense accumulate with a warp's 16 rows of a sub-tile");

/* The dynamic order (DYN: cooperative 128x256 kernels, when the launch
 * names a slot of counters, args.sched_slot, which runtime/sched_slots.c
 * gives each stream and each captured launch so that no two launches that
 * may run at once share one).  The producer thread takes each next item
 * from the slot's first counter (atomicAdd): the CTA that is free first
 * takes the next item, where the static order gives CTA i items i,
 * i + grid, ... whatever they cost (on skewed and decode routing some CTAs
 * finished long before others, and SMs do not all run at one speed).  It
 * hands each item to the consumer warps through a QD-deep queue of
 * mbarriers in the scan scratch (ints 44..63), which the consumers read
 * under their last wgmma (DECODE_AHEAD).  Against the static order, per
 * kernel in geometric mean over 20 skewed, decode and even shapes:
 * 0.967-0.979 overwriting, 0.897 accumulating, single shapes 0.79-1.04
 * (it loses up to 4% on even routing, where only the hand-off counts).
 * 128x128 and 64x256 kernels lost 3-5% with it and stay static, as do
 * discrete accumulating ones (no registers to spare).  H200,
 * docs/sm90_wgrad.md, thirty-third and thirty-fourth sessions.  The
 * second counter counts the CTAs done: the last one resets both for the
 * next launch on the stream, which reads them only after
 * griddepcontrol.wait. */
constexpr int DYN = !PINGPONG && CS == 1 && BM == 128 && BN == 256 && !(DISCRETE && ACCUMULATE);

/* The consumers decode their next work item (and, DYN, read it from the
 * queue) under the current item's last wgmma: the group search and integer
 * divisions (~130 instructions of dependent shared-memory loads and
 * arithmetic) otherwise ran between one item's epilogue and the next main
 * loop, with the tensor cores idle.  In cooperative overwriting kernels
 * 0.986-0.998 of the time per kernel in geometric mean over the same 20
 * shapes (two calls).  Not in pingpong kernels, where the other
 * warpgroup's main loop already runs under the decode (1.003-1.005 with
 * it), nor in accumulating ones but DYN's (0.999-1.013; discrete ones
 * spill with it). */
constexpr int DECODE_AHEAD = DYN || (!PINGPONG && !ACCUMULATE);
/* The consumers' work item and warp index as warp-uniform values
 * (kiln_warp_uniform), so that the epilogue's bulk stores take their
 * coordinates without a loop over the lanes: overwriting kernels 0.968-0.983
 * of the time in geometric mean over 10 shapes (short and skewed
 * reductions 0.94-0.98).  Not accumulating ones: 0.997-1.000, and the
 * discrete accumulating 128x192 pingpong kernel spilled 24 bytes with it
 * (H200, docs/sm90_wgrad.md, seventy-eighth session). */
constexpr bool UNIFORM_ITEMS = !ACCUMULATE;
static_assert(!(DECODE_AHEAD && PINGPONG), "a pingpong walk decodes only its own items");
/* the counters of each slot: zero at module load, and again after each launch */
__device__ unsigned kiln_sched_ctr[DYN ? KILN_SCHED_SLOTS : 1][2];
constexpr int QD = 4;
static_assert(!DYN || NWARPS <= 12, "the item queue uses scan scratch ints 44..63");
KDEV kiln_u32 kiln_q_full(const kiln_smem &m, int i) { return kiln_smem_addr(m.scratch + 44) + 8 * i; }
KDEV kiln_u32 kiln_q_empty(const kiln_smem &m, int i) { return kiln_smem_addr(m.scratch + 52) + 8 * i; }
KDEV volatile int *kiln_q_slot(const kiln_smem &m, int i) { return m.scratch + 60 + i; }

/* A place in the item queue. */
struct kiln_q {
    int i;
    kiln_u32 ph;
    KDEV void next()
    {
        if (++i == QD) { i = 0; ph ^= 1; }
    }
};

/* ---------------------------------------------------------- schedule */

KDEV int kiln_splits(int nkb) { return SPLIT > 1 ? max(1, min(SPLIT, nkb)) : 1; }
/* The k-blocks of a reduction over `rows` tokens (the last one partial). */
KDEV int kiln_kblocks(int rows) { return (rows + BK - 1) / BK; }

/* What every role knows of the problem. */
struct kiln_wgrad {
    int G, cap;
    int wn, wk;    /* rows and columns of dW */
    int tm, tk;    /* work units along them (CM x CN tiles each) */
    kiln_cta cta;  /* this CTA's place among the clusters */
    int items;     /* work units of all groups */
    unsigned *ctr; /* DYN: the launch's counters; 0: the static order */
    int cmask;     /* items below t0 come in runs of cmask + 1 (kiln_next_item) */
    int t0, runs;  /* t0 = runs * (cmask + 1), whole rounds of runs over the grid */
    int rot;       /* static order: group g's units start (g & rot) on (kiln_decode) */
    kiln_raster_fixed raster;   /* the tm x tk units' order, its divisions set up */
    bool dregs;    /* discrete dW written from registers (kiln_store_regs) */
};

struct kiln_wtile {
    int g;        /* group */
    int s, e;     /* the group's token rows [s, e), clamped to capacity */
    int n0, k0;   /* first row (n) and column (k) of the dW tile */
    int kb0, kb1; /* k-blocks of this work item: tokens s + [kb0, kb1) * BK */
    int split;    /* CTAs sharing this dW tile (1: sole owner) */
};

/* Items in runs.  Discrete dW re-points a warp's map at every change of
 * group (kiln_dmap_select), and where a group has at most twice the
 * grid's tiles, taking one item at a time put a CTA's next item in
 * another group at nearly every tile.  Where the groups' reductions are
 * also one k-block on average (decode-sized), that cost 7-12% of the
 * time: there each CTA takes runs of WRUN consecutive items (of one group,
 * mostly), up to item t0, a whole number of rounds of runs over the grid,
 * and the items from t0 on one at a time, so that the grid's last round
 * is as balanced as before.  Static order: CTA c takes runs c, c + grid,
 * ..., then items t0 + c, t0 + c + grid, ...; DYN: fetch f from the
 * counter names run f below t0, else item t0 + f - (runs below t0).
 * Runs of 4 and 8 on every discrete shape (H200, docs/sm90_wgrad.md,
 * forty-fifth session): the fastest kernel took 0.88-0.93 of its time on
 * decode-sized groups of at most twice the grid's tiles, but up to 1.08
 * on decode-sized groups of more tiles and 1.03-1.05 on long reductions
 * (not profiled), hence the rule; where it acts, 0.88-1.00 (8 shapes). */
constexpr int WRUN = 8;
KDEV int kiln_fetched_item(const kiln_wgrad &P, int f)
{
    if (!DISCRETE) return f;   /* dense dW never walks in runs */
    return f < P.runs ? f * (P.cmask + 1) : P.t0 + (f - P.runs);
}
KDEV int kiln_first_item(const kiln_wgrad &P) { return kiln_fetched_item(P, P.cta.cid); }
KDEV int kiln_next_item(const kiln_wgrad &P, int t)
{
    if (!DISCRETE || t >= P.t0) return t + P.cta.ncl;
    if ((t + 1) & P.cmask) return t + 1;
    const int u = t + 1 + (P.cta.ncl - 1) * (P.cmask + 1);
    return u < P.t0 ? u : P.t0 + P.cta.cid;
}

/* Group g's first token row (g + 1: its end), clamped to the capacity. */
KDEV int kiln_group_row(const kiln_wgrad &P, const kiln_smem &m, int g) { return min(m.row_start[g], P.cap); }

/* This CTA's tile of work unit t: split chunk slowest, then the unit in
 * raster order.  A pair's second tile may lie past N or K (P.tm / P.tk
 * odd): it loads (its peer needs its half of the shared boxes, and TMA
 * fills what lies outside the tensor with zeros) and computes, and its
 * epilogue writes nothing, as every write is bounded by N and K.
 *
 * The static order starts group g's units (g & P.rot) places on,
 * cyclically (so still each unit once); P.rot is the largest 2^k - 1
 * below a group's units.  The groups of a wgrad call have the same number
 * of units (overwriting kernels do not split), and the grid takes units
 * c, c + grid, ...: where that number shares a large factor with the
 * grid, each CTA got the same units of every group.  The few units that
 * cost more (db's, at k0 = 0) or less (the short last column) then all
 * fell on the same CTAs (qwen3_30b_fc1 in 128x192 tiles: 12 x 11 = 132
 * units a group on 132 CTAs).  With the rotation the 128x192 db kernel
 * took 0.87-0.90 of the time on three such shapes; kernels without such
 * units, the same (0.996-1.007 in geometric mean).  A rotation by g % units instead cost
 * those kernels 2-10% on decode-sized groups, a division per unit: hence
 * the mask.  Accumulating kernels keep the plain order: a unit's
 * read-modify-write of dW dwarfs db's share, they gained nothing from it
 * (0.99-1.005 per kernel) and the discrete 128x256 one lost 1.3% (6% on
 * balanced32).  The dynamic order hands units to whichever CTA is free
 * (H200, docs/sm90_wgrad.md, fortieth session). */
KDEV kiln_wtile kiln_decode(const kiln_wgrad &P, const kiln_smem &m, int t, int &gcur)
{
    kiln_wtile T;
    T.g = gcur = kiln_find_group(t, m.tile_start, P.G, gcur);
    int local = t - m.tile_start[T.g];
    T.s = kiln_group_row(P, m, T.g);
    T.e = kiln_group_row(P, m, T.g + 1);
    const int nkb = kiln_kblocks(T.e - T.s);
    const int sp = kiln_splits(nkb);
    const int per = P.tm * P.tk;
    if (!DYN && !ACCUMULATE) {   /* rot < per, a group's units (no splits) */
        local += T.g & P.rot;
        if (local >= per) local -= per;
    }
    const int c = SPLIT > 1 ? local / per : 0;   /* unsplit: a group's units are [0, per) */
    int um, un;
    P.raster.at(local - c * per, P.tm, P.tk, um, un);
    T.n0 = (um * CM + P.cta.rank_m) * BM;
    T.k0 = (un * CN + P.cta.rank_n) * BN;
    T.kb0 = (int)((long long)c * nkb / sp);
    T.kb1 = (int)((long long)(c + 1) * nkb / sp);
    T.split = sp;
    return T;
}

/* The k-blocks of work unit t, where the consumers skip the other warp
 * group's item (pingpong): its ring slots, without kiln_decode's tile
 * placement, whose integer divisions ran in every warp of both groups
 * for every item.  On short reductions a warp group's epilogue and decode
 * follow each other while the other group's main loop is short, so the
 * decode's latency was on the critical path: 0.95-0.99 of the time for
 * the 128x192 and 128x128 pingpong kernels on most of 10 shapes, but
 * 1.02-1.07 on small_decode (tables serve it with 128x256 cooperative)
 * and 1.007 for the discrete accumulating 128x128 one on decode-sized
 * groups (H200, docs/sm90_wgrad.md, seventy-fifth session). */
KDEV int kiln_item_kblocks(const kiln_wgrad &P, const kiln_smem &m, int t, int &gcur)
{
    if (SPLIT > 1) {
        const kiln_wtile T = kiln_decode(P, m, t, gcur);
        return T.kb1 - T.kb0;
    }
    const int g = gcur = kiln_find_group(t, m.tile_start, P.G, gcur);
    return kiln_kblocks(kiln_group_row(P, m, g + 1) - kiln_group_row(P, m, g));
}

/* ---------------------------------------------------------- producer */

KDEV void kiln_produce(const kiln_wgrad &P, const kiln_smem &m, const kiln_tmap *tmap_a,
                       const kiln_tmap *tmap_b)
{
    kiln_ring r = {0, 0};
    int gcur = 0;   /* the group of the last item (kiln_find_group) */
    kiln_q q = {0, 0};
    int t = P.ctr ? kiln_fetched_item(P, (int)atomicAdd(P.ctr, 1u)) : kiln_first_item(P);
    for (;;) {
        if (P.ctr) {   /* hand t (-1: no more) to the consumers */
            kiln_mbar_wait(kiln_q_empty(m, q.i), q.ph ^ 1);
            *kiln_q_slot(m, q.i) = t < P.items ? t : -1;
            kiln_mbar_arrive(kiln_q_full(m, q.i));
            q.next();
        }
        if (t >= P.items) break;
        /* the next item's fetch, its value waited for only at this item's end */
        const int tn = !P.ctr ? kiln_next_item(P, t)
                       : DISCRETE && t < P.t0 && ((t + 1) & P.cmask) ? t + 1
                       : kiln_fetched_item(P, (int)atomicAdd(P.ctr, 1u));
        const kiln_wtile T = kiln_decode(P, m, t, gcur);
        for (int kb = T.kb0; kb < T.kb1; ++kb) {
            const kiln_u32 full = kiln_acquire(m, r);
            const kiln_u32 sa = m.stage(r.s);
            const kiln_u32 sb = sa + A_BYTES;
            const int r0 = T.s + kb * BK;
            /* In a pair, each CTA loads every other box of the shared
             * operand into both CTAs' slots (multicast; both full barriers
             * count its bytes), the rest of its own. */
#pragma unroll
            for (int j = 0; j < BM / 64; ++j) {
                if (CN == 1) kiln_tma_load_2d(sa + j * BOX_BYTES, tmap_a, full, T.n0 + 64 * j, r0);
                else if ((j & 1) == P.cta.crank)
                    kiln_tma_load_2d_mc(sa + j * BOX_BYTES, tmap_a, full, T.n0 + 64 * j, r0, 3);
            }
#pragma unroll
            for (int j = 0; j < BN / 64; ++j) {
                if (CM == 1) kiln_tma_load_2d(sb + j * BOX_BYTES, tmap_b, full, T.k0 + 64 * j, r0);
                else if ((j & 1) == P.cta.crank)
                    kiln_tma_load_2d_mc(sb + j * BOX_BYTES, tmap_b, full, T.k0 + 64 * j, r0, 3);
            }
            r.next();
        }
        t = tn;
    }
    if (P.ctr) {   /* this CTA's fetches are done; the last CTA resets the counters */
        __threadfence();
        if (atomicAdd(P.ctr + 1, 1u) == (unsigned)P.cta.ncl - 1) {
            atomicExch(P.ctr, 0u);
            atomicExch(P.ctr + 1, 0u);
        }
    }
}

/* ---------------------------------------------------------- consumer */

/* A group's last k-block may hold `valid` < BK token rows of its own: zero
 * rows [valid, end), end - valid < 16, of the boxes this warpgroup reads
 * (its A boxes and every B box), whole 128-byte rows so the swizzle does
 * not matter; both operands, so NaN/Inf past the group cannot turn into
 * 0·Inf.  The generic-proxy writes are fenced against the async proxy, and
 * the warpgroup syncs (named barrier 3 + cw) before its wgmma reads them.
 * Cooperative warpgroups share the B boxes and both zero all of them: the
 * other's writes to those rows store the same zeros, so they cannot change
 * what either wgmma reads, and no warpgroup waits for the other (a
 * CTA-wide barrier here was ~5% of a decode tile, ncu); each releases the
 * stage only after its own writes and wgmma. */
KDEV void kiln_mask_tail(const kiln_smem &m, int s, int valid, int end, int cw)
{
    const int abox0 = PINGPONG ? 0 : cw * MI;
    /* The rows end within the k16 step that holds `valid` (the caller's
     * contract), so a box's zeros are at most 15 rows of 8 16-byte chunks,
     * fewer than the warpgroup's threads: each thread zeroes its chunk in
     * every box, with no division.  The loop over the flattened boxes
     * divided by the rows' chunks for every chunk, about 250 instructions a
     * thread in every short group's last k-block (SASS, 128x192 pingpong).
     * Without those divisions the cooperative 128x256 kernels took
     * 0.95-0.97 of the time on skewed, irregular and Dirichlet routings;
     * the same chunks spread over all four warps by a constant division
     * measured no better (H200, docs/sm90_wgrad.md, seventy-ninth
     * session). */
    const int w = threadIdx.x & 127;   /* this thread's chunk of the rows */
    if (w < (end - valid) * 8) {
        unsigned char *row = m.base + s * STAGE_BYTES + (valid + (w >> 3)) * 128 + (w & 7) * 16;
#pragma unroll
        for (int bx = 0; bx < MI + BN / 64; ++bx) {
            const int box = bx < MI ? abox0 + bx : BM / 64 + (bx - MI);
            *(uint4 *)(row + box * BOX_BYTES) = make_uint4(0, 0, 0, 0);
        }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    kiln_named_sync(3 + cw, 128);
}

/* The first NK k16 steps of a k-block (stage at sa / sb) into this
 * warpgroup's accumulators; the first step of a work item overwrites them.
 * The commit is part of the straight sequence: committed after the
 * branches of kiln_kblock_mma_n merge, ptxas closed each branch's group
 * itself and then made the commit an empty wgmma group of its own, so the
 * main loop's wait<1> waited for the k-block just issued and the tensor
 * cores drained at every k-block (4-9% of every wgrad case, H200,
 * docs/sm90_wgrad.md). */
template <int NK, bool DS>
KDEV void kiln_kblock_mma(float (&acc)[MI][ACC_N], float (&dd)[MI][4], kiln_u32 sa, kiln_u32 sb,
                          kiln_u32 ones, int abox0, bool first)
{
    kiln_wg_fence();
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
        kiln_u64 db = kiln_desc(sb + kk * 16 * 128, MN_LBO, MN_SBO);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            kiln_u64 da = kiln_desc(sa + (abox0 + mi) * BOX_BYTES + kk * 16 * 128, MN_LBO, MN_SBO);
            kiln_wgmma(acc[mi], da, db, (!first || kk != 0) ? 1 : 0);
            if constexpr (DBIAS && DS)
                kiln_wgmma_n8(dd[mi], da, kiln_desc(ones, 16, 1024), (!first || kk != 0) ? 1 : 0);
        }
    }
    kiln_wg_commit();
}

/* One k-block's wgmma, for a step count and dbias choice known only at run
 * time: one straight wgmma sequence per case (a branch between the wgmma
 * of a k-block makes ptxas inject warpgroup.arrive, C7519). */
template <bool DS>
KDEV void kiln_kblock_mma_n(int nk16, float (&acc)[MI][ACC_N], float (&dd)[MI][4], kiln_u32 sa,
                            kiln_u32 sb, kiln_u32 ones, int abox0, bool first)
{
    if (nk16 == BK / 16) kiln_kblock_mma<BK / 16, DS>(acc, dd, sa, sb, ones, abox0, first);
    else if (nk16 == 1) kiln_kblock_mma<1, DS>(acc, dd, sa, sb, ones, abox0, first);
    else if (nk16 == 2) kiln_kblock_mma<2, DS>(acc, dd, sa, sb, ones, abox0, first);
    else kiln_kblock_mma<3, DS>(acc, dd, sa, sb, ones, abox0, first);
}

/* ------------------------------------------------------- bias gradient */

/* DBIAS: the work items whose dW tile starts at column k0 = 0 also sum the
 * dY rows they already hold in shared memory, on the tensor cores: next to
 * each k16 step's wgmma, one m64n8k16 of the same A box (BK token rows of
 * 64 n-values, MN-major) against a 16 x 8 tile of ones gives, in every one
 * of its 8 columns, the step's sum over tokens for each n.  The masked tail
 * rows are zeros, so only the group's own tokens count.  This costs 8/BN
 * more MMA on those items only, no global traffic, and the stage is read
 * only by the async proxy (no thread reads of the ring).  The ones fill
 * the 1024-byte, 1024-aligned block at OFF_EXTRA: a K-major operand with
 * 128-byte swizzle reads within one such block. */
KDEV kiln_u32 kiln_ones_addr(const kiln_smem &m) { return m.sbase + kiln_wgrad_layout::OFF_EXTRA; }

/* Once per CTA, before the schedule's barrier: the ones tile (1.0 in the
 * input type), made visible to the async proxy. */
KDEV void kiln_fill_ones(const kiln_smem &m)
{
    if (!DBIAS) return;
    const kiln_u32 one = IN_F16 ? 0x3C003C00u : 0x3F803F80u;
    if (threadIdx.x < 64)
        ((uint4 *)(m.base + kiln_wgrad_layout::OFF_EXTRA))[threadIdx.x] = make_uint4(one, one, one, one);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* DBIAS, at the end of a k0 = 0 work item: the n8 accumulators hold, in
 * each of their 8 columns, the item's sum for row n of the A boxes; lanes
 * with lane % 4 == 0 own columns 0-1, so they write rows
 * n0 + row_off + 64 mi + 16 wq + lane / 4 (dd[mi][0]) and 8 below it
 * (dd[mi][2]) of db, in f32 or the output type; accumulate adds
 * (atomically: split items share a tile).  An empty group's item
 * (overwrite mode) writes its zeros the same way.  Element-wise stores: db
 * need only be element-aligned. */
KDEV void kiln_dbias_write(const kiln_kernel_args &args, const kiln_wgrad &P, const kiln_wtile &T,
                           const float (&dd)[MI][4], int row_off)
{
    const int lane = threadIdx.x & 31, wq = (threadIdx.x & 127) >> 5;
    if (lane & 3) return;
    const bool f32 = args.dbias_f32 || OUT_T == 2;
    const int esz = f32 ? 4 : 2;
    char *db = args.dbias_ptrs ? (char *)args.dbias_ptrs[T.g]
                               : (char *)args.dbias + (long long)T.g * args.ld_dbias * esz;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int n = T.n0 + row_off + 64 * mi + 16 * wq + (lane >> 2) + 8 * h;
            const float v = dd[mi][2 * h];
            if (n >= P.wn) continue;
            if (f32) {
                float *q = (float *)(db + (long long)n * 4);
                if (ACCUMULATE) atomicAdd(q, v);
                else *q = v;
            } else {
                const kiln_u32 w = kiln_pack2(v, 0.0f);
                *(unsigned short *)(db + (long long)n * 2) = (unsigned short)(w & 0xFFFFu);
            }
        }
}

/* Group g's dW: its own buffer (discrete) or its slice of the dense one. */
KDEV char *kiln_group_out(const kiln_kernel_args &args, const kiln_wgrad &P, int g)
{
    return DISCRETE ? (char *)args.d_ptrs[g] : (char *)args.d + (long long)g * P.wn * args.ldd * OSZ;
}

/* Discrete dW (per-expert buffers, args.d_ptrs) goes out through TMA as
 * dense dW does: tmap_d describes one group's [N, K] (launch.c encodes it
 * over a stand-in address), and lane 0 of each consumer warp, which issues
 * the warp's bulk stores or reduce-adds, points a copy of it at group g's
 * buffer when the warp's tiles move to another group (kiln_tmap_repoint;
 * overwriting, the warp together: kiln_tmap_repoint_warp, through the
 * warp's staging; sm90_common.cuh).  The copies live in this module's
 * slots, DMAP_SLOTS per consumer warp per SM.  Before a slot is rewritten
 * lane 0 waits until the bulk operations that used it (all the warp's, so
 * the staging is free too) have read their shared-memory sources; a bulk
 * tensor operation has read its map by then (the map gives the box it
 * reads), so none still reads the slot.  Before, discrete dW went through
 * an fp32 staging slot and 16-byte stores or red.global adds: the path the
 * TMA store and reduce-add replaced for dense dW (docs/sm90_wgrad.md). */
constexpr int DMAP_SLOTS = 2;
constexpr int DMAP_WARPS = CONSUMERS * 4;
__device__ kiln_tmap kiln_dmap_slots[DISCRETE ? KILN_SLOT_SMS * DMAP_WARPS * DMAP_SLOTS : 1];

struct kiln_dmap {
    int g;                 /* the group whose map this warp holds (-1: none yet) */
    int turn;              /* group changes so far (which slot is next) */
};

/* Points `map` at group g's dW for consumer warp `warp`, before the
 * tile's bulk stores or reduce-adds; returns the group's first row in it
 * (dense: g*wn of the one {K, G*N} map; discrete: 0 of its own).  The
 * slot is found again from dm.turn each tile, not kept: a pointer held
 * across the walk was two registers the 192 accumulators of a 128x192
 * pingpong tile could not spare (it spilled; seventy-fourth session).  The
 * slot it rewrites served the group before the last one; its bulk
 * operations were all committed before this tile, and lane 0 waits until
 * every one has read its source.  Re-pointing before the main loop
 * instead, to hide the copy and fences, spilled 88-304 bytes of the
 * consumers' registers in most kernels (sixteenth session; the cause,
 * found in the forty-third, was kiln_smid's trap within the main loop's
 * reach).  Without the spills it took 0.97-1.03 of the time per kernel,
 * and under the main loop's last wgmma up to 1.15 (forty-third): not
 * kept.  Overwriting kernels re-point with the warp
 * (kiln_tmap_repoint_warp): with dW in rows of a tile, 0.91-1.00 of the
 * time per kernel in geometric mean over 9 shapes where groups change
 * every few tiles (H200, docs/sm90_wgrad.md, forty-third session);
 * accumulating ones took 0.99-1.025 with it and keep kiln_tmap_repoint. */
KDEV int kiln_dmap_select(kiln_dmap &dm, const kiln_kernel_args &args, const kiln_wgrad &P,
                          const kiln_tmap *tmap_d, int g, int warp, int lane, unsigned char *stg,
                          const kiln_tmap *&map)
{
    map = tmap_d;
    if (!DISCRETE) return g * P.wn;
    kiln_tmap *slot = &kiln_dmap_slots[(kiln_smid() * DMAP_WARPS + warp) * DMAP_SLOTS +
                                       (dm.turn + (g == dm.g ? DMAP_SLOTS - 1 : 0)) % DMAP_SLOTS];
    map = slot;
    if (g == dm.g) return 0;
    if (lane == 0) kiln_bulk_wait_read<0>();
    if (ACCUMULATE) {
        if (lane == 0) kiln_tmap_repoint(slot, tmap_d, (const void *const *)args.d_ptrs, g);
    } else {
        __syncwarp();
        kiln_tmap_repoint_warp(slot, tmap_d, args.d_ptrs[g], stg, lane);
    }
    __syncwarp();
    dm.g = g;
    dm.turn++;
    return 0;
}

/* ---------------------------------------------------------- main loop */

/* Accumulating, the adds of a tile's epilogue read the old dW from HBM:
 * dense, through TMA reduce-adds where each staging box waits for the one
 * before it; discrete, through red.global or a read-modify-write.  Either
 * way the epilogue paid the misses in series.  Each consumer warp
 * prefetches its rows of the old tile into L2 (PF_TENSOR below says how)
 * PF_BEFORE k-blocks before the main loop ends (at its start when the
 * tile has fewer): late enough that a long reduction does not hold the
 * lines in L2 (or compete with its operand loads) for long, early enough
 * to cover the misses.  Same calls, checked (docs/sm90_wgrad.md, ninth
 * session): at 3 k-blocks every kernel measured was faster than without
 * on every case (dense 0.67-1.00 of the time, discrete 0.68-0.88); at the
 * tile's start dense 128x256 tiles were 10% slower on long reductions, 6
 * k-blocks fell in between. */
constexpr int PF_BEFORE = 3;

/* Dense dW added in boxes (the 2-D tmap_d): lane 0 prefetches the warp's
 * 16x32 boxes of the old tile through the map, one tensor prefetch a box.
 * Elsewhere (discrete buffers; wgrad.rows, whose map is 3-D where K
 * allows) each of lanes 0-15 prefetches its row of each m64 sub-tile:
 * prefetch.L2 takes its address in uniform registers, so the warp's 16
 * addresses make a loop of 16 turns, which ncu put at 7.7% of the warp
 * samples of balanced32's accumulate kernel.  The tensor form, same call,
 * checked: 0.987 of the row form's time in geometric mean over 22 kernels
 * and 13 shapes, the table's long-reduction kernels 0.976-0.996 (H200,
 * docs/sm90_wgrad.md, twenty-sixth session). */
constexpr bool PF_TENSOR = ACCUMULATE && !DISCRETE && D_CHUNKS == 0;

struct kiln_pf {
    const kiln_tmap *map;  /* PF_TENSOR: tmap_d */
    int c0, r0;            /* PF_TENSOR: the warp's first box (column, row of the map) */
    const char *p;     /* the lane's first row of the old tile */
    long long step;    /* bytes from one of its rows to the next (64 rows on) */
    kiln_u32 bytes;    /* per row (PF_TENSOR: 1); 0: nothing to prefetch */
    int nrows;         /* rows from the lane's (PF_TENSOR: warp's) first to N */
};

/* What this lane prefetches of tile T of dW, dense or group T.g's own
 * buffer: PF_TENSOR, lane 0 the warp's boxes; else lanes 0-15 the warp's
 * 16 rows of each m64 sub-tile. */
KDEV kiln_pf kiln_pf_rows(const kiln_kernel_args &args, const kiln_wgrad &P, const kiln_wtile &T,
                          int wrow0, int lane, const kiln_tmap *tmap_d)
{
    kiln_pf pf;
    pf.bytes = 0;
    if (PF_TENSOR) {
        if (lane != 0 || T.k0 >= P.wk) return pf;
        pf.map = tmap_d;
        pf.c0 = T.k0;
        pf.r0 = T.g * P.wn + wrow0;
        pf.nrows = P.wn - wrow0;
        pf.bytes = 1;
        return pf;
    }
    if (!ACCUMULATE || lane >= 16 || T.k0 >= P.wk) return pf;
    const int row = wrow0 + lane;
    pf.p = kiln_group_out(args, P, T.g) + ((long long)row * args.ldd + T.k0) * OSZ;
    pf.step = 64LL * args.ldd * OSZ;
    pf.bytes = (kiln_u32)min(BN, P.wk - T.k0) * OSZ;
    pf.nrows = P.wn - row;
    return pf;
}

/* The main loop of one work item, as in sm90_gemm.cuh's, with the tail of
 * the group masked.  Returns false for an item of no k-blocks (an empty
 * group in overwrite mode), whose accumulators hold nothing.  DS (DBIAS,
 * k0 = 0): also sum each stage's dY rows into dd (kiln_kblock_mma); a
 * template argument, as a branch per k-block made ptxas serialise the
 * wgmma (C7520).  `under` runs while the last wgmma do (DECODE_AHEAD). */
template <bool DS, class Under>
KDEV bool kiln_mainloop(const kiln_wgrad &P, const kiln_smem &m, kiln_ring &r, const kiln_turn &turn,
                        const kiln_wtile &T, float (&acc)[MI][ACC_N], int cw, int lane,
                        float (&dd)[MI][4], const kiln_pf &pf, Under under)
{
    const int abox0 = PINGPONG ? 0 : cw * MI;
    const kiln_u32 ones = kiln_ones_addr(m);
    int prev = -1;
    const int pf_kb = max(T.kb0, T.kb1 - PF_BEFORE);
    for (int kb = T.kb0; kb < T.kb1; ++kb) {
        if (ACCUMULATE && kb == pf_kb && pf.bytes) {
            if (PF_TENSOR) {
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                    for (int q = 0; q < BN / 32; ++q)
                        if (64 * mi < pf.nrows)
                            kiln_tma_prefetch_2d(pf.map, pf.c0 + 32 * q, pf.r0 + 64 * mi);
            } else {
#pragma unroll
                for (int mi = 0; mi < MI; ++mi)
                    if (64 * mi < pf.nrows) kiln_prefetch_l2(pf.p + mi * pf.step, pf.bytes);
            }
        }
        kiln_mbar_wait(m.full(r.s), r.ph);
        const kiln_u32 sa = m.stage(r.s);
        const kiln_u32 sb = sa + A_BYTES;
        const int valid = T.e - (T.s + kb * BK);
        /* A group's last k-block: only its first ceil(valid/16) k16 steps
         * hold tokens of the group, so only those are issued (a
         * decode-sized group of 16 tokens costs one step, not four); the
         * rows of the last step past the group's end are zeroed (they hold
         * the next group's tokens, or anything).  Through a shuffle:
         * provably warp-uniform, so the wgmma stay off a divergent path. */
        const int nk16 = __shfl_sync(0xffffffffu, valid < BK ? (valid + 15) >> 4 : BK / 16, 0);
        if (valid < nk16 * 16) kiln_mask_tail(m, r.s, valid, nk16 * 16, cw);
        const bool first = kb == T.kb0;
        kiln_kblock_mma_n<DS>(nk16, acc, dd, sa, sb, ones, abox0, first);
        if (prev >= 0) {
            kiln_wg_wait<1>();
            kiln_release<CS>(m, prev, lane, P.cta.crank);
        }
        prev = r.s;
        r.next();
    }
    turn.pass();
    under();
    kiln_wg_wait<0>();   /* unconditional: keeps the accumulators' state uniform */
    if (prev >= 0) kiln_release<CS>(m, prev, lane, P.cta.crank);
    return prev >= 0;
}

/* An empty group (overwrite mode only): exact zeros.  A separate path, so
 * that acc is never zeroed by hand (that merge made ptxas spill the
 * accumulators). */
KDEV void kiln_store_zeros(const kiln_kernel_args &args, const kiln_wgrad &P, const kiln_wtile &T,
                           char *dg, int row_off)
{
    const float z[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int i = threadIdx.x & 127; i < WG_M * (BN / 8); i += 128) {
        const int grow = T.n0 + row_off + i / (BN / 8);
        const int gcol = T.k0 + 8 * (i % (BN / 8));
        if (grow < P.wn && gcol < P.wk)
            kiln_store8(dg + ((long long)grow * args.ldd + gcol) * OSZ, z);
    }
}

/* ACCUMULATE with D_CHUNKS: a warp's 16 rows of an m64 sub-tile in fp32 as
 * one box of D_CHUNKS 128-byte chunks a row, laid out [row][chunk] and
 * swizzled as kiln_rowbox_from_frag's (32 columns a chunk).  A thread's
 * fragment gives, per 8-column group j of a chunk, two floats of row
 * lane / 4 and two of row lane / 4 + 8, written as 8-byte pieces.  Rows
 * are D_CHUNKS segments apart, so with 4 or 8 chunks the swizzle leaves
 * the 8 rows of one store on 2 or 1 bank groups (4- and 8-way conflicts);
 * row k writes group j ^ ((k >> 1) & 3) in the store of group j instead,
 * which puts exactly two 16-byte pieces on every bank group (the least a
 * 256-byte store takes; checked by a model of every element's place and
 * bank before it ran, docs/sm90_wgrad.md, nineteenth session).  Chunks
 * from column `cols` on are not written (past K, clipped by the add). */
/* x and y swapped where s: a lane-dependent exchange of a thread's values
 * (pairs of floats here, packed words in kiln_rowbox_from_frag), so that
 * each lane hands its pieces over in the order its row needs. */
template <class T> KDEV void kiln_xswap(T &x, T &y, bool s)
{
    const T t = s ? y : x;
    y = s ? x : y;
    x = t;
}

KDEV void kiln_rowbox_from_frag_f32(unsigned char *rb, const float *a, int cols, int lane)
{
    const int r = lane >> 2;
    const int h = D_CHUNKS % 4 == 0 ? (r >> 1) & 3 : 0;
#pragma unroll
    for (int q = 0; q < D_CHUNKS; ++q) {
        if (q * 32 >= cols) continue;
        const float *aq = a + q * 16;   /* 4 column groups of 4 sums each */
        float2 lo[4], hi[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            lo[j] = make_float2(aq[4 * j], aq[4 * j + 1]);
            hi[j] = make_float2(aq[4 * j + 2], aq[4 * j + 3]);
        }
        /* lo[j], hi[j] := group j ^ h */
        kiln_xswap(lo[0], lo[1], h & 1);
        kiln_xswap(lo[2], lo[3], h & 1);
        kiln_xswap(lo[0], lo[2], h & 2);
        kiln_xswap(lo[1], lo[3], h & 2);
        kiln_xswap(hi[0], hi[1], h & 1);
        kiln_xswap(hi[2], hi[3], h & 1);
        kiln_xswap(hi[0], hi[2], h & 2);
        kiln_xswap(hi[1], hi[3], h & 2);
        const int seg_lo = r * D_CHUNKS + q, seg_hi = (r + 8) * D_CHUNKS + q;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = 8 * (j ^ h) + 2 * (lane & 3);
            const int piece = c >> 2, within = (c & 3) * 4;
            *(float2 *)(rb + seg_lo * 128 + ((piece ^ (seg_lo & 7)) << 4) + within) = lo[j];
            *(float2 *)(rb + seg_hi * 128 + ((piece ^ (seg_hi & 7)) << 4) + within) = hi[j];
        }
    }
}

/* The by-hand adds of such a box (its 16 rows would run into the next
 * group's): rows [0, rows) and columns [0, cols) (a multiple of 4) of each
 * into dst, row pitch ld floats. */
KDEV void kiln_rowbox_red_global(const unsigned char *rb, float *dst, long long ld, int rows,
                                 int cols, int lane)
{
    constexpr int PIECES = D_CHUNKS * 8;   /* 16-byte pieces a row */
#pragma unroll 4
    for (int i = lane; i < 16 * PIECES; i += 32) {
        const int r = i / PIECES, p = i % PIECES, seg = r * D_CHUNKS + p / 8;
        if (r < rows && p * 4 < cols) {
            const float4 v = *(const float4 *)(rb + seg * 128 + (((p & 7) ^ (seg & 7)) << 4));
            kiln_red_add4(dst + r * ld + p * 4, v.x, v.y, v.z, v.w);
        }
    }
}

/* Accumulate epilogue: each 16x32 fp32 slab goes to a 128B-swizzled box in
 * staging, then one TMA reduce-add into dW through `map`, group rows from
 * `grow0` (kiln_dmap_select; atomic per element, so split partials need
 * nothing else).  Slabs whose 16 rows straddle N (N % 16 ==
 * 8) add their valid rows by hand.  *buf: which of the STG_BUFS boxes is next.
 * D_CHUNKS (wgrad.rows; dense, K a multiple of 32: the rule launch.c
 * encodes tmap_d by): a warp's 16 rows of a sub-tile go out in one
 * reduce-add of rows BN wide instead, 10% faster than four 128-byte boxes
 * a row in a probe (H200, bench/store_box_probe.cu); the one row box waits
 * for the last add to have read it.  A choice of the spec, not of the call:
 * the same kernels added rows 3-11% faster on groups of 8-300 tokens, but
 * their larger staging alone made them 2.5-7% slower on groups of 512 and
 * more, whichever way they stored (docs/sm90_wgrad.md, nineteenth
 * session), so the tuner picks per shape class.  (Nor per tile: one map
 * serves the call, and a 2-D add through a 3-D map is an illegal
 * instruction.) */
KDEV void kiln_epilogue_tma_red(const kiln_kernel_args &args, const kiln_wgrad &P,
                                const kiln_wtile &T, const float (&acc)[MI][ACC_N],
                                unsigned char *stg, char *dg, int wrow0, int &buf,
                                const kiln_tmap *map, int grow0)
{
    const int lane = threadIdx.x & 31;
    if (D_CHUNKS > 0 && P.wk % 32 == 0) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const int wrow = wrow0 + mi * 64;
            if (wrow >= P.wn) continue;
            if (lane == 0) kiln_bulk_wait_read<0>();
            __syncwarp();
            kiln_rowbox_from_frag_f32(stg, &acc[mi][0], P.wk - T.k0, lane);
            kiln_fence_async_smem();
            __syncwarp();
            if (wrow + 16 <= P.wn) {
                if (lane == 0) {
                    kiln_tma_reduce_add_3d(kiln_smem_addr(stg), map, 0, T.k0 / 32, grow0 + wrow);
                    kiln_bulk_commit();
                }
            } else {
                kiln_rowbox_red_global(stg, (float *)(dg + ((long long)wrow * args.ldd + T.k0) * 4),
                                       args.ldd, P.wn - wrow, min(BN, P.wk - T.k0), lane);
                __syncwarp();   /* the box's reads, before it is written again */
            }
        }
        __syncwarp();
        return;
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int wrow = wrow0 + mi * 64;
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
            const int col0 = T.k0 + q * 32;
            if (col0 >= P.wk) continue;
            unsigned char *box = stg + buf * 2048;
            if (lane == 0) {   /* two of the boxes at most (D_CHUNKS: K not a multiple of 32) */
                if (STG_BUFS >= 2) kiln_bulk_wait_read<1>(); else kiln_bulk_wait_read<0>();
            }
            __syncwarp();
            kiln_box_from_frag<4>(box, &acc[mi][16 * q], lane);
            kiln_fence_async_smem();
            __syncwarp();
            if (wrow + 16 <= P.wn) {
                if (lane == 0) {
                    kiln_tma_reduce_add_2d(kiln_smem_addr(box), map, col0, grow0 + wrow);
                    kiln_bulk_commit();
                }
                if (STG_BUFS >= 2) buf ^= 1;
                continue;
            }
#pragma unroll
            for (int it = 0; it < 2; ++it) {
                const int rr = it * 8 + (lane >> 2), cc = (lane & 3) * 8;
                const int grow = wrow + rr, gcol = col0 + cc;
                if (grow < P.wn && gcol < P.wk) {
                    const float4 v0 = *(const float4 *)(box + rr * 128 + (((cc >> 2)) ^ (rr & 7)) * 16);
                    const float4 v1 = *(const float4 *)(box + rr * 128 + (((cc >> 2) + 1) ^ (rr & 7)) * 16);
                    float *dst = (float *)(dg + ((long long)grow * args.ldd + gcol) * 4);
                    kiln_red_add4(dst, v0.x, v0.y, v0.z, v0.w);
                    kiln_red_add4(dst + 4, v1.x, v1.y, v1.z, v1.w);
                }
            }
        }
    }
}

/* D_CHUNKS: a warp's 16 rows of an m64 sub-tile as one box of D_CHUNKS
 * 128-byte chunks a row, laid out [row][chunk]: chunk c of row r is the
 * 128-byte segment r*D_CHUNKS + c, its 16-byte pieces swizzled by that
 * index mod 8, as TMA's 128-byte swizzle does by address (the box is
 * 1024-byte aligned).  `a` as kiln_box_from_frag's, for the tile's BN
 * columns; chunks from column `cols` on are not written (past K, clipped
 * by the store).
 *
 * Bank conflicts: each 8x8 matrix of an stmatrix is written in one pass
 * only if its 8 rows fall on 8 distinct 16-byte bank groups.  Rows are
 * D_CHUNKS segments apart, so the swizzle separates 8 rows of one piece
 * only for an odd D_CHUNKS (3); with 2 it leaves rows r and r+4 on one
 * group, with 4 rows r, r+2, r+4, r+6 (2- and 4-way conflicts: those
 * kernels ran 3-8% slower than with the 16x64 boxes in geometric mean, up
 * to 19% on decode shapes, H200).  So a matrix's rows hold different pieces:
 * row k of matrix i holds piece i ^ (k >> 2) (2 chunks) or i ^ (k >> 1)
 * (4 chunks) of its group of pieces, which the swizzle's row term then
 * spreads over all 8 groups.  Each thread's row k is fixed (lane / 4), so
 * it hands its pieces over in that order: a lane-dependent swap of its
 * packed words (kiln_xswap), 1 or 2 selects a word. */
KDEV void kiln_rowbox_from_frag(unsigned char *rb, const float *a, int cols, int lane)
{
    const kiln_u32 base = kiln_smem_addr(rb);
#pragma unroll
    for (int q = 0; q < D_CHUNKS; ++q) {
        if (q * 64 >= cols) continue;
        const float *aq = a + q * 32;   /* 8 pieces (8-column blocks) of 4 sums each */
        if (D_CHUNKS == 4) {
            /* x4: the 8 rows of half h, pieces 4g .. 4g + 3; matrix i row k
             * holds piece 4g + (i ^ (k >> 1)), k >> 1 = lane >> 3 for the
             * thread's own row */
            const int s = lane >> 3;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int g = 0; g < 2; ++g) {
                    const float *b = aq + 16 * g + 2 * h;   /* piece 4g + j: b[4j], b[4j + 1] */
                    kiln_u32 w0 = kiln_pack2(b[0], b[1]), w1 = kiln_pack2(b[4], b[5]);
                    kiln_u32 w2 = kiln_pack2(b[8], b[9]), w3 = kiln_pack2(b[12], b[13]);
                    kiln_xswap(w0, w1, s & 1);   /* w_i = piece i ^ s */
                    kiln_xswap(w2, w3, s & 1);
                    kiln_xswap(w0, w2, s & 2);
                    kiln_xswap(w1, w3, s & 2);
                    const int k = lane & 7, seg = (h * 8 + k) * D_CHUNKS + q;
                    const int u = 4 * g + ((lane >> 3) ^ (k >> 1));
                    kiln_stmatrix_x4(base + seg * 128 + ((u ^ (seg & 7)) << 4), w0, w1, w2, w3);
                }
        } else {
            /* x4 as kiln_box_from_frag's: (rows 0-7, piece 2p + 0), (rows 8-15,
             * 2p + 0), (rows 0-7, 2p + 1), (rows 8-15, 2p + 1); with 2 chunks
             * row k of a matrix holds piece 2p + (b ^ (k >> 2)) instead,
             * k >> 2 = lane >> 4 for the thread's own row */
            const bool sw = D_CHUNKS == 2 && (lane >> 4);
            const int k = lane & 7, row = k + ((lane >> 3) & 1) * 8, seg = row * D_CHUNKS + q;
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                kiln_u32 w0 = kiln_pack2(aq[8 * p + 0], aq[8 * p + 1]);
                kiln_u32 w1 = kiln_pack2(aq[8 * p + 2], aq[8 * p + 3]);
                kiln_u32 w2 = kiln_pack2(aq[8 * p + 4], aq[8 * p + 5]);
                kiln_u32 w3 = kiln_pack2(aq[8 * p + 6], aq[8 * p + 7]);
                if (D_CHUNKS == 2) {
                    kiln_xswap(w0, w2, sw);
                    kiln_xswap(w1, w3, sw);
                }
                const int u = 2 * p + ((lane >> 4) ^ (D_CHUNKS == 2 ? (k >> 2) : 0));
                kiln_stmatrix_x4(base + seg * 128 + ((u ^ (seg & 7)) << 4), w0, w1, w2, w3);
            }
        }
    }
}

/* The by-hand store of such a box (its 16 rows would run into the next
 * group's): rows [0, rows) and bytes [0, bytes) of each (a multiple of 16)
 * to dst, row pitch ld_bytes. */
KDEV void kiln_rowbox_to_global(const unsigned char *rb, char *dst, long long ld_bytes, int rows,
                                int bytes, int lane)
{
    constexpr int PIECES = D_CHUNKS * 8;   /* 16-byte pieces a row */
#pragma unroll
    for (int i = lane; i < 16 * PIECES; i += 32) {
        const int r = i / PIECES, p = i % PIECES, seg = r * D_CHUNKS + p / 8;
        if (r < rows && p * 16 < bytes)
            *(uint4 *)(dst + r * ld_bytes + p * 16) =
                *(const uint4 *)(rb + seg * 128 + (((p & 7) ^ (seg & 7)) << 4));
    }
}

/* Overwrite epilogue: this warp's 16 rows of each m64 sub-tile, 128 bytes
 * of columns at a time, converted in registers into a swizzled box and
 * stored by one bulk tensor store through `map`, group rows from `grow0`
 * (kiln_dmap_select).  Nothing waits for the stores to land: a box buffer
 * is only waited on (its reads of shared memory) before it is written
 * again, so they finish under the next tile's main loop.  TMA clips
 * columns at K.  A box whose 16 rows run past N (N % 16 == 8) would write
 * the next group's first rows: its valid rows go out by hand.
 *
 * The boxes go out in batches of EPI_BATCH (a warp's whole share at once
 * where the staging holds it): each batch waits once for the last one's
 * reads, is written, fenced for the async proxy once, and stored by lane
 * 0 in one branch.  Per box, the fences waited on each box's stmatrix in
 * turn (~10% of a decode tile, ncu).  Where the staging holds half the
 * share (the 128x192 pingpong kernels: two batches of 3), batches took
 * 0.991 (plain) and 0.993 (raster-m) of the time of a box at a time in
 * geometric mean over 10 shapes, 0.95-1.03 a cell (H200, docs/sm90_wgrad.md,
 * seventy-sixth session).  16-bit boxes are written from one stmatrix
 * address a lane, worked out once a tile (kiln_box16_from_frag_at), and
 * every lane takes the batch's wait, so no branch comes before it: that
 * way the db and discrete 128x192 pingpong kernels batch too without a
 * spill (batched with the per-box addresses and lane 0's wait, their
 * 192-accumulator warp groups spilled 8-248 bytes and went a box at a
 * time until the hundred-and-ninth session).  Against that, on an H100
 * in one call over 12 shapes: 1.002 (db) and 1.008 (discrete) of the
 * time, 0.997 for the plain 128x192 pingpong kernel. */
KDEV void kiln_epilogue_tma_store(const kiln_kernel_args &args, const kiln_wgrad &P,
                                  const kiln_wtile &T, const float (&acc)[MI][ACC_N],
                                  unsigned char *stg, char *dg, int wrow0,
                                  const kiln_tmap *map, int grow0)
{
    constexpr int OCW = 128 / OSZ;             /* output columns per box */
    const int lane = threadIdx.x & 31;
    /* A tile of one k-block is bound by its stores: they go out marked
     * evict-first where that was measured to help (EPI_EVICT_FIRST). */
    const bool ef = EPI_EVICT_FIRST && T.kb1 - T.kb0 <= 1;
    if (D_CHUNKS > 0 && P.wk % 64 == 0) {
        /* a row's BN columns in one box (the rule launch.c encodes
         * tmap_d by): each row's bytes are written together */
        if (lane == 0) kiln_bulk_wait_read<0>();
        __syncwarp();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            if (wrow0 + mi * 64 < P.wn)
                kiln_rowbox_from_frag(stg + mi * D_CHUNKS * 2048, &acc[mi][0], P.wk - T.k0, lane);
        kiln_fence_async_smem();
        __syncwarp();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const int wrow = wrow0 + mi * 64;
            if (wrow >= P.wn) continue;
            unsigned char *rb = stg + mi * D_CHUNKS * 2048;
            if (wrow + 16 <= P.wn) {
                if (lane == 0)
                    kiln_tma_store_3d(kiln_smem_addr(rb), map, 0, T.k0 / 64, grow0 + wrow, ef);
            } else {
                kiln_rowbox_to_global(rb, dg + ((long long)wrow * args.ldd + T.k0) * OSZ,
                                      args.ldd * OSZ, P.wn - wrow, min(BN, P.wk - T.k0) * OSZ, lane);
            }
        }
        if (lane == 0) kiln_bulk_commit();
        __syncwarp();
        return;
    }
    constexpr int QB = BN / OCW;   /* boxes a sub-tile */
    /* no box of this warp runs past N: all go out by the bulk store */
    const bool whole = wrow0 + (MI - 1) * 64 + 16 <= P.wn;
    /* 16-bit boxes: the lane's stmatrix address once for the tile */
    const kiln_u32 stg_lane = kiln_box_lane_addr(kiln_smem_addr(stg), lane);
#pragma unroll
    for (int b0 = 0; b0 < SHARE_BOXES; b0 += EPI_BATCH) {
        /* the last batch's boxes are read (a tile's first batch: the
         * last tile's, long since, under this tile's main loop).
         * Every lane waits: only lane 0 has bulk groups, the others
         * pass at once, and the warp needs no branch. */
        kiln_bulk_wait_read<0>();
        __syncwarp();
#pragma unroll
        for (int b = b0; b < b0 + EPI_BATCH; ++b)
            if (wrow0 + b / QB * 64 < P.wn && T.k0 + b % QB * OCW < P.wk) {
                const float *a = &acc[b / QB][b % QB * (OCW / 2)];
                if constexpr (OSZ == 2)
                    kiln_box16_from_frag_at(stg_lane + (b - b0) * 2048, a);
                else
                    kiln_box_from_frag<OSZ>(stg + (b - b0) * 2048, a, lane);
            }
        kiln_fence_async_smem();
        __syncwarp();
        if (whole) {
            if (lane == 0) {
#pragma unroll
                for (int b = b0; b < b0 + EPI_BATCH; ++b)
                    if (T.k0 + b % QB * OCW < P.wk)
                        kiln_tma_store_2d(kiln_smem_addr(stg + (b - b0) * 2048), map,
                                          T.k0 + b % QB * OCW, grow0 + wrow0 + b / QB * 64, ef);
                kiln_bulk_commit();
            }
            continue;
        }
#pragma unroll
        for (int b = b0; b < b0 + EPI_BATCH; ++b) {
            const int wrow = wrow0 + b / QB * 64, col0 = T.k0 + b % QB * OCW;
            if (wrow >= P.wn || col0 >= P.wk) continue;
            unsigned char *box = stg + (b - b0) * 2048;
            if (wrow + 16 <= P.wn) {
                if (lane == 0) kiln_tma_store_2d(kiln_smem_addr(box), map, col0, grow0 + wrow, ef);
            } else {
                kiln_box_to_global(box, dg + ((long long)wrow * args.ldd + col0) * OSZ,
                                   args.ldd * OSZ, P.wn - wrow, min(OCW, P.wk - col0) * OSZ, lane);
            }
        }
        if (lane == 0) kiln_bulk_commit();
        __syncwarp();   /* the hand-written boxes' reads, before the next batch's writes */
    }
}

/* Discrete dW from registers (P.dregs).  Where a CTA sees few tiles of
 * a group (a group's tiles at most twice the grid), a warp's tiles change
 * group at nearly every tile, and the bulk-store path then re-points its
 * copy of the dW map each time (kiln_dmap_select: a wait for the warp's
 * earlier stores, the copy, the proxy fences).  These epilogues write dW
 * from the accumulators instead: no map, no shared memory.  Same call,
 * every cell checked, 17 shapes (docs/sm90_wgrad.md, forty-second
 * session): overwriting, 0.76-0.96 of the time per kernel in geometric
 * mean over the shapes where the rule holds (decode, irregular,
 * Dirichlet, Qwen3-Next), accumulating 0.96-0.99.  Where it does not,
 * and for dense dW at all sizes, the bulk stores stay: from registers
 * dense overwriting took 1.08-1.17x their time (decode up to 1.6x), the
 * discrete kernels 1.02-1.09x on the large shapes.  Since the forty-third
 * session's cheaper re-pointing (kiln_tmap_repoint_warp), BIG_STAGED
 * kernels keep the bulk stores on every shape: 0.78-0.99 of the register
 * path's time on 8 such shapes (the 128x256 and 256x128 kernels at 3
 * stages; the same call had the 4-stage ones, which stage a box at a
 * time, at 1.00-1.21 with bulk stores, 128x128 and 128x192 at 0.90-1.18;
 * H200, docs/sm90_wgrad.md, forty-fourth session). */

/* Lane q of a quad holds word q of 4 n8 blocks' rows (columns 2q, 2q+1 of
 * each); after this 4x4 transpose (two xor-shuffle rounds) it holds all 4
 * words of block q, in column order. */
KDEV void kiln_quad_transpose(kiln_u32 (&x)[4], int q)
{
    const bool hi = q & 2, od = q & 1;
    kiln_u32 s0 = hi ? x[0] : x[2], s1 = hi ? x[1] : x[3];
    s0 = __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 = __shfl_xor_sync(0xffffffffu, s1, 2);
    if (hi) { x[0] = s0; x[1] = s1; } else { x[2] = s0; x[3] = s1; }
    s0 = od ? x[0] : x[1];
    s1 = od ? x[2] : x[3];
    s0 = __shfl_xor_sync(0xffffffffu, s0, 1);
    s1 = __shfl_xor_sync(0xffffffffu, s1, 1);
    if (od) { x[0] = s0; x[2] = s1; } else { x[1] = s0; x[3] = s1; }
}

/* Overwriting 16-bit dW from registers: this warp's 16 rows of each m64
 * sub-tile, each lane 8 columns of a row with one 16-byte store after the
 * quad transpose (64 contiguous bytes a row per quad).  Rows past N and
 * 16-byte pieces past K are not written (K % 8 == 0: a piece is wholly
 * inside or outside). */
KDEV void kiln_store_regs(const kiln_kernel_args &args, const kiln_wgrad &P,
                          const kiln_wtile &T, const float (&acc)[MI][ACC_N], char *dg, int wrow0)
{
    const int lane = threadIdx.x & 31, q = lane & 3;
    /* one-k-block tiles: evict-first, as the bulk stores (EPI_EVICT_FIRST) */
    const bool ef = EPI_EVICT_FIRST && T.kb1 - T.kb0 <= 1;
    const kiln_u64 pol = kiln_policy_evict_first();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int wrow = wrow0 + mi * 64;
        if (wrow >= P.wn) continue;   /* warp-uniform: the shuffles need every lane */
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = wrow + (lane >> 2) + 8 * h;
            char *drow = dg + ((long long)row * args.ldd + T.k0) * OSZ;
#pragma unroll
            for (int c = 0; c < BN / 32; ++c) {
                kiln_u32 x[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float *a = &acc[mi][(4 * c + j) * 4 + 2 * h];
                    x[j] = kiln_pack2(a[0], a[1]);
                }
                kiln_quad_transpose(x, q);
                const int col = 32 * c + 8 * q;
                if (row < P.wn && T.k0 + col < P.wk) {
                    if (ef)
                        asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;"
                                     :: "l"(drow + col * OSZ), "r"(x[0]), "r"(x[1]), "r"(x[2]),
                                        "r"(x[3]), "l"(pol) : "memory");
                    else
                        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                                     :: "l"(drow + col * OSZ), "r"(x[0]), "r"(x[1]), "r"(x[2]),
                                        "r"(x[3]) : "memory");
                }
            }
        }
    }
}

/* Accumulating into fp32 dW from registers: lane q of a quad adds its 2
 * sums of each n8 block (columns 2q, 2q + 1) with one red.global.v2, so a
 * quad's adds to a row fill one 32-byte sector; no transpose. */
KDEV void kiln_red_regs(const kiln_kernel_args &args, const kiln_wgrad &P,
                        const kiln_wtile &T, const float (&acc)[MI][ACC_N], char *dg, int wrow0)
{
    const int lane = threadIdx.x & 31, q = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int wrow = wrow0 + mi * 64;
        if (wrow >= P.wn) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = wrow + (lane >> 2) + 8 * h;
            float *drow = (float *)dg + (long long)row * args.ldd + T.k0;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = 8 * j + 2 * q;
                if (row < P.wn && T.k0 + col < P.wk)
                    asm volatile("red.global.v2.f32.add [%0], {%1, %2};"
                                 :: "l"(drow + col), "f"(acc[mi][4 * j + 2 * h]),
                                    "f"(acc[mi][4 * j + 2 * h + 1]) : "memory");
            }
        }
    }
}

KDEV void kiln_consume(const kiln_kernel_args &args, const kiln_wgrad &P, const kiln_smem &m,
                       int cw, const kiln_tmap *tmap_d)
{
    const int ltid = threadIdx.x & 127;
    const int wq = UNIFORM_ITEMS ? kiln_warp_uniform(ltid >> 5) : ltid >> 5;   /* warp within the warpgroup */
    const int lane = threadIdx.x & 31;
    unsigned char *stg = m.staging + (cw * 4 + wq) * STG_WARP_BYTES;
    int stg_buf = 0;   /* accumulate: which of the STG_BUFS boxes kiln_epilogue_tma_red fills next */
    kiln_dmap dm = {-1, 0};
    const int row_off = PINGPONG ? 0 : cw * WG_M;
    float acc[MI][ACC_N];
    kiln_ring r = {0, 0};
    kiln_turn turn = {m.bar_turn, cw};
    int j = 0;
    int gcur = 0;   /* the group of the last item (kiln_find_group) */
    kiln_q q = {0, 0};
    auto after = [&](int t) -> int {   /* the item after t (-1: none) */
        if (!P.ctr) {
            const int u = kiln_next_item(P, t);
            return u < P.items ? u : -1;
        }
        kiln_mbar_wait(kiln_q_full(m, q.i), q.ph);
        const int u = *kiln_q_slot(m, q.i);
        __syncwarp();
        if (lane == 0) kiln_mbar_arrive(kiln_q_empty(m, q.i));
        q.next();
        return u;
    };
    kiln_wtile Tn;   /* DECODE_AHEAD: the next item, decoded */
    int tn = P.ctr ? after(0) : kiln_first_item(P) < P.items ? kiln_first_item(P) : -1;
    if (DECODE_AHEAD && tn >= 0) Tn = kiln_decode(P, m, tn, gcur);
    for (int t = tn; t >= 0; t = tn, ++j) {
        if (!turn.mine(j)) {   /* pingpong: the other warp group's item, its slots only */
            r.skip(kiln_item_kblocks(P, m, t, gcur));
            tn = after(t);
            continue;
        }
        const kiln_wtile T = kiln_warp_uniform_if<UNIFORM_ITEMS>(DECODE_AHEAD ? Tn : kiln_decode(P, m, t, gcur));
        if (!DECODE_AHEAD) tn = after(t);
        auto next = [&]() {
            if (!DECODE_AHEAD) return;
            tn = after(t);
            if (tn >= 0) Tn = kiln_decode(P, m, tn, gcur);
        };
        turn.wait(j);
        /* DBIAS: the item of column tile 0 also sums db (one per n rows) */
        const bool dsum = DBIAS && T.k0 == 0 && (args.dbias || args.dbias_ptrs);
        float dd[MI][4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) dd[mi][0] = dd[mi][1] = dd[mi][2] = dd[mi][3] = 0.f;
        const int wrow0 = T.n0 + row_off + wq * 16;
        const kiln_pf pf = kiln_pf_rows(args, P, T, wrow0, lane, tmap_d);
        auto run = [&](auto under) {
            return DBIAS && dsum ? kiln_mainloop<true>(P, m, r, turn, T, acc, cw, lane, dd, pf, under)
                                 : kiln_mainloop<false>(P, m, r, turn, T, acc, cw, lane, dd, pf, under);
        };
        const bool any = DECODE_AHEAD ? run(next) : run([] {});
        if (DBIAS && dsum) {
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int i = 0; i < 4; ++i) kiln_fence_reg(dd[mi][i]);
            kiln_dbias_write(args, P, T, dd, row_off);
        }
        /* after the main loop: nothing more lives across it */
        char *dg = kiln_group_out(args, P, T.g);
        if (!any) {   /* only in overwrite mode: accumulating, empty groups have no items */
            if (!ACCUMULATE) kiln_store_zeros(args, P, T, dg, row_off);
            continue;
        }
        kiln_fence_acc(acc);
        if (P.dregs) {
            if (ACCUMULATE) kiln_red_regs(args, P, T, acc, dg, wrow0);
            else kiln_store_regs(args, P, T, acc, dg, wrow0);
            continue;
        }
        const kiln_tmap *dmap;
        const int grow0 = kiln_dmap_select(dm, args, P, tmap_d, T.g, cw * 4 + wq, lane, stg, dmap);
        if (ACCUMULATE)
            kiln_epilogue_tma_red(args, P, T, acc, stg, dg, wrow0, stg_buf, dmap, grow0);
        else
            kiln_epilogue_tma_store(args, P, T, acc, stg, dg, wrow0, dmap, grow0);
    }
    /* the last bulk stores must finish reading shared memory before exit */
    if (lane == 0) kiln_bulk_wait<0>();
}

/* ------------------------------------------------------------ kernel */

KILN_SM90_KERNEL
{
    const kiln_smem m = kiln_carve<kiln_wgrad_layout>();
    kiln_wgrad P;
    P.G = args.groups;
    P.cap = kiln_capacity(args);
    P.wn = (int)args.n;
    P.wk = (int)args.k;
    P.tm = ((P.wn + BM - 1) / BM + CM - 1) / CM;
    P.tk = ((P.wk + BN - 1) / BN + CN - 1) / CN;
    P.cta = kiln_cluster_place();
    P.rot = P.tm * P.tk > 0 ? (1 << (31 - __clz(P.tm * P.tk))) - 1 : 0;
    P.raster.set(P.tm, P.tk);
    P.ctr = DYN && args.sched_slot > 0 && args.sched_slot <= KILN_SCHED_SLOTS
                ? kiln_sched_ctr[args.sched_slot - 1] : nullptr;
    P.dregs = DISCRETE && (ACCUMULATE || (OSZ == 2 && !BIG_STAGED)) && P.wk % 8 == 0 &&
              P.tm * P.tk <= 2 * P.cta.ncl;

    if (!kiln_groups_ok(P.G)) return;
    if (threadIdx.x == 0) {
        if (P.ctr)
            for (int i = 0; i < QD; ++i) {
                kiln_mbar_init(kiln_q_full(m, i), 1);
                kiln_mbar_init(kiln_q_empty(m, i), CONSUMERS * 4);
            }
        kiln_init_ring(m, (PINGPONG ? 4 : CONSUMERS * 4) * CS);
        kiln_tma_prefetch_desc(&tmap_a);
        kiln_tma_prefetch_desc(&tmap_b);
        if (!DISCRETE) kiln_tma_prefetch_desc(&tmap_d);
    }
    /* accumulate: an empty group is left untouched (no work items);
     * overwrite: it still gets its tiles, which write zeros */
    kiln_pdl_wait();               /* before the first read of args.sizes */
    kiln_pdl_launch_dependents();
    kiln_fill_ones(m);   /* the schedule's barriers order it before any wgmma */
    P.items = kiln_build_schedule(args, m, P.cap, [&](int gs, int ge) {
        const int nkb = kiln_kblocks(ge - gs);
        return (ACCUMULATE && nkb == 0) ? 0 : P.tm * P.tk * kiln_splits(nkb);
    });
    if (CS > 1) kiln_cluster_sync();   /* peers' barriers are initialised */
    else __syncthreads();
    P.cmask = DISCRETE && !P.dregs && P.tm * P.tk <= 2 * P.cta.ncl &&
              kiln_group_row(P, m, P.G) <= P.G * BK ? WRUN - 1 : 0;
    P.runs = P.cmask ? P.items / ((P.cmask + 1) * P.cta.ncl) * P.cta.ncl : 0;
    P.t0 = P.runs * (P.cmask + 1);

    const int wg = kiln_warpgroup();
    if (wg == 0) {
        kiln_producer_regs();
        if (threadIdx.x == 0) kiln_produce(P, m, &tmap_a, &tmap_b);
    } else {
        kiln_consumer_regs();
        kiln_consume(args, P, m, wg - 1, &tmap_d);
    }
    kiln_cluster_retire();
}
