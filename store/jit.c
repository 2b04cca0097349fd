/* jit.c — a generated kernel's cubin: from the cache, else NVRTC + store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

kiln_status kiln_jit_get(kiln_cache *c, const char *name, const char *arch,
                         const char *desc, const char *source,
                         kiln_cache_entry *out, kiln_jit_origin *origin,
                         kiln_error *warning, kiln_error *err)
{
    if (warning) kiln_error_clear(warning);
    if (!out) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "jit: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name || !*name) name = "kernel";
    if (!source)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kernel %s: no source", name);
    if (!kiln_nvrtc_arch_valid(arch))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s: bad arch '%s' (expected sm_<number>[a|f], e.g. sm_90a)",
                              name, arch ? arch : "(null)");
    if (!desc) desc = "";

    char key[65];
    kiln_cache_key(arch, desc, source, key);

    int damaged = 0;
    if (c && kiln_cache_get(c, key, out, &damaged)) {
        if (origin) *origin = KILN_JIT_CACHE;
        return KILN_OK;
    }

    kiln_compile_result r;
    kiln_status st = kiln_nvrtc_compile(source, name, arch, NULL, &r, err);
    if (st != KILN_OK) {
        kiln_compile_result_free(&r);
        return st;
    }
    char *dcopy = strdup(desc);
    if (!dcopy) {
        kiln_compile_result_free(&r);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kernel %s (%s): out of memory",
                              name, arch);
    }
    memcpy(out->key, key, sizeof out->key);
    kiln_source_sha256(source, out->source_sha256);
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    out->desc = dcopy;
    out->cubin = r.cubin;          /* ownership moves to out */
    out->cubin_size = r.cubin_size;
    out->stats = r.stats;
    r.cubin = NULL;
    kiln_compile_result_free(&r);
    if (origin) *origin = KILN_JIT_COMPILED;

    if (!c) return KILN_OK;
    kiln_error perr;
    kiln_error_clear(&perr);
    char path[4096] = "";
    kiln_cache_entry_path(c, key, path, sizeof path);
    if (kiln_cache_put(c, out, &perr) != KILN_OK) {
        if (warning)
            kiln_error_set(warning, KILN_ERROR_CACHE, "kernel %s (%s): %s%s; compiled without caching",
                           name, arch, damaged ? "damaged cache entry not repaired: " : "",
                           perr.msg);
    } else if (damaged && warning) {
        kiln_error_set(warning, KILN_ERROR_CACHE,
                       "kernel %s (%s): cache entry %s was damaged; rebuilt it", name, arch, path);
    }
    return KILN_OK;
}
