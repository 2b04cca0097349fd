/*
 * sm90_common.cuh — the sm90 device layer that sm90_gemm.cuh (fprop, dgrad)
 * and sm90_wgrad.cuh are written on:
 *
 *   - inline-PTX wrappers (shared-memory addresses, mbarriers, TMA loads,
 *     multicast and reduce-add, wgmma fences and descriptors, clusters,
 *     named barriers), bf16/fp16 conversions;
 *   - the tile geometry and the shared-memory carve (ring, staging,
 *     schedule arrays, barriers);
 *   - the per-CTA group schedule (block scan of the group sizes into row and
 *     work-item prefix sums), the group lookup and the raster of a group's
 *     tiles;
 *   - the producer/consumer skeleton: roles, the STAGES-deep ring of
 *     full/empty mbarriers, slot release, and the one pingpong protocol;
 *   - the staging/store path from accumulators to 8-value row pieces.
 *
 * Self-contained: no includes.  The templates (sm90.lua, sm90_wgrad.lua)
 * paste common/kernel_abi.h and a preamble, then this file, then the
 * kernel's own file.  The preamble defines BM BN BK STAGES CONSUMERS IN_ESZ
 * CM CN CS KC PINGPONG OUT_T RASTER MBAND MAXG CONSUMER_REGS SMEM_BYTES.
 */

#pragma nv_diag_suppress 177
#define KDEV __device__ __forceinline__
typedef unsigned int kiln_u32;
typedef unsigned long long kiln_u64;

constexpr int NT = 128 * (CONSUMERS + 1);      /* threads per CTA: producer + consumers */
constexpr int NWARPS = NT / 32;

/* ------------------------------------------------------------ geometry */

/* SWAP_AB (fprop/dgrad): a warp group's m64 sub-tiles are BN / CONSUMERS
 * of the tile's weight columns, and each spans the tile's BM tokens (wgmma's
 * N), so BM is any multiple of 8. */
constexpr int WG_M = SWAP_AB ? BN / CONSUMERS : PINGPONG ? BM : BM / CONSUMERS;  /* m64 rows per consumer warpgroup */
constexpr int MI = WG_M / 64;                  /* m64 sub-tiles per consumer */
constexpr int ACC_N = (SWAP_AB ? BM : BN) / 2;  /* fp32 accumulators per thread per sub-tile */
constexpr int OSZ = OUT_T == 2 ? 4 : 2;        /* bytes per output element */
/* One 128B-swizzled box: 64 rows of one k-block (128 bytes: BK inputs) of
 * a K-major operand, or BK rows of 64 16-bit values of an MN-major one. */
constexpr int BOX_BYTES = 64 * 128;
constexpr int A_BYTES = BM * 128;             /* BM rows (tokens) of 128 bytes */
constexpr int B_BYTES = BN / 64 * BOX_BYTES;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
/* MN-major operands (dgrad's B, both of wgrad's), 128-byte swizzle: 64-wide
 * chunks of the M/N dimension are one box apart (LBO), 8-row groups of the
 * reduction 1024 bytes apart (SBO).  Swapped: wrong results (checked). */
constexpr kiln_u32 MN_LBO = BOX_BYTES, MN_SBO = 1024;
constexpr int STG_LD = 40;                     /* staging row pitch in floats (32 + 8 pad) */
constexpr int STG_SLOT_BYTES = 16 * STG_LD * 4;  /* one warp's padded 16x32 fp32 slot */
constexpr int SCHED_INTS = 2 * (MAXG + 1) + 64;  /* row starts, item starts, scan scratch */

static_assert(BK * IN_ESZ == 128, "a k-block must be one 128-byte swizzle row (BK 64 for 16-bit inputs, 128 for 8-bit)");
static_assert(!PINGPONG || CONSUMERS == 2, "pingpong needs 2 consumer warpgroups");
static_assert(WG_M % 64 == 0, "rows per consumer warpgroup must be a multiple of 64");
static_assert(BN % 64 == 0 && BN <= 256, "BN must be 64, 128, 192 or 256");
static_assert(!SWAP_AB || (BM % 8 == 0 && BM <= 256 && !PINGPONG), "swap_ab: BM a multiple of 8, cooperative");
static_assert(MI * ACC_N <= (PINGPONG ? 192 : 128), "too many accumulators per thread");

/* The carve of the dynamic shared memory, from a 1024-byte aligned base:
 * the ring, CONSUMERS*4 warps' staging of STG_WARP bytes each, the schedule
 * arrays, then the full and empty mbarriers of the ring. */
template <int STG_WARP, int EXTRA = 0> struct kiln_layout {
    static constexpr int OFF_STG = STAGES * STAGE_BYTES;
    /* EXTRA bytes after the staging, 1024-aligned (staging is a multiple
     * of 1024): a template's own constant data (wgrad dbias: a ones tile) */
    static constexpr int OFF_EXTRA = OFF_STG + CONSUMERS * 4 * STG_WARP;
    static constexpr int OFF_SCHED = OFF_EXTRA + EXTRA;
    static constexpr int OFF_BAR = (OFF_SCHED + SCHED_INTS * 4 + 7) & ~7;
    static constexpr int USED = OFF_BAR + 2 * STAGES * 8;
    /* The pingpong turn's two mbarriers sit in ints 16..19 of the scan
     * scratch, which the scan never touches (it uses [0, NWARPS) and
     * [32, 32 + NWARPS)): the launch's shared-memory size, computed by the
     * Lua rules, stays exact. */
    static_assert(USED + 1024 <= SMEM_BYTES, "launch shared memory too small");
    static_assert((OFF_SCHED + (2 * (MAXG + 1) + 16) * 4) % 8 == 0, "mbarriers need 8-byte alignment");
};
static_assert(NWARPS <= 16, "the scan scratch must leave ints 16..19 to the pingpong turn");

/* ------------------------------------------------------------------ PTX */

KDEV kiln_u32 kiln_smem_addr(const void *p)
{
    kiln_u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
                 : "=r"(r) : "l"(p));
    return r;
}

