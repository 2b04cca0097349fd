/* SPDX-License-Identifier: Apache-2.0 */
/* store.c — the kernel id and the resolve chain (see store.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_abi.h"
#include "store.h"

static void hash_field(kiln_sha256 *s, const char *v)
{
    /* Length-prefixed, so no two field lists hash alike by running together. */
    uint64_t n = v ? strlen(v) : 0;
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(n >> (8 * i));
    kiln_sha256_update(s, len, 8);
    if (n) kiln_sha256_update(s, v, n);
}

void kiln_kernel_id(const char *arch, const char *desc, const char *source_sha256, char out[65])
{
    kiln_sha256 s;
    uint8_t d[32];
    char abi[16];
    snprintf(abi, sizeof abi, "abi%d", KILN_KERNEL_ABI_VERSION);
    kiln_sha256_init(&s);
    hash_field(&s, abi);
    hash_field(&s, arch);
    hash_field(&s, desc);
    hash_field(&s, source_sha256);
    kiln_sha256_final(&s, d);
    kiln_hex(d, 32, out);
    out[64] = '\0';
}

void kiln_kernel_id_of_source(const char *arch, const char *desc, const char *source,
                              char out[65])
{
    char sha[65];
    kiln_source_sha256(source, sha);
    kiln_kernel_id(arch, desc, sha, out);
}

static void warn(const kiln_store *s, const char *fmt, ...) KILN_PRINTF(2, 3);
static void warn(const kiln_store *s, const char *fmt, ...)
{
    if (!s->warn) return;
    char msg[KILN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->warn(s->warn_user, msg);
}

/* The first bundle entry of that id that loads; a damaged one is reported
 * and skipped. */
static int from_bundles(const kiln_store *s, const char *id, kiln_cache_entry *out)
{
    for (size_t i = 0; i < s->n_bundles; i++) {
        long at = kiln_bundle_find(s->bundles[i], id);
        if (at < 0) continue;
        kiln_error e;
        kiln_error_clear(&e);
        if (kiln_bundle_load(s->bundles[i], (size_t)at, out, &e) == KILN_OK) return 1;
        warn(s, "%s; not loaded, looking further", e.msg);
    }
    return 0;
}

static kiln_status compile(const kiln_store *s, const kiln_kernel_ref *k, const char *key, int damaged, kiln_cache_entry *out, kiln_error *err)
{
    kiln_compile_result r;
    kiln_status st = kiln_nvrtc_compile(k->source, k->name, k->arch, NULL, &r, err);
    if (st != KILN_OK) {
        kiln_compile_result_free(&r);
        return st;
    }
    char *dcopy = strdup(k->desc ? k->desc : "");
    if (!dcopy) {
        kiln_compile_result_free(&r);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "kernel %s (%s): out of memory",
                              k->name, k->arch);
    }
    memcpy(out->key, key, sizeof out->key);
    kiln_source_sha256(k->source, out->source_sha256);
    snprintf(out->arch, sizeof out->arch, "%s", k->arch);
    out->desc = dcopy;
    out->cubin = r.cubin; /* ownership moves to out */
    out->cubin_size = r.cubin_size;
    out->stats = r.stats;
    r.cubin = NULL;
    kiln_compile_result_free(&r);
    if (!s->cache) return KILN_OK;
    kiln_error perr;
    kiln_error_clear(&perr);
    if (kiln_cache_put(s->cache, out, &perr) != KILN_OK) {
        warn(s, "kernel %s (%s): %s%s; compiled without caching", k->name, k->arch,
             damaged ? "damaged cache entry not repaired: " : "", perr.msg);
    } else if (damaged) {
        char path[4096] = "";
        kiln_cache_entry_path(s->cache, key, path, sizeof path);
        warn(s, "kernel %s (%s): cache entry %s was damaged; rebuilt, cached again",
             k->name, k->arch, path);
    }
    return KILN_OK;
}

kiln_status kiln_store_resolve(const kiln_store *s, const kiln_kernel_ref *k,
                               kiln_cache_entry *out, kiln_origin *origin, kiln_error *err)
{
    if (!s || !k || !out || !origin)
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "resolve: NULL argument");
    memset(out, 0, sizeof *out);
    const char *name = k->name && *k->name ? k->name : "kernel";
    if (!kiln_nvrtc_arch_valid(k->arch))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "kernel %s: bad arch '%s' (expected sm_<number>[a|f], e.g. sm_90a)",
                              name, k->arch ? k->arch : "(null)");
    char id[65];
    if (k->source) kiln_kernel_id_of_source(k->arch, k->desc ? k->desc : "", k->source, id);
    else if (k->id && strlen(k->id) == 64) snprintf(id, sizeof id, "%s", k->id);
    else
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "kernel %s: no source and no id",
                              name);
    if (from_bundles(s, id, out)) {
        *origin = KILN_ORIGIN_BUNDLE;
        return KILN_OK;
    }
    char key[65];
    kiln_cache_key_of_id(id, key);
    int damaged = 0;
    if (s->cache && kiln_cache_get(s->cache, key, out, &damaged)) {
        *origin = KILN_ORIGIN_CACHE;
        return KILN_OK;
    }
    if (!k->source)
        return kiln_error_set(err, KILN_ERROR_CACHE,
                              "kernel %s (%s): no bundle or cache entry holds it, and there is "
                              "no source to compile", name, k->arch);
    /* Of processes missing this key together one compiles; the others wait
     * here and then find its entry. */
    int lock = s->cache ? kiln_cache_lock(s->cache, key) : -1;
    if (lock >= 0 && kiln_cache_get(s->cache, key, out, &damaged)) {
        kiln_cache_unlock(lock);
        *origin = KILN_ORIGIN_CACHE;
        return KILN_OK;
    }
    kiln_kernel_ref named = *k;
    named.name = name;
    kiln_status st = compile(s, &named, key, damaged, out, err);
    kiln_cache_unlock(lock);
    if (st == KILN_OK) *origin = KILN_ORIGIN_NVRTC;
    return st;
}

kiln_status kiln_store_add_bundle(kiln_store *s, const char *path, const char *arch,
                                  size_t *for_arch, kiln_error *err)
{
    *for_arch = 0;
    kiln_bundle *b = NULL;
    kiln_status st = kiln_bundle_open(path, &b, err);
    if (st != KILN_OK) return st;
    const char *other = NULL;
    for (size_t i = 0; i < kiln_bundle_count(b); i++) {
        const kiln_bundle_record *r = kiln_bundle_record_at(b, i);
        if (!strcmp(r->arch, arch)) (*for_arch)++;
        else other = r->arch;
    }
    if (*for_arch == 0) {
        /* `other` points into b: the message is written before b goes. */
        kiln_error_set(err, KILN_ERROR_CACHE,
                       "bundle %s refused: it holds no kernel for %s (built for %s)", path, arch,
                       other ? other : "nothing");
        kiln_bundle_close(b);
        return KILN_ERROR_CACHE;
    }
    kiln_bundle **grown = realloc(s->bundles, (s->n_bundles + 1) * sizeof *grown);
    if (!grown) {
        kiln_bundle_close(b);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle %s: out of memory", path);
    }
    s->bundles = grown;
    s->bundles[s->n_bundles++] = b;
    return KILN_OK;
}

void kiln_store_close_bundles(kiln_store *s)
{
    for (size_t i = 0; i < s->n_bundles; i++) kiln_bundle_close(s->bundles[i]);
    free(s->bundles);
    s->bundles = NULL;
    s->n_bundles = 0;
}
