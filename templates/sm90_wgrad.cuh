/*
 * sm90_wgrad.cuh — persistent, warp-specialised k-grouped weight gradient
 * for sm_90a:  dW_g[N,K] = dY_gᵀ · X_g, the reduction over each group's own
 * tokens (rows [off_g, off_g + m_g) of dY [cap,N] and X [cap,K]).
 * Self-contained: no includes; templates/sm90_wgrad.lua pastes
 * common/kernel_abi.h and a preamble before this text.  The preamble defines:
 *
 *   KILN_ENTRY                    the extern "C" kernel name (macro)
 *   BM BN BK STAGES CONSUMERS     tile (BM rows of dW = n, BN cols = k, BK tokens)
 *   PINGPONG                      1: each consumer warpgroup owns whole tiles
 *   OUT_T                         0 bf16, 1 fp16, 2 f32
 *   DISCRETE                      1: output g at args.d_ptrs[g]; 0: args.d + g*N*ldd
 *   ACCUMULATE                    1: D += result (f32 D); empty groups untouched
 *   SPLIT                         split the reduction of a tile over up to SPLIT
 *                                 CTAs (accumulate only; partials added atomically)
 *   TMA_RED                       1: accumulate through TMA reduce-add (dense
 *                                 output, tmap_d over dW as {K, G*N}, fp32)
 *   TMA_ST                        1: overwrite through TMA stores (dense output,
 *                                 tmap_d over dW as {K, G*N} in the output type)
 *   STG_BUFS                      TMA_RED / TMA_ST: 2 KiB swizzled boxes per warp
 *   RASTER MBAND MAXG CONSUMER_REGS SMEM_BYTES
 *   kiln_wgmma(acc, desc_a, desc_b, scale_d)   m64n{BN}k16, A and B MN-major
 *
 * GEMM view: M = n (rows of dW), N = k (cols of dW), reduction over tokens.
 * Both operands arrive MN-major: a TMA box {64, BK} of dY is BK token rows of
 * 64 n-values (one 128-byte swizzled row per token), likewise for X.
 *
 * Group edges: k-block kb of a group starts at token off_g + kb*BK (TMA takes
 * any row coordinate), so only the last k-block of a group can hold rows of
 * the next group (or rows past sum(m), which may hold anything).  The
 * consumers zero those token rows in shared memory (whole 128-byte rows, so
 * the swizzle does not matter), fence the generic-proxy writes against the
 * async proxy, and synchronise before wgmma reads the stage.  Rows past the
 * capacity are zero-filled by TMA.
 *
 * Roles: warpgroup 0 is the producer (one thread issues TMA loads into a
 * STAGES-deep ring guarded by full/empty mbarriers); warpgroups 1..CONSUMERS
 * issue wgmma from shared memory.  The grid is persistent: CTA i walks tiles
 * i, i+grid, ... of all (split, group, n-tile, k-tile); the group of a tile
 * is found on the device from args.sizes (per-CTA prefix sums in shared
 * memory, then a binary search).
 */

#pragma nv_diag_suppress 128  /* TMA_RED / TMA_ST: the plain epilogue after their continue */

constexpr int WG_M = PINGPONG ? BM : BM / CONSUMERS;  /* dW rows per consumer warpgroup */
constexpr int MI = WG_M / 64;                  /* m64 sub-tiles per consumer */
constexpr int ACC_N = BN / 2;                  /* fp32 accumulators per thread per sub-tile */
constexpr int BOX_BYTES = BK * 128;            /* one {64 cols, BK tokens} TMA box */
constexpr int A_BOXES = BM / 64, B_BOXES = BN / 64;
constexpr int A_BYTES = A_BOXES * BOX_BYTES;
constexpr int B_BYTES = B_BOXES * BOX_BYTES;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
/* MN-major, 128-byte swizzle: 64-element chunks of the M/N dimension are one
 * box apart (LBO), 8-token groups of the reduction 1024 bytes apart (SBO). */
#ifndef KILN_DEV_SWAP_MN
constexpr kiln_u32 MN_LBO = BOX_BYTES, MN_SBO = 1024;
#else
constexpr kiln_u32 MN_LBO = 1024, MN_SBO = BOX_BYTES;
#endif
constexpr int STG_LD = 40;                     /* staging row pitch in floats (32 + 8 pad) */
/* per warp: a padded 16x32 fp32 slot, or (TMA_RED, TMA_ST) STG_BUFS
 * 128B-swizzled boxes of 16 rows x 128 bytes, 1024-byte aligned */
