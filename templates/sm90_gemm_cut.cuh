/*
 * sm90_gemm_cut.cuh — a tile's reduction cut across CTAs, for sm90_gemm:
 * the last wave's tiles split through the workspace (SPLIT) and every
 * tile cut across a cluster (KCUT), with the pieces' sums.  Pasted after
 * sm90_gemm.cuh (templates/sm90.lua).
 */

/* ------------------------------------------------ the last wave split */

/* A persistent grid of C CTAs walks T tiles in rounds; when T % C = R is
 * small, the last round runs R tiles while C - R SMs idle (2^k tiles on
 * 132 SMs: 3% of the call).  SPLIT kernels cut each of those R tiles'
 * reductions (R <= C / 2) into S <= min(C / R, KILN_SPLIT_MAX_WAYS) k
 * ranges, one for each of R x S CTAs, S chosen by what it saves
 * (kiln_split_ways in kernel_abi.h, which the runtime's cost model shares).
 * Each piece's CTA writes its fp32 partial tile to its own slot of the
 * context workspace (args.workspace, laid out as kernel_abi.h says) and
 * counts itself in on the tile's counter.  The tile's sum is shared out in
 * parts (kiln_split_finish): each part is summed over the S partials in k
 * order, so its bits do not depend on who sums it, and stored by that CTA.
 * A piece waits for the others only when all the tile's pieces have
 * started, so are resident and will arrive; otherwise it leaves its parts
 * to the last to arrive, so a grid that is not all resident still
 * finishes.  docs/sm90_kernel.md has the measurements.
 *
 * The slots are per CTA index, shared by every launch that uses the
 * workspace: a launch splits only while it holds the workspace's lease,
 * taken by its first CTA at the start (the others read the answer in the
 * launch's state, kiln_split_launch[sched_slot]) and given back by its last
 * CTA to finish.  A launch that finds the lease taken (another stream's)
 * walks the whole tiles as before, as does one without a workspace or a
 * sched slot. */
constexpr bool SPLIT = KC == 1 && !PINGPONG && CS == 1 && !SWAP_AB && BM * BN * 4 <= KILN_SPLIT_TILE_BYTES;
/* The cluster's cut (KCUT, spec k_cluster = KC > 1): every tile's
 * reduction is cut in KC k ranges, one for each CTA of a cluster, which
 * walks the tiles together; the pieces' partials are summed through
 * distributed shared memory (kiln_kcut_finish).  For calls with fewer
 * tiles than SMs and long reductions (decode after expert parallelism:
 * Mixtral's fc2 at EP8 is 16 tiles 14336 deep), where SPLIT's cut through
 * the workspace pays for fences, atomics and round trips to L2 after the
 * main loop, and for the lease before it.  No workspace, deterministic sums
 * (k order).  The runtime launches at most as many clusters as fit. */
constexpr bool KCUT = KC > 1;
static_assert(!KCUT || (!PINGPONG && EPI_TMA && !FP8_PROMOTE), "k-cut clusters: cooperative TMA-store kernels");
/* What moving a partial tile costs, in k-blocks of the main loop (2 for
 * 128x256 tiles). */
constexpr float SPLIT_PART_KB = KILN_SPLIT_PART_KB(BM, BN, BK, IN_ESZ);
/* The parts a split tile's sum is shared out in: a band of OCW columns
 * (the epilogue's boxes, SPLIT_CH float4 of acc a thread and m64 sub-tile)
 * of one consumer warp group's rows; a half tile has half the bands.
 * Without the bulk-store epilogue the tile is one part. */
constexpr int SPLIT_BANDS = BN / OCW;
constexpr int SPLIT_CH = OCW / 8;
constexpr bool SPLIT_SHARED = SPLIT && EPI_TMA && CONSUMERS * SPLIT_BANDS < 32;
static_assert((!SPLIT && KC == 1) || ((ACC_N / 4) % SPLIT_CH == 0 && SPLIT_CH <= 8), "a band is whole float4 of acc");
/* float4 v of a consumer thread's acc: its band of the share, and whether
 * that is in acc's high half (unused by a half tile) */
