/*
 * sm90_gemm.cuh — persistent, warp-specialised grouped GEMM for sm_90a
 * (fprop and dgrad).  Self-contained: no includes; the generator
 * (templates/sm90.lua) pastes common/kernel_abi.h and a preamble before this
 * text.  The preamble defines:
 *
 *   KILN_ENTRY                    the extern "C" kernel name (macro)
 *   BM BN BK STAGES CONSUMERS     tile, pipeline depth, consumer warpgroups
 *   OP                            0 fprop (B K-major), 1 dgrad (B MN-major)
 *   OUT_T                         0 bf16, 1 fp16, 2 f32
 *   EPI_BIAS EPI_ROW_SCALE EPI_SCALE_BIAS EPI_ALPHA_PER_GROUP EPI_BETA
 *   RASTER                        0 group (m bands of MBAND), 1 m, 2 n
 *   MAXG MBAND CONSUMER_REGS SMEM_BYTES
 *   PINGPONG                      1: each consumer warpgroup owns whole tiles
 *   CM CN                         cluster shape (1x1, 2x1 or 1x2): the pair
 *                                 shares B (CM=2) or A (CN=2) through TMA
 *                                 multicast; set at launch, 1-D along x
 *   kiln_wgmma(acc, desc_a, desc_b, scale_d)   m64n{BN}k16 for the input type
 *
 * Roles: warpgroup 0 is the producer (one thread issues TMA loads into a
 * STAGES-deep ring guarded by full/empty mbarriers); warpgroups 1..CONSUMERS
 * issue wgmma from shared memory.  Cooperative: each consumer owns
 * BM/CONSUMERS rows of every tile.  Pingpong: each consumer owns whole tiles,
 * alternating, so one's epilogue overlaps the other's main loop.
 * The grid is persistent: cluster c walks work units c, c+clusters, ... of
 * all groups (a unit is CM x CN tiles of one group; one tile without a
 * cluster); the group of a unit is found on the device from args.sizes
 * (prefix sums built per CTA in shared memory, then a binary search).
 * Docs: docs/sm90_kernel.md.
 */

constexpr int CS = CM * CN;                    /* CTAs per cluster */

constexpr int WG_M = PINGPONG ? BM : BM / CONSUMERS;  /* rows per consumer warpgroup */
constexpr int MI = WG_M / 64;                  /* m64 sub-tiles per consumer */
constexpr int ACC_N = BN / 2;                  /* fp32 accumulators per thread per sub-tile */
constexpr int A_BYTES = BM * BK * 2;
constexpr int B_BYTES = BN * BK * 2;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
/* dgrad's B is MN-major: 64-column chunks BK*128 bytes apart (LBO), 8-row
 * groups of the reduction 1024 bytes apart (SBO). */
constexpr kiln_u32 MN_LBO = BK * 128, MN_SBO = 1024;   /* swapped: wrong results (checked) */
constexpr int STG_LD = 40;                     /* staging row pitch in floats (32 + 8 pad) */
constexpr int STG_WARP_FLOATS = 16 * STG_LD;
constexpr int OFF_STG = STAGES * STAGE_BYTES;
constexpr int OFF_SCHED = OFF_STG + CONSUMERS * 4 * STG_WARP_FLOATS * 4;
constexpr int SCHED_INTS = 2 * (MAXG + 1) + 64;
constexpr int OFF_BAR = (OFF_SCHED + SCHED_INTS * 4 + 7) & ~7;
constexpr int SMEM_USED = OFF_BAR + 2 * STAGES * 8;

static_assert(SMEM_USED + 1024 <= SMEM_BYTES, "launch shared memory too small");
static_assert(CS == 1 || CS == 2, "cluster must be 1x1, 2x1 or 1x2");
static_assert(CM == 1 || OP == 0 || (BN / 64) % 2 == 0, "dgrad with cluster m=2 needs BN 128 or 256");
static_assert(BK == 64, "BK must be 64 (one 128-byte swizzle row of 16-bit elements)");
static_assert(!PINGPONG || CONSUMERS == 2, "pingpong needs 2 consumer warpgroups");
static_assert(WG_M % 64 == 0, "BM / CONSUMERS must be a multiple of 64");
static_assert(BN % 64 == 0 && BN <= 256, "BN must be 64, 128, 192 or 256");
static_assert(MI * ACC_N <= 128, "too many accumulators per thread");

