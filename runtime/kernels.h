/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernels.h — the runtime's generated kernels: the built-in catalog and the
 * tuning tables' winners, turned into loaded modules through the store
 * (store.h: bundles, then the cache, then NVRTC).
 *
 * Bundles: those named in kiln_context_options.bundle_paths and in
 * $KILN_BUNDLE_PATH (colon-separated); when neither names one, the default
 * bundle installed beside the library (<libdir>/../share/kiln/
 * kiln-<arch>.kbundle), if present.  A bundle that is damaged, of another
 * format version, or holds no kernel for the device's arch is refused with
 * a logged warning; a damaged entry is never loaded.
 *
 * Tuning tables: kiln_context_options.tuning_tables, then the tables in the
 * bundles, then the default table built into the runtime, the first one
 * given winning a shared key.  A damaged or mismatched table is refused
 * with a logged warning naming file:line.  KILN_TUNING=off ignores every
 * table (to compare against the untuned heuristic).
 *
 * A winner's source is the catalog's for the same description (the
 * configuration the table measured); it is then resolved by that source's
 * kernel id like any catalog kernel.  With no such source, the table's id is
 * looked up in the bundles and the cache.  The loaded entry's own
 * description gives every launch field; an entry whose description differs
 * from the table's is refused.  A winner that cannot be loaded is marked
 * unavailable with one logged warning, and its key goes to the heuristic.
 */
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include "catalog.h"
#include "dispatch.h"
#include "env.h"
#include "store.h"

/* One generated kernel, its description parsed once and its module loaded
 * at first use (then never again: the second call does no file I/O and no
 * hashing). */
typedef struct kiln_rt_kernel {
    const kiln_catalog_entry *entry; /* NULL: a tuned kernel loaded by id alone */
    kiln_kernel_desc desc;
    kiln_launch_desc launch;
    CUmodule module;
    CUfunction function;
    int loaded;
    int sched;                       /* its module has work-order counters (sched_slots.h) */
    int split;                       /* it splits its last wave (launch.h), given a workspace */
} kiln_rt_kernel;

/* A tuning table entry's kernel. */
typedef struct kiln_rt_tuned {
    kiln_rt_kernel own;              /* when no catalog kernel has its description */
    kiln_rt_kernel *k;               /* &own or a catalog kernel; NULL until loaded */
} kiln_rt_tuned;

typedef struct kiln_kernels {
    kiln_rt_env env;
    kiln_store store;                /* cache and bundles */
    kiln_context_stats *stats;       /* compiles, cache and bundle hits are counted here */

    kiln_rt_kernel *kernels;         /* the catalog, parsed */
    kiln_dispatch_kernel *candidates;/* views of kernels for dispatch */
    size_t n_kernels;
    size_t n_candidates;             /* the defaults, a prefix of kernels: what the
                                        heuristic chooses from */

    kiln_tuning_table *tuning;       /* merged tables, or NULL */
    kiln_rt_tuned *tuned;            /* one per table entry */
    unsigned char *tuned_unavailable;/* one per table entry: 1 once it failed */
} kiln_kernels;

/* Parses the catalog (a bad entry is skipped with a warning). */
kiln_status kiln_kernels_open_catalog(kiln_kernels *ks, kiln_error *err);
/* Opens the cache and the bundles (env.dev must be set).  Never fails: what
 * cannot be used is logged and left out. */
void kiln_kernels_open_store(kiln_kernels *ks, const char *cache_dir,
                             const char *const *bundle_paths);
void kiln_kernels_open_tuning(kiln_kernels *ks, const char *const *paths);
/* Unloads every module (the context's CUDA context current), then frees. */
void kiln_kernels_close(kiln_kernels *ks, int unload);

/* The kernel a dispatch choice names, loaded.  A tuned entry that fails is
 * marked unavailable and logged (the caller dispatches again). */
kiln_status kiln_kernels_load(kiln_kernels *ks, const kiln_dispatch_choice *c,
                              kiln_rt_kernel **out, kiln_error *err);

/* The default bundle's path for the library at object_path:
 * <dir of object_path>/../share/kiln/kiln-<arch>.kbundle. */
void kiln_default_bundle_path(const char *object_path, const char *arch, char *out, size_t size);

/* One of the runtime's own helper kernels (not from specs: the cuBLASLt
 * epilogue, the quantizers), loaded through the same store: its
 * description is its name, family, entry point and block size; *function
 * is `entry` of the module. */
kiln_status kiln_kernels_load_helper(kiln_kernels *ks, const char *name, const char *family,
                                     const char *entry, int threads, const char *source,
                                     CUmodule *module, CUfunction *function, kiln_error *err);

#endif /* KILN_KERNELS_H */
