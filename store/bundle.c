/* SPDX-License-Identifier: Apache-2.0 */
/* bundle.c — writing and reading kernel bundles (see bundle.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "knobs.h"
#include "store.h"

static const char MAGIC[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', '1'};
#define HEADER_BYTES 96  /* magic 8, u32 ×2, u64 ×4, 16 + 16 version texts, 8 spare */
#define RECORD_BYTES 480 /* fixed-size index record on disk */

/* ---- little-endian helpers ---------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
/* Fixed-width text field: copied, NUL-padded; read back NUL-terminated. */
static void put_text(uint8_t *p, size_t width, const char *s)
{
    memset(p, 0, width);
    size_t n = strlen(s);
    memcpy(p, s, n < width - 1 ? n : width - 1);
}
static int get_text(const uint8_t *p, size_t width, char *out)
{
    if (memchr(p, 0, width) == NULL) return 0;
    memcpy(out, p, width);
    return 1;
}

/* Why a record's name or arch may not stand in a bundle ("" if it may).
 * They become file names (`kiln bundle extract`) and log lines, so they
 * follow kiln's rules: the spec language's kernel-name rule, and the arch
 * rule every resolve applies (sm_<number>[a|f], kiln_nvrtc_arch_valid): not
 * only the spec language's arch list, since the runtime caches kernels for
 * the device it runs on (sm_89, sm_120, ...) and `cache export` bundles
 * them.  The name itself is not echoed (it may hold escapes); the first bad
 * byte is. */
static void name_problem(const char *name, const char *arch, char *why, size_t size)
{
    *why = '\0';
    if (!kiln_kernel_name_ok(name)) {
        size_t at = kiln_kernel_name_bad_at(name);
        if (!name[0]) snprintf(why, size, "an empty name is not a kernel name");
        else snprintf(why, size, "name is not a kernel name (byte 0x%02x at %zu; names match "
                                 "[A-Za-z_][A-Za-z0-9_]*)", (unsigned char)name[at], at);
    } else if (strlen(name) >= KILN_NAME_MAX) {
        snprintf(why, size, "name is %zu characters long; at most %d", strlen(name),
                 KILN_NAME_MAX - 1);
    } else if (!kiln_nvrtc_arch_valid(arch)) {
        if (kiln_kernel_name_ok(arch)) snprintf(why, size, "unknown arch \"%s\" (expected "
                                                           "sm_<number>[a|f])", arch);
        else snprintf(why, size, "unknown arch (not an architecture name, sm_<number>[a|f])");
    }
}

/* ---- writer ------------------------------------------------------------- */

typedef struct pending {
    kiln_bundle_record rec;
    kiln_strbuf bytes;           /* encoded cache entry */
} pending;

struct kiln_bundle_writer {
    pending *items;
    size_t n, cap;
    char *table;
    size_t table_len;
};

kiln_status kiln_bundle_writer_create(kiln_bundle_writer **out, kiln_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle: out of memory");
    return KILN_OK;
}

void kiln_bundle_writer_destroy(kiln_bundle_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) kiln_strbuf_free(&w->items[i].bytes);
    free(w->items);
    free(w->table);
    free(w);
}

size_t kiln_bundle_writer_count(const kiln_bundle_writer *w) { return w->n; }

