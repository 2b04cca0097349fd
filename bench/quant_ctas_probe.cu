// SPDX-License-Identifier: Apache-2.0
/* quant_ctas_probe.cu — what held WEIGHTS_128X128 with q_t at 83% of HBM
 * bandwidth (docs/fp8.md, fourteenth session).  A standalone diagnostic,
 * not part of the build: it includes templates/quant.cu as is and launches
 * its kernels with the CUDA runtime, at chosen grids.
 *
 *   nvcc -O3 -arch=sm_90a -std=c++17 -o quant_ctas_probe bench/quant_ctas_probe.cu
 *   ./quant_ctas_probe [G N K [VARIANT [CTAS_PER_SM]]]   variants at 2..6 CTAs per SM
 *   ./quant_ctas_probe kinds                           every writing kind at 1..4
 *
 * Variants of the 128x128 tile kernel with q_t: 0 and 10 as quant.cu's
 * (10: this file's copy), 2 q_t's bytes written in q's layout (a second
 * [G,N,K] buffer: is the transposed layout the cost?), 3 q_t computed but
 * not stored, 4 q and q_t with st.global.cs, 7 the next tile's loads
 * issued before the transposed copy, 1 without q_t, 5 a bf16 copy over the
 * same tile walk.  GB/s are of the bytes the kind must move. */
#include "../templates/quant.cu"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

// the tile kernel with q_t (kq_tiles, KQ_BLOCK, bf16 to e4m3), VAR as above
template <int VAR>
__global__ void __launch_bounds__(256) kqm(const kq_args a, unsigned char *alt)
{
    typedef kq_bf16 In; typedef kq_e4m3 Out;
    __shared__ __align__(16) u32 tile[128 * 32];
    __shared__ u32 wmax[2][KQ_WARPS];
    const long long N = a.rows, K = a.cols;
    const int tn = (int)((N + 127) / 128), tk = (int)((K + 127) / 128), G = a.groups;
    const int dbk = gridDim.x % tk, dbn = gridDim.x / tk % tn, dg = gridDim.x / tk / tn;
    int bki = blockIdx.x % tk, bni = blockIdx.x / tk % tn, gi = blockIdx.x / tk / tn;
    const int tid = threadIdx.x, lr = tid >> 3, lu = tid & 7, warp = tid >> 5;
    const char *in = (const char *)a.in;
    unsigned char *out = (unsigned char *)a.out;
    unsigned char *out_t = (unsigned char *)a.out_t;
    for (int slot = 0; gi < G; slot ^= 1) {
        const long long g = gi, bn = bni, bk = bki;
        const long long r0 = bn * 128, c0 = bk * 128 + lu * 16;
        const char *gin = in + (g * N * a.ld_in) * 2;
        kq_unit u[4];
        u32 m = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const long long r = r0 + lr + 32 * i;
            kq_load(u[i], gin + (r * a.ld_in + c0) * 2);
            m = kq_amax_bits(u[i], m);
        }
        float s, inv;
        m = kq_warp_amax(m, 32);
        if ((tid & 31) == 0) wmax[slot][warp] = m;
        __syncthreads();
        m = 0;
#pragma unroll
        for (int w = 0; w < KQ_WARPS; ++w) m = max(m, wmax[slot][w]);
        kq_scales<Out>(In::to_f32(m), s, inv);
        if (tid == 0) {
            a.scale[(g * tn + bn) * tk + bk] = s;
            a.scale_t[(g * tk + bk) * tn + bn] = s;
        }
        unsigned char *gout = out + g * N * a.ld_out;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int rl = lr + 32 * i;
            const uint4 q = kq_quant16<In, Out>(u[i], inv);
            uint4 *p = (uint4 *)(gout + (r0 + rl) * a.ld_out + c0);
            if (VAR == 4) __stcs(p, q); else *p = q;
            *(uint4 *)&tile[kq_swz(rl, lu * 4)] = q;
        }
        __syncthreads();
        const int a16 = tid & 7, cg = (warp << 2) | ((tid >> 3) & 3);
        u32 w[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i] = tile[kq_swz(a16 * 16 + i, cg)];
        uint4 c[4];
        kq_transpose16x4(w, c);
        const long long rr = r0 + a16 * 16;
        unsigned char *gt = out_t + g * K * N;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const long long col = bk * 128 + cg * 4 + jj;
            if (VAR == 2) {
                *(uint4 *)(alt + g * N * K + (r0 + cg * 4 + jj) * K + bk * 128 + a16 * 16) = c[jj];
            } else if (VAR == 3) {
                if (c[jj].x == 0x7f7f7f7fu && c[jj].y == 0x01020304u) *(uint4 *)(gt + col * N + rr) = c[jj];
            } else if (VAR == 4) {
                __stcs((uint4 *)(gt + col * N + rr), c[jj]);
            } else {
                *(uint4 *)(gt + col * N + rr) = c[jj];
            }
        }
        bki += dbk; bni += dbn; gi += dg;
        if (bki >= tk) { bki -= tk; bni++; }
        if (bni >= tn) { bni -= tn; gi++; }
    }
}

