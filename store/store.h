/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h — a kernel's one identity, and the one way from a kernel to a
 * cubin: bundles, then the cache, then NVRTC.
 *
 * The kernel id is SHA-256 of (kernel ABI version, arch, canonical
 * description, SHA-256 of the generated source without its provenance
 * line).  Bundles index kernels by it; the cache files a kernel under a key
 * made from the id and the compiler that built the cubin (kiln and NVRTC
 * versions and options, cache.h), since a cached cubin is only as good as
 * that compiler.  No path and no time goes into either.
 *
 * Everything the runtime loads (catalog kernels, tuned kernels, its own
 * helper kernels) and everything `kiln compile` builds goes through
 * kiln_store_resolve.
 */
#ifndef KILN_STORE_H
#define KILN_STORE_H

#include "bundle.h"
#include "cache.h"

/* id = SHA-256(ABI version, arch, desc, source_sha256), hex.  Taking the
 * source's hash lets a cache entry (which keeps the hash, not the source)
 * be exported into a bundle. */
void kiln_kernel_id(const char *arch, const char *desc, const char *source_sha256, char out[65]);
/* The same from the source text itself. */
void kiln_kernel_id_of_source(const char *arch, const char *desc, const char *source,
                              char out[65]);

/* Where a cubin came from. */
typedef enum kiln_origin {
    KILN_ORIGIN_CACHE = 0,
    KILN_ORIGIN_NVRTC = 1,
    KILN_ORIGIN_BUNDLE = 2,
} kiln_origin;

/* What a resolve may read: bundles (searched in order), then a cache.
 * warn, if set, hears what does not stop a resolve (a damaged bundle entry,
 * a cache that cannot be written). */
typedef struct kiln_store {
    kiln_cache *cache;                 /* may be NULL (no cache) */
    kiln_bundle **bundles;
    size_t n_bundles;
    void (*warn)(void *user, const char *message);
    void *warn_user;
} kiln_store;

/* One kernel to resolve. */
typedef struct kiln_kernel_ref {
    const char *name;                  /* for messages */
    const char *arch;                  /* "sm_90a" */
    const char *desc;                  /* canonical description text (NULL: "") */
    const char *source;                /* generated source; NULL: bundles and cache only */
    const char *id;                    /* its kernel id, used when source is NULL */
} kiln_kernel_ref;

/* Fills out (the caller frees it with kiln_cache_entry_free) and *origin.
 * A compiled kernel is stored in the cache.  KILN_ERROR_CACHE when no
 * source was given and neither a bundle nor the cache holds the kernel. */
kiln_status kiln_store_resolve(const kiln_store *s, const kiln_kernel_ref *k,
                               kiln_cache_entry *out, kiln_origin *origin, kiln_error *err);

/* Opens a bundle and adds it to s.  A bundle that holds no kernel for arch
 * is refused (KILN_ERROR_CACHE naming the file and what it holds);
 * *for_arch gets the number of kernels it holds for arch. */
kiln_status kiln_store_add_bundle(kiln_store *s, const char *path, const char *arch,
                                  size_t *for_arch, kiln_error *err);
void kiln_store_close_bundles(kiln_store *s);

#endif /* KILN_STORE_H */