KDEV void kiln_mbar_init(kiln_u32 bar, kiln_u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

KDEV void kiln_mbar_expect_tx(kiln_u32 bar, kiln_u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

KDEV void kiln_mbar_arrive(kiln_u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
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

/* Arrive on the barrier at `bar`'s offset in cluster peers 0..n-1, with
 * one release at cluster scope for all of them (a fence, then relaxed
 * arrivals): an arrival released at cluster scope for each peer is a fence
 * each, about 0.33 us (H100, eighty-ninth session).  Hands over shared
 * memory a peer then reads or writes (sm90_gemm_cut.cuh's k-cut clusters). */
KDEV void kiln_mbar_arrive_peers_release(kiln_u32 bar, int n)
{
    asm volatile("fence.acq_rel.cluster;" ::: "memory");
    for (int r = 0; r < n; ++r)
        asm volatile("{ .reg .b32 ra;\n"
                     "  mapa.shared::cluster.u32 ra, %0, %1;\n"
                     "  mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [ra]; }"
                     :: "r"(bar), "r"(r) : "memory");
}

/* 16 bytes to shared address `addr` of cluster peer `rank`, completing 16
 * transaction bytes on the mbarrier at `bar`'s offset there: a store that
 * does not wait for the peer (sm90_gemm_cut.cuh, kiln_kcut_finish). */
KDEV void kiln_st_async_peer128(kiln_u32 addr, kiln_u32 bar, kiln_u32 rank, float x, float y, float z, float w)
{
    asm volatile("{ .reg .b32 ra, rb;\n"
                 "  mapa.shared::cluster.u32 ra, %0, %2;\n"
                 "  mapa.shared::cluster.u32 rb, %1, %2;\n"
                 "  st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [ra], {%3, %4, %5, %6}, [rb]; }"
                 :: "r"(addr), "r"(bar), "r"(rank), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

/* A parity wait; ACQ_CLUSTER: one that acquires at cluster scope, so what
 * the arrivals' releases published (kiln_mbar_arrive_peers_release) is
 * then visible. */
template <bool ACQ_CLUSTER = false> KDEV void kiln_mbar_wait(kiln_u32 bar, kiln_u32 parity)
{
    kiln_u32 ok = 0;
    do {
        if constexpr (ACQ_CLUSTER)
            asm volatile("{ .reg .pred p;\n"
                         "  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                         "  selp.u32 %0, 1, 0, p; }"
                         : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
        else
            asm volatile("{ .reg .pred p;\n"
                         "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "  selp.u32 %0, 1, 0, p; }"
                         : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    } while (!ok);
}

KDEV void kiln_tma_load_2d(kiln_u32 dst, const kiln_tmap *map, kiln_u32 bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(dst), "l"((kiln_u64)map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}

KDEV void kiln_tma_load_2d_mc(kiln_u32 dst, const kiln_tmap *map, kiln_u32 bar, int c0, int c1,
                              unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
                 :: "r"(dst), "l"((kiln_u64)map), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}

/* evict_first: the stored lines are the first L2 gives up (a hint to L2's
 * replacement, not a bypass).  Where it pays is the caller's to say: wgrad
 * tiles of one k-block ran 5-12% faster with it in some kernels and up to
 * 5% slower in others (sm90_wgrad.cuh, EPI_EVICT_FIRST). */
KDEV kiln_u64 kiln_policy_evict_first()
{
    kiln_u64 pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
KDEV void kiln_tma_store_2d(kiln_u32 src, const kiln_tmap *map, int c0, int c1,
                            bool evict_first = false)
{
    if (evict_first)
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint"
                     " [%0, {%2, %3}], [%1], %4;"
                     :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1), "l"(kiln_policy_evict_first())
                     : "memory");
    else
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                     :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1) : "memory");
}
/* The same through a 3-D map (launch.c's maps in chunks: c0 within a
 * chunk, c1 the chunk, c2 the row). */
KDEV void kiln_tma_store_3d(kiln_u32 src, const kiln_tmap *map, int c0, int c1, int c2,
                            bool evict_first = false)
{
    if (evict_first)
        asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint"
                     " [%0, {%2, %3, %4}], [%1], %5;"
                     :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2),
                        "l"(kiln_policy_evict_first())
                     : "memory");
    else
        asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
                     :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
KDEV void kiln_tma_reduce_add_2d(kiln_u32 src, const kiln_tmap *map, int c0, int c1)
{
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3}], [%1];"
                 :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1) : "memory");
}
KDEV void kiln_tma_reduce_add_3d(kiln_u32 src, const kiln_tmap *map, int c0, int c1, int c2)
{
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4}], [%1];"
                 :: "l"((kiln_u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
/* Brings `bytes` (a multiple of 16) at global p (16-byte aligned) into L2;
 * nothing waits for it. */
KDEV void kiln_prefetch_l2(const void *p, kiln_u32 bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"((kiln_u64)p), "r"(bytes) : "memory");
}
/* Brings the box of `map` at {c0, c1} into L2; nothing waits for it. */
KDEV void kiln_tma_prefetch_2d(const kiln_tmap *map, int c0, int c1)
{
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];"
                 :: "l"((kiln_u64)map), "r"(c0), "r"(c1) : "memory");
}

/* 4 bytes from global memory into shared memory, asynchronously (cp.async,
 * no register holds them); kiln_cp_async_arrive then counts them on an
 * mbarrier. */
KDEV void kiln_cp_async4(kiln_u32 dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(dst), "l"(src) : "memory");
}

/* 16 bytes from global memory into shared memory, asynchronously through
 * the L2 only (cp.async.cg: data other CTAs wrote and fenced), in the
 * thread's current group (kiln_cp_async_commit, kiln_cp_async_wait). */
KDEV void kiln_cp_async16(kiln_u32 dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
KDEV void kiln_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* Until at most N of this thread's groups are pending; the landed bytes are
 * then visible to this thread. */
template <int N> KDEV void kiln_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
KDEV float4 kiln_lds128(kiln_u32 a)
{
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a) : "memory");
    return v;
}
KDEV void kiln_sts128(kiln_u32 a, float x, float y, float z, float w)
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" :: "r"(a), "f"(x), "f"(y), "f"(z), "f"(w)
                 : "memory");
}

