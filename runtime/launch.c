/* SPDX-License-Identifier: Apache-2.0 */
/* launch.c — kernel arguments, grid, shared memory, clusters, tensor maps. */
#include <stdio.h>
#include <string.h>

#include "clusters.h"
#include "launch.h"
#include "problem.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void kiln_launch_fill_args(const kiln_problem *p, int num_sms, kiln_kernel_args *a)
{
    memset(a, 0, sizeof *a);
    const kiln_epilogue *e = &p->epilogue;
    int64_t out_cols = kiln_problem_out_cols(p);
    a->a = p->d_a;
    a->b = p->d_b;
    a->b_ptrs = p->d_b_ptrs;
    a->d = p->d_out;
    a->d_ptrs = p->op == KILN_OP_WGRAD && p->wgrad_output == KILN_WGRAD_DISCRETE ? p->d_out_ptrs : 0;
    a->sizes = p->d_sizes;
    a->overflow = p->d_overflow;
    a->capacity = p->capacity;
    a->lda = p->lda ? p->lda : kiln_problem_a_cols(p);
    /* fp8 dgrad reads the transposed weights [G,K,N] (rows of N) */
    const int fp8_dgrad = p->op == KILN_OP_DGRAD && p->fp8.recipe != KILN_FP8_NONE;
    if (fp8_dgrad) a->b = p->fp8.d_bt;
    a->ldb = p->ldb ? p->ldb : fp8_dgrad ? p->n : p->k;
    a->scale_a = p->fp8.d_scale_a;
    a->scale_b = p->fp8.d_scale_b;
    a->ld_scale_a = p->fp8.ld_scale_a ? p->fp8.ld_scale_a : p->capacity;
    a->ldd = p->ldd ? p->ldd : out_cols;
    a->n = p->n;
    a->k = p->k;
    a->groups = p->groups;
    a->sizes_are_offsets = p->sizes_kind == KILN_SIZES_OFFSETS;
    a->accumulate = p->op == KILN_OP_WGRAD && p->accumulate;
    a->num_sms = num_sms;
    a->alpha = 1.0f;
    if (p->op == KILN_OP_WGRAD) {
        a->dbias = p->d_dbias;
        a->dbias_ptrs = p->d_dbias_ptrs;
        a->ld_dbias = p->ld_dbias ? p->ld_dbias : p->n;
        a->dbias_f32 = p->dbias_type == KILN_DTYPE_F32;
    } else {
        a->bias = e->d_bias;
        a->ld_bias = e->ld_bias ? e->ld_bias : out_cols;
        a->row_scale = e->d_row_scale;
        a->scale_bias = e->scale_bias != 0;
        a->alpha_ptr = e->d_alpha;
        a->alpha = e->alpha;
        a->beta = e->beta;
        /* C is read only when beta != 0. */
        a->c = e->beta != 0.0f ? e->d_c : 0;
        a->ldc = e->ldc ? e->ldc : out_cols;
    }
}

/* fprop/dgrad: each group adds at most one partial M tile, so
 * (ceil(capacity/tile_m) + G) row tiles × ceil(n_out/tile_n) column tiles;
 * wgrad: G × ceil(N/tile_m) × ceil(K/tile_n). */
int64_t kiln_launch_tiles(const kiln_problem *p, const kiln_kernel_desc *d)
{
    if (p->op == KILN_OP_WGRAD)
        return (int64_t)p->groups * ceil_div(p->n, d->tile_m) * ceil_div(p->k, d->tile_n);
    return (ceil_div(p->capacity, d->tile_m) + p->groups) *
           ceil_div(kiln_problem_out_cols(p), d->tile_n);
}

int64_t kiln_launch_grid(const kiln_problem *p, const kiln_kernel_desc *d,
                         const kiln_launch_desc *l, int num_sms, int clusters)
{
    int64_t tiles = kiln_launch_tiles(p, d);
    if (d->k_cluster > 1) {
        /* a k-cut cluster walks the tiles together, a piece of each in every
         * CTA: no more clusters than fit at once (clusters.h), nor than
         * tiles */
        int64_t n = clusters > 0 ? clusters : num_sms / d->k_cluster;
        if (n > tiles) n = tiles;
        return (n < 1 ? 1 : n) * d->k_cluster;
    }
    int64_t grid = tiles;
    if (l->persistent) {
        int64_t resident = (int64_t)(l->ctas_per_sm > 0 ? l->ctas_per_sm : 1) * num_sms;
        if (resident < grid) grid = resident;
    }
    if (grid < 1) grid = 1;
    int64_t cluster = (int64_t)(l->cluster_m > 0 ? l->cluster_m : 1) * (l->cluster_n > 0 ? l->cluster_n : 1);
    return ceil_div(grid, cluster) * cluster;
}

