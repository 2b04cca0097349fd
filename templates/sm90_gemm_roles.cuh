/*
 * sm90_gemm_roles.cuh — sm90_gemm's roles and kernel: per-group weight
 * maps, the producer, the block recipe's scale warp, the consumers (main
 * loops and epilogues) and the entry.  Pasted after sm90_gemm_cut.cuh
 * (templates/sm90.lua).
 */

/* ------------------------------------------------ per-group weight maps */

/* Weights given as G pointers (WPTRS and args.b_ptrs): tmap_b describes one
 * group's [N, K] (launch.c encodes it over a stand-in address), and the
 * producer points a copy of it at group g's weights whenever its tiles move
 * to another group (kiln_tmap_repoint, sm90_common.cuh).
 *
 * The copies live in this module's own slots, WMAP_SLOTS per SM.  A slot is
 * rewritten only WMAP_SLOTS group changes later; every change is followed
 * by at least one k-block, and a stage is acquired only after the loads of
 * the k-block STAGES before it have completed, so the loads that used the
 * slot are done by then (WMAP_SLOTS > STAGES).  %smid is read at every
 * change: if a preempted CTA is resumed on another SM, its later copies
 * follow it.  The producer warp re-pointing through
 * tensormap.cp_fenceproxy instead (kiln_tmap_repoint_warp, which wgrad's
 * overwriting discrete kernels gain by) made pointer calls 0.70-1.00x of
 * contiguous ones against 0.95-1.03x with this thread's fence (H200,
 * docs/sm90_kernel.md, forty-fourth session). */
constexpr int WMAP_SLOTS = STAGES + 2;
__device__ kiln_tmap kiln_wmap_slots[WPTRS ? KILN_SLOT_SMS * WMAP_SLOTS : 1];

struct kiln_wmap {
    const kiln_tmap *map;   /* the map the B loads of the current group use */
    int g;                  /* its group (-1: none yet) */
    int row0;               /* the group's first row in the map */
    int turn;               /* group changes so far (which slot is next) */
};

KDEV kiln_wmap kiln_wmap_init(const kiln_tmap *tmap_b) { return {tmap_b, -1, 0, 0}; }

/* Points w at group g's weights: contiguous weights (one [G*N, K] map):
 * rows g*wn on; pointer-array weights: a slot's copy of tmap_b, at row 0. */
KDEV void kiln_wmap_select(kiln_wmap &w, const kiln_kernel_args &args, const kiln_gemm &P,
                           const kiln_tmap *tmap_b, int g)
{
    if (!WPTRS || !args.b_ptrs) {
        w.row0 = g * P.wn;
        return;
    }
    if (g == w.g) return;
    kiln_tmap *slot = &kiln_wmap_slots[kiln_smid() * WMAP_SLOTS + w.turn % WMAP_SLOTS];
    kiln_tmap_repoint(slot, tmap_b, args.b_ptrs, g);
    w.map = slot;
    w.g = g;
    w.row0 = 0;
    w.turn++;
}

/* ---------------------------------------------------------- producer */

/* One k-block of a tile into ring slot s; B from w (its group's map and
 * first row).  With a cluster, each CTA loads half of the shared operand and
 * multicasts it to both; the rest is its own. */
KDEV void kiln_load_kblock(const kiln_gemm &P, const kiln_tile &T, kiln_u32 sa, kiln_u32 full,
                           int kb, const kiln_tmap *tmap_a, const kiln_wmap &w)
{
    const kiln_tmap *tmap_b = w.map;
    const kiln_u32 sb = sa + A_BYTES;
    if (CN == 2)
        kiln_tma_load_2d_mc(sa + P.cta.crank * (BM / 2) * 128, tmap_a, full, kb * BK,
                            T.row0 + P.cta.crank * (BM / 2), 3);
    else
        kiln_tma_load_2d(sa, tmap_a, full, kb * BK, T.row0);
    if (B_KMAJOR) {
        if (CM == 2)
            kiln_tma_load_2d_mc(sb + P.cta.crank * (BN / 2) * 128, tmap_b, full, kb * BK,
                                w.row0 + T.col0 + P.cta.crank * (BN / 2), 3);
        else
            kiln_tma_load_2d(sb, tmap_b, full, kb * BK, w.row0 + T.col0);
    } else {
        /* dgrad: BN/64 MN-major boxes of {64 output columns, BK rows of W} */
#pragma unroll
        for (int j = 0; j < BN / 64; ++j) {
            if (CM == 2) {
                if ((j & 1) == P.cta.crank)
                    kiln_tma_load_2d_mc(sb + j * BOX_BYTES, tmap_b, full, T.col0 + 64 * j,
                                        w.row0 + kb * BK, 3);
            } else {
                kiln_tma_load_2d(sb + j * BOX_BYTES, tmap_b, full, T.col0 + 64 * j,
                                 w.row0 + kb * BK);
            }
        }
    }
}

KDEV void kiln_produce(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m,
                       const kiln_tmap *tmap_a, const kiln_tmap *tmap_b)
{
    kiln_ring r = {0, 0};
    kiln_wmap w = kiln_wmap_init(tmap_b);
    int u = 0;   /* the unit's index in the walk */
    for (int t = kiln_walk_start(P, m); t < kiln_walk_end(P, m); t += kiln_grid_clusters(), ++u) {
        /* a k-cut cluster's partials of the last unit are in the ring
         * until every peer has read them (kiln_kcut_finish) */
        if (KCUT && u > 0) kiln_mbar_wait<true>(m.bar_turn + 8, (kiln_u32)((u - 1) & 1));
        const kiln_unit U = kiln_unit_of(P, m, t);
        const kiln_tile T = kiln_decode(P, m, U.tile);
        for (int i = 0; i < U.nkb; ++i) {
            const kiln_u32 full = kiln_acquire(m, r);
            /* after the acquire: the slot it may rewrite is then free */
            if (i == 0) kiln_wmap_select(w, args, P, tmap_b, T.g);
            kiln_load_kblock(P, T, m.stage(r.s), full, U.kb0 + i, tmap_a, w);
            kiln_stamp(args, i == 0 ? KILN_TL_FIRST_LOAD : KILN_TL_LAST);
            r.next();
        }
    }
}

/* ------------------------------------------------ block recipe scales */

/* The block recipe's scales come with the ring: beside each slot, SC_STRIDE
 * floats hold the k-block's 1x128 scales of A for the tile's BM rows, then
 * B's 128x128 scales of the tile's SC_CB column blocks.  The producer warp
 * group's second warp (the scale warp) copies them there with cp.async
 * once the slot is free, and each of its lanes arrives on the slot's full
 * barrier when its copies have landed (32 more arrivals); the consumers
 * read theirs after the slot's full wait, with LDS (kiln_slot_factors), and
 * release the slot as before.  The copies hold no register and nothing
 * waits on them but the consumers, so the warp runs ahead like the
 * producer.  DeepGEMM's scales come through shared memory too (its A
 * scales by TMA with each stage); kiln's consumers loaded them from global
 * memory in windows of 4 k-blocks handed out by shuffles, which with their
 * address arithmetic ran about 50 instructions a k-block more per math
 * warp (SASS, fifty-third session, docs/fp8.md). */
