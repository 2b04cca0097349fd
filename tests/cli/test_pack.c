/* SPDX-License-Identifier: Apache-2.0 */
/* test_pack.c — `kiln pack` of every shipped spec for sm_90a (what CI
 * ships), `kiln bundle verify|ls`, determinism, refusal of damaged bundles,
 * and moving kernels between bundles and caches. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "common.h"

static char *g_dir;       /* scratch */
static char g_bundle[4096];
static char g_cache[4096];

static size_t kernels_in(const char *out)
{
    const char *p = strstr(out, "kernels");
    while (p > out && p[-1] == ' ') p--;
    while (p > out && p[-1] >= '0' && p[-1] <= '9') p--;
    return (size_t)strtoul(p, NULL, 10);
}

static int setup(void **state)
{
    (void)state;
    g_dir = kiln_test_mkdtemp("pack");
    snprintf(g_cache, sizeof g_cache, "%s/cache", g_dir);
    /* The bundle is left in the build folder: the GPU run uses it. */
    const char *build = getenv("KILN_TEST_BUILD_DIR");
    snprintf(g_bundle, sizeof g_bundle, "%s/kiln-sm_90a.kbundle", build ? build : g_dir);
    /* A kernel cache to start from (kiln_test_seed_cache): compiling every
     * shipped spec again took 3 of CI's minutes, and 9 under the
     * sanitizers (ASan's allocator under NVRTC's); the pack below then
     * reads and verifies the cached cubins instead.  Compiling stays tested:
     * by the bundle's build, by test_expand and test_tune's own sweeps
     * (under the sanitizers too), and by the deterministic pack below,
     * which starts from an empty cache. */
    if (kiln_test_seed_cache(g_cache) < 0) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kiln_test_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* Files a and b hold the same bytes (cmp); `what` names them in a miss. */
static void expect_same_bytes(const char *a, const char *b, const char *what)
{
    char cmd[9000], *out = NULL;
    snprintf(cmd, sizeof cmd, "cmp %s %s", a, b);
    if (kiln_test_run(cmd, &out) != 0) fail_msg("%s differ: %s", what, out);
    free(out);
}

static void test_pack_all_shipped_specs(void **state)
{
    (void)state;
    char *out;
    int rc = kiln_test_kiln(&out, "pack specs --arch sm_90a -o %s --cache-dir %s", g_bundle, g_cache);
    if (rc != 0) fail_msg("kiln pack failed (%d):\n%s", rc, out);
    size_t n = kernels_in(out);
    assert_true(n >= 20);
    free(out);
    kiln_test_kiln_expect(0, "all checksums good", "bundle verify %s", g_bundle);
    assert_int_equal(kiln_test_kiln(&out, "bundle ls %s", g_bundle), 0);
    kiln_test_has(out, "simple_fprop_bf16_bf16", "sm_90a");
    free(out);
}

/* Reproducible: the same specs packed from the cache the full pack filled
 * and from an empty one (every kernel compiled again, so compile times
 * differ) give the same bytes.  A cross-section of the specs rather than
 * all of them: each template and output kind, fp8, dbias, a sweep, and
 * both archs.  A second pack of every shipped kernel took 110 s of CI's
 * 25 minutes (250 s under the sanitizers) and runs no other code. */
static void test_pack_is_deterministic(void **state)
{
    (void)state;
    static const char specs[] =
        "specs/default/simple_fprop_bf16_bf16.yaml "
        "specs/default/simple_wgrad_bf16_f32_discrete_acc_dbias.yaml "
        "specs/default/sm90_fprop_bf16_128x256.yaml specs/default/sm90_dgrad_e4m3_block_128x256.yaml "
        "specs/default/sm90_wgrad_bf16_f32_discrete_acc_128x128_dbias.yaml "
        "specs/sweeps/wgrad_sm90_acc_rows.yaml";
    char warm[4200], again[4200], cache2[4200], *out;
    snprintf(warm, sizeof warm, "%s/warm.kbundle", g_dir);
    snprintf(again, sizeof again, "%s/again.kbundle", g_dir);
    snprintf(cache2, sizeof cache2, "%s/cache2", g_dir);
    int rc = kiln_test_kiln(&out, "pack %s --arch sm_80,sm_90a -o %s --cache-dir %s", specs, warm, g_cache);
    if (rc != 0) fail_msg("pack from the full pack's cache failed (%d):\n%s", rc, out);
    assert_true(kernels_in(out) >= 10);
    free(out);
    rc = kiln_test_kiln(&out, "pack %s --arch sm_80,sm_90a -o %s --cache-dir %s", specs, again, cache2);
    if (rc != 0) fail_msg("pack from an empty cache failed (%d):\n%s", rc, out);
    free(out);
    expect_same_bytes(warm, again, "two packs of the same specs");
}

/* The sm90 specs of specs/default (sm90_*.yaml): each is one kernel. */
static size_t count_sm90_specs(void)
{
    DIR *d = opendir("specs/default");
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        n += !strncmp(e->d_name, "sm90_", 5) && len > 5 && !strcmp(e->d_name + len - 5, ".yaml");
    }
    closedir(d);
    return n;
}

