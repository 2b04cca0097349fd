// Dev harness for templates/sm90_wgrad*.  Compiles generated kernels with
// NVRTC (the runtime's path), builds tensor maps as the runtime does (each
// map over its operand's whole extent {cols, capacity}, row stride lda/ldb,
// box from the launch line, 128-byte swizzle, OOB zero fill), launches
// min(#SMs, G*ceil(N/BM)*ceil(K/BN)) CTAs, and checks every output element
// (pad columns included) against a cuBLAS fp32 reference per group.
// Rows past sum(m) of dY and X hold NaN, so a masking leak shows.  Timing:
// CUDA events, median of 20 after 3 warm-ups, against a per-group cuBLAS
// loop (bf16 out) on the same buffers.
//
// usage: harness DIR check|bench VARIANT...   (DIR holds NAME.cu, NAME.launch)
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <nvrtc.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../common/kernel_abi.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CU(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *m_ = 0; cuGetErrorString(e_, &m_); \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_ ? m_ : "?"); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t e_ = (x); if (e_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "%s:%d: %s: cublas %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

struct Variant {
    std::string name, entry, out, output, intype;
    int threads = 0, smem = 0, abi = 0, abo = 0, bbi = 0, bbo = 0, accum = 0, split = 1, bm = 0, bn = 0, dbi = 0, dbo = 0;
    CUmodule mod = 0;
    CUfunction fn = 0;
    int osz() const { return out == "f32" ? 4 : 2; }
    int out_t() const { return out == "bf16" ? 0 : out == "fp16" ? 1 : 2; }
    bool discrete() const { return output == "discrete"; }
    bool f16in() const { return intype == "fp16"; }
};

static std::string slurp(const std::string &p)
{
    std::ifstream f(p, std::ios::binary);
    if (!f) { fprintf(stderr, "cannot read %s\n", p.c_str()); exit(1); }
    std::stringstream ss; ss << f.rdbuf(); return ss.str();
}

static void load_variant(const std::string &dir, Variant &v)
{
    std::istringstream ls(slurp(dir + "/" + v.name + ".launch"));
    ls >> v.entry >> v.threads >> v.smem >> v.abi >> v.abo >> v.bbi >> v.bbo >> v.out >> v.output >> v.accum >>
        v.split >> v.intype >> v.bm >> v.bn >> v.dbi >> v.dbo;
    std::string src = slurp(dir + "/" + v.name + ".cu");
    auto t0 = std::chrono::steady_clock::now();
    nvrtcProgram prog;
    nvrtcCreateProgram(&prog, src.c_str(), (v.name + ".cu").c_str(), 0, 0, 0);
    const char *opts[] = {"-arch=sm_90a", "-std=c++17", "--ptxas-options=-v"};
    nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
    size_t logn; nvrtcGetProgramLogSize(prog, &logn);
    std::string log(logn, 0); nvrtcGetProgramLog(prog, &log[0]);
    if (r != NVRTC_SUCCESS) { fprintf(stderr, "NVRTC %s: %s\n%s\n", v.name.c_str(), nvrtcGetErrorString(r), log.c_str()); exit(1); }
    size_t n; nvrtcGetCUBINSize(prog, &n);
    std::vector<char> cubin(n); nvrtcGetCUBIN(prog, cubin.data());
    nvrtcDestroyProgram(&prog);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    { std::ofstream o(dir + "/" + v.name + ".cubin", std::ios::binary); o.write(cubin.data(), n); }
    std::istringstream lg(log); std::string line;
    while (std::getline(lg, line))
        if (line.find("spill") != std::string::npos || line.find("Used") != std::string::npos ||
            line.find("C75") != std::string::npos)
            printf("  [%s] %s\n", v.name.c_str(), line.c_str());
    CU(cuModuleLoadData(&v.mod, cubin.data()));
    CU(cuModuleGetFunction(&v.fn, v.mod, v.entry.c_str()));
    CU(cuFuncSetAttribute(v.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v.smem));
    printf("variant %-12s out=%s %s acc=%d split=%d in=%s threads=%d smem=%d nvrtc=%.0f ms\n", v.name.c_str(),
           v.out.c_str(), v.output.c_str(), v.accum, v.split, v.intype.c_str(), v.threads, v.smem, ms);
}

// ------------------------------------------------------------- device helpers
__device__ __forceinline__ unsigned hash32(unsigned long long x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return (unsigned)x;
}
// rows x ld 16-bit matrix: random in [-1,1) for r < valid_rows && c < cols, NaN elsewhere
__global__ void fill_in(unsigned short *p, long long rows, long long ld, long long cols, long long valid_rows,
                        unsigned seed, int f16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * ld; i += (size_t)gridDim.x * blockDim.x) {
        long long r = i / ld, c = i % ld;
        unsigned short h;
        if (r < valid_rows && c < cols) {
            float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
            if (u == 0.f) u = 0.5f;
            h = f16 ? __half_as_ushort(__float2half(u)) : __bfloat16_as_ushort(__float2bfloat16(u));
        } else {
            h = f16 ? 0x7E00 : 0x7FC0;
        }
        p[i] = h;
    }
}
// out buffer [N, ldd] of one group: random f32 (accumulate) or poison for c < K; poison for c >= K
__global__ void init_out(void *p, long long n, long long ldd, long long K, int osz, int random, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)n * ldd; i += (size_t)gridDim.x * blockDim.x) {
        long long c = i % ldd;
        if (osz == 4) {
            unsigned bits = 0x7FBF7FBFu;
            if (random && c < K) {
                float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
                bits = __float_as_uint(u);
            }
            ((unsigned *)p)[i] = bits;
        } else {
            ((unsigned short *)p)[i] = 0x7FBF;
        }
    }
}
__device__ __forceinline__ float ld_out(const void *p, size_t i, int out_t)
{
    if (out_t == 0) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (out_t == 1) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}
