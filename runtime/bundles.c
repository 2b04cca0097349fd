/* bundles.c — serving kernels from precompiled bundles (see bundles.h). */
#include <stdlib.h>
#include <string.h>

#include "bundles.h"

static void open_one(kiln_context *ctx, const char *path)
{
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_bundle_open(path, &b, &err) != KILN_OK) {
        kiln_ctx_log(ctx, KILN_LOG_WARNING, "%s; using the JIT path instead", err.msg);
        return;
    }
    size_t for_arch = 0;
    const char *other = NULL;
    for (size_t i = 0; i < kiln_bundle_count(b); i++) {
        const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
        if (!strcmp(r->arch, ctx->arch)) for_arch++;
        else other = r->arch;
    }
    if (for_arch == 0) {
        kiln_ctx_log(ctx, KILN_LOG_WARNING,
                     "bundle %s refused: it holds no kernel for %s (built for %s); using the JIT "
                     "path instead", path, ctx->arch, other ? other : "nothing");
        kiln_bundle_close(b);
        return;
    }
    kiln_bundle **grown = realloc(ctx->bundles, (ctx->n_bundles + 1) * sizeof *grown);
    if (!grown) {
        kiln_bundle_close(b);
        return;
    }
    ctx->bundles = grown;
    ctx->bundles[ctx->n_bundles++] = b;
    kiln_ctx_log(ctx, KILN_LOG_INFO, "bundle %s: %zu kernels for %s", path, for_arch, ctx->arch);
}

void kiln_ctx_open_bundles(kiln_context *ctx, const char *const *paths)
{
    for (size_t i = 0; paths && paths[i]; i++) open_one(ctx, paths[i]);
    const char *env = getenv("KILN_BUNDLE_PATH");
    if (!env || !*env) return;
    char *copy = strdup(env);
    if (!copy) return;
    char *save = NULL;
    for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save))
        if (*p) open_one(ctx, p);
    free(copy);
}

void kiln_ctx_close_bundles(kiln_context *ctx)
{
    for (size_t i = 0; i < ctx->n_bundles; i++) kiln_bundle_close(ctx->bundles[i]);
    free(ctx->bundles);
    ctx->bundles = NULL;
    ctx->n_bundles = 0;
}

int kiln_ctx_bundle_lookup(kiln_context *ctx, const char *name, const char *desc,
                           const char *source, kiln_cache_entry *out)
{
    if (ctx->n_bundles == 0) return 0;
    char sha[65], id[65];
    kiln_source_sha256(source, sha);
    kiln_bundle_id(ctx->arch, desc, sha, id);
    for (size_t i = 0; i < ctx->n_bundles; i++) {
        long at = kiln_bundle_find(ctx->bundles[i], id);
        if (at < 0) continue;
        kiln_error err;
        kiln_error_clear(&err);
        if (kiln_bundle_load(ctx->bundles[i], (size_t)at, out, &err) == KILN_OK) return 1;
        kiln_ctx_log(ctx, KILN_LOG_WARNING, "%s: not loaded; trying the cache for %s", err.msg,
                     name);
    }
    return 0;
}