constexpr int TMA_BOX = TMA_RED || TMA_ST;
constexpr int STG_WARP_BYTES = TMA_BOX ? 2048 * STG_BUFS : 16 * STG_LD * 4;
constexpr int OFF_STG = STAGES * STAGE_BYTES;
constexpr int OFF_SCHED = OFF_STG + CONSUMERS * 4 * STG_WARP_BYTES;
constexpr int SCHED_INTS = 2 * (MAXG + 1) + 64;
constexpr int OFF_BAR = (OFF_SCHED + SCHED_INTS * 4 + 7) & ~7;
constexpr int SMEM_USED = OFF_BAR + (2 * STAGES + 2) * 8;

static_assert(SMEM_USED + 1024 <= SMEM_BYTES, "launch shared memory too small");
static_assert(BK == 64, "BK must be 64");
static_assert(!PINGPONG || CONSUMERS == 2, "pingpong needs 2 consumer warpgroups");
static_assert(WG_M % 64 == 0, "rows per consumer warpgroup must be a multiple of 64");
static_assert(BN % 64 == 0 && BN <= 256, "BN must be 64, 128, 192 or 256");
static_assert(MI * ACC_N <= 128, "too many accumulators per thread");
static_assert(!(SPLIT > 1) || ACCUMULATE, "split needs accumulate mode");
static_assert(!ACCUMULATE || OUT_T == 2, "accumulate needs an f32 output");
static_assert(!TMA_RED || (ACCUMULATE && !DISCRETE), "TMA reduce-add is the dense accumulate path");
static_assert(!TMA_ST || (!ACCUMULATE && !DISCRETE), "TMA store is the dense overwrite path");
static_assert(!TMA_ST || STG_BUFS <= MI * BN * (OUT_T == 2 ? 4 : 2) / 128,
              "more store boxes per warp than a tile has");
static_assert(OFF_STG % 1024 == 0, "staging must be 1024-byte aligned for the swizzled boxes");
/* Accumulating without TMA (discrete outputs): cooperative tiles add with
 * red.global.add (fire and forget: the epilogue is not hidden, so its load
 * latency would be); pingpong tiles read-modify-write (their epilogue runs
 * under the other warpgroup's main loop, and a plain RMW costs L2 less).
 * Measured on H200, docs/sm90_wgrad.md.  Split tiles always use red. */
#ifdef KILN_DEV_ACC_RMW
constexpr int ACC_RED = 0;
#else
constexpr int ACC_RED = PINGPONG ? 0 : 1;
#endif

/* ------------------------------------------------------------------ PTX */

/* bulk stores, commit/wait, stmatrix, the swizzled box: sm90_tma_store.cuh */

KDEV void kiln_red_add4(float *p, float a, float b, float c, float d)
{
    asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

KDEV void kiln_named_sync(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(nthreads) : "memory");
}

/* ------------------------------------------------------- conversions */

/* Writes 8 consecutive values to p (16- or 32-byte aligned): converted to
 * the output type, or added to f32 memory (ACCUMULATE; atomically when the
 * reduction of the tile is split over several CTAs). */
KDEV void kiln_out8(void *p, const float v[8], bool atomic)
{
    if (ACCUMULATE) {
        float *q = (float *)p;
        if (atomic || ACC_RED) {
            kiln_red_add4(q, v[0], v[1], v[2], v[3]);
            kiln_red_add4(q + 4, v[4], v[5], v[6], v[7]);
        } else {
            float4 a = *(const float4 *)q, b = *((const float4 *)q + 1);
            *(float4 *)q = make_float4(a.x + v[0], a.y + v[1], a.z + v[2], a.w + v[3]);
            *((float4 *)q + 1) = make_float4(b.x + v[4], b.y + v[5], b.z + v[6], b.w + v[7]);
        }
    } else if (OUT_T == 2) {
        *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
        *((float4 *)p + 1) = make_float4(v[4], v[5], v[6], v[7]);
    } else {
        uint4 u;
        u.x = kiln_pack2(v[0], v[1]);
        u.y = kiln_pack2(v[2], v[3]);
        u.z = kiln_pack2(v[4], v[5]);
        u.w = kiln_pack2(v[6], v[7]);
        *(uint4 *)p = u;
    }
}

