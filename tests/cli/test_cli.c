/* SPDX-License-Identifier: Apache-2.0 */
/* test_cli.c — the `kiln` command end to end: exit codes, one-line errors,
 * nothing cached from a bad spec, cache hits on a second compile, emit,
 * cache ls/verify/clear, and a failing compile. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common.h"

static const char *GOOD = "specs/default/simple_fprop_bf16_bf16.yaml";

/* Counts regular files below dir (recursively). */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR) n += count_files(p);
        else n++;
    }
    closedir(d);
    return n;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_version_and_help(void **state)
{
    (void)state;
    char *out;
    kiln_test_kiln_expect(0, KILN_VERSION_STRING, "--version");
    /* kiln --help lists every subcommand; each has its own --help, exit 0. */
    static const char *const commands[] = {"emit", "compile", "cache", "pack",
                                           "bundle", "catalog", "tune"};
    assert_int_equal(kiln_test_kiln(&out, "--help"), 0);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\n  %s ", commands[i]);
        if (!strstr(out, want)) fail_msg("kiln --help does not list %s:\n%s", commands[i], out);
    }
    free(out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: kiln %s ", commands[i]);
        int rc = kiln_test_kiln(&out, "%s --help", commands[i]);
        if (rc != 0 || strncmp(out, want, strlen(want)) || !strstr(out, "Exit"))
            fail_msg("kiln %s --help: exit %d:\n%s", commands[i], rc, out);
        free(out);
        /* An option of another subcommand is refused, naming this one's help. */
        snprintf(want, sizeof want, "see kiln %s --help", commands[i]);
        rc = kiln_test_kiln(&out, "%s --no-such-option", commands[i]);
        if (rc != 2 || !strstr(out, want)) fail_msg("kiln %s --no-such-option: exit %d:\n%s",
                                                    commands[i], rc, out);
        free(out);
    }
    kiln_test_kiln_expect(2, "unknown command 'frobnicate'", "frobnicate");
    kiln_test_kiln_expect(2, "unknown option '--bogus'", "compile --bogus x");
    kiln_test_kiln_expect(2, NULL, "compile -j 0 %s", GOOD);
}

static void test_bad_spec_exits_2_and_caches_nothing(void **state)
{
    const char *dir = *state;
    char spec[4096], cache[4096];
    snprintf(spec, sizeof spec, "%s/bad.yaml", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    kiln_test_write_file(spec, "kernel: k\n"
                               "op: fprop\n"
                               "family: sm90\n"
                               "types: {a: bf16, b: bf16, out: bf16, accum: f32}\n"
                               "tile: {m: 100, n: 128, k: 64}\n");
    char *out;
    /* The good spec comes first: a bad spec anywhere means nothing is built. */
    assert_int_equal(kiln_test_kiln(&out, "compile --cache-dir %s %s %s", cache, GOOD, spec), 2);
    assert_int_equal(count_lines(out), 1);
    char want[4200];
    snprintf(want, sizeof want, "%s:5:", spec);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "tile.m"));
    assert_null(strstr(out, "traceback"));
    free(out);
    assert_int_equal(count_files(cache), 0);
}

static void test_compile_twice_hits_cache(void **state)
{
    const char *dir = *state;
    char *out;
    kiln_test_kiln_expect(0, "1 compiled, 0 from cache, 0 failed",
                          "compile --arch sm_90a --cache-dir %s %s", dir, GOOD);
    kiln_test_kiln_expect(0, "0 compiled, 1 from cache, 0 failed",
                          "compile --arch sm_90a --cache-dir %s %s", dir, GOOD);
    /* JSON for machines. */
    assert_int_equal(kiln_test_kiln(&out, "compile --json --arch sm_90a --cache-dir %s %s", dir, GOOD), 0);
    kiln_test_has(out, "\"origin\": \"cache\"", "\"registers\": ");
    free(out);
    /* ls shows it; verify passes; a flipped byte is found; clear empties. */
    kiln_test_kiln_expect(0, "simple_fprop_bf16_bf16", "cache ls --cache-dir %s", dir);
    kiln_test_kiln_expect(0, "1 entries, 0 damaged", "cache verify --cache-dir %s", dir);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "f=$(find %s -name '*.kbin' | head -1); "
             "printf '\\377' | dd of=\"$f\" bs=1 seek=200 conv=notrunc status=none", dir);
    assert_int_equal(kiln_test_run(cmd, NULL), 0);
    kiln_test_kiln_expect(1, "1 damaged", "cache verify --cache-dir %s", dir);
    /* The damaged entry is rebuilt, not loaded. */
    kiln_test_kiln_expect(0, "1 compiled, 0 from cache", "compile --arch sm_90a --cache-dir %s %s",
                          dir, GOOD);
    kiln_test_kiln_expect(0, "removed 1", "cache clear --cache-dir %s", dir);
    kiln_test_kiln_expect(0, "0 entries", "cache verify --cache-dir %s", dir);
}