__device__ __forceinline__ unsigned ld_bits(const void *p, size_t i, int osz)
{
    return osz == 4 ? ((const unsigned *)p)[i] : ((const unsigned short *)p)[i];
}
struct CheckRes { unsigned long long bad, bad_pad, bad_empty, nan; double se, sr; float maxerr; long long first_bad; };
// One group's output [N, ldd] against ref [N, K] (+ d0 [N, ldd] when accumulating).
__global__ void check_group(const void *d, int out_t, const float *ref, const void *d0, int empty, long long N,
                            long long K, long long ldd, float rtol, float atol, CheckRes *res, long long gbase)
{
    const int osz = out_t == 2 ? 4 : 2;
    unsigned long long bad = 0, badp = 0, bade = 0, nan = 0; double se = 0, sr = 0; float mx = 0;
    long long fb = -1;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)N * ldd; i += (size_t)gridDim.x * blockDim.x) {
        long long r = i / ldd, c = i % ldd;
        unsigned bits = ld_bits(d, i, osz);
        if (c >= K) {   // pad column: must be untouched
            unsigned want = d0 ? ld_bits(d0, i, osz) : (osz == 4 ? 0x7FBF7FBFu : 0x7FBFu);
            if (bits != want) ++badp;
            continue;
        }
        if (empty) {    // overwrite: exact zeros; accumulate: untouched
            unsigned want = d0 ? ld_bits(d0, i, osz) : 0u;
            if (bits != want) { ++bade; if (fb < 0) fb = gbase + (long long)i; }
            continue;
        }
        float x = ref[r * K + c] + (d0 ? ((const float *)d0)[i] : 0.f);
        float y = ld_out(d, i, out_t);
        if (!(y == y)) { ++nan; ++bad; if (fb < 0) fb = gbase + (long long)i; continue; }
        float e = fabsf(y - x);
        se += (double)e * e; sr += (double)x * x;
        mx = fmaxf(mx, e);
        if (e > atol + rtol * fabsf(x)) { ++bad; if (fb < 0) fb = gbase + (long long)i; }
    }
    atomicAdd(&res->bad, bad); atomicAdd(&res->bad_pad, badp); atomicAdd(&res->bad_empty, bade);
    atomicAdd(&res->nan, nan); atomicAdd(&res->se, se); atomicAdd(&res->sr, sr);
    atomicMax((int *)&res->maxerr, __float_as_int(mx));
    if (fb >= 0) atomicCAS((unsigned long long *)&res->first_bad, (unsigned long long)-1LL, (unsigned long long)fb);
}