/* ---------------------------------------------------------- schedule */

KDEV int kiln_splits(int nkb) { return SPLIT > 1 ? max(1, min(SPLIT, nkb)) : 1; }

struct kiln_wtile {
    int g;        /* group */
    int s, e;     /* the group's token rows [s, e), clamped to capacity */
    int n0, k0;   /* first row (n) and column (k) of the dW tile */
    int kb0, kb1; /* k-blocks of this work item: tokens s + [kb0, kb1) * BK */
    int split;    /* CTAs sharing this dW tile (1: sole owner) */
};

/* Work item t: split chunk slowest, then the dW tile in raster order. */
KDEV kiln_wtile kiln_decode(int t, const int *row_start, const int *tile_start, int G, int cap,
                            int tm, int tk)
{
    int lo = 0, hi = G;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (tile_start[mid] <= t) lo = mid; else hi = mid;
    }
    kiln_wtile T;
    T.g = lo;
    int local = t - tile_start[lo];
    T.s = min(row_start[lo], cap);
    T.e = min(row_start[lo + 1], cap);
    const int nkb = (T.e - T.s + BK - 1) / BK;
    const int sp = kiln_splits(nkb);
    const int per = tm * tk;
    const int c = local / per;
    local -= c * per;
    int m, n;
    if (RASTER == 1) {          /* m fastest */
        m = local % tm; n = local / tm;
    } else if (RASTER == 2) {   /* n fastest */
        n = local % tk; m = local / tk;
    } else {                    /* bands of MBAND m-tiles; m fastest inside a band */
        int band = local / (MBAND * tk);
        int r = local - band * (MBAND * tk);
        int mb0 = band * MBAND;
        int mc = min(MBAND, tm - mb0);
        m = mb0 + r % mc; n = r / mc;
    }
    T.n0 = m * BM;
    T.k0 = n * BN;
    T.kb0 = (int)((long long)c * nkb / sp);
    T.kb1 = (int)((long long)(c + 1) * nkb / sp);
    T.split = sp;
    return T;
}

/* ------------------------------------------------------- main loop */

/* The first NK k16 steps of a k-block (stage at sa / sb) into this
 * warpgroup's accumulators; the first step of a work item overwrites them. */
template <int NK>
KDEV void kiln_kblock_mma(float (&acc)[MI][ACC_N], kiln_u32 sa, kiln_u32 sb, int abox0, bool first)
{
    kiln_wg_fence();
#pragma unroll
    for (int kk = 0; kk < NK; ++kk) {
        kiln_u64 db = kiln_desc(sb + kk * 16 * 128, MN_LBO, MN_SBO);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            kiln_u64 da = kiln_desc(sa + (abox0 + mi) * BOX_BYTES + kk * 16 * 128, MN_LBO, MN_SBO);
            kiln_wgmma(acc[mi], da, db, (!first || kk != 0) ? 1 : 0);
        }
    }
}

/* ------------------------------------------------ TMA-store epilogue */

/* Overwrite, dense dW (TMA_ST): this warp's 16 rows of each m64 sub-tile,
 * 128 bytes of columns at a time, converted in registers into a swizzled
 * box and stored by one bulk tensor store through tmap_d (dW as {K, G*N}).
 * Nothing waits for the stores: a box buffer is only waited on (its reads
 * of shared memory) when it comes round again, so they finish under the
 * next tile's main loop.  TMA clips columns at K.  A box whose 16 rows run
 * past N (N % 16 == 8) would write the next group's first rows: its valid
 * rows go out by hand.  wrow0: the warp's first row within the tile. */