/* Several archs: the specs that do not fit one (sm90 on sm_80) are skipped
 * for it, one line each; an arch no spec fits is bad input. */
static void test_pack_multi_arch(void **state)
{
    (void)state;
    char multi[4200], *out;
    snprintf(multi, sizeof multi, "%s/multi.kbundle", g_dir);
    int rc = kiln_test_kiln(&out, "pack specs/default --arch sm_80,sm_90a -o %s --cache-dir %s",
                            multi, g_cache);
    if (rc != 0) fail_msg("multi-arch pack failed (%d):\n%s", rc, out);
    size_t skips = 0;
    for (const char *p = strstr(out, "kiln pack: skipping "); p; p = strstr(p + 1, "kiln pack: skipping ")) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(!strncmp(p + 20, "sm90_", 5));
        assert_non_null(strstr(p, " for sm_80: "));
        assert_true(strstr(p, " for sm_80: ") < nl);
        skips++;
    }
    /* every sm90 spec once, and more than a handful (a count of nothing passes nothing) */
    assert_true(skips > 40);
    assert_int_equal(skips, count_sm90_specs());
    free(out);
    assert_int_equal(kiln_test_kiln(&out, "bundle ls %s", multi), 0);
    kiln_test_has(out, " sm_80 ", " sm_90a ");
    free(out);
    rc = kiln_test_kiln(&out, "pack specs/default/sm90_fprop_bf16_128x128.yaml --arch sm_80,sm_90a "
                              "-o %s --cache-dir %s", multi, g_cache);
    if (rc != 2 || !strstr(out, "no kernel of the specs given fits sm_80"))
        fail_msg("an arch with no kernel: exit %d:\n%s", rc, out);
    free(out);
}

/* Reads a little-endian u64. */
static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A copy of the bundle whose first records are renamed (index record: name
 * at +130, 96 bytes; arch at +226, 16 bytes) and whose trailer checksum is
 * made good again, so that only the names are hostile. */
static void hostile_copy(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    kiln_error err;
    if (kiln_file_read(g_bundle, &data, &len, &err) != KILN_OK) fail_msg("%s", err.msg);
    unsigned char *b = (unsigned char *)data;
    uint64_t index = le64(b + 16);
    static const struct {
        const char *name, *arch;
    } evil[] = {
        {"../../x", NULL},
        {"/tmp/kiln-test-absolute", NULL},
        {"red\033[31m\nforged line", "sm_90a\033[2J"},
    };
    for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
        unsigned char *rec = b + index + i * 480;
        memset(rec + 130, 0, 96);
        memcpy(rec + 130, evil[i].name, strlen(evil[i].name));
        if (evil[i].arch) {
            memset(rec + 226, 0, 16);
            memcpy(rec + 226, evil[i].arch, strlen(evil[i].arch));
        }
    }
    kiln_sha256 sh;
    kiln_sha256_init(&sh);
    kiln_sha256_update(&sh, b, len - 32);
    kiln_sha256_final(&sh, b + len - 32);
    if (kiln_file_write_atomic(path, b, len, &err) != KILN_OK) fail_msg("%s", err.msg);
    free(data);
}

