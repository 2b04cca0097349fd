/*
 * context.h — the inside of a kiln_context, shared by the runtime's modules
 * (context.c owns it; launch.c and cublaslt.c read it under its lock).
 */
#ifndef KILN_CONTEXT_H
#define KILN_CONTEXT_H

#include <pthread.h>

#include "bundle.h"
#include "cache.h"
#include "catalog.h"
#include "dispatch.h"
#include "driver.h"
#include "kernel_desc.h"

/* One default kernel of the catalog, its description parsed once at context
 * creation and its module loaded at first use (then never again: the second
 * call does no file I/O and no hashing). */
typedef struct kiln_rt_kernel {
    const kiln_catalog_entry *entry;
    kiln_kernel_desc desc;
    kiln_launch_desc launch;
    CUmodule module;
    CUfunction function;
    int loaded;
} kiln_rt_kernel;

typedef struct kiln_cublaslt kiln_cublaslt; /* cublaslt.c */
typedef struct kiln_rt_tuned kiln_rt_tuned; /* tuned.c */
typedef struct kiln_tuning_table kiln_tuning_table;

struct kiln_context {
    pthread_mutex_t lock;
    kiln_error last_error;
    kiln_call_report last_call;
    int have_last_call;
    kiln_context_stats stats;

    kiln_log_fn log;
    void *log_user;
    kiln_log_level log_level;
    unsigned allowed;             /* KILN_ALLOW_* after KILN_BACKEND */
    char forced_by[64];           /* "KILN_BACKEND=cublaslt", or "" */

    kiln_driver drv;
    int driver_ok;
    CUdevice device;
    CUcontext cu;                 /* the CUDA context calls run in */
    int primary_retained;         /* 1: cu is the retained primary context */
    int cc_major, cc_minor, num_sms;
    char arch[16];

    kiln_cache *cache;            /* may be NULL (no cache) */
    kiln_bundle **bundles;        /* read-only, searched before the cache */
    size_t n_bundles;
    kiln_tuning_table *tuning;    /* merged tables, or NULL */
    kiln_rt_tuned *tuned;         /* one per table entry, loaded on first use */

    kiln_rt_kernel *kernels;      /* the catalog, parsed */
    kiln_dispatch_kernel *candidates; /* views of kernels for dispatch */
    size_t n_kernels;
    size_t n_candidates;          /* the defaults, a prefix of kernels: what the
                                     heuristic chooses from */

    kiln_cublaslt *lt;            /* loaded at first use */
};

/* Logs through the hook when level >= the context's level. */
void kiln_ctx_log(kiln_context *ctx, kiln_log_level level, const char *fmt, ...) KILN_PRINTF(3, 4);

/* Gets the cubin of an NVRTC-built kernel (the catalog's, or the runtime's
 * own helpers) through kiln_jit_get, counting compiles and cache hits and
 * logging a cache that cannot be written, then loads it. */
/* Loads a cubin as a module and finds its entry function. */
kiln_status kiln_ctx_module_from_cubin(kiln_context *ctx, const char *name, const void *cubin,
                                       const char *entry, CUmodule *module, CUfunction *function,
                                       kiln_error *err);

/* Loads a catalog kernel (once) and prepares it for launch. */
kiln_status kiln_ctx_load_catalog_kernel(kiln_context *ctx, kiln_rt_kernel *k, kiln_error *err);

kiln_status kiln_ctx_load_module(kiln_context *ctx, const char *name, const char *desc,
                                 const char *source, const char *entry, CUmodule *module,
                                 CUfunction *function, kiln_error *err);

#endif /* KILN_CONTEXT_H */
