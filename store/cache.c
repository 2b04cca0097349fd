/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c — the on-disk, content-addressed cubin cache.
 *
 * Layout: <dir>/v<KILN_CACHE_FORMAT>/<first 2 hex digits of key>/<key>.kbin.  Writers use
 * kiln_file_write_atomic (a temp file "<entry>.tmp.<pid>.<ns>.<addr>" beside
 * the entry, fsync, rename), so readers see a whole old entry, a whole new
 * one, or none; temp files never end in ".kbin" and are ignored by
 * foreach/get (clear removes them).
 *
 * Entry format (all integers little-endian), KILN_CACHE_FORMAT 2 (the
 * layout of format 1; only the keys changed):
 *
 *   0    8   magic "KILNCUB1"
 *   8    4   u32 format version
 *   12   4   u32 header size (208)
 *   16   64  key, 64 lowercase hex digits
 *   80   16  arch, NUL-padded
 *   96   8   u64 desc length
 *   104  8   u64 cubin length
 *   112  8   f64 compile seconds (IEEE-754 bits)
 *   120  20  i32 registers, spill stores, spill loads, smem static, stack frame
 *   140  4   i32 ptxas's wgmma-serialization remark number (0: none; entries
 *            written before it have 0 here, the reserved zeros)
 *   144  64  SHA-256 of the generated source, hex (bundles index by it)
 *   208      desc bytes, then cubin bytes
 *   end-32   SHA-256 of every byte before it
 *
 * The file is exactly header + desc + cubin + 32 bytes long.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "store.h"

#ifndef KILN_PATH_MAX
#define KILN_PATH_MAX 1024
#endif

#define ENTRY_MAGIC "KILNCUB1"
#define ENTRY_HEADER 208u
#define ENTRY_SUM 32u
#define ENTRY_EXT ".kbin"
#define LOCK_EXT ".lock"

/* Immutable once shared: one handle may be used by many threads at once
 * (each get/put works on its own files). */
struct kiln_cache {
    char dir[KILN_PATH_MAX];
    uint64_t max_bytes;          /* 0: no cap */
};

static kiln_status sweep_temps(kiln_cache *c, int sweep, size_t *count, size_t *stale,
                               kiln_error *err);

/* ---- little-endian helpers ----------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int is_hex_key(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return 1;
}

/* ---- key ---------------------------------------------------------------- */

int kiln_cache_key_ok(const char *s) { return strlen(s) == 64 && is_hex_key(s, 64); }

static void key_field(kiln_sha256 *s, const char *v)
{
    unsigned char len[8];
    size_t n = v ? strlen(v) : 0;
    put_le(len, n, 8);
    kiln_sha256_update(s, len, sizeof len);
    if (n) kiln_sha256_update(s, v, n);
}

void kiln_cache_key_parts(const kiln_cache_key_fields *f, char out[65])
{
    /* Every field is length-prefixed, so no two field lists hash alike by
     * running together ("ab","c" vs "a","bc"). */
    kiln_sha256 s;
    kiln_sha256_init(&s);
    key_field(&s, "kiln-cubin-cache");
    char num[32];
    snprintf(num, sizeof num, "%d", f->format);
    key_field(&s, num);
    key_field(&s, f->kiln_version);
    key_field(&s, f->nvrtc_version);
    key_field(&s, f->nvrtc_options);
    key_field(&s, f->kernel_id);
    uint8_t d[32];
    kiln_sha256_final(&s, d);
    kiln_hex(d, 32, out);
    out[64] = '\0';
}

void kiln_cache_key_of_id(const char *kernel_id, char out[65])
{
    kiln_cache_key_fields f = {
        .format = KILN_CACHE_FORMAT,
        .kiln_version = kiln_version(),
        .nvrtc_version = kiln_nvrtc_version(),
        .nvrtc_options = kiln_nvrtc_options(),
        .kernel_id = kernel_id,
    };
    kiln_cache_key_parts(&f, out);
}

void kiln_cache_key(const char *arch, const char *desc, const char *source, char out[65])
{
    char id[65];
    kiln_kernel_id_of_source(arch, desc ? desc : "", source, id);
    kiln_cache_key_of_id(id, out);
}

