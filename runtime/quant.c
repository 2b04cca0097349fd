/* SPDX-License-Identifier: Apache-2.0 */
/* quant.c — kiln_quantize's checks and launches (see quant.h; the kernels
 * and their arithmetic are in templates/quant.cu). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_desc.h"
#include "quant.h"

#define BAD(...) kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

/* What quant.cu's kernels are built for: KQ_THREADS, KQ_UMAX. */
#define KQ_THREADS 256
#define KQ_UMAX 4
/* The grid-stride kernels are launched with as many CTAs as fit on the
 * device at once (one wave, no tail of late CTAs): by registers, the only
 * limit that binds for them (an SM's 64K, at most 8 CTAs of KQ_THREADS). */
#define KQ_MAX_CTAS_PER_SM 8
#define KQ_SM_REGISTERS 65536
/* ...except the kernels that write, which run at most 2 CTAs per SM.  On
 * an H200 (fourteenth session, docs/fp8.md) every writing kind was fastest
 * at 2 of 1..4 CTAs per SM: WEIGHTS_128X128 with q_t 85.3% of 4.3 TB/s
 * (82.8% at the 4 its registers allow), without 95.3% (91.2%), ROWS 92.2%
 * (88.6%), ROWS_1X128 93.7% (87.3%); at 1 they fell to 64-72%.  Likely
 * why: fewer streams of reads and writes at once, so DRAM pages are used
 * more fully (q_t's transposed layout is not it: its bytes written in q's
 * layout were as slow).  The read-only amax pass keeps its register bound. */
#define KQ_WRITER_CTAS_PER_SM 2

void kiln_quant_init(kiln_quant *q, kiln_quant_kind kind)
{
    if (!q) return;
    memset(q, 0, sizeof *q);
    q->struct_size = sizeof *q;
    q->kind = kind;
    q->in_type = KILN_DTYPE_BF16;
    q->out_type = KILN_DTYPE_E4M3;
}

/* ---- checks ------------------------------------------------------------- */

static int is_rows_kind(kiln_quant_kind k)
{
    return k == KILN_QUANT_ROWS || k == KILN_QUANT_ROWS_1X128;
}

static const char *kind_name(kiln_quant_kind k)
{
    switch (k) {
    case KILN_QUANT_ROWS: return "KILN_QUANT_ROWS";
    case KILN_QUANT_ROWS_1X128: return "KILN_QUANT_ROWS_1X128";
    case KILN_QUANT_WEIGHTS_128X128: return "KILN_QUANT_WEIGHTS_128X128";
    case KILN_QUANT_WEIGHTS_TENSOR: return "KILN_QUANT_WEIGHTS_TENSOR";
    default: return "KILN_QUANT_WEIGHTS_TENSOR_DELAYED";
    }
}

static kiln_status check_ptr(const void *ptr, const char *name, unsigned align, const char *why,
                             kiln_error *err)
{
    if (!ptr) return BAD("q->%s is NULL", name);
    if ((uintptr_t)ptr % align)
        return BAD("q->%s (%p) is not %u-byte aligned (%s)", name, ptr, align, why);
    return KILN_OK;
}

/* 0 (dense rows) or at least cols, whole 16-byte rows of esz-byte elements. */
static kiln_status check_ld(int64_t ld, int64_t cols, int esz, const char *name, kiln_error *err)
{
    if (ld == 0) return KILN_OK;
    if (ld < 0) return BAD("q->%s is negative (%lld)", name, (long long)ld);
    if (ld < cols)
        return BAD("q->%s = %lld is smaller than the row (q->cols = %lld)", name, (long long)ld,
                   (long long)cols);
    if (ld > INT32_MAX) return BAD("q->%s = %lld exceeds 2^31-1", name, (long long)ld);
    if (ld % (16 / esz))
        return BAD("q->%s = %lld is not a multiple of %d (rows must start 16-byte aligned)", name,
                   (long long)ld, 16 / esz);
    return KILN_OK;
}

