/*
 * bundles.h — precompiled kernel bundles in a context.
 *
 * Bundles named in kiln_context_options.bundle_paths (and in
 * $KILN_BUNDLE_PATH, colon-separated) are mapped read-only when the context
 * is created.  A kernel is served from the first bundle that holds it, then
 * from the cache, then by compiling.  A bundle that is damaged, of another
 * format version, or holds no kernel for the device's architecture is
 * refused with a logged warning naming the file and the reason; the context
 * carries on with the JIT path.  A damaged entry is never loaded.
 */
#ifndef KILN_BUNDLES_H
#define KILN_BUNDLES_H

#include "context.h"

/* Opens every bundle it can; never fails the context. */
void kiln_ctx_open_bundles(kiln_context *ctx, const char *const *paths);
void kiln_ctx_close_bundles(kiln_context *ctx);

/* 1 and *out filled (caller frees) when a bundle holds the kernel of this
 * description and source for ctx->arch; 0 otherwise. */
int kiln_ctx_bundle_lookup(kiln_context *ctx, const char *name, const char *desc,
                           const char *source, kiln_cache_entry *out);

#endif /* KILN_BUNDLES_H */