// ------------------------------------------------------------- host side
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                               const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                               CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static encode_fn p_encode;

// The runtime's convention: {cols, capacity rows}, row stride ld elements.
static void make_map(kiln_tmap *m, const void *base, int esz_kind, unsigned long long cols, unsigned long long rows,
                     unsigned long long ld, int bi, int bo)
{
    // esz_kind: 0 bf16, 1 fp16, 2 f32
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {ld * (esz_kind == 2 ? 4 : 2)};
    cuuint32_t box[2] = {(cuuint32_t)bi, (cuuint32_t)bo};
    cuuint32_t es[2] = {1, 1};
    CU(p_encode((CUtensorMap *)m, esz_kind == 2 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : esz_kind == 1 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                (void *)base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

struct Case {
    std::string name;
    std::vector<int> m; int N, K;
    int extra;      // rows past sum(m) in dY and X (NaN)
    bool offsets;
    int pad;        // extra elements per row of dY, X and dW
    double torch;   // BENCH.md torch._grouped_mm wgrad TFLOP/s (H200), 0 if none
};

static cublasHandle_t blas;
static int num_sms;
static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

struct Result { std::string cas, var; double ms, tf, loop_tf, torch; bool ok; };
static std::vector<Result> results;

// Runs every variant on one case (shared inputs and reference); true when all passed.
static bool run_case(std::vector<Variant> &vs, const Case &c, bool timing)
{
    const int G = (int)c.m.size();
    long long T = 0; for (int x : c.m) T += x;
    const long long cap = std::max(T + c.extra, 1LL);
    const long long N = c.N, K = c.K;
    const long long lda = N + c.pad, ldb = K + c.pad, ldd = K + c.pad;
    bool f16 = false; for (auto &v : vs) f16 |= v.f16in();
    for (auto &v : vs) if (v.f16in() != f16) { fprintf(stderr, "mixing fp16/bf16 inputs in one run\n"); exit(2); }

    unsigned short *dY, *X; float *ref;
    CK(cudaMalloc(&dY, (size_t)cap * lda * 2));
    CK(cudaMalloc(&X, (size_t)cap * ldb * 2));
    CK(cudaMalloc(&ref, (size_t)G * N * K * 4));
    fill_in<<<2048, 256>>>(dY, cap, lda, N, T, 1234u + G + (unsigned)N, f16);
    fill_in<<<2048, 256>>>(X, cap, ldb, K, T, 777u + (unsigned)K, f16);
    CK(cudaGetLastError());

    std::vector<int> sizes(G);
    { long long run = 0; for (int g = 0; g < G; ++g) { run += c.m[g]; sizes[g] = c.offsets ? (int)run : c.m[g]; } }
    int *dsizes, *dover;
    CK(cudaMalloc(&dsizes, G * 4)); CK(cudaMemcpy(dsizes, sizes.data(), G * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dover, 4)); CK(cudaMemset(dover, 0, 4));

    // reference: dW_g (row-major [N,K]) = col-major [K,N] = X_g^T(col) * dY_g^T
    const float one = 1.f, zero = 0.f;
    const cudaDataType it = f16 ? CUDA_R_16F : CUDA_R_16BF;
    {
        long long r0 = 0;
        for (int g = 0; g < G; ++g) {
            float *rg = ref + (size_t)g * N * K;
            if (c.m[g] > 0)
                CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)K, (int)N, c.m[g], &one, X + r0 * ldb, it, (int)ldb,
                                dY + r0 * lda, it, (int)lda, &zero, rg, CUDA_R_32F, (int)K, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
            else
                CK(cudaMemsetAsync(rg, 0, (size_t)N * K * 4));
            r0 += c.m[g];
        }
        CK(cudaDeviceSynchronize());
    }

    bool all_ok = true;
    double loop_tf = 0, loop_acc_tf = 0;
    for (auto &v : vs) {
        const int osz = v.osz();
        const size_t gbytes = (size_t)N * ldd * osz;
        // outputs: dense [G,N,ldd] or G separate buffers; d0 keeps the initial values
        void *dense = 0, *d0 = 0; std::vector<void *> ptrs(G, nullptr); void **dptrs = 0;
        if (v.discrete()) {
            for (int g = 0; g < G; ++g) CK(cudaMalloc(&ptrs[g], gbytes));
            CK(cudaMalloc(&dptrs, G * sizeof(void *)));
            CK(cudaMemcpy(dptrs, ptrs.data(), G * sizeof(void *), cudaMemcpyHostToDevice));
        } else {
            CK(cudaMalloc(&dense, gbytes * G));
            for (int g = 0; g < G; ++g) ptrs[g] = (char *)dense + gbytes * g;
        }
        if (v.accum) CK(cudaMalloc(&d0, gbytes * G));
        for (int g = 0; g < G; ++g) {
            init_out<<<512, 256>>>(ptrs[g], N, ldd, K, osz, v.accum, 4242u + g);
            if (v.accum) CK(cudaMemcpyAsync((char *)d0 + gbytes * g, ptrs[g], gbytes, cudaMemcpyDeviceToDevice));
        }
        CK(cudaGetLastError());

        kiln_kernel_args args;
        memset(&args, 0, sizeof args);
        args.a = dY; args.b = X; args.d = dense; args.d_ptrs = (void *const *)dptrs; args.sizes = dsizes;
        args.overflow = dover; args.capacity = cap; args.lda = lda; args.ldb = ldb; args.ldd = ldd;
        args.n = N; args.k = K; args.groups = G; args.sizes_are_offsets = c.offsets; args.accumulate = v.accum;
        args.alpha = 1.f; args.num_sms = num_sms;
        kiln_tmap ta, tb, td;
        memset(&td, 0, sizeof td);
        make_map(&ta, dY, f16, N, cap, lda, v.abi, v.abo);
        make_map(&tb, X, f16, K, cap, ldb, v.bbi, v.bbo);
        // tmap_d (dense accumulate): dW as {K, G*N}, row stride ldd, like the runtime
        if (v.dbi) make_map(&td, dense, v.out_t() == 2 ? 2 : v.out_t(), K, (unsigned long long)G * N, ldd, v.dbi, v.dbo);
        void *params[] = {&args, &ta, &tb, &td};
        // the runtime's grid: min(ctas_per_sm * SMs, G * ceil(N/BM) * ceil(K/BN))
        long long tiles = (long long)G * ((N + v.bm - 1) / v.bm) * ((K + v.bn - 1) / v.bn);
        unsigned grid = (unsigned)std::max(1LL, std::min<long long>(num_sms, tiles));
        auto launch = [&]() { CU(cuLaunchKernel(v.fn, grid, 1, 1, v.threads, 1, 1, v.smem, 0, params, 0)); };
        launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());

        CheckRes *res; CK(cudaMallocManaged(&res, sizeof(CheckRes))); memset(res, 0, sizeof *res); res->first_bad = -1;
        float rtol = v.out == "f32" ? 2e-5f : (v.out == "fp16" ? 2e-3f : 8e-3f);
        float atol = v.out == "f32" ? 2e-3f : 1e-2f;
        for (int g = 0; g < G; ++g)
            check_group<<<256, 256>>>(ptrs[g], v.out_t(), ref + (size_t)g * N * K,
                                      d0 ? (char *)d0 + gbytes * g : nullptr, c.m[g] == 0, N, K, ldd, rtol, atol, res,
                                      (long long)g * N * ldd);
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        double rel = res->sr > 0 ? sqrt(res->se / res->sr) : 0;
        bool ok = res->bad == 0 && res->bad_pad == 0 && res->bad_empty == 0 && rel < 5e-3;
        char fbuf[96] = "";
        if (res->first_bad >= 0) {
            long long fb = res->first_bad, g = fb / (N * ldd), r = (fb % (N * ldd)) / ldd, col = fb % ldd;
            snprintf(fbuf, sizeof fbuf, " first_bad=g%lld,n%lld,k%lld", g, r, col);
        }
        printf("  %-5s %-12s %-11s G=%-4d T=%-7lld N=%-5lld K=%-5lld %s pad=%d bad=%llu nan=%llu pad_bad=%llu "
               "empty_bad=%llu rel=%.2e max=%.3g%s\n",
               ok ? "PASS" : "FAIL", v.name.c_str(), c.name.c_str(), G, T, N, K, c.offsets ? "offs" : "cnts", c.pad,
               res->bad, res->nan, res->bad_pad, res->bad_empty, rel, res->maxerr, fbuf);
        fflush(stdout);
        all_ok &= ok;
        cudaFree(res);

        if (timing && ok) {
            cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
            auto time_fn = [&](auto fn, int reps) {
                for (int i = 0; i < 3; ++i) fn();
                std::vector<float> ts;
                for (int i = 0; i < reps; ++i) {
                    CK(cudaEventRecord(e0)); fn(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ts.push_back(ms);
                }
                CK(cudaGetLastError());
                return median(ts);
            };
            double fl = 2.0 * T * N * K;
            if (v.accum && loop_acc_tf == 0) {   // peer for accumulate: cuBLAS loop, f32 C, beta = 1
                void *Yf; CK(cudaMalloc(&Yf, (size_t)G * N * K * 4));
                CK(cudaMemset(Yf, 0, (size_t)G * N * K * 4));
                auto loop = [&]() {
                    long long r0 = 0;
                    for (int g = 0; g < G; ++g) {
                        if (c.m[g] > 0)
                            CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)K, (int)N, c.m[g], &one, X + r0 * ldb,
                                            it, (int)ldb, dY + r0 * lda, it, (int)lda, &one,
                                            (char *)Yf + (size_t)g * N * K * 4, CUDA_R_32F, (int)K,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                        r0 += c.m[g];
                    }
                };
                loop_acc_tf = fl / time_fn(loop, 20) / 1e9;
                CK(cudaFree(Yf));
            }
            if (!v.accum && loop_tf == 0) {   // per-group cuBLAS loop, bf16 out, on the same inputs
                void *Yb; CK(cudaMalloc(&Yb, (size_t)G * N * K * 2));
                auto loop = [&]() {
                    long long r0 = 0;
                    for (int g = 0; g < G; ++g) {
                        if (c.m[g] > 0)
                            CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)K, (int)N, c.m[g], &one, X + r0 * ldb,
                                            it, (int)ldb, dY + r0 * lda, it, (int)lda, &zero,
                                            (char *)Yb + (size_t)g * N * K * 2, f16 ? CUDA_R_16F : CUDA_R_16BF, (int)K,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                        r0 += c.m[g];
                    }
                };
                loop_tf = fl / time_fn(loop, 20) / 1e9;
                CK(cudaFree(Yb));
            }
            float ms = time_fn(launch, 20);
            const double peer = v.accum ? loop_acc_tf : loop_tf;
            results.push_back({c.name, v.name, ms, fl / ms / 1e9, peer, c.torch, true});
            printf("  TIME %-12s %-12s %.4f ms %.1f TFLOP/s (cuBLAS loop %.1f)\n", c.name.c_str(), v.name.c_str(), ms,
                   fl / ms / 1e9, peer);
            fflush(stdout);
            CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
        }
        if (v.discrete()) { for (int g = 0; g < G; ++g) cudaFree(ptrs[g]); cudaFree(dptrs); }
        else cudaFree(dense);
        if (d0) cudaFree(d0);
        CK(cudaGetLastError());
    }
    cudaFree(dY); cudaFree(X); cudaFree(ref); cudaFree(dsizes); cudaFree(dover);
    return all_ok;
}

