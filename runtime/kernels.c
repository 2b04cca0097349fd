/* SPDX-License-Identifier: Apache-2.0 */
/* kernels.c — catalog and tuned kernels to loaded modules through the store
 * (see kernels.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"
#include "launch.h"

#define LOG(ks, level, ...) kiln_rt_logf((ks)->env.log, level, __VA_ARGS__)

kiln_status kiln_kernels_open_catalog(kiln_kernels *ks, kiln_error *err)
{
    size_t n = kiln_catalog_count;
    if (!n) return KILN_OK;
    ks->kernels = calloc(n, sizeof *ks->kernels);
    ks->candidates = calloc(n, sizeof *ks->candidates);
    if (!ks->kernels || !ks->candidates)
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "catalog: out of memory");
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        kiln_rt_kernel *k = &ks->kernels[used];
        kiln_error perr;
        kiln_error_clear(&perr);
        if (!kiln_desc_parse(kiln_catalog[i].desc, &k->desc, &k->launch, &perr)) {
            /* A bad entry is a build bug; skip it rather than lose the rest. */
            LOG(ks, KILN_LOG_WARNING, "catalog entry %s skipped: %s", kiln_catalog[i].name,
                perr.msg);
            continue;
        }
        k->entry = &kiln_catalog[i];
        /* Defaults come first in the catalog; tuned-only kernels after them
         * are served through tuning tables, never by the heuristic. */
        if (!kiln_catalog[i].tuned_only) ks->n_candidates = used + 1;
        ks->candidates[used].arch = kiln_catalog[i].arch;
        ks->candidates[used].desc = &k->desc;
        ks->candidates[used].launch = &k->launch;
        used++;
    }
    ks->n_kernels = used;
    return KILN_OK;
}

/* ---- the store ---------------------------------------------------------- */

static void store_warning(void *user, const char *message)
{
    kiln_kernels *ks = user;
    LOG(ks, KILN_LOG_WARNING, "%s", message);
}

static void add_bundle(kiln_kernels *ks, const char *path)
{
    kiln_error err;
    kiln_error_clear(&err);
    size_t n = 0;
    if (kiln_store_add_bundle(&ks->store, path, ks->env.dev->arch, &n, &err) != KILN_OK) {
        LOG(ks, KILN_LOG_WARNING, "%s; using the JIT path instead", err.msg);
        return;
    }
    LOG(ks, KILN_LOG_INFO, "bundle %s: %zu kernels for %s", path, n, ks->env.dev->arch);
}

void kiln_default_bundle_path(const char *object_path, const char *arch, char *out, size_t size)
{
    const char *slash = strrchr(object_path, '/');
    int dir_len = slash ? (int)(slash - object_path) : 1;
    snprintf(out, size, "%.*s/../share/kiln/kiln-%s.kbundle", dir_len, slash ? object_path : ".",
             arch);
}

/* The default bundle beside the object this code is linked into (libkiln.so
 * once installed), if there is one. */
static void add_default_bundle(kiln_kernels *ks)
{
    Dl_info info;
    if (!dladdr((void *)&kiln_kernels_open_store, &info) || !info.dli_fname) return;
    char path[4096];
    kiln_default_bundle_path(info.dli_fname, ks->env.dev->arch, path, sizeof path);
    if (access(path, R_OK) != 0) {
        LOG(ks, KILN_LOG_DEBUG, "no default bundle at %s", path);
        return;
    }
    add_bundle(ks, path);
}

void kiln_kernels_open_store(kiln_kernels *ks, const char *cache_dir,
                             const char *const *bundle_paths)
{
    ks->store.warn = store_warning;
    ks->store.warn_user = ks;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cache_open(cache_dir, &ks->store.cache, &err) != KILN_OK) {
        LOG(ks, KILN_LOG_WARNING, "kernel cache unusable, compiling without it: %s", err.msg);
        ks->store.cache = NULL;
    }
    int named = 0;
    for (size_t i = 0; bundle_paths && bundle_paths[i]; i++, named++) add_bundle(ks, bundle_paths[i]);
    const char *env = getenv("KILN_BUNDLE_PATH");
    char *copy = env && *env ? strdup(env) : NULL;
    char *save = NULL;
    for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
        if (*p) {
            add_bundle(ks, p);
            named++;
        }
    free(copy);
    if (!named) add_default_bundle(ks);
}