/* ------------------------------------------------------------------ PTX */

KDEV void kiln_tma_load_2d_mc(kiln_u32 dst, const kiln_tmap *map, kiln_u32 bar, int c0, int c1,
                              unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
                 :: "r"(dst), "l"((kiln_u64)map), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}

/* Arrive on the barrier at the same offset in cluster peer `rank`. */
KDEV void kiln_mbar_arrive_peer(kiln_u32 bar, kiln_u32 rank)
{
    /* Plain (.release.cta) remote arrive, as CUTLASS does: with
     * .release.cluster the main loop ran 1.3-2x slower (measured). */
    asm volatile("{ .reg .b32 ra;\n"
                 "  mapa.shared::cluster.u32 ra, %0, %1;\n"
                 "  mbarrier.arrive.shared::cluster.b64 _, [ra]; }"
                 :: "r"(bar), "r"(rank) : "memory");
}

KDEV void kiln_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* Not .aligned: callers may arrive from a diverged warp. */
KDEV void kiln_cluster_sync_unaligned()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;" ::: "memory");
}

/* Named barriers 1 and 2 order the two pingpong warpgroups' main loops. */
KDEV void kiln_bar_sync(int id)
{
    if (id == 1) asm volatile("bar.sync 1, 256;" ::: "memory");
    else asm volatile("bar.sync 2, 256;" ::: "memory");
}
KDEV void kiln_bar_arrive(int id)
{
    if (id == 1) asm volatile("bar.arrive 1, 256;" ::: "memory");
    else asm volatile("bar.arrive 2, 256;" ::: "memory");
}

/* ------------------------------------------------------- conversions */

KDEV float kiln_bf16_to_f32(unsigned short h) { return __uint_as_float(((kiln_u32)h) << 16); }
KDEV float kiln_f16_to_f32(unsigned short h)
{
    float f;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

/* Loads 8 consecutive output-typed values (16- or 32-byte aligned) as fp32. */
KDEV void kiln_load8(const void *p, float v[8])
{
    if (OUT_T == 2) {
        float4 a = *(const float4 *)p, b = *((const float4 *)p + 1);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
        uint4 u = *(const uint4 *)p;
        kiln_u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            unsigned short lo = (unsigned short)(w[i] & 0xFFFF), hi = (unsigned short)(w[i] >> 16);
            v[2 * i] = OUT_T == 1 ? kiln_f16_to_f32(lo) : kiln_bf16_to_f32(lo);
            v[2 * i + 1] = OUT_T == 1 ? kiln_f16_to_f32(hi) : kiln_bf16_to_f32(hi);
        }
    }
}

