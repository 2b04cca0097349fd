// SPDX-License-Identifier: Apache-2.0
/* store_box_probe.cu — how the shape of the TMA store boxes sets the speed
 * at which a persistent grid writes wgrad's dW tiles (issue 11,
 * docs/sm90_wgrad.md, eighteenth session).  A standalone diagnostic, not
 * part of the build; it uses the CUDA runtime and the driver's
 * cuTensorMapEncodeTiled (link with -lcuda).
 *
 *   nvcc -O3 -arch=sm_90a -std=c++17 -o store_box_probe bench/store_box_probe.cu -lcuda
 *   ./store_box_probe [G N K [SPIN_CYCLES]]
 *
 * One CTA per SM walks 128x256 bf16 tiles of a dense [G*N, K] buffer in the
 * wgrad kernel's order (groups in turn, 8-row bands of tiles with rows
 * fastest inside a band), two warp groups of 64 rows each, and writes each
 * tile through shared memory and TMA stores in one of these box layouts:
 *
 *   0  16x64, 128-byte swizzle, each warp its own 4 boxes (kiln's today)
 *   1  64x64, 128-byte swizzle, a warp group's 4 boxes (one thread each)
 *   2  16x256, no swizzle, one box a warp
 *   3  64x256, no swizzle, one box a warp group
 *   4  16 rows x 4 chunks x 64 columns of a 3-D map ({64 columns, K/64
 *      chunks 128 bytes apart, rows}), 128-byte swizzle, one box a warp:
 *      a row's 512 bytes written together as in 2, from a swizzled layout
 *      ([row][chunk][128 bytes]) that stmatrix can write without conflicts
 *
 * SPIN_CYCLES > 0: each tile first spins that many SM clocks (a main loop's stand-in),
 * so that the stores of one tile can drain under the next one's spin.
 *
 *   ./store_box_probe G N K SPIN_CYCLES add
 *
 * the same for accumulating wgrad: dW in fp32, 128x128 tiles (512 bytes a
 * row, as above), TMA reduce-adds instead of stores, boxes of 32 columns
 * (128 bytes) where the above have 64; each launch adds 1.0 to every
 * element, checked after the first round's launches.
 * Prints, per layout, the time per launch (median of 9), the write rate,
 * and the time per tile on each SM. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>

#include "probe_util.cuh"


/* A box out through the map: a TMA store, or with ADD an fp32 reduce-add. */
template <bool ADD>
__device__ __forceinline__ void put_box(const tmap *m, unsigned src, int x, int y)
{
    if (ADD) red_box(m, src, x, y);
    else store_box(m, src, x, y);
}
template <bool ADD>
__device__ __forceinline__ void put_box3(const tmap *m, unsigned src, int x, int c, int y)
{
    if (ADD)
        asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
                     :: "l"(m), "r"(src), "r"(x), "r"(c), "r"(y) : "memory");
    else
        asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
                     :: "l"(m), "r"(src), "r"(x), "r"(c), "r"(y) : "memory");
}
__device__ __forceinline__ void wg_bar(int wg) { asm volatile("bar.sync %0, 128;" :: "r"(wg + 1) : "memory"); }


/* Tile t's first row and column (in elements, tiles tcols wide), as the
 * wgrad kernel's group raster. */
__host__ __device__ __forceinline__ void tile_of(int t, int tm, int tk, int &row0, int &col0, int tcols)
{
    const int per = tm * tk, g = t / per, local = t - g * per;
    const int band = local / (8 * tk), r = local - band * 8 * tk;
    const int mb0 = band * 8, mc = min(8, tm - mb0);
    row0 = g * tm * 128 + (mb0 + r % mc) * 128;
    col0 = (r / mc) * tcols;
}

