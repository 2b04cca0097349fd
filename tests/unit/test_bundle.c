/* SPDX-License-Identifier: Apache-2.0 */
/* test_bundle.c — bundles: round trip, determinism, and refusal of
 * truncated, bit-flipped, foreign and wrong-version files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "bundle.h"
#include "store.h"

/* A synthetic entry: random-looking cubin bytes (never all zeros). */
static void make_entry(kiln_cache_entry *e, int seed, const char *arch)
{
    memset(e, 0, sizeof *e);
    char desc[128];
    snprintf(desc, sizeof desc, "name=k%d op=fprop", seed);
    e->desc = strdup(desc);
    snprintf(e->arch, sizeof e->arch, "%s", arch);
    kiln_sha256_hex(desc, strlen(desc), e->key);
    kiln_sha256_hex(&seed, sizeof seed, e->source_sha256);
    e->cubin_size = 1000 + (size_t)seed * 37;
    e->cubin = malloc(e->cubin_size);
    uint32_t x = 2463534242u + (uint32_t)seed;
    for (size_t i = 0; i < e->cubin_size; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        ((uint8_t *)e->cubin)[i] = (uint8_t)x;
    }
    e->stats.registers = 40 + seed;
}

static void write_bundle(const char *path, int count, int reverse, const char *table)
{
    kiln_bundle_writer *w;
    assert_int_equal(kiln_bundle_writer_create(&w, NULL), KILN_OK);
    for (int k = 0; k < count; k++) {
        int i = reverse ? count - 1 - k : k;
        kiln_cache_entry e;
        make_entry(&e, i, "sm_90a");
        char id[65];
        kiln_kernel_id(e.arch, e.desc, e.source_sha256, id);
        char name[32];
        snprintf(name, sizeof name, "k%d", i);
        assert_int_equal(kiln_bundle_writer_add(w, id, name, &e, NULL), KILN_OK);
        /* Adding the same kernel twice keeps one. */
        assert_int_equal(kiln_bundle_writer_add(w, id, name, &e, NULL), KILN_OK);
        kiln_cache_entry_free(&e);
    }
    if (table) assert_int_equal(kiln_bundle_writer_set_table(w, table, strlen(table), NULL), KILN_OK);
    assert_int_equal(kiln_bundle_writer_count(w), (size_t)count);
    assert_int_equal(kiln_bundle_writer_write(w, path, NULL), KILN_OK);
    kiln_bundle_writer_destroy(w);
}

static void test_round_trip(void **state)
{
    const char *dir = *state;
    char path[4096];
    snprintf(path, sizeof path, "%s/a.kbundle", dir);
    write_bundle(path, 5, 0, "table v1\n");
    kiln_bundle *b;
    kiln_error err;
    assert_int_equal(kiln_bundle_open(path, &b, &err), KILN_OK);
    assert_int_equal(kiln_bundle_count(b), 5);
    size_t tl;
    const char *t = kiln_bundle_table(b, &tl);
    assert_int_equal(tl, strlen("table v1\n"));
    assert_memory_equal(t, "table v1\n", tl);
    for (int i = 0; i < 5; i++) {
        kiln_cache_entry want, got;
        make_entry(&want, i, "sm_90a");
        char id[65];
        kiln_kernel_id(want.arch, want.desc, want.source_sha256, id);
        long at = kiln_bundle_find(b, id);
        assert_true(at >= 0);
        assert_int_equal(kiln_bundle_load(b, (size_t)at, &got, &err), KILN_OK);
        assert_int_equal(got.cubin_size, want.cubin_size);
        assert_memory_equal(got.cubin, want.cubin, want.cubin_size);
        assert_string_equal(got.desc, want.desc);
        assert_string_equal(got.key, want.key);
        assert_int_equal(kiln_bundle_record_at(b, (size_t)at)->registers, 40 + i);
        kiln_cache_entry_free(&want);
        kiln_cache_entry_free(&got);
    }
    assert_int_equal(kiln_bundle_find(b, "0000"), -1);
    assert_int_equal(kiln_bundle_verify(b, &err), KILN_OK);
    kiln_bundle_close(b);
}

static void assert_same_bytes(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    assert_int_equal(kiln_file_read(a, &x, &nx, NULL), KILN_OK);
    assert_int_equal(kiln_file_read(b, &y, &ny, NULL), KILN_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx);
    free(x);
    free(y);
}

static void test_deterministic(void **state)
{
    const char *dir = *state;
    char a[4096], bpath[4096];
    snprintf(a, sizeof a, "%s/a.kbundle", dir);
    snprintf(bpath, sizeof bpath, "%s/b.kbundle", dir);
    write_bundle(a, 7, 0, NULL);
    write_bundle(bpath, 7, 1, NULL); /* added in the other order */
    assert_same_bytes(a, bpath);
}