KDEV int kiln_band(int v) { return v % (ACC_N / 4) / SPLIT_CH; }
KDEV bool kiln_band_high(int v) { return kiln_band(v) >= SPLIT_BANDS / 2; }
/* A cut tile's sum, SPLIT_CH float4 of acc from v0 at a time: piece 0's
 * values (i 0), then each next piece's added, in k order, so the bits do
 * not depend on who sums. */
KDEV void kiln_acc_take(float (&acc)[MI][ACC_N], int v0, int i, const float4 (&x)[SPLIT_CH])
{
#pragma unroll
    for (int c = 0; c < SPLIT_CH; ++c) {
        float *a = &acc[(v0 + c) / (ACC_N / 4)][(v0 + c) % (ACC_N / 4) * 4];
        a[0] = i ? a[0] + x[c].x : x[c].x;
        a[1] = i ? a[1] + x[c].y : x[c].y;
        a[2] = i ? a[2] + x[c].z : x[c].z;
        a[3] = i ? a[3] + x[c].w : x[c].w;
    }
}
/* The finisher's buffers for the pieces' partials (kiln_split_finish): the
 * ring's slots but the one HOLD_BOXES keeps for the epilogue, at most 3,
 * each a chunk of SPLIT_CH float4 a consumer thread.  Fewer than 2: the
 * finisher loads into registers. */
constexpr int SPLIT_FREE_SLOTS = STAGES - (HOLD_BOXES ? 1 : 0);
constexpr int SPLIT_BUFS = SPLIT && STAGE_BYTES >= CONSUMERS * 128 * SPLIT_CH * 16
                               ? (SPLIT_FREE_SLOTS < 3 ? SPLIT_FREE_SLOTS : 3)
                               : 0;
/* The ring slot `back` slots before r.s */
KDEV int kiln_slot_back(const kiln_ring &r, int back) { return (r.s + STAGES - back) % STAGES; }

/* A launch's {state, finished CTAs} by sched slot: state 0 none yet, 3 being
 * decided, 1 split (the lease is held), 2 whole tiles.  Its size tells the
 * runtime the module splits (runtime/launch.c). */
__device__ unsigned kiln_split_launch[SPLIT ? KILN_SCHED_SLOTS : 1][2];

/* What thread 0 decides for the whole CTA, in scratch ints (kiln_smem::
 * scratch; the scan uses 0..15 and 32..47, the pingpong turn 16..19): the
 * walk's units [0, FULL) are whole tiles, [FULL, END) the pieces of the
 * last wave's tiles, each tile WAYS pieces; ASKED: the launch took part in
 * the lease, SAID: it holds it; TAKE: the parts of its tile this CTA sums
 * (kiln_split_finish); UNIT..UNIT+3: this CTA's piece (kiln_unit).  Read
 * from there where they are used: held in registers from the kernel's
 * start, they spilled in the producer's. */
constexpr int SPLIT_SAID = 20, SPLIT_TAKE = 21, SPLIT_FULL = 22, SPLIT_END = 23, SPLIT_WAYS = 24,
              SPLIT_ASKED = 25, SPLIT_UNIT = 26;

/* Scratch int i through its 32-bit shared address (from m.sbase, which
 * every role keeps): through m.scratch, a 64-bit pointer held in every
 * role from the kernel's start, the producer's 24 or 40 registers spilled. */
KDEV kiln_u32 kiln_split_at(const kiln_smem &m, int i)
{
    return m.sbase + kiln_gemm_layout::OFF_SCHED + (2 * (MAXG + 1) + i) * 4;
}
KDEV int kiln_split_get(const kiln_smem &m, int i)
{
    int v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(kiln_split_at(m, i)) : "memory");
    return v;
}
KDEV void kiln_split_set(const kiln_smem &m, int i, int v)
{
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(kiln_split_at(m, i)), "r"(v) : "memory");
}

/* Word `what` (0 arrived, 1 started, 2 claimed) of the last round's tile
 * t (kernel_abi.h's layout) */