/* ---- open / close ------------------------------------------------------- */

void kiln_cache_default_dir(char *buf, size_t size)
{
    const char *v = getenv("KILN_CACHE_DIR");
    if (v && *v) {
        snprintf(buf, size, "%s", v);
        return;
    }
    v = getenv("XDG_CACHE_HOME");
    if (v && *v) {
        snprintf(buf, size, "%s/kiln", v);
        return;
    }
    v = getenv("HOME");
    snprintf(buf, size, "%s/.cache/kiln", v && *v ? v : ".");
}

kiln_status kiln_cache_open(const char *dir, kiln_cache **out, kiln_error *err)
{
    if (!out) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache open: out is NULL");
    *out = NULL;
    kiln_cache *c = calloc(1, sizeof *c);
    if (!c) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "cache open: out of memory");
    if (dir && *dir) {
        if (strlen(dir) >= sizeof c->dir - 80) {
            free(c);
            return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache directory too long: %s",
                                  dir);
        }
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    } else {
        kiln_cache_default_dir(c->dir, sizeof c->dir - 80);
    }
    /* Strip trailing slashes (but keep "/"). */
    size_t n = strlen(c->dir);
    while (n > 1 && c->dir[n - 1] == '/') c->dir[--n] = '\0';
    const char *cap = getenv("KILN_CACHE_MAX_BYTES");
    if (cap && *cap) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cap, &end, 10);
        if (*cap < '0' || *cap > '9' || *end || errno) {
            free(c);
            return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "KILN_CACHE_MAX_BYTES is \"%.40s\"; expected a byte count "
                                  "(0: no cap)", cap);
        }
        c->max_bytes = v;
    }
    /* A folder that cannot be made is no error here: gets miss and each
     * put reports why it failed. */
    (void)kiln_mkdirs(c->dir, NULL);
    /* Temp files of killed writers would otherwise stay forever; a sweep
     * that fails (a read-only cache) only leaves them. */
    size_t count, stale;
    (void)sweep_temps(c, 1, &count, &stale, NULL);
    *out = c;
    return KILN_OK;
}

void kiln_cache_set_max_bytes(kiln_cache *c, uint64_t max_bytes)
{
    if (c) c->max_bytes = max_bytes;
}

void kiln_cache_close(kiln_cache *c) { free(c); }

const char *kiln_cache_path(const kiln_cache *c) { return c ? c->dir : ""; }

static int entry_path(const kiln_cache *c, const char *key, char *buf, size_t size)
{
    if (!key || strlen(key) != 64 || !is_hex_key(key, 64)) return 0;
    snprintf(buf, size, "%s/v%d/%.2s/%s" ENTRY_EXT, c->dir, KILN_CACHE_FORMAT, key, key);
    return 1;
}

int kiln_cache_entry_path(const kiln_cache *c, const char *key, char *buf, size_t size)
{
    return c ? entry_path(c, key, buf, size) : 0;
}

/* ---- encode / decode ---------------------------------------------------- */

static uint64_t f64_bits(double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return v;
}

static double bits_f64(uint64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

kiln_status kiln_cache_entry_encode(const kiln_cache_entry *e, kiln_strbuf *out)
{
    if (!e || !out || (e->cubin_size && !e->cubin)) return KILN_ERROR_INVALID_ARGUMENT;
    if (strlen(e->key) != 64 || !is_hex_key(e->key, 64) || memchr(e->arch, '\0', 16) == NULL)
        return KILN_ERROR_INVALID_ARGUMENT;
    size_t dlen = e->desc ? strlen(e->desc) : 0;
    unsigned char h[ENTRY_HEADER];
    memset(h, 0, sizeof h);
    memcpy(h, ENTRY_MAGIC, 8);
    put_le(h + 8, KILN_CACHE_FORMAT, 4);
    put_le(h + 12, ENTRY_HEADER, 4);
    memcpy(h + 16, e->key, 64);
    strncpy((char *)h + 80, e->arch, 16);
    put_le(h + 96, dlen, 8);
    put_le(h + 104, e->cubin_size, 8);
    put_le(h + 112, f64_bits(e->stats.seconds), 8);
    put_le(h + 120, (uint32_t)e->stats.registers, 4);
    put_le(h + 124, (uint32_t)e->stats.spill_stores, 4);
    put_le(h + 128, (uint32_t)e->stats.spill_loads, 4);
    put_le(h + 132, (uint32_t)e->stats.smem_static, 4);
    put_le(h + 136, (uint32_t)e->stats.stack_frame, 4);
    put_le(h + 140, (uint32_t)e->stats.wgmma_serialized, 4);
    memcpy(h + 144, e->source_sha256, strnlen(e->source_sha256, 64));
    size_t start = out->len;
    kiln_strbuf_append(out, (const char *)h, sizeof h);
    if (dlen) kiln_strbuf_append(out, e->desc, dlen);
    if (e->cubin_size) kiln_strbuf_append(out, e->cubin, e->cubin_size);
    if (out->oom) return KILN_ERROR_OUT_OF_MEMORY;
    uint8_t sum[32];
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, out->data + start, out->len - start);
    kiln_sha256_final(&s, sum);
    kiln_strbuf_append(out, (const char *)sum, sizeof sum);
    return out->oom ? KILN_ERROR_OUT_OF_MEMORY : KILN_OK;
}

