/* SPDX-License-Identifier: Apache-2.0 */
/* test_cache.c — the on-disk cubin cache: keys, entries, damage, sharing. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "common.h"
#include "cache.h"
#include "jit.h"
#include "store.h"

/* ---- helpers ------------------------------------------------------------ */

static void make_entry(kiln_cache_entry *e, const char *source, const char *desc)
{
    memset(e, 0, sizeof *e);
    kiln_cache_key("sm_90a", desc, source, e->key);
    snprintf(e->arch, sizeof e->arch, "sm_90a");
    kiln_sha256_hex(source, strlen(source), e->source_sha256);
    e->desc = strdup(desc);
    e->cubin_size = 300;
    e->cubin = malloc(e->cubin_size);
    for (size_t i = 0; i < e->cubin_size; i++) ((unsigned char *)e->cubin)[i] = (unsigned char)(i * 7 + 1);
    memcpy(e->cubin, "\x7f" "ELF", 4);
    e->stats.seconds = 0.25;
    e->stats.registers = 168;
    e->stats.spill_stores = 4;
    e->stats.spill_loads = 8;
    e->stats.smem_static = 1024;
    e->stats.stack_frame = 16;
    e->stats.wgmma_serialized = 7514;
}

static void assert_entries_equal(const kiln_cache_entry *a, const kiln_cache_entry *b)
{
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->arch, b->arch);
    assert_string_equal(a->source_sha256, b->source_sha256);
    assert_string_equal(a->desc, b->desc);
    assert_int_equal(a->cubin_size, b->cubin_size);
    assert_memory_equal(a->cubin, b->cubin, a->cubin_size);
    assert_true(a->stats.seconds == b->stats.seconds);
    assert_int_equal(a->stats.registers, b->stats.registers);
    assert_int_equal(a->stats.spill_stores, b->stats.spill_stores);
    assert_int_equal(a->stats.spill_loads, b->stats.spill_loads);
    assert_int_equal(a->stats.smem_static, b->stats.smem_static);
    assert_int_equal(a->stats.stack_frame, b->stats.stack_frame);
    assert_int_equal(a->stats.wgmma_serialized, b->stats.wgmma_serialized);
}

static kiln_cache *open_cache(const char *dir)
{
    kiln_cache *c = NULL;
    kiln_error err;
    assert_int_equal(kiln_cache_open(dir, &c, &err), KILN_OK);
    assert_non_null(c);
    return c;
}

static void read_file(const char *path, char **data, size_t *len)
{
    assert_int_equal(kiln_file_read(path, data, len, NULL), KILN_OK);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Rewrites the checksum at the end so that only the intended change shows. */
static void reseal(char *data, size_t len)
{
    kiln_sha256 s;
    kiln_sha256_init(&s);
    kiln_sha256_update(&s, data, len - 32);
    kiln_sha256_final(&s, (uint8_t *)data + len - 32);
}

static int is_damaged_miss(kiln_cache *c, const char *key)
{
    kiln_cache_entry got;
    int damaged = -1;
    int hit = kiln_cache_get(c, key, &got, &damaged);
    if (hit) kiln_cache_entry_free(&got);
    return !hit && damaged == 1;
}

/* Counts files under <dir>/v<format>/<xx>/ whose names contain sub. */
static int count_files(const char *dir, const char *sub)
{
    char root[4200];
    snprintf(root, sizeof root, "%s/v%d", dir, KILN_CACHE_FORMAT);
    DIR *d = opendir(root);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char s[4400];
        snprintf(s, sizeof s, "%s/%s", root, de->d_name);
        DIR *sd = opendir(s);
        if (!sd) continue;
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL)
            if (fe->d_name[0] != '.' && strstr(fe->d_name, sub)) n++;
        closedir(sd);
    }
    closedir(d);
    return n;
}

static const char *k_src_fmt =
    "extern \"C\" __global__ void %s(float *x, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) x[i] = x[i] * %d.0f + 1.0f;\n"
    "}\n";

static char *kernel_source(const char *name, int v)
{
    char *s = malloc(1024);
    snprintf(s, 1024, k_src_fmt, name, v);
    return s;
}

/* ---- tests -------------------------------------------------------------- */