/* An arrival on bar once this thread's cp.async so far have landed; .noinc:
 * the barrier's count includes it (one per arriving thread). */
KDEV void kiln_cp_async_arrive(kiln_u32 bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}

KDEV void kiln_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> KDEV void kiln_bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
template <int N> KDEV void kiln_bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}

/* generic-proxy writes to shared memory, made visible to the bulk copy engine */
KDEV void kiln_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

KDEV void kiln_stmatrix_x4(kiln_u32 addr, kiln_u32 r0, kiln_u32 r1, kiln_u32 r2, kiln_u32 r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

KDEV void kiln_tma_prefetch_desc(const kiln_tmap *map)
{
    asm volatile("prefetch.tensormap [%0];" :: "l"((kiln_u64)map) : "memory");
}

/* Maps re-pointed on the device (per-expert weights in sm90_gemm_roles.cuh,
 * per-expert dW in sm90_wgrad.cuh): writes a copy of `src` (a map of the
 * kernel parameters) into `slot` in global memory (TMA reads maps from
 * there, not from shared memory), points it at ptrs[g] with
 * tensormap.replace, and orders those generic-proxy writes before the TMA
 * unit's reads of the slot with the tensormap proxy fences; then prefetches
 * it into the descriptor cache.  The caller issues the TMA operations that
 * use it, and must know that none still reads the slot's old contents.
 * Slots are indexed by kiln_smid(): no two CTAs of a kernel that uses them
 * share an SM (its template asks for more than half of the SM's shared
 * memory), so a slot has one writer at a time, also with concurrent
 * launches on several streams, and nothing is allocated per call. */
constexpr int KILN_SLOT_SMS = 256;      /* %smid bound: Hopper has at most 144 SMs */

KDEV kiln_u32 kiln_smid()
{
    kiln_u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    if (sm >= KILN_SLOT_SMS) __trap();
    return sm;
}

/* The reader's half of a re-pointed map: orders the tensormap proxy's
 * reads of `slot` after the writer's release, then prefetches it into the
 * descriptor cache. */
KDEV void kiln_tmap_acquire(const kiln_tmap *slot)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;"
                 :: "l"((kiln_u64)slot) : "memory");
    kiln_tma_prefetch_desc(slot);
}

KDEV void kiln_tmap_repoint(kiln_tmap *slot, const kiln_tmap *src, const void *const *ptrs, int g)
{
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)slot;
#pragma unroll
    for (int i = 0; i < 8; ++i) d[i] = s[i];
    const kiln_u64 gaddr = (kiln_u64)__cvta_generic_to_global(slot);
    asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;"
                 :: "l"(gaddr), "l"((kiln_u64)ptrs[g]) : "memory");
    asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
    kiln_tmap_acquire(slot);
}

/* kiln_tmap_repoint for a whole warp (every lane calls it): the copy is
 * made in `stage` (128 free bytes of shared memory, 128-byte aligned),
 * pointed at ptr there, and written to `slot` by tensormap.cp_fenceproxy,
 * which makes the slot's 128 bytes strong GPU-scope stores and orders only
 * them before the tensormap proxy; lane 0 then acquires the slot and
 * prefetches it.  kiln_tmap_repoint's release fence compiles to MEMBAR.GPU
 * and ERRBAR, a wait for every earlier memory operation of the thread:
 * in the discrete wgrad kernels (whose lane 0 has just issued a tile's
 * bulk stores) ncu put 9% of all warp samples on that ERRBAR
 * (docs/sm90_wgrad.md, forty-third session). */
KDEV void kiln_tmap_repoint_warp(kiln_tmap *slot, const kiln_tmap *src, const void *ptr,
                                 unsigned char *stage, int lane)
{
    if (lane < 8) ((uint4 *)stage)[lane] = ((const uint4 *)src)[lane];
    __syncwarp();
    const kiln_u32 s = kiln_smem_addr(stage);
    if (lane == 0)
        asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                     :: "r"(s), "l"((kiln_u64)ptr) : "memory");
    __syncwarp();
    asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu"
                 ".sync.aligned [%0], [%1], 128;"
                 :: "l"((kiln_u64)__cvta_generic_to_global(slot)), "r"(s) : "memory");
    if (lane == 0) kiln_tmap_acquire(slot);
}

/* Programmatic dependent launch (runtime/launch.h, KILN_PDL=1).  wait:
 * blocks until the grids this one depends on have completed and their
 * writes are visible (returns at once when launched without the
 * attribute); every read of sizes, A, B, C, bias, scales or the output
 * must come after it.  launch_dependents: lets the next grid in the stream
 * be scheduled (its own wait still orders its reads after our completion). */
KDEV void kiln_pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
KDEV void kiln_pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" :::); }