static kiln_status check_types(const kiln_quant *q, kiln_error *err)
{
    if ((unsigned)q->in_type > KILN_DTYPE_E5M2)
        return BAD("q->in_type = %d is not a kiln_dtype", (int)q->in_type);
    if ((unsigned)q->out_type > KILN_DTYPE_E5M2)
        return BAD("q->out_type = %d is not a kiln_dtype", (int)q->out_type);
    if (q->in_type != KILN_DTYPE_BF16 && q->in_type != KILN_DTYPE_F16)
        return BAD("q->in_type %s is not supported (bf16 or fp16)", kiln_dtype_name(q->in_type));
    if (q->out_type != KILN_DTYPE_E4M3 && q->out_type != KILN_DTYPE_E5M2)
        return BAD("q->out_type %s is not supported (e4m3 or e5m2)",
                   kiln_dtype_name(q->out_type));
    return KILN_OK;
}

static kiln_status check_shape(const kiln_quant *q, int rows_kind, kiln_error *err)
{
    if (q->cols <= 0) return BAD("q->cols = %lld must be positive", (long long)q->cols);
    if (q->cols % 16)
        return BAD("q->cols = %lld is not a multiple of 16 (each thread converts 16 elements: "
                   "32-byte loads, 16-byte stores)",
                   (long long)q->cols);
    if (q->cols > INT32_MAX) return BAD("q->cols = %lld exceeds 2^31-1", (long long)q->cols);
    if (rows_kind && q->rows < 0)
        return BAD("q->rows = %lld (the capacity) is negative", (long long)q->rows);
    if (!rows_kind && q->rows <= 0)
        return BAD("q->rows = %lld (N, a group's rows) must be positive", (long long)q->rows);
    if (q->rows > INT32_MAX) return BAD("q->rows = %lld exceeds 2^31-1", (long long)q->rows);
    if (!rows_kind && (q->groups <= 0 || q->groups > KILN_MAX_GROUPS))
        return BAD("q->groups = %d is out of range (1 .. %d)", (int)q->groups, KILN_MAX_GROUPS);
    int esz = kiln_dtype_size(q->in_type);
    int64_t widest = q->ld_in > q->cols ? q->ld_in : q->cols;
    if (q->ld_out > widest) widest = q->ld_out;
    int64_t g = q->groups > 0 ? q->groups : 1;
    if (q->rows * widest > ((int64_t)1 << 62) / esz / g)
        return BAD("q->groups x q->rows x the row (%lld elements) exceeds 2^62 bytes",
                   (long long)widest);
    return KILN_OK;
}

/* Rows kinds: optional device sizes, no transposed copy; ROWS_1X128's
 * ld_scale. */
static kiln_status check_rows_kind(const kiln_quant *q, kiln_error *err)
{
    kiln_status st;
    if (q->d_sizes) {
        if ((st = check_ptr(q->d_sizes, "d_sizes", 4, "int32 elements", err))) return st;
        if (q->groups <= 0 || q->groups > KILN_MAX_GROUPS)
            return BAD("q->groups = %d is out of range (1 .. %d entries of q->d_sizes)",
                       (int)q->groups, KILN_MAX_GROUPS);
    } else if (q->groups) {
        return BAD("q->groups = %d is set, but q->d_sizes is NULL (without sizes all q->rows "
                   "rows are quantized: set groups to 0, or give the sizes)",
                   (int)q->groups);
    }
    if (q->d_out_t)
        return BAD("q->d_out_t is set, but %s has no transposed copy", kind_name(q->kind));
    if (q->d_scale_t)
        return BAD("q->d_scale_t is set, but %s has no transposed copy", kind_name(q->kind));
    if (q->kind == KILN_QUANT_ROWS) {
        if (q->ld_scale)
            return BAD("q->ld_scale = %lld is set, but KILN_QUANT_ROWS has one scale per row "
                       "(ld_scale is for KILN_QUANT_ROWS_1X128)",
                       (long long)q->ld_scale);
        return KILN_OK;
    }
    if (q->ld_scale < 0) return BAD("q->ld_scale is negative (%lld)", (long long)q->ld_scale);
    if (q->ld_scale && q->ld_scale < q->rows)
        return BAD("q->ld_scale = %lld is smaller than the capacity (q->rows = %lld)",
                   (long long)q->ld_scale, (long long)q->rows);
    if (q->ld_scale > INT32_MAX)
        return BAD("q->ld_scale = %lld exceeds 2^31-1", (long long)q->ld_scale);
    return KILN_OK;
}