KDEV unsigned *kiln_split_word(const kiln_kernel_args &args, int what, int t)
{
    return (unsigned *)((char *)args.workspace + KILN_SPLIT_CTR_OFFSET) + what * KILN_SPLIT_TILES + t;
}

/* Thread 0: this launch's answer (1: split), deciding it if first. */
KDEV unsigned kiln_split_lease(const kiln_kernel_args &args, unsigned *state)
{
    unsigned v = atomicCAS(state, 0u, 3u);
    if (v == 0) {
        v = atomicCAS((unsigned *)args.workspace, 0u, 1u) == 0u ? 1u : 2u;
        __threadfence();
        atomicExch(state, v);
    }
    while (v == 3) v = *(volatile unsigned *)state;
    __threadfence();
    return v == 1;
}

/* Thread 0, once the schedule's item count is known and before the
 * barrier that publishes the schedule: whether this launch splits its last
 * round, and the walk.  The same answer in every CTA. */
KDEV void kiln_split_plan(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m)
{
    if (!SPLIT || threadIdx.x != 0) return;
    int *sp = m.scratch;
    sp[SPLIT_FULL] = sp[SPLIT_END] = P.items;
    sp[SPLIT_WAYS] = 1;
    sp[SPLIT_ASKED] = sp[SPLIT_SAID] = 0;
    if (!args.workspace || args.sched_slot < 1 || args.sched_slot > KILN_SCHED_SLOTS) return;
    const int C = P.cta.ncl, R = P.items % C;
    if (C > args.num_sms || C > KILN_SPLIT_CTAS) return;
    /* the saving must also be the runtime's share of the walk (KILN_SPLIT_MIN) */
    const unsigned share = ((const unsigned *)args.workspace)[KILN_SPLIT_MIN_WORD];
    const int S = kiln_split_ways(P.items, C, P.nkb, SPLIT_PART_KB, share);
    if (S < 2) return;
    sp[SPLIT_ASKED] = 1;
    if (!kiln_split_lease(args, kiln_split_launch[args.sched_slot - 1])) return;
    sp[SPLIT_SAID] = 1;
    sp[SPLIT_FULL] = P.items - R;
    sp[SPLIT_END] = P.items - R + R * S;
    sp[SPLIT_WAYS] = S;
    /* the CTA's piece: unit FULL + cid of the walk, if cid < R * S */
    const int j = P.cta.cid % S, kb0 = j * P.nkb / S;
    sp[SPLIT_UNIT] = P.items - R + P.cta.cid / S;
    sp[SPLIT_UNIT + 1] = kb0;
    sp[SPLIT_UNIT + 2] = (j + 1) * P.nkb / S - kb0;
    sp[SPLIT_UNIT + 3] = j;
    if (P.cta.cid < R * S) atomicAdd(kiln_split_word(args, 1, P.cta.cid / S), 1u);   /* started */
}

/* Thread 0 of every CTA of a launch that asked, after all its threads are
 * done: the last to finish resets the launch's state for the next launch
 * on its slot (a stream's next, or a graph's replay) and gives the lease
 * back. */
KDEV void kiln_split_retire(const kiln_kernel_args &args, const kiln_gemm &P, const kiln_smem &m)
{
    unsigned *state = kiln_split_launch[args.sched_slot - 1];
    __threadfence();
    if (atomicAdd(&state[1], 1u) != (unsigned)P.cta.ncl - 1) return;
    state[1] = 0;
    if (kiln_split_get(m, SPLIT_SAID)) {
        /* every CTA is done with the tiles' words: zero for the next holder */
        const int tiles = (kiln_split_get(m, SPLIT_END) - kiln_split_get(m, SPLIT_FULL)) /
                          kiln_split_get(m, SPLIT_WAYS);
        for (int t = 0; t < tiles; ++t)
            for (int w = 0; w < 3; ++w) *kiln_split_word(args, w, t) = 0;
        __threadfence();
        atomicExch((unsigned *)args.workspace, 0u);
    }
    __threadfence();
    atomicExch(&state[0], 0u);
}