KDEV void kiln_red_add4(float *p, float a, float b, float c, float d)
{
    asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

KDEV void kiln_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

KDEV void kiln_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <int N> KDEV void kiln_wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

KDEV void kiln_fence_reg(float &x) { asm volatile("" : "+f"(x) :: "memory"); }

/* Shared-memory matrix descriptor, 128-byte swizzle. */
KDEV kiln_u64 kiln_desc(kiln_u32 saddr, kiln_u32 lbo, kiln_u32 sbo)
{
    return (kiln_u64)((saddr & 0x3FFFF) >> 4) | ((kiln_u64)((lbo >> 4) & 0x3FFF) << 16) |
           ((kiln_u64)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

/* The descriptor of the matrix `bytes` (a multiple of 16) past d's: one
 * 32-bit add to the address field in the low word.  No carry leaves the
 * field: shared addresses stay below 256 KiB (14 bits of 16-byte units).
 * Rebuilding each descriptor from its address cost about 12 uniform
 * instructions a wgmma (SASS, fifty-third session). */
KDEV kiln_u64 kiln_desc_add(kiln_u64 d, kiln_u32 bytes)
{
    return (d & ~0xFFFFFFFFull) | (kiln_u32)((kiln_u32)d + (bytes >> 4));
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

/* This CTA's place in the grid of clusters of CS x KC CTAs: CS = CM x CN
 * CTAs sharing loads (multicast), each the first of KC CTAs that cut its
 * tiles' reduction along k (sm90_gemm_cut.cuh, KCUT; KC is 1 elsewhere).
 * Clusters are not compiled in (__cluster_dims__): the launcher sets
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = {CS x KC, 1, 1} on a 1-D grid, as
 * runtime/launch.c does, so a cluster is that many consecutive CTAs along
 * x; a kernel launched otherwise traps rather than wait forever on its
 * peer. */
static_assert(CS == 1 || CS == 2, "cluster must be 1x1, 2x1 or 1x2");
static_assert(KC == 1 || (CS == 1 && (KC == 2 || KC == 4 || KC == 8)), "k_cluster: 2, 4 or 8 CTAs, no pair");
constexpr int CTAS = CS * KC;   /* CTAs in a cluster */

struct kiln_cta {
    int crank;           /* rank in the cluster (KC > 1: the piece of the reduction) */
    int rank_m, rank_n;  /* the rank along m (CM = 2) or n (CN = 2), else 0 */
    int cid;             /* cluster id */
    int ncl;             /* clusters in the grid */
};

/* The grid's clusters, read afresh (asm volatile) wherever a walk steps:
 * ptxas kept the value from the kernel's start and spilled it in the
 * producer's 24 registers rather than load it again. */
KDEV int kiln_grid_clusters()
{
    kiln_u32 n;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
    return (int)n / CTAS;
}

KDEV kiln_cta kiln_cluster_place()
{
    if (CTAS > 1) {
        kiln_u32 nct;
        asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nct));
        if (nct != (kiln_u32)CTAS) __trap();
    }
    const int crank = CTAS > 1 ? (int)(blockIdx.x % CTAS) : 0;
    return {crank, CM > 1 ? crank : 0, CN > 1 ? crank : 0, (int)blockIdx.x / CTAS, (int)gridDim.x / CTAS};
}

/* At the kernel's end: a CTA must outlive its peer's multicasts into it,
 * the peer's arrivals on its barriers and (KC > 1) the peers' reads of its
 * shared memory.  Warps reconverge first: in the producer warp one lane
 * ran the loop. */
KDEV void kiln_cluster_retire()
{
    if (CTAS > 1) {
        __syncwarp();
        kiln_cluster_sync_unaligned();
    }
}

/* A named barrier among nthreads consumer threads (0 is __syncthreads;
 * sm90_gemm's epilogue in a held ring slot uses 1, its split tiles' count
 * 2; wgrad's tail masking
 * uses 3, or 3 + cw in pingpong). */
KDEV void kiln_named_sync(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(nthreads) : "memory");
}

/* ------------------------------------------------------- conversions */

KDEV float kiln_bf16_to_f32(unsigned short h) { return __uint_as_float(((kiln_u32)h) << 16); }
KDEV float kiln_f16_to_f32(unsigned short h)
{
    float f;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

KDEV kiln_u32 kiln_pack2(float lo, float hi)
{
    kiln_u32 r;
    if (OUT_T == 1)
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
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

/* Stores 8 fp32 values as consecutive output-typed values (16- or 32-byte aligned). */
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

/* ------------------------------------------------------ shared memory */

extern __shared__ __align__(1024) unsigned char kiln_smem_raw[];

struct kiln_smem {
    unsigned char *base;  /* generic pointer to the 1024-byte aligned base */
    kiln_u32 sbase;       /* its shared-window address */
    unsigned char *staging;
    int *row_start;       /* [MAXG + 1]: first row (token) of each group */
    int *tile_start;      /* [MAXG + 1]: first work item of each group */
    int *scratch;         /* 64 ints for the block scan */
    kiln_u32 bar_full, bar_empty;
    kiln_u32 bar_turn;    /* the pingpong turn: WG0's mbarrier, WG1's at + 8 */
    KDEV kiln_u32 stage(int s) const { return sbase + s * STAGE_BYTES; }
    KDEV kiln_u32 full(int s) const { return bar_full + 8 * s; }
    KDEV kiln_u32 empty(int s) const { return bar_empty + 8 * s; }
};

template <class L> KDEV kiln_smem kiln_carve()
{
    const kiln_u32 raw = kiln_smem_addr(kiln_smem_raw);
    kiln_smem m;
    m.sbase = (raw + 1023u) & ~1023u;
    m.base = kiln_smem_raw + (m.sbase - raw);
    m.staging = m.base + L::OFF_STG;
    m.row_start = (int *)(m.base + L::OFF_SCHED);
    m.tile_start = m.row_start + (MAXG + 1);
    m.scratch = m.tile_start + (MAXG + 1);
    m.bar_full = m.sbase + L::OFF_BAR;
    m.bar_empty = m.bar_full + STAGES * 8;
    m.bar_turn = m.sbase + L::OFF_SCHED + (2 * (MAXG + 1) + 16) * 4;   /* see kiln_layout */
    return m;
}

/* Thread 0: the ring's barriers (full: the producer's one arrival plus the
 * transaction bytes, and full_count - 1 more; empty: `empty_count`
 * consumer-warp arrivals) and the pingpong turn's (a warpgroup's 128
 * threads; turn_count other arrivals where a template uses the pair for
 * something else, as sm90_gemm's k-cut clusters do). */
KDEV void kiln_init_ring(const kiln_smem &m, kiln_u32 empty_count, kiln_u32 full_count = 1,
                         kiln_u32 turn_count = 128)
{
    for (int s = 0; s < STAGES; ++s) {
        kiln_mbar_init(m.full(s), full_count);
        kiln_mbar_init(m.empty(s), empty_count);
    }
    kiln_mbar_init(m.bar_turn, turn_count);
    kiln_mbar_init(m.bar_turn + 8, turn_count);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* ----------------------------------------------------------- schedule */

/* Sizes come from the device and may be anything.  Every row count and
 * running total below is kept in [0, cap + 1]: a count is clamped there, and
 * sums saturate at cap + 1, which still says "past the capacity" (the
 * overflow flag) while no int can wrap; rows at or past cap are never read
 * or written, so the clamp changes nothing a caller can see. */

/* a + b, both in [0, lim], saturated at lim (lim < 2^31, so no wrap). */
KDEV int kiln_sat_add(int a, int b, int lim) { return (int)min((unsigned)a + (unsigned)b, (unsigned)lim); }

/* Exclusive block-wide scan of one int per thread in [0, lim], the sums
 * saturating at lim (kiln_sat_add); *total gets the whole sum.  Saturating
 * addition of non-negative values is associative, so the scan's order does
 * not matter. */
KDEV int kiln_block_exscan(int v, int *scratch, int *total, int lim)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x = kiln_sat_add(x, y, lim);
    }
    int excl = __shfl_up_sync(0xffffffffu, x, 1);
    if (lane == 0) excl = 0;
    if (lane == 31) scratch[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < NWARPS ? scratch[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w = kiln_sat_add(w, y, lim);
        }
        __syncwarp();
        if (lane < NWARPS) scratch[32 + lane] = w;
    }
    __syncthreads();
    int before = warp ? scratch[32 + warp - 1] : 0;
    *total = scratch[32 + NWARPS - 1];
    __syncthreads();
    return kiln_sat_add(before, excl, lim);
}

/* Rows of group g from args.sizes: counts, or cumulative end offsets as
 * torch._grouped_mm takes them (the difference taken in 64 bits); a negative
 * count or a decreasing offset is no rows.  Clamped to [0, cap + 1]. */
KDEV int kiln_group_rows(const kiln_kernel_args &args, int g, int cap)
{
    long long c = args.sizes_are_offsets
                      ? (long long)args.sizes[g] - (g ? (long long)args.sizes[g - 1] : 0LL)
                      : (long long)args.sizes[g];
    return (int)max(0LL, min(c, (long long)cap + 1));
}

/* The capacity as an int below 2^31 - 1, so that cap + 1 is one too (rows
 * past it are never read or written). */
KDEV int kiln_capacity(const kiln_kernel_args &args)
{
    return (int)(args.capacity < 0x7ffffffeLL ? args.capacity : 0x7ffffffeLL);
}

/* Every thread: the per-CTA schedule in shared memory.  row_start[g] is the
 * first row of group g (row_start[G] the sum); tile_start[g] the first work
 * item of group g, which owns items(gs, ge) items for its rows [gs, ge)
 * clamped to the capacity.  CTA 0 flags a sum past the capacity.  Returns
 * the number of work items; the caller synchronises before reading. */
template <class Items>
KDEV int kiln_build_schedule(const kiln_kernel_args &args, const kiln_smem &m, int cap, Items items)
{
    constexpr int PER = (MAXG + NT - 1) / NT;   /* groups per thread */
    const int tid = threadIdx.x;
    const int G = args.groups;
    const int chunk = (G + NT - 1) / NT;
    const int g0 = tid * chunk;
    const int g1 = min(G, g0 + chunk);
    const int lim = cap + 1;
    int cnt[PER];
    int local = 0;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        int g = g0 + i;
        int c = g < g1 ? kiln_group_rows(args, g, cap) : 0;
        cnt[i] = c;
        local = kiln_sat_add(local, c, lim);
    }
    int total_rows;
    int run = kiln_block_exscan(local, m.scratch, &total_rows, lim);
    int items_local = 0;
    int tcnt[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        int g = g0 + i;
        tcnt[i] = 0;
        if (g < g1) {
            const int end = kiln_sat_add(run, cnt[i], lim);
            m.row_start[g] = run;
            tcnt[i] = items(min(run, cap), min(end, cap));
            items_local += tcnt[i];
            run = end;
        }
    }
    int total_items;
    int tbase = kiln_block_exscan(items_local, m.scratch, &total_items, 0x7fffffff);
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        int g = g0 + i;
        if (g < g1) { m.tile_start[g] = tbase; tbase += tcnt[i]; }
    }
    if (tid == 0) {
        m.row_start[G] = total_rows;
        m.tile_start[G] = total_items;
        if (blockIdx.x == 0 && total_rows > cap && args.overflow) *args.overflow = 1;
    }
    return total_items;
}