/* ---- tuning tables ------------------------------------------------------ */

static void merge(kiln_kernels *ks, kiln_tuning_table *t, const char *from)
{
    kiln_error err;
    kiln_error_clear(&err);
    size_t added = 0;
    if (!strcmp(kiln_tuning_table_timer(t), "fake"))
        LOG(ks, KILN_LOG_WARNING, "tuning table %s was measured with the fake timer (a formula, "
            "not a GPU): its winners are not measured choices", from);
    if (!ks->tuning) {
        ks->tuning = t;
        added = kiln_tuning_table_count(t);
    } else {
        if (kiln_tuning_table_merge(ks->tuning, t, &added, &err) != KILN_OK)
            LOG(ks, KILN_LOG_WARNING, "tuning table %s not merged: %s", from, err.msg);
        kiln_tuning_table_destroy(t);
    }
    LOG(ks, KILN_LOG_INFO, "tuning table %s: %zu entries", from, added);
}

static void parse_table(kiln_kernels *ks, const char *text, size_t len, const char *from)
{
    kiln_tuning_table *t = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_tuning_table_parse(text, len, from, &t, &err) != KILN_OK)
        LOG(ks, KILN_LOG_WARNING, "tuning table %s refused: %s", from, err.msg);
    else
        merge(ks, t, from);
}

void kiln_kernels_open_tuning(kiln_kernels *ks, const char *const *paths)
{
    const char *off = getenv("KILN_TUNING");
    if (off && !strcmp(off, "off")) {
        LOG(ks, KILN_LOG_INFO, "KILN_TUNING=off: tuning tables ignored");
        return;
    }
    for (size_t i = 0; paths && paths[i]; i++) {
        kiln_tuning_table *t = NULL;
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_tuning_table_load(paths[i], &t, &err) != KILN_OK) {
            LOG(ks, KILN_LOG_WARNING,
                "tuning table refused, dispatch uses the default heuristic: %s", err.msg);
            continue;
        }
        merge(ks, t, paths[i]);
    }
    for (size_t i = 0; i < ks->store.n_bundles; i++) {
        size_t len = 0;
        const char *text = kiln_bundle_table(ks->store.bundles[i], &len);
        if (text) parse_table(ks, text, len, kiln_bundle_path(ks->store.bundles[i]));
    }
    if (kiln_catalog_tuning && kiln_catalog_tuning[0])
        parse_table(ks, kiln_catalog_tuning, strlen(kiln_catalog_tuning), "built-in specs/tuning");
    if (!ks->tuning) return;
    size_t n = kiln_tuning_table_count(ks->tuning);
    ks->tuned = calloc(n ? n : 1, sizeof *ks->tuned);
    ks->tuned_unavailable = calloc(n ? n : 1, 1);
    if (!ks->tuned || !ks->tuned_unavailable) {
        LOG(ks, KILN_LOG_WARNING, "tuning tables dropped: out of memory");
        free(ks->tuned);
        free(ks->tuned_unavailable);
        ks->tuned = NULL;
        ks->tuned_unavailable = NULL;
        kiln_tuning_table_destroy(ks->tuning);
        ks->tuning = NULL;
    }
}

/* ---- loading ------------------------------------------------------------ */

static void unload(kiln_kernels *ks, kiln_rt_kernel *k)
{
    if (k->module) ks->env.drv->cuModuleUnload(k->module);
    k->module = NULL;
    k->function = NULL;
    k->loaded = 0;
}