template <int L, bool ADD>
__global__ void __launch_bounds__(256, 1) probe(const __grid_constant__ tmap m, int tiles, int tm,
                                                int tk, long long spin_cycles)
{
    constexpr int BW = ADD ? 32 : 64;   /* elements in a 128-byte box row */
    extern __shared__ unsigned char smem_raw[];
    /* the 128-byte swizzle needs 1024-byte aligned boxes */
    unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const int tid = threadIdx.x, wg = tid >> 7, wq = (tid >> 5) & 3, lane = tid & 31;
    unsigned char *stg = smem + wg * 32768;   /* a warp group's 64 rows x 256 columns */
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int row0, col0;
        tile_of(t, tm, tk, row0, col0, ADD ? 128 : 256);
        spin(spin_cycles);
        /* staging free again: the previous tile's stores have read it */
        if (L == 0 || L == 2 || L == 4) {
            if (lane == 0) wait_read0();
            __syncwarp();
        } else {
            if ((tid & 127) == 0) wait_read0();
            wg_bar(wg);
        }
        /* each warp writes its 16 rows x 512 bytes (values do not matter;
         * 16-byte stores, 32 lanes a row's 512 bytes: no bank conflicts) */
        unsigned char *wbase;
        if (L == 0) wbase = stg + wq * 8192;        /* 4 boxes of 16 rows x 128 B */
        else if (L == 1) wbase = stg + wq * 2048;   /* box b at b*8192, warp's rows at wq*2048 */
        else wbase = stg + wq * 8192;               /* L2, L4: 16 rows x 512 B; L3: rows wq*16.. of 64 */
#pragma unroll 4
        for (int r = 0; r < 16; ++r) {
            uint4 v = ADD ? make_uint4(0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u)  /* 1.0f */
                          : make_uint4(t, r, lane, 0);
            if (L == 0) {
                const int b = lane >> 3, c = lane & 7;   /* box b, 16-byte chunk c of the row */
                *(uint4 *)(wbase + b * 2048 + r * 128 + ((c ^ (r & 7)) << 4)) = v;
            } else if (L == 1) {
                const int b = lane >> 3, c = lane & 7;
                *(uint4 *)(wbase + b * 8192 + r * 128 + ((c ^ (r & 7)) << 4)) = v;
            } else if (L == 4) {
                const int b = lane >> 3, c = lane & 7;   /* chunk b, 16-byte piece c */
                *(uint4 *)(wbase + r * 512 + b * 128 + ((c ^ ((r * 4 + b) & 7)) << 4)) = v;
            } else {
                *(uint4 *)(wbase + r * 512 + lane * 16) = v;
            }
        }
        fence_async();
        const int wrow = row0 + wg * 64 + wq * 16;
        if (L == 0) {
            __syncwarp();
            if (lane == 0) {
#pragma unroll
                for (int b = 0; b < 4; ++b) put_box<ADD>(&m, smem_u32(wbase + b * 2048), col0 + BW * b, wrow);
                commit();
            }
        } else if (L == 2) {
            __syncwarp();
            if (lane == 0) { put_box<ADD>(&m, smem_u32(wbase), col0, wrow); commit(); }
        } else if (L == 4) {
            __syncwarp();
            if (lane == 0) { put_box3<ADD>(&m, smem_u32(wbase), 0, col0 / BW, wrow); commit(); }
        } else {
            wg_bar(wg);
            if ((tid & 127) == 0) {
                if (L == 1)
                    for (int b = 0; b < 4; ++b) put_box<ADD>(&m, smem_u32(stg + b * 8192), col0 + BW * b, row0 + wg * 64);
                else
                    put_box<ADD>(&m, smem_u32(stg), col0, row0 + wg * 64);
                commit();
            }
        }
    }
    if (lane == 0) wait_all0();
}

/* 64 KiB of staging and its alignment; asked for as more than half the
 * SM's shared memory, so that one CTA runs on each SM, as the kernel does */
static const int kSmem = 120 * 1024;

