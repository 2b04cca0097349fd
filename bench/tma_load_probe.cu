// SPDX-License-Identifier: Apache-2.0
/* tma_load_probe.cu — how fast TMA loads can feed the SMs, with and without
 * stores beside them (issue 11; docs/sm90_wgrad.md, thirty-seventh
 * session).  Every sm90 wgrad case, and Mixtral's fprop, moves 7.0-8.1 TB/s
 * of TMA-loaded and TMA-stored bytes between the SMs and L2 when its 128x256
 * tiles are counted whole; this probe measures that path without any math.
 * A standalone diagnostic, not part of the build; it uses the CUDA runtime
 * and the driver's cuTensorMapEncodeTiled (link with -lcuda).
 *
 *   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -o tma_load_probe \
 *        bench/tma_load_probe.cu -lcuda
 *   ./tma_load_probe [KBLOCKS_PER_CTA]
 *
 * One CTA per SM (or one 2-CTA cluster per two SMs) runs a 3-stage ring of
 * k-blocks as the 128x256 kernels do: each k-block is 48 KiB, six 64x64
 * bf16 boxes with the 128-byte swizzle (A's 2 and B's 4), loaded by one
 * thread and released by another as soon as it lands (no MMA).  Variants:
 *
 *   rows 64 / 8   boxes of 64 token rows (8 KiB, kiln's) or of 8 (1 KiB,
 *                 eight times the operations for the same bytes: the tenth
 *                 session's tail loads)
 *   pair          2-CTA clusters, B's boxes multicast: each CTA loads two
 *                 of the four into both CTAs (kiln's pairs); L2 reads
 *                 32 KiB a CTA and k-block, the SM still takes in 48
 *   src L2 / HBM  a 25 MB source (stays in L2) or a 2 GB one
 *   store every S every S k-blocks the consumer also stores a 64 KiB tile
 *                 (128x256 bf16, four 128x64 boxes) to a 2 GiB output from
 *                 a staging area of its own: wgrad's epilogue after a
 *                 short reduction (S = 1: decode-sized groups, 3:
 *                 irregular_g64's ~150 tokens); "row stores": the
 *                 same tile as eight 3-D boxes of 16 rows x 512 contiguous
 *                 bytes with the evict-first hint, kiln's dense overwrite
 *                 form
 *
 * Prints per variant the median launch time (of 9 after 2 warm-ups) and
 * the rates: into the SMs (k-blocks x 48 KiB), out of L2 for loads, and
 * stored. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#include "probe_util.cuh"

constexpr int STAGES = 3;
constexpr int KB_BYTES = 6 * 8192;                       /* one k-block: 6 boxes of 64x64 bf16 */
constexpr int STG_BYTES = 65536;                         /* one 128x256 bf16 output tile */
constexpr int SMEM = STAGES * KB_BYTES + STG_BYTES + 1024 + 1024;   /* + alignment, barriers */

