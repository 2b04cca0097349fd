/*
 * sm90_ptx.cuh — what the sm90 kernels (sm90_gemm.cuh, sm90_wgrad.cuh) share:
 * the warp-specialised layout (one producer warp group, CONSUMERS consumer
 * warp groups) and inline-PTX wrappers for shared-memory addresses,
 * mbarriers, TMA loads, wgmma fences and descriptors, bf16/fp16 packing, and
 * the block-wide scan of the group sizes.  Self-contained: no includes.  The
 * templates paste it after their preamble (which defines CONSUMERS and
 * OUT_T) and before the kernel's own file.
 */

#pragma nv_diag_suppress 177
#define KDEV __device__ __forceinline__
typedef unsigned int kiln_u32;
typedef unsigned long long kiln_u64;

constexpr int NT = 128 * (CONSUMERS + 1);      /* threads per CTA */
constexpr int NWARPS = NT / 32;

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

KDEV void kiln_mbar_wait(kiln_u32 bar, kiln_u32 parity)
{
    kiln_u32 ok = 0;
    do {
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

KDEV void kiln_tma_prefetch_desc(const kiln_tmap *map)
{
    asm volatile("prefetch.tensormap [%0];" :: "l"((kiln_u64)map) : "memory");
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

KDEV kiln_u32 kiln_pack2(float lo, float hi)
{
    kiln_u32 r;
    if (OUT_T == 1)
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* Exclusive block-wide scan of one int per thread; *total gets the sum. */
KDEV int kiln_block_exscan(int v, int *scratch, int *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) scratch[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < NWARPS ? scratch[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        __syncwarp();
        if (lane < NWARPS) scratch[32 + lane] = w;
    }
    __syncthreads();
    int before = warp ? scratch[32 + warp - 1] : 0;
    *total = scratch[32 + NWARPS - 1];
    __syncthreads();
    return before + x - v;
}

/* Rows of group g from args.sizes: counts, or cumulative end offsets as
 * torch._grouped_mm takes them; a negative count is no rows. */
KDEV int kiln_group_rows(const kiln_kernel_args &args, int g)
{
    int c = args.sizes_are_offsets ? args.sizes[g] - (g ? args.sizes[g - 1] : 0) : args.sizes[g];
    return max(c, 0);
}