/* The group owning work item t: the last group whose first item is <= t
 * (an empty group shares its start with the next). */
KDEV int kiln_find_group(int t, const int *tile_start, int G, int from = 0)
{
    /* A persistent CTA walks its items in increasing order, so the group
     * of its last item (`from`, tile_start[from] <= t) is this item's
     * group or a few groups before it: a few steps forward before the
     * binary search over the rest.  The search's dependent shared-memory loads
     * were ~10% of a decode wgrad tile's time (H200, ncu,
     * docs/sm90_wgrad.md). */
#pragma unroll 1
    for (int i = 0; i < 4; ++i) {
        if (from + 1 >= G || tile_start[from + 1] > t) return from;
        ++from;
    }
    int lo = from, hi = G;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (tile_start[mid] <= t) lo = mid; else hi = mid;
    }
    return lo;
}

/* Item `local` of a group's tm x tn tiles in RASTER order: 1 m fastest,
 * 2 n fastest, 0 bands of MBAND m-tiles with m fastest inside a band.
 * div_a(x) is x / (RASTER 1: tm, 2: tn, 0: MBAND x tn, a band's items);
 * div_b(x, d) is x / d for the last band's d = tm - mb0 < MBAND rows
 * (RASTER 0).  kiln_raster divides as the compiler does (fprop/dgrad: tm
 * is the group's); kiln_raster_fixed by divisors set up once a launch. */
