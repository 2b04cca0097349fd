/*
 * jit.h — get the cubin of a generated kernel: from the cache when there,
 * else compile with NVRTC and store it.  No Lua or libyaml: the runtime uses
 * this too, with sources from its built-in catalog.
 */
#ifndef KILN_JIT_H
#define KILN_JIT_H

#include "cache.h"

typedef enum kiln_jit_origin {
    KILN_JIT_CACHE = 0,
    KILN_JIT_COMPILED = 1,
} kiln_jit_origin;

/* Fills out (the caller frees it with kiln_cache_entry_free).  A cache that
 * cannot be written is reported through *warning (may be NULL) and is not an
 * error.  c may be NULL (no cache). */
kiln_status kiln_jit_get(kiln_cache *c, const char *name, const char *arch,
                         const char *desc, const char *source,
                         kiln_cache_entry *out, kiln_jit_origin *origin,
                         kiln_error *warning, kiln_error *err);

#endif /* KILN_JIT_H */