static void test_miss_then_hit(void **state)
{
    const char *dir = *state;
    kiln_cache *c = open_cache(dir);
    assert_string_equal(kiln_cache_path(c), dir);
    kiln_cache_entry e, got;
    make_entry(&e, "source one", "name=a op=fprop");
    int damaged = -1;
    assert_int_equal(kiln_cache_get(c, e.key, &got, &damaged), 0);
    assert_int_equal(damaged, 0);
    kiln_error err;
    assert_int_equal(kiln_cache_put(c, &e, &err), KILN_OK);
    assert_int_equal(kiln_cache_get(c, e.key, &got, &damaged), 1);
    assert_int_equal(damaged, 0);
    assert_entries_equal(&e, &got);
    kiln_cache_entry_free(&got);
    /* The layout the docs promise. */
    char path[4400];
    snprintf(path, sizeof path, "%s/v%d/%.2s/%s.kbin", dir, KILN_CACHE_FORMAT, e.key, e.key);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    char p2[4400];
    assert_int_equal(kiln_cache_entry_path(c, e.key, p2, sizeof p2), 1);
    assert_string_equal(p2, path);
    /* A bad key is a plain miss. */
    assert_int_equal(kiln_cache_get(c, "../../etc/passwd", &got, &damaged), 0);
    assert_int_equal(damaged, 0);
    kiln_cache_entry_free(&e);
    kiln_cache_close(c);
}

static void test_key_stability_and_sensitivity(void **state)
{
    (void)state;
    char k1[65], k2[65];
    kiln_cache_key("sm_90a", "desc", "src", k1);
    kiln_cache_key("sm_90a", "desc", "src", k2);
    assert_string_equal(k1, k2);
    assert_int_equal(strlen(k1), 64);
    for (int i = 0; i < 64; i++) assert_non_null(strchr("0123456789abcdef", k1[i]));

    char id[65];
    kiln_kernel_id_of_source("sm_90a", "desc", "src", id);
    kiln_cache_key_fields base = {
        .format = KILN_CACHE_FORMAT,
        .kiln_version = kiln_version(),
        .nvrtc_version = kiln_nvrtc_version(),
        .nvrtc_options = kiln_nvrtc_options(),
        .kernel_id = id,
    };
    char kb[65];
    kiln_cache_key_parts(&base, kb);
    assert_string_equal(kb, k1); /* kiln_cache_key uses exactly these inputs */
    kiln_cache_key_of_id(id, kb);
    assert_string_equal(kb, k1); /* one id, one key */

    char id2[65];
    kiln_kernel_id_of_source("sm_90a", "desc2", "src", id2);
    kiln_cache_key_fields v[7];
    for (int i = 0; i < 7; i++) v[i] = base;
    v[0].format = KILN_CACHE_FORMAT + 1;
    v[1].kiln_version = "999.0.0";
    v[2].nvrtc_version = "99.9";
    v[3].nvrtc_options = "-O0";
    v[4].kernel_id = id2;
    /* Fields cannot run together: "13.0"+"-x" vs "13.0-"+"x". */
    v[5].nvrtc_version = "13.0";
    v[5].nvrtc_options = "-x";
    v[6].nvrtc_version = "13.0-";
    v[6].nvrtc_options = "x";
    char keys[7][65];
    for (int i = 0; i < 7; i++) {
        kiln_cache_key_parts(&v[i], keys[i]);
        assert_string_not_equal(keys[i], kb);
        for (int j = 0; j < i; j++) assert_string_not_equal(keys[i], keys[j]);
    }
    /* The kernel id is sensitive to each of its inputs, and its fields
     * cannot run together either. */
    char ids[5][65];
    kiln_kernel_id("sm_90a", "desc", "0000", ids[0]);
    kiln_kernel_id("sm_80", "desc", "0000", ids[1]);
    kiln_kernel_id("sm_90a", "desc2", "0000", ids[2]);
    kiln_kernel_id("sm_90a", "desc", "0001", ids[3]);
    kiln_kernel_id("sm_90a", "desc0", "000", ids[4]);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < i; j++) assert_string_not_equal(ids[i], ids[j]);
    /* The public form is sensitive to its own arguments too. */
    kiln_cache_key("sm_80", "desc", "src", k2);
    assert_string_not_equal(k1, k2);
    kiln_cache_key("sm_90a", "desc ", "src", k2);
    assert_string_not_equal(k1, k2);
    kiln_cache_key("sm_90a", "desc", "src\n", k2);
    assert_string_not_equal(k1, k2);
}

