// SPDX-License-Identifier: Apache-2.0
/* probe_util.cuh — what the standalone probes share (bench/store_box_probe.cu,
 * bench/acc_drain_probe.cu, bench/tma_load_probe.cu): error checks, a
 * tensor map's storage, the bulk-copy group and proxy-fence wrappers, 2-D
 * box loads, stores and reduce-adds, mbarriers, a main loop's stand-in,
 * and the timing loop.  Header-only. */
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

/* a CUtensorMap's 128 bytes, passed by value as a __grid_constant__ */
struct alignas(64) tmap { unsigned long long b[16]; };

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void wait_all0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

/* One 2-D box in through TMA, completing on mbarrier `bar`; out by a TMA
 * store or an fp32 reduce-add (bulk groups). */
__device__ __forceinline__ void load_box(const tmap *m, unsigned dst, unsigned bar, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ void store_box(const tmap *m, unsigned src, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(m), "r"(src), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ void red_box(const tmap *m, unsigned src, int x, int y)
{
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(m), "r"(src), "r"(x), "r"(y) : "memory");
}

/* mbarriers in shared memory */
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra W; }" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* SPIN cycles of SM clock: a main loop's stand-in between two tiles */
__device__ __forceinline__ void spin(long long cycles)
{
    if (cycles <= 0) return;
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}

/* Each launch between two CUDA events, the first `warm` left out: the
 * median of the rest in ms. */template <class Launch>
static float median_launch_ms(Launch launch, int launches, int warm)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < launches; ++i) {
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= warm) ms.push_back(t);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}