kiln_status kiln_bundle_writer_add(kiln_bundle_writer *w, const char *id, const char *name,
                                   const kiln_cache_entry *e, kiln_error *err)
{
    char why[160];
    name_problem(name, e->arch, why, sizeof why);
    if (why[0])
        return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "bundle: kernel%s%.100s not "
                              "added: %s", kiln_kernel_name_ok(name) ? " " : "",
                              kiln_kernel_name_ok(name) ? name : "", why);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->items[i].rec.id, id)) return KILN_OK;
    pending *grown = kiln_grow(w->items, &w->cap, w->n, sizeof *grown, 32);
    if (!grown) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle: out of memory");
    w->items = grown;
    pending *p = &w->items[w->n];
    memset(p, 0, sizeof *p);
    kiln_strbuf_init(&p->bytes);
    /* The compile time is the one thing in an entry that differs between two
     * builds of the same kernel; a bundle must not depend on it. */
    kiln_cache_entry timeless = *e;
    timeless.stats.seconds = 0;
    kiln_status st = kiln_cache_entry_encode(&timeless, &p->bytes);
    if (st != KILN_OK || p->bytes.oom) {
        kiln_strbuf_free(&p->bytes);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle: cannot encode %s", name);
    }
    snprintf(p->rec.id, sizeof p->rec.id, "%s", id);
    snprintf(p->rec.key, sizeof p->rec.key, "%s", e->key);
    snprintf(p->rec.name, sizeof p->rec.name, "%s", name);
    snprintf(p->rec.arch, sizeof p->rec.arch, "%s", e->arch);
    p->rec.size = p->bytes.len;
    kiln_sha256_hex(p->bytes.data, p->bytes.len, p->rec.sha256);
    p->rec.registers = e->stats.registers;
    p->rec.spill_bytes = e->stats.spill_stores + e->stats.spill_loads;
    p->rec.smem_static = e->stats.smem_static;
    p->rec.cubin_size = e->cubin_size;
    w->n++;
    return KILN_OK;
}

kiln_status kiln_bundle_writer_set_table(kiln_bundle_writer *w, const char *text, size_t len,
                                         kiln_error *err)
{
    char *t = malloc(len + 1);
    if (!t) return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle: out of memory");
    memcpy(t, text, len);
    t[len] = '\0';
    free(w->table);
    w->table = t;
    w->table_len = len;
    return KILN_OK;
}

static int cmp_pending(const void *a, const void *b)
{
    return strcmp(((const pending *)a)->rec.id, ((const pending *)b)->rec.id);
}

static void encode_record(uint8_t *p, const kiln_bundle_record *r)
{
    memset(p, 0, RECORD_BYTES);
    put_text(p, 65, r->id);
    put_text(p + 65, 65, r->key);
    put_text(p + 130, 96, r->name);
    put_text(p + 226, 16, r->arch);
    put_text(p + 242, 65, r->sha256);
    put_u64(p + 312, r->offset);
    put_u64(p + 320, r->size);
    put_u32(p + 328, (uint32_t)r->registers);
    put_u32(p + 332, (uint32_t)r->spill_bytes);
    put_u32(p + 336, (uint32_t)r->smem_static);
    put_u64(p + 340, r->cubin_size);
}

static int decode_record(const uint8_t *p, kiln_bundle_record *r)
{
    memset(r, 0, sizeof *r);
    if (!get_text(p, 65, r->id) || !get_text(p + 65, 65, r->key) ||
        !get_text(p + 130, 96, r->name) || !get_text(p + 226, 16, r->arch) ||
        !get_text(p + 242, 65, r->sha256))
        return 0;
    r->offset = get_u64(p + 312);
    r->size = get_u64(p + 320);
    r->registers = (int)get_u32(p + 328);
    r->spill_bytes = (int)get_u32(p + 332);
    r->smem_static = (int)get_u32(p + 336);
    r->cubin_size = get_u64(p + 340);
    return 1;
}

static void pad16(kiln_strbuf *sb)
{
    static const char zeros[16] = {0};
    size_t rem = sb->len % 16;
    if (rem) kiln_strbuf_append(sb, zeros, 16 - rem);
}