static void test_no_paths_in_key(void **state)
{
    char d1[4200], d2[4200];
    kiln_test_subdir(*state, "a", d1, sizeof d1);
    kiln_test_subdir(*state, "b", d2, sizeof d2);
    kiln_cache *c1 = open_cache(d1), *c2 = open_cache(d2);
    char *src = kernel_source("same", 3);
    kiln_cache_entry e1, e2;
    kiln_jit_origin o1, o2;
    kiln_error warn, err;
    assert_int_equal(kiln_jit_get(c1, "same", "sm_90a", "d", src, &e1, &o1, &warn, &err), KILN_OK);
    assert_int_equal(kiln_jit_get(c2, "same", "sm_90a", "d", src, &e2, &o2, &warn, &err), KILN_OK);
    assert_int_equal(o1, KILN_JIT_COMPILED);
    assert_int_equal(o2, KILN_JIT_COMPILED); /* not shared: a separate cache */
    assert_string_equal(e1.key, e2.key);
    char p1[4400], p2[4400];
    kiln_cache_entry_path(c1, e1.key, p1, sizeof p1);
    kiln_cache_entry_path(c2, e2.key, p2, sizeof p2);
    assert_string_equal(p1 + strlen(d1), p2 + strlen(d2));
    /* The key does not depend on the working directory either. */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(d1), 0);
    char k[65];
    kiln_cache_key("sm_90a", "d", src, k);
    assert_int_equal(chdir(cwd), 0);
    assert_string_equal(k, e1.key);
    kiln_cache_entry_free(&e1);
    kiln_cache_entry_free(&e2);
    free(src);
    kiln_cache_close(c1);
    kiln_cache_close(c2);
}

static void test_encode_decode(void **state)
{
    (void)state;
    kiln_cache_entry e, got;
    make_entry(&e, "s", "name=x");
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    assert_int_equal(kiln_cache_entry_encode(&e, &sb), KILN_OK);
    assert_int_equal(sb.len, 208 + strlen(e.desc) + e.cubin_size + 32);
    assert_memory_equal(sb.data, "KILNCUB1", 8);
    kiln_error err;
    assert_int_equal(kiln_cache_entry_decode(sb.data, sb.len, &got, &err), KILN_OK);
    assert_entries_equal(&e, &got);
    kiln_cache_entry_free(&got);
    /* Every truncation and every single flipped bit is refused. */
    for (size_t n = 0; n < sb.len; n++) {
        assert_int_equal(kiln_cache_entry_decode(sb.data, n, &got, &err), KILN_ERROR_CACHE);
        assert_null(got.cubin);
    }
    for (size_t i = 0; i < sb.len; i++) {
        sb.data[i] ^= 0x10;
        assert_int_equal(kiln_cache_entry_decode(sb.data, sb.len, &got, &err), KILN_ERROR_CACHE);
        sb.data[i] ^= 0x10;
    }
    /* A too-long file (junk appended) too. */
    kiln_strbuf_append(&sb, "x", 1);
    assert_int_equal(kiln_cache_entry_decode(sb.data, sb.len, &got, &err), KILN_ERROR_CACHE);
    assert_non_null(strstr(err.msg, "size"));
    kiln_strbuf_free(&sb);
    /* A bad key cannot be encoded. */
    e.key[3] = 'Z';
    kiln_strbuf_init(&sb);
    assert_int_equal(kiln_cache_entry_encode(&e, &sb), KILN_ERROR_INVALID_ARGUMENT);
    kiln_strbuf_free(&sb);
    kiln_cache_entry_free(&e);
}

typedef struct seen_problems {
    int n, bad;
    char problem[512];
} seen_problems;

/* foreach visitor for the damage test: counts and keeps the last problem. */
static void visit(void *user, const char *key, const kiln_cache_entry *ent, int ok, const char *problem)
{
    seen_problems *s = user;
    s->n++;
    if (!ok) {
        s->bad++;
        snprintf(s->problem, sizeof s->problem, "%s", problem ? problem : "");
    }
    (void)key;
    (void)ent;
}

enum damage { TRUNCATE, FLIP_CUBIN, BAD_MAGIC, WRONG_KEY, WRONG_VERSION, EMPTY, N_DAMAGE };