KDEV float *kiln_scale_slot(const kiln_smem &m, int s)
{
    return (float *)(m.base + kiln_gemm_layout::OFF_EXTRA) + s * SC_STRIDE;
}

/* Where a lane's scales of tile T come from: lane l copies rows l,
 * l + 32, ... (row: its first), lane c < SC_CB column block c.  A row past
 * the capacity is not copied (its slot keeps what it held) and a column
 * block past N takes the last block's scale: neither is ever stored.  The
 * offsets are 32-bit, which holds every scale a GPU's memory can hold (A's
 * scales take 1/32 of its bytes, B's 1/4096 of theirs): with 64-bit
 * pointers the warp spilled at the producer's 24 registers. */
struct kiln_scale_src {
    int row;
    kiln_u32 a;   /* the current k-block's scale of `row` in args.scale_a */
    kiln_u32 b;   /* the current k-block's scale of the lane's column block in args.scale_b */
};

KDEV kiln_scale_src kiln_scale_src_of(const kiln_kernel_args &args, const kiln_gemm &P,
                                      const kiln_tile &T, int lane)
{
    /* P.nbn worked out again from the arguments, opaquely: kept in a
     * register from the kernel's start, it made ptxas spill another at
     * the producer's 24 registers */
    int n_out = (int)(OP == 0 ? args.n : args.k);
    asm volatile("" : "+r"(n_out));
    const int nbn = (n_out + 127) / 128;
    const kiln_u32 cb = (kiln_u32)min(T.col0 / 128 + lane, nbn - 1);
    return {T.row0 + lane, (kiln_u32)(T.row0 + lane),
            ((kiln_u32)T.g * (kiln_u32)nbn + cb) * (kiln_u32)P.nkb};
}

/* src moved on by kb k-blocks (a piece of a split tile starts there) */
KDEV void kiln_scale_skip(const kiln_kernel_args &args, kiln_scale_src &src, int kb)
{
    src.a += (kiln_u32)kb * (kiln_u32)args.ld_scale_a;
    src.b += (kiln_u32)kb;
}

/* src's k-block's scales into slot s (free: its empty barrier waited for),
 * and this lane's arrival on its full barrier once they land; moves src to
 * the next k-block. */
KDEV void kiln_stage_scales(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m,
                            kiln_scale_src &src, int s, int lane)
{
    const kiln_u32 slot = kiln_smem_addr(kiln_scale_slot(m, s));
#pragma unroll
    for (int j = 0; j < BM / 32; ++j)
        if (src.row + 32 * j < P.cap)
            kiln_cp_async4(slot + (lane + 32 * j) * 4, args.scale_a + src.a + 32 * j);
    if (lane < SC_CB) kiln_cp_async4(slot + (BM + lane) * 4, args.scale_b + src.b);
    kiln_cp_async_arrive(m.full(s));
    src.a += (kiln_u32)args.ld_scale_a;
    src.b++;
}

/* The scale warp: the producer's walk of tiles and k-blocks through the
 * ring, copying each k-block's scales once its slot is free. */
KDEV void kiln_produce_scales(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m,
                              int lane)
{
    kiln_ring r = {0, 0};
    for (int t = kiln_walk_start(P, m); t < kiln_walk_end(P, m); t += kiln_grid_clusters()) {
        /* the piece's fields read where used, not kept (kiln_unit_of's
         * whole unit spilled in the 24 registers with raster group) */
        const bool piece = SPLIT && t >= kiln_split_get(m, SPLIT_FULL);
        kiln_scale_src src =
            kiln_scale_src_of(args, P, kiln_decode(P, m, piece ? kiln_split_get(m, SPLIT_UNIT) : t), lane);
        if (piece) kiln_scale_skip(args, src, kiln_split_get(m, SPLIT_UNIT + 1));
        for (int i = piece ? kiln_split_get(m, SPLIT_UNIT + 2) : P.nkb; i > 0; --i) {
            kiln_mbar_wait(m.empty(r.s), r.ph ^ 1);
            kiln_stage_scales(args, P, m, src, r.s, lane);
            r.next();
        }
    }
}

using kiln_factors = float[MI][2][SC_CB];

/* A float, or two, at a shared address; volatile, so that it stays where
 * the code puts it (after the wgmma it is to run under). */
KDEV float kiln_lds(kiln_u32 addr)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
    return v;
}
KDEV float2 kiln_lds2(kiln_u32 addr)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
    return v;
}

/* The factors sa[row]·sb[column block] of the k-block in slot s for this
 * thread's rows (trow: the first one's place in the tile; then + 8 and
 * each 64-row sub-tile).  After the slot's full wait, before its release. */
KDEV void kiln_slot_factors(const kiln_smem &m, int s, int trow, kiln_factors &f)
{
    /* kiln_scale_slot(m, s) in the shared window */
    const kiln_u32 slot = m.sbase + kiln_gemm_layout::OFF_EXTRA + s * (SC_STRIDE * 4);
    float sb[SC_CB];
#pragma unroll
    for (int c = 0; c < SC_CB; ++c) sb[c] = kiln_lds(slot + (BM + c) * 4);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float sa = kiln_lds(slot + (trow + mi * 64 + 8 * h) * 4);
#pragma unroll
            for (int c = 0; c < SC_CB; ++c) f[mi][h][c] = sa * sb[c];
        }
}

/* ---------------------------------------------------------- consumer */

/* wgmma descriptors of a k-block: A's rows from sa and B's columns from sb
 * (kiln_desc_a/b) for the first 32-byte step along k (16 k16 values, or 32
 * k32 ones), stepped by a 32-bit add to their address (kiln_desc_add):
 * A to 64-row sub-tile mi and step kk, B to column col (kiln_b_col) and
 * step kk. */
KDEV kiln_u64 kiln_desc_a(kiln_u32 sa) { return kiln_desc(sa, 16, 1024); }
KDEV kiln_u64 kiln_desc_b(kiln_u32 sb)
{
    return B_KMAJOR ? kiln_desc(sb, 16, 1024) : kiln_desc(sb, MN_LBO, MN_SBO);
}
/* Bytes from a slot's B to its column col: a 128-byte row a column
 * K-major; MN-major, 64-column boxes of BK = 64 rows of 128 bytes (col a
 * multiple of 64). */
KDEV int kiln_b_col(int col) { return col * 128; }
KDEV kiln_u64 kiln_step_a(kiln_u64 da, int mi, int kk) { return kiln_desc_add(da, mi * 64 * 128 + kk * 32); }
KDEV kiln_u64 kiln_step_b(kiln_u64 db, int col, int kk)
{
    return kiln_desc_add(db, kiln_b_col(col) + (B_KMAJOR ? kk * 32 : kk * 16 * 128));
}

