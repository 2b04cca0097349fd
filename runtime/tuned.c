/* tuned.c — dispatching through tuning tables (see tuned.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "launch.h"
#include "tuned.h"
#include "tuning.h"

struct kiln_rt_tuned {
    const kiln_tuning_entry *entry;
    kiln_rt_kernel own;          /* loaded from a bundle or the cache */
    kiln_rt_kernel *k;           /* &own, or a catalog kernel; NULL until tried */
    int state;                   /* 0 untried, 1 ready, -1 unavailable */
};

static void merge(kiln_context *ctx, kiln_tuning_table *t, const char *from)
{
    kiln_error err;
    kiln_error_clear(&err);
    size_t added = 0;
    if (!ctx->tuning) {
        ctx->tuning = t;
        added = kiln_tuning_table_count(t);
    } else {
        if (kiln_tuning_table_merge(ctx->tuning, t, &added, &err) != KILN_OK)
            kiln_ctx_log(ctx, KILN_LOG_WARNING, "tuning table %s not merged: %s", from, err.msg);
        kiln_tuning_table_destroy(t);
    }
    kiln_ctx_log(ctx, KILN_LOG_INFO, "tuning table %s: %zu entries", from, added);
}

void kiln_ctx_open_tuning(kiln_context *ctx, const char *const *paths)
{
    kiln_error err;
    const char *off = getenv("KILN_TUNING");
    if (off && !strcmp(off, "off")) {
        kiln_ctx_log(ctx, KILN_LOG_INFO, "KILN_TUNING=off: tuning tables ignored");
        return;
    }
    for (size_t i = 0; paths && paths[i]; i++) {
        kiln_tuning_table *t = NULL;
        kiln_error_clear(&err);
        if (kiln_tuning_table_load(paths[i], &t, &err) != KILN_OK) {
            kiln_ctx_log(ctx, KILN_LOG_WARNING,
                         "tuning table refused, dispatch uses the default heuristic: %s", err.msg);
            continue;
        }
        merge(ctx, t, paths[i]);
    }
    for (size_t i = 0; i < ctx->n_bundles; i++) {
        size_t len = 0;
        const char *text = kiln_bundle_table(ctx->bundles[i], &len);
        if (!text) continue;
        kiln_tuning_table *t = NULL;
        kiln_error_clear(&err);
        if (kiln_tuning_table_parse(text, len, kiln_bundle_path(ctx->bundles[i]), &t, &err) !=
            KILN_OK) {
            kiln_ctx_log(ctx, KILN_LOG_WARNING, "tuning table in bundle refused: %s", err.msg);
            continue;
        }
        merge(ctx, t, kiln_bundle_path(ctx->bundles[i]));
    }
    if (kiln_catalog_tuning && kiln_catalog_tuning[0]) {
        kiln_tuning_table *t = NULL;
        kiln_error_clear(&err);
        if (kiln_tuning_table_parse(kiln_catalog_tuning, strlen(kiln_catalog_tuning),
                                    "built-in specs/tuning", &t, &err) != KILN_OK)
            kiln_ctx_log(ctx, KILN_LOG_WARNING, "built-in tuning table refused: %s", err.msg);
        else
            merge(ctx, t, "built-in specs/tuning");
    }
    if (!ctx->tuning) return;
    size_t n = kiln_tuning_table_count(ctx->tuning);
    ctx->tuned = calloc(n ? n : 1, sizeof *ctx->tuned);
    if (!ctx->tuned) {
        kiln_tuning_table_destroy(ctx->tuning);
        ctx->tuning = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++) ctx->tuned[i].entry = kiln_tuning_table_at(ctx->tuning, i);
}

