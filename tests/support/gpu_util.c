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