KDEV void kiln_epilogue_tma_store(const float (&acc)[MI][ACC_N], const kiln_wtile &T, int wrow0,
                                  char *dg, long long ldd, int wn, int wk, const kiln_tmap *tmap_d,
                                  unsigned char *stg, int &stg_buf, int lane)
{
    constexpr int OSZ = OUT_T == 2 ? 4 : 2;
    constexpr int OCW = 128 / OSZ;             /* output columns per box */
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int wrow = T.n0 + wrow0 + mi * 64;
        if (wrow >= wn) continue;
#pragma unroll
        for (int q = 0; q < BN / OCW; ++q) {
            const int col0 = T.k0 + q * OCW;
            if (col0 >= wk) continue;
            unsigned char *box = stg + stg_buf * 2048;
            if (lane == 0) kiln_bulk_wait_read<STG_BUFS - 1>();
            __syncwarp();
            kiln_box_from_frag<OSZ>(box, &acc[mi][q * (OCW / 2)], lane);
            kiln_fence_async_smem();
            __syncwarp();
            if (wrow + 16 <= wn) {
                if (lane == 0) {
                    kiln_tma_store_2d(kiln_smem_addr(box), tmap_d, col0, T.g * wn + wrow);
                    kiln_bulk_commit();
                }
                if (++stg_buf == STG_BUFS) stg_buf = 0;
            } else {
                kiln_box_to_global(box, dg + ((long long)wrow * ldd + col0) * OSZ, ldd * OSZ,
                                   wn - wrow, min(OCW, wk - col0) * OSZ, lane);
                __syncwarp();
            }
        }
    }
}

/* ------------------------------------------------------------ kernel */

extern "C" __global__ void __launch_bounds__(NT, 1)
KILN_ENTRY(const __grid_constant__ kiln_kernel_args args,
           const __grid_constant__ kiln_tmap tmap_a,
           const __grid_constant__ kiln_tmap tmap_b,
           const __grid_constant__ kiln_tmap tmap_d)
{
    extern __shared__ __align__(1024) unsigned char kiln_smem_raw[];
    const kiln_u32 raw = kiln_smem_addr(kiln_smem_raw);
    const kiln_u32 sbase = (raw + 1023u) & ~1023u;
    unsigned char *smem = kiln_smem_raw + (sbase - raw);

    float *staging = (float *)(smem + OFF_STG);
    int *row_start = (int *)(smem + OFF_SCHED);
    int *tile_start = row_start + (MAXG + 1);
    int *scratch = tile_start + (MAXG + 1);
    const kiln_u32 bar_full = sbase + OFF_BAR;
    const kiln_u32 bar_empty = bar_full + STAGES * 8;
    const kiln_u32 bar_order = bar_empty + STAGES * 8;   /* pingpong turn, one per warpgroup */

    const int tid = threadIdx.x;
    const int G = args.groups;
    const int cap = (int)(args.capacity < 0x7fffffffLL ? args.capacity : 0x7fffffffLL);
    const int wn = (int)args.n;                 /* rows of dW */
    const int wk = (int)args.k;                 /* cols of dW */
    const int tm = (wn + BM - 1) / BM;
    const int tk = (wk + BN - 1) / BN;

    if (G > MAXG || G <= 0) {
        /* The runtime must not send more than MAXG groups here. */
        if (G > MAXG) __trap();
        return;
    }

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kiln_mbar_init(bar_full + 8 * s, 1);
            kiln_mbar_init(bar_empty + 8 * s, PINGPONG ? 4 : CONSUMERS * 4);
        }
        kiln_mbar_init(bar_order, 128);
        kiln_mbar_init(bar_order + 8, 128);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        kiln_tma_prefetch_desc(&tmap_a);
        kiln_tma_prefetch_desc(&tmap_b);
        if (TMA_BOX) kiln_tma_prefetch_desc(&tmap_d);
    }

    /* --- per-CTA schedule: token offsets and work-item offsets of every group --- */
    const int chunk = (G + NT - 1) / NT;
    const int g0 = tid * chunk;
    const int g1 = min(G, g0 + chunk);
    int cnt[(MAXG + NT - 1) / NT];
    int local = 0;
#pragma unroll
    for (int i = 0; i < (MAXG + NT - 1) / NT; ++i) {
        int g = g0 + i;
        int c = g < g1 ? kiln_group_rows(args, g) : 0;
        cnt[i] = c;
        local += c;
    }
    int total_rows;
    int base = kiln_block_exscan(local, scratch, &total_rows);
    int run = base;
    int items_local = 0;
    int tcnt[(MAXG + NT - 1) / NT];