/* One k-block's wgmma into acc, the tile's BN columns of B from sb: KSTEPS
 * steps along k, each MI sub-tiles of 64 rows.  `keep`: add to acc (else
 * the first step overwrites it).  HALF: BN / 2 columns of B from sb, into
 * the low half of acc (kiln_wgmma_half; HALF_TILES). */
template <bool HALF = false, int W>
KDEV void kiln_kblock_mma(float (&acc)[MI][W], kiln_u32 sa, kiln_u32 sb, bool keep)
{
    const kiln_u64 da0 = kiln_desc_a(sa);
    const kiln_u64 db0 = kiln_desc_b(sb);
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        const kiln_u64 db = kiln_step_b(db0, 0, kk);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            if constexpr (HALF && HALF_TILES) kiln_wgmma_half(acc[mi], kiln_step_a(da0, mi, kk), db, keep || kk != 0);
            else kiln_wgmma(acc[mi], kiln_step_a(da0, mi, kk), db, keep || kk != 0);
        }
    }
}

/* swap_ab: one k-block's wgmma as a whole group (fence to commit), with
 * the weights as A and the slot's tokens as B: sw is this warp group's
 * first weight column in the slot (their descriptor is B's: 64 weight
 * columns are 64 rows of 128 bytes K-major, one box MN-major), st the
 * slot's tokens (A's descriptor).  Only the slot's first W tokens, W the
 * smallest width BM, BM - SWAP_STEP, ... holding the tile's `tokens`
 * (m64n<W> into the low W / 2 accumulators; the epilogue stores no row
 * past the group's end, so the columns above W may hold anything).  One
 * group a width: branches inside one group made ptxas serialise the
 * wgmma (kiln_mainloop).  A full tile takes the first test. */
template <int W>
KDEV void kiln_swap_group(float (&acc)[MI][ACC_N], kiln_u32 st, kiln_u32 sw, bool keep, int tokens)
{
    if constexpr (W > SWAP_STEP) {
        if (tokens <= W - SWAP_STEP) {
            kiln_swap_group<W - SWAP_STEP>(acc, st, sw, keep, tokens);
            return;
        }
    }
    const kiln_u64 dw = kiln_desc_b(sw), dt = kiln_desc_a(st);
    kiln_wg_fence();
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const kiln_u64 a = kiln_step_b(dw, 64 * mi, kk), b = kiln_step_a(dt, 0, kk);
            if constexpr (W == BM) kiln_wgmma(acc[mi], a, b, keep || kk != 0);
            else kiln_wgmma_sw<W>(acc[mi], a, b, keep || kk != 0);
        }
    kiln_wg_commit();
}

/* The same for PROMOTE_SPLIT (K-major B), with every descriptor of the
 * k-block worked out beforehand (kiln_split_desc): half h of the tile's
 * columns (kiln_wgmma is emitted for that width too), its first step
 * overwriting acc. */
struct kiln_split_descs {
    kiln_u64 a[MI][KSTEPS];
    kiln_u64 b[2][KSTEPS];
};

KDEV kiln_split_descs kiln_split_desc(kiln_u32 sa, kiln_u32 sb)
{
    kiln_split_descs d;
    const kiln_u64 da0 = kiln_desc_a(sa), db0 = kiln_desc_b(sb);
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) d.a[mi][kk] = kiln_step_a(da0, mi, kk);
#pragma unroll
        for (int h = 0; h < 2; ++h) d.b[h][kk] = kiln_step_b(db0, h * (BN / 2), kk);
    }
    return d;
}

template <int W>
KDEV void kiln_split_mma(float (&acc)[MI][W], const kiln_split_descs &d, int h)
{
    static_assert(B_KMAJOR, "PROMOTE_SPLIT: 8-bit inputs, K-major B");
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) kiln_wgmma(acc[mi], d.a[mi][kk], d.b[h][kk], kk != 0);
}

/* Slot s's shared address, through a shuffle: provably warp-uniform, so
 * that ptxas builds the wgmma descriptors from it in uniform registers.
 * From the ring index alone it built them in vector registers and moved
 * each to the uniform ones (4 R2UR a wgmma, SASS, fifty-fourth session). */
KDEV kiln_u32 kiln_stage_uniform(const kiln_smem &m, int s)
{
    return __shfl_sync(0xffffffffu, m.stage(s), 0);
}

/* With HOLD_BOXES, when `staged` (a tile came before this one): the slot
 * the last epilogue staged in, the one before r.s, released once its
 * stores have read it.  Called after a tile's first wgmma issue, so that
 * the wait runs under them (released before the main loop, or after the
 * second k-block's issue, the kernels took 1.000-1.011 of this time; one
 * round each, H200). */
KDEV void kiln_release_staged(const kiln_smem &m, const kiln_ring &r, bool staged, int lane,
                              kiln_u32 crank)
{
    if (HOLD_BOXES && staged) {
        if (lane == 0) kiln_bulk_wait_read<0>();
        kiln_release<CS>(m, kiln_slot_back(r, 1), lane, crank);
    }
}

/* The main loop of one tile: wgmma over every k-block, one group kept in
 * flight, each slot released once the group after it is issued.  Hands the
 * tensor cores over (pingpong) as soon as the last group is issued, and
 * runs under_last() while that group is in the tensor cores.  half (a half
 * tile, warp-uniform): the slot's first rows against B's columns from
 * b_col on, half the tile wide.  tokens (swap_ab): the tile's rows, which
 * pick the wgmma's width (kiln_swap_group).  Each branch is a whole wgmma
 * group, fence to commit: two copies of the loop, or a commit after the
 * branches merged, made ptxas serialise the wgmma (C7515). */
template <class Under>
KDEV void kiln_mainloop(const kiln_gemm &P, const kiln_smem &m, kiln_ring &r, const kiln_turn &turn,
                        float (&acc)[MI][ACC_N], int nkb, int row_off, bool half, int b_col,
                        int tokens, int lane, bool staged, Under under_last)
{
    int prev = -1;
    for (int kb = 0; kb < nkb; ++kb) {
        kiln_mbar_wait(m.full(r.s), r.ph);
        const kiln_u32 st = kiln_stage_uniform(m, r.s);
        if constexpr (SWAP_AB) {
            /* row_off is the warp group's first weight column, 128 bytes
             * a column K-major and MN-major alike (64 a box) */
            kiln_swap_group<BM>(acc, st, st + A_BYTES + row_off * 128, kb != 0, tokens);
        } else if (HALF_TILES && half) {
            kiln_wg_fence();
            kiln_kblock_mma<true>(acc, st, st + A_BYTES + kiln_b_col(b_col), kb != 0);
            kiln_wg_commit();
        } else {
            kiln_wg_fence();
            kiln_kblock_mma(acc, st + row_off * 128, st + A_BYTES, kb != 0);
            kiln_wg_commit();
        }
        if (kb == 0) kiln_release_staged(m, r, staged, lane, P.cta.crank);
        if (prev >= 0) {
            kiln_wg_wait<1>();
            kiln_release<CS>(m, prev, lane, P.cta.crank);
        }
        prev = r.s;
        r.next();
    }
    turn.pass();
    under_last();   /* work that needs no accumulator, under the last k-block's wgmma */
    kiln_wg_wait<0>();
    if (!HOLD_BOXES && prev >= 0) kiln_release<CS>(m, prev, lane, P.cta.crank);
    kiln_fence_acc(acc);
}