/* compile --json names every sweep point validation dropped, with why. */
static void test_compile_json_lists_dropped_points(void **state)
{
    (void)state;
    char *dir = kiln_test_mkdtemp("cli-json");
    char *out;
    int rc = kiln_test_kiln(&out, "compile --json --arch sm_90a --cache-dir %s "
                                  "tests/data/tune/sweep.yaml", dir);
    if (rc != 0) fail_msg("compile --json: exit %d:\n%s", rc, out);
    const char *d = strstr(out, "\"dropped\": [");
    if (!d) fail_msg("no dropped list:\n%s", out);
    size_t n = 0;
    for (const char *p = strstr(d, "\"reason\": "); p; p = strstr(p + 1, "\"reason\": ")) {
        assert_non_null(strstr(p, "tile.m must be"));
        n++;
    }
    assert_int_equal(n, 2); /* tile.m 256 with each of two tile.k */
    kiln_test_has(d, "tswp__m256_k8", "tswp__m256_k16");
    free(out);
    kiln_test_rmtree(dir);
    free(dir);
}

static void test_emit(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(kiln_test_kiln(&out, "emit --arch sm_90a %s", GOOD), 0);
    assert_int_equal(strncmp(out, "// generated by kiln from ", 26), 0);
    kiln_test_has(out, "simple_fprop_bf16_bf16.yaml", "__global__");
    free(out);
    kiln_test_kiln_expect(2, "no kernel named 'nosuch'", "emit --kernel nosuch %s", GOOD);
}

static void test_compile_failure_exits_1(void **state)
{
    (void)state;
    /* An override template that returns source NVRTC rejects. */
    const char *dir = *state;
    char tpl[4096], cache[4096];
    snprintf(tpl, sizeof tpl, "%s/simple.lua", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    kiln_test_write_file(tpl, "local spec, arch = ...\n"
                              "return 'extern \\\"C\\\" __global__ void k() { this is not CUDA; }',\n"
                              "  {entry = 'k', threads = 128, smem = 0,\n"
                              "  persistent = true, ctas_per_sm = 1}\n");
    char *out;
    int rc = kiln_test_kiln(&out, "compile --template-dir %s --arch sm_90a --cache-dir %s %s", dir, cache,
                 GOOD);
    assert_int_equal(rc, 1);
    kiln_test_has(out, "simple_fprop_bf16_bf16", "FAILED", "source saved to");
    free(out);
}

/* --template-dir's templates also decide which sweep points are dropped and
 * which specs are refused: an override that builds no 64-row tile drops that
 * point of a sweep the built-in template would take whole. */
static void test_template_dir_drops_sweep_points(void **state)
{
    const char *dir = *state;
    char tpl[4096], spec[4096], cache[4096];
    snprintf(tpl, sizeof tpl, "%s/simple.lua", dir);
    snprintf(spec, sizeof spec, "%s/sweep.yaml", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    kiln_test_write_file(tpl, "local spec, arch, mode = ...\n"
                              "if spec.tile.m == 64 then kiln.refuse('tile.m', 'no 64-row tiles here', 2) end\n"
                              "if mode == 'check' then return {smem = 0} end\n"
                              "return 'extern \\\"C\\\" __global__ void k() {}',\n"
                              "  {entry = 'k', threads = 128, smem = 0,\n"
                              "  persistent = true, ctas_per_sm = 1}\n");
    kiln_test_write_file(spec, "kernel: swept\nop: fprop\narch: [sm_90a]\nfamily: simple\n"
                               "types: {a: bf16, b: bf16, out: bf16, accum: f32}\nstages: 2\n"
                               "sweep:\n  tile: [{m: 64, n: 64, k: 16}, {m: 32, n: 64, k: 16}]\n");
    char *out;
    int rc = kiln_test_kiln(&out, "compile --template-dir %s --cache-dir %s %s", dir, cache, spec);
    assert_int_equal(rc, 0);
    kiln_test_has(out, "swept__m32_n64_k16", "1 kernels: 1 compiled", "1 sweep points dropped");
    free(out);
    rc = kiln_test_kiln(&out, "compile --template-dir %s --cache-dir %s %s", dir, cache, GOOD);
    assert_int_equal(rc, 2);
    kiln_test_has(out, "simple_fprop_bf16_bf16.yaml:", "no 64-row tiles here");
    free(out);
}

static void test_catalog(void **state)
{
    const char *dir = *state;
    char path[4096];
    snprintf(path, sizeof path, "%s/cat.c", dir);
    kiln_test_kiln_expect(0, NULL, "catalog -o %s --arch sm_90a %s", path, GOOD);
    char *text;
    size_t n;
    assert_int_equal(kiln_file_read(path, &text, &n, NULL), KILN_OK);
    kiln_test_has(text, "kiln_catalog_count = 1;", "name=simple_fprop_bf16_bf16 op=fprop",
                  "entry=");
    free(text);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_version_and_help),
    kiln_test_with_dir(test_bad_spec_exits_2_and_caches_nothing),
    kiln_test_with_dir(test_template_dir_drops_sweep_points),
    kiln_test_with_dir(test_compile_twice_hits_cache),
    cmocka_unit_test(test_compile_json_lists_dropped_points),
    cmocka_unit_test(test_emit),
    kiln_test_with_dir(test_compile_failure_exits_1),
    kiln_test_with_dir(test_catalog))