#pragma unroll
    for (int i = 0; i < (MAXG + NT - 1) / NT; ++i) {
        int g = g0 + i;
        tcnt[i] = 0;
        if (g < g1) {
            row_start[g] = run;
            int gs = min(run, cap), ge = min(run + cnt[i], cap);
            int nkb = (ge - gs + BK - 1) / BK;
            /* accumulate: an empty group is left untouched (no work items);
             * overwrite: it still gets its tiles, which write zeros */
            tcnt[i] = (ACCUMULATE && nkb == 0) ? 0 : tm * tk * kiln_splits(nkb);
            items_local += tcnt[i];
            run += cnt[i];
        }
    }
    int total_items;
    int tbase = kiln_block_exscan(items_local, scratch, &total_items);
#pragma unroll
    for (int i = 0; i < (MAXG + NT - 1) / NT; ++i) {
        int g = g0 + i;
        if (g < g1) { tile_start[g] = tbase; tbase += tcnt[i]; }
    }
    if (tid == 0) {
        row_start[G] = total_rows;
        tile_start[G] = total_items;
        if (blockIdx.x == 0 && total_rows > cap && args.overflow) *args.overflow = 1;
    }
    __syncthreads();

    /* warpgroup index through a shuffle: provably warp-uniform, so the
     * compiler keeps the wgmma paths convergent */
    const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
    if (wg == 0) {
        /* ------------------------------------------------ producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (tid == 0) {
            int s = 0;
            kiln_u32 ph = 0;
            for (int t = blockIdx.x; t < total_items; t += gridDim.x) {
                kiln_wtile T = kiln_decode(t, row_start, tile_start, G, cap, tm, tk);
                for (int kb = T.kb0; kb < T.kb1; ++kb) {
                    kiln_mbar_wait(bar_empty + 8 * s, ph ^ 1);
                    const kiln_u32 full = bar_full + 8 * s;
                    kiln_mbar_expect_tx(full, STAGE_BYTES);
                    const kiln_u32 sa = sbase + s * STAGE_BYTES;
                    const kiln_u32 sb = sa + A_BYTES;
                    const int r0 = T.s + kb * BK;
#pragma unroll
                    for (int j = 0; j < A_BOXES; ++j)
                        kiln_tma_load_2d(sa + j * BOX_BYTES, &tmap_a, full, T.n0 + 64 * j, r0);
#pragma unroll
                    for (int j = 0; j < B_BOXES; ++j)
                        kiln_tma_load_2d(sb + j * BOX_BYTES, &tmap_b, full, T.k0 + 64 * j, r0);
                    if (++s == STAGES) { s = 0; ph ^= 1; }
                }
            }
        }
    } else {
        /* ------------------------------------------------ consumers */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
        const int cw = wg - 1;
        const int ltid = tid & 127;
        const int wq = ltid >> 5;         /* warp within the warpgroup */
        const int lane = tid & 31;
        float *stg = (float *)((unsigned char *)staging + (cw * 4 + wq) * STG_WARP_BYTES);
        int stg_buf = 0;   /* TMA_RED / TMA_ST: which of the STG_BUFS boxes is next */
        float acc[MI][ACC_N];
        /* Cooperative: both warpgroups work on every tile (WG_M rows each).
         * Pingpong: warpgroup cw takes every other work item of this CTA and
         * waits for its turn (bar_order) before its main loop, so the main
         * loops alternate and each epilogue overlaps the other's main loop;
         * the ring position of an item follows from the k-blocks of the
         * items before it. */
        const int row_off = PINGPONG ? 0 : cw * WG_M;
        const int abox0 = row_off / 64;
        /* masking: which B boxes this warpgroup zeroes, and who syncs */
        constexpr int ZN = PINGPONG ? 1 : CONSUMERS;
        const int zid = PINGPONG ? 0 : cw;
        const int zbar = PINGPONG ? 1 + cw : 1;
        int s = 0;
        kiln_u32 ph = 0, order_ph = 0;
        int j = 0;

        for (int t = blockIdx.x; t < total_items; t += gridDim.x, ++j) {
            kiln_wtile T = kiln_decode(t, row_start, tile_start, G, cap, tm, tk);
            if (PINGPONG && (j & 1) != cw) {   /* the other warpgroup's item */
                const int nk = T.kb1 - T.kb0;
                s += nk % STAGES;
                ph ^= (nk / STAGES) & 1;
                if (s >= STAGES) { s -= STAGES; ph ^= 1; }
                continue;
            }
            if (PINGPONG && j > 0) {
                kiln_mbar_wait(bar_order + 8 * cw, order_ph);
                order_ph ^= 1;
            }
            int prev = -1;
            for (int kb = T.kb0; kb < T.kb1; ++kb) {
                kiln_mbar_wait(bar_full + 8 * s, ph);
                const kiln_u32 sa = sbase + s * STAGE_BYTES;
                const kiln_u32 sb = sa + A_BYTES;
                const int valid = T.e - (T.s + kb * BK);
                /* A group's last k-block: only its first ceil(valid/16) k16
                 * steps hold tokens of the group, so only those are issued
                 * (a decode-sized group of 16 tokens costs one step, not
                 * four); the rows of the last step past the group's end are
                 * zeroed (they hold the next group's tokens, or anything). */
                /* through a shuffle: provably warp-uniform, so the wgmma
                 * below stay off a divergent path (ptxas would serialise them) */
                const int nk16 = __shfl_sync(0xffffffffu, valid < BK ? (valid + 15) >> 4 : BK / 16, 0);
                const int nz = nk16 * 16 - valid;
                if (valid < BK && nz > 0) {
                    /* zero token rows [valid, nk16*16) of the boxes this
                     * warpgroup reads (its A boxes, its share of the B boxes) */
                    unsigned char *st = smem + s * STAGE_BYTES;
                    const int per_box = nz * 8;
                    const int nzb = (B_BOXES - zid + ZN - 1) / ZN;
                    for (int i = ltid; i < (MI + nzb) * per_box; i += 128) {
                        const int bx = i / per_box, w = i - bx * per_box;
                        const int box = bx < MI ? abox0 + bx : A_BOXES + zid + (bx - MI) * ZN;
                        *(uint4 *)(st + box * BOX_BYTES + (valid + (w >> 3)) * 128 + (w & 7) * 16) =
                            make_uint4(0, 0, 0, 0);
                    }
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    kiln_named_sync(zbar, ZN * 128);
                }
                /* one straight wgmma sequence per step count: a branch
                 * between the wgmma of a k-block makes ptxas inject
                 * warpgroup.arrive (C7519) */
                const bool first = kb == T.kb0;
                if (nk16 == BK / 16) kiln_kblock_mma<BK / 16>(acc, sa, sb, abox0, first);
                else if (nk16 == 1) kiln_kblock_mma<1>(acc, sa, sb, abox0, first);
                else if (nk16 == 2) kiln_kblock_mma<2>(acc, sa, sb, abox0, first);
                else kiln_kblock_mma<3>(acc, sa, sb, abox0, first);
                kiln_wg_commit();
                if (prev >= 0) {
                    kiln_wg_wait<1>();
                    if (lane == 0) kiln_mbar_arrive(bar_empty + 8 * prev);
                }
                prev = s;
                if (++s == STAGES) { s = 0; ph ^= 1; }
            }
            /* pingpong: hand the tensor cores over as soon as this item's
             * last wgmma is issued (every full-wait of it has passed, so the
             * other warpgroup's ring positions are at most one phase ahead) */
            if (PINGPONG) kiln_mbar_arrive(bar_order + 8 * (cw ^ 1));
            kiln_wg_wait<0>();   /* unconditional: keeps the accumulators' state uniform */
            if (prev >= 0 && lane == 0) kiln_mbar_arrive(bar_empty + 8 * prev);
            constexpr int OSZ = OUT_T == 2 ? 4 : 2;
            char *dg = DISCRETE ? (char *)args.d_ptrs[T.g]
                                : (char *)args.d + (long long)T.g * wn * args.ldd * OSZ;
            if (prev < 0) {
                /* an empty group (overwrite mode only): exact zeros.  A
                 * separate path, so that acc is never zeroed by hand (that
                 * merge made ptxas spill the accumulators). */
                const float z[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
                for (int i = ltid; i < WG_M * (BN / 8); i += 128) {
                    const int grow = T.n0 + row_off + i / (BN / 8);
                    const int gcol = T.k0 + 8 * (i % (BN / 8));
                    if (grow < wn && gcol < wk)
                        kiln_out8(dg + ((long long)grow * args.ldd + gcol) * OSZ, z, false);
                }
                continue;
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int i = 0; i < ACC_N; ++i) kiln_fence_reg(acc[mi][i]);

            /* ---------------------------------------------- epilogue */
            if (TMA_ST) {
                kiln_epilogue_tma_store(acc, T, row_off + wq * 16, dg, args.ldd, wn, wk, &tmap_d,
                                        (unsigned char *)stg, stg_buf, lane);
                continue;
            }
            const bool atomic = T.split > 1;
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int wrow = T.n0 + row_off + mi * 64 + wq * 16;
#pragma unroll
                for (int q = 0; q < BN / 32; ++q) {
                    if (TMA_RED) {
                        /* 16 rows x 32 fp32 columns: a 128B-swizzled box in
                         * staging, then one TMA reduce-add into dW (atomic
                         * per element, so split partials need nothing else) */
                        const int col0 = T.k0 + q * 32;
                        if (col0 >= wk) continue;
                        unsigned char *box = (unsigned char *)stg + stg_buf * 2048;
                        if (lane == 0) {
                            if (STG_BUFS == 2) kiln_bulk_wait_read<1>(); else kiln_bulk_wait_read<0>();
                        }
                        __syncwarp();
                        kiln_box_from_frag<4>(box, &acc[mi][16 * q], lane);
                        kiln_fence_async_smem();
                        __syncwarp();
                        if (wrow + 16 <= wn) {
                            if (lane == 0) {
                                kiln_tma_reduce_add_2d(kiln_smem_addr(box), &tmap_d, col0, T.g * wn + wrow);
                                kiln_bulk_commit();
                            }
                            if (STG_BUFS == 2) stg_buf ^= 1;
                        } else {
                            /* rows straddle N (N % 16 == 8): add the valid rows by hand */
#pragma unroll
                            for (int it = 0; it < 2; ++it) {
                                const int rr = it * 8 + (lane >> 2), cc = (lane & 3) * 8;
                                const int grow = wrow + rr, gcol = col0 + cc;
                                if (grow < wn && gcol < wk) {
                                    const float4 v0 = *(const float4 *)(box + rr * 128 + (((cc >> 2)) ^ (rr & 7)) * 16);
                                    const float4 v1 = *(const float4 *)(box + rr * 128 + (((cc >> 2) + 1) ^ (rr & 7)) * 16);
                                    float *dst = (float *)(dg + ((long long)grow * args.ldd + gcol) * 4);
                                    kiln_red_add4(dst, v0.x, v0.y, v0.z, v0.w);
                                    kiln_red_add4(dst + 4, v1.x, v1.y, v1.z, v1.w);
                                }
                            }
                        }
                        continue;
                    }
                    /* 16 rows x 32 columns of this warp through its staging slot */
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj) {
                        const int r = lane >> 2, c = 8 * jj + 2 * (lane & 3);
                        *(float2 *)&stg[r * STG_LD + c] =
                            make_float2(acc[mi][16 * q + 4 * jj], acc[mi][16 * q + 4 * jj + 1]);
                        *(float2 *)&stg[(r + 8) * STG_LD + c] =
                            make_float2(acc[mi][16 * q + 4 * jj + 2], acc[mi][16 * q + 4 * jj + 3]);
                    }
                    __syncwarp();
#pragma unroll
                    for (int it = 0; it < 2; ++it) {
                        const int rr = it * 8 + (lane >> 2), cc = (lane & 3) * 8;
                        const int grow = wrow + rr;
                        const int gcol = T.k0 + q * 32 + cc;
                        if (grow < wn && gcol < wk) {
                            float v[8];
                            const float4 v0 = *(const float4 *)&stg[rr * STG_LD + cc];
                            const float4 v1 = *(const float4 *)&stg[rr * STG_LD + cc + 4];
                            v[0] = v0.x; v[1] = v0.y; v[2] = v0.z; v[3] = v0.w;
                            v[4] = v1.x; v[5] = v1.y; v[6] = v1.z; v[7] = v1.w;
                            kiln_out8(dg + ((long long)grow * args.ldd + gcol) * OSZ, v, atomic);
                        }
                    }
                    __syncwarp();
                }
            }
        }
        /* the last bulk stores must finish reading shared memory before exit */
        if (TMA_BOX && lane == 0) kiln_bulk_wait<0>();
    }
}