/* fp8 with promotion (FP8_PROMOTE): each k-block's products go to a
 * partial set, which is added to acc in fp32 once the block's wgmma are
 * done, so the tensor cores' reduced-precision accumulation spans 128 of k
 * only (as DeepGEMM does).  The block recipe scales each block's sums there
 * by the row's 1x128 scale of A and the 128x128 scale of B.  Two partial
 * sets: k-block kb+1 is issued before kb is promoted, so the tensor cores
 * have work while the promotion runs (with one set, both warp groups
 * drained the tensor pipe together: 12-20% slower on an H200). */
KDEV void kiln_mainloop_promote(const kiln_gemm &P, const kiln_smem &m, kiln_ring &r,
                                const kiln_turn &turn, float (&acc)[MI][ACC_N], int nkb,
                                int row_off, int trow, int lane)
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < ACC_N; ++i) acc[mi][i] = 0.0f;
    /* k-block kb into p: its slot's wgmma, committed as one group */
    auto issue = [&](float (&p)[MI][ACC_N], int kb) {
        kiln_mbar_wait(m.full(r.s), r.ph);
        const kiln_u32 st = kiln_stage_uniform(m, r.s);
        kiln_wg_fence();
        kiln_kblock_mma(p, st + row_off * 128, st + A_BYTES, false);
        kiln_wg_commit();
        if (kb + 1 == nkb) turn.pass();
        r.next();
    };
    /* The block recipe's factors of the k-block in slot s (waited for,
     * not yet released): per row half and 128 columns */
    using factors = kiln_factors;
    auto scales = [&](int s, factors &f) {
        if (FP8_RECIPE == 3) kiln_slot_factors(m, s, trow, f);
    };
    /* acc[.][I0 + i] += scaled p[.][i], p's W columns from acc's I0 on */
    auto add = [&](auto &p, int i0, const factors &f) {
        constexpr int W = sizeof(p[0]) / sizeof(float);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int i = 0; i < W; ++i) {
                if (FP8_RECIPE == 3) {
                    /* (i0+i)/4 is the 8-column group, (i/2)&1 the row half */
                    const int c = SC_CB > 1 && (i0 + i) / 4 >= 16 ? SC_CB - 1 : 0;
                    acc[mi][i0 + i] = fmaf(p[mi][i], f[mi][(i >> 1) & 1][c], acc[mi][i0 + i]);
                } else {
                    acc[mi][i0 + i] += p[mi][i];
                }
            }
    };
    /* acc += a k-block's partial sums in p, scaled by f */
    auto promote = [&](float (&p)[MI][ACC_N], const factors &f) {
        kiln_fence_acc(p);
        add(p, 0, f);
    };
    if constexpr (PROMOTE_SPLIT) {
        /* 128 sums a thread leave room for one product set half a tile
         * wide: each k-block's two halves are issued, waited for and
         * promoted in turn, while the other warp group's wgmma keep the
         * tensor cores busy (DeepGEMM's single product set).  A k-block's
         * factors are read after its first half's wgmma are issued, so
         * that the issue waits on nothing but the slot (with the factors
         * shuffled before them, the kernels ran 9-14% slower: H200, same
         * call, docs/fp8.md).
         *
         * Every descriptor of a k-block is worked out before its slot's
         * wait, from the slot's address taken at the end of the k-block
         * before, so that the wgmma issue back to back once the slot is
         * full: worked out after the wait, from the address shuffled
         * there, a chain of uniform instructions stood between the wait
         * and each wgmma (its SHFL, R2UR and descriptor arithmetic, then
         * one descriptor register quad rewritten for each wgmma).  H200,
         * each form's speed over DeepGEMM's in alternating processes of
         * one call (docs/fp8.md): 1.033 and 1.030 times the form
         * before's in geometric mean over 20 and 28 cells (0.961-1.068 a
         * cell). */
        float ph[MI][ACC_N / 2];
        kiln_u32 st = kiln_stage_uniform(m, r.s);
        for (int kb = 0; kb < nkb; ++kb) {
            const kiln_split_descs d = kiln_split_desc(st + row_off * 128, st + A_BYTES);
            kiln_mbar_wait(m.full(r.s), r.ph);
            factors f;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                kiln_wg_fence();
                kiln_split_mma(ph, d, h);
                kiln_wg_commit();
                if (h == 0) scales(r.s, f);   /* under the first half's wgmma */
                kiln_wg_wait<0>();
                if (h == 1) kiln_release<CS>(m, r.s, lane, P.cta.crank);
                kiln_fence_acc(ph);
                add(ph, h * (ACC_N / 2), f);
            }
            if (kb + 1 == nkb) turn.pass();
            r.next();
            st = kiln_stage_uniform(m, r.s);
        }
    } else {
        float pa[MI][ACC_N], pb[MI][ACC_N];
        /* pa holds the even k-blocks, pb the odd ones; `held` is the slot of
         * the k-block promoted next, released once its wgmma are done.  The
         * loop runs while both of its k-blocks exist, so that every pass starts
         * with only pa in flight (ptxas serialises the wgmma otherwise). */
        int held = r.s, next;
        factors fa, fb;   /* the factors of pa's and pb's k-blocks, read before
                             the next wait so that their latency hides behind it */
        issue(pa, 0);
        int kb = 0;
        for (; kb + 2 < nkb; kb += 2) {
            scales(held, fa);
            next = r.s;
            issue(pb, kb + 1);
            kiln_wg_wait<1>();
            kiln_release<CS>(m, held, lane, P.cta.crank);
            promote(pa, fa);
            held = next;
            scales(held, fb);
            next = r.s;
            issue(pa, kb + 2);
            kiln_wg_wait<1>();
            kiln_release<CS>(m, held, lane, P.cta.crank);
            promote(pb, fb);
            held = next;
        }
        scales(held, fa);
        if (kb + 1 < nkb) {
            next = r.s;
            issue(pb, kb + 1);
            scales(next, fb);
            kiln_wg_wait<1>();
            kiln_release<CS>(m, held, lane, P.cta.crank);
            promote(pa, fa);
            kiln_wg_wait<0>();
            kiln_release<CS>(m, next, lane, P.cta.crank);
            promote(pb, fb);
        } else {
            kiln_wg_wait<0>();
            kiln_release<CS>(m, held, lane, P.cta.crank);
            promote(pa, fa);
        }
    }
}

