/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.h — the on-disk, content-addressed cubin cache.
 *
 * Key: SHA-256 of (cache format version, kiln version, NVRTC version and
 * options, kernel id): the kernel's one identity (store.h) plus the compiler
 * that built the cubin.  No path goes into the key.  An entry file holds a header, the key, the canonical
 * description, compile stats, the cubin and a checksum; all are verified on
 * read and a damaged entry is reported as a miss (and rebuilt by the caller).
 * Writes are temp file + fsync + rename, so many processes can share one
 * directory.  A cache that cannot be written only slows compiles down.
 */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "common.h"
#include "nvrtc.h"

/* 2: keys are made from the kernel id (the entry layout is that of 1). */
#define KILN_CACHE_FORMAT 2

typedef struct kiln_cache kiln_cache;

typedef struct kiln_cache_entry {
    char key[65];
    char arch[16];
    char source_sha256[65];      /* SHA-256 of the generated source (hex); bundles
                                    index kernels by it (bundle.h) */
    char *desc;                  /* canonical description text (malloc'd) */
    void *cubin;                 /* malloc'd */
    size_t cubin_size;
    kiln_compile_stats stats;
} kiln_cache_entry;

/* dir NULL: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
 * The directory is created if missing; if it cannot be, the cache still
 * opens (reads miss, writes warn). */
kiln_status kiln_cache_open(const char *dir, kiln_cache **out, kiln_error *err);
void kiln_cache_close(kiln_cache *c);
const char *kiln_cache_path(const kiln_cache *c);
/* Where the default directory is, without opening it (buf of KILN_PATH_MAX). */
void kiln_cache_default_dir(char *buf, size_t size);

/* 1 if s is 64 lowercase hex digits: the form of keys, ids and SHA-256 texts. */
int kiln_cache_key_ok(const char *s);
/* The key of a kernel id (store.h) for this build's compiler. */
void kiln_cache_key_of_id(const char *kernel_id, char out[65]);
/* The key of (arch, desc, source): kiln_cache_key_of_id of its kernel id
 * (the source's provenance line is left out, kiln_source_body). */
void kiln_cache_key(const char *arch, const char *desc, const char *source, char out[65]);

/* Temp files of writers ("<entry>.tmp.*"): *count of them and *stale, those
 * older than KILN_CACHE_TEMP_AGE seconds, which only a killed writer leaves
 * (a write takes well under a second).  kiln_cache_open removes the stale
 * ones; `kiln cache verify` reports them. */
#define KILN_CACHE_TEMP_AGE 300
kiln_status kiln_cache_count_temps(kiln_cache *c, size_t *count, size_t *stale, kiln_error *err);

/* The size cap: after a put takes the entries' total size over max_bytes,
 * the least recently used entries (a hit counts as a use) are removed until
 * it is back under, never the entry just written.  0: no cap (the default;
 * kiln_cache_open reads $KILN_CACHE_MAX_BYTES, refusing a value that is not
 * a byte count).  Set it before the handle is shared between threads. */
void kiln_cache_set_max_bytes(kiln_cache *c, uint64_t max_bytes);

/* The per-key lock: held around "miss, compile, put" so that of processes
 * (or threads) missing one key together one compiles and the others wait,
 * then read.  A file "<key>.lock" beside the entry, flock'd (clear removes it).  Returns a
 * handle for kiln_cache_unlock, or -1 when no lock could be taken (an
 * unwritable cache): the caller then goes on unlocked. */
int kiln_cache_lock(kiln_cache *c, const char *key);
void kiln_cache_unlock(int lock);

/* 1: hit (entry filled), 0: miss (absent or damaged; *damaged set when the
 * entry existed but failed verification). */
int kiln_cache_get(kiln_cache *c, const char *key, kiln_cache_entry *out, int *damaged);
/* Stores an entry.  Returns KILN_OK, or KILN_ERROR_CACHE with the reason in
 * err when the directory is not writable; callers treat that as a warning. */
kiln_status kiln_cache_put(kiln_cache *c, const kiln_cache_entry *e, kiln_error *err);
void kiln_cache_entry_free(kiln_cache_entry *e);

/* Listing and maintenance for `kiln cache ls|verify|clear`. */
typedef void (*kiln_cache_visit_fn)(void *user, const char *key, const kiln_cache_entry *e,
                                    int ok, const char *problem);
kiln_status kiln_cache_foreach(kiln_cache *c, kiln_cache_visit_fn fn, void *user,
                               kiln_error *err);
kiln_status kiln_cache_clear(kiln_cache *c, size_t *removed, kiln_error *err);

/* Serialise / parse one entry (also used by bundles). */
kiln_status kiln_cache_entry_encode(const kiln_cache_entry *e, kiln_strbuf *out);
kiln_status kiln_cache_entry_decode(const void *data, size_t len, kiln_cache_entry *out,
                                    kiln_error *err);

/* Every input of a key, for tests and tools; kiln_cache_key_of_id fills it
 * with this build's values (KILN_CACHE_FORMAT, kiln_version(),
 * kiln_nvrtc_version(), kiln_nvrtc_options()). */
typedef struct kiln_cache_key_fields {
    int format;
    const char *kiln_version;
    const char *nvrtc_version;
    const char *nvrtc_options;
    const char *kernel_id;
} kiln_cache_key_fields;
void kiln_cache_key_parts(const kiln_cache_key_fields *f, char out[65]);

/* The file an entry of that key lives in (whether or not it exists).
 * Returns 0 if key is not 64 lowercase hex digits. */
int kiln_cache_entry_path(const kiln_cache *c, const char *key, char *buf, size_t size);

#endif /* KILN_CACHE_H */
