/* SPDX-License-Identifier: Apache-2.0 */
/* context.c — the public API: contexts, options, the lock, kiln_gemm,
 * kiln_prepare and reports.  The work is the modules': problem.c checks,
 * dispatch.c chooses, kernels.c loads, launch.c and the backends run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "clusters.h"
#include "context.h"
#include "launch.h"
#include "problem.h"

/* Records a failure as the context's last error and returns its status. */
static kiln_status fail(kiln_context *ctx, const kiln_error *e)
{
    ctx->last_error = *e;
    kiln_rt_logf(&ctx->log, KILN_LOG_ERROR, "%s", e->msg);
    return e->status;
}

static kiln_status read_backend_env(kiln_context *ctx, kiln_error *err)
{
    const char *v = getenv("KILN_BACKEND");
    if (!v || !*v) return KILN_OK;
    if (!strcmp(v, "generated")) ctx->allowed = KILN_ALLOW_GENERATED;
    else if (!strcmp(v, "cublaslt")) ctx->allowed = KILN_ALLOW_CUBLASLT;
    else
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "KILN_BACKEND=%s: expected 'generated' or 'cublaslt'", v);
    snprintf(ctx->forced_by, sizeof ctx->forced_by, "KILN_BACKEND=%s", v);
    return KILN_OK;
}

/* KILN_KERNEL=NAME: only that generated kernel serves calls (benchmarks
 * and tuning by hand compare kernels on one shape with it). */
static kiln_status read_kernel_env(kiln_context *ctx, kiln_error *err)
{
    const char *v = getenv("KILN_KERNEL");
    if (!v || !*v) return KILN_OK;
    if (strlen(v) >= sizeof ctx->only_kernel)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "KILN_KERNEL=%.40s...: longer than a kernel name", v);
    snprintf(ctx->only_kernel, sizeof ctx->only_kernel, "%s", v);
    return KILN_OK;
}

/* A 0/1 switch from the environment: *on = 1 for "1", 0 for "0", unchanged
 * when unset or empty; anything else is refused. */
static kiln_status read_switch_env(const char *name, int *on, kiln_error *err)
{
    const char *v = getenv(name);
    if (!v || !*v) return KILN_OK;
    if (strcmp(v, "0") && strcmp(v, "1"))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "%s=%s: expected 0 or 1", name, v);
    *on = v[0] == '1';
    return KILN_OK;
}

/* The least saving, in thousandths of a CTA's walk, that the split's cost
 * model must promise (templates/sm90_gemm_cut.cuh, kiln_split_plan). */
#define KILN_SPLIT_MIN_DEFAULT 0

/* KILN_SPLIT_MIN=N (0 to 1000): the split's threshold in thousandths. */
static kiln_status read_split_min_env(int *min, kiln_error *err)
{
    const char *v = getenv("KILN_SPLIT_MIN");
    if (!v || !*v) return KILN_OK;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0 || n > 1000)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "KILN_SPLIT_MIN=%.40s: expected thousandths from 0 to 1000", v);
    *min = (int)n;
    return KILN_OK;
}

/* KILN_HOST_CACHE=0 turns the per-call caches off (to measure them, or to
 * rule them out); KILN_PDL=1 turns programmatic dependent launch on
 * (launch.h); KILN_SPLIT=0 keeps the split workspace from being made, so
 * that every kernel walks whole tiles, and KILN_SPLIT_MIN sets how much a
 * split must be worth. */
static kiln_status read_launch_env(kiln_context *ctx, kiln_error *err)
{
    int caches = 1;
    ctx->split = 1;
    ctx->split_min = KILN_SPLIT_MIN_DEFAULT;
    kiln_status st = read_switch_env("KILN_HOST_CACHE", &caches, err);
    if (!st) st = read_switch_env("KILN_PDL", &ctx->pdl, err);
    if (!st) st = read_switch_env("KILN_SPLIT", &ctx->split, err);
    if (!st) st = read_split_min_env(&ctx->split_min, err);
    if (st || !caches) return st;
    ctx->memo = kiln_dispatch_memo_create();
    ctx->tmaps = kiln_tmap_cache_create();
    return KILN_OK;
}

static kiln_status attr(kiln_context *ctx, CUdevice_attribute a, int *out, const char *name,
                        kiln_error *err)
{
    return kiln_driver_check(&ctx->drv, ctx->drv.cuDeviceGetAttribute(out, a, ctx->device), name,
                             err);
}