/* With d_out_t: its rows (q->rows fp8 bytes) are written as 16-byte vectors. */
static kiln_status check_transposed_rows(const kiln_quant *q, kiln_error *err)
{
    if (q->rows % 16)
        return BAD("q->rows = %lld is not a multiple of 16, but q->d_out_t is set (the "
                   "transposed copy's rows are q->rows fp8 bytes, written as 16-byte vectors)",
                   (long long)q->rows);
    return KILN_OK;
}

/* WEIGHTS_TENSOR_DELAYED: d_amax, and no d_scale_t (q_t's scale is the
 * given d_scale).  The other kinds: no d_amax. */
static kiln_status check_delayed(const kiln_quant *q, kiln_error *err)
{
    if (q->kind != KILN_QUANT_WEIGHTS_TENSOR_DELAYED) {
        if (q->d_amax)
            return BAD("q->d_amax is set, but %s finds its scales from the data (d_amax is for "
                       "KILN_QUANT_WEIGHTS_TENSOR_DELAYED)",
                       kind_name(q->kind));
        return KILN_OK;
    }
    kiln_status st = check_ptr(q->d_amax, "d_amax", 4, "fp32 elements", err);
    if (st) return st;
    if (q->d_amax == q->d_scale)
        return BAD("q->d_amax is q->d_scale (%p): the given scales would be overwritten",
                   (void *)q->d_scale);
    if (q->d_scale_t)
        return BAD("q->d_scale_t is set, but KILN_QUANT_WEIGHTS_TENSOR_DELAYED writes no scales "
                   "(the transposed copy's scale is the given q->d_scale)");
    return KILN_OK;
}

/* Weights kinds: no sizes, no ld_scale; the transposed copy and its scales
 * come together (DELAYED: the copy alone), and its rows (q->rows fp8
 * bytes) must be 16-byte rows. */
static kiln_status check_weights_kind(const kiln_quant *q, kiln_error *err)
{
    const char *kn = kind_name(q->kind);
    const int delayed = q->kind == KILN_QUANT_WEIGHTS_TENSOR_DELAYED;
    kiln_status st;
    if (q->d_sizes)
        return BAD("q->d_sizes is set, but %s quantizes whole [G, rows, cols] weights (sizes are "
                   "for the rows kinds)",
                   kn);
    if (q->ld_scale)
        return BAD("q->ld_scale = %lld is set, but %s's scales are dense", (long long)q->ld_scale,
                   kn);
    if (!q->d_out_t && !q->d_scale_t) return KILN_OK;
    if (delayed) {
        if ((st = check_ptr(q->d_out_t, "d_out_t", 16, "16-byte stores", err))) return st;
        return check_transposed_rows(q, err);
    }
    if (!q->d_out_t) return BAD("q->d_scale_t is set, but q->d_out_t is NULL (scale_t goes with "
                                "the transposed copy)");
    if (!q->d_scale_t)
        return BAD("q->d_out_t is set, but q->d_scale_t is NULL (the transposed copy needs its "
                   "scales)");
    if ((st = check_ptr(q->d_out_t, "d_out_t", 16, "16-byte stores", err))) return st;
    if ((st = check_ptr(q->d_scale_t, "d_scale_t", 4, "fp32 elements", err))) return st;
    return check_transposed_rows(q, err);
}

