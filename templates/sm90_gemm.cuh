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
 *
 * This file holds the kernel's constants, tile decoding and diagnostic
 * timeline; templates/sm90.lua pastes sm90_gemm_cut.cuh (a tile's
 * reduction cut across CTAs) and sm90_gemm_roles.cuh (the producer, the
 * consumers and the kernel) after it.
 */

/* Staging per warp: the fp32 slot of kiln_store_acc, or EPI_TMA's boxes;
 * none for SWAP_AB (kiln_epilogue_swap). */
constexpr int OCW = 128 / OSZ;                 /* output columns per 128-byte box row */
constexpr int SHARE_BOXES = MI * BN / OCW;     /* boxes of a warp's share of a tile */
constexpr int STG_WARP_BYTES = EPI_TMA ? 2048 * STG_BUFS : SWAP_AB ? 0 : STG_SLOT_BYTES;
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
    if (SWAP_AB) {
        /* swap_ab (CM 1; its main loop computes only a tile's tokens,
         * kiln_swap_group): the group's tm tiles share its rows evenly,
         * their widths one apart at most, rather than BM rows each and the
         * rest last.  The tiles reading one weight tile then take the same
         * time and stay in step, one reading it from DRAM and the others
         * from L2; with a short last tile running ahead, DeepSeek-V2 fc1
         * Dirichlet fprop read 7.43 GB from DRAM where this reads 5.94 (a
         * fixed BM-token width 6.36; ncu, H100, session 105). */
        const long long rows = ge - gs;
        T.row0 = gs + (int)(um * rows / tm);
        T.row_end = gs + (int)((um + 1) * rows / tm);
    }
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

