/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_util.c — see gpu_util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu_util.h"

kts_gpu g_gpu;
uint64_t g_rng;

int gpu_setup(void)
{
    char why[512];
    if (kts_gpu_open(&g_gpu, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    const char *seed = getenv("KILN_TEST_SEED");
    g_rng = seed ? strtoull(seed, NULL, 0) : ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)clock();
    if (!g_rng) g_rng = 1;
    printf("device: %s; seed KILN_TEST_SEED=0x%llx\n", g_gpu.name, (unsigned long long)g_rng);
    return 0;
}

int gpu_setup_context(unsigned allowed, kiln_context **ctx)
{
    int rc = gpu_setup();
    if (rc) return rc;
    kiln_context_options o;
    kiln_context_options_init(&o);
    if (allowed) o.allowed_backends = allowed;
    if (kiln_context_create(&o, ctx) != KILN_OK) {
        printf("FAIL: kiln_context_create: %s\n", kiln_last_error(*ctx));
        kiln_context_destroy(*ctx);
        *ctx = NULL;
        return 1;
    }
    return 0;
}

int gpu_num_sms(void)
{
    int sms = 0;
    CU(g_drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g_gpu.dev));
    return sms;
}

CUdeviceptr dev_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(g_drv.cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

void dev_free(CUdeviceptr p)
{
    if (p) g_drv.cuMemFree(p);
}

void upload(CUdeviceptr d, const void *h, size_t bytes)
{
    if (bytes) CU(g_drv.cuMemcpyHtoD(d, h, bytes));
}

void download(void *h, CUdeviceptr d, size_t bytes)
{
    if (bytes) CU(g_drv.cuMemcpyDtoH(h, d, bytes));
}

void poison(CUdeviceptr d, size_t bytes) { CU(g_drv.cuMemsetD8(d, KTS_POISON, bytes)); }

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) fail_msg("out of host memory (%zu bytes)", n);
    return p;
}

float *rand_matrix(int64_t rows, int64_t cols, int64_t ld, kiln_dtype t, void **enc)
{
    float *v = kts_rand_matrix(&g_rng, rows, cols, ld, t, enc);
    if (!v) fail_msg("out of host memory (a %lld x %lld matrix)", (long long)rows, (long long)ld);
    return v;
}

CUdeviceptr dev_copy(const void *host, size_t bytes)
{
    CUdeviceptr d = dev_alloc(bytes);
    upload(d, host, bytes);
    return d;
}

void dev_free_n(const CUdeviceptr *bufs, size_t n)
{
    for (size_t i = 0; i < n; i++) dev_free(bufs[i]);
}

void free_n(void *const *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

int gpu_gemm_case(kiln_context *ctx, const kiln_problem *p, const char *label, int *failures,
                  kiln_call_report *rep)
{
    kiln_status st = kiln_gemm(ctx, p, NULL);
    if (st != KILN_OK) {
        GPU_CASE_FAIL(*failures, "%s: kiln_gemm: %s: %s", label, kiln_status_name(st),
                      kiln_last_error(ctx));
        return 0;
    }
    const char *e = kts_cu_error(&g_drv, g_drv.cuCtxSynchronize());
    if (e) fail_msg("%s: cuCtxSynchronize after kiln_gemm failed: %s", label, e);
    st = kiln_last_call(ctx, rep);
    if (st != KILN_OK) fail_msg("%s: kiln_last_call: %s", label, kiln_status_name(st));
    return 1;
}

CUgraph graph_end_capture(CUstream stream, kiln_status st, kiln_context *ctx, const char *what,
                          CUgraphExec *exec)
{
    CUgraph graph;
    CU(g_drv.cuStreamEndCapture(stream, &graph));
    if (st != KILN_OK) fail_msg("%s under capture: %s", what, kiln_last_error(ctx));
    CU(g_drv.cuGraphInstantiateWithFlags(exec, graph, 0));
    return graph;
}

void graph_replay(CUgraphExec exec, CUstream stream)
{
    CU(g_drv.cuGraphLaunch(exec, stream));
    CU(g_drv.cuStreamSynchronize(stream));
}

void graph_destroy(CUgraphExec exec, CUgraph graph, CUstream stream)
{
    g_drv.cuGraphExecDestroy(exec);
    g_drv.cuGraphDestroy(graph);
    g_drv.cuStreamDestroy(stream);
}

int gpu_destroy_after(int rc, kiln_context **ctx)
{
    kiln_context_destroy(*ctx);
    return rc;
}