static kiln_status open_device(kiln_context *ctx, int ordinal, kiln_error *err)
{
    kiln_driver *d = &ctx->drv;
    kiln_status st;
    int count = 0;
    if ((st = kiln_driver_check(d, d->cuDeviceGetCount(&count), "cuDeviceGetCount", err))) return st;
    if (count == 0) return kiln_error_set(err, KILN_ERROR_DRIVER, "no CUDA device found");
    if (ordinal < 0 || ordinal >= count)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "options->device = %d, but there are %d CUDA devices", ordinal, count);
    if ((st = kiln_driver_check(d, d->cuDeviceGet(&ctx->device, ordinal), "cuDeviceGet", err)))
        return st;
    kiln_device_limits *dev = &ctx->dev;
    if ((st = attr(ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &dev->cc_major,
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", err)) ||
        (st = attr(ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &dev->cc_minor,
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", err)) ||
        (st = attr(ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &dev->num_sms,
                   "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", err)))
        return st;
    kiln_dispatch_arch_name(dev->cc_major, dev->cc_minor, dev->arch, sizeof dev->arch);

    /* The caller's context if it is on our device, else the primary one. */
    CUcontext cur = NULL;
    if (d->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur) {
        CUdevice cd;
        if (d->cuCtxGetDevice(&cd) == CUDA_SUCCESS && cd == ctx->device) {
            ctx->cu = cur;
            return KILN_OK;
        }
    }
    if ((st = kiln_driver_check(d, d->cuDevicePrimaryCtxRetain(&ctx->cu, ctx->device),
                                "cuDevicePrimaryCtxRetain", err)))
        return st;
    ctx->primary_retained = 1;
    return KILN_OK;
}

static void make_split_workspace(kiln_context *ctx);
static int split_workspace_due(const kiln_context *ctx);
static void probe_clusters(kiln_context *ctx);

kiln_status kiln_context_create(const kiln_context_options *opts_in, kiln_context **out)
{
    if (!out) return KILN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    kiln_context_options opts;
    kiln_context_options_init(&opts);

    kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return KILN_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&ctx->lock, NULL);
    *out = ctx;
    ctx->env.drv = &ctx->drv;
    ctx->env.log = &ctx->log;
    ctx->env.dev = &ctx->dev;
    ctx->kernels.env = ctx->env;
    ctx->kernels.stats = &ctx->stats;

    kiln_error err;
    kiln_error_clear(&err);
    /* Nothing of a stale options struct is read but its size. */
    if (opts_in && kiln_validate_options(opts_in, &err)) return fail(ctx, &err);
    if (opts_in) opts = *opts_in;
    if (kiln_rt_log_init(&ctx->log, opts.log, opts.log_user, opts.log_level, &err))
        return fail(ctx, &err);
    ctx->allowed = opts.allowed_backends ? opts.allowed_backends : KILN_ALLOW_ALL;
    if (read_backend_env(ctx, &err)) return fail(ctx, &err);
    ctx->checked = opts.checked != 0;
    if (kiln_checked_from_env(&ctx->checked, &err)) return fail(ctx, &err);
    if (read_launch_env(ctx, &err) || read_kernel_env(ctx, &err)) return fail(ctx, &err);
    if (kiln_kernels_open_catalog(&ctx->kernels, &err)) return fail(ctx, &err);
    if (kiln_driver_load(&ctx->drv, &err)) return fail(ctx, &err);
    ctx->driver_ok = 1;
    if (open_device(ctx, opts.device, &err)) return fail(ctx, &err);
    kiln_kernels_open_store(&ctx->kernels, opts.cache_dir, opts.bundle_paths);
    if (opts.cache_max_bytes && ctx->kernels.store.cache)
        kiln_cache_set_max_bytes(ctx->kernels.store.cache, opts.cache_max_bytes);
    kiln_kernels_open_tuning(&ctx->kernels, opts.tuning_tables);
    if ((ctx->allowed & KILN_ALLOW_GENERATED) && split_workspace_due(ctx)) make_split_workspace(ctx);
    if ((ctx->allowed & KILN_ALLOW_GENERATED) && ctx->dev.cc_major == 9) probe_clusters(ctx);
    kiln_kernels *ks = &ctx->kernels;
    kiln_rt_logf(&ctx->log, KILN_LOG_INFO,
                 "kiln %s on device %d (%s, %d SMs), %zu default kernels, %zu bundles, cache %s",
                 kiln_version(), opts.device, ctx->dev.arch, ctx->dev.num_sms, ks->n_candidates,
                 ks->store.n_bundles, ks->store.cache ? kiln_cache_path(ks->store.cache) : "off");
    return KILN_OK;
}

void kiln_context_destroy(kiln_context *ctx)
{
    if (!ctx) return;
    int current = 0;
    if (ctx->driver_ok && ctx->cu) {
        current = ctx->drv.cuCtxPushCurrent(ctx->cu) == CUDA_SUCCESS;
        kiln_cublaslt_destroy(ctx->lt, &ctx->env);
        kiln_quant_rt_destroy(ctx->quant, &ctx->env);
        if (ctx->split_ws) ctx->drv.cuMemFree(ctx->split_ws);
    }
    /* Modules are unloaded only in their own CUDA context. */
    kiln_kernels_close(&ctx->kernels, current);
    if (current) {
        CUcontext dummy;
        ctx->drv.cuCtxPopCurrent(&dummy);
    }
    if (ctx->driver_ok && ctx->cu && ctx->primary_retained)
        ctx->drv.cuDevicePrimaryCtxRelease(ctx->device);
    if (ctx->driver_ok) kiln_driver_unload(&ctx->drv);
    kiln_dispatch_memo_destroy(ctx->memo);
    kiln_tmap_cache_destroy(ctx->tmaps);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char *kiln_last_error(const kiln_context *ctx)
{
    if (!ctx) return "no context";
    return ctx->last_error.status ? ctx->last_error.msg : "";
}

/* Makes ctx->cu current for the call; *pushed says whether to pop. */
static kiln_status enter(kiln_context *ctx, int *pushed, kiln_error *err)
{
    *pushed = 0;
    if (!ctx->driver_ok || !ctx->cu)
        return kiln_error_set(err, KILN_ERROR_DRIVER, "the context has no CUDA device (creation failed)");
    CUcontext cur = NULL;
    ctx->drv.cuCtxGetCurrent(&cur);
    if (cur == ctx->cu) return KILN_OK;
    kiln_status st = kiln_driver_check(&ctx->drv, ctx->drv.cuCtxPushCurrent(ctx->cu),
                                       "cuCtxPushCurrent", err);
    *pushed = st == KILN_OK;
    return st;
}

static void leave(kiln_context *ctx, int pushed)
{
    CUcontext dummy;
    if (pushed) ctx->drv.cuCtxPopCurrent(&dummy);
}

/* Whether ctx should have a split workspace and has not tried to make one:
 * the sm90 family's kernels, the only ones that split, run on sm_90 only,
 * and a grid of more than KILN_SPLIT_CTAS never splits. */
static int split_workspace_due(const kiln_context *ctx)
{
    return ctx->split && !ctx->split_tried && ctx->dev.cc_major == 9 &&
           ctx->dev.num_sms <= KILN_SPLIT_CTAS;
}

/* The workspace of the kernels that split their last wave (kernel_abi.h,
 * KILN_SPLIT_*; a partial tile per SM, 16.5 MiB on 132 SMs), made with the
 * context (in kiln tune's, allowed only cuBLASLt, when a kernel that splits
 * is first loaded) so that no call allocates or synchronises: its words zeroed and
 * waited for here, before any launch that may use it on any stream.  A
 * failure leaves the context without one (the kernels then walk whole
 * tiles) and is logged. */
static void make_split_workspace(kiln_context *ctx)
{
    ctx->split_tried = 1;
    const size_t bytes =
        KILN_SPLIT_PARTS_OFFSET + (size_t)ctx->dev.num_sms * KILN_SPLIT_TILE_BYTES;
    kiln_driver *d = &ctx->drv;
    CUdeviceptr ws = 0;
    kiln_error err;
    int pushed;
    kiln_status st = enter(ctx, &pushed, &err);
    if (!st) st = kiln_driver_check(d, d->cuMemAlloc(&ws, bytes), "cuMemAlloc(split workspace)", &err);
    if (!st)
        st = kiln_driver_check(d, d->cuMemsetD8Async(ws, 0, KILN_SPLIT_PARTS_OFFSET, NULL),
                               "cuMemsetD8Async(split workspace)", &err);
    /* the threshold after the zeroes, on the same (legacy) stream */
    const unsigned min = (unsigned)ctx->split_min;
    if (!st)
        st = kiln_driver_check(d, d->cuMemcpyHtoD(ws + 4 * KILN_SPLIT_MIN_WORD, &min, 4),
                               "cuMemcpyHtoD(split workspace)", &err);
    if (!st)
        st = kiln_driver_check(d, d->cuStreamSynchronize(NULL), "cuStreamSynchronize(split workspace)",
                               &err);
    if (st && ws) d->cuMemFree(ws);
    leave(ctx, pushed);
    if (st) {
        kiln_rt_logf(&ctx->log, KILN_LOG_WARNING, "no split workspace: %s", err.msg);
        return;
    }
    ctx->split_ws = ws;
    kiln_rt_logf(&ctx->log, KILN_LOG_INFO, "split workspace: %zu bytes, threshold %d/1000", bytes,
                 ctx->split_min);
}

/* The device's resident clusters (clusters.h), which the k-cut kernels'
 * grids and prices need, asked once with the context: a failure leaves
 * them unknown (those kernels are then never chosen) and is logged. */
static void probe_clusters(kiln_context *ctx)
{
    kiln_error err;
    int pushed;
    kiln_status st = enter(ctx, &pushed, &err);
    if (!st) st = kiln_cluster_residency(&ctx->drv, ctx->dev.num_sms, ctx->dev.clusters, &err);
    leave(ctx, pushed);
    if (st) {
        kiln_rt_logf(&ctx->log, KILN_LOG_WARNING, "no k-cut clusters: %s", err.msg);
        return;
    }
    kiln_rt_logf(&ctx->log, KILN_LOG_INFO, "resident clusters of 2, 4, 8 CTAs: %d, %d, %d",
                 ctx->dev.clusters[0], ctx->dev.clusters[1], ctx->dev.clusters[2]);
}

/* Dispatches p and loads the generated kernel chosen (*k NULL for
 * cuBLASLt).  A tuned kernel that fails to load is marked unavailable by
 * kernels.c, and the call is dispatched again without it. */
static kiln_status dispatch_and_load(kiln_context *ctx, const kiln_problem *p,
                                     kiln_dispatch_choice *c, kiln_rt_kernel **k, kiln_error *err)
{
    kiln_kernels *ks = &ctx->kernels;
    kiln_dispatch_input in = {p,
                              ctx->dev.arch,
                              ks->candidates,
                              ks->n_candidates,
                              ctx->allowed,
                              ctx->forced_by[0] ? ctx->forced_by : NULL,
                              ks->tuning,
                              ks->tuned_unavailable,
                              ctx->only_kernel[0] ? ctx->only_kernel : NULL};
    for (;;) {
        *k = NULL;
        kiln_dispatch_options o = {ctx->dev.num_sms, 0, {0}};
        memcpy(o.clusters, ctx->dev.clusters, sizeof o.clusters);
        kiln_status st = kiln_dispatch_with(&in, &o, c, err);
        if (st || c->backend != KILN_BACKEND_GENERATED) return st;
        st = kiln_kernels_load(ks, c, k, err);
        if (st == KILN_OK || c->tuned < 0) return st;
        kiln_error_clear(err);
    }
}

/* Validates p, makes the context current (the caller leaves it, *pushed
 * set whatever the result) and finds the backend and kernel for it: the
 * memo's when it has p's signature (dispatch_memo.h), else
 * dispatch_and_load's, then remembered. */
static kiln_status begin_call(kiln_context *ctx, const kiln_problem *p, kiln_dispatch_choice *c,
                              kiln_rt_kernel **k, int *pushed, kiln_error *err)
{
    *k = NULL;
    *pushed = 0;
    kiln_status st = kiln_validate_problem(p, err);
    if (st || (st = enter(ctx, pushed, err))) return st;
    kiln_dispatch_memo_key key;
    if (ctx->memo) {
        kiln_dispatch_memo_key_of(p, &key);
        if (kiln_dispatch_memo_get(ctx->memo, &key, c, k)) return KILN_OK;
    }
    st = dispatch_and_load(ctx, p, c, k, err);
    if (!st && ctx->memo) kiln_dispatch_memo_put(ctx->memo, &key, c, *k);
    return st;
}

static const char *kernel_name(const kiln_dispatch_choice *c, const kiln_rt_kernel *k)
{
    return c->backend == KILN_BACKEND_GENERATED && k ? k->desc.name : "cublasLt";
}

/* snprintf(dst, size, "%s", src) without the formatting machinery, which
 * is a measurable part of a call's host time. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* What a launch of k on stream takes from the context (the caller holds
 * the lock): its work-order counters (sched_slots.h), a slot of its own
 * when the stream is capturing a graph, the stream's slot otherwise, 0
 * when k has none; and the split workspace for a kernel that splits (a
 * launch state per slot: launch.h).  The handle CU_STREAM_PER_THREAD names
 * another stream in each thread, and those run at once: each thread's is
 * keyed by an address of that thread's own. */
static kiln_status launch_state(kiln_context *ctx, const kiln_rt_kernel *k, CUstream stream,
                                kiln_launch_opts *lo, kiln_error *err)
{
    static _Thread_local char this_thread;
    lo->sched_slot = 0;
    lo->workspace = 0;
    if (!k->sched && !k->split) return KILN_OK;
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    kiln_status st = kiln_driver_check(&ctx->drv, ctx->drv.cuStreamIsCapturing(stream, &cap),
                                       "cuStreamIsCapturing", err);
    if (st) return st;
    if (k->split) lo->workspace = ctx->split_ws;
    uintptr_t key = stream == CU_STREAM_PER_THREAD ? (uintptr_t)&this_thread : (uintptr_t)stream;
    lo->sched_slot = kiln_sched_slot(&ctx->sched, key, cap != CU_STREAM_CAPTURE_STATUS_NONE);
    return KILN_OK;
}

static kiln_status gemm_locked(kiln_context *ctx, const kiln_problem *p, CUstream stream,
                               kiln_error *err)
{
    kiln_dispatch_choice c;
    kiln_rt_kernel *k;
    int pushed;
    kiln_status st = begin_call(ctx, p, &c, &k, &pushed, err);
    if (!st && ctx->checked) st = kiln_check_problem_memory(&ctx->drv, p, err);
    kiln_launch_opts lo = {ctx->tmaps, ctx->pdl, 0, 0};
    if (!st && k) st = launch_state(ctx, k, stream, &lo, err);
    if (!st && k) st = kiln_launch_run(&ctx->env, &lo, k, p, stream, err);
    else if (!st) st = kiln_cublaslt_run(&ctx->lt, &ctx->env, &ctx->kernels, p, stream, err);
    leave(ctx, pushed);
    if (st) return st;
    ctx->stats.launches++;
    memset(&ctx->last_call, 0, sizeof ctx->last_call);
    ctx->last_call.backend = c.backend;
    copy_text(ctx->last_call.kernel, sizeof ctx->last_call.kernel, kernel_name(&c, k));
    copy_text(ctx->last_call.reason, sizeof ctx->last_call.reason, c.reason);
    ctx->have_last_call = 1;
    kiln_rt_logf(&ctx->log, KILN_LOG_INFO, "%s: %s: %s", kiln_op_name(p->op), kernel_name(&c, k),
                 c.reason);
    return KILN_OK;
}

/* Runs fn(ctx, p, stream, err) under the lock, recording its failure. */
typedef kiln_status (*locked_fn)(kiln_context *, const kiln_problem *, CUstream, kiln_error *);

static kiln_status run_locked(kiln_context *ctx, const kiln_problem *p, CUstream stream,
                              locked_fn fn)
{
    if (!ctx) return KILN_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&ctx->lock);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_error_clear(&ctx->last_error);
    kiln_status st = fn(ctx, p, stream, &err);
    if (st) fail(ctx, &err);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

kiln_status kiln_gemm(kiln_context *ctx, const kiln_problem *problem, void *stream)
{
    return run_locked(ctx, problem, (CUstream)stream, gemm_locked);
}

static kiln_status prepare_locked(kiln_context *ctx, const kiln_problem *p, CUstream stream,
                                  kiln_error *err)
{
    (void)stream;
    kiln_dispatch_choice c;
    kiln_rt_kernel *k;
    int pushed;
    kiln_status st = begin_call(ctx, p, &c, &k, &pushed, err);
    leave(ctx, pushed);
    if (!st)
        kiln_rt_logf(&ctx->log, KILN_LOG_INFO, "prepared %s: %s: %s", kiln_op_name(p->op),
                     kernel_name(&c, k), c.reason);
    return st;
}

kiln_status kiln_prepare(kiln_context *ctx, const kiln_problem *problem)
{
    return run_locked(ctx, problem, NULL, prepare_locked);
}

static kiln_status gemm_op(kiln_context *ctx, const kiln_problem *p, void *stream, kiln_op op,
                           const char *fn)
{
    /* op is read only from a problem of this kiln's layout (kiln_gemm
     * refuses the others). */
    if (!ctx || !p || p->struct_size != sizeof *p || p->op == op) return kiln_gemm(ctx, p, stream);
    pthread_mutex_lock(&ctx->lock);
    kiln_error err;
    kiln_error_set(&err, KILN_ERROR_INVALID_ARGUMENT, "%s: problem->op is %s", fn,
                   kiln_op_name(p->op));
    fail(ctx, &err);
    pthread_mutex_unlock(&ctx->lock);
    return err.status;
}

kiln_status kiln_fprop(kiln_context *ctx, const kiln_problem *p, void *stream)
{
    return gemm_op(ctx, p, stream, KILN_OP_FPROP, "kiln_fprop");
}

kiln_status kiln_dgrad(kiln_context *ctx, const kiln_problem *p, void *stream)
{
    return gemm_op(ctx, p, stream, KILN_OP_DGRAD, "kiln_dgrad");
}

kiln_status kiln_wgrad(kiln_context *ctx, const kiln_problem *p, void *stream)
{
    return gemm_op(ctx, p, stream, KILN_OP_WGRAD, "kiln_wgrad");
}

kiln_status kiln_last_call(const kiln_context *ctx, kiln_call_report *out)
{
    if (!ctx || !out) return KILN_ERROR_INVALID_ARGUMENT;
    kiln_context *c = (kiln_context *)ctx;
    pthread_mutex_lock(&c->lock);
    kiln_status st = KILN_OK;
    if (c->have_last_call) *out = c->last_call;
    else {
        memset(out, 0, sizeof *out);
        st = KILN_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

kiln_status kiln_context_stats_get(const kiln_context *ctx, kiln_context_stats *out)
{
    if (!ctx || !out) return KILN_ERROR_INVALID_ARGUMENT;
    kiln_context *c = (kiln_context *)ctx;
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
    return KILN_OK;
}

/* ---- kiln_quantize: quant.c checks and launches --------------------------- */

kiln_status kiln_quantize(kiln_context *ctx, const kiln_quant *q, void *stream)
{
    if (!ctx) return KILN_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&ctx->lock);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_error_clear(&ctx->last_error);
    int pushed = 0;
    /* The checks first: a bad call is refused without the driver. */
    kiln_status st = kiln_validate_quant(q, &err);
    if (!st) st = enter(ctx, &pushed, &err);
    if (!st)
        st = kiln_quant_run(&ctx->quant, &ctx->env, &ctx->kernels, q, (CUstream)stream, &err);
    leave(ctx, pushed);
    if (st) fail(ctx, &err);
    else ctx->stats.launches++;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* ---- the context forms of launch.h, for cli/tune_gpu.c ------------------ */

kiln_status kiln_launch_prepare(kiln_context *ctx, kiln_rt_kernel *k, const void *image,
                                size_t image_size, kiln_error *err)
{
    kiln_status st = kiln_launch_set_limits(&ctx->env, k, image, image_size, err);
    /* The tuner's context serves kiln_gemm with cuBLASLt only (its
     * reference), so it was made without the workspace; a kernel that
     * splits gets it here, or its timings would never include the cut that
     * kiln_gemm's launches make. */
    if (!st && k->split) {
        pthread_mutex_lock(&ctx->lock);
        if (split_workspace_due(ctx)) make_split_workspace(ctx);
        pthread_mutex_unlock(&ctx->lock);
    }
    return st;
}

kiln_status kiln_launch_generated(kiln_context *ctx, const kiln_rt_kernel *k, const kiln_problem *p,
                                  CUstream stream, kiln_error *err)
{
    /* Without the cache (cli/tune_gpu.c calls this outside the lock) and
     * without PDL (each timed call stands alone); with the stream's
     * work-order counters, as kiln_gemm's launches have. */
    kiln_launch_opts lo = {NULL, 0, 0, 0};
    pthread_mutex_lock(&ctx->lock);
    kiln_status st = launch_state(ctx, k, stream, &lo, err);
    pthread_mutex_unlock(&ctx->lock);
    return st ? st : kiln_launch_run(&ctx->env, &lo, k, p, stream, err);
}
