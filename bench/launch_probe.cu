// SPDX-License-Identifier: Apache-2.0
/* launch_probe.cu — what one kernel launch costs the calling thread in the
 * driver alone, for the launch shapes kiln's generated path uses (issue 15's
 * host-time bar, docs/benchmarks.md "Host time of a call").  A standalone
 * diagnostic, not part of the build: it uses the CUDA runtime to load its own
 * kernels and the driver's cuLaunchKernel / cuLaunchKernelEx to launch them,
 * as runtime/launch.c does.
 *
 *   nvcc -O3 -arch=sm_90a -std=c++17 -Ikernel -o launch_probe bench/launch_probe.cu -lcuda
 *   ./launch_probe
 *
 * Each row launches a kernel that returns at once, 32 times back to back on
 * one stream, the clock read around the launches only, and prints the median
 * (and least) over 9 such batches of the mean per launch, in µs: the method
 * of kiln_bench's host-time section.  "busy" rows launch behind a kernel that
 * spins 20 ms, so the stream is busy as it is when kiln_bench times its
 * calls; "idle" rows launch onto an idle stream.  The shapes:
 *
 *   tiny        1 CTA of 32 threads, an 8-byte parameter
 *   kiln args   kiln's parameters (kiln_kernel_args and three 128-byte
 *               tensor maps, __grid_constant__), 132 CTAs of 384 threads
 *   + smem      the same with 222,552 bytes of dynamic shared memory
 *   + cluster   the same through cuLaunchKernelEx with a cluster of 2
 *
 * What kiln_bench's host time adds to the "kiln args + smem" row is kiln's
 * own part of a call (validation, the dispatch memo, the tensor-map cache),
 * which build/tests/unit/host_path_bench times on the CPU alone.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernel_abi.h"

__global__ void k_tiny(int *p)
{
    if (p) p[threadIdx.x] = 0;
}

__global__ void __launch_bounds__(384, 1)
    k_kiln(const __grid_constant__ kiln_kernel_args args, const __grid_constant__ kiln_tmap ta,
           const __grid_constant__ kiln_tmap tb, const __grid_constant__ kiln_tmap td)
{
    extern __shared__ int smem[];
    if (args.groups < 0 && ta.opaque[0] + tb.opaque[0] + td.opaque[0] == 7) {
        smem[threadIdx.x] = 1;
        *(int *)args.d = smem[threadIdx.x ^ 1];
    }
}

__global__ void k_spin(long long ns)
{
    long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
}

#define CK(x)                                                                          \
    do {                                                                               \
        CUresult r_ = (x);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                      \
            const char *s_ = "?";                                                      \
            cuGetErrorString(r_, &s_);                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);           \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

struct shape {
    const char *name;
    CUfunction f;
    unsigned grid, threads, smem;
    int cluster;
    void **params;
};

static CUresult launch_one(const shape &s, CUstream st)
{
    if (s.cluster <= 1)
        return cuLaunchKernel(s.f, s.grid, 1, 1, s.threads, 1, 1, s.smem, st, s.params, nullptr);
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = (unsigned)s.cluster;
    at.value.clusterDim.y = at.value.clusterDim.z = 1;
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = s.grid;
    c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = s.threads;
    c.blockDimY = c.blockDimZ = 1;
    c.sharedMemBytes = s.smem;
    c.hStream = st;
    c.attrs = &at;
    c.numAttrs = 1;
    return cuLaunchKernelEx(&c, s.f, s.params, nullptr);
}

int main()
{
    cudaFree(0);   // a context, as kiln's host has one
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    CUfunction f_tiny, f_kiln, f_spin;
    if (cudaGetFuncBySymbol(&f_tiny, (const void *)k_tiny) != cudaSuccess ||
        cudaGetFuncBySymbol(&f_kiln, (const void *)k_kiln) != cudaSuccess ||
        cudaGetFuncBySymbol(&f_spin, (const void *)k_spin) != cudaSuccess) {
        fprintf(stderr, "cudaGetFuncBySymbol failed\n");
        return 1;
    }
    const unsigned big = 222552;
    CK(cuFuncSetAttribute(f_kiln, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)big));

    int *nullp = nullptr;
    void *p_tiny[] = {&nullp};
    kiln_kernel_args args;
    memset(&args, 0, sizeof args);
    args.groups = 1;
    kiln_tmap maps[3];
    memset(maps, 0, sizeof maps);
    void *p_kiln[] = {&args, &maps[0], &maps[1], &maps[2]};
    long long spin_ns = 20 * 1000 * 1000;
    void *p_spin[] = {&spin_ns};
    const unsigned sms = (unsigned)prop.multiProcessorCount;

    const shape shapes[] = {
        {"tiny (1x32, 8 B of parameters)", f_tiny, 1, 32, 0, 1, p_tiny},
        {"kiln args (132x384)", f_kiln, sms, 384, 0, 1, p_kiln},
        {"kiln args + smem", f_kiln, sms, 384, big, 1, p_kiln},
        {"kiln args + smem + cluster 2", f_kiln, sms, 384, big, 2, p_kiln},
    };
    printf("device: %s; driver launch time per call, µs (median and least over 9 batches of 32 "
           "back-to-back launches; parameters of kiln's: %zu + 3 x %zu bytes)\n",
           prop.name, sizeof(kiln_kernel_args), sizeof(kiln_tmap));
    printf("%-34s %8s %8s %8s %8s\n", "launch", "idle", "least", "busy", "least");
    for (const shape &s : shapes) {
        double med[2], least[2];
        for (int busy = 0; busy < 2; ++busy) {
            for (int w = 0; w < 8; ++w) CK(launch_one(s, st));   // warm the path
            CK(cuStreamSynchronize(st));
            std::vector<double> means;
            for (int b = 0; b < 9; ++b) {
                if (busy) CK(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, st, p_spin, nullptr));
                auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < 32; ++i) CK(launch_one(s, st));
                auto t1 = std::chrono::steady_clock::now();
                CK(cuStreamSynchronize(st));
                means.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 32);
            }
            std::sort(means.begin(), means.end());
            med[busy] = means[4];
            least[busy] = means[0];
        }
        printf("%-34s %8.2f %8.2f %8.2f %8.2f\n", s.name, med[0], least[0], med[1], least[1]);
    }
    return 0;
}