static_assert((MBAND & (MBAND - 1)) == 0, "MBAND: a power of two");
template <class DA, class DB>
KDEV void kiln_raster_by(int local, int tm, int tn, const DA &div_a, const DB &div_b, int &m, int &n)
{
    if (RASTER == 1) {
        n = div_a(local); m = local - n * tm;
    } else if (RASTER == 2) {
        m = div_a(local); n = local - m * tn;
    } else {
        const int band = div_a(local);
        const int r = local - band * (MBAND * tn);   /* >= 0 */
        const int mb0 = band * MBAND;
        if (tm - mb0 >= MBAND) {
            m = mb0 + (r & (MBAND - 1)); n = (int)((unsigned)r / MBAND);
        } else {
            n = div_b(r, tm - mb0); m = mb0 + r - n * (tm - mb0);
        }
    }
}
/* div_a's divisor: a row of the order (m fastest: tm items; n fastest: tn)
 * or a band of MBAND m-tiles (MBAND x tn). */
KDEV int kiln_raster_step(int tm, int tn)
{
    return RASTER == 1 ? tm : RASTER == 2 ? tn : MBAND * tn;
}
KDEV void kiln_raster(int local, int tm, int tn, int &m, int &n)
{
    const int da = kiln_raster_step(tm, tn);
    kiln_raster_by(local, tm, tn, [=](int x) { return x / da; }, [](int x, int d) { return x / d; }, m, n);
}

/* Division by a divisor fixed for the launch (d >= 1) of a numerator in
 * [0, 2^31): q = n * mul >> p with p = 31 + ceil(log2 d) and mul =
 * ceil(2^p / d) < 2^32.  Exact: mul exceeds 2^p / d by less than 1, so the
 * product overshoots n / d by less than n / 2^p < 2^-ceil(log2 d) <= 1/d,
 * which cannot carry past the next integer.  Two instructions where the
 * compiler's division by a run-time value is about twenty with a MUFU.RCP
 * in its dependent chain; set up once a launch (a 64-bit division). */
struct kiln_fastdiv {
    kiln_u32 mul;
    int p;
    KDEV void set(int d)
    {
        d = max(d, 1);   /* an empty grid divides nothing */
        const int l = d > 1 ? 32 - __clz(d - 1) : 0;   /* ceil(log2 d) */
        p = 31 + l;
        mul = (kiln_u32)(((1ull << p) + (unsigned)d - 1) / (unsigned)d);
    }
    KDEV int div(int n) const { return (int)(((unsigned long long)(kiln_u32)n * mul) >> p); }
};

/* kiln_raster for tm x tn tiles fixed for the launch (wgrad's dW tiles).
 * Where a work item's main loop is short, its decode is on the critical
 * path: the two divisions of the band order were a dependent chain of
 * about 40 instructions with two MUFU.RCP in every consumer warp's item
 * (SASS, wgrad 128x192 pingpong). */
struct kiln_raster_fixed {
    kiln_fastdiv a;   /* div_a's divisor */
    kiln_fastdiv b;   /* RASTER 0: the last band's tm % MBAND rows */
    KDEV void set(int tm, int tn)
    {
        a.set(kiln_raster_step(tm, tn));
        b.set(RASTER == 0 && tm % MBAND ? tm % MBAND : 1);
    }
    KDEV void at(int local, int tm, int tn, int &m, int &n) const
    {
        kiln_raster_by(local, tm, tn, [this](int x) { return a.div(x); },
                       [this](int x, int) { return b.div(x); }, m, n);
    }
};

/* ----------------------------------------------------------- skeleton */

/* The kernel's signature, as runtime/launch.c launches every sm90 kernel:
 * the arguments, then the TMA maps of A, B and D by value. */
#define KILN_SM90_KERNEL                                                        \
    extern "C" __global__ void __launch_bounds__(NT, 1)                         \
    KILN_ENTRY(const __grid_constant__ kiln_kernel_args args,                   \
               const __grid_constant__ kiln_tmap tmap_a,                        \
               const __grid_constant__ kiln_tmap tmap_b,                        \
               const __grid_constant__ kiln_tmap tmap_d)

/* Whether there is work: none for G <= 0; the runtime must not send more
 * than MAXG groups here (the schedule arrays hold MAXG), so that traps. */
KDEV bool kiln_groups_ok(int G)
{
    if (G > MAXG) __trap();
    return G > 0;
}

/* Warpgroup 0 produces, 1..CONSUMERS consume.  The index comes through a
 * shuffle: provably warp-uniform, so the compiler keeps the wgmma paths
 * convergent. */
KDEV int kiln_warpgroup() { return __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); }

/* A value every lane of the warp holds alike (a work item decoded by each
 * lane from shared memory, the warp's index), as lane 0's, word by word
 * through shuffles: ptxas then keeps what is worked out from it in
 * uniform registers.  Where it could not tell, each bulk tensor store's
 * coordinates and box address went into uniform registers a lane at a
 * time, in a loop around the store (about 8 instructions a store, in the
 * epilogues that follow a tile's main loop). */
template <class T> KDEV T kiln_warp_uniform(T v)
{
    static_assert(sizeof(T) % 4 == 0, "kiln_warp_uniform: whole 32-bit words");
    int w[sizeof(T) / 4];
    memcpy(w, &v, sizeof v);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 4); ++i) w[i] = __shfl_sync(0xffffffffu, w[i], 0);
    memcpy(&v, w, sizeof v);
    return v;
}
/* The same where ON (a kernel's rule), else v as it is: for the decoded
 * work item.  The warp index goes through a plain conditional instead;
 * through this wrapper it gave the accumulating db kernels, which leave
 * it off, other register assignments than before (NVRTC 13.0). */
template <bool ON, class T> KDEV T kiln_warp_uniform_if(T v)
{
    if constexpr (ON) return kiln_warp_uniform(v);
    return v;
}
KDEV void kiln_producer_regs() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(PRODUCER_REGS)); }
KDEV void kiln_consumer_regs()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(CONSUMER_REGS));
}