/* One unit of a CTA's walk: tile `tile`'s k-blocks [kb0, kb0 + nkb);
 * piece j of the tile's ways, or -1 for the whole tile. */
struct kiln_unit {
    int tile, kb0, nkb, j;
};

/* The end of the walk: the items, or with a split the whole tiles and the
 * pieces; read from shared memory at each unit (held in a register, it
 * spilled in the producer's 24 with raster group). */
KDEV int kiln_walk_end(const kiln_gemm &P, const kiln_smem &m)
{
    return SPLIT ? kiln_split_get(m, SPLIT_END) : P.items;
}

/* The first unit of this CTA's walk: its cluster's index, except where a
 * launch of single unsplit CTAs has fewer items than CTAs (decode calls:
 * the grid is sized for the capacity, not the counts) and a reduction of
 * at least SPREAD_MIN_DEPTH.  There the items go to the even CTAs first,
 * then to the odd ones.  The hardware places CTAs 2i and 2i+1 on the two
 * SMs of one TPC (seen on H100s), so the first CTAs put two busy SMs on
 * each TPC, and which of them streamed slowly moved with the chip:
 * DeepSeek-V3 fc2 dgrad after EP32 (64 tiles of 64x256 on 128 CTAs) took
 * 1.06-1.13x the time of the even CTAs first on three H100s.  Over 35
 * decode calls dgrad ran 1.010-1.019x faster in geometric mean, fprop
 * level, and where the items fill most CTAs a call moved either way
 * (0.95-1.17x); on shorter reductions it moved calls by 0.95-1.12x and is
 * not made (docs/sm90_kernel.md, ninety-fourth session).  Cut
 * clusters and a split last round (kiln_split_plan) place their pieces
 * themselves. */
constexpr int SPREAD_MIN_DEPTH = 4096;

KDEV int kiln_walk_start(const kiln_gemm &P, const kiln_smem &m)
{
    const int c = P.cta.cid;
    if (KCUT || CTAS > 1 || (SPLIT && kiln_split_get(m, SPLIT_WAYS) > 1)) return c;
    const int ncl = kiln_grid_clusters(), n = P.items;
    if (n >= ncl || P.nkb * BK < SPREAD_MIN_DEPTH) return c;
    const int j = (c & 1) ? (ncl + 1) / 2 + (c >> 1) : c >> 1;
    return j < n ? j : n;
}

/* Unit t of the walk: below FULL the whole tile t, else this CTA's piece
 * (its one unit past FULL: t = FULL + cid, cid < END - FULL). */
KDEV kiln_unit kiln_unit_of(const kiln_gemm &P, const kiln_smem &m, int t)
{
    if (KCUT) {   /* every tile cut: this CTA's piece, its rank's share of the k-blocks */
        const int j = P.cta.crank, kb0 = j * P.nkb / KC;
        return {t, kb0, (j + 1) * P.nkb / KC - kb0, j};
    }
    if (!SPLIT || t < kiln_split_get(m, SPLIT_FULL)) return {t, 0, P.nkb, -1};
    return {kiln_split_get(m, SPLIT_UNIT), kiln_split_get(m, SPLIT_UNIT + 1),
            kiln_split_get(m, SPLIT_UNIT + 2), kiln_split_get(m, SPLIT_UNIT + 3)};
}

/* Consumer warp group cw, after a piece's main loop: its partial to this
 * CTA's slot, then the count, then the parts of the tile this CTA sums:
 * -1 for none (nothing to store), else the bands of cw's rows (bit q:
 * columns [q * OCW, (q + 1) * OCW) of its share) whose sums over all the
 * pieces, in k order, replace acc's values there, to store.  A half
 * tile's (HALF_TILES) sums are the low half of acc: only those move, half
 * the bytes each piece writes and the finisher reads.
 *
 * The parts (SPLIT_SHARED: warp group w's band q is part w * bands + q)
 * go to the pieces in turn, part u to piece u % S.  A piece claims its
 * parts before it counts itself in, and then waits for the count, only
 * when every piece of the tile has started (kiln_split_plan): those
 * arrive whatever this CTA does.  The last to arrive takes its own and
 * every part nobody claimed.  Before, the last piece summed the whole
 * tile alone: S partials read by one SM. */
