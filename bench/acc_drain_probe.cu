// SPDX-License-Identifier: Apache-2.0
/* acc_drain_probe.cu — how fast a persistent grid can add fp32 tiles into
 * an fp32 dW already in memory, by each way the accumulating wgrad
 * epilogue could do it (issue 11, docs/sm90_wgrad.md, thirty-sixth
 * session).  A standalone diagnostic, not part of the build; it uses the
 * CUDA runtime and the driver's cuTensorMapEncodeTiled (link with -lcuda).
 *
 *   nvcc -O3 -arch=sm_90a -std=c++17 -o acc_drain_probe bench/acc_drain_probe.cu -lcuda
 *   ./acc_drain_probe [G N K [SPIN_CYCLES ...]]
 *
 * One CTA of 256 threads per SM walks 128x128 fp32 tiles of a dense
 * [G*N, K] buffer in the wgrad kernel's order; each warp owns 16 rows of
 * 512 bytes and adds 1.0 to every element of them by one of:
 *
 *   0  TMA reduce-adds of 16x32 boxes, 128-byte swizzle, one staging box
 *      in flight behind the next (the accumulate kernels' form today)
 *   1  a TMA reduce-add of the warp's 16 rows whole (16x128, unswizzled)
 *   2  read-modify-write by the warp's own loads and stores
 *      (ld.global.v4, add, st.global.v4: 16 loads in flight a lane)
 *   3  the warp's loads, the add, then a TMA store of its 16x128 box
 *   4  a TMA load of the 16x128 box into shared memory, the add there,
 *      a TMA store of it
 *
 * SPIN_CYCLES > 0: each tile first spins that many SM clocks (a main
 * loop's stand-in), with the tile's old rows prefetched into L2 at its
 * start (cp.async.bulk.prefetch.L2, a row a lane), as the kernels do a few
 * k-blocks before the main loop ends.  Every element is checked after the
 * first round.  Prints, per way, the time per launch (median of 9), the
 * read + write rate, and the time per tile on each SM. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>

#include "probe_util.cuh"

__device__ __forceinline__ void prefetch_l2(const void *p, unsigned bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");
}
template <int N> __device__ __forceinline__ void wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}


/* Tile t's first row and column, as the wgrad kernel's group raster (8-row
 * bands of 128x128 tiles, rows fastest inside a band). */
__host__ __device__ __forceinline__ void tile_of(int t, int tm, int tk, int &row0, int &col0)
{
    const int per = tm * tk, g = t / per, local = t - g * per;
    const int band = local / (8 * tk), r = local - band * 8 * tk;
    const int mb0 = band * 8, mc = min(8, tm - mb0);
    row0 = g * tm * 128 + (mb0 + r % mc) * 128;
    col0 = (r / mc) * 128;
}

template <int W>
__global__ void __launch_bounds__(256, 1) probe(const __grid_constant__ tmap mbox, const __grid_constant__ tmap mrow,
                                                float *d, long long K, int tiles, int tm, int tk,
                                                long long spin_cycles)
{
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    unsigned char *stg = smem + warp * 8192;   /* the warp's 16 rows x 512 bytes */
    const unsigned bar = smem_u32(smem + 8 * 8192 + warp * 8);
    if (W == 4 && lane == 0) mbar_init(bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    unsigned ph = 0;
    int buf = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int row0, col0;
        tile_of(t, tm, tk, row0, col0);
        const int wrow = row0 + warp * 16;
        float *rowp = d + (long long)(wrow + (lane & 15)) * K + col0;
        if (spin_cycles > 0) {
            if (lane < 16) prefetch_l2(rowp, 512);
            spin(spin_cycles);
        }
        const float4 one = make_float4(1.f, 1.f, 1.f, 1.f);
        if (W == 0) {
            for (int q = 0; q < 4; ++q) {
                unsigned char *box = stg + buf * 2048;
                if (lane == 0) wait_read<1>();
                __syncwarp();
                /* 16 rows x 128 bytes, 16-byte pieces swizzled by row */
                for (int i = lane; i < 128; i += 32) {
                    const int r = i >> 3, c = i & 7;
                    *(float4 *)(box + r * 128 + ((c ^ (r & 7)) << 4)) = one;
                }
                fence_async();
                __syncwarp();
                if (lane == 0) { red_box(&mbox, smem_u32(box), col0 + 32 * q, wrow); commit(); }
                buf ^= 1;
            }
        } else if (W == 1) {
            if (lane == 0) wait_read<0>();
            __syncwarp();
            for (int r = 0; r < 16; ++r) *(float4 *)(stg + r * 512 + lane * 16) = one;
            fence_async();
            __syncwarp();
            if (lane == 0) { red_box(&mrow, smem_u32(stg), col0, wrow); commit(); }
        } else if (W == 2 || W == 3) {
            float4 v[16];
            const float *p = d + (long long)wrow * K + col0 + lane * 4;
#pragma unroll
            for (int r = 0; r < 16; ++r) v[r] = *(const float4 *)(p + r * K);
#pragma unroll
            for (int r = 0; r < 16; ++r) { v[r].x += 1.f; v[r].y += 1.f; v[r].z += 1.f; v[r].w += 1.f; }
            if (W == 2) {
#pragma unroll
                for (int r = 0; r < 16; ++r) *(float4 *)(d + (long long)(wrow + r) * K + col0 + lane * 4) = v[r];
            } else {
                if (lane == 0) wait_read<0>();
                __syncwarp();
#pragma unroll
                for (int r = 0; r < 16; ++r) *(float4 *)(stg + r * 512 + lane * 16) = v[r];
                fence_async();
                __syncwarp();
                if (lane == 0) { store_box(&mrow, smem_u32(stg), col0, wrow); commit(); }
            }
        } else {
            if (lane == 0) {
                wait_read<0>();
                mbar_expect(bar, 8192);
                load_box(&mrow, smem_u32(stg), bar, col0, wrow);
            }
            mbar_wait(bar, ph);
            ph ^= 1;
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                float4 x = *(float4 *)(stg + r * 512 + lane * 16);
                x.x += 1.f; x.y += 1.f; x.z += 1.f; x.w += 1.f;
                *(float4 *)(stg + r * 512 + lane * 16) = x;
            }
            fence_async();
            __syncwarp();
            if (lane == 0) { store_box(&mrow, smem_u32(stg), col0, wrow); commit(); }
        }
    }
    if (lane == 0) wait_all0();
}