kiln_status kiln_bundle_writer_write(kiln_bundle_writer *w, const char *path, kiln_error *err)
{
    if (w->n) qsort(w->items, w->n, sizeof *w->items, cmp_pending);
    kiln_strbuf out;
    kiln_strbuf_init(&out);
    uint8_t header[HEADER_BYTES];
    memset(header, 0, sizeof header);
    kiln_strbuf_append(&out, (const char *)header, sizeof header);
    for (size_t i = 0; i < w->n; i++) {
        w->items[i].rec.offset = out.len;
        kiln_strbuf_append(&out, w->items[i].bytes.data, w->items[i].bytes.len);
        pad16(&out);
    }
    uint64_t index_off = out.len;
    for (size_t i = 0; i < w->n; i++) {
        uint8_t rec[RECORD_BYTES];
        encode_record(rec, &w->items[i].rec);
        kiln_strbuf_append(&out, (const char *)rec, sizeof rec);
    }
    uint64_t index_bytes = out.len - index_off;
    uint64_t table_off = out.len;
    if (w->table) kiln_strbuf_append(&out, w->table, w->table_len);
    uint64_t table_bytes = out.len - table_off;
    if (out.oom) {
        kiln_strbuf_free(&out);
        return kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    uint8_t *h = (uint8_t *)out.data;
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, KILN_BUNDLE_FORMAT);
    put_u32(h + 12, (uint32_t)w->n);
    put_u64(h + 16, index_off);
    put_u64(h + 24, index_bytes);
    put_u64(h + 32, table_off);
    put_u64(h + 40, table_bytes);
    put_text(h + 48, 16, kiln_version());
    put_text(h + 64, 16, kiln_nvrtc_version());
    uint8_t sum[32];
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, out.data, out.len);
    kiln_sha256_final(&s, sum);
    kiln_strbuf_append(&out, (const char *)sum, sizeof sum);
    kiln_status st = out.oom ? kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory", path)
                             : kiln_file_write_atomic(path, out.data, out.len, err);
    kiln_strbuf_free(&out);
    return st;
}

/* ---- reader ------------------------------------------------------------- */

struct kiln_bundle {
    char *path;
    const uint8_t *map;
    size_t size;
    kiln_bundle_record *records;
    size_t n;
    const char *table;
    size_t table_len;
};

static kiln_status refuse(kiln_error *err, const char *path, const char *why)
{
    return kiln_error_set(err, KILN_ERROR_CACHE, "bundle %s refused: %s", path, why);
}

