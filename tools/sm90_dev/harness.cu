// Dev harness for templates/sm90*.  Compiles generated kernels with NVRTC
// (the runtime's path), builds tensor maps as the runtime must, checks every
// output element against cuBLAS (fp32 output) plus a reference epilogue,
// checks that rows past the valid ones stay poisoned, and times the kernels
// against a per-group cuBLAS loop and a dense cuBLAS GEMM of equal FLOPs.
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

static cublasHandle_t blas;
static int num_sms;

struct Variant {
    std::string name, entry, op, out, epi, in = "bf16";
    int threads = 0, smem = 0, abi = 0, abo = 0, bbi = 0, bbo = 0, cs = 1, grid = 0;
    CUmodule mod = 0;
    CUfunction fn = 0;
    double compile_ms = 0;
    bool bias = false, row_scale = false, scale_bias = false, alpha_pg = false, beta = false;
    int osz() const { return out == "f32" ? 4 : 2; }
    int out_t() const { return out == "bf16" ? 0 : out == "fp16" ? 1 : 2; }
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
    ls >> v.entry >> v.threads >> v.smem >> v.abi >> v.abo >> v.bbi >> v.bbo >> v.op >> v.out >> v.epi >> v.cs >> v.in;
    if (v.cs < 1) v.cs = 1;
    if (v.in != "fp16") v.in = "bf16";
    v.bias = v.epi.find("bias") != std::string::npos;
    v.row_scale = v.epi.find("row_scale") != std::string::npos;
    v.scale_bias = v.epi.find("scale_bias") != std::string::npos;
    v.alpha_pg = v.epi.find("alpha_pg") != std::string::npos;
    v.beta = v.epi.find("beta") != std::string::npos;
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
    v.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    { std::ofstream o(dir + "/" + v.name + ".cubin", std::ios::binary); o.write(cubin.data(), n); }
    // ptxas lines only
    std::istringstream lg(log); std::string line;
    while (std::getline(lg, line)) if (line.find("ptxas") != std::string::npos && (line.find("Used") != std::string::npos || line.find("spill") != std::string::npos))
        printf("  [%s] %s\n", v.name.c_str(), line.c_str());
    CU(cuModuleLoadData(&v.mod, cubin.data()));
    CU(cuModuleGetFunction(&v.fn, v.mod, v.entry.c_str()));
    CU(cuFuncSetAttribute(v.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v.smem));
    v.grid = num_sms / v.cs * v.cs;
    if (v.cs > 1) {
        // persistent grid with clusters: no more CTAs than clusters that fit at once
        CUlaunchAttribute attr[1]; memset(attr, 0, sizeof attr);
        attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[0].value.clusterDim.x = v.cs; attr[0].value.clusterDim.y = 1; attr[0].value.clusterDim.z = 1;
        CUlaunchConfig cfg; memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = v.grid; cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = v.threads; cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = v.smem; cfg.attrs = attr; cfg.numAttrs = 1;
        int ncl = 0;
        CUresult r = cuOccupancyMaxActiveClusters(&ncl, v.fn, &cfg);
        printf("  [%s] cluster %d: max active clusters %d (%s)\n", v.name.c_str(), v.cs, ncl, r == CUDA_SUCCESS ? "ok" : "query failed");
        if (r == CUDA_SUCCESS && ncl > 0) v.grid = std::min(v.grid, ncl * v.cs);
    }
    printf("variant %-14s op=%s out=%s epi=%s threads=%d smem=%d cluster=%d grid=%d nvrtc=%.0f ms\n", v.name.c_str(), v.op.c_str(),
           v.out.c_str(), v.epi.c_str(), v.threads, v.smem, v.cs, v.grid, v.compile_ms);
}