kiln_status kiln_cache_entry_decode(const void *data, size_t len, kiln_cache_entry *out,
                                    kiln_error *err)
{
    memset(out, 0, sizeof *out);
    const unsigned char *b = data;
    if (!b || len < 12)
        return kiln_error_set(err, KILN_ERROR_CACHE, "truncated entry (%zu bytes)", len);
    if (memcmp(b, ENTRY_MAGIC, 8) != 0)
        return kiln_error_set(err, KILN_ERROR_CACHE, "not a kiln cache entry (bad magic)");
    uint32_t version = (uint32_t)get_le(b + 8, 4);
    if (version != KILN_CACHE_FORMAT)
        return kiln_error_set(err, KILN_ERROR_CACHE, "entry format version %u, expected %d",
                              version, KILN_CACHE_FORMAT);
    if (len < ENTRY_HEADER + ENTRY_SUM)
        return kiln_error_set(err, KILN_ERROR_CACHE, "truncated entry (%zu bytes)", len);
    if (get_le(b + 12, 4) != ENTRY_HEADER)
        return kiln_error_set(err, KILN_ERROR_CACHE, "bad header size %u",
                              (unsigned)get_le(b + 12, 4));
    uint64_t dlen = get_le(b + 96, 8), clen = get_le(b + 104, 8);
    uint64_t room = len - ENTRY_HEADER - ENTRY_SUM;
    if (dlen > room || clen > room - dlen || dlen + clen != room)
        return kiln_error_set(err, KILN_ERROR_CACHE,
                              "entry lengths (desc %llu, cubin %llu) do not match its size %zu",
                              (unsigned long long)dlen, (unsigned long long)clen, len);
    uint8_t sum[32];
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, b, len - ENTRY_SUM);
    kiln_sha256_final(&s, sum);
    if (memcmp(sum, b + len - ENTRY_SUM, ENTRY_SUM) != 0)
        return kiln_error_set(err, KILN_ERROR_CACHE, "checksum mismatch");
    if (!is_hex_key((const char *)b + 16, 64))
        return kiln_error_set(err, KILN_ERROR_CACHE, "bad key in entry");
    if (memchr(b + 80, '\0', 16) == NULL || b[80] == '\0')
        return kiln_error_set(err, KILN_ERROR_CACHE, "bad arch in entry");
    char *desc = malloc(dlen + 1);
    void *cubin = malloc(clen ? clen : 1);
    if (!desc || !cubin) {
        free(desc);
        free(cubin);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(desc, b + ENTRY_HEADER, dlen);
    desc[dlen] = '\0';
    if (memchr(desc, '\0', dlen)) {
        free(desc);
        free(cubin);
        return kiln_error_set(err, KILN_ERROR_CACHE, "bad description text in entry");
    }
    memcpy(cubin, b + ENTRY_HEADER + dlen, clen);
    memcpy(out->key, b + 16, 64);
    out->key[64] = '\0';
    memcpy(out->arch, b + 80, 16);
    out->desc = desc;
    out->cubin = cubin;
    out->cubin_size = clen;
    out->stats.seconds = bits_f64(get_le(b + 112, 8));
    out->stats.registers = (int)(int32_t)get_le(b + 120, 4);
    out->stats.spill_stores = (int)(int32_t)get_le(b + 124, 4);
    out->stats.spill_loads = (int)(int32_t)get_le(b + 128, 4);
    out->stats.smem_static = (int)(int32_t)get_le(b + 132, 4);
    out->stats.stack_frame = (int)(int32_t)get_le(b + 136, 4);
    out->stats.wgmma_serialized = (int)(int32_t)get_le(b + 140, 4);
    memcpy(out->source_sha256, b + 144, 64);
    out->source_sha256[64] = '\0';
    return KILN_OK;
}