/* Writes a damaged copy of src to dst: truncated to `len` bytes (0: keep),
 * and the byte at `flip` (-1: none) inverted. */
static void damage(const char *src, const char *dst, size_t len, long flip, const char *patch4,
                   size_t patch_at)
{
    char *d;
    size_t n;
    assert_int_equal(kiln_file_read(src, &d, &n, NULL), KILN_OK);
    if (len) n = len;
    if (flip >= 0) d[flip] ^= 0x5a;
    if (patch4) memcpy(d + patch_at, patch4, 4);
    assert_int_equal(kiln_file_write_atomic(dst, d, n, NULL), KILN_OK);
    free(d);
}

static void expect_refused(const char *path, const char *why)
{
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    assert_int_not_equal(kiln_bundle_open(path, &b, &err), KILN_OK);
    assert_null(b);
    assert_non_null(strstr(err.msg, path));
    if (!strstr(err.msg, why)) fail_msg("'%s' does not say '%s'", err.msg, why);
}

static void test_damaged_refused(void **state)
{
    const char *dir = *state;
    char good[4096], bad[4096];
    snprintf(good, sizeof good, "%s/good.kbundle", dir);
    snprintf(bad, sizeof bad, "%s/bad.kbundle", dir);
    write_bundle(good, 3, 0, "t\n");
    char *d;
    size_t n;
    assert_int_equal(kiln_file_read(good, &d, &n, NULL), KILN_OK);
    free(d);
    damage(good, bad, n / 2, -1, NULL, 0);
    expect_refused(bad, "checksum");
    damage(good, bad, 50, -1, NULL, 0);
    expect_refused(bad, "truncated");
    damage(good, bad, 0, (long)(n / 3), NULL, 0); /* a bit flip inside an entry */
    expect_refused(bad, "checksum");
    damage(good, bad, 0, 0, NULL, 0);
    expect_refused(bad, "bad magic");
    const char v9[4] = {9, 0, 0, 0};
    damage(good, bad, 0, -1, v9, 8);
    expect_refused(bad, "format version 9");
    snprintf(bad, sizeof bad, "%s/missing.kbundle", dir);
    kiln_bundle *b = NULL;
    kiln_error err;
    assert_int_equal(kiln_bundle_open(bad, &b, &err), KILN_ERROR_IO);
    assert_non_null(strstr(err.msg, "missing.kbundle"));
}

static void test_id_ignores_compiler_versions(void **state)
{
    (void)state;
    /* The id depends on what the kernel is, and on nothing else. */
    char a[65], b[65], c[65], d[65];
    kiln_kernel_id("sm_90a", "name=k op=fprop", "abcd", a);
    kiln_kernel_id("sm_90a", "name=k op=fprop", "abcd", b);
    kiln_kernel_id("sm_80", "name=k op=fprop", "abcd", c);
    kiln_kernel_id("sm_90a", "name=k op=fprop", "abce", d);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_string_not_equal(a, d);
}

static const char k_src[] =
    "extern \"C\" __global__ void rep(float *x) { x[threadIdx.x] *= 2.0f; }\n";

static const kiln_kernel_ref k_rep = {.name = "rep", .arch = "sm_90a", .desc = "name=rep",
                                      .source = k_src};

/* Resolves k_rep through s, which must compile it. */
static void compile_rep(const kiln_store *s, kiln_cache_entry *e)
{
    kiln_origin o;
    kiln_error err;
    if (kiln_store_resolve(s, &k_rep, e, &o, &err) != KILN_OK) fail_msg("%s", err.msg);
    assert_int_equal(o, KILN_ORIGIN_NVRTC);
}

/* Compiles k_src through an empty cache in dir/cache<n> and packs it. */
static void pack_fresh(const char *dir, int n, char *path, size_t size)
{
    char cdir[4096];
    snprintf(cdir, sizeof cdir, "%s/cache%d", dir, n);
    kiln_cache *c;
    assert_int_equal(kiln_cache_open(cdir, &c, NULL), KILN_OK);
    kiln_store s = {.cache = c};
    kiln_cache_entry e;
    compile_rep(&s, &e);
    assert_true(e.stats.seconds > 0); /* the cache keeps the compile time... */
    char id[65];
    kiln_kernel_id(e.arch, e.desc, e.source_sha256, id);
    kiln_bundle_writer *w;
    assert_int_equal(kiln_bundle_writer_create(&w, NULL), KILN_OK);
    assert_int_equal(kiln_bundle_writer_add(w, id, "rep", &e, NULL), KILN_OK);
    snprintf(path, size, "%s/b%d.kbundle", dir, n);
    assert_int_equal(kiln_bundle_writer_write(w, path, NULL), KILN_OK);
    kiln_bundle_writer_destroy(w);
    kiln_cache_entry_free(&e);
    kiln_cache_close(c);
}