__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta)
{
    /* arrive on CTA `cta`'s barrier at this CTA's offset `bar` */
    asm volatile("{ .reg .b32 r; mapa.shared::cluster.u32 r, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [r]; }"
                 :: "r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ void load_box_mc(const tmap *m, unsigned dst, unsigned bar, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(x), "r"(y), "h"((unsigned short)3) : "memory");
}
/* a 3-D box {64 columns, 4 chunks, 16 rows}: 16 rows of 512 contiguous
 * bytes, with the evict-first hint (kiln's dense overwrite stores) */
__device__ __forceinline__ void store_rows(const tmap *m, unsigned src, int y)
{
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint"
                 " [%0, {%2, %3, %4}], [%1], %5;"
                 :: "l"(m), "r"(src), "r"(0), "r"(0), "r"(y), "l"(pol) : "memory");
}
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* ROWS: token rows a box (64 or 8); PAIR: 2-CTA clusters, B multicast.
 * src: [src_rows, 384] bf16 (a k-block's 6 boxes side by side);
 * dst: [tiles * 128, 256] bf16, written every store_every k-blocks. */
template <int ROWS, bool PAIR, bool ROWSTORE>
__global__ void __launch_bounds__(128, 1) probe(const __grid_constant__ tmap src, const __grid_constant__ tmap dst,
                                                int kblocks, int src_rows, int store_every, int out_tiles)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const unsigned ring = smem_u32(smem), stg = ring + STAGES * KB_BYTES;
    const unsigned full = stg + STG_BYTES, empty = full + 8 * STAGES;
    const unsigned rank = PAIR ? cluster_rank() : 0;
    const int cta = blockIdx.x, tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, PAIR ? 2 : 1);   /* both CTAs' consumers release a slot */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (PAIR) cluster_sync(); else __syncthreads();
    const int unit = PAIR ? cta / 2 : cta;            /* both CTAs of a pair load the same rows */
    const int units = PAIR ? gridDim.x / 2 : gridDim.x;
    const long long stride = (long long)(src_rows / units) / 64 * 64;   /* each unit its own stretch */
    if (tid == 0) {                                   /* the producer */
        for (int j = 0; j < kblocks; ++j) {
            const int s = j % STAGES;
            if (j >= STAGES) mbar_wait(empty + 8 * s, ((j / STAGES) - 1) & 1);
            mbar_expect(full + 8 * s, KB_BYTES);
            const unsigned dst_s = ring + s * KB_BYTES;
            const int r0 = (int)((unit * stride + (long long)j * 64) % (src_rows - 64));
            for (int b = 0; b < 6; ++b) {             /* boxes 0-1: A, 2-5: B */
                if (PAIR && b >= 2 && ((b & 1) != (int)rank)) continue;   /* the peer's half of B */
                for (int q = 0; q < 64 / ROWS; ++q) {
                    const unsigned d = dst_s + b * 8192 + q * ROWS * 128;
                    if (PAIR && b >= 2) load_box_mc(&src, d, full + 8 * s, 64 * b, r0 + q * ROWS);
                    else load_box(&src, d, full + 8 * s, 64 * b, r0 + q * ROWS);
                }
            }
        }
    } else if (tid == 32) {                           /* the consumer */
        int stored = 0;
        for (int j = 0; j < kblocks; ++j) {
            const int s = j % STAGES;
            mbar_wait(full + 8 * s, (j / STAGES) & 1);
            if (PAIR) {
                mbar_arrive_cluster(empty + 8 * s, 0);
                mbar_arrive_cluster(empty + 8 * s, 1);
            } else {
                asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(empty + 8 * s) : "memory");
            }
            if (store_every > 0 && (j + 1) % store_every == 0) {
                wait_read0();                         /* the staging is free again */
                const int row0 = (int)(((long long)cta * (kblocks / store_every) + stored++) % out_tiles * 128);
                if (ROWSTORE)
                    for (int b = 0; b < 8; ++b) store_rows(&dst, stg + b * 8192, row0 + 16 * b);
                else
                    for (int b = 0; b < 4; ++b) store_box(&dst, stg + b * 16384, 64 * b, row0);
                commit();
            }
        }
        wait_all0();
    }
    if (PAIR) cluster_sync();                         /* no CTA leaves while its peer may still write to it */
}

