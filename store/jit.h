/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jit.h — the cubin of a generated kernel from the cache, else compiled with
 * NVRTC and stored: kiln_store_resolve (store.h) without bundles, in the
 * form `kiln compile` calls.
 */
#ifndef KILN_JIT_H
#define KILN_JIT_H

#include "store.h"

/* The old names of kiln_origin's values, for `kiln compile`. */
typedef kiln_origin kiln_jit_origin;
#define KILN_JIT_CACHE KILN_ORIGIN_CACHE
#define KILN_JIT_COMPILED KILN_ORIGIN_NVRTC

/* Fills out (the caller frees it with kiln_cache_entry_free).  A cache that
 * cannot be written is reported through *warning (may be NULL) and is not an
 * error.  c may be NULL (no cache). */
kiln_status kiln_jit_get(kiln_cache *c, const char *name, const char *arch,
                         const char *desc, const char *source,
                         kiln_cache_entry *out, kiln_jit_origin *origin,
                         kiln_error *warning, kiln_error *err);

#endif /* KILN_JIT_H */