static std::vector<int> balanced(int G, int m) { return std::vector<int>(G, m); }
static std::vector<int> skew32(int T)
{
    const int G = 32;
    std::vector<double> w(G); double sw = 0;
    for (int g = 0; g < G; ++g) { w[g] = (g == 16 || g == 17) ? 0 : 1.0 / pow(g + 1, 1.2); sw += w[g]; }
    std::vector<int> m(G); int s = 0;
    for (int g = 0; g < G; ++g) { m[g] = (int)floor(T * w[g] / sw); s += m[g]; }
    m[0] += T - s;
    return m;
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: harness DIR check|bench VARIANT...\n"); return 2; }
    std::string dir = argv[1], mode = argv[2];
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    num_sms = prop.multiProcessorCount;
    printf("device %s, %d SMs, L2 %d MB\n", prop.name, num_sms, prop.l2CacheSize >> 20);
    p_encode = cuTensorMapEncodeTiled;
    CB(cublasCreate(&blas));
    std::vector<Variant> vs;
    for (int i = 3; i < argc; ++i) { Variant v; v.name = argv[i]; load_variant(dir, v); vs.push_back(v); }

    bool all_ok = true;
    if (mode == "check") {
        std::vector<int> g1024(1024);
        unsigned s = 7;
        for (int g = 0; g < 1024; ++g) { s = s * 1103515245u + 12345u; g1024[g] = ((s >> 16) % 4 == 0) ? 0 : (int)((s >> 8) % 41); }
        std::vector<int> mod64;
        for (int j = 0; j < 8; ++j) mod64.push_back(64 * j + 1);
        std::vector<Case> cs = {
            {"mixed5", {0, 1, 65, 129, 300}, 384, 512, 37, false, 8, 0},
            {"one_group", {1000}, 200, 136, 64, true, 0, 0},
            {"mod64p1", mod64, 256, 384, 5, false, 16, 0},
            {"g1024", g1024, 128, 256, 3, true, 0, 0},
            {"skew32s", skew32(32768), 256, 512, 100, true, 0, 0},
            {"all_empty", {0, 0, 0}, 128, 256, 16, false, 8, 0},
            {"long_tail", {5000, 3}, 192, 320, 11, false, 8, 0},
            {"aligned", {64, 128, 1, 63, 640}, 128, 256, 0, true, 0, 0},
            {"tiny", {100, 37}, 72, 40, 9, false, 0, 0},
        };
        for (auto &c : cs) all_ok &= run_case(vs, c, false);
    } else {
        std::vector<Case> cs = {
            {"mixtral", balanced(8, 4096), 14336, 4096, 0, true, 0, 625},
            {"dsv3_fc1", balanced(32, 1024), 4096, 7168, 0, true, 0, 598},
            {"dsv3_fc2", balanced(32, 1024), 7168, 2048, 0, true, 0, 604},
            {"qwen3_30b", balanced(128, 512), 1536, 2048, 0, true, 0, 533},
            {"skew32", skew32(32768), 4096, 4096, 0, true, 0, 562},
        };
        const char *filter = getenv("CASES");
        for (auto &c : cs) {
            if (filter && !strstr(filter, c.name.c_str())) continue;
            all_ok &= run_case(vs, c, true);
        }
        printf("\n===== summary (TFLOP/s = 2*T*N*K / time; cublas = per-group cublasGemmEx loop, bf16 out, or f32 beta=1 for acc variants; torch = BENCH.md H200 figure) =====\n");
        printf("%-10s %-12s %8s %8s %8s %8s %7s %7s\n", "case", "variant", "ms", "TFLOP/s", "cublas", "torch",
               "x_cublas", "x_torch");
        for (auto &r : results)
            printf("%-10s %-12s %8.4f %8.1f %8.1f %8.0f %7.3f %7.3f\n", r.cas.c_str(), r.var.c_str(), r.ms, r.tf,
                   r.loop_tf, r.torch, r.tf / r.loop_tf, r.tf / r.torch);
    }
    printf(all_ok ? "ALL CHECKS PASSED\n" : "SOME CHECKS FAILED\n");
    return all_ok ? 0 : 1;
}