static void test_damaged_entries(void **state)
{
    const char *dir = *state;
    kiln_cache *c = open_cache(dir);
    kiln_cache_entry e, other;
    make_entry(&e, "damage me", "name=d");
    make_entry(&other, "another source", "name=o");
    char path[4400];
    kiln_cache_entry_path(c, e.key, path, sizeof path);
    kiln_error err;
    for (int kind = 0; kind < N_DAMAGE; kind++) {
        assert_int_equal(kiln_cache_put(c, &e, &err), KILN_OK);
        assert_false(is_damaged_miss(c, e.key));
        char *data;
        size_t len;
        read_file(path, &data, &len);
        const char *expect = NULL;
        switch (kind) {
        case TRUNCATE:
            len /= 2;
            expect = "do not match";
            break;
        case FLIP_CUBIN:
            data[208 + strlen(e.desc) + 100] ^= 1;
            expect = "checksum";
            break;
        case BAD_MAGIC:
            data[0] = 'X';
            expect = "magic";
            break;
        case WRONG_KEY: {
            /* A whole, valid entry, but of another key, in this key's file. */
            kiln_strbuf sb;
            kiln_strbuf_init(&sb);
            assert_int_equal(kiln_cache_entry_encode(&other, &sb), KILN_OK);
            free(data);
            len = sb.len;
            data = kiln_strbuf_take(&sb);
            expect = "holds key";
            break;
        }
        case WRONG_VERSION:
            data[8] = KILN_CACHE_FORMAT + 1; /* a future format, properly sealed */
            reseal(data, len);
            expect = "version";
            break;
        case EMPTY:
            len = 0;
            expect = "truncated";
            break;
        }
        write_file(path, data, len);
        free(data);
        assert_true(is_damaged_miss(c, e.key));
        /* verify reports the same problem. */
        seen_problems seen = {0, 0, ""};
        assert_int_equal(kiln_cache_foreach(c, visit, &seen, &err), KILN_OK);
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.bad, 1);
        if (!strstr(seen.problem, expect))
            fail_msg("damage %d: problem '%s' lacks '%s'", kind, seen.problem, expect);
        /* A later put repairs it. */
        assert_int_equal(kiln_cache_put(c, &e, &err), KILN_OK);
        kiln_cache_entry got;
        int damaged = -1;
        assert_int_equal(kiln_cache_get(c, e.key, &got, &damaged), 1);
        assert_int_equal(damaged, 0);
        assert_entries_equal(&e, &got);
        kiln_cache_entry_free(&got);
    }
    kiln_cache_entry_free(&e);
    kiln_cache_entry_free(&other);
    kiln_cache_close(c);
}

typedef struct listing {
    int n, ok, bad;
    char keys[8][65];
} listing;

static void collect(void *user, const char *key, const kiln_cache_entry *e, int ok,
                    const char *problem)
{
    listing *l = user;
    if (l->n < 8) snprintf(l->keys[l->n], 65, "%s", key);
    l->n++;
    if (ok) {
        l->ok++;
        assert_non_null(e);
        assert_string_equal(e->key, key);
        assert_null(problem);
    } else {
        l->bad++;
        assert_null(e);
        assert_non_null(problem);
    }
}

static void test_foreach_and_clear(void **state)
{
    const char *dir = *state;
    kiln_cache *c = open_cache(dir);
    kiln_error err;
    listing l;
    memset(&l, 0, sizeof l);
    assert_int_equal(kiln_cache_foreach(c, collect, &l, &err), KILN_OK);
    assert_int_equal(l.n, 0);

    kiln_cache_entry e[3];
    make_entry(&e[0], "one", "d");
    make_entry(&e[1], "two", "d");
    make_entry(&e[2], "three", "d");
    for (int i = 0; i < 3; i++) assert_int_equal(kiln_cache_put(c, &e[i], &err), KILN_OK);
    /* A leftover temp file of a crashed writer, and a stranger. */
    char p[4400], tmp[4500], stranger[4400];
    kiln_cache_entry_path(c, e[0].key, p, sizeof p);
    snprintf(tmp, sizeof tmp, "%s.tmp.12345.678.0x1", p);
    kiln_test_write_file(tmp, "half an entry");
    snprintf(stranger, sizeof stranger, "%s/README", dir);
    kiln_test_write_file(stranger, "not ours");

    memset(&l, 0, sizeof l);
    assert_int_equal(kiln_cache_foreach(c, collect, &l, &err), KILN_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.ok, 3);
    assert_true(strcmp(l.keys[0], l.keys[1]) < 0 && strcmp(l.keys[1], l.keys[2]) < 0);
    for (int i = 0; i < 3; i++) {
        int found = 0;
        for (int j = 0; j < 3; j++) found += strcmp(l.keys[j], e[i].key) == 0;
        assert_int_equal(found, 1);
    }

    /* Damage one: verify shows 2 good, 1 bad. */
    kiln_cache_entry_path(c, e[1].key, p, sizeof p);
    kiln_test_write_file(p, "garbage");
    memset(&l, 0, sizeof l);
    assert_int_equal(kiln_cache_foreach(c, collect, &l, &err), KILN_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.ok, 2);
    assert_int_equal(l.bad, 1);

    size_t removed = 0;
    assert_int_equal(kiln_cache_clear(c, &removed, &err), KILN_OK);
    assert_int_equal(removed, 3);
    assert_int_equal(count_files(dir, ".kbin"), 0); /* temp file gone too */
    struct stat st;
    assert_int_equal(stat(stranger, &st), 0);        /* not ours: kept */
    memset(&l, 0, sizeof l);
    assert_int_equal(kiln_cache_foreach(c, collect, &l, &err), KILN_OK);
    assert_int_equal(l.n, 0);
    /* Still usable after clear. */
    assert_int_equal(kiln_cache_put(c, &e[2], &err), KILN_OK);
    assert_false(is_damaged_miss(c, e[2].key));
    assert_int_equal(kiln_cache_clear(c, &removed, &err), KILN_OK);
    assert_int_equal(removed, 1);

    for (int i = 0; i < 3; i++) kiln_cache_entry_free(&e[i]);
    kiln_cache_close(c);
}