/* The per-row terms of the epilogue for row wrow0 + 64·mi + 8·h + lane/4
 * of this warp's share: the product's factor rmul (α_g, s[r], and the fp8
 * row recipe's scale_a[r]) and the bias's bmul (s_bias[r]).  Loaded once
 * per tile, before any store; rows past the group's end read the last
 * valid row's terms (never stored). */
KDEV void kiln_row_terms(const kiln_kernel_args &args, const kiln_tile &T, int wrow0, int lane,
                         float (&rmul)[MI][2], float (&bmul)[MI][2])
{
    float alpha = args.alpha;
    if (EPI_ALPHA_PER_GROUP && args.alpha_ptr) alpha = args.alpha_ptr[T.g];
    /* fp8 dequantization of the product (kiln.h, kiln_fp8): the tensor
     * recipe's two scales fold into α; the row recipe's are per row and
     * column; the block recipe's were applied in the main loop. */
    if (FP8_RECIPE == 1) alpha *= args.scale_a[0] * args.scale_b[T.g];
    const float *rs = EPI_ROW_SCALE ? args.row_scale : (const float *)0;
    const bool scale_bias = (EPI_SCALE_BIAS || args.scale_bias) && rs;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = min(wrow0 + mi * 64 + (lane >> 2) + 8 * h, T.row_end - 1);
            rmul[mi][h] = alpha;
            bmul[mi][h] = 1.0f;
            if (wrow0 + mi * 64 >= T.row_end) continue;
            if (rs) {
                const float v = rs[r];
                rmul[mi][h] *= v;
                if (scale_bias) bmul[mi][h] = v;
            }
            if (FP8_RECIPE == 2) rmul[mi][h] *= args.scale_a[r];
        }
}

/* D[r,n] = s[r]·α_g·acc + s_bias[r]·bias[g,n] + β·C[r,n]; each term compiled
 * in from the spec and skipped at run time when its pointer is null.  The
 * fp8 row recipe's row terms and column scales are loaded before the first
 * store: loaded beside each store they waited one after another behind the
 * stores before them (which, as far as the compiler knows, may write
 * them), and with short reductions that chain made the epilogue as long as
 * the other warp group's main loop (ncu, fourteenth session).  The other
 * kernels' row terms stay beside the stores (kiln_row_terms' formula, per
 * row): loaded early they took 0.90 to 1.02 of the time, fprop at long K
 * 1-2% slower (the bf16 `_epilogue` defaults, same call, docs/fp8.md); so
 * does the bias (early: 1.00 to 1.08). */
KDEV void kiln_epilogue(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_tile &T,
                        const float (&acc)[MI][ACC_N], float *stg, int wrow0)
{
    const int lane = threadIdx.x & 31;
    float rmul[MI][2], bmul[MI][2];   /* fp8 row recipe only */
    /* fp8 row recipe: this lane's 8 columns of each 32-column step, held
     * from the first store; a 128x192 pingpong tile's 192 accumulators
     * leave no room for its 48 (1.6 KB spilled), so it loads each piece's
     * beside the piece (CSC_BESIDE). */
    constexpr bool CSC_BESIDE = FP8_RECIPE == 2 && MI * ACC_N > 128;
    float4 csc[FP8_RECIPE == 2 && !CSC_BESIDE ? BN / 32 : 1][2];
    const float *fsb = FP8_RECIPE == 2 ? args.scale_b + (long long)T.g * P.n_out : (const float *)0;
    if (FP8_RECIPE == 2) {
        kiln_row_terms(args, T, wrow0, lane, rmul, bmul);
#pragma unroll
        for (int q = 0; q < (CSC_BESIDE ? 0 : BN / 32); ++q) {
            /* n_out is a multiple of 8: a clamped run is in bounds (and unused) */
            const int c = min(T.col0 + 32 * q + 8 * (lane & 3), P.n_out - 8);
            csc[q][0] = *(const float4 *)(fsb + c);
            csc[q][1] = *(const float4 *)(fsb + c + 4);
        }
    }
    float alpha = args.alpha;
    if (EPI_ALPHA_PER_GROUP && args.alpha_ptr) alpha = args.alpha_ptr[T.g];
    if (FP8_RECIPE == 1) alpha *= args.scale_a[0] * args.scale_b[T.g];
    const float *rs = EPI_ROW_SCALE ? args.row_scale : (const float *)0;
    const bool scale_bias = (EPI_SCALE_BIAS || args.scale_bias) && rs;
    const bool use_bias = EPI_BIAS && args.bias;
    const bool use_c = EPI_BETA && args.c && args.beta != 0.0f;
    kiln_store_acc(stg, acc, wrow0, T.col0, T.row_end, P.n_out,
                   [&](int grow, int gcol, float *v, int mi, int q, int it) {
        float sacc = alpha;
        float sb = 1.0f;
        if (FP8_RECIPE == 2) {
            sacc = rmul[mi][it];
            sb = bmul[mi][it];
            float4 s0, s1;
            if (CSC_BESIDE) {
                /* a piece in bounds (emit's contract) with n_out a
                 * multiple of 8: its 8 scales are too, no clamp; read
                 * through the non-coherent path, which the stores before
                 * it do not order.  The column from q and the lane, not
                 * gcol: from gcol ptxas kept an address a piece (spilled) */
                const float *cp = fsb + T.col0 + 32 * q + 8 * (lane & 3);
                s0 = __ldg((const float4 *)cp);
                s1 = __ldg((const float4 *)(cp + 4));
            } else {
                s0 = csc[q][0];
                s1 = csc[q][1];
            }
            v[0] *= sacc * s0.x; v[1] *= sacc * s0.y; v[2] *= sacc * s0.z; v[3] *= sacc * s0.w;
            v[4] *= sacc * s1.x; v[5] *= sacc * s1.y; v[6] *= sacc * s1.z; v[7] *= sacc * s1.w;
        } else {
            if (rs) {
                float rsv = rs[grow];
                sacc *= rsv;
                if (scale_bias) sb = rsv;
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] *= sacc;
        }
        if (use_bias) {
            float b[8];
            kiln_load8((const char *)args.bias + ((long long)T.g * args.ld_bias + gcol) * OSZ, b);
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] += sb * b[e];
        }
        if (use_c) {
            float cv[8];
            kiln_load8((const char *)args.c + ((long long)grow * args.ldc + gcol) * OSZ, cv);
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] += args.beta * cv[e];
        }
        kiln_store8((char *)args.d + ((long long)grow * args.ldd + gcol) * OSZ, v);
    });
}