void kiln_cache_entry_free(kiln_cache_entry *e)
{
    if (!e) return;
    free(e->desc);
    free(e->cubin);
    memset(e, 0, sizeof *e);
}

/* ---- get / put ---------------------------------------------------------- */

/* Reads and verifies one entry file against the key it must hold.
 * Returns 1 (ok), 0 (absent), -1 (damaged: problem filled). */
static int load_entry(const char *path, const char *key, kiln_cache_entry *out, char *problem,
                      size_t psize)
{
    char *data = NULL;
    size_t len = 0;
    kiln_error e;
    kiln_error_clear(&e);
    if (kiln_file_read(path, &data, &len, &e) != KILN_OK) {
        struct stat st;
        if (stat(path, &st) != 0 && errno == ENOENT) return 0;
        snprintf(problem, psize, "%s", e.msg);
        return -1;
    }
    kiln_status s = kiln_cache_entry_decode(data, len, out, &e);
    free(data);
    if (s != KILN_OK) {
        snprintf(problem, psize, "%s", e.msg);
        return -1;
    }
    if (strcmp(out->key, key) != 0) {
        snprintf(problem, psize, "entry holds key %.16s..., expected %.16s...", out->key, key);
        kiln_cache_entry_free(out);
        return -1;
    }
    return 1;
}

int kiln_cache_get(kiln_cache *c, const char *key, kiln_cache_entry *out, int *damaged)
{
    if (damaged) *damaged = 0;
    if (out) memset(out, 0, sizeof *out);
    char path[KILN_PATH_MAX + 160];
    if (!c || !out || !entry_path(c, key, path, sizeof path)) return 0;
    char problem[KILN_ERROR_MAX];
    int r = load_entry(path, key, out, problem, sizeof problem);
    if (r < 0 && damaged) *damaged = 1;
    /* A hit is a use: the size cap evicts by modification time.  A cache
     * that cannot be written is still read. */
    if (r > 0) (void)utimensat(AT_FDCWD, path, NULL, 0);
    return r > 0;
}

static void evict(kiln_cache *c, const char *keep);

int kiln_cache_lock(kiln_cache *c, const char *key)
{
    char path[KILN_PATH_MAX + 200];
    if (!c || !entry_path(c, key, path, sizeof path)) return -1;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (kiln_mkdirs(path, NULL) != KILN_OK) return -1;
    *slash = '/';
    /* "<key>.lock", not "<key>.kbin.lock": nothing but entries and their
     * temp files is named after an entry. */
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s" LOCK_EXT, key);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    /* flock locks belong to the open file description, so threads of one
     * process exclude each other as processes do. */
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

void kiln_cache_unlock(int lock)
{
    if (lock < 0) return;
    (void)flock(lock, LOCK_UN);
    close(lock);
}

kiln_status kiln_cache_put(kiln_cache *c, const kiln_cache_entry *e, kiln_error *err)
{
    if (!c || !e) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache put: NULL argument");
    char path[KILN_PATH_MAX + 160];
    if (!entry_path(c, e->key, path, sizeof path))
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache put: bad key '%.70s'",
                              e->key);
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_status st = kiln_cache_entry_encode(e, &sb);
    if (st != KILN_OK) {
        kiln_strbuf_free(&sb);
        return kiln_error_set(err, st, "cache put: cannot encode entry %.16s (%s)", e->key,
                              kiln_status_name(st));
    }
    char dir[KILN_PATH_MAX + 160];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    kiln_error e2;
    kiln_error_clear(&e2);
    /* Two tries: `kiln cache clear` in another process may remove the shard
     * folder between our mkdir and our write. */
    for (int attempt = 0; attempt < 2; attempt++) {
        st = kiln_mkdirs(dir, &e2);
        if (st == KILN_OK) st = kiln_file_write_atomic(path, sb.data, sb.len, &e2);
        if (st == KILN_OK) break;
    }
    kiln_strbuf_free(&sb);
    if (st != KILN_OK)
        return kiln_error_set(err, KILN_ERROR_CACHE, "cache %s is not writable: %s", c->dir,
                              e2.msg);
    if (c->max_bytes) evict(c, e->key);
    return KILN_OK;
}