int main(int argc, char **argv)
{
    const long long G = argc > 3 ? atoll(argv[1]) : 64, N = argc > 3 ? atoll(argv[2]) : 2048,
                    K = argc > 3 ? atoll(argv[3]) : 2048;
    const long long spin_cycles = argc > 4 ? atoll(argv[4]) : 0;
    const bool add = argc > 5 && argv[5][0] == 'a';
    const int E = add ? 4 : 2, tcols = 512 / E, bcols = 128 / E;   /* tile and 128-byte box widths */
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    void *d;
    const size_t bytes = (size_t)G * N * K * E;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemset(d, 0, bytes));
    const int tm = (int)(N / 128), tk = (int)(K / tcols), tiles = (int)(G * tm * tk);
    const char *names[5] = {"16x64 swz128, per warp", "64x64 swz128, per warp group",
                            "16x256 unswizzled, per warp", "64x256 unswizzled, per warp group",
                            "16x4x64 3-D swz128, per warp"};
    printf("dW %lld x %lld x %lld %s (%.2f GB), %d tiles of 128x%d on %d SMs, spin %lld cycles a tile%s\n",
           G, N, K, add ? "f32" : "bf16", bytes / 1e9, tcols, tiles, sms, spin_cycles,
           add ? "; reduce-adds, box widths in the names halved" : "");
    const int launches = 11;
    for (int round = 0; round < 2; ++round)
        for (int L = 0; L < 5; ++L) {
            tmap m;
            const CUtensorMapDataType dt = add ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
            cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)(G * N)};
            cuuint64_t strides[1] = {(cuuint64_t)K * E};
            cuuint32_t box[2] = {L == 0 || L == 1 ? (cuuint32_t)bcols : (cuuint32_t)tcols, L == 0 || L == 2 ? 16u : 64u};
            cuuint32_t es[2] = {1, 1};
            cuuint64_t dims3[3] = {(cuuint64_t)bcols, (cuuint64_t)(K / bcols), (cuuint64_t)(G * N)};
            cuuint64_t strides3[2] = {128, (cuuint64_t)K * E};
            cuuint32_t box3[3] = {(cuuint32_t)bcols, 4, 16}, es3[3] = {1, 1, 1};
            CUresult r = L == 4 ?
                cuTensorMapEncodeTiled((CUtensorMap *)&m, dt, 3, d, dims3, strides3,
                                       box3, es3, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) :
                cuTensorMapEncodeTiled((CUtensorMap *)&m, dt, 2, d, dims, strides, box, es,
                             CU_TENSOR_MAP_INTERLEAVE_NONE,
                             L < 2 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
            if (r != CUDA_SUCCESS) { printf("layout %d: encode failed (%d)\n", L, (int)r); continue; }
            void (*k)(const tmap, int, int, int, long long) =
                add ? (L == 0 ? probe<0, true> : L == 1 ? probe<1, true> : L == 2 ? probe<2, true> :
                       L == 3 ? probe<3, true> : probe<4, true>)
                    : (L == 0 ? probe<0, false> : L == 1 ? probe<1, false> : L == 2 ? probe<2, false> :
                       L == 3 ? probe<3, false> : probe<4, false>);
            CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
            const float med = median_launch_ms([&] { k<<<sms, 256, kSmem>>>(m, tiles, tm, tk, spin_cycles); },
                                               launches, 2);
            /* stores: every 16 bytes where the layout's swizzle says: {t, r,
             * lane, 0} at row row0 + 64 wg + 16 wq + r, column col0 + 8 lane;
             * adds: every element 1.0 a launch */
            long long bad = 0;
            if (round == 0) {
                std::vector<unsigned> h(bytes / 4);
                CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
                if (add) {
                    const float want = (float)launches;
                    for (size_t i = 0; i < h.size(); ++i) {
                        float f;
                        memcpy(&f, &h[i], 4);
                        bad += f != want;
                    }
                } else {
                    for (int t = 0; t < tiles; ++t) {
                        int row0, col0;
                        tile_of(t, tm, tk, row0, col0, tcols);
                        for (int rr = 0; rr < 128; ++rr)
                            for (int lane = 0; lane < 32; ++lane) {
                                const unsigned *q = &h[((size_t)(row0 + rr) * K + col0 + 8 * lane) / 2];
                                bad += q[0] != (unsigned)t || q[1] != (unsigned)(rr & 15) || q[2] != (unsigned)lane || q[3];
                            }
                    }
                }
                CK(cudaMemset(d, 0, bytes));
            }
            /* a reduce-add reads and writes every byte */
            printf("round %d  layout %d %-34s %8.4f ms  %5.2f TB/s  %6.3f us a tile on an SM%s\n", round, L,
                   names[L], med, (add ? 2 : 1) * bytes / (med * 1e-3) / 1e12,
                   med * 1e3 / ((double)tiles / sms), round ? "" : bad ? "  WRONG" : "  checked");
        }
    return 0;
}