/* v = the two output-typed values at p (4- or 8-byte aligned), as fp32 */
KDEV float2 kiln_load2(const void *p)
{
    if (OUT_T == 2) return *(const float2 *)p;
    const kiln_u32 w = *(const kiln_u32 *)p;
    const unsigned short lo = (unsigned short)(w & 0xFFFF), hi = (unsigned short)(w >> 16);
    return OUT_T == 1 ? make_float2(kiln_f16_to_f32(lo), kiln_f16_to_f32(hi))
                      : make_float2(kiln_bf16_to_f32(lo), kiln_bf16_to_f32(hi));
}

/* The swap_ab epilogue: the same D = s[r]·α_g·acc + s_bias[r]·bias[g,n] +
 * β·C[r,n], from fragments that hold the tile transposed.  Lane l of the
 * warp holds weight columns wcol0 + l/4 (+ 8) of each m64 sub-tile and
 * tokens 8j + 2(l%4) + {0,1}; it trades one value with lane l ^ 4 (the
 * next or previous column, same tokens), so that each lane stores a pair
 * of adjacent columns of one token: even l/4 token +0, odd +1.  Each warp
 * store then writes 8 tokens' 16 contiguous bytes (bf16).  Stored straight
 * from the registers: in the calls swap_ab is for (groups of a few hundred
 * tokens against whole experts' weights) the output is a few percent of
 * the bytes. */
KDEV void kiln_epilogue_swap(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_tile &T,
                             const float (&acc)[MI][ACC_N], int wcol0)
{
    const int lane = threadIdx.x & 31;
    const int odd = (lane >> 2) & 1;
    float alpha = args.alpha;
    if (EPI_ALPHA_PER_GROUP && args.alpha_ptr) alpha = args.alpha_ptr[T.g];
    const float *rs = EPI_ROW_SCALE ? args.row_scale : (const float *)0;
    const bool scale_bias = (EPI_SCALE_BIAS || args.scale_bias) && rs;
    const bool use_bias = EPI_BIAS && args.bias;
    const bool use_c = EPI_BETA && args.c && args.beta != 0.0f;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            /* this lane's pair of columns: even lanes' own and the next */
            const int col = T.col0 + wcol0 + mi * 64 + (lane >> 2) + 8 * h - odd;
            float2 bv = make_float2(0.0f, 0.0f);
            if (use_bias && col < P.n_out)
                bv = kiln_load2((const char *)args.bias + ((long long)T.g * args.ld_bias + col) * OSZ);
#pragma unroll
            for (int j = 0; j < ACC_N / 4; ++j) {
                const float a0 = acc[mi][4 * j + 2 * h], a1 = acc[mi][4 * j + 2 * h + 1];
                const float got = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 4);
                const int row = T.row0 + 8 * j + 2 * (lane & 3) + odd;
                if (row >= T.row_end || col >= P.n_out) continue;
                float v0 = odd ? got : a0, v1 = odd ? a1 : got;
                float sacc = alpha, sb = 1.0f;
                if (rs) {
                    const float rsv = rs[row];
                    sacc *= rsv;
                    if (scale_bias) sb = rsv;
                }
                v0 = fmaf(v0, sacc, sb * bv.x);
                v1 = fmaf(v1, sacc, sb * bv.y);
                char *d = (char *)args.d + ((long long)row * args.ldd + col) * OSZ;
                if (use_c) {
                    const float2 cv = kiln_load2((const char *)args.c + ((long long)row * args.ldc + col) * OSZ);
                    v0 = fmaf(args.beta, cv.x, v0);
                    v1 = fmaf(args.beta, cv.y, v1);
                }
                if (OUT_T == 2) *(float2 *)d = make_float2(v0, v1);
                else *(kiln_u32 *)d = kiln_pack2(v0, v1);
            }
        }
}

/* The EPI_TMA epilogue (cooperative kernels without β·C): the same
 * D = s[r]·α_g·acc + s_bias[r]·bias[g,n], applied to the accumulator
 * fragments in registers (lane l holds rows l/4 and l/4 + 8 of its warp's
 * 16, columns 8j + 2(l%4) + {0,1}), converted into 128-byte-swizzled boxes
 * of 16 rows x OCW columns (kiln_box_from_frag) and written by one bulk
 * tensor store each through tmap_d, which clips columns at n_out and rows
 * at capacity.  Nothing waits for the stores but the next write of a box:
 * the boxes go out in batches of EPI_BOXES (the warp's STG_BUFS, then
 * HOLD_BOXES in `held`, its part of the ring slot kept from the main loop),
 * each batch after the previous one's reads of shared memory, so with a
 * whole share in one batch a tile waits only on the last tile's stores,
 * which ran under this tile's main loop.  A box whose rows run past the
 * group's end would overwrite the next group's first rows: its valid rows
 * go out by hand (kiln_box_to_global).  The cooperative schedule's two
 * warp groups both stand in their epilogue while the tensor cores idle, so
 * that is where shortening it pays; pingpong hides it already. */
/* The EPI_TMA epilogue's loaded terms: the row terms (kiln_row_terms)
 * and, for the fp8 row recipe, one column scale of the tile a consumer
 * thread (cs), staged for all in shared memory (kiln_terms_ready).  Each
 * lane held its 32 column-scale pairs in registers before, each loaded
 * from an address clamped on its own: 280 of the 890 instructions a warp
 * ran in the 128x256 kernel's epilogue (ncu, H200, sixty-seventh session;
 * now 666 in all, the kernel 3.5% fewer cycles), and too many registers
 * to load under the last k-block in kernels that split a last wave (212
 * to 444 bytes spilled there).  TERMS_UNDER_LAST kernels load them while
 * the tile's last k-block is in the tensor cores (kiln_mainloop's
 * under_last): the cooperative warp groups stand in their epilogue
 * together while the tensor cores idle, and there they waited for these
 * loads (fp8 row-wise 128x256 in 2x1 clusters, one process: 0.96-0.99 of
 * the time on four long layers; sixty-fourth session, docs/sm90_kernel.md).
 * A piece of a split tile loads them after the pieces' sum, not across
 * it; promotion (its own loop) after its main loop. */
constexpr bool TERMS_UNDER_LAST = EPI_TMA && !FP8_PROMOTE;
struct kiln_tma_terms {
    float rmul[MI][2], bmul[MI][2];
    float cs;
};

KDEV void kiln_tma_terms_load(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_tile &T,
                              int wrow0, int lane, kiln_tma_terms &e)
{
    kiln_row_terms(args, T, wrow0, lane, e.rmul, e.bmul);
    const int ct = threadIdx.x - 128;   /* the consumer thread */
    if (CSC_SMEM && ct < BN)
        e.cs = args.scale_b[(long long)T.g * P.n_out + min(T.col0 + ct, P.n_out - 1)];
}

