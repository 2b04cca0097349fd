/* SPDX-License-Identifier: Apache-2.0 */
/* jit.c — kiln_store_resolve without bundles (see jit.h). */
#include <string.h>

#include "jit.h"

static void keep_warning(void *user, const char *message)
{
    kiln_error *w = user;
    if (w) kiln_error_set(w, KILN_ERROR_CACHE, "%s", message);
}

kiln_status kiln_jit_get(kiln_cache *c, const char *name, const char *arch,
                         const char *desc, const char *source,
                         kiln_cache_entry *out, kiln_jit_origin *origin,
                         kiln_error *warning, kiln_error *err)
{
    if (warning) kiln_error_clear(warning);
    if (!out) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "jit: out is NULL");
    memset(out, 0, sizeof *out);
    if (!source)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kernel %s: no source",
                              name && *name ? name : "kernel");
    kiln_store s = {.cache = c, .warn = keep_warning, .warn_user = warning};
    kiln_kernel_ref k = {.name = name, .arch = arch, .desc = desc, .source = source};
    kiln_origin o = KILN_ORIGIN_CACHE;
    kiln_status st = kiln_store_resolve(&s, &k, out, &o, err);
    if (origin) *origin = o;
    return st;
}