/* Two packs of the same kernel from two empty caches are byte-identical
 * (no compile time inside bundled entries). */
static void test_reproducible_from_empty_caches(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("bundle-rep");
    char a[4096], b[4096];
    pack_fresh(dir, 1, a, sizeof a);
    pack_fresh(dir, 2, b, sizeof b);
    assert_same_bytes(a, b);
    /* ... and the bundle holds none. */
    kiln_bundle *bd;
    kiln_cache_entry e;
    assert_int_equal(kiln_bundle_open(a, &bd, NULL), KILN_OK);
    assert_int_equal(kiln_bundle_load(bd, 0, &e, NULL), KILN_OK);
    assert_true(e.stats.seconds == 0);
    kiln_cache_entry_free(&e);
    kiln_bundle_close(bd);
    kiln_test_rmtree(dir);
    free(dir);
}

static void count_warning(void *user, const char *message)
{
    (void)message;
    (*(int *)user)++;
}

/* The one chain: a bundle first, then the cache, then NVRTC; one id for
 * bundle and cache; with no source only bundles and the cache. */
static void test_resolve_chain(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("bundle-chain");
    char cdir[4096], bpath[4096];
    snprintf(cdir, sizeof cdir, "%s/cache", dir);
    kiln_cache *c;
    assert_int_equal(kiln_cache_open(cdir, &c, NULL), KILN_OK);
    int warnings = 0;
    kiln_store s = {.cache = c, .warn = count_warning, .warn_user = &warnings};
    kiln_cache_entry e;
    compile_rep(&s, &e);
    kiln_origin o;
    kiln_error err;
    char id[65], key[65];
    kiln_kernel_id_of_source("sm_90a", "name=rep", k_src, id);
    kiln_cache_key_of_id(id, key);
    assert_string_equal(e.key, key); /* the cache files it under the id's key */

    /* By id alone (no source): the cache serves it. */
    kiln_kernel_ref by_id = {.name = "rep", .arch = "sm_90a", .id = id};
    kiln_cache_entry e2;
    assert_int_equal(kiln_store_resolve(&s, &by_id, &e2, &o, &err), KILN_OK);
    assert_int_equal(o, KILN_ORIGIN_CACHE);
    kiln_cache_entry_free(&e2);

    /* A bundle holding it comes before the cache. */
    kiln_bundle_writer *w;
    assert_int_equal(kiln_bundle_writer_create(&w, NULL), KILN_OK);
    assert_int_equal(kiln_bundle_writer_add(w, id, "rep", &e, NULL), KILN_OK);
    snprintf(bpath, sizeof bpath, "%s/b.kbundle", dir);
    assert_int_equal(kiln_bundle_writer_write(w, bpath, NULL), KILN_OK);
    kiln_bundle_writer_destroy(w);
    size_t for_arch = 0;
    assert_int_equal(kiln_store_add_bundle(&s, bpath, "sm_80", &for_arch, &err), KILN_ERROR_CACHE);
    assert_non_null(strstr(err.msg, "no kernel for sm_80"));
    assert_int_equal(kiln_store_add_bundle(&s, bpath, "sm_90a", &for_arch, &err), KILN_OK);
    assert_int_equal(for_arch, 1);
    assert_int_equal(kiln_store_resolve(&s, &k_rep, &e2, &o, &err), KILN_OK);
    assert_int_equal(o, KILN_ORIGIN_BUNDLE);
    assert_int_equal(e2.cubin_size, e.cubin_size);
    kiln_cache_entry_free(&e2);

    /* Neither holds another kernel and there is no source: a clear miss. */
    kiln_store_close_bundles(&s);
    char other[65];
    kiln_kernel_id("sm_90a", "name=other", id, other);
    by_id.id = other;
    assert_int_equal(kiln_store_resolve(&s, &by_id, &e2, &o, &err), KILN_ERROR_CACHE);
    assert_non_null(strstr(err.msg, "no source to compile"));
    assert_int_equal(warnings, 0);
    kiln_cache_entry_free(&e);
    kiln_cache_close(c);
    kiln_test_rmtree(dir);
    free(dir);
}