/* The tile's column scales in buffer buf of the staged pair */
KDEV kiln_u32 kiln_csc_at(const kiln_smem &m, int buf)
{
    return m.sbase + kiln_gemm_layout::OFF_EXTRA + SCALE_BYTES + buf * BN * 4;
}

/* The epilogue's terms made ready: loaded (when not under the last
 * k-block), the column scales staged in buffer buf (the tile's parity:
 * the next tile's are written before every consumer has read these), and
 * the consumers met, which also keeps the held ring slot (HOLD_BOXES)
 * unwritten until both warp groups' wgmma have read it. */
KDEV void kiln_terms_ready(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_tile &T,
                           const kiln_smem &m, int wrow0, int lane, kiln_tma_terms &e, int buf,
                           bool load)
{
    if (EPI_TMA && load) kiln_tma_terms_load(args, P, T, wrow0, lane, e);
    const int ct = threadIdx.x - 128;
    if (CSC_SMEM && ct < BN)
        asm volatile("st.shared.f32 [%0], %1;" :: "r"(kiln_csc_at(m, buf) + ct * 4), "f"(e.cs) : "memory");
    if (CSC_SMEM || HOLD_BOXES) kiln_named_sync(1, CONSUMERS * 128);
}

/* half: a half tile's, the warp group's columns [cb, cb + BN / 2) of
 * the tile from the low half of acc (kiln_consume).  bands: bit q stores
 * the boxes of columns [q * OCW, (q + 1) * OCW) of the share (a split
 * tile's parts, kiln_split_finish). */
KDEV void kiln_epilogue_tma(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_tile &T,
                            const float (&acc)[MI][ACC_N], unsigned char *stg,
                            unsigned char *held, int wrow0, const kiln_tmap *tmap_d,
                            const kiln_tma_terms &e, kiln_u32 csc, bool half, int cb,
                            unsigned bands)
{
    const int lane = threadIdx.x & 31;
    const bool use_bias = EPI_BIAS && args.bias;
    const char *bias = use_bias ? (const char *)args.bias + (long long)T.g * args.ld_bias * OSZ
                                : (const char *)0;
    csc += 8 * (lane & 3) + 4 * cb;   /* this lane's column pair in each 8-column step */
    /* box b of the warp's share: its first row and column; false when it
     * holds no output (past the group's rows or n_out, or a half tile's
     * high half of acc) */
    auto place = [&](int b, int &wrow, int &col0) {
        wrow = wrow0 + b / (BN / OCW) * 64;
        col0 = T.col0 + cb + b % (BN / OCW) * OCW;
        return wrow < T.row_end && col0 < P.n_out && !(half && b % (BN / OCW) >= BN / OCW / 2) &&
               (bands >> (b % (BN / OCW)) & 1);
    };
    /* the i-th box of a batch: the warp's own staging, then the held slot's */
    auto box_at = [&](int i) { return i < STG_BUFS ? stg + i * 2048 : held + (i - STG_BUFS) * 2048; };
#pragma unroll
    for (int b0 = 0; b0 < SHARE_BOXES; b0 += EPI_BOXES) {
        if (lane == 0) kiln_bulk_wait_read<0>();   /* the last batch's boxes are read */
        __syncwarp();
#pragma unroll
        for (int b = b0; b < b0 + EPI_BOXES && b < SHARE_BOXES; ++b) {
            int wrow, col0;
            if (!place(b, wrow, col0)) continue;
            const int mi = b / (BN / OCW), q = b % (BN / OCW);
            float t[OCW / 2];
#pragma unroll
            for (int j = 0; j < OCW / 8; ++j) {
                /* columns c, c+1 (n_out is a multiple of 8: the pair is in
                 * bounds once clamped) */
                const int c = min(col0 + 8 * j + 2 * (lane & 3), P.n_out - 2);
                float2 cm = make_float2(1.0f, 1.0f), bv = make_float2(0.0f, 0.0f);
                if (CSC_SMEM) cm = kiln_lds2(csc + (q * OCW + 8 * j) * 4);
                if (use_bias) bv = kiln_load2(bias + (long long)c * OSZ);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float *a = &acc[mi][q * (OCW / 2) + 4 * j + 2 * h];
                    t[4 * j + 2 * h] = fmaf(a[0], e.rmul[mi][h] * cm.x, e.bmul[mi][h] * bv.x);
                    t[4 * j + 2 * h + 1] = fmaf(a[1], e.rmul[mi][h] * cm.y, e.bmul[mi][h] * bv.y);
                }
            }
            kiln_box_from_frag<OSZ>(box_at(b - b0), t, lane);
        }
        kiln_fence_async_smem();
        __syncwarp();
#pragma unroll
        for (int b = b0; b < b0 + EPI_BOXES && b < SHARE_BOXES; ++b) {
            int wrow, col0;
            if (!place(b, wrow, col0)) continue;
            const unsigned char *box = box_at(b - b0);
            if (wrow + 16 <= T.row_end) {
                if (lane == 0) kiln_tma_store_2d(kiln_smem_addr(box), tmap_d, col0, wrow);
            } else {
                kiln_box_to_global(box, (char *)args.d + ((long long)wrow * args.ldd + col0) * OSZ,
                                   args.ldd * OSZ, T.row_end - wrow, min(OCW, P.n_out - col0) * OSZ,
                                   lane);
            }
        }
        if (lane == 0) kiln_bulk_commit();
        __syncwarp();   /* the hand-written boxes' reads, before the boxes are written again */
    }
}

/* The consumers' work item and warp index as warp-uniform values
 * (kiln_warp_uniform) in the cooperative kernels: their bulk stores then
 * take their coordinates without a loop over the lanes, and a half tile's
 * branch (T.half) is the warp's.  Measured neutral on fprop and dgrad
 * (0.998-1.005 of the time over 10 shapes); not in pingpong kernels,
 * whose 128x192 tiles spilled 48-96 bytes with it (H200,
 * docs/sm90_kernel.md, seventy-eighth session). */
constexpr bool UNIFORM_ITEMS = !PINGPONG;
static_assert(!HALF_TILES || UNIFORM_ITEMS, "a half tile's branch must be the warp's");