void kiln_kernels_close(kiln_kernels *ks, int unload_modules)
{
    if (unload_modules) {
        for (size_t i = 0; i < ks->n_kernels; i++)
            if (ks->kernels[i].loaded) unload(ks, &ks->kernels[i]);
        size_t n = ks->tuning ? kiln_tuning_table_count(ks->tuning) : 0;
        for (size_t i = 0; ks->tuned && i < n; i++)
            if (ks->tuned[i].own.loaded) unload(ks, &ks->tuned[i].own);
    }
    free(ks->tuned);
    free(ks->tuned_unavailable);
    if (ks->tuning) kiln_tuning_table_destroy(ks->tuning);
    if (ks->store.cache) kiln_cache_close(ks->store.cache);
    kiln_store_close_bundles(&ks->store);
    free(ks->kernels);
    free(ks->candidates);
    memset(ks, 0, sizeof *ks);
}

static kiln_status module_from_cubin(kiln_kernels *ks, const char *name, const void *cubin,
                                     const char *entry, CUmodule *module, CUfunction *function,
                                     kiln_error *err)
{
    const kiln_driver *d = ks->env.drv;
    CUresult r = d->cuModuleLoadData(module, cubin);
    char what[192];
    if (r != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "cuModuleLoadData(%s, %s)", name, ks->env.dev->arch);
        return kiln_driver_check(d, r, what, err);
    }
    r = d->cuModuleGetFunction(function, *module, entry);
    if (r != CUDA_SUCCESS) {
        d->cuModuleUnload(*module);
        *module = NULL;
        snprintf(what, sizeof what, "cuModuleGetFunction(%s, \"%s\")", name, entry);
        return kiln_driver_check(d, r, what, err);
    }
    return KILN_OK;
}

/* Resolves k through the store, counting where it came from. */
static kiln_status resolve(kiln_kernels *ks, const kiln_kernel_ref *k, kiln_cache_entry *ce,
                           kiln_error *err)
{
    double t0 = kiln_now();
    kiln_origin origin;
    kiln_status st = kiln_store_resolve(&ks->store, k, ce, &origin, err);
    if (st) return st;
    const char *arch = ks->env.dev->arch;
    if (origin == KILN_ORIGIN_NVRTC) {
        ks->stats->nvrtc_compiles++;
        LOG(ks, KILN_LOG_INFO, "compiled %s for %s in %.2f s (%d registers)", k->name, arch,
            kiln_now() - t0, ce->stats.registers);
    } else if (origin == KILN_ORIGIN_CACHE) {
        ks->stats->cache_hits++;
        LOG(ks, KILN_LOG_DEBUG, "loaded %s for %s from the cache", k->name, arch);
    } else {
        ks->stats->bundle_hits++;
        LOG(ks, KILN_LOG_DEBUG, "loaded %s for %s from a bundle", k->name, arch);
    }
    return KILN_OK;
}

kiln_status kiln_kernels_load_helper(kiln_kernels *ks, const char *name, const char *family,
                                     const char *entry, int threads, const char *source,
                                     CUmodule *module, CUfunction *function, kiln_error *err)
{
    kiln_kernel_desc d;
    kiln_desc_init(&d);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.family, sizeof d.family, "%s", family);
    kiln_launch_desc l;
    memset(&l, 0, sizeof l);
    snprintf(l.entry, sizeof l.entry, "%s", entry);
    l.threads = threads;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_desc_format(&d, &l, &sb);
    if (sb.oom) {
        kiln_strbuf_free(&sb);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    kiln_kernel_ref ref = {.name = name, .arch = ks->env.dev->arch, .desc = sb.data, .source = source};
    kiln_cache_entry ce;
    kiln_status st = resolve(ks, &ref, &ce, err);
    kiln_strbuf_free(&sb);
    if (st) return st;
    st = module_from_cubin(ks, name, ce.cubin, entry, module, function, err);
    kiln_cache_entry_free(&ce);
    return st;
}