kiln_status kiln_bundle_open(const char *path, kiln_bundle **out, kiln_error *err)
{
    *out = NULL;
    /* O_NONBLOCK: a FIFO given as a bundle is refused below instead of
     * blocking this open forever (it changes nothing for a regular file). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return kiln_error_set(err, KILN_ERROR_IO, "bundle %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(err, path, "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size < HEADER_BYTES + 32) {
        close(fd);
        return refuse(err, path, "truncated (smaller than a header)");
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return kiln_error_set(err, KILN_ERROR_IO, "bundle %s: mmap: %s", path,
                                                 strerror(errno));
    const uint8_t *m = map;
    kiln_status rc = KILN_OK;
    kiln_bundle *b = NULL;
    char why[256] = "";
    if (memcmp(m, MAGIC, 8) != 0) {
        snprintf(why, sizeof why, "not a kiln bundle (bad magic)");
    } else if (get_u32(m + 8) != KILN_BUNDLE_FORMAT) {
        snprintf(why, sizeof why, "format version %u, this kiln reads version %d",
                 get_u32(m + 8), KILN_BUNDLE_FORMAT);
    } else {
        uint8_t sum[32];
        kiln_sha256 s;
        kiln_sha256_init(&s);
        kiln_sha256_update(&s, m, size - 32);
        kiln_sha256_final(&s, sum);
        if (memcmp(sum, m + size - 32, 32) != 0)
            snprintf(why, sizeof why, "checksum mismatch (damaged or truncated)");
    }
    uint32_t n = 0;
    uint64_t index_off = 0, index_bytes = 0, table_off = 0, table_bytes = 0;
    if (!why[0]) {
        n = get_u32(m + 12);
        index_off = get_u64(m + 16);
        index_bytes = get_u64(m + 24);
        table_off = get_u64(m + 32);
        table_bytes = get_u64(m + 40);
        uint64_t body = size - 32;
        if (index_bytes != (uint64_t)n * RECORD_BYTES || index_off > body ||
            index_bytes > body - index_off || table_off > body || table_bytes > body - table_off)
            snprintf(why, sizeof why, "index out of bounds");
    }
    if (!why[0]) {
        b = calloc(1, sizeof *b);
        if (b) b->records = calloc(n ? n : 1, sizeof *b->records);
        if (b) b->path = strdup(path);
        if (!b || !b->records || !b->path) {
            rc = kiln_error_set(err, KILN_ERROR_OUT_OF_MEMORY, "bundle %s: out of memory", path);
        } else {
            for (uint32_t i = 0; i < n && !why[0]; i++) {
                kiln_bundle_record *r = &b->records[i];
                if (!decode_record(m + index_off + (uint64_t)i * RECORD_BYTES, r) ||
                    r->offset < HEADER_BYTES || r->offset > index_off ||
                    r->size > index_off - r->offset) {
                    snprintf(why, sizeof why, "index record %u is damaged", i);
                } else {
                    char bad[160];
                    name_problem(r->name, r->arch, bad, sizeof bad);
                    if (!kiln_cache_key_ok(r->id) || !kiln_cache_key_ok(r->key) ||
                        !kiln_cache_key_ok(r->sha256))
                        snprintf(why, sizeof why, "index record %u: id, key or checksum is not "
                                                  "64 hex digits", i);
                    else if (bad[0])
                        snprintf(why, sizeof why, "index record %u (id %.16s): %s", i, r->id, bad);
                }
            }
        }
    }
    if (why[0]) rc = refuse(err, path, why);
    if (rc != KILN_OK) {
        if (b) {
            free(b->records);
            free(b->path);
            free(b);
        }
        munmap(map, size);
        return rc;
    }
    b->map = m;
    b->size = size;
    b->n = n;
    b->table = table_bytes ? (const char *)m + table_off : NULL;
    b->table_len = table_bytes;
    *out = b;
    return KILN_OK;
}

void kiln_bundle_close(kiln_bundle *b)
{
    if (!b) return;
    munmap((void *)b->map, b->size);
    free(b->records);
    free(b->path);
    free(b);
}

const char *kiln_bundle_path(const kiln_bundle *b) { return b->path; }
size_t kiln_bundle_count(const kiln_bundle *b) { return b->n; }

const kiln_bundle_record *kiln_bundle_record_at(const kiln_bundle *b, size_t i)
{
    return i < b->n ? &b->records[i] : NULL;
}

const char *kiln_bundle_table(const kiln_bundle *b, size_t *len)
{
    if (len) *len = b->table_len;
    return b->table;
}

long kiln_bundle_find(const kiln_bundle *b, const char *id)
{
    size_t lo = 0, hi = b->n; /* records are sorted by id */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(b->records[mid].id, id);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

kiln_status kiln_bundle_load(const kiln_bundle *b, size_t i, kiln_cache_entry *out,
                             kiln_error *err)
{
    memset(out, 0, sizeof *out);
    if (i >= b->n) return kiln_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "bundle %s: no entry %zu",
                                         b->path, i);
    const kiln_bundle_record *r = &b->records[i];
    char sum[65];
    kiln_sha256_hex(b->map + r->offset, r->size, sum);
    if (strcmp(sum, r->sha256) != 0)
        return kiln_error_set(err, KILN_ERROR_CACHE, "bundle %s: entry %s (%s) is damaged",
                              b->path, r->name, r->arch);
    kiln_status st = kiln_cache_entry_decode(b->map + r->offset, r->size, out, err);
    if (st != KILN_OK) {
        kiln_error_prefix(err, "bundle %s: entry %s", b->path, r->name);
        return KILN_ERROR_CACHE;
    }
    if (strcmp(out->key, r->key) != 0 || strcmp(out->arch, r->arch) != 0) {
        kiln_cache_entry_free(out);
        return kiln_error_set(err, KILN_ERROR_CACHE, "bundle %s: entry %s does not match its index",
                              b->path, r->name);
    }
    return KILN_OK;
}

kiln_status kiln_bundle_verify(const kiln_bundle *b, kiln_error *err)
{
    for (size_t i = 0; i < b->n; i++) {
        kiln_cache_entry e;
        kiln_status st = kiln_bundle_load(b, i, &e, err);
        if (st != KILN_OK) return st;
        kiln_cache_entry_free(&e);
    }
    return KILN_OK;
}