/* Variant 7: as variant 0, but the next tile's loads are issued into u as
 * soon as this tile is quantized, before the transposed copy (at 4 CTAs per
 * SM, the eleventh session measured this 1% slower). */
__global__ void __launch_bounds__(256) kqpf(const kq_args a)
{
    typedef kq_bf16 In; typedef kq_e4m3 Out;
    __shared__ __align__(16) u32 tile[128 * 32];
    __shared__ u32 wmax[2][KQ_WARPS];
    const long long N = a.rows, K = a.cols;
    const int tn = (int)((N + 127) / 128), tk = (int)((K + 127) / 128), G = a.groups;
    const int dbk = gridDim.x % tk, dbn = gridDim.x / tk % tn, dg = gridDim.x / tk / tn;
    int bki = blockIdx.x % tk, bni = blockIdx.x / tk % tn, gi = blockIdx.x / tk / tn;
    const int tid = threadIdx.x, lr = tid >> 3, lu = tid & 7, warp = tid >> 5;
    const char *in = (const char *)a.in;
    unsigned char *out = (unsigned char *)a.out;
    unsigned char *out_t = (unsigned char *)a.out_t;
    kq_unit u[4];
    auto load = [&](int gg, int bn, int bk) {
        const char *gin = in + ((long long)gg * N * a.ld_in) * 2;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            kq_load(u[i], gin + (((long long)bn * 128 + lr + 32 * i) * a.ld_in + bk * 128 + lu * 16) * 2);
    };
    if (gi < G) load(gi, bni, bki);
    for (int slot = 0; gi < G; slot ^= 1) {
        const long long g = gi, bn = bni, bk = bki;
        const long long r0 = bn * 128, c0 = bk * 128 + lu * 16;
        bki += dbk; bni += dbn; gi += dg;
        if (bki >= tk) { bki -= tk; bni++; }
        if (bni >= tn) { bni -= tn; gi++; }
        u32 m = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) m = kq_amax_bits(u[i], m);
        float s, inv;
        m = kq_warp_amax(m, 32);
        if ((tid & 31) == 0) wmax[slot][warp] = m;
        __syncthreads();
        m = 0;
#pragma unroll
        for (int w = 0; w < KQ_WARPS; ++w) m = max(m, wmax[slot][w]);
        kq_scales<Out>(In::to_f32(m), s, inv);
        if (tid == 0) {
            a.scale[(g * tn + bn) * tk + bk] = s;
            a.scale_t[(g * tk + bk) * tn + bn] = s;
        }
        unsigned char *gout = out + g * N * a.ld_out;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int rl = lr + 32 * i;
            const uint4 q = kq_quant16<In, Out>(u[i], inv);
            *(uint4 *)(gout + (r0 + rl) * a.ld_out + c0) = q;
            *(uint4 *)&tile[kq_swz(rl, lu * 4)] = q;
        }
        if (gi < G) load(gi, bni, bki);
        __syncthreads();
        const int a16 = tid & 7, cg = (warp << 2) | ((tid >> 3) & 3);
        u32 w[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i] = tile[kq_swz(a16 * 16 + i, cg)];
        uint4 c[4];
        kq_transpose16x4(w, c);
        const long long rr = r0 + a16 * 16;
        unsigned char *gt = out_t + g * K * N;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) *(uint4 *)(gt + (bk * 128 + cg * 4 + jj) * N + rr) = c[jj];
    }
}