static void check_unwritable(const char *cache_dir, const char *why)
{
    kiln_cache *c = open_cache(cache_dir); /* opens anyway */
    kiln_cache_entry e;
    make_entry(&e, "unwritable", "d");
    kiln_error err;
    kiln_error_clear(&err);
    int damaged = -1;
    kiln_cache_entry got;
    assert_int_equal(kiln_cache_get(c, e.key, &got, &damaged), 0);
    assert_int_equal(kiln_cache_put(c, &e, &err), KILN_ERROR_CACHE);
    assert_int_equal(err.status, KILN_ERROR_CACHE);
    assert_non_null(strstr(err.msg, "not writable"));
    if (!strstr(err.msg, why)) fail_msg("'%s' lacks '%s'", err.msg, why);
    kiln_cache_entry_free(&e);

    /* jit_get still hands out the compiled cubin, with a warning. */
    char *src = kernel_source("unwritable_k", 5);
    kiln_error warn;
    kiln_jit_origin origin = KILN_JIT_CACHE;
    kiln_error_clear(&err);
    assert_int_equal(kiln_jit_get(c, "unwritable_k", "sm_90a", "d", src, &got, &origin, &warn,
                                  &err),
                     KILN_OK);
    assert_int_equal(origin, KILN_JIT_COMPILED);
    assert_non_null(got.cubin);
    assert_memory_equal(got.cubin, "\x7f" "ELF", 4);
    assert_int_equal(warn.status, KILN_ERROR_CACHE);
    kiln_test_has(warn.msg, "unwritable_k", "not writable");
    kiln_cache_entry_free(&got);
    free(src);
    kiln_cache_close(c);
}