/* Whether k's module holds KILN_SCHED_SLOTS pairs of words named sym (the
 * work-order counters, or the split's launch states).  The template owns
 * the rule of which kernels have them: a module without them (or with the
 * 1-pair placeholder) gets no slot.  The image is searched for the name
 * (with its terminating NUL, as the symbol string table holds it) before
 * the driver is asked: cuModuleGetGlobal answers NOT_FOUND for every other
 * module, and compute-sanitizer reports each such answer as an error. */
static int has_slots(const kiln_rt_env *env, const kiln_rt_kernel *k, const void *image,
                     size_t image_size, const char *sym)
{
    if (!image || !memmem(image, image_size, sym, strlen(sym) + 1)) return 0;
    CUdeviceptr ctr;
    size_t bytes = 0;
    return env->drv->cuModuleGetGlobal(&ctr, &bytes, k->module, sym) == CUDA_SUCCESS &&
           bytes == (size_t)KILN_SCHED_SLOTS * 2 * sizeof(unsigned);
}

kiln_status kiln_launch_set_limits(const kiln_rt_env *env, kiln_rt_kernel *k, const void *image,
                                   size_t image_size, kiln_error *err)
{
    k->sched = has_slots(env, k, image, image_size, "kiln_sched_ctr");
    /* the last wave split along k (templates/sm90_gemm_cut.cuh, SPLIT): a
     * launch state per sched slot, and the context's workspace */
    k->split = has_slots(env, k, image, image_size, "kiln_split_launch");
    if (k->launch.smem_bytes <= 0) return KILN_OK;
    CUresult r = env->drv->cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             k->launch.smem_bytes);
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES, %d)",
                 k->desc.name, k->launch.smem_bytes);
        return kiln_driver_check(env->drv, r, what, err);
    }
    return KILN_OK;
}

static CUtensorMapDataType tmap_type(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case KILN_DTYPE_F32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case KILN_DTYPE_E4M3:
    case KILN_DTYPE_E5M2: return CU_TENSOR_MAP_DATA_TYPE_UINT8; /* TMA moves bytes */
    default: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    }
}

static CUtensorMapSwizzle tmap_swizzle(int bytes)
{
    switch (bytes) {
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
    }
}

/* A 2-D map over a row-major matrix: dims innermost first; with `chunked`
 * (td->chunks > 0 and cols a multiple of td->box_inner), the 3-D map of
 * kiln_tmap_desc.chunks over the same bytes instead.  Through the context's
 * cache (tmap_cache.h): a call that repeats an operand's pointer, shape,
 * stride and box reuses its map instead of encoding it again. */
static kiln_status encode_map(const kiln_driver *drv, kiln_tmap_cache *cache, kiln_tmap *map,
                              int role, const kiln_tmap_desc *td, int chunked, kiln_dtype t,
                              const void *base, int64_t cols, int64_t rows, int64_t ld,
                              kiln_error *err)
{
    static const char *const which[3] = {"a", "b", "d"};
    if (rows < 1) rows = 1; /* an empty operand is never read; the map must still be valid */
    kiln_tmap_request r = {
        .dtype = tmap_type(t),
        .rank = 2,
        .base = base,
        .dims = {(cuuint64_t)cols, (cuuint64_t)rows},
        .strides = {(cuuint64_t)(ld * kiln_dtype_size(t))},
        .box = {(cuuint32_t)td->box_inner, (cuuint32_t)td->box_outer},
        .elem_strides = {1, 1},
        .interleave = CU_TENSOR_MAP_INTERLEAVE_NONE,
        .swizzle = tmap_swizzle(td->swizzle),
        .l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        .oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    };
    if (chunked) {
        const int64_t es = kiln_dtype_size(t);
        r.rank = 3;
        r.dims[0] = (cuuint64_t)td->box_inner;
        r.dims[1] = (cuuint64_t)(cols / td->box_inner);
        r.dims[2] = (cuuint64_t)rows;
        r.strides[0] = (cuuint64_t)(td->box_inner * es);
        r.strides[1] = (cuuint64_t)(ld * es);
        r.box[1] = (cuuint32_t)td->chunks;
        r.box[2] = (cuuint32_t)td->box_outer;
        r.elem_strides[2] = 1;
    }
    CUresult res = kiln_tmap_cache_encode(cache, drv->cuTensorMapEncodeTiled, role, &r, map);
    if (res != CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what,
                 "cuTensorMapEncodeTiled(tmap_%s: %lld x %lld %s, row stride %lld B, box %dx%d, "
                 "swizzle %d%s)",
                 which[role], (long long)rows, (long long)cols, kiln_dtype_name(t),
                 (long long)(ld * kiln_dtype_size(t)), td->box_outer, td->box_inner, td->swizzle,
                 chunked ? ", in chunks" : "");
        return kiln_driver_check(drv, res, what, err);
    }
    return KILN_OK;
}

