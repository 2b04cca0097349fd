/* SPDX-License-Identifier: Apache-2.0 */
/* fake_driver.c — see fake_driver.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake_driver.h"

static const CUcontext fake_cu = (CUcontext)(uintptr_t)0xC0;

fake_record fake_last;
int fake_encodes, fake_launches;

static CUresult fake_get_current(CUcontext *c)
{
    *c = fake_cu;
    return CUDA_SUCCESS;
}

/* Bytes from every argument, as in test_tmap_cache.c (a stale map shows). */
static CUresult fake_encode(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                            void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                            const cuuint32_t *box, const cuuint32_t *estr,
                            CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    fake_encodes++;
    memset(map, 0, sizeof *map);
    uint64_t *o = map->opaque;
    o[0] = (uint64_t)(uintptr_t)base;
    o[1] = (uint64_t)dtype << 32 | rank;
    o[2] = dims[0];
    o[3] = dims[1];
    o[4] = strides[0];
    o[5] = (uint64_t)box[0] << 32 | box[1];
    o[6] = (uint64_t)estr[0] << 32 | estr[1];
    o[7] = (uint64_t)il << 48 | (uint64_t)sw << 32 | (uint64_t)l2 << 16 | (uint64_t)oob;
    if (rank > 2) { /* a 3-D map's third dim, second stride, third box */
        o[8] = dims[2];
        o[9] = strides[1];
        o[10] = box[2];
    }
    return CUDA_SUCCESS;
}

static void record(CUfunction f, unsigned grid, unsigned threads, unsigned smem, unsigned cluster,
                   int pdl, void **params)
{
    fake_launches++;
    memset(&fake_last, 0, sizeof fake_last);
    fake_last.f = f;
    fake_last.pdl = pdl;
    fake_last.grid = grid;
    fake_last.threads = threads;
    fake_last.smem = smem;
    fake_last.cluster = cluster;
    memcpy(&fake_last.args, params[0], sizeof fake_last.args);
    for (int i = 0; i < 3; i++) memcpy(&fake_last.maps[i], params[1 + i], sizeof fake_last.maps[i]);
}

static CUresult fake_cu_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                               void **extra)
{
    (void)gy, (void)gz, (void)by, (void)bz, (void)s, (void)extra;
    record(f, gx, bx, smem, 1, 0, params);
    return CUDA_SUCCESS;
}

static CUresult fake_cu_launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                  void **extra)
{
    (void)extra;
    unsigned cluster = 1;
    int pdl = 0;
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            cluster = cfg->attrs[i].value.clusterDim.x;
        if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            pdl = (int)cfg->attrs[i].value.programmaticStreamSerializationAllowed;
    }
    record(f, cfg->gridDimX, cfg->blockDimX, cfg->sharedMemBytes, cluster, pdl, params);
    return CUDA_SUCCESS;
}

kiln_context *fake_context_bare(kiln_device_limits dev)
{
    kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->env = (kiln_rt_env){&ctx->drv, &ctx->log, &ctx->dev};
    ctx->kernels.env = ctx->env;
    ctx->kernels.stats = &ctx->stats;
    ctx->dev = dev;
    ctx->drv.cuCtxGetCurrent = fake_get_current;
    ctx->cu = fake_cu;
    ctx->driver_ok = 1;
    return ctx;
}

kiln_context *fake_context(int caches)
{
    kiln_context *ctx = fake_context_bare((kiln_device_limits){9, 0, 132, "sm_90a", {0}});
    if (!ctx) return NULL;
    ctx->allowed = KILN_ALLOW_GENERATED;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_kernels_open_catalog(&ctx->kernels, &err) != KILN_OK) {
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return NULL;
    }
    kiln_kernels_open_tuning(&ctx->kernels, NULL);
    for (size_t i = 0; i < ctx->kernels.n_kernels; i++) {
        ctx->kernels.kernels[i].loaded = 1;
        ctx->kernels.kernels[i].function = (CUfunction)(uintptr_t)(i + 1);
    }
    ctx->drv.cuTensorMapEncodeTiled = fake_encode;
    ctx->drv.cuLaunchKernel = fake_cu_launch;
    ctx->drv.cuLaunchKernelEx = fake_cu_launch_ex;
    if (caches) {
        ctx->memo = kiln_dispatch_memo_create();
        ctx->tmaps = kiln_tmap_cache_create();
        if (!ctx->memo || !ctx->tmaps) {
            fake_context_free(ctx);
            return NULL;
        }
    }
    return ctx;
}

void fake_context_free(kiln_context *ctx)
{
    kiln_kernels_close(&ctx->kernels, 0);
    kiln_dispatch_memo_destroy(ctx->memo);
    kiln_tmap_cache_destroy(ctx->tmaps);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