/* ---- listing and maintenance -------------------------------------------- */



static int is_entry_name(const char *n)
{
    size_t len = strlen(n);
    return len == 64 + strlen(ENTRY_EXT) && is_hex_key(n, 64) && strcmp(n + 64, ENTRY_EXT) == 0;
}

static int is_temp_name(const char *n)
{
    return strlen(n) > 64 + strlen(ENTRY_EXT) && is_hex_key(n, 64) &&
           strncmp(n + 64, ENTRY_EXT ".tmp.", strlen(ENTRY_EXT) + 5) == 0;
}

static int is_lock_name(const char *n)
{
    return strlen(n) == 64 + strlen(LOCK_EXT) && is_hex_key(n, 64) && strcmp(n + 64, LOCK_EXT) == 0;
}

static int is_shard_name(const char *n)
{
    return strlen(n) == 2 && is_hex_key(n, 2);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists entry keys (sorted) or, with temps, entry, temp and lock file paths. */
static kiln_status list_files(kiln_cache *c, int temps, char ***out, size_t *count,
                              kiln_error *err)
{
    *out = NULL;
    *count = 0;
    char root[KILN_PATH_MAX + 16];
    snprintf(root, sizeof root, "%s/v%d", c->dir, KILN_CACHE_FORMAT);
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return KILN_OK;
        return kiln_error_set(err, KILN_ERROR_CACHE, "%s: %s", root, strerror(errno));
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    kiln_status st = KILN_OK;
    struct dirent *de;
    while (st == KILN_OK && (de = readdir(d)) != NULL) {
        if (!is_shard_name(de->d_name)) continue;
        char sub[KILN_PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
        DIR *sd = opendir(sub);
        if (!sd) continue; /* removed meanwhile, or not a folder */
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL) {
            int entry = is_entry_name(fe->d_name);
            if (!entry && !(temps && (is_temp_name(fe->d_name) || is_lock_name(fe->d_name))))
                continue;
            char **nv = kiln_grow(v, &cap, n, sizeof *v, 64);
            if (!nv) {
                st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            v = nv;
            char buf[KILN_PATH_MAX + 400];
            if (temps) snprintf(buf, sizeof buf, "%s/%s", sub, fe->d_name);
            else snprintf(buf, sizeof buf, "%.64s", fe->d_name);
            v[n] = strdup(buf);
            if (!v[n]) {
                st = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            n++;
        }
        closedir(sd);
    }
    closedir(d);
    if (st != KILN_OK) {
        for (size_t i = 0; i < n; i++) free(v[i]);
        free(v);
        return st;
    }
    if (n > 1) qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *count = n;
    return KILN_OK;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

kiln_status kiln_cache_foreach(kiln_cache *c, kiln_cache_visit_fn fn, void *user,
                               kiln_error *err)
{
    if (!c || !fn) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache foreach: NULL argument");
    char **keys;
    size_t n;
    kiln_status st = list_files(c, 0, &keys, &n, err);
    if (st != KILN_OK) return st;
    for (size_t i = 0; i < n; i++) {
        char path[KILN_PATH_MAX + 160];
        entry_path(c, keys[i], path, sizeof path);
        kiln_cache_entry e;
        memset(&e, 0, sizeof e);
        char problem[KILN_ERROR_MAX];
        int r = load_entry(path, keys[i], &e, problem, sizeof problem);
        if (r == 0) continue; /* removed meanwhile */
        if (r > 0) {
            fn(user, keys[i], &e, 1, NULL);
            kiln_cache_entry_free(&e);
        } else {
            fn(user, keys[i], NULL, 0, problem);
        }
    }
    free_list(keys, n);
    return KILN_OK;
}

/* Counts temp files, and with sweep removes the stale ones. */
static kiln_status sweep_temps(kiln_cache *c, int sweep, size_t *count, size_t *stale,
                               kiln_error *err)
{
    *count = *stale = 0;
    char **files;
    size_t n;
    kiln_status st = list_files(c, 1, &files, &n, err);
    if (st != KILN_OK) return st;
    time_t now = time(NULL);
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (!is_temp_name(strrchr(files[i], '/') + 1) || stat(files[i], &sb) != 0) continue;
        int old = now - sb.st_mtime > KILN_CACHE_TEMP_AGE;
        if (old && sweep && unlink(files[i]) == 0) continue;
        (*count)++;
        *stale += old;
    }
    free_list(files, n);
    return KILN_OK;
}

kiln_status kiln_cache_count_temps(kiln_cache *c, size_t *count, size_t *stale, kiln_error *err)
{
    size_t dummy[2];
    if (!count) count = &dummy[0];
    if (!stale) stale = &dummy[1];
    if (!c) {
        *count = *stale = 0;
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache temps: NULL cache");
    }
    return sweep_temps(c, 0, count, stale, err);
}

typedef struct aged {
    char *key;
    uint64_t size;
    struct timespec used;
} aged;

static int cmp_aged(const void *a, const void *b)
{
    const aged *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    if (x->used.tv_nsec != y->used.tv_nsec) return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Removes least recently used entries (oldest modification time: puts and
 * hits set it) until the entries total at most max_bytes, never `keep`.
 * Best effort: what cannot be listed or removed stays. */
static void evict(kiln_cache *c, const char *keep)
{
    char **keys;
    size_t n;
    if (list_files(c, 0, &keys, &n, NULL) != KILN_OK) return;
    aged *v = calloc(n ? n : 1, sizeof *v);
    uint64_t total = 0;
    size_t m = 0;
    for (size_t i = 0; v && i < n; i++) {
        char path[KILN_PATH_MAX + 160];
        struct stat sb;
        entry_path(c, keys[i], path, sizeof path);
        if (stat(path, &sb) != 0) continue;
        total += (uint64_t)sb.st_size;
        v[m++] = (aged){keys[i], (uint64_t)sb.st_size, sb.st_mtim};
    }
    if (v && total > c->max_bytes) {
        qsort(v, m, sizeof *v, cmp_aged);
        for (size_t i = 0; i < m && total > c->max_bytes; i++) {
            char path[KILN_PATH_MAX + 160];
            if (!strcmp(v[i].key, keep)) continue;
            entry_path(c, v[i].key, path, sizeof path);
            if (unlink(path) == 0 || errno == ENOENT) total -= v[i].size;
        }
    }
    free(v);
    free_list(keys, n);
}

kiln_status kiln_cache_clear(kiln_cache *c, size_t *removed, kiln_error *err)
{
    if (removed) *removed = 0;
    if (!c) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "cache clear: NULL cache");
    char **files;
    size_t n;
    kiln_status st = list_files(c, 1, &files, &n, err);
    if (st != KILN_OK) return st;
    size_t count = 0;
    for (size_t i = 0; i < n && st == KILN_OK; i++) {
        const char *base = strrchr(files[i], '/') + 1;
        if (unlink(files[i]) != 0) {
            if (errno == ENOENT) continue;
            st = kiln_error_set(err, KILN_ERROR_CACHE, "%s: %s", files[i], strerror(errno));
            break;
        }
        if (is_entry_name(base)) count++;
    }
    free_list(files, n);
    /* Remove the shard folders that are now empty (rmdir refuses others). */
    char root[KILN_PATH_MAX + 16];
    snprintf(root, sizeof root, "%s/v%d", c->dir, KILN_CACHE_FORMAT);
    DIR *d = opendir(root);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!is_shard_name(de->d_name)) continue;
            char sub[KILN_PATH_MAX + 32];
            snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
            (void)rmdir(sub);
        }
        closedir(d);
    }
    if (removed) *removed = count;
    return st;
}