KDEV void kiln_store8(void *p, const float v[8])
{
    if (OUT_T == 2) {
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

struct kiln_tile {
    int g;        /* group */
    int row0;     /* first row of the tile (absolute) */
    int row_end;  /* end of the group's rows, clamped to capacity */
    int col0;     /* first output column */
};

/* Decodes cluster work unit t (a CM x CN block of tiles of one group) into
 * this CTA's tile: rank_m / rank_n pick the tile inside the unit. */
KDEV kiln_tile kiln_decode(int t, const int *row_start, const int *tile_start, int G, int cap,
                           int tn, int rank_m, int rank_n)
{
    int lo = 0, hi = G;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (tile_start[mid] <= t) lo = mid; else hi = mid;
    }
    kiln_tile T;
    T.g = lo;
    int local = t - tile_start[lo];
    int gs = min(row_start[lo], cap), ge = min(row_start[lo + 1], cap);
    int tm = ((ge - gs + BM - 1) / BM + CM - 1) / CM;   /* units along m */
    int m, n;
    if (RASTER == 1) {          /* m fastest over the whole group */
        m = local % tm; n = local / tm;
    } else if (RASTER == 2) {   /* n fastest */
        n = local % tn; m = local / tn;
    } else {                    /* bands of MBAND m-tiles; m fastest inside a band */
        int band = local / (MBAND * tn);
        int r = local - band * (MBAND * tn);
        int mb0 = band * MBAND;
        int mc = min(MBAND, tm - mb0);
        m = mb0 + r % mc; n = r / mc;
    }
    T.row0 = gs + (m * CM + rank_m) * BM;   /* may lie past the group: then nothing is stored */
    T.row_end = ge;
    T.col0 = (n * CN + rank_n) * BN;
    return T;
}

/* ------------------------------------------------------------ kernel */

/* Clusters are not compiled in (__cluster_dims__): the launcher sets
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = {CM*CN, 1, 1} on a 1-D grid, as
 * runtime/launch.c does; the kernel traps when launched otherwise. */
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

    const int tid = threadIdx.x;
    const int G = args.groups;
    const int cap = (int)(args.capacity < 0x7fffffffLL ? args.capacity : 0x7fffffffLL);
    const int n_out = (int)(OP == 0 ? args.n : args.k);   /* output columns */
    const int k_red = (int)(OP == 0 ? args.k : args.n);   /* reduction length */
    const int wn = (int)args.n;                           /* weight rows per group */
    const int tn = ((n_out + BN - 1) / BN + CN - 1) / CN;   /* units along n */
    const int crank = CS > 1 ? (int)(blockIdx.x % CS) : 0;   /* 1-D clusters along x */
    const int rank_m = CM > 1 ? crank : 0, rank_n = CN > 1 ? crank : 0;
    const int cid = (int)blockIdx.x / CS, ncl = (int)gridDim.x / CS;
    const int nkb = (k_red + BK - 1) / BK;

    if (CS > 1) {
        kiln_u32 nct;
        asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nct));
        if (nct != (kiln_u32)CS) __trap();   /* launched without the cluster attribute */
    }
    if (G > MAXG || G <= 0) {
        /* The runtime must not send more than MAXG groups here. */
        if (G > MAXG) __trap();
        return;
    }

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kiln_mbar_init(bar_full + 8 * s, 1);
            kiln_mbar_init(bar_empty + 8 * s, (PINGPONG ? 4 : CONSUMERS * 4) * CS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        kiln_tma_prefetch_desc(&tmap_a);
        kiln_tma_prefetch_desc(&tmap_b);
    }

    /* --- per-CTA schedule: row offsets and tile offsets of every group --- */
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
    int tiles_local = 0;
    int tcnt[(MAXG + NT - 1) / NT];
#pragma unroll
    for (int i = 0; i < (MAXG + NT - 1) / NT; ++i) {
        int g = g0 + i;
        tcnt[i] = 0;
        if (g < g1) {
            row_start[g] = run;
            int gs = min(run, cap), ge = min(run + cnt[i], cap);
            tcnt[i] = (((ge - gs + BM - 1) / BM + CM - 1) / CM) * tn;
            tiles_local += tcnt[i];
            run += cnt[i];
        }
    }
    int total_tiles;
    int tbase = kiln_block_exscan(tiles_local, scratch, &total_tiles);