/* Counts the entries of a directory (not . and ..); -1 if it cannot be read. */
static int entries_in(const char *dir)
{
    char cmd[4300], *out;
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    if (kiln_test_run(cmd, &out) != 0) return -1;
    int n = atoi(out);
    free(out);
    return n;
}

/* A bundle with valid checksums and records named ../../x, an absolute path
 * and escape bytes: extract writes only names it builds itself, inside DIR,
 * and nothing raw reaches the terminal. */
static void test_extract_hostile_names(void **state)
{
    (void)state;
    char path[4200], deep[4200], dir[4300], *out;
    snprintf(path, sizeof path, "%s/hostile.kbundle", g_dir);
    snprintf(deep, sizeof deep, "%s/deep", g_dir);
    snprintf(dir, sizeof dir, "%s/a/b", deep);
    hostile_copy(path);
    unlink("/tmp/kiln-test-absolute.sm_90a.cubin");
    int rc = kiln_test_kiln(&out, "bundle extract %s %s", path, dir);
    /* The reader may refuse such names (exit 2) or extract may rename them
     * (exit 0): either way nothing lands outside DIR and no byte is raw. */
    if (rc != 0 && rc != 2) fail_msg("bundle extract: exit %d:\n%s", rc, out);
    assert_null(strchr(out, '\033'));
    assert_null(strstr(out, "\nforged line"));
    free(out);
    char a[4300];
    snprintf(a, sizeof a, "%s/a", deep);
    assert_true(entries_in(deep) <= 1); /* a/ at most */
    assert_true(entries_in(a) <= 1);    /* b/ at most */
    struct stat st;
    assert_int_not_equal(stat("/tmp/kiln-test-absolute.sm_90a.cubin", &st), 0);
    char x[4300];
    snprintf(x, sizeof x, "%s/x.sm_90a.cubin", deep);
    assert_int_not_equal(stat(x, &st), 0);
    /* ls prints the names escaped. */
    rc = kiln_test_kiln(&out, "bundle ls %s", path);
    if (rc != 0 && rc != 2) fail_msg("bundle ls: exit %d:\n%s", rc, out);
    assert_null(strchr(out, '\033'));
    assert_null(strstr(out, "\nforged line"));
    if (rc == 0) assert_non_null(strstr(out, "red\\x1b[31m\\nforged line"));
    free(out);
}

/* Copies the bundle with one change made by a shell snippet on $f. */
static void damaged_copy(const char *name, const char *snippet, char *path, size_t size)
{
    snprintf(path, size, "%s/%s.kbundle", g_dir, name);
    char cmd[9000], *out;
    snprintf(cmd, sizeof cmd, "cp %s %s && f=%s && %s", g_bundle, path, path, snippet);
    assert_int_equal(kiln_test_run(cmd, &out), 0);
    free(out);
}

static void test_damaged_bundles_refused(void **state)
{
    (void)state;
    static const struct {
        const char *name, *snippet, *reason;
    } cases[] = {
        {"truncated", "truncate -s 5000 \"$f\"", "checksum"},
        {"tiny", "truncate -s 40 \"$f\"", "truncated"},
        /* byte 3000 inverted (written as 0xff it was no change where the
         * bundle held 0xff there) */
        {"flipped",
         "b=$(od -An -tu1 -j3000 -N1 \"$f\" | tr -d ' ') && "
         "printf \"$(printf '\\\\%03o' $((b ^ 255)))\" | dd of=\"$f\" bs=1 seek=3000 conv=notrunc status=none",
         "checksum"},
        {"version", "printf '\\007' | dd of=\"$f\" bs=1 seek=8 conv=notrunc status=none",
         "format version 7"},
        {"foreign", "printf 'NOTKILN!' | dd of=\"$f\" bs=1 seek=0 conv=notrunc status=none",
         "bad magic"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4200], *out;
        damaged_copy(cases[i].name, cases[i].snippet, path, sizeof path);
        int rc = kiln_test_kiln(&out, "bundle verify %s", path);
        if (rc != 2 || !strstr(out, "refused") || !strstr(out, cases[i].reason) ||
            !strstr(out, path))
            fail_msg("%s: exit %d, output:\n%s", cases[i].name, rc, out);
        free(out);
        /* Importing it writes nothing into a cache. */
        char cache[4300];
        snprintf(cache, sizeof cache, "%s/import-%s", g_dir, cases[i].name);
        kiln_test_kiln_expect(2, NULL, "cache import %s --cache-dir %s", path, cache);
        kiln_test_kiln_expect(0, " 0 entries", "cache verify --cache-dir %s", cache);
    }
}