/* A position in the ring: slot s, and the parity of its current lap. */
struct kiln_ring {
    int s;
    kiln_u32 ph;
    KDEV void next() { if (++s == STAGES) { s = 0; ph ^= 1; } }
    KDEV void skip(int n)   /* n slots at once (another warpgroup's item) */
    {
        s += n % STAGES;
        ph ^= (n / STAGES) & 1;
        if (s >= STAGES) { s -= STAGES; ph ^= 1; }
    }
};

/* Producer: waits until slot r.s is free and arms its full barrier for
 * STAGE_BYTES; returns the full barrier the loads complete on. */
KDEV kiln_u32 kiln_acquire(const kiln_smem &m, const kiln_ring &r)
{
    kiln_mbar_wait(m.empty(r.s), r.ph ^ 1);
    kiln_mbar_expect_tx(m.full(r.s), STAGE_BYTES);
    return m.full(r.s);
}

/* Consumer warp: slot s may be refilled (lane 0 arrives, also on the
 * cluster peer's barrier when the pair shares the loads). */
template <int CS_> KDEV void kiln_release(const kiln_smem &m, int s, int lane, kiln_u32 crank)
{
    /* lane 0's arrival releases only its own accesses: the warp's other
     * lanes' reads of the slot (wgrad's dbias sums) must happen before it */
    __syncwarp();
    if (lane == 0) {
        kiln_mbar_arrive(m.empty(s));
        if (CS_ > 1) kiln_mbar_arrive_peer(m.empty(s), crank ^ 1);
    }
}

/* The pingpong protocol.  Both consumer warpgroups walk every item j of
 * their CTA; warpgroup cw takes those with j % 2 == cw and skips the
 * other's in the ring by its k-block count (kiln_ring::skip).  Main loops
 * alternate: a warpgroup waits for its turn (its mbarrier, 128 arrivals)
 * before each item but WG0's first, and passes the turn to the other right
 * after issuing its item's last wgmma, so a parity wait on the ring never
 * sees a phase two laps old, and each epilogue overlaps the other's main
 * loop.  An arrival nobody waits for needs no balancing at exit.  (Named
 * barriers 1/2 in place of the mbarriers: wgrad 64x256 4-6% slower on H200,
 * docs/sm90_kernel.md.)  Cooperative kernels (PINGPONG 0) take every item
 * and the calls compile to nothing. */
struct kiln_turn {
    kiln_u32 bar;   /* WG0's turn at bar, WG1's at bar + 8 */
    int cw;
    KDEV bool mine(int j) const { return !PINGPONG || (j & 1) == cw; }
    /* Before item j (one of this warpgroup's).  Its turns so far are j / 2
     * (WG0's first needs none), so the parity to wait on follows from j:
     * kept as counters, they were two more registers live across the
     * walk, which 192 accumulators a thread could not spare. */
    KDEV void wait(int j) const
    {
        if (PINGPONG && j > 0) kiln_mbar_wait(bar + 8 * cw, ((j >> 1) + (cw ^ 1)) & 1);
    }
    KDEV void pass() const { if (PINGPONG) kiln_mbar_arrive(bar + 8 * (cw ^ 1)); }
};

/* Keeps the compiler from moving accumulator reads above the wgmma wait. */
template <int W>
KDEV void kiln_fence_acc(float (&acc)[MI][W])
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < W; ++i) kiln_fence_reg(acc[mi][i]);
}

/* ------------------------------------------------------- staging/store */

/* The staging/store path.  A warp's share of a consumer's accumulators is
 * MI sub-tiles of 16 rows (from wrow0, 64 apart) x BN columns (from col0);
 * each 16x32 slab goes through the warp's padded fp32 slot `stg`, so that
 * every lane then holds 8 consecutive columns of one row, and
 * emit(row, col, v, mi, q, it) runs for each such piece with row < row_end
 * and col < col_end: row wrow0 + 64·mi + 8·it + lane/4, columns
 * col0 + 32·q + 8·(lane%4) .. +7 (the indices let emit use terms it loaded
 * before the first store). */
template <class Emit>
KDEV void kiln_store_acc(float *stg, const float (&acc)[MI][ACC_N], int wrow0, int col0,
                         int row_end, int col_end, Emit emit)
{
    const int lane = threadIdx.x & 31;
    /* The bounds as rows and columns left past this lane's first piece,
     * compared with constants, and the slab's writes at constant offsets
     * from one address: ptxas kept a register for each piece's row and
     * each write's address, which the 192 accumulators of a 128x192
     * pingpong tile left no room for (spilled). */
    const int rows_left = row_end - wrow0 - (lane >> 2);
    const int cols_left = col_end - col0 - 8 * (lane & 3);
    float *const w = stg + (lane >> 2) * STG_LD + 2 * (lane & 3);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int wrow = wrow0 + mi * 64;
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                *(float2 *)(w + 8 * j) =
                    make_float2(acc[mi][16 * q + 4 * j], acc[mi][16 * q + 4 * j + 1]);
                *(float2 *)(w + 8 * STG_LD + 8 * j) =
                    make_float2(acc[mi][16 * q + 4 * j + 2], acc[mi][16 * q + 4 * j + 3]);
            }
            __syncwarp();
#pragma unroll
            for (int it = 0; it < 2; ++it) {
                const int rr = it * 8 + (lane >> 2), cc = (lane & 3) * 8;
                const int grow = wrow + rr;
                const int gcol = col0 + q * 32 + cc;
                if (rows_left > 64 * mi + 8 * it && cols_left > 32 * q) {
                    float v[8];
                    const float4 v0 = *(const float4 *)&stg[rr * STG_LD + cc];
                    const float4 v1 = *(const float4 *)&stg[rr * STG_LD + cc + 4];
                    v[0] = v0.x; v[1] = v0.y; v[2] = v0.z; v[3] = v0.w;
                    v[4] = v1.x; v[5] = v1.y; v[6] = v1.z; v[7] = v1.w;
                    emit(grow, gcol, v, mi, q, it);
                }
            }
            __syncwarp();
        }
    }
}

/* ------------------------------------------------- TMA-store boxes */

