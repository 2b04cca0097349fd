/* SPDX-License-Identifier: Apache-2.0 */
/*
 * first_call.c — cold first-call latency: from the start of main to the
 * first grouped GEMM done (context creation, kernel load or compile, the
 * launch).  Run it once with a bundle ($KILN_BUNDLE_PATH) and an empty
 * cache, once with an empty cache alone, to compare; it prints where the
 * kernel came from.  Needs only kiln.h (and cuda_driver.h beside it).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_driver.h"
#include "kiln.h"

/* Seconds on a monotonic clock. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    double t0 = now();
    cuda_driver drv;
    char why[128];
    if (cuda_driver_open(&drv, why, sizeof why)) {
        printf("first_call: skipped: %s\n", why);
        return 0;
    }
    const int G = 8, N = 256, K = 256, T = 1024;
    CUdeviceptr x, w, y, sizes;
    int32_t m[8];
    for (int g = 0; g < G; g++) m[g] = T / G;
    uint16_t *h = malloc((size_t)G * N * K * 2);
    for (int i = 0; i < G * N * K; i++) h[i] = (uint16_t)(0x3c00 + (i * 7 % 256)); /* bf16 ~1.x */
    if (drv.cuMemAlloc(&x, (size_t)T * K * 2) || drv.cuMemAlloc(&w, (size_t)G * N * K * 2) ||
        drv.cuMemAlloc(&y, (size_t)T * N * 2) || drv.cuMemAlloc(&sizes, sizeof m) ||
        drv.cuMemcpyHtoD(x, h, (size_t)T * K * 2) || drv.cuMemcpyHtoD(w, h, (size_t)G * N * K * 2) ||
        drv.cuMemcpyHtoD(sizes, m, sizeof m)) {
        printf("first_call: device memory setup failed\n");
        return 1;
    }
    free(h);
    double t_setup = now();
    kiln_context *ctx = NULL;
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.allowed_backends = KILN_ALLOW_GENERATED;
    if (kiln_context_create(&o, &ctx) != KILN_OK) {
        printf("first_call: %s\n", kiln_last_error(ctx));
        return 1;
    }
    kiln_problem p;
    kiln_problem_init(&p, KILN_OP_FPROP);
    p.groups = G;
    p.n = N;
    p.k = K;
    p.capacity = T;
    p.d_sizes = (const int32_t *)(uintptr_t)sizes;
    p.d_a = (const void *)(uintptr_t)x;
    p.d_b = (const void *)(uintptr_t)w;
    p.d_out = (void *)(uintptr_t)y;
    if (kiln_fprop(ctx, &p, NULL) != KILN_OK || drv.cuCtxSynchronize() != CUDA_SUCCESS) {
        printf("first_call: %s\n", kiln_last_error(ctx));
        return 1;
    }
    double t_done = now();
    kiln_context_stats st;
    kiln_call_report rep;
    kiln_context_stats_get(ctx, &st);
    kiln_last_call(ctx, &rep);
    printf("first call of %s: %.1f ms after main started (%.1f ms in kiln: context, load, launch); "
           "NVRTC compiles %llu, cache hits %llu, bundle hits %llu\n",
           rep.kernel, (t_done - t0) * 1e3, (t_done - t_setup) * 1e3,
           (unsigned long long)st.nvrtc_compiles, (unsigned long long)st.cache_hits,
           (unsigned long long)st.bundle_hits);
    kiln_context_destroy(ctx);
    return 0;
}