/* The same kernels named through another path to their spec (an absolute
 * one, as from another checkout) are the same cache entries and the same
 * bundle bytes: no path goes into a key. */
static void test_paths_do_not_change_keys(void **state)
{
    (void)state;
    char rel[4200], abs_[4200], cwd[4096], *out;
    snprintf(rel, sizeof rel, "%s/rel.kbundle", g_dir);
    snprintf(abs_, sizeof abs_, "%s/abs.kbundle", g_dir);
    assert_non_null(getcwd(cwd, sizeof cwd));
    kiln_test_kiln_expect(0, NULL, "pack specs/default --arch sm_90a -o %s --cache-dir %s", rel,
                          g_cache);
    assert_int_equal(kiln_test_kiln(&out, "compile %s/specs/default --arch sm_90a --cache-dir %s", cwd,
                          g_cache), 0);
    if (!strstr(out, " 0 compiled,")) fail_msg("absolute spec paths missed the cache:\n%s", out);
    free(out);
    kiln_test_kiln_expect(0, NULL, "pack %s/specs/default --arch sm_90a -o %s --cache-dir %s", cwd,
                          abs_, g_cache);
    expect_same_bytes(rel, abs_, "the packs through relative and absolute spec paths");
}

static void test_import_export(void **state)
{
    (void)state;
    char cache[4200], back[4200], *out;
    snprintf(cache, sizeof cache, "%s/imported", g_dir);
    snprintf(back, sizeof back, "%s/exported.kbundle", g_dir);
    assert_int_equal(kiln_test_kiln(&out, "bundle ls %s", g_bundle), 0);
    size_t n = kernels_in(out);
    free(out);
    kiln_test_kiln_expect(0, NULL, "cache import %s --cache-dir %s", g_bundle, cache);
    char want[64];
    snprintf(want, sizeof want, "%zu entries, 0 damaged", n);
    kiln_test_kiln_expect(0, want, "cache verify --cache-dir %s", cache);
    /* An imported cache serves compiles: all hits, no NVRTC. */
    kiln_test_kiln_expect(0, " 0 compiled,", "compile specs/default --arch sm_90a --cache-dir %s",
                          cache);
    /* Export it again: the same kernels, the same bytes. */
    kiln_test_kiln_expect(0, NULL, "cache export %s %s", cache, back);
    expect_same_bytes(g_bundle, back, "the bundle and its imported cache's export");
}

/* Issue 13, finding 1: the reader refuses the hostile bundle outright (bad
 * input, exit 2), naming the first hostile record, and writes nothing. */
static void test_hostile_names_refused_on_read(void **state)
{
    (void)state;
    char path[4200], dir[4300], *out;
    snprintf(path, sizeof path, "%s/hostile2.kbundle", g_dir);
    snprintf(dir, sizeof dir, "%s/refused", g_dir);
    hostile_copy(path);
    int rc = kiln_test_kiln(&out, "bundle extract %s %s", path, dir);
    if (rc != 2 || !strstr(out, "index record 0") || !strstr(out, "not a kernel name"))
        fail_msg("bundle extract: exit %d:\n%s", rc, out);
    free(out);
    assert_true(entries_in(dir) <= 0);
    rc = kiln_test_kiln(&out, "bundle ls %s", path);
    if (rc != 2 || !strstr(out, "index record 0")) fail_msg("bundle ls: exit %d:\n%s", rc, out);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_all_shipped_specs),
        cmocka_unit_test(test_pack_is_deterministic),
        cmocka_unit_test(test_pack_multi_arch),
        cmocka_unit_test(test_extract_hostile_names),
        cmocka_unit_test(test_damaged_bundles_refused),
        cmocka_unit_test(test_paths_do_not_change_keys),
        cmocka_unit_test(test_import_export),
        cmocka_unit_test(test_hostile_names_refused_on_read),
    };
    kiln_test_filter();
    return cmocka_run_group_tests(tests, setup, teardown);
}