/* 64 KiB of staging, the barriers and the alignment; asked for as more
 * than half the SM's shared memory, so that one CTA runs on each SM. */
static const int kSmem = 120 * 1024;

static void encode(tmap *m, float *d, long long rows, long long K, unsigned bw, CUtensorMapSwizzle sw)
{
    cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)K * 4};
    cuuint32_t box[2] = {bw, 16u}, es[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled((CUtensorMap *)m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dims, strides,
                                        box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                                        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { fprintf(stderr, "encode failed (%d)\n", (int)r); exit(1); }
}

int main(int argc, char **argv)
{
    const long long G = argc > 3 ? atoll(argv[1]) : 64, N = argc > 3 ? atoll(argv[2]) : 2048,
                    K = argc > 3 ? atoll(argv[3]) : 4096;
    std::vector<long long> spins;
    for (int i = 4; i < argc; ++i) spins.push_back(atoll(argv[i]));
    if (spins.empty()) spins.push_back(0);
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *d;
    const size_t bytes = (size_t)G * N * K * 4;
    CK(cudaMalloc(&d, bytes));
    tmap mbox, mrow;
    encode(&mbox, d, G * N, K, 32, CU_TENSOR_MAP_SWIZZLE_128B);
    encode(&mrow, d, G * N, K, 128, CU_TENSOR_MAP_SWIZZLE_NONE);
    const int tm = (int)(N / 128), tk = (int)(K / 128), tiles = (int)(G * tm * tk);
    const char *names[5] = {"reduce-add 16x32 boxes (today)", "reduce-add 16x128 rows", "ld/add/st.global",
                            "ld.global, add, TMA store", "TMA load, add, TMA store"};
    void (*ks[5])(const tmap, const tmap, float *, long long, int, int, int, long long) =
        {probe<0>, probe<1>, probe<2>, probe<3>, probe<4>};
    printf("dW %lld x %lld x %lld f32 (%.2f GB), %d tiles of 128x128 on %d SMs\n", G, N, K, bytes / 1e9,
           tiles, sms);
    const int launches = 11;
    for (long long sp : spins)
        for (int round = 0; round < 2; ++round)
            for (int w = 0; w < 5; ++w) {
                CK(cudaFuncSetAttribute(ks[w], cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
                CK(cudaMemset(d, 0, bytes));
                const float med = median_launch_ms(
                    [&] { ks[w]<<<sms, 256, kSmem>>>(mbox, mrow, d, K, tiles, tm, tk, sp); }, launches, 2);
                long long bad = 0;
                if (round == 0) {
                    std::vector<float> h(bytes / 4);
                    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < h.size(); ++i) bad += h[i] != (float)launches;
                }
                printf("spin %6lld round %d  way %d %-32s %8.4f ms  %5.2f TB/s  %6.3f us a tile on an SM%s\n", sp,
                       round, w, names[w], med, 2.0 * bytes / (med * 1e-3) / 1e12,
                       med * 1e3 / ((double)tiles / sms), round ? "" : bad ? "  WRONG" : "  checked");
            }
    return 0;
}