/*
 * The asynchronous store side of an epilogue: accumulator fragments -> a
 * 128B-swizzled box in shared memory -> one bulk tensor store (or
 * reduce-add) issued by one thread, completing in the background while the
 * tensor cores go on with the next tile.
 *
 * The unit is one warp's box: 16 rows (the warp's rows of an m64 wgmma
 * fragment) x 128 bytes (64 16-bit or 32 fp32 columns), 2048 bytes,
 * 1024-byte aligned, 128-byte swizzle — the layout a tensor map with
 * box {128 / elem, 16} and CU_TENSOR_MAP_SWIZZLE_128B reads.  16-byte chunk
 * c of row r sits at r*128 + ((c ^ (r & 7)) * 16).
 *
 * Protocol per box (the caller's loop):
 *   lane 0: kiln_bulk_wait_read<BUFS - 1>() before writing a buffer again;
 *   __syncwarp(); kiln_box_from_frag<ESZ>(...); kiln_fence_async_smem();
 *   __syncwarp(); lane 0: kiln_tma_store_2d(...); kiln_bulk_commit();
 *   advance the buffer only after a commit (a box written by hand instead
 *   is free again after the __syncwarp that follows its reads);
 *   before exit lane 0: kiln_bulk_wait<0>() (shared memory must outlive
 *   the reads of the last stores).
 */

/* Lane `lane`'s stmatrix address for a box at shared address `box`: row
 * lane%8 + 8*((lane/8)&1), 16-byte chunk (lane/16) ^ (row & 7), the first
 * piece's.  Piece p (chunks 2p, 2p+1) is at this address ^ (p << 5):
 * (2p + h) ^ r = (h ^ r) ^ 2p, as 2p and h share no bit, so a piece flips
 * only bits 5-6.  Boxes 2048 bytes apart take this address + 2048 * i, as
 * the sum leaves bits 4-6 alone: a warp works it out once per tile. */
KDEV kiln_u32 kiln_box_lane_addr(kiln_u32 box, int lane)
{
    const int row = (lane & 7) + ((lane >> 3) & 1) * 8;
    return box + row * 128 + (((lane >> 4) ^ (row & 7)) << 4);
}

/* A 16-bit box written from a wgmma fragment with stmatrix, four 16x16
 * pieces; `lane_addr` from kiln_box_lane_addr.  x4 matrices: (rows 0-7,
 * block 2p), (rows 8-15, block 2p), (rows 0-7, block 2p+1), (rows 8-15,
 * block 2p+1); lane l gives the address of row l%8 of matrix l/8. */
KDEV void kiln_box16_from_frag_at(kiln_u32 lane_addr, const float *a)
{
#pragma unroll
    for (int p = 0; p < 4; ++p)
        kiln_stmatrix_x4(lane_addr ^ (p << 5),
                         kiln_pack2(a[8 * p + 0], a[8 * p + 1]),
                         kiln_pack2(a[8 * p + 2], a[8 * p + 3]),
                         kiln_pack2(a[8 * p + 4], a[8 * p + 5]),
                         kiln_pack2(a[8 * p + 6], a[8 * p + 7]));
}

/* One warp writes its 16 x (128 / ESZ) piece of a wgmma m64nN fp32
 * fragment into the swizzled box at `box` (shared memory, 1024-aligned).
 * `a` points at the fragment's accumulators for these columns: 8-column
 * block j holds a[4j], a[4j+1] (row lane/4, columns 2*(lane%4) + {0,1})
 * and a[4j+2], a[4j+3] (row lane/4 + 8).  ESZ 2: converted with kiln_pack2
 * (the template's 16-bit output type) and written with stmatrix, as
 * kiln_box16_from_frag_at does; ESZ 4: fp32 as is, float2 stores. */
template <int ESZ> KDEV void kiln_box_from_frag(unsigned char *box, const float *a, int lane)
{
    if (ESZ == 2) {
        /* kiln_box16_from_frag_at's layout, with the piece's chunk added
         * before the xor: the same addresses.  Written out here, not
         * through it, so that the fprop and dgrad epilogues keep the code
         * they were timed with (through it, ptxas laid out 34 of their
         * kernels differently; the xor form was timed on wgrad's batched
         * epilogue only, sm90_wgrad.cuh). */
        const int row = (lane & 7) + ((lane >> 3) & 1) * 8;
        const kiln_u32 base = kiln_smem_addr(box) + row * 128;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int c16 = 2 * p + (lane >> 4);
            kiln_stmatrix_x4(base + ((c16 ^ (row & 7)) << 4),
                             kiln_pack2(a[8 * p + 0], a[8 * p + 1]),
                             kiln_pack2(a[8 * p + 2], a[8 * p + 3]),
                             kiln_pack2(a[8 * p + 4], a[8 * p + 5]),
                             kiln_pack2(a[8 * p + 6], a[8 * p + 7]));
        }
    } else {
        const int r = lane >> 2;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int c = 8 * j + 2 * (lane & 3);
            const int off = ((c >> 2) ^ r) * 16 + (c & 3) * 4;
            *(float2 *)(box + r * 128 + off) = make_float2(a[4 * j], a[4 * j + 1]);
            *(float2 *)(box + (r + 8) * 128 + off) = make_float2(a[4 * j + 2], a[4 * j + 3]);
        }
    }
}

/* The by-hand store of a box (a box that a tensor store must not write
 * whole: its rows would run into the next group's): rows [0, rows) and
 * bytes [0, bytes) of each (bytes a multiple of 16) to dst, row pitch
 * ld_bytes.  Lane l copies 16-byte chunk l%8 of rows l/8, l/8 + 4, ... */
KDEV void kiln_box_to_global(const unsigned char *box, char *dst, long long ld_bytes, int rows,
                             int bytes, int lane)
{
    const int c = lane & 7;
#pragma unroll
    for (int it = 0; it < 4; ++it) {
        const int r = (lane >> 3) + 4 * it;
        if (r < rows && c * 16 < bytes)
            *(uint4 *)(dst + r * ld_bytes + c * 16) =
                *(const uint4 *)(box + r * 128 + ((c ^ (r & 7)) << 4));
    }
}