static void test_unwritable(void **state)
{
    const char *dir = *state;
    char path[4400];
    /* Root ignores permission bits, so make writes fail by other means that
     * hold for every user: the cache's parent is a regular file ... */
    snprintf(path, sizeof path, "%s/file", dir);
    kiln_test_write_file(path, "x");
    snprintf(path, sizeof path, "%s/file/cache", dir);
    check_unwritable(path, "Not a directory");
    /* ... or the cache exists but its version folder is a regular file. */
    snprintf(path, sizeof path, "%s/c2", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/c2/v%d", dir, KILN_CACHE_FORMAT);
    kiln_test_write_file(path, "x");
    snprintf(path, sizeof path, "%s/c2", dir);
    check_unwritable(path, "Not a directory");
    /* ... and, where permissions bind (not root), a read-only folder. */
    if (geteuid() != 0) {
        snprintf(path, sizeof path, "%s/ro", dir);
        assert_int_equal(mkdir(path, 0555), 0);
        check_unwritable(path, "Permission denied");
        chmod(path, 0755);
    }
}

static void test_default_dir(void **state)
{
    (void)state;
    char *saved[3];
    const char *names[3] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
    }
    char buf[4096];
    setenv("KILN_CACHE_DIR", "/k/dir", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    kiln_cache_default_dir(buf, sizeof buf);
    assert_string_equal(buf, "/k/dir");
    setenv("KILN_CACHE_DIR", "", 1);
    kiln_cache_default_dir(buf, sizeof buf);
    assert_string_equal(buf, "/xdg/kiln");
    unsetenv("KILN_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    kiln_cache_default_dir(buf, sizeof buf);
    assert_string_equal(buf, "/home/u/.cache/kiln");
    /* open(NULL) uses it, and creates it. */
    const char *dir = *state;
    char want[4200];
    snprintf(want, sizeof want, "%s/deep/er", dir);
    setenv("KILN_CACHE_DIR", want, 1);
    kiln_cache *c = open_cache(NULL);
    assert_string_equal(kiln_cache_path(c), want);
    struct stat st;
    assert_int_equal(stat(want, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    kiln_cache_close(c);
    for (int i = 0; i < 3; i++) {
        if (saved[i]) setenv(names[i], saved[i], 1);
        else unsetenv(names[i]);
        free(saved[i]);
    }
}

/* The children of a multi-process test: `n` forked processes wait on one
 * pipe so that they start together, each opens the cache at dir and runs
 * body(c, p, arg) (no cmocka asserts in a child: it answers through its exit
 * code); codes[p] gets child p's exit status. Shared by the tests that race
 * processes on one cache. */
typedef int (*child_body)(kiln_cache *c, int p, void *arg);

static void run_children(const char *dir, int n, child_body body, void *arg, int *codes)
{
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pids[8];
    assert_true(n <= 8);
    for (int p = 0; p < n; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) < 0) _exit(10);
            kiln_cache *c = NULL;
            if (kiln_cache_open(dir, &c, NULL) != KILN_OK) _exit(11);
            int code = body(c, p, arg);
            kiln_cache_close(c);
            _exit(code);
        }
    }
    close(go[0]);
    close(go[1]); /* release all children at once */
    for (int p = 0; p < n; p++) {
        int st = 0;
        assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
        assert_true(WIFEXITED(st));
        codes[p] = WEXITSTATUS(st);
    }
}

enum { N_CONC_KERN = 3 };
struct conc_arg {
    char *src[N_CONC_KERN];
    char names[N_CONC_KERN][32];
};

/* A child of test_concurrent_processes: builds the three kernels. */
static int conc_child(kiln_cache *c, int p, void *arg)
{
    struct conc_arg *a = arg;
    for (int i = 0; i < N_CONC_KERN; i++) {
        int k = (i + p) % N_CONC_KERN; /* different orders */
        kiln_cache_entry e;
        kiln_error warn, err;
        kiln_error_clear(&warn);
        if (kiln_jit_get(c, a->names[k], "sm_90a", "conc", a->src[k], &e, NULL, &warn, &err) !=
            KILN_OK)
            return 12;
        if (warn.status != KILN_OK) return 13;
        if (e.cubin_size < 4 || memcmp(e.cubin, "\x7f" "ELF", 4) != 0) return 14;
        kiln_cache_entry_free(&e);
    }
    return 0;
}

/* Four processes build the same three kernels into one fresh cache at once. */
static void test_concurrent_processes(void **state)
{
    const char *dir = *state;
    enum { N_PROC = 4, N_KERN = N_CONC_KERN };
    struct conc_arg arg;
    char **src = arg.src;
    char (*names)[32] = arg.names;
    for (int k = 0; k < N_KERN; k++) {
        snprintf(names[k], sizeof names[k], "conc_%d", k);
        src[k] = kernel_source(names[k], k + 2);
    }
    int codes[N_PROC];
    run_children(dir, N_PROC, conc_child, &arg, codes);
    for (int p = 0; p < N_PROC; p++)
        if (codes[p] != 0) fail_msg("child %d exited with %d", p, codes[p]);
    kiln_cache *c = open_cache(dir);
    listing l;
    memset(&l, 0, sizeof l);
    kiln_error err;
    assert_int_equal(kiln_cache_foreach(c, collect, &l, &err), KILN_OK);
    assert_int_equal(l.n, N_KERN);
    assert_int_equal(l.ok, N_KERN);
    assert_int_equal(count_files(dir, ".kbin"), N_KERN);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    /* And each is now a hit in this process. */
    for (int k = 0; k < N_KERN; k++) {
        kiln_cache_entry e;
        kiln_jit_origin o = KILN_JIT_COMPILED;
        kiln_error warn;
        assert_int_equal(kiln_jit_get(c, names[k], "sm_90a", "conc", src[k], &e, &o, &warn, &err),
                         KILN_OK);
        assert_int_equal(o, KILN_JIT_CACHE);
        kiln_cache_entry_free(&e);
        free(src[k]);
    }
    kiln_cache_close(c);
}

/* ---- issue 13: temp files, per-key lock, size cap, messages ------------- */

/* Sets a file's modification time `age` seconds into the past. */
static void age_file(const char *path, int age)
{
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* Finding 7: temp files of killed writers, older than a few minutes, are
 * counted (cache verify) and swept when a cache is opened; a fresh one (a
 * writer at work) is left alone. */
static void test_stale_temps_swept(void **state)
{
    const char *dir = *state;
    kiln_cache *c = open_cache(dir);
    kiln_cache_entry e;
    make_entry(&e, "temps", "name=temps");
    assert_int_equal(kiln_cache_put(c, &e, NULL), KILN_OK);
    char path[4400], old[4500], fresh[4500];
    assert_int_equal(kiln_cache_entry_path(c, e.key, path, sizeof path), 1);
    snprintf(old, sizeof old, "%s.tmp.123.456.789", path);
    snprintf(fresh, sizeof fresh, "%s.tmp.124.456.789", path);
    write_file(old, "killed", 6);
    write_file(fresh, "at work", 7);
    age_file(old, 3600);
    size_t count = 0, stale = 0;
    kiln_error err;
    assert_int_equal(kiln_cache_count_temps(c, &count, &stale, &err), KILN_OK);
    assert_int_equal(count, 2);
    assert_int_equal(stale, 1);
    kiln_cache_close(c);
    c = open_cache(dir); /* sweeps */
    struct stat st;
    assert_int_not_equal(stat(old, &st), 0);
    assert_int_equal(stat(fresh, &st), 0);
    assert_int_equal(kiln_cache_count_temps(c, &count, &stale, &err), KILN_OK);
    assert_int_equal(count, 1);
    assert_int_equal(stale, 0);
    kiln_cache_entry got;
    assert_int_equal(kiln_cache_get(c, e.key, &got, NULL), 1); /* the entry is untouched */
    kiln_cache_entry_free(&got);
    kiln_cache_entry_free(&e);
    kiln_cache_close(c);
}

/* A child of test_one_compile_per_key: gets "locked_k" (source arg) and
 * answers 20 where it compiled it, 21 where it read the cache. */
static int locked_child(kiln_cache *c, int p, void *arg)
{
    (void)p;
    kiln_cache_entry e;
    kiln_error warn, err;
    kiln_jit_origin o = KILN_JIT_CACHE;
    if (kiln_jit_get(c, "locked_k", "sm_90a", "lock", arg, &e, &o, &warn, &err) != KILN_OK)
        return 12;
    if (e.cubin_size < 4 || memcmp(e.cubin, "\x7f" "ELF", 4) != 0) return 14;
    kiln_cache_entry_free(&e);
    return o == KILN_JIT_COMPILED ? 20 : o == KILN_JIT_CACHE ? 21 : 15;
}

/* Finding 7: processes that miss one key together compile it once; the
 * others wait on the key's lock and then read the entry. */
static void test_one_compile_per_key(void **state)
{
    const char *dir = *state;
    enum { N_PROC = 4 };
    char *src = kernel_source("locked_k", 7);
    int codes[N_PROC];
    run_children(dir, N_PROC, locked_child, src, codes);
    int compiled = 0;
    for (int p = 0; p < N_PROC; p++) {
        int code = codes[p];
        if (code != 20 && code != 21) fail_msg("child %d exited with %d", p, code);
        compiled += code == 20;
    }
    assert_int_equal(compiled, 1);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    /* The key's lock file stays beside the entry; clear removes both. */
    assert_int_equal(count_files(dir, ".lock"), 1);
    kiln_cache *c = open_cache(dir);
    size_t removed = 0;
    assert_int_equal(kiln_cache_clear(c, &removed, NULL), KILN_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(count_files(dir, ".lock"), 0);
    kiln_cache_close(c);
    free(src);
}

/* Finding 7: with KILN_CACHE_MAX_BYTES, a put that takes the cache over the
 * cap removes the least recently used entries (a hit counts as a use), never
 * the entry just written. */
static void test_size_cap_evicts_lru(void **state)
{
    const char *dir = *state;
    kiln_cache_entry e[4];
    char path[4][4400];
    char desc[4][32];
    for (int i = 0; i < 4; i++) {
        snprintf(desc[i], sizeof desc[i], "name=cap%d", i);
        make_entry(&e[i], desc[i], desc[i]);
    }
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    assert_int_equal(kiln_cache_entry_encode(&e[0], &sb), KILN_OK);
    char cap[32];
    snprintf(cap, sizeof cap, "%zu", sb.len * 3 + sb.len / 2); /* room for three */
    kiln_strbuf_free(&sb);
    setenv("KILN_CACHE_MAX_BYTES", "lots", 1);
    kiln_cache *c = NULL;
    kiln_error err;
    assert_int_equal(kiln_cache_open(dir, &c, &err), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "KILN_CACHE_MAX_BYTES"));
    setenv("KILN_CACHE_MAX_BYTES", cap, 1);
    c = open_cache(dir);
    unsetenv("KILN_CACHE_MAX_BYTES");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kiln_cache_put(c, &e[i], &err), KILN_OK);
        assert_int_equal(kiln_cache_entry_path(c, e[i].key, path[i], sizeof path[i]), 1);
        age_file(path[i], 300 - 100 * i); /* 0 oldest, 2 newest */
    }
    kiln_cache_entry got;
    assert_int_equal(kiln_cache_get(c, e[0].key, &got, NULL), 1); /* 0 is used: now 1 is oldest */
    kiln_cache_entry_free(&got);
    assert_int_equal(kiln_cache_put(c, &e[3], &err), KILN_OK);
    int want[4] = {1, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        int hit = kiln_cache_get(c, e[i].key, &got, NULL);
        if (hit != want[i]) fail_msg("entry %d: hit %d, expected %d", i, hit, want[i]);
        if (hit) kiln_cache_entry_free(&got);
    }
    /* A cap smaller than one entry keeps the entry just written. */
    kiln_cache_set_max_bytes(c, 1);
    assert_int_equal(kiln_cache_put(c, &e[1], &err), KILN_OK);
    assert_int_equal(kiln_cache_get(c, e[1].key, &got, NULL), 1);
    kiln_cache_entry_free(&got);
    assert_int_equal(count_files(dir, ".kbin"), 1);
    for (int i = 0; i < 4; i++) kiln_cache_entry_free(&e[i]);
    kiln_cache_close(c);
}

