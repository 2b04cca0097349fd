/*
 * sm90_gemm.cuh — persistent, warp-specialised grouped GEMM for sm_90a
 * (fprop and dgrad), on the device layer of sm90_common.cuh.  The generator
 * (templates/sm90.lua) pastes common/kernel_abi.h, a preamble and
 * sm90_common.cuh before this text.  The preamble defines, besides what
 * sm90_common.cuh names:
 *
 *   KILN_ENTRY                    the extern "C" kernel name (macro)
 *   OP                            0 fprop (B K-major), 1 dgrad (B MN-major)
 *   EPI_BIAS EPI_ROW_SCALE EPI_SCALE_BIAS EPI_ALPHA_PER_GROUP EPI_BETA
 *   CM CN                         cluster shape (1x1, 2x1 or 1x2): the pair
 *                                 shares B (CM=2) or A (CN=2) through TMA
 *                                 multicast; set at launch, 1-D along x
 *   FP8_RECIPE FP8_PROMOTE        8-bit inputs: kiln_fp8_recipe (0 none,
 *                                 1 tensor, 2 row, 3 block) and promotion
 *   WPTRS                         1: the weights may come as G pointers
 *                                 (args.b_ptrs; spec weights: any)
 *   EPI_TMA STG_BUFS              1: the epilogue stores through tmap_d
 *                                 (D as {n_out, capacity}) from STG_BUFS
 *                                 swizzled 2 KiB boxes per warp
 *   kiln_wgmma(acc, desc_a, desc_b, scale_d)   m64n{BN}k16 for 16-bit inputs,
 *                                 m64n{BN}k32 for 8-bit ones
 *
 * B is K-major for fprop and for 8-bit dgrad (which reads the weights
 * transposed, [G,K,N]: 8-bit wgmma has no MN-major operands); 16-bit dgrad
 * reads W [G,N,K] MN-major.
 *
 * Roles: warpgroup 0 is the producer (one thread issues TMA loads into the
 * ring; with the block recipe its warp 1 copies the scales beside each
 * slot); warpgroups 1..CONSUMERS issue wgmma from shared memory.
 * Cooperative: each consumer owns BM/CONSUMERS rows of every tile.
 * Pingpong: each consumer owns whole tiles, alternating (kiln_turn).  The
 * grid is persistent: cluster c walks work units c, c+clusters, ... of all
 * groups (a unit is CM x CN tiles of one group; one tile without a
 * cluster).  Docs: docs/sm90_kernel.md.
 */

/* Staging per warp: the fp32 slot of kiln_store_acc, or EPI_TMA's boxes. */
constexpr int OCW = 128 / OSZ;                 /* output columns per 128-byte box row */
constexpr int SHARE_BOXES = MI * BN / OCW;     /* boxes of a warp's share of a tile */
constexpr int STG_WARP_BYTES = EPI_TMA ? 2048 * STG_BUFS : STG_SLOT_BYTES;
static_assert(!EPI_TMA || (STG_BUFS >= 1 && STG_BUFS <= SHARE_BOXES), "EPI_TMA: 1 to SHARE_BOXES boxes");
static_assert(!EPI_TMA || !EPI_BETA, "EPI_TMA does not read C");
/* The block recipe's scales beside the ring (kiln_stage_scales), after the
 * staging; templates/sm90.lua counts the same bytes. */
constexpr int SC_CB = BN > 128 ? 2 : 1;          /* 128-column blocks of a tile */
constexpr int SC_STRIDE = BM + 4;                /* floats a slot: A's BM, B's SC_CB, 16-byte pitch */
constexpr int SCALE_BYTES = FP8_RECIPE == 3 ? STAGES * SC_STRIDE * 4 : 0;
static_assert(BM % 32 == 0, "a scale warp lane copies the scales of BM / 32 rows");
/* The fp8 row recipe's column scales of a tile, for the EPI_TMA epilogue:
 * two tiles' BN floats (by the tile's parity), after the staging;
 * templates/sm90.lua counts the same bytes (kiln_terms_ready). */
constexpr bool CSC_SMEM = EPI_TMA && FP8_RECIPE == 2;
constexpr int CSC_BYTES = CSC_SMEM ? 2 * BN * 4 : 0;
static_assert(!CSC_SMEM || BN <= CONSUMERS * 128, "a consumer thread stages one column scale");
typedef kiln_layout<STG_WARP_BYTES, SCALE_BYTES + CSC_BYTES> kiln_gemm_layout;

/* EPI_TMA kernels whose staging holds at least two boxes less than a
 * warp's share (the ring left room for STG_BUFS) also stage in the ring
 * slot of the tile's last k-block: HOLD_BOXES more boxes per warp, in this
 * warp's HOLD_STRIDE bytes of the slot.  The slot is released only after
 * the next tile's first wgmma are issued and the stores have read it
 * (kiln_release_staged), so the epilogue waits on no store of its own
 * tile; the producer meanwhile fills the other STAGES - 1 slots.  Measured
 * on an H200 against the batches of STG_BUFS (kiln tune, same call, 9
 * shapes; docs/sm90_kernel.md): 128x256 and 256x128 tiles (3 boxes more,
 * a share in one batch) 0.982-0.994 of the time, bf16 and fp8 row-wise.
 * Not where it saves one wait (128x128 at 6 stages, 1 box more: bf16
 * 1.025, fp8 row-wise 0.996-0.998), nor with fp8 promotion (the 128x256
 * block kernels: 1.016-1.046 with the slot released before, at or after
 * the tile's first k-block).  Not in clusters yet: this form has not run
 * on a GPU with a pair (the first form did, in the block kernels); k-cut
 * clusters (KCUT) hand their partials over in the whole ring. */