void kiln_ctx_close_tuning(kiln_context *ctx)
{
    if (ctx->tuned && ctx->tuning) {
        size_t n = kiln_tuning_table_count(ctx->tuning);
        for (size_t i = 0; i < n; i++)
            if (ctx->tuned[i].state == 1 && ctx->tuned[i].k == &ctx->tuned[i].own &&
                ctx->tuned[i].own.module)
                ctx->drv.cuModuleUnload(ctx->tuned[i].own.module);
    }
    free(ctx->tuned);
    ctx->tuned = NULL;
    if (ctx->tuning) kiln_tuning_table_destroy(ctx->tuning);
    ctx->tuning = NULL;
}

/* Finds the entry's cubin: a bundle, then the cache; else the catalog
 * kernel with the same description. */
static int resolve(kiln_context *ctx, kiln_rt_tuned *t, kiln_error *err)
{
    const kiln_tuning_entry *e = t->entry;
    kiln_cache_entry ce;
    memset(&ce, 0, sizeof ce);
    int have = 0;
    for (size_t i = 0; i < ctx->n_bundles && !have; i++) {
        long at = kiln_bundle_find(ctx->bundles[i], e->bundle_id);
        if (at >= 0 && kiln_bundle_load(ctx->bundles[i], (size_t)at, &ce, err) == KILN_OK) {
            have = 1;
            ctx->stats.bundle_hits++;
        }
    }
    int damaged = 0;
    if (!have && ctx->cache && kiln_cache_get(ctx->cache, e->cache_key, &ce, &damaged)) {
        have = 1;
        ctx->stats.cache_hits++;
    }
    if (have) {
        t->own.desc = e->kdesc;
        t->own.launch = e->launch;
        kiln_status st = kiln_ctx_module_from_cubin(ctx, e->kernel, ce.cubin, e->launch.entry,
                                                    &t->own.module, &t->own.function, err);
        kiln_cache_entry_free(&ce);
        if (st == KILN_OK && kiln_launch_prepare(ctx, &t->own, err) == KILN_OK) {
            t->own.loaded = 1;
            t->k = &t->own;
            return 1;
        }
        return 0;
    }
    for (size_t i = 0; i < ctx->n_kernels; i++) {
        kiln_rt_kernel *k = &ctx->kernels[i];
        if (!strcmp(k->entry->arch, ctx->arch) && !strcmp(k->entry->desc, e->desc)) {
            if (kiln_ctx_load_catalog_kernel(ctx, k, err) != KILN_OK) return 0;
            t->k = k;
            return 1;
        }
    }
    kiln_error_set(err, KILN_ERROR_CACHE, "no bundle, cache entry or built-in source for it");
    return 0;
}

kiln_rt_kernel *kiln_ctx_tuned_kernel(kiln_context *ctx, const kiln_problem *p, char *reason,
                                      size_t size)
{
    if (!ctx->tuning) return NULL;
    kiln_tuning_key key;
    kiln_tuning_key_from_problem(p, ctx->arch, &key);
    const kiln_tuning_entry *e = kiln_tuning_lookup(ctx->tuning, &key);
    if (!e) return NULL;
    kiln_rt_tuned *t = &ctx->tuned[e - kiln_tuning_table_at(ctx->tuning, 0)];
    if (t->state < 0) return NULL;
    char why[200];
    kiln_dispatch_kernel dk = {e->key.arch, &e->kdesc, &e->launch};
    if (!kiln_should_use_kernel(&dk, ctx->arch, p, why, sizeof why)) return NULL;
    if (t->state == 0) {
        kiln_error err;
        kiln_error_clear(&err);
        if (!resolve(ctx, t, &err)) {
            t->state = -1;
            kiln_ctx_log(ctx, KILN_LOG_WARNING,
                         "tuned kernel %s (line %d of its table) unavailable, using the default "
                         "heuristic: %s", e->kernel, e->line, err.msg);
            return NULL;
        }
        t->state = 1;
    }
    char cls[32];
    kiln_shape_class_name(&key.shape, cls, sizeof cls);
    snprintf(reason, size, "tuned kernel %s for %s (measured %.3f ms; runner-up %s)", e->kernel,
             cls, e->median_ms, e->runnerup[0] ? e->runnerup : "none");
    return t->k;
}