static bool encode_rows(tmap *m, void *base, unsigned long long rows)
{
    cuuint64_t dims[3] = {64, 4, rows};
    cuuint64_t strides[2] = {128, 512};
    cuuint32_t box[3] = {64, 4, 16}, es[3] = {1, 1, 1};
    return cuTensorMapEncodeTiled((CUtensorMap *)m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides,
                                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

static bool encode(tmap *m, void *base, unsigned long long cols, unsigned long long rows, unsigned box_rows)
{
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {cols * 2};
    cuuint32_t box[2] = {64, box_rows}, es[2] = {1, 1};
    return cuTensorMapEncodeTiled((CUtensorMap *)m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides,
                                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    const int kblocks = argc > 1 ? atoi(argv[1]) : 1536;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = sms & ~1;                        /* even, for the pairs */
    const long long small_rows = 32768, big_rows = 2700000;   /* 25 MB and 2 GB of 384 columns */
    void *srcb, *dstb;
    CK(cudaMalloc(&srcb, (size_t)big_rows * 384 * 2));
    CK(cudaMemset(srcb, 0, (size_t)big_rows * 384 * 2));
    const long long out_rows = 4194304;                /* 2 GiB of 256 columns: tiles wrap around */
    CK(cudaMalloc(&dstb, (size_t)out_rows * 256 * 2));
    printf("%d CTAs (one an SM), %d k-blocks of 48 KiB each, %d stages; source 25 MB (L2) or 2 GB (HBM)\n",
           grid, kblocks, STAGES);
    struct V { int rows; bool pair; bool big; int store_every; bool rowstore; const char *what; };
    const V vs[] = {
        {64, false, false, 0, false, "loads, 64-row boxes, from L2"},
        {8, false, false, 0, false, "loads, 8-row boxes, from L2"},
        {64, true, false, 0, false, "loads, pairs with B multicast, from L2"},
        {64, false, true, 0, false, "loads, 64-row boxes, from HBM"},
        {64, false, false, 3, false, "loads from L2 + a 64 KiB store every 3"},
        {64, false, false, 1, false, "loads from L2 + a 64 KiB store every 1"},
        {64, false, true, 3, false, "loads from HBM + a 64 KiB store every 3"},
        {64, true, false, 3, false, "pairs from L2 + a 64 KiB store every 3"},
        {64, false, false, 3, true, "loads from L2 + row stores every 3"},
        {64, false, false, 2, true, "loads from L2 + row stores every 2"},
        {64, false, false, 1, true, "loads from L2 + row stores every 1"},
        {64, false, false, 8, true, "loads from L2 + row stores every 8"},
    };
    tmap dmap, rmap;
    if (!encode(&dmap, dstb, 256, (unsigned long long)out_rows, 128)) { printf("dst encode failed\n"); return 1; }
    if (!encode_rows(&rmap, dstb, (unsigned long long)out_rows)) { printf("dst rows encode failed\n"); return 1; }
    for (int round = 0; round < 2; ++round)
        for (const V &v : vs) {
            tmap smap;
            if (!encode(&smap, srcb, 384, v.big ? big_rows : small_rows, v.rows)) { printf("src encode failed\n"); return 1; }
            void (*k)(const tmap, const tmap, int, int, int, int) =
                v.rows == 64 ? (v.pair ? probe<64, true, false> : v.rowstore ? probe<64, false, true> : probe<64, false, false>)
                             : probe<8, false, false>;
            const tmap &dm = v.rowstore ? rmap : dmap;
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
            const int rows = (int)(v.big ? big_rows : small_rows);
            float ms;
            if (v.pair) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(grid);
                cfg.blockDim = dim3(128);
                cfg.dynamicSmemBytes = SMEM;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeClusterDimension;
                at[0].val.clusterDim.x = 2;
                at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
                cfg.attrs = at;
                cfg.numAttrs = 1;
                ms = median_launch_ms([&] { CK(cudaLaunchKernelEx(&cfg, k, smap, dm, kblocks, rows, v.store_every, (int)(out_rows / 128))); },
                                      11, 2);
            } else {
                ms = median_launch_ms([&] { k<<<grid, 128, SMEM>>>(smap, dm, kblocks, rows, v.store_every, (int)(out_rows / 128)); }, 11, 2);
            }
            const double in = (double)grid * kblocks * KB_BYTES;
            const double l2 = v.pair ? in * 32.0 / 48.0 : in;
            const double st = v.store_every ? (double)grid * (kblocks / v.store_every) * STG_BYTES : 0;
            printf("round %d  %-42s %8.4f ms  into SMs %5.2f TB/s  loads out of L2 %5.2f  stored %5.2f  in+stored %5.2f TB/s\n",
                   round, v.what, ms, in / ms / 1e9, l2 / ms / 1e9, st / ms / 1e9, (in + st) / ms / 1e9);
        }
    return 0;
}