static kiln_status encode_maps(const kiln_driver *drv, kiln_tmap_cache *cache,
                               const kiln_rt_kernel *k, const kiln_problem *p,
                               const kiln_kernel_args *a, kiln_tmap maps[3], kiln_error *err)
{
    const kiln_launch_desc *l = &k->launch;
    kiln_status st;
    if (l->tmap[0].used &&
        (st = encode_map(drv, cache, &maps[0], 0, &l->tmap[0], 0, p->a_type, p->d_a,
                         kiln_problem_a_cols(p), p->capacity, a->lda, err)))
        return st;
    if (l->tmap[1].used) {
        if (p->op == KILN_OP_WGRAD)
            st = encode_map(drv, cache, &maps[1], 1, &l->tmap[1], 0, p->b_type, p->d_b, p->k,
                            p->capacity, a->ldb, err);
        else if (p->op == KILN_OP_DGRAD && p->fp8.recipe != KILN_FP8_NONE)
            /* fp8 dgrad: W transposed, one [G*K, N] matrix */
            st = encode_map(drv, cache, &maps[1], 1, &l->tmap[1], 0, p->b_type, a->b, p->n,
                            (int64_t)p->groups * p->k, a->ldb, err);
        else if (p->d_b_ptrs)
            /* pointer-array weights: one group's [N, K], which the kernel
             * points at each group's weights on the device (a kernel built
             * with weights: any; dispatch sends no other).  The address
             * here is a stand-in, never read: d_a, for its alignment. */
            st = encode_map(drv, cache, &maps[1], 1, &l->tmap[1], 0, p->b_type, p->d_a, p->k,
                            p->n, a->ldb, err);
        else /* contiguous weights viewed as one [G*N, K] matrix */
            st = encode_map(drv, cache, &maps[1], 1, &l->tmap[1], 0, p->b_type, p->d_b, p->k,
                            (int64_t)p->groups * p->n, a->ldb, err);
        if (st) return st;
    }
    if (l->tmap[2].used) {
        /* dW in chunks where the kernel stores (or, wgrad.rows, adds) rows
         * of tmap.chunks boxes at once, which it does when K is a multiple
         * of the box width (the same rule on the device: sm90_wgrad.cuh,
         * kiln_epilogue_tma_store and kiln_epilogue_tma_red) */
        const int chunked = l->tmap[2].chunks > 0 && p->k % l->tmap[2].box_inner == 0;
        if (p->op == KILN_OP_WGRAD && a->d_ptrs)
            /* discrete dW: one group's [N, K], which the kernel points at
             * each group's buffer on the device; the address is a stand-in,
             * never written through (d_a, for its alignment) */
            st = encode_map(drv, cache, &maps[2], 2, &l->tmap[2], chunked, p->out_type, p->d_a,
                            p->k, p->n, a->ldd, err);
        else if (p->op == KILN_OP_WGRAD)
            /* dense dW as one [G*N, K] matrix */
            st = encode_map(drv, cache, &maps[2], 2, &l->tmap[2], chunked, p->out_type,
                            p->d_out, p->k, (int64_t)p->groups * p->n, a->ldd, err);
        else
            st = encode_map(drv, cache, &maps[2], 2, &l->tmap[2], 0, p->out_type, p->d_out,
                            kiln_problem_out_cols(p), p->capacity, a->ldd, err);
        if (st) return st;
    }
    return KILN_OK;
}

/* Programmatic dependent launch for k under opts: only the sm90 family's
 * kernels, whose templates are to wait (griddepcontrol.wait) before reading
 * what an earlier kernel wrote; see launch.h. */
static int use_pdl(const kiln_launch_opts *opts, const kiln_rt_kernel *k)
{
    return opts && opts->pdl && !strcmp(k->desc.family, "sm90");
}

/* cuLaunchKernelEx when the launch needs attributes (a cluster, PDL), else
 * cuLaunchKernel. */