kiln_status kiln_validate_quant(const kiln_quant *q, kiln_error *err)
{
    if (!q) return BAD("q is NULL");
    if (q->struct_size != sizeof *q)
        return BAD("kiln_quant.struct_size = %zu, but this kiln's kiln_quant is %zu bytes (set "
                   "it with kiln_quant_init, or rebuild against this kiln.h)",
                   q->struct_size, sizeof *q);
    if ((unsigned)q->kind > KILN_QUANT_WEIGHTS_TENSOR_DELAYED)
        return BAD("q->kind = %d is not a kiln_quant_kind", (int)q->kind);
    if ((unsigned)q->sizes_kind > KILN_SIZES_OFFSETS)
        return BAD("q->sizes_kind = %d is not a kiln_sizes_kind", (int)q->sizes_kind);
    const int rows_kind = is_rows_kind(q->kind);
    kiln_status st;
    if ((st = check_types(q, err)) || (st = check_shape(q, rows_kind, err))) return st;
    const char *vec = "the kernels move 16-byte vectors";
    if ((st = check_ptr(q->d_in, "d_in", 16, vec, err))) return st;
    if ((st = check_ld(q->ld_in, q->cols, kiln_dtype_size(q->in_type), "ld_in", err))) return st;
    if ((st = check_ptr(q->d_out, "d_out", 16, vec, err))) return st;
    if ((st = check_ld(q->ld_out, q->cols, 1, "ld_out", err))) return st;
    if ((st = check_ptr(q->d_scale, "d_scale", 4, "fp32 elements", err))) return st;
    if ((st = check_delayed(q, err))) return st;
    return rows_kind ? check_rows_kind(q, err) : check_weights_kind(q, err);
}

/* ---- the kernels -------------------------------------------------------- */

#define KQ_MAX_FUNCTIONS 24

struct kiln_quant_rt {
    CUmodule module;
    struct {
        char name[48];
        CUfunction fn;
        int ctas_per_sm;   /* resident CTAs per SM, from its registers */
    } fns[KQ_MAX_FUNCTIONS];
    int n_fns;
};

void kiln_quant_rt_destroy(kiln_quant_rt *rt, const kiln_rt_env *env)
{
    if (!rt) return;
    if (rt->module) env->drv->cuModuleUnload(rt->module);
    free(rt);
}

/* The module, loaded through the store at the first call. */
static kiln_status rt_load(kiln_quant_rt **slot, kiln_kernels *ks, kiln_error *err)
{
    if (*slot) return KILN_OK;
    kiln_quant_rt *rt = calloc(1, sizeof *rt);
    if (!rt) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kiln_quantize: out of memory");
    const char *entry = "kiln_quant_rows_bf16_e4m3";
    kiln_status st = kiln_kernels_load_helper(ks, "kiln_quant", "quant", entry, KQ_THREADS,
                                              kiln_quant_source, &rt->module, &rt->fns[0].fn, err);
    if (st) {
        free(rt);
        return st;
    }
    snprintf(rt->fns[0].name, sizeof rt->fns[0].name, "%s", entry);
    rt->n_fns = 1;
    *slot = rt;
    return KILN_OK;
}

/* Resident CTAs per SM of f: its registers per thread (allocated by 8) for
 * KQ_THREADS threads. */
static int ctas_per_sm(const kiln_rt_env *env, CUfunction f)
{
    int regs = 0;
    if (env->drv->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f) != CUDA_SUCCESS ||
        regs <= 0)
        return 1;
    int n = KQ_SM_REGISTERS / (((regs + 7) / 8 * 8) * KQ_THREADS);
    return n < 1 ? 1 : n > KQ_MAX_CTAS_PER_SM ? KQ_MAX_CTAS_PER_SM : n;
}