constexpr int HOLD_STRIDE = (STAGE_BYTES / (CONSUMERS * 4)) & ~1023;
constexpr int HOLD_FIT = HOLD_STRIDE / 2048;
constexpr int HOLD_BOXES = !EPI_TMA || PINGPONG || FP8_PROMOTE || CTAS > 1 || SHARE_BOXES - STG_BUFS < 2 ? 0
                         : SHARE_BOXES - STG_BUFS < HOLD_FIT ? SHARE_BOXES - STG_BUFS : HOLD_FIT;
constexpr int EPI_BOXES = STG_BUFS + HOLD_BOXES;   /* boxes per epilogue batch */

/* Half tiles (HALF_TILES, set by templates/sm90.lua).  In the cooperative
 * schedule each warp group owns half a tile's rows, so the tiles of a
 * group of at most BM / 2 rows (decode-sized groups, the small groups of
 * skewed routing) left the second warp group multiplying rows that are
 * never stored, and took as long as a full tile.  There both warp groups
 * take the first BM / 2 rows, each half the columns (m64n{BN/2}, into the
 * low half of its accumulators), and the tile's tensor work halves.  The
 * loads are the same.  Only such groups: where a group's last row tile
 * was half and its others whole (a group's row tiles read the same
 * weights, in step, so L2 serves the later reads), the calls took up to
 * 1.23x the time on skewed routing at long K.  16-bit inputs only (the
 * rule is templates/sm90.lua's).  The 128x256 defaults: dgrad 0.988 of
 * the time without them in geometric mean over 7 shapes, fprop 0.975
 * over 13 (decode 0.89-0.91); fprop had first timed 1-4% slower on
 * shapes with no such group, and 0.97-1.00 there since its work items
 * are warp-uniform.  H200: docs/sm90_kernel.md, seventy-seventh and
 * seventy-eighth sessions. */
static_assert(!HALF_TILES || (IN_ESZ == 2 && !PINGPONG && EPI_TMA && !FP8_PROMOTE &&
                              CONSUMERS == 2 && (BN / 2) % 64 == 0),
              "half tiles: cooperative TMA-store 16-bit kernels, whole 64-column halves");

constexpr bool B_KMAJOR = OP == 0 || IN_ESZ == 1;
constexpr int KSTEPS = BK * IN_ESZ / 32;       /* wgmma per k-block: k16 (16-bit) or k32 (8-bit) */
static_assert(CM == 1 || B_KMAJOR || (BN / 64) % 2 == 0, "MN-major dgrad with cluster m=2 needs BN 128 or 256");
static_assert(FP8_RECIPE == 0 || IN_ESZ == 1, "fp8 recipes are for 8-bit inputs");
static_assert(FP8_RECIPE != 3 || (FP8_PROMOTE && BN % 128 == 0), "block recipe: promotion, BN 128 or 256");

/* What every role knows of the problem and of this CTA's place in it. */
struct kiln_gemm {
    int G, cap;
    int n_out;          /* output columns */
    int wn;             /* rows per group of B's map (N; 8-bit dgrad: K) */
    int nbn;            /* 128-column blocks of the output (block recipe) */
    int tn;             /* units along n */
    int nkb;            /* k-blocks of the reduction */
    kiln_cta cta;  /* this CTA's place among the clusters */
    int items;          /* work units of all groups */
};

struct kiln_tile {
    int g;        /* group */
    int row0;     /* first row of the tile (absolute) */
    int row_end;  /* end of the group's rows, clamped to capacity */
    int col0;     /* first output column */
    bool half;    /* a half tile (HALF_TILES): the group has at most BM / 2 rows */
};

/* This CTA's tile of cluster work unit t (CM x CN tiles of one group). */
KDEV kiln_tile kiln_decode(const kiln_gemm &P, const kiln_smem &m, int t)
{
    kiln_tile T;
    T.g = kiln_find_group(t, m.tile_start, P.G);
    const int gs = min(m.row_start[T.g], P.cap), ge = min(m.row_start[T.g + 1], P.cap);
    const int tm = ((ge - gs + BM - 1) / BM + CM - 1) / CM;   /* units along m */
    int um, un;
    kiln_raster(t - m.tile_start[T.g], tm, P.tn, um, un);
    T.row0 = gs + (um * CM + P.cta.rank_m) * BM;   /* may lie past the group: then nothing is stored */
    T.row_end = ge;
    T.col0 = (un * CN + P.cta.rank_n) * BN;
    T.half = HALF_TILES && ge - gs <= BM / 2;
    return T;
}