static CUresult launch(const kiln_driver *drv, const kiln_rt_kernel *k, unsigned grid,
                       unsigned threads, unsigned smem, int cluster, int pdl, CUstream stream,
                       void **params)
{
    if (cluster <= 1 && !pdl)
        return drv->cuLaunchKernel(k->function, grid, 1, 1, threads, 1, 1, smem, stream, params,
                                   NULL);
    CUlaunchAttribute attr[2];
    memset(attr, 0, sizeof attr);
    unsigned n = 0;
    if (cluster > 1) {
        /* The grid is 1-D, so the cluster is too: cluster_m × cluster_n
         * (× k_cluster) CTAs along x, the grid a multiple of it. */
        attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[n].value.clusterDim.x = (unsigned)cluster;
        attr[n].value.clusterDim.y = 1;
        attr[n].value.clusterDim.z = 1;
        n++;
    }
    if (pdl) {
        /* The kernel may start while the one before it in the stream
         * finishes; it waits for it (griddepcontrol.wait) before reading. */
        attr[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr[n].value.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = grid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = threads;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = smem;
    cfg.hStream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return drv->cuLaunchKernelEx(&cfg, k->function, params, NULL);
}

/* Whether a launch of d for p may cut its last round along k (a kernel
 * with k->split): only if its walk, at most ceil(tiles / SMs) rounds of the
 * reduction's k-blocks, can reach KILN_SPLIT_MIN_WALK (kernel_abi.h's
 * kiln_split_ways, which decides on the device from the real counts).  A
 * launch that cannot gets neither the workspace nor a grid of every SM:
 * with them, decode-sized dgrad calls of 24-64 tiles ran 1.2x slower than
 * without, whether they cut or not (H200, eightieth session). */
int kiln_launch_may_split(const kiln_problem *p, const kiln_kernel_desc *d, int num_sms)
{
    if (p->op == KILN_OP_WGRAD || d->tile_k < 1 || num_sms < 1) return 0;
    const int64_t nkb = ceil_div(p->op == KILN_OP_FPROP ? p->k : p->n, d->tile_k);
    return ceil_div(kiln_launch_tiles(p, d), num_sms) * nkb >= KILN_SPLIT_MIN_WALK;
}

kiln_status kiln_launch_run(const kiln_rt_env *env, const kiln_launch_opts *opts,
                            const kiln_rt_kernel *k, const kiln_problem *p, CUstream stream,
                            kiln_error *err)
{
    kiln_kernel_args args;
    kiln_launch_fill_args(p, env->dev->num_sms, &args);
    args.sched_slot = opts ? opts->sched_slot : 0;
    const int split = k->split && opts && opts->workspace && args.sched_slot &&
                      kiln_launch_may_split(p, &k->desc, env->dev->num_sms);
    if (split) args.workspace = (void *)(uintptr_t)opts->workspace;
    kiln_tmap maps[3];
    memset(maps, 0, sizeof maps);
    kiln_status st = encode_maps(env->drv, opts ? opts->tmaps : NULL, k, p, &args, maps, err);
    if (st) return st;

    const kiln_launch_desc *l = &k->launch;
    int64_t grid = kiln_launch_grid(p, &k->desc, l, env->dev->num_sms,
                                    kiln_clusters_of(env->dev->clusters, k->desc.k_cluster));
    /* A split launch takes every SM, however few tiles the problem may
     * have: the pieces of a short last wave (or of the only one) go to the
     * SMs the tiles leave idle. */
    if (split && l->persistent && grid < env->dev->num_sms) grid = env->dev->num_sms;
    if (grid > 0x7fffffff)
        return kiln_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "%s: %lld CTAs exceed the grid limit (2^31-1)", k->desc.name,
                              (long long)grid);
    void *params[4] = {&args, &maps[0], &maps[1], &maps[2]};
    unsigned threads = (unsigned)(l->threads > 0 ? l->threads : 128);
    unsigned smem = (unsigned)(l->smem_bytes > 0 ? l->smem_bytes : 0);
    int cluster = (l->cluster_m > 0 ? l->cluster_m : 1) * (l->cluster_n > 0 ? l->cluster_n : 1) *
                  (k->desc.k_cluster > 1 ? k->desc.k_cluster : 1);
    int pdl = use_pdl(opts, k);
    CUresult r = launch(env->drv, k, (unsigned)grid, threads, smem, cluster, pdl, stream, params);
    if (r != CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "launching %s (grid %lld, %u threads, %u B smem, cluster %d%s)",
                 k->desc.name, (long long)grid, threads, smem, cluster,
                 pdl ? ", programmatic dependent launch" : "");
        return kiln_driver_check(env->drv, r, what, err);
    }
    return KILN_OK;
}