static void keep_message(void *user, const char *message)
{
    snprintf(user, KILN_ERROR_MAX, "%s", message);
}

/* Finding 9: a damaged entry that was rebuilt is reported as cached again. */
static void test_rebuilt_entry_reported_cached(void **state)
{
    const char *dir = *state;
    kiln_cache *c = open_cache(dir);
    char msg[KILN_ERROR_MAX] = "";
    kiln_store s = {.cache = c, .warn = keep_message, .warn_user = msg};
    char *src = kernel_source("rebuilt_k", 3);
    kiln_kernel_ref k = {.name = "rebuilt_k", .arch = "sm_90a", .desc = "rb", .source = src};
    kiln_cache_entry e;
    kiln_origin o;
    kiln_error err;
    assert_int_equal(kiln_store_resolve(&s, &k, &e, &o, &err), KILN_OK);
    char path[4400];
    assert_int_equal(kiln_cache_entry_path(c, e.key, path, sizeof path), 1);
    kiln_cache_entry_free(&e);
    char *data;
    size_t len;
    read_file(path, &data, &len);
    data[len / 2] ^= 0x10;
    write_file(path, data, len);
    free(data);
    assert_int_equal(kiln_store_resolve(&s, &k, &e, &o, &err), KILN_OK);
    assert_int_equal(o, KILN_ORIGIN_NVRTC);
    if (!strstr(msg, "cached again") || strstr(msg, "not cached"))
        fail_msg("message: %s", msg);
    kiln_cache_entry got; /* and it is */
    assert_int_equal(kiln_cache_get(c, e.key, &got, NULL), 1);
    kiln_cache_entry_free(&got);
    kiln_cache_entry_free(&e);
    free(src);
    kiln_cache_close(c);
}

KILN_TEST_MAIN(
    kiln_test_with_dir(test_miss_then_hit),
    cmocka_unit_test(test_key_stability_and_sensitivity),
    kiln_test_with_dir(test_no_paths_in_key),
    cmocka_unit_test(test_encode_decode),
    kiln_test_with_dir(test_damaged_entries),
    kiln_test_with_dir(test_foreach_and_clear),
    kiln_test_with_dir(test_unwritable),
    kiln_test_with_dir(test_default_dir),
    kiln_test_with_dir(test_concurrent_processes),
    kiln_test_with_dir(test_stale_temps_swept),
    kiln_test_with_dir(test_one_compile_per_key),
    kiln_test_with_dir(test_size_cap_evicts_lru),
    kiln_test_with_dir(test_rebuilt_entry_reported_cached))