/* ---------------------------------------------------------- timeline */

/* A diagnostic build's per-CTA timeline (KILN_TIMELINE: never defined in
 * a shipped build; `scripts/trial_build.sh OUT KILN_TIMELINE` makes a
 * libkiln that defines it, python/bench/timeline.py runs a case on it).  A
 * call's time over its bytes' floor is the sum of a ramp, the stream, a
 * wait for the slowest piece and the sum; a kernel's duration cannot tell
 * them apart, each CTA's stamps can.  They go to the caller's overflow
 * buffer (d_overflow), past its first 64 bytes: KILN_TL_N globaltimer
 * values a CTA, then its SM and cluster rank (a printf is a call, and a
 * call made ptxas serialise the wgmma pipeline).  Stamp i of a CTA is its
 * first unit's (the first write wins, after the entry's reset), but for
 * KILN_TL_LAST, which each write replaces.  Thread 0 (the producer) and
 * thread 128 (the first consumer) stamp. */
enum {
    KILN_TL_ENTRY, KILN_TL_SETUP, KILN_TL_FIRST_FULL, KILN_TL_MAIN_END, KILN_TL_SUMMED, KILN_TL_EXIT,
    KILN_TL_FIRST_LOAD, KILN_TL_LAST,
    /* a k-cut tile's sum (kiln_kcut_finish): both warp groups' main loops
     * done, every ring free and this piece's parts sent, every part it
     * sums here */
    KILN_TL_BOTH_DONE, KILN_TL_WRITTEN, KILN_TL_PEERS_IN, KILN_TL_SM, KILN_TL_N
};
#ifdef KILN_TIMELINE
KDEV unsigned long long *kiln_tl_row(const kiln_kernel_args &args)
{
    if (!args.overflow || threadIdx.x % 128 != 0 || threadIdx.x > 128) return nullptr;
    return (unsigned long long *)args.overflow + 8 + (blockIdx.x + gridDim.x * blockIdx.y) * KILN_TL_N;
}
KDEV unsigned long long kiln_tl_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
KDEV void kiln_stamp(const kiln_kernel_args &args, int i)
{
    unsigned long long *row = kiln_tl_row(args);
    if (row && (i == KILN_TL_LAST || row[i] == 0)) row[i] = kiln_tl_now();
}
KDEV void kiln_tl_enter(const kiln_kernel_args &args)
{
    unsigned long long *row = kiln_tl_row(args);
    if (!row || threadIdx.x != 0) return;
    unsigned smid, crank = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (CTAS > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(crank));
    row[KILN_TL_ENTRY] = kiln_tl_now();
    for (int i = 1; i < KILN_TL_SM; ++i) row[i] = 0;
    row[KILN_TL_SM] = (unsigned long long)smid << 32 | crank;
}
#else
KDEV void kiln_stamp(const kiln_kernel_args &, int) {}
KDEV void kiln_tl_enter(const kiln_kernel_args &) {}
#endif

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
constexpr bool SPLIT = KC == 1 && !PINGPONG && CS == 1 && BM * BN * 4 <= KILN_SPLIT_TILE_BYTES;
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
    constexpr int PART = PF4 * 128 * 16;
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
        const kiln_u32 at = m.sbase + (kiln_u32)(((j * NP + p / KC) * PF4 + c) * 2048) + lt;
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
                x[c] = kiln_lds128(m.sbase + (kiln_u32)(((i * NP + p / KC) * PF4 + c0 + c) * 2048) + lt);
            kiln_acc_take(acc, v0, i, x);
        }
    }
    kiln_named_sync(2, CONSUMERS * 128);   /* every read of the ring is done */
    if (threadIdx.x == 128)
        kiln_mbar_arrive_peers_release(m.bar_turn + 8, KC);
    return take ? (int)bands : -1;
}

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
    for (int t = P.cta.cid; t < kiln_walk_end(P, m); t += kiln_grid_clusters(), ++u) {
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
    for (int t = P.cta.cid; t < kiln_walk_end(P, m); t += kiln_grid_clusters()) {
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
 * b_col on, half the tile wide.  Each branch is a whole wgmma group, fence
 * to commit: two copies of the loop, or a commit after the branches
 * merged, made ptxas serialise the wgmma (C7515). */
template <class Under>
KDEV void kiln_mainloop(const kiln_gemm &P, const kiln_smem &m, kiln_ring &r, const kiln_turn &turn,
                        float (&acc)[MI][ACC_N], int nkb, int row_off, bool half, int b_col,
                        int lane, bool staged, Under under_last)
{
    int prev = -1;
    for (int kb = 0; kb < nkb; ++kb) {
        kiln_mbar_wait(m.full(r.s), r.ph);
        const kiln_u32 st = kiln_stage_uniform(m, r.s);
        if (HALF_TILES && half) {
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
    for (int t = P.cta.cid; t < kiln_walk_end(P, m); t += kiln_grid_clusters(), ++j) {
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
        else kiln_mainloop(P, m, r, turn, acc, nkb, row_off, half, cb, lane, staged, terms);
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
        if (EPI_TMA)
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