KDEV int kiln_split_finish(const kiln_kernel_args &args, const kiln_smem &m, const kiln_ring &r,
                           float (&acc)[MI][ACC_N], int cw, bool half)
{
    const kiln_unit U = {kiln_split_get(m, SPLIT_UNIT), 0, 0, kiln_split_get(m, SPLIT_UNIT + 3)};
    constexpr int V = MI * ACC_N / 4;   /* float4 a thread */
    const int ltid = threadIdx.x & 127;
    char *ws = (char *)args.workspace;
    auto part = [&](int cta) {   /* cw's half of a CTA's slot, float4 v of thread ltid at v*128 */
        return (float4 *)(ws + KILN_SPLIT_PARTS_OFFSET + (size_t)cta * KILN_SPLIT_TILE_BYTES) +
               cw * V * 128 + ltid;
    };
    /* the CTA's index afresh (CS == 1): kept from the kernel's start, it
     * was a register more than the consumers' 232 and spilled */
    const int cid = (int)blockIdx.x;
    float4 *own = part(cid);
#pragma unroll
    for (int v = 0; v < V; ++v) {
        if (half && kiln_band_high(v)) continue;
        const float *a = &acc[v / (ACC_N / 4)][v % (ACC_N / 4) * 4];
        own[v * 128] = make_float4(a[0], a[1], a[2], a[3]);
    }
    __threadfence();
    kiln_named_sync(2, CONSUMERS * 128);
    const int ways = kiln_split_get(m, SPLIT_WAYS);
    /* bands of a warp group's share in this tile; the tile's parts */
    const int nb = SPLIT_SHARED ? (half ? SPLIT_BANDS / 2 : SPLIT_BANDS) : 1;
    const int parts = SPLIT_SHARED ? CONSUMERS * nb : 1;
    if (threadIdx.x == 128) {
        const int t = U.tile - kiln_split_get(m, SPLIT_FULL);
        unsigned *arrived = kiln_split_word(args, 0, t), *claimed = kiln_split_word(args, 2, t);
        const unsigned all = (1u << parts) - 1;
        unsigned dealt = 0, take = 0;   /* the parts dealt to this piece, those it sums */
        for (int u = U.j; u < parts; u += ways) dealt |= 1u << u;
        const bool stay = SPLIT_SHARED && dealt &&
                          *(volatile unsigned *)kiln_split_word(args, 1, t) == (unsigned)ways;
        if (stay) {
            atomicOr(claimed, dealt);
            take = dealt;
            __threadfence();
        }
        if (atomicAdd(arrived, 1u) == (unsigned)ways - 1) {
            __threadfence();
            take |= ~atomicOr(claimed, all) & all;
        } else if (stay) {
            while (*(volatile unsigned *)arrived != (unsigned)ways) __nanosleep(64);
        }
        kiln_split_set(m, SPLIT_TAKE, (int)take);
    }
    kiln_named_sync(2, CONSUMERS * 128);
    const unsigned take = (unsigned)kiln_split_get(m, SPLIT_TAKE);
    if (!take) return -1;
    __threadfence();
    /* cw's bands to sum */
    const unsigned bands = SPLIT_SHARED ? take >> (cw * nb) & ((1u << nb) - 1) : 0x7fffffffu;
    auto mine = [&](int v) {
        return !(half && kiln_band_high(v)) && (bands >> (SPLIT_SHARED ? kiln_band(v) : 0) & 1);
    };
    /* acc (stored above) takes the sum (kiln_acc_take; the pieces' loop
     * outside the chunks', ptxas spilled the walk beside acc's registers) */
    constexpr int CH = SPLIT_CH;
    const int first = cid - U.j;   /* the CTA of the tile's piece 0 */
    if constexpr (SPLIT_BUFS >= 2) {
        /* the chunks this warp group sums (a band of each m64 sub-tile, in
         * acc's order) and the pieces in turn, each (chunk, piece) a
         * cp.async group into buffer q % SPLIT_BUFS, fetched SPLIT_BUFS - 1
         * ahead of the adds */
        constexpr int CSTRIDE = CONSUMERS * 128 * 16;
        const int held = HOLD_BOXES ? kiln_slot_back(r, 1) : STAGES - 1;
        const kiln_u32 me = (kiln_u32)(cw * 128 + ltid) * 16;
        auto buf = [&](int b) { return m.stage((held + 1 + b) % STAGES) + me; };
        int fv = 0, fi = 0, fb = 0;   /* the next fetch: float4, piece, buffer */
        auto fetch = [&] {
            while (fv < V && !mine(fv)) fv += CH;
            if (fv < V) {
                const float4 *p = part(first + fi) + fv * 128;
                const kiln_u32 d = buf(fb);
#pragma unroll
                for (int k = 0; k < CH; ++k) kiln_cp_async16(d + k * CSTRIDE, p + k * 128);
                if (++fi == ways) fi = 0, fv += CH;
                fb = fb + 1 == SPLIT_BUFS ? 0 : fb + 1;
            }
            kiln_cp_async_commit();   /* empty past the end: a group per item */
        };
#pragma unroll 1
        for (int k = 0; k < SPLIT_BUFS - 1; ++k) fetch();
        int b = 0;
#pragma unroll
        for (int v0 = 0; v0 < V; v0 += CH) {
            if (!mine(v0)) continue;
#pragma unroll 1
            for (int i = 0; i < ways; ++i) {
                fetch();
                kiln_cp_async_wait<SPLIT_BUFS - 1>();
                float4 x[CH];
                const kiln_u32 d = buf(b);
#pragma unroll
                for (int c = 0; c < CH; ++c) x[c] = kiln_lds128(d + c * CSTRIDE);
                kiln_acc_take(acc, v0, i, x);
                b = b + 1 == SPLIT_BUFS ? 0 : b + 1;
            }
        }
        kiln_cp_async_wait<0>();
    } else {
#pragma unroll
        for (int v0 = 0; v0 < V; v0 += CH) {
            if (!mine(v0)) continue;
#pragma unroll 1
            for (int i = 0; i < ways; ++i) {
                const float4 *p = part(first + i);
                float4 x[CH];
#pragma unroll
                for (int c = 0; c < CH; ++c) x[c] = __ldcg(p + (v0 + c) * 128);
                kiln_acc_take(acc, v0, i, x);
            }
        }
    }
    return (int)bands;
}