/* Loads k (once) from its cubin and sets its launch limits. */
static kiln_status load_kernel(kiln_kernels *ks, kiln_rt_kernel *k, const kiln_cache_entry *ce,
                               kiln_error *err)
{
    kiln_status st = module_from_cubin(ks, k->desc.name, ce->cubin, k->launch.entry, &k->module,
                                       &k->function, err);
    if (st) return st;
    if ((st = kiln_launch_set_limits(&ks->env, k, ce->cubin, ce->cubin_size, err))) {
        unload(ks, k);
        return st;
    }
    if (k->sched) LOG(ks, KILN_LOG_DEBUG, "%s: dynamic work order (sched_slots.h)", k->desc.name);
    if (k->split) LOG(ks, KILN_LOG_DEBUG, "%s: splits a short last wave (launch.h)", k->desc.name);
    k->loaded = 1;
    return KILN_OK;
}

static kiln_status load_catalog_kernel(kiln_kernels *ks, kiln_rt_kernel *k, kiln_error *err)
{
    if (k->loaded) return KILN_OK;
    kiln_kernel_ref ref = {.name = k->desc.name, .arch = k->entry->arch, .desc = k->entry->desc,
                           .source = k->entry->source};
    kiln_cache_entry ce;
    kiln_status st = resolve(ks, &ref, &ce, err);
    if (st) return st;
    st = load_kernel(ks, k, &ce, err);
    kiln_cache_entry_free(&ce);
    return st;
}

/* A winner with no catalog source: by the table's id from a bundle or the
 * cache, every launch field from the entry's own description. */
static kiln_status load_by_id(kiln_kernels *ks, const kiln_tuning_entry *e, kiln_rt_kernel *own,
                              kiln_error *err)
{
    kiln_kernel_ref ref = {.name = e->kernel, .arch = e->key.arch, .desc = e->desc,
                           .id = e->bundle_id};
    kiln_cache_entry ce;
    kiln_status st = resolve(ks, &ref, &ce, err);
    if (st) return st;
    if (strcmp(ce.desc, e->desc) != 0)
        st = kiln_error_set(err, KILN_ERROR_CACHE,
                            "the entry of id %.16s... describes another kernel than the table "
                            "does", e->bundle_id);
    else if (!kiln_desc_parse(ce.desc, &own->desc, &own->launch, err))
        st = KILN_ERROR_CACHE;
    if (!st) st = load_kernel(ks, own, &ce, err);
    kiln_cache_entry_free(&ce);
    return st;
}

static kiln_status load_tuned(kiln_kernels *ks, long i, kiln_rt_kernel **out, kiln_error *err)
{
    kiln_rt_tuned *t = &ks->tuned[i];
    if (t->k) {
        *out = t->k;
        return KILN_OK;
    }
    const kiln_tuning_entry *e = kiln_tuning_table_at(ks->tuning, (size_t)i);
    kiln_rt_kernel *k = NULL;
    for (size_t j = 0; j < ks->n_kernels && !k; j++)
        if (!strcmp(ks->kernels[j].entry->arch, e->key.arch) &&
            !strcmp(ks->kernels[j].entry->desc, e->desc))
            k = &ks->kernels[j];
    kiln_status st = k ? load_catalog_kernel(ks, k, err) : load_by_id(ks, e, &t->own, err);
    if (st) {
        ks->tuned_unavailable[i] = 1;
        LOG(ks, KILN_LOG_WARNING,
            "tuned kernel %s (line %d of its table) unavailable, using the default heuristic: %s",
            e->kernel, e->line, err->msg);
        return st;
    }
    t->k = k ? k : &t->own;
    *out = t->k;
    return KILN_OK;
}

kiln_status kiln_kernels_load(kiln_kernels *ks, const kiln_dispatch_choice *c,
                              kiln_rt_kernel **out, kiln_error *err)
{
    *out = NULL;
    if (c->tuned >= 0) return load_tuned(ks, c->tuned, out, err);
    kiln_rt_kernel *k = &ks->kernels[c->kernel];
    kiln_status st = load_catalog_kernel(ks, k, err);
    if (!st) *out = k;
    return st;
}