#pragma unroll
    for (int i = 0; i < (MAXG + NT - 1) / NT; ++i) {
        int g = g0 + i;
        if (g < g1) { tile_start[g] = tbase; tbase += tcnt[i]; }
    }
    if (tid == 0) {
        row_start[G] = total_rows;
        tile_start[G] = total_tiles;
        if (blockIdx.x == 0 && total_rows > cap && args.overflow) *args.overflow = 1;
    }
    if (CS > 1) kiln_cluster_sync();   /* peers' barriers are initialised */
    else __syncthreads();

    const int wg = tid / 128;
    if (wg == 0) {
        /* ------------------------------------------------ producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (tid == 0) {
            int s = 0;
            kiln_u32 ph = 0;
            for (int t = cid; t < total_tiles; t += ncl) {
                kiln_tile T = kiln_decode(t, row_start, tile_start, G, cap, tn, rank_m, rank_n);
                for (int kb = 0; kb < nkb; ++kb) {
                    kiln_mbar_wait(bar_empty + 8 * s, ph ^ 1);
                    const kiln_u32 full = bar_full + 8 * s;
                    kiln_mbar_expect_tx(full, STAGE_BYTES);
                    const kiln_u32 sa = sbase + s * STAGE_BYTES;
                    const kiln_u32 sb = sa + A_BYTES;
                    /* With a cluster, each CTA loads half of the shared operand
                     * and multicasts it to both; the rest is its own. */
                    if (CN == 2)
                        kiln_tma_load_2d_mc(sa + crank * (BM / 2) * 128, &tmap_a, full, kb * BK,
                                            T.row0 + crank * (BM / 2), 3);
                    else
                        kiln_tma_load_2d(sa, &tmap_a, full, kb * BK, T.row0);
                    if (OP == 0) {
                        if (CM == 2)
                            kiln_tma_load_2d_mc(sb + crank * (BN / 2) * 128, &tmap_b, full, kb * BK,
                                                T.g * wn + T.col0 + crank * (BN / 2), 3);
                        else
                            kiln_tma_load_2d(sb, &tmap_b, full, kb * BK, T.g * wn + T.col0);
                    } else {
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j) {
                            if (CM == 2) {
                                if ((j & 1) == crank)
                                    kiln_tma_load_2d_mc(sb + j * (BK * 128), &tmap_b, full,
                                                        T.col0 + 64 * j, T.g * wn + kb * BK, 3);
                            } else {
                                kiln_tma_load_2d(sb + j * (BK * 128), &tmap_b, full, T.col0 + 64 * j,
                                                 T.g * wn + kb * BK);
                            }
                        }
                    }
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
        float *stg = staging + (cw * 4 + wq) * STG_WARP_FLOATS;
        float acc[MI][ACC_N];
        /* Cooperative: both warpgroups work on every tile (WG_M rows each).
         * Pingpong: warpgroup cw takes every other tile of this CTA, so one
         * runs its epilogue while the other runs its main loop; the ring
         * position of a tile follows from its rank among this CTA's tiles. */
        const int t_first = PINGPONG ? cid + cw * ncl : cid;
        const int t_step = PINGPONG ? 2 * ncl : ncl;
        const int row_off = PINGPONG ? 0 : cw * WG_M;
        int s = 0;
        kiln_u32 ph = 0;
        if (PINGPONG && cw == 1) {
            s = nkb % STAGES;
            ph = (nkb / STAGES) & 1;
        }

        /* Pingpong order: a warpgroup starts waiting on the ring only after
         * the other has passed every wait of the tile before, so a parity
         * wait never sees a phase two laps old.  WG0 waits on barrier 1 and
         * signals 2; WG1 the reverse; the counts are balanced at the end. */
        const int my_bar = cw == 0 ? 1 : 2, other_bar = cw == 0 ? 2 : 1;
        int n_mine = 0;
        for (int t = t_first; t < total_tiles; t += t_step) {
            kiln_tile T = kiln_decode(t, row_start, tile_start, G, cap, tn, rank_m, rank_n);
            if (PINGPONG && (cw == 1 || n_mine > 0)) kiln_bar_sync(my_bar);
            ++n_mine;
            int prev = 0;
            for (int kb = 0; kb < nkb; ++kb) {
                kiln_mbar_wait(bar_full + 8 * s, ph);
                const kiln_u32 sa = sbase + s * STAGE_BYTES + row_off * 128;
                const kiln_u32 sb = sbase + s * STAGE_BYTES + A_BYTES;
                kiln_wg_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {
                    kiln_u64 db = OP == 0 ? kiln_desc(sb + kk * 32, 16, 1024)
                                          : kiln_desc(sb + kk * 16 * 128, MN_LBO, MN_SBO);
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) {
                        kiln_u64 da = kiln_desc(sa + mi * 64 * 128 + kk * 32, 16, 1024);
                        kiln_wgmma(acc[mi], da, db, (kb | kk) != 0);
                    }
                }
                kiln_wg_commit();
                if (kb > 0) {
                    kiln_wg_wait<1>();
                    if (lane == 0) {
                        kiln_mbar_arrive(bar_empty + 8 * prev);
                        if (CS > 1) kiln_mbar_arrive_peer(bar_empty + 8 * prev, crank ^ 1);
                    }
                }
                prev = s;
                if (++s == STAGES) { s = 0; ph ^= 1; }
            }
            if (PINGPONG) kiln_bar_arrive(other_bar);
            kiln_wg_wait<0>();
            if (lane == 0) {
                kiln_mbar_arrive(bar_empty + 8 * prev);
                if (CS > 1) kiln_mbar_arrive_peer(bar_empty + 8 * prev, crank ^ 1);
            }
            if (PINGPONG) {   /* skip the other warpgroup's tile in the ring */
                s += nkb % STAGES;
                ph ^= (nkb / STAGES) & 1;
                if (s >= STAGES) { s -= STAGES; ph ^= 1; }
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int i = 0; i < ACC_N; ++i) kiln_fence_reg(acc[mi][i]);

            /* ---------------------------------------------- epilogue */
            float alpha = args.alpha;
            if (EPI_ALPHA_PER_GROUP && args.alpha_ptr) alpha = args.alpha_ptr[T.g];
            const float *rs = EPI_ROW_SCALE ? args.row_scale : (const float *)0;
            const bool use_bias = EPI_BIAS && args.bias;
            const bool use_c = EPI_BETA && args.c && args.beta != 0.0f;
            const bool scale_bias = (EPI_SCALE_BIAS || args.scale_bias) && rs;
            constexpr int OSZ = OUT_T == 2 ? 4 : 2;
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int wrow = T.row0 + row_off + mi * 64 + wq * 16;
#pragma unroll
                for (int q = 0; q < BN / 32; ++q) {
                    /* 16 rows x 32 columns of this warp through its staging slot */
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int r = lane >> 2, c = 8 * j + 2 * (lane & 3);
                        *(float2 *)&stg[r * STG_LD + c] =
                            make_float2(acc[mi][16 * q + 4 * j], acc[mi][16 * q + 4 * j + 1]);
                        *(float2 *)&stg[(r + 8) * STG_LD + c] =
                            make_float2(acc[mi][16 * q + 4 * j + 2], acc[mi][16 * q + 4 * j + 3]);
                    }
                    __syncwarp();