/* The function `name` of the module (fetched once) and its CTAs per SM. */
static kiln_status rt_function(kiln_quant_rt *rt, const kiln_rt_env *env, const char *name,
                               CUfunction *out, int *per_sm, kiln_error *err)
{
    for (int i = 0; i < rt->n_fns; i++)
        if (!strcmp(rt->fns[i].name, name)) {
            if (!rt->fns[i].ctas_per_sm) rt->fns[i].ctas_per_sm = ctas_per_sm(env, rt->fns[i].fn);
            *out = rt->fns[i].fn;
            *per_sm = rt->fns[i].ctas_per_sm;
            return KILN_OK;
        }
    if (rt->n_fns == KQ_MAX_FUNCTIONS)
        return kiln_error_set(err, KILN_ERROR_INTERNAL, "kiln_quantize: too many kernels");
    char what[96];
    snprintf(what, sizeof what, "cuModuleGetFunction(kiln_quant, \"%s\")", name);
    CUresult r = env->drv->cuModuleGetFunction(out, rt->module, name);
    kiln_status st = kiln_driver_check(env->drv, r, what, err);
    if (st) return st;
    snprintf(rt->fns[rt->n_fns].name, sizeof rt->fns[0].name, "%s", name);
    rt->fns[rt->n_fns].fn = *out;
    rt->fns[rt->n_fns].ctas_per_sm = *per_sm = ctas_per_sm(env, *out);
    rt->n_fns++;
    return KILN_OK;
}

/* Launches `name` on min(work, one wave) CTAs: work is how many CTAs the
 * call could use at most (the kernels loop over the rest); a wave is
 * max_per_sm CTAs per SM (0: as many as fit), at most what fits. */