// ------------------------------------------------------------- device helpers
__device__ __forceinline__ unsigned hash32(unsigned long long x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return (unsigned)x;
}
__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, unsigned seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
        p[i] = __float2bfloat16(u * scale);
    }
}
__global__ void fill_f16(__half *p, size_t n, unsigned seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
        p[i] = __float2half(u * scale);
    }
}
__global__ void fill_f32(float *p, size_t n, unsigned seed, float lo, float hi)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f);
        p[i] = lo + (hi - lo) * u;
    }
}
__global__ void fill_out(void *p, size_t n, int out_t, unsigned seed)   // random values of the output type
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (hash32(i * 2654435761ULL + seed) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
        if (out_t == 0) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(u);
        else if (out_t == 1) ((__half *)p)[i] = __float2half(u);
        else ((float *)p)[i] = u;
    }
}
__global__ void poison16(unsigned short *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = 0x7FBF;
}
__device__ __forceinline__ float ld_out(const void *p, size_t i, int out_t)
{
    if (out_t == 0) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (out_t == 1) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}
// ref (fp32 acc from cuBLAS) -> full epilogue, in place
__global__ void ref_epilogue(float *ref, long long rows, int ncols, const int *rowgrp, const float *rs, float alpha,
                             const float *alpha_pg, const void *bias, long long ld_bias, int scale_bias,
                             const void *c, long long ldc, float beta, int out_t)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * ncols; i += (size_t)gridDim.x * blockDim.x) {
        long long r = i / ncols; int n = i % ncols;
        int g = rowgrp[r];
        float a = alpha_pg ? alpha_pg[g] : alpha;
        float s = rs ? rs[r] : 1.f;
        float v = s * a * ref[i];
        if (bias) v += (scale_bias && rs ? s : 1.f) * ld_out(bias, (size_t)g * ld_bias + n, out_t);
        if (c && beta != 0.f) v += beta * ld_out(c, (size_t)r * ldc + n, out_t);
        ref[i] = v;
    }
}
struct CheckRes { unsigned long long bad, bad_poison, nan; double se, sr; float maxerr; };
__global__ void check_out(const void *d, int out_t, const float *ref, long long valid, long long rows, int ncols,
                          long long ldd, float rtol, float atol, CheckRes *res)
{
    unsigned long long bad = 0, badp = 0, nan = 0; double se = 0, sr = 0; float mx = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * ncols; i += (size_t)gridDim.x * blockDim.x) {
        long long r = i / ncols; int n = i % ncols;
        size_t di = (size_t)r * ldd + n;
        if (r >= valid) {
            bool ok = out_t == 2 ? ((const unsigned *)d)[di] == 0x7FBF7FBFu : ((const unsigned short *)d)[di] == 0x7FBF;
            if (!ok) ++badp;
            continue;
        }
        float y = ld_out(d, di, out_t), x = ref[i];
        if (!(y == y)) { ++nan; ++bad; continue; }
        float e = fabsf(y - x);
        se += (double)e * e; sr += (double)x * x;
        mx = fmaxf(mx, e);
        if (e > atol + rtol * fabsf(x)) ++bad;
    }
    atomicAdd(&res->bad, bad); atomicAdd(&res->bad_poison, badp); atomicAdd(&res->nan, nan);
    atomicAdd(&res->se, se); atomicAdd(&res->sr, sr);
    atomicMax((int *)&res->maxerr, __float_as_int(mx));
}

// ------------------------------------------------------------- host side
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                               const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                               CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static encode_fn p_encode;