#pragma unroll
                    for (int it = 0; it < 2; ++it) {
                        const int rr = it * 8 + (lane >> 2), cc = (lane & 3) * 8;
                        const int grow = wrow + rr;
                        const int gcol = T.col0 + q * 32 + cc;
                        if (grow < T.row_end && gcol < n_out) {
                            float v[8];
                            const float4 v0 = *(const float4 *)&stg[rr * STG_LD + cc];
                            const float4 v1 = *(const float4 *)&stg[rr * STG_LD + cc + 4];
                            v[0] = v0.x; v[1] = v0.y; v[2] = v0.z; v[3] = v0.w;
                            v[4] = v1.x; v[5] = v1.y; v[6] = v1.z; v[7] = v1.w;
                            float sacc = alpha;
                            float sb = 1.0f;
                            if (rs) {
                                float rsv = rs[grow];
                                sacc *= rsv;
                                if (scale_bias) sb = rsv;
                            }
#pragma unroll
                            for (int e = 0; e < 8; ++e) v[e] *= sacc;
                            if (use_bias) {
                                float b[8];
                                kiln_load8((const char *)args.bias +
                                               ((long long)T.g * args.ld_bias + gcol) * OSZ, b);
#pragma unroll
                                for (int e = 0; e < 8; ++e) v[e] += sb * b[e];
                            }
                            if (use_c) {
                                float cv[8];
                                kiln_load8((const char *)args.c +
                                               ((long long)grow * args.ldc + gcol) * OSZ, cv);
#pragma unroll
                                for (int e = 0; e < 8; ++e) v[e] += args.beta * cv[e];
                            }
                            kiln_store8((char *)args.d + ((long long)grow * args.ldd + gcol) * OSZ, v);
                        }
                    }
                    __syncwarp();
                }
            }
        }
        if (PINGPONG) {
            const int mine = cid < total_tiles ? (total_tiles - cid + ncl - 1) / ncl : 0;
            const int n0 = (mine + 1) / 2, n1 = mine / 2;
            /* WG0 synced max(n0-1,0) times on 1, WG1 arrived n1 times there;
             * WG1 synced n1 times on 2, WG0 arrived n0 times there. */
            if (cw == 0 && n1 > max(n0 - 1, 0)) kiln_bar_sync(1);
            if (cw == 1 && n0 > n1) kiln_bar_sync(2);
        }
    }
    /* A CTA must outlive its peer's multicasts into it and remote arrivals.
     * Warps reconverge first: in the producer warp one lane ran the loop. */
    if (CS > 1) {
        __syncwarp();
        kiln_cluster_sync_unaligned();
    }
}