/* Consumer warp group cw, after its piece's main loop in a k-cut cluster
 * (KCUT; u: the unit's index in the walk, the same in every CTA of the
 * cluster; j: this CTA's piece; empty: it had no k-block): the bands of
 * cw's share whose sums over the pieces, in k order, now stand in acc (bit
 * q as kiln_split_finish's), or -1 when this CTA stores none.
 *
 * The parts are dealt as kiln_split_finish's (part w * nb + q to piece
 * (w * nb + q) % KC).  Once both of its warp groups' wgmma are done, a
 * piece tells every peer its ring is free (bar_turn: KC arrivals a unit);
 * once every ring is free, it pushes each part it does not sum into slot j
 * of that part's summer's ring with st.async, which completes bytes on the
 * summer's bar_turn + 16, and writes the parts it sums into its own ring.
 * Each summer then adds the KC slots of its parts from its own ring in k
 * order, and tells every peer it is done reading (bar_turn + 8, which the
 * producer waits on before the next unit, kiln_produce).  The pieces used
 * to write their whole partial locally and have the summers load it
 * through distributed shared memory, one round trip each batch of loads,
 * with an arrival released at cluster scope for each peer: this form took
 * the cut's sum from 5.7 to 3.8 us a tile on Mixtral's fc2 at EP8 decode,
 * and the calls cut in 4 0.94-0.98 of the time (H100, docs/sm90_kernel.md,
 * eighty-ninth session). */