/* Writes a copy of src with index record `rec`'s text field at `field`
 * (130: name, 226: arch; offsets in the on-disk record) set to `text`, and
 * the whole-file checksum made valid again: only the field is hostile. */
static void rename_record(const char *src, const char *dst, int rec, size_t field, size_t width,
                          const char *text)
{
    char *d;
    size_t n;
    assert_int_equal(kiln_file_read(src, &d, &n, NULL), KILN_OK);
    uint64_t index_off = 0;
    for (int i = 0; i < 8; i++) index_off |= (uint64_t)(uint8_t)d[16 + i] << (8 * i);
    char *f = d + index_off + (size_t)rec * 480 + field;
    memset(f, 0, width);
    memcpy(f, text, strlen(text));
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, d, n - 32);
    kiln_sha256_final(&s, (uint8_t *)d + n - 32);
    assert_int_equal(kiln_file_write_atomic(dst, d, n, NULL), KILN_OK);
    free(d);
}

/* Issue 13, finding 1: a record's name and arch become file names
 * (`bundle extract`) and log lines; a bundle whose checksums are valid but
 * whose record is named ../../x, or carries an unknown arch, is refused on
 * open, naming the record. */
static void test_hostile_record_names_refused(void **state)
{
    const char *dir = *state;
    char good[4096], bad[4096];
    snprintf(good, sizeof good, "%s/good.kbundle", dir);
    snprintf(bad, sizeof bad, "%s/bad.kbundle", dir);
    write_bundle(good, 3, 0, NULL);
    rename_record(good, bad, 1, 130, 96, "k1"); /* the same name again: still good */
    kiln_bundle *b = NULL;
    assert_int_equal(kiln_bundle_open(bad, &b, NULL), KILN_OK);
    kiln_bundle_close(b);
    rename_record(good, bad, 1, 130, 96, "../../x");
    expect_refused(bad, "index record 1");
    expect_refused(bad, "not a kernel name");
    rename_record(good, bad, 2, 130, 96, "k\n\033[2J");
    expect_refused(bad, "index record 2");
    rename_record(good, bad, 0, 130, 96, "");
    expect_refused(bad, "index record 0");
    rename_record(good, bad, 0, 226, 16, "../sm_90a");
    expect_refused(bad, "unknown arch");
    rename_record(good, bad, 0, 226, 16, "sm_9x");
    expect_refused(bad, "index record 0");
    rename_record(good, bad, 0, 226, 16, "sm_89"); /* a device's arch: still good */
    assert_int_equal(kiln_bundle_open(bad, &b, NULL), KILN_OK);
    kiln_bundle_close(b);

    /* The writer refuses such names too. */
    kiln_bundle_writer *w;
    kiln_error err;
    assert_int_equal(kiln_bundle_writer_create(&w, NULL), KILN_OK);
    kiln_cache_entry e;
    make_entry(&e, 1, "sm_90a");
    char id[65];
    kiln_kernel_id(e.arch, e.desc, e.source_sha256, id);
    assert_int_equal(kiln_bundle_writer_add(w, id, "../../x", &e, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "not a kernel name"));
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(kiln_bundle_writer_add(w, id, longname, &e, &err), KILN_ERROR_INVALID_ARGUMENT);
    snprintf(e.arch, sizeof e.arch, "sm42");
    assert_int_equal(kiln_bundle_writer_add(w, id, "k1", &e, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "sm42"));
    assert_int_equal(kiln_bundle_writer_count(w), 0);
    kiln_cache_entry_free(&e);
    kiln_bundle_writer_destroy(w);
}

/* A FIFO given as a bundle (a path, or $KILN_BUNDLE_PATH) is refused at
 * once: opening it used to block forever waiting for a writer.  The alarm
 * turns a hang into a failure. */
static void test_fifo_refused(void **state)
{
    const char *dir = *state;
    char path[4096];
    snprintf(path, sizeof path, "%s/fifo.kbundle", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    kiln_bundle *b = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    alarm(10);
    kiln_status st = kiln_bundle_open(path, &b, &err);
    alarm(0);
    assert_int_not_equal(st, KILN_OK);
    assert_null(b);
    assert_non_null(strstr(err.msg, "not a regular file"));
}

KILN_TEST_MAIN(
    kiln_test_with_dir(test_round_trip),
    kiln_test_with_dir(test_deterministic),
    kiln_test_with_dir(test_damaged_refused),
    cmocka_unit_test(test_id_ignores_compiler_versions),
    cmocka_unit_test(test_reproducible_from_empty_caches),
    cmocka_unit_test(test_resolve_chain),
    kiln_test_with_dir(test_hostile_record_names_refused),
    kiln_test_with_dir(test_fifo_refused))