KDEV void kiln_consume(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m, int cw,
                       const kiln_tmap *tmap_d)
{
    const int ltid = threadIdx.x & 127;
    const int wq = UNIFORM_ITEMS ? kiln_warp_uniform(ltid >> 5) : ltid >> 5;   /* warp within the warpgroup */
    const int lane = threadIdx.x & 31;
    unsigned char *stg = m.staging + (cw * 4 + wq) * STG_WARP_BYTES;
    const int row_off = PINGPONG ? 0 : cw * WG_M;
    float acc[MI][ACC_N];
    kiln_ring r = {0, 0};
    kiln_turn turn = {m.bar_turn, cw};
    int j = 0;
    for (int t = kiln_walk_start(P, m); t < kiln_walk_end(P, m); t += kiln_grid_clusters(), ++j) {
        /* the piece's tile and k-blocks from shared memory, and again
         * after the main loop (kiln_split_finish): held across it, they
         * were registers more than the consumers' 232 */
        const bool piece = KCUT || (SPLIT && t >= kiln_split_get(m, SPLIT_FULL));
        if (!turn.mine(j)) {
            r.skip(P.nkb);   /* pingpong: never split */
            continue;
        }
        const kiln_tile T =
            kiln_warp_uniform_if<UNIFORM_ITEMS>(kiln_decode(P, m, SPLIT && piece ? kiln_split_get(m, SPLIT_UNIT) : t));
        turn.wait(j);
        /* a half tile: both warp groups on the first BM / 2 rows, warp
         * group cw on the columns from cb (HALF_TILES) */
        const bool half = HALF_TILES && T.half;
        const int cb = half ? cw * (BN / 2) : 0;
        const int wrow0 = T.row0 + (half ? 0 : row_off) + wq * 16;
        /* a tile before this one left its epilogue's slot held */
        const bool staged = j != 0;
        /* the block recipe: the first of this thread's rows in the tile */
        const int trow = row_off + wq * 16 + (lane >> 2);
        /* the piece's k-blocks, or the whole tile's */
        const int nkb = KCUT ? kiln_unit_of(P, m, t).nkb : piece ? kiln_split_get(m, SPLIT_UNIT + 2) : P.nkb;
        kiln_tma_terms e;
        auto terms = [&] { if (TERMS_UNDER_LAST && !piece) kiln_tma_terms_load(args, P, T, wrow0, lane, e); };
#ifdef KILN_TIMELINE
        /* waiting twice on a phase returns at once the second time */
        if (j == 0 && nkb > 0) {
            kiln_mbar_wait(m.full(r.s), r.ph);
            kiln_stamp(args, KILN_TL_FIRST_FULL);
        }
#endif
        if (FP8_PROMOTE) kiln_mainloop_promote(P, m, r, turn, acc, nkb, row_off, trow, lane);
        else kiln_mainloop(P, m, r, turn, acc, nkb, row_off, half, cb, min(BM, T.row_end - T.row0), lane, staged,
                           terms);
        kiln_stamp(args, KILN_TL_MAIN_END);
        /* a piece of a split tile: stores the bands it summed, if any
         * (kiln_split_finish), its terms loaded after the sum (not held
         * across it) */
        int bands = -1;   /* all */
        if (!piece) {
            kiln_terms_ready(args, P, T, m, wrow0, lane, e, j & 1, !TERMS_UNDER_LAST);
        } else {
            bands = KCUT ? kiln_kcut_finish(args, m, acc, cw, half, nkb == 0, j, P.cta.crank)
                         : kiln_split_finish(args, m, r, acc, cw, half);
            kiln_stamp(args, KILN_TL_SUMMED);
            if (bands < 0) continue;
            kiln_terms_ready(args, P, T, m, wrow0, lane, e, j & 1, true);
        }
        /* `held` is this warp's part of the last k-block's slot (HOLD_BOXES)
         * as a generic pointer, its shared address taken relative to stg's
         * (the form measured: m.base plus offsets compiles to other code,
         * not run on a GPU) */
        unsigned char *held =
            HOLD_BOXES ? stg + (int)(m.stage(kiln_slot_back(r, 1)) + (cw * 4 + wq) * HOLD_STRIDE -
                                     kiln_smem_addr(stg))
                       : stg;
        if (SWAP_AB)
            kiln_epilogue_swap(args, P, T, acc, row_off + wq * 16);
        else if (EPI_TMA)
            kiln_epilogue_tma(args, P, T, acc, stg, held, wrow0, tmap_d, e, kiln_csc_at(m, j & 1), half, cb,
                              (unsigned)bands);
        else kiln_epilogue(args, P, T, acc, (float *)stg, wrow0);
    }
    /* shared memory must outlive the last stores' reads of it */
    if (EPI_TMA && lane == 0) kiln_bulk_wait<0>();
    kiln_stamp(args, KILN_TL_EXIT);
}

/* ------------------------------------------------------------ kernel */

/* Clusters: set at launch (kiln_cluster_place). */
KILN_SM90_KERNEL
{
    const kiln_smem m = kiln_carve<kiln_gemm_layout>();
    kiln_gemm P;
    P.G = args.groups;
    P.cap = kiln_capacity(args);
    P.n_out = (int)(OP == 0 ? args.n : args.k);
    const int k_red = (int)(OP == 0 ? args.k : args.n);
    P.wn = B_KMAJOR ? P.n_out : (int)args.n;
    P.nbn = (P.n_out + 127) / 128;
    P.tn = ((P.n_out + BN - 1) / BN + CN - 1) / CN;
    P.cta = kiln_cluster_place();
    P.nkb = (k_red + BK - 1) / BK;

    if (!kiln_groups_ok(P.G)) return;
    kiln_tl_enter(args);
    if (threadIdx.x == 0) {
        /* the block recipe's full barriers also wait for the scale warp's lanes */
        /* k-cut clusters: the turn's pair is the partials' handover (kiln_kcut_finish) */
        if (KCUT) kiln_mbar_init(m.bar_turn + 16, 1);   /* split slots 20-21: unused by k-cut kernels */
        kiln_init_ring(m, (PINGPONG ? 4 : CONSUMERS * 4) * CS, FP8_RECIPE == 3 ? 1 + 32 : 1, KCUT ? KC : 128);
        kiln_tma_prefetch_desc(&tmap_a);
        kiln_tma_prefetch_desc(&tmap_b);
        if (EPI_TMA) kiln_tma_prefetch_desc(&tmap_d);
    }
    kiln_pdl_wait();               /* before the first read of args.sizes */
    kiln_pdl_launch_dependents();
    P.items = kiln_build_schedule(args, m, P.cap, [&](int gs, int ge) {
        return (((ge - gs + BM - 1) / BM + CM - 1) / CM) * P.tn;
    });
    kiln_split_plan(args, P, m);
    if (CTAS > 1) kiln_cluster_sync();   /* peers' barriers are initialised */
    else __syncthreads();
    kiln_stamp(args, KILN_TL_SETUP);

    const int wg = kiln_warpgroup();
    if (wg == 0) {
        kiln_producer_regs();
        if (threadIdx.x == 0) kiln_produce(args, P, m, &tmap_a, &tmap_b);
        else if (FP8_RECIPE == 3 && threadIdx.x / 32 == 1) kiln_produce_scales(args, P, m, threadIdx.x & 31);
    } else {
        kiln_consumer_regs();
        kiln_consume(args, P, m, wg - 1, &tmap_d);
    }
    kiln_cluster_retire();
    if (SPLIT && kiln_split_get(m, SPLIT_ASKED)) {
        __syncthreads();   /* every read of the partials by this CTA is done */
        if (threadIdx.x == 0) kiln_split_retire(args, P, m);
    }
}
