/* context.c — the public API: contexts, problems, kiln_gemm, reports. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundles.h"
#include "context.h"
#include "cublaslt.h"
#include "jit.h"
#include "launch.h"
#include "tuned.h"
#include "validate.h"

void kiln_context_options_init(kiln_context_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->allowed_backends = KILN_ALLOW_ALL;
    opts->log_level = KILN_LOG_WARNING;
}

void kiln_problem_init(kiln_problem *p, kiln_op op)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->op = op;
    p->a_type = p->b_type = p->out_type = KILN_DTYPE_BF16;
    p->epilogue.alpha = 1.0f;
}

void kiln_ctx_log(kiln_context *ctx, kiln_log_level level, const char *fmt, ...)
{
    if (!ctx->log || level < ctx->log_level) return;
    char msg[KILN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, level, msg);
}

/* Records a failure as the context's last error and returns its status. */
static kiln_status fail(kiln_context *ctx, const kiln_error *e)
{
    ctx->last_error = *e;
    kiln_ctx_log(ctx, KILN_LOG_ERROR, "%s", e->msg);
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

static kiln_status parse_catalog(kiln_context *ctx, kiln_error *err)
{
    size_t n = kiln_catalog_count;
    if (!n) return KILN_OK;
    ctx->kernels = calloc(n, sizeof *ctx->kernels);
    ctx->candidates = calloc(n, sizeof *ctx->candidates);
    if (!ctx->kernels || !ctx->candidates)
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "catalog: out of memory");
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        kiln_rt_kernel *k = &ctx->kernels[used];
        kiln_error perr;
        kiln_error_clear(&perr);
        if (!kiln_desc_parse(kiln_catalog[i].desc, &k->desc, &k->launch, &perr)) {
            /* A bad entry is a build bug; skip it rather than lose the rest. */
            kiln_ctx_log(ctx, KILN_LOG_WARNING, "catalog entry %s skipped: %s",
                         kiln_catalog[i].name, perr.msg);
            continue;
        }
        k->entry = &kiln_catalog[i];
        /* Defaults come first in the catalog; tuned-only kernels after them
         * are served through tuning tables, never by the heuristic. */
        if (!kiln_catalog[i].tuned_only) ctx->n_candidates = used + 1;
        ctx->candidates[used].arch = kiln_catalog[i].arch;
        ctx->candidates[used].desc = &k->desc;
        ctx->candidates[used].launch = &k->launch;
        used++;
    }
    ctx->n_kernels = used;
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
    if ((st = attr(ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &ctx->cc_major,
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", err)) ||
        (st = attr(ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &ctx->cc_minor,
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", err)) ||
        (st = attr(ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &ctx->num_sms,
                   "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", err)))
        return st;
    kiln_dispatch_arch_name(ctx->cc_major, ctx->cc_minor, ctx->arch, sizeof ctx->arch);

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

kiln_status kiln_context_create(const kiln_context_options *opts_in, kiln_context **out)
{
    if (!out) return KILN_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    kiln_context_options opts;
    if (opts_in) opts = *opts_in;
    else kiln_context_options_init(&opts);

    kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return KILN_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&ctx->lock, NULL);
    *out = ctx;
    ctx->log = opts.log;
    ctx->log_user = opts.log_user;
    ctx->log_level = opts.log_level;
    ctx->allowed = opts.allowed_backends ? opts.allowed_backends : KILN_ALLOW_ALL;

    kiln_error err;
    kiln_error_clear(&err);
    kiln_status st;
    if ((st = read_backend_env(ctx, &err))) return fail(ctx, &err);
    if ((st = parse_catalog(ctx, &err))) return fail(ctx, &err);

    if ((st = kiln_cache_open(opts.cache_dir, &ctx->cache, &err))) {
        kiln_ctx_log(ctx, KILN_LOG_WARNING, "kernel cache unusable, compiling without it: %s", err.msg);
        ctx->cache = NULL;
        kiln_error_clear(&err);
    }

    if ((st = kiln_driver_load(&ctx->drv, &err))) return fail(ctx, &err);
    ctx->driver_ok = 1;
    if ((st = open_device(ctx, opts.device, &err))) return fail(ctx, &err);
    kiln_ctx_open_bundles(ctx, opts.bundle_paths);
    kiln_ctx_open_tuning(ctx, opts.tuning_tables);
    kiln_ctx_log(ctx, KILN_LOG_INFO, "kiln %s on device %d (%s, %d SMs), %zu default kernels, cache %s",
                 kiln_version(), opts.device, ctx->arch, ctx->num_sms, ctx->n_kernels,
                 ctx->cache ? kiln_cache_path(ctx->cache) : "off");
    return KILN_OK;
}

void kiln_context_destroy(kiln_context *ctx)
{
    if (!ctx) return;
    if (ctx->driver_ok && ctx->cu) {
        int pushed = ctx->drv.cuCtxPushCurrent(ctx->cu) == CUDA_SUCCESS;
        for (size_t i = 0; i < ctx->n_kernels; i++)
            if (ctx->kernels[i].loaded) ctx->drv.cuModuleUnload(ctx->kernels[i].module);
        kiln_cublaslt_destroy(ctx);
        kiln_ctx_close_tuning(ctx); /* tables open only once the device is open */
        if (pushed) {
            CUcontext dummy;
            ctx->drv.cuCtxPopCurrent(&dummy);
        }
        if (ctx->primary_retained) ctx->drv.cuDevicePrimaryCtxRelease(ctx->device);
    }
    if (ctx->driver_ok) kiln_driver_unload(&ctx->drv);
    if (ctx->cache) kiln_cache_close(ctx->cache);
    kiln_ctx_close_bundles(ctx);
    free(ctx->kernels);
    free(ctx->candidates);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char *kiln_last_error(const kiln_context *ctx)
{
    if (!ctx) return "no context";
    return ctx->last_error.status ? ctx->last_error.msg : "";
}

kiln_status kiln_ctx_load_module(kiln_context *ctx, const char *name, const char *desc,
                                 const char *source, const char *entry, CUmodule *module,
                                 CUfunction *function, kiln_error *err)
{
    kiln_cache_entry ce;
    memset(&ce, 0, sizeof ce);
    kiln_jit_origin origin = KILN_JIT_CACHE;
    kiln_error warning;
    kiln_error_clear(&warning);
    double t0 = kiln_now();
    kiln_status st = KILN_OK;
    if (kiln_ctx_bundle_lookup(ctx, name, desc, source, &ce)) {
        ctx->stats.bundle_hits++;
        kiln_ctx_log(ctx, KILN_LOG_DEBUG, "loaded %s for %s from a bundle", name, ctx->arch);
        goto load;
    }
    st = kiln_jit_get(ctx->cache, name, ctx->arch, desc, source, &ce, &origin, &warning, err);
    if (st) return st;
    if (warning.status)
        kiln_ctx_log(ctx, KILN_LOG_WARNING, "kernel cache not written for %s: %s", name, warning.msg);
    if (origin == KILN_JIT_COMPILED) {
        ctx->stats.nvrtc_compiles++;
        kiln_ctx_log(ctx, KILN_LOG_INFO, "compiled %s for %s in %.2f s (%d registers)", name,
                     ctx->arch, kiln_now() - t0, ce.stats.registers);
    } else {
        ctx->stats.cache_hits++;
        kiln_ctx_log(ctx, KILN_LOG_DEBUG, "loaded %s for %s from the cache", name, ctx->arch);
    }
load:;
    st = kiln_ctx_module_from_cubin(ctx, name, ce.cubin, entry, module, function, err);
    kiln_cache_entry_free(&ce);
    return st;
}

kiln_status kiln_ctx_module_from_cubin(kiln_context *ctx, const char *name, const void *cubin,
                                       const char *entry, CUmodule *module, CUfunction *function,
                                       kiln_error *err)
{
    CUresult r = ctx->drv.cuModuleLoadData(module, cubin);
    char what[192];
    if (r != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "cuModuleLoadData(%s, %s)", name, ctx->arch);
        return kiln_driver_check(&ctx->drv, r, what, err);
    }
    r = ctx->drv.cuModuleGetFunction(function, *module, entry);
    if (r != CUDA_SUCCESS) {
        ctx->drv.cuModuleUnload(*module);
        *module = NULL;
        snprintf(what, sizeof what, "cuModuleGetFunction(%s, \"%s\")", name, entry);
        return kiln_driver_check(&ctx->drv, r, what, err);
    }
    return KILN_OK;
}

kiln_status kiln_ctx_load_catalog_kernel(kiln_context *ctx, kiln_rt_kernel *k, kiln_error *err)
{
    if (k->loaded) return KILN_OK;
    kiln_status st = kiln_ctx_load_module(ctx, k->desc.name, k->entry->desc, k->entry->source,
                                          k->launch.entry, &k->module, &k->function, err);
    if (st) return st;
    if ((st = kiln_launch_prepare(ctx, k, err))) {
        ctx->drv.cuModuleUnload(k->module);
        k->module = NULL;
        return st;
    }
    k->loaded = 1;
    return KILN_OK;
}

static kiln_status gemm_locked(kiln_context *ctx, const kiln_problem *p, CUstream stream,
                               kiln_error *err)
{
    kiln_status st = kiln_validate_problem(p, err);
    if (st) return st;
    if (!ctx->driver_ok || !ctx->cu)
        return kiln_error_set(err, KILN_ERROR_DRIVER, "the context has no CUDA device (creation failed)");

    kiln_dispatch_input in = {p, ctx->arch, ctx->candidates, ctx->n_candidates, ctx->allowed,
                              ctx->forced_by[0] ? ctx->forced_by : NULL};
    kiln_dispatch_choice choice;
    memset(&choice, 0, sizeof choice);
    /* A tuned entry for this call's key comes first (generated path only). */
    kiln_rt_kernel *tuned = NULL;
    if (ctx->allowed & KILN_ALLOW_GENERATED)
        tuned = kiln_ctx_tuned_kernel(ctx, p, choice.reason, sizeof choice.reason);
    if (tuned) {
        choice.backend = KILN_BACKEND_GENERATED;
        choice.kernel = -1;
    } else if ((st = kiln_dispatch(&in, &choice, err))) {
        return st;
    }

    kiln_driver *d = &ctx->drv;
    CUcontext cur = NULL;
    d->cuCtxGetCurrent(&cur);
    int pushed = 0;
    if (cur != ctx->cu) {
        if ((st = kiln_driver_check(d, d->cuCtxPushCurrent(ctx->cu), "cuCtxPushCurrent", err)))
            return st;
        pushed = 1;
    }
    const char *kname = "cublasLt";
    if (choice.backend == KILN_BACKEND_GENERATED && tuned) {
        kname = tuned->desc.name;
        st = kiln_launch_generated(ctx, tuned, p, stream, err);
    } else if (choice.backend == KILN_BACKEND_GENERATED) {
        kiln_rt_kernel *k = &ctx->kernels[choice.kernel];
        kname = k->desc.name;
        st = kiln_ctx_load_catalog_kernel(ctx, k, err);
        if (!st) st = kiln_launch_generated(ctx, k, p, stream, err);
    } else {
        st = kiln_cublaslt_run(ctx, p, stream, err);
    }
    if (pushed) {
        CUcontext dummy;
        d->cuCtxPopCurrent(&dummy);
    }
    if (st) return st;
    ctx->stats.launches++;
    memset(&ctx->last_call, 0, sizeof ctx->last_call);
    ctx->last_call.backend = choice.backend;
    snprintf(ctx->last_call.kernel, sizeof ctx->last_call.kernel, "%s", kname);
    snprintf(ctx->last_call.reason, sizeof ctx->last_call.reason, "%s", choice.reason);
    ctx->have_last_call = 1;
    kiln_ctx_log(ctx, KILN_LOG_DEBUG, "%s: %s", kname, choice.reason);
    return KILN_OK;
}

kiln_status kiln_gemm(kiln_context *ctx, const kiln_problem *problem, void *stream)
{
    if (!ctx) return KILN_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&ctx->lock);
    kiln_error err;
    kiln_error_clear(&err);
    kiln_error_clear(&ctx->last_error);
    kiln_status st = gemm_locked(ctx, problem, (CUstream)stream, &err);
    if (st) fail(ctx, &err);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

static kiln_status gemm_op(kiln_context *ctx, const kiln_problem *p, void *stream, kiln_op op,
                           const char *fn)
{
    if (!ctx) return KILN_ERROR_INVALID_ARGUMENT;
    if (p && p->op != op) {
        pthread_mutex_lock(&ctx->lock);
        kiln_error err;
        kiln_error_set(&err, KILN_ERROR_INVALID_ARGUMENT, "%s: problem->op is %s", fn,
                       kiln_op_name(p->op));
        fail(ctx, &err);
        pthread_mutex_unlock(&ctx->lock);
        return err.status;
    }
    return kiln_gemm(ctx, p, stream);
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