static void make_map(kiln_tmap *m, const void *base, unsigned long long inner, unsigned long long outer, int bi, int bo,
                     bool f16 = false)
{
    cuuint64_t dims[2] = {inner, outer};
    cuuint64_t strides[1] = {inner * 2};
    cuuint32_t box[2] = {(cuuint32_t)bi, (cuuint32_t)bo};
    cuuint32_t es[2] = {1, 1};
    CU(p_encode((CUtensorMap *)m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box, es,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

struct Case {
    std::string name; std::string op;
    std::vector<int> m; int K, N;
    long long cap;       // rows of the row operands (may be < sum: overflow)
    int extra_rows;      // poison rows past cap in D
    bool offsets;
    double torch_tflops; // BENCH.md peer, 0 if none
};


static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

struct Timing { float ms = 0, loop_ms = 0, dense_ms = 0; };

// Returns true when the check passed.
static bool run_case(Variant &v, const Case &c, bool timing, Timing *tm, bool peers)
{
    const bool fprop = v.op == "fprop";
    const int G = (int)c.m.size();
    long long total = 0; for (int x : c.m) total += x;
    const long long cap = c.cap;
    const long long valid = std::min(total, cap);
    const int acols = fprop ? c.K : c.N;     // A inner dim
    const int ncols = fprop ? c.N : c.K;     // output columns
    const long long drows = cap + c.extra_rows;
    const int osz = v.osz();

    __nv_bfloat16 *A, *W; void *D; float *ref;
    CK(cudaMalloc(&A, (size_t)cap * acols * 2));
    CK(cudaMalloc(&W, (size_t)G * c.N * c.K * 2));
    CK(cudaMalloc(&D, (size_t)drows * ncols * osz));
    CK(cudaMalloc(&ref, (size_t)std::max(valid, 1LL) * ncols * 4));
    const bool f16in = v.in == "fp16";
    const cudaDataType_t ity = f16in ? CUDA_R_16F : CUDA_R_16BF;
    if (f16in) {
        fill_f16<<<1024, 256>>>((__half *)A, (size_t)cap * acols, 12345u + G, 1.f);
        fill_f16<<<1024, 256>>>((__half *)W, (size_t)G * c.N * c.K, 777u + c.K, 1.f);
    } else {
        fill_bf16<<<1024, 256>>>(A, (size_t)cap * acols, 12345u + G, 1.f);
        fill_bf16<<<1024, 256>>>(W, (size_t)G * c.N * c.K, 777u + c.K, 1.f);
    }
    poison16<<<1024, 256>>>((unsigned short *)D, (size_t)drows * ncols * osz / 2);
    CK(cudaGetLastError());

    std::vector<int> sizes(G);
    { long long run = 0; for (int g = 0; g < G; ++g) { run += c.m[g]; sizes[g] = c.offsets ? (int)run : c.m[g]; } }
    int *dsizes, *dover, *rowgrp;
    CK(cudaMalloc(&dsizes, G * 4)); CK(cudaMemcpy(dsizes, sizes.data(), G * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dover, 4)); CK(cudaMemset(dover, 0, 4));
    std::vector<int> rg(std::max(valid, 1LL), -1);
    { long long r = 0; for (int g = 0; g < G; ++g) for (int i = 0; i < c.m[g]; ++i, ++r) if (r < valid) rg[r] = g; }
    CK(cudaMalloc(&rowgrp, rg.size() * 4)); CK(cudaMemcpy(rowgrp, rg.data(), rg.size() * 4, cudaMemcpyHostToDevice));

    // epilogue operands
    float *rs = 0, *apg = 0; void *bias = 0, *cmat = 0;
    float beta = 0.f, alpha = 1.f;
    if (v.row_scale) { CK(cudaMalloc(&rs, cap * 4)); fill_f32<<<256, 256>>>(rs, cap, 99, 0.25f, 1.5f); }
    if (v.alpha_pg) { CK(cudaMalloc(&apg, G * 4)); fill_f32<<<8, 256>>>(apg, G, 98, 0.5f, 2.0f); }
    else alpha = v.epi == "none" ? 1.f : 0.75f;
    if (v.bias) { CK(cudaMalloc(&bias, (size_t)G * ncols * osz)); fill_out<<<256, 256>>>(bias, (size_t)G * ncols, v.out_t(), 97); }
    if (v.beta) { CK(cudaMalloc(&cmat, (size_t)cap * ncols * osz)); fill_out<<<1024, 256>>>(cmat, (size_t)cap * ncols, v.out_t(), 96); beta = -0.5f; }

    kiln_kernel_args args;
    memset(&args, 0, sizeof args);
    args.a = A; args.b = W; args.d = D; args.sizes = dsizes;
    args.bias = bias; args.row_scale = rs; args.alpha_ptr = apg; args.c = cmat; args.overflow = dover;
    args.capacity = cap; args.lda = acols; args.ldb = c.K; args.ldd = ncols; args.ldc = ncols; args.ld_bias = ncols;
    args.n = c.N; args.k = c.K; args.groups = G; args.sizes_are_offsets = c.offsets;
    args.scale_bias = v.scale_bias; args.alpha = alpha; args.beta = beta; args.num_sms = num_sms;
    kiln_tmap ta, tb, td;
    memset(&td, 0, sizeof td);
    make_map(&ta, A, acols, cap, v.abi, v.abo, f16in);
    make_map(&tb, W, c.K, (unsigned long long)G * c.N, v.bbi, v.bbo, f16in);
    void *params[] = {&args, &ta, &tb, &td};
    auto launch = [&]() {
        if (v.cs > 1) {   // as runtime/launch.c: 1-D cluster attribute
            CUlaunchAttribute attr[1]; memset(attr, 0, sizeof attr);
            attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr[0].value.clusterDim.x = v.cs; attr[0].value.clusterDim.y = 1; attr[0].value.clusterDim.z = 1;
            CUlaunchConfig cfg; memset(&cfg, 0, sizeof cfg);
            cfg.gridDimX = v.grid; cfg.gridDimY = cfg.gridDimZ = 1;
            cfg.blockDimX = v.threads; cfg.blockDimY = cfg.blockDimZ = 1;
            cfg.sharedMemBytes = v.smem; cfg.hStream = 0; cfg.attrs = attr; cfg.numAttrs = 1;
            CU(cuLaunchKernelEx(&cfg, v.fn, params, 0));
        } else {
            CU(cuLaunchKernel(v.fn, v.grid, 1, 1, v.threads, 1, 1, v.smem, 0, params, 0));
        }
    };
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    // reference: cuBLAS fp32 per group, then the epilogue
    {
        const float one = 1.f, zero = 0.f;
        long long r0 = 0;
        for (int g = 0; g < G; ++g) {
            long long m = std::min<long long>(c.m[g], valid - r0);
            if (m > 0) {
                const __nv_bfloat16 *Wg = W + (size_t)g * c.N * c.K;
                if (fprop)
                    CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, c.N, (int)m, c.K, &one, Wg, ity, c.K,
                                    A + (size_t)r0 * acols, ity, acols, &zero, ref + (size_t)r0 * ncols, CUDA_R_32F, ncols,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                else
                    CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, c.K, (int)m, c.N, &one, Wg, ity, c.K,
                                    A + (size_t)r0 * acols, ity, acols, &zero, ref + (size_t)r0 * ncols, CUDA_R_32F, ncols,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            }
            r0 += std::max<long long>(m, 0);
            if (r0 >= valid) break;
        }
        if (valid > 0 && v.epi != "none")
            ref_epilogue<<<1024, 256>>>(ref, valid, ncols, rowgrp, rs, alpha, apg, bias, ncols, v.scale_bias, cmat, ncols,
                                        beta, v.out_t());
        CK(cudaGetLastError());
    }
    CheckRes *res; CK(cudaMallocManaged(&res, sizeof(CheckRes))); memset(res, 0, sizeof *res);
    float rtol = v.out == "f32" ? 1e-4f : (v.out == "fp16" ? 2e-3f : 8e-3f);
    float atol = 2e-2f;
    check_out<<<1024, 256>>>(D, v.out_t(), ref, valid, drows, ncols, ncols, rtol, atol, res);
    CK(cudaDeviceSynchronize());
    int over = 0; CK(cudaMemcpy(&over, dover, 4, cudaMemcpyDeviceToHost));
    bool over_ok = (over == 1) == (total > cap);
    double rel = res->sr > 0 ? sqrt(res->se / res->sr) : 0;
    bool ok = res->bad == 0 && res->bad_poison == 0 && over_ok;
    printf("  %-5s %-14s %-16s G=%-4d T=%-7lld cap=%-7lld K=%-5d N=%-5d %s  bad=%llu nan=%llu poison_bad=%llu overflow=%d rel=%.2e max=%.3g\n",
           ok ? "PASS" : "FAIL", v.name.c_str(), c.name.c_str(), G, total, cap, c.K, c.N, c.offsets ? "offs" : "cnts",
           res->bad, res->nan, res->bad_poison, over, rel, res->maxerr);

    if (timing && ok) {
        cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        auto time_fn = [&](auto fn, int reps) {
            // warm up for >= 150 ms of device time so clocks have ramped
            float warm = 0;
            for (int i = 0; i < 1000 && (i < 3 || warm < 150.f); ++i) {
                CK(cudaEventRecord(e0)); fn(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); warm += ms;
            }
            std::vector<float> ts;
            for (int i = 0; i < reps; ++i) {
                CK(cudaEventRecord(e0)); fn(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ts.push_back(ms);
            }
            return median(ts);
        };
        tm->ms = time_fn(launch, 30);
        if (peers) {
            // per-group cuBLAS loop (bf16 out) and a dense GEMM of the same FLOPs
            __nv_bfloat16 *Y; CK(cudaMalloc(&Y, (size_t)valid * ncols * 2));
            const float one = 1.f, zero = 0.f;
            auto loop = [&]() {
                long long r0 = 0;
                for (int g = 0; g < G; ++g) {
                    int m = c.m[g];
                    if (m > 0) {
                        const __nv_bfloat16 *Wg = W + (size_t)g * c.N * c.K;
                        if (fprop)
                            CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, c.N, m, c.K, &one, Wg, CUDA_R_16BF, c.K,
                                            A + (size_t)r0 * acols, CUDA_R_16BF, acols, &zero, Y + (size_t)r0 * ncols, CUDA_R_16BF, ncols,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                        else
                            CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, c.K, m, c.N, &one, Wg, CUDA_R_16BF, c.K,
                                            A + (size_t)r0 * acols, CUDA_R_16BF, acols, &zero, Y + (size_t)r0 * ncols, CUDA_R_16BF, ncols,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                    }
                    r0 += m;
                }
            };
            tm->loop_ms = time_fn(loop, 15);
            // dense: Y[T, ncols] = A[T, red] * B, with B the first weight rows (W is big enough)
            auto dense = [&]() {
                if (fprop)
                    CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, c.N, (int)valid, c.K, &one, W, CUDA_R_16BF, c.K,
                                    A, CUDA_R_16BF, acols, &zero, Y, CUDA_R_16BF, ncols, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                else
                    CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, c.K, (int)valid, c.N, &one, W, CUDA_R_16BF, c.K,
                                    A, CUDA_R_16BF, acols, &zero, Y, CUDA_R_16BF, ncols, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            };
            tm->dense_ms = time_fn(dense, 25);
            CK(cudaFree(Y));
        }
        CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    }
    cudaFree(A); cudaFree(W); cudaFree(D); cudaFree(ref); cudaFree(dsizes); cudaFree(dover); cudaFree(rowgrp);
    cudaFree(res); if (rs) cudaFree(rs); if (apg) cudaFree(apg); if (bias) cudaFree(bias); if (cmat) cudaFree(cmat);
    CK(cudaGetLastError());
    return ok;
}

static std::vector<int> balanced(int G, int m) { return std::vector<int>(G, m); }
static std::vector<int> skew32()
{
    const int G = 32, T = 32768;
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
        std::vector<int> r128(128);
        unsigned s = 1;
        for (int g = 0; g < 128; ++g) { s = s * 1103515245u + 12345u; r128[g] = (g % 7 == 3) ? 0 : (int)((s >> 8) % 300); }
        r128[5] = 65; r128[6] = 129; r128[7] = 1;
        std::vector<int> r1024(1024);
        for (int g = 0; g < 1024; ++g) { s = s * 1103515245u + 12345u; r1024[g] = (s >> 9) % 5 == 0 ? 0 : (int)((s >> 12) % 40); }
        for (auto &v : vs) {
            std::vector<Case> cs = {
                {"mixed5", v.op, {0, 1, 65, 129, 300}, 512, 384, 0, 37, false, 0},
                {"one_group", v.op, {1000}, 200, 136, 0, 64, false, 0},
                {"g128_offs", v.op, r128, 256, 512, 0, 50, true, 0},
                {"g128_cnts", v.op, r128, 384, 192, 0, 50, false, 0},
                {"overflow", v.op, {100, 200, 300, 50}, 256, 256, 450, 64, false, 0},
                {"all_empty", v.op, {0, 0, 0}, 256, 256, 64, 16, false, 0},
                {"tail1", v.op, {129, 0, 193, 1}, 4096, 2048, 0, 8, true, 0},
                {"multi", v.op, {2000, 1500, 0, 777}, 1024, 2048, 0, 8, false, 0},
                {"g1024", v.op, r1024, 128, 256, 0, 8, true, 0},
            };
            for (auto &c : cs) {
                Case cc = c;
                long long t = 0; for (int x : cc.m) t += x;
                if (cc.cap == 0) cc.cap = t + 0;   // exact capacity; poison rows follow in D
                if (cc.cap == 0) cc.cap = 1;
                all_ok &= run_case(v, cc, false, 0, false);
            }
        }
    } else {
        // BENCH.md cases; torch._grouped_mm numbers (H200) for fprop only
        std::vector<Case> cs = {
            {"mixtral_fc1", "", balanced(8, 4096), 4096, 14336, 0, 0, true, 670},
            {"dsv3_fc1_ep8", "", balanced(32, 1024), 7168, 4096, 0, 0, true, 548},
            {"dsv3_fc2_ep8", "", balanced(32, 1024), 2048, 7168, 0, 0, true, 639},
            {"qwen3_30b_fc1", "", balanced(128, 512), 2048, 1536, 0, 0, true, 608},
            {"skew32", "", skew32(), 4096, 4096, 0, 0, true, 660},
            {"small_decode", "", balanced(64, 16), 4096, 2048, 0, 0, true, 44},
        };
        const char *filter = getenv("CASES");
        printf("\n%-14s %-14s %9s %8s %8s %8s %8s %7s %7s\n", "case", "variant", "ms", "TFLOP/s", "loop", "dense", "torch", "x_tor", "x_dense");
        std::vector<std::string> table;
        for (auto &c0 : cs) {
            if (filter && !strstr(filter, c0.name.c_str())) continue;
            bool peers_done_f = false, peers_done_d = false;
            Timing pf, pd;
            for (auto &v : vs) {
                Case c = c0; c.op = v.op;
                long long t = 0; for (int x : c.m) t += x;
                c.cap = t;
                Timing tm;
                bool fp = v.op == "fprop";
                bool need_peers = fp ? !peers_done_f : !peers_done_d;
                bool ok = run_case(v, c, true, &tm, need_peers);
                all_ok &= ok;
                if (!ok) continue;
                if (need_peers) { if (fp) { pf = tm; peers_done_f = true; } else { pd = tm; peers_done_d = true; } }
                Timing &p = fp ? pf : pd;
                double fl = 2.0 * t * c.N * c.K;
                double tf = fl / tm.ms / 1e9, tl = fl / p.loop_ms / 1e9, td = fl / p.dense_ms / 1e9;
                double torch = fp ? c.torch_tflops : 0;
                char buf[256];
                snprintf(buf, sizeof buf, "%-14s %-14s %9.4f %8.1f %8.1f %8.1f %8.0f %7.3f %7.3f", c.name.c_str(), v.name.c_str(),
                         tm.ms, tf, tl, td, torch, torch > 0 ? tf / torch : 0.0, tf / td);
                printf("%s\n", buf);
                fflush(stdout);
                table.push_back(buf);
            }
        }
        printf("\n===== summary =====\n%-14s %-14s %9s %8s %8s %8s %8s %7s %7s\n", "case", "variant", "ms", "TFLOP/s", "loop", "dense", "torch", "x_tor", "x_dense");
        for (auto &l : table) printf("%s\n", l.c_str());
    }
    printf(all_ok ? "ALL CHECKS PASSED\n" : "SOME CHECKS FAILED\n");
    return all_ok ? 0 : 1;
}