// A copy with the tile walk: read the 128x128 bf16 tile, write it (32 KB) to a [G,N,K] bf16 buffer.
__global__ void __launch_bounds__(256) kqcopy(const kq_args a, unsigned char *dst)
{
    const long long N = a.rows, K = a.cols;
    const int tn = (int)(N / 128), tk = (int)(K / 128), G = a.groups;
    const int tid = threadIdx.x, lr = tid >> 3, lu = tid & 7;
    for (long long t = blockIdx.x; t < (long long)G * tn * tk; t += gridDim.x) {
        const long long g = t / tk / tn, bn = t / tk % tn, bk = t % tk;
        const long long r0 = bn * 128, c0 = bk * 128 + lu * 16;
        const char *gin = (const char *)a.in + (g * N * K) * 2;
        kq_unit u[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) kq_load(u[i], gin + ((r0 + lr + 32 * i) * K + c0) * 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            uint4 *p = (uint4 *)(dst + (g * N * K + (r0 + lr + 32 * i) * K + c0) * 2);
            p[0] = make_uint4(u[i].w[0], u[i].w[1], u[i].w[2], u[i].w[3]);
            p[1] = make_uint4(u[i].w[4], u[i].w[5], u[i].w[6], u[i].w[7]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) kq_real(const kq_args a) { kq_tiles<kq_bf16, kq_e4m3, KQ_BLOCK>(a); }
extern "C" __global__ void __launch_bounds__(256, 4) kq_delayed_e(const kq_args a) { kq_tiles<kq_bf16, kq_e4m3, KQ_DELAYED>(a); }
extern "C" __global__ void __launch_bounds__(256, 4) kq_tensor_e(const kq_args a) { kq_tiles<kq_bf16, kq_e4m3, KQ_TENSOR>(a); }
extern "C" __global__ void __launch_bounds__(256) kq_rows_e(const kq_args a) { kq_rows<kq_bf16, kq_e4m3>(a); }
extern "C" __global__ void __launch_bounds__(256) kq_rows1_e(const kq_args a) { kq_rows_1x128<kq_bf16, kq_e4m3>(a); }
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

template <class F> static float timeit(F f, int reps)
{
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) f();
    std::vector<float> ts;
    for (int i = 0; i < reps; ++i) {
        cudaEventRecord(e0); f(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

__global__ void fill(unsigned short *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
        float f = ((x & 0xffff) / 65536.0f - 0.5f) * 4.0f;
        p[i] = (unsigned short)(__float_as_uint(f) >> 16);
    }
}


// every kind at 1..4 CTAs per SM (the runtime's grid is SMs x CTAs-per-SM, capped by the work)
static void kinds(int sms, int reps)
{
    const long long G = 32, N = 4096, K = 7168, T = 32768;
    const size_t E = (size_t)G * N * K, ER = (size_t)T * K;
    void *in, *q, *qt; float *sc, *sct, *am;
    CK(cudaMalloc(&in, E * 2)); CK(cudaMalloc(&q, E)); CK(cudaMalloc(&qt, E));
    CK(cudaMalloc(&sc, 64 << 20)); CK(cudaMalloc(&sct, 64 << 20)); CK(cudaMalloc(&am, 4096));
    fill<<<1024, 256>>>((unsigned short *)in, E, 99u); CK(cudaDeviceSynchronize());
    std::vector<float> ones(1 << 20, 0.01f);
    CK(cudaMemcpy(sc, ones.data(), 4 << 20, cudaMemcpyHostToDevice));
    printf("kinds: W [%lld,%lld,%lld], X [%lld,%lld]; GB/s of bytes a quantizer must move\n", G, N, K, T, K);
    for (int per = 1; per <= 4; ++per) {
        const int grid = sms * per;
        auto run = [&](const char *name, double gb, auto f) {
            float ms = timeit(f, reps); printf("  ctas/SM %d  %-28s %8.3f ms %8.0f GB/s %6.1f%%\n", per, name, ms, gb / ms * 1e3, gb / ms * 1e3 / 43.0);
        };
        kq_args w = {}; w.in = in; w.out = q; w.out_t = qt; w.scale = sc; w.scale_t = sct; w.amax = am;
        w.rows = N; w.cols = K; w.ld_in = K; w.ld_out = K; w.groups = (int)G;
        kq_args wp = w; wp.out_t = nullptr; wp.scale_t = nullptr;
        run("tiles +T", E * 4.0 / 1e9, [&] { kq_real<<<grid, 256>>>(w); });
        run("tiles", E * 3.0 / 1e9, [&] { kq_real<<<grid, 256>>>(wp); });
        kq_args d = w; d.scale = sc; d.scale_t = nullptr;
        run("delayed +T", E * 4.0 / 1e9, [&] { kq_delayed_e<<<grid, 256>>>(d); });
        kq_args dp = d; dp.out_t = nullptr;
        run("delayed", E * 3.0 / 1e9, [&] { kq_delayed_e<<<grid, 256>>>(dp); });
        kq_args t = w; t.scale_t = sct; t.reverse = 1;
        run("tensor pass 2 +T (6 B moved)", E * 6.0 / 1e9, [&] { CK(cudaMemcpyAsync(sc, ones.data(), 128, cudaMemcpyHostToDevice)); kq_tensor_e<<<grid, 256>>>(t); });
        kq_args r = {}; r.in = in; r.out = q; r.scale = sc; r.rows = T; r.cols = K; r.ld_in = K; r.ld_out = K;
        r.ld_scale = T; r.groups = 1; r.tpr = 128;
        run("rows", ER * 3.0 / 1e9, [&] { kq_rows_e<<<grid, 256>>>(r); });
        run("rows_1x128", ER * 3.0 / 1e9, [&] { kq_rows1_e<<<grid, 256>>>(r); });
        CK(cudaGetLastError());
    }
    cudaFree(in); cudaFree(q); cudaFree(qt); cudaFree(sc); cudaFree(sct); cudaFree(am);
}


int main(int argc, char **argv)
{
    long long G = 32, N = 4096, K = 7168; int reps = 30; int only = -1;
    if (argc > 3) { G = atoll(argv[1]); N = atoll(argv[2]); K = atoll(argv[3]); }
    if (argc > 4) only = atoi(argv[4]);
    if (argc > 1 && !strcmp(argv[1], "kinds")) { int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0); kinds(sms, reps); return 0; }
    const size_t E = (size_t)G * N * K;
    void *in, *q, *qt, *alt, *cp; float *sc, *sct;
    CK(cudaMalloc(&in, E * 2)); CK(cudaMalloc(&q, E)); CK(cudaMalloc(&qt, E)); CK(cudaMalloc(&alt, E));
    CK(cudaMalloc(&cp, E * 2));
    CK(cudaMalloc(&sc, G * (N / 128) * (K / 128) * 4)); CK(cudaMalloc(&sct, G * (N / 128) * (K / 128) * 4));
    fill<<<1024, 256>>>((unsigned short *)in, E, 1234u); CK(cudaDeviceSynchronize());
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    kq_args a = {}; a.in = in; a.out = q; a.out_t = qt; a.scale = sc; a.scale_t = sct;
    a.rows = N; a.cols = K; a.ld_in = K; a.ld_out = K; a.groups = (int)G;
    const double gb_t = E * 4.0 / 1e9, gb_p = E * 3.0 / 1e9;
    printf("G=%lld N=%lld K=%lld, %d SMs, reps %d; GB/s of bytes moved (+T: 4 B/elt, plain 3, copy 4)\n", G, N, K, sms, reps);
    const int pmin = argc > 5 ? atoi(argv[5]) : 2, pmax = argc > 5 ? atoi(argv[5]) : 6;
    if (argc > 5) reps = 1;
    for (int per = pmin; per <= pmax; ++per) {
        const int grid = sms * per;
        auto run = [&](const char *name, double gb, auto f) {
            float ms = timeit(f, reps); printf("  ctas/SM %d  %-34s %8.3f ms %8.0f GB/s\n", per, name, ms, gb / ms * 1e3);
        };
        if (only < 0 || only == 0) run("real +T", gb_t, [&] { kq_real<<<grid, 256>>>(a); });
        kq_args p = a; p.out_t = nullptr; p.scale_t = nullptr;
        if (only < 0 || only == 1) run("real plain", gb_p, [&] { kq_real<<<grid, 256>>>(p); });
        if (only < 0 || only == 10) run("var0 +T (copy of kq_tiles)", gb_t, [&] { kqm<0><<<grid, 256>>>(a, (unsigned char *)alt); });
        if (only < 0 || only == 2) run("var2 q_t bytes in q layout", gb_t, [&] { kqm<2><<<grid, 256>>>(a, (unsigned char *)alt); });
        if (only < 0 || only == 3) run("var3 q_t not stored (3 B/elt)", gb_p, [&] { kqm<3><<<grid, 256>>>(a, (unsigned char *)alt); });
        if (only < 0 || only == 4) run("var4 +T, st.global.cs", gb_t, [&] { kqm<4><<<grid, 256>>>(a, (unsigned char *)alt); });
        if (only < 0 || only == 7) run("var7 +T, next tile's loads early", gb_t, [&] { kqpf<<<grid, 256>>>(a); });
        if (only < 0 || only == 5) run("copy 2+2 B/elt, tile walk", gb_t, [&] { kqcopy<<<grid, 256>>>(a, (unsigned char *)cp); });
        CK(cudaGetLastError());
    }

    {
        float ms = timeit([&] { cudaMemcpyAsync(cp, in, E * 2, cudaMemcpyDeviceToDevice); }, reps);
        printf("  cudaMemcpy D2D %zu MB                                %8.3f ms %8.0f GB/s\n", E * 2 >> 20, ms, E * 4.0 / 1e9 / ms * 1e3);
    }
    CK(cudaDeviceSynchronize());
    // check var0 == real bytes
    std::vector<unsigned char> h1(E), h2(E);
    kq_real<<<sms * 4, 256>>>(a); CK(cudaMemcpy(h1.data(), qt, E, cudaMemcpyDeviceToHost));
    CK(cudaMemset(qt, 0, E)); kqm<4><<<sms * 4, 256>>>(a, (unsigned char *)alt); CK(cudaMemcpy(h2.data(), qt, E, cudaMemcpyDeviceToHost));
    printf("var4 q_t == real q_t: %s\n", h1 == h2 ? "yes" : "NO");
    CK(cudaMemset(qt, 0, E)); kqpf<<<sms * 2, 256>>>(a); CK(cudaMemcpy(h2.data(), qt, E, cudaMemcpyDeviceToHost));
    printf("var7 q_t == real q_t: %s\n", h1 == h2 ? "yes" : "NO");
    return 0;
}