static kiln_status launch(kiln_quant_rt *rt, const kiln_rt_env *env, const char *name,
                          int64_t work, int max_per_sm, const kiln_quant_args *a, CUstream stream,
                          kiln_error *err)
{
    CUfunction f;
    int per_sm = 1;
    kiln_status st = rt_function(rt, env, name, &f, &per_sm, err);
    if (st || work <= 0) return st;
    if (max_per_sm > 0 && per_sm > max_per_sm) per_sm = max_per_sm;
    const int64_t wave = (int64_t)(env->dev->num_sms > 0 ? env->dev->num_sms : 1) * per_sm;
    const unsigned ctas = (unsigned)(work < wave ? work : wave);
    void *params[] = {(void *)a};
    char what[96];
    snprintf(what, sizeof what, "cuLaunchKernel(%s)", name);
    return kiln_driver_check(env->drv,
                             env->drv->cuLaunchKernel(f, ctas, 1, 1, KQ_THREADS, 1, 1, 0, stream,
                                                      params, NULL),
                             what, err);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ROWS: threads per row, a power of two from 32 to KQ_THREADS, so that a
 * thread holds about KQ_UMAX 16-element units of its row. */
static int rows_tpr(int64_t cols)
{
    int64_t want = ceil_div(cols / 16, KQ_UMAX);
    int tpr = 32;
    while (tpr < KQ_THREADS && tpr < want) tpr *= 2;
    return tpr;
}

/* WEIGHTS_TENSOR: zero the amax slots, find each group's amax, quantize
 * with it (the tiles last first: the amax pass's last bytes are still in
 * L2), then turn the amax into scales. */
static kiln_status run_tensor(kiln_quant_rt *rt, const kiln_rt_env *env, const kiln_quant *q,
                              kiln_quant_args *a, const char *types, CUstream stream,
                              kiln_error *err)
{
    const kiln_driver *d = env->drv;
    char name[64];
    kiln_status st = kiln_driver_check(
        d, d->cuMemsetD8Async((CUdeviceptr)(uintptr_t)q->d_scale, 0, (size_t)q->groups * 4, stream),
        "cuMemsetD8Async(q->d_scale)", err);
    if (st) return st;
    snprintf(name, sizeof name, "kiln_quant_amax_%s", kiln_dtype_name(q->in_type));
    if ((st = launch(rt, env, name, ceil_div((int64_t)q->groups * q->rows, 64), 0, a, stream, err)))
        return st;
    const int64_t tiles = (int64_t)q->groups * ceil_div(q->rows, 128) * ceil_div(q->cols, 128);
    a->reverse = 1;
    snprintf(name, sizeof name, "kiln_quant_tensor_%s", types);
    if ((st = launch(rt, env, name, tiles, KQ_WRITER_CTAS_PER_SM, a, stream, err))) return st;
    snprintf(name, sizeof name, "kiln_quant_finalize_%s", kiln_dtype_name(q->out_type));
    return launch(rt, env, name, ceil_div(q->groups, KQ_THREADS), KQ_WRITER_CTAS_PER_SM, a, stream,
                  err);
}

/* WEIGHTS_TENSOR_DELAYED: zero the amax slots (the kernel's atomicMax
 * needs a floor), then one pass with the given scales. */
static kiln_status run_delayed(kiln_quant_rt *rt, const kiln_rt_env *env, const kiln_quant *q,
                               const kiln_quant_args *a, const char *types, CUstream stream,
                               kiln_error *err)
{
    const kiln_driver *d = env->drv;
    kiln_status st = kiln_driver_check(
        d, d->cuMemsetD8Async((CUdeviceptr)(uintptr_t)q->d_amax, 0, (size_t)q->groups * 4, stream),
        "cuMemsetD8Async(q->d_amax)", err);
    if (st) return st;
    char name[64];
    snprintf(name, sizeof name, "kiln_quant_delayed_%s", types);
    return launch(rt, env, name,
                  (int64_t)q->groups * ceil_div(q->rows, 128) * ceil_div(q->cols, 128),
                  KQ_WRITER_CTAS_PER_SM, a, stream, err);
}

kiln_status kiln_quant_run(kiln_quant_rt **slot, const kiln_rt_env *env, kiln_kernels *ks,
                           const kiln_quant *q, CUstream stream, kiln_error *err)
{
    const kiln_device_limits *dev = env->dev;
    if (dev->cc_major * 10 + dev->cc_minor < 89)
        return kiln_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "kiln_quantize needs sm_89 or later (its fp8 conversions); the "
                              "device is %s",
                              dev->arch);
    if (is_rows_kind(q->kind) && q->rows == 0) return KILN_OK; /* no capacity, nothing to do */
    kiln_status st = rt_load(slot, ks, err);
    if (st) return st;
    kiln_quant_args a = {
        .in = q->d_in, .out = q->d_out, .out_t = q->d_out_t, .scale = q->d_scale,
        .scale_t = q->d_scale_t, .sizes = q->d_sizes, .amax = q->d_amax,
        .rows = q->rows, .cols = q->cols,
        .ld_in = q->ld_in ? q->ld_in : q->cols, .ld_out = q->ld_out ? q->ld_out : q->cols,
        .ld_scale = q->ld_scale ? q->ld_scale : q->rows,
        .groups = q->groups, .sizes_are_offsets = q->sizes_kind == KILN_SIZES_OFFSETS,
        .tpr = 32, .reverse = 0};
    char types[16], name[64];
    snprintf(types, sizeof types, "%s_%s", kiln_dtype_name(q->in_type),
             kiln_dtype_name(q->out_type));
    switch (q->kind) {
    case KILN_QUANT_ROWS:
        a.tpr = rows_tpr(q->cols);
        snprintf(name, sizeof name, "kiln_quant_rows_%s", types);
        return launch(*slot, env, name, ceil_div(q->rows, KQ_THREADS / a.tpr), KQ_WRITER_CTAS_PER_SM,
                      &a, stream, err);
    case KILN_QUANT_ROWS_1X128:
        snprintf(name, sizeof name, "kiln_quant_rows_1x128_%s", types);
        /* tiles of 32 rows x 4 k-blocks (quant.cu's kq_rows_1x128) */
        return launch(*slot, env, name, ceil_div(q->rows, 32) * ceil_div(q->cols, 512),
                      KQ_WRITER_CTAS_PER_SM, &a, stream, err);
    case KILN_QUANT_WEIGHTS_128X128:
        snprintf(name, sizeof name, "kiln_quant_tiles_%s", types);
        return launch(*slot, env, name,
                      (int64_t)q->groups * ceil_div(q->rows, 128) * ceil_div(q->cols, 128),
                      KQ_WRITER_CTAS_PER_SM, &a, stream, err);
    case KILN_QUANT_WEIGHTS_TENSOR:
        return run_tensor(*slot, env, q, &a, types, stream, err);
    default:
        return run_delayed(*slot, env, q, &a, types, stream, err);
    }
}