KDEV int kiln_kcut_finish(const kiln_kernel_args &args, const kiln_smem &m, float (&acc)[MI][ACC_N], int cw,
                          bool half, bool empty, int u, int j)
{
    constexpr int V = MI * ACC_N / 4;                              /* float4 a thread */
    constexpr int NP = (CONSUMERS * SPLIT_BANDS + KC - 1) / KC;     /* most parts a piece sums */
    constexpr int PF4 = MI * SPLIT_CH;                             /* float4 of a part a thread */
    constexpr int F4 = 128 * 16;                                   /* one float4 of a warp group's threads */
    constexpr int PART = PF4 * F4;
    static_assert(!KCUT || KC * NP * PART <= STAGES * STAGE_BYTES, "the pushed parts fit the ring");
    const kiln_u32 bar_in = m.bar_turn + 16, lt = (threadIdx.x & 127) * 16;
    const int nb = half ? SPLIT_BANDS / 2 : SPLIT_BANDS;
    unsigned take = 0;   /* the parts dealt to this piece */
    for (int p = j; p < CONSUMERS * nb; p += KC) take |= 1u << p;
    const unsigned bands = take >> (cw * nb) & ((1u << nb) - 1);
    kiln_named_sync(2, CONSUMERS * 128);   /* both warp groups' wgmma have read the ring */
    kiln_stamp(args, KILN_TL_BOTH_DONE);
    if (threadIdx.x == 128) {
        kiln_mbar_expect_tx(bar_in, (kiln_u32)((KC - 1) * __popc(take) * PART));
        kiln_mbar_arrive_peers_release(m.bar_turn, KC);
    }
    kiln_mbar_wait<true>(m.bar_turn, (kiln_u32)(u & 1));   /* every peer's ring is free */
#pragma unroll
    for (int v = 0; v < V; ++v) {
        if (half && kiln_band_high(v)) continue;
        const int p = cw * nb + kiln_band(v), o = p % KC;
        const int c = v / (ACC_N / 4) * SPLIT_CH + v % SPLIT_CH;
        const kiln_u32 at = m.sbase + (kiln_u32)(((j * NP + p / KC) * PF4 + c) * F4) + lt;
        const float *a = &acc[v / (ACC_N / 4)][v % (ACC_N / 4) * 4];
        const float x = empty ? 0.0f : a[0], y = empty ? 0.0f : a[1];
        const float z = empty ? 0.0f : a[2], w = empty ? 0.0f : a[3];
        if (o == j) kiln_sts128(at, x, y, z, w);
        else kiln_st_async_peer128(at, bar_in, (kiln_u32)o, x, y, z, w);
    }
    kiln_stamp(args, KILN_TL_WRITTEN);
    kiln_mbar_wait<true>(bar_in, (kiln_u32)(u & 1));   /* every peer's parts are here */
    kiln_stamp(args, KILN_TL_PEERS_IN);
#pragma unroll
    for (int v0 = 0; v0 < V; v0 += SPLIT_CH) {
        if ((half && kiln_band_high(v0)) || !(bands >> kiln_band(v0) & 1)) continue;
        const int p = cw * nb + kiln_band(v0), c0 = v0 / (ACC_N / 4) * SPLIT_CH;
#pragma unroll 1
        for (int i = 0; i < KC; ++i) {
            float4 x[SPLIT_CH];
#pragma unroll
            for (int c = 0; c < SPLIT_CH; ++c)
                x[c] = kiln_lds128(m.sbase + (kiln_u32)(((i * NP + p / KC) * PF4 + c0 + c) * F4) + lt);
            kiln_acc_take(acc, v0, i, x);
        }
    }
    kiln_named_sync(2, CONSUMERS * 128);   /* every read of the ring is done */
    if (threadIdx.x == 128)
        kiln_mbar_arrive_peers_release(m.bar_turn + 8, KC);
    return take ? (int)bands : -1;
}

