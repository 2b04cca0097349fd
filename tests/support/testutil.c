/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.c — helpers shared by the tests. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"
#include "common.h"

char *kiln_test_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/kiln-test-%s-XXXXXX", base, tag);
    char *p = mkdtemp(buf);
    assert_non_null(p);
    return strdup(p);
}

void kiln_test_rmtree(const char *path)
{
    if (!path || !*path || strcmp(path, "/") == 0) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    int rc = system(cmd);
    (void)rc;
}

int kiln_test_dir_setup(void **state)
{
    /* The program's name tells whose leftovers a directory is, should a
     * test be killed before its teardown. */
    *state = kiln_test_mkdtemp(program_invocation_short_name);
    return 0;
}

int kiln_test_dir_teardown(void **state)
{
    kiln_test_rmtree(*state);
    free(*state);
    *state = NULL;
    return 0;
}

static char *g_saved_tmpdir; /* $TMPDIR before kiln_test_tmpdir_setup */
static int g_had_tmpdir;

int kiln_test_tmpdir_setup(void **state)
{
    kiln_test_dir_setup(state);
    const char *old = getenv("TMPDIR");
    g_had_tmpdir = old != NULL;
    g_saved_tmpdir = old ? strdup(old) : NULL;
    setenv("TMPDIR", *state, 1);
    return 0;
}

int kiln_test_tmpdir_teardown(void **state)
{
    if (g_had_tmpdir) setenv("TMPDIR", g_saved_tmpdir, 1);
    else unsetenv("TMPDIR");
    free(g_saved_tmpdir);
    g_saved_tmpdir = NULL;
    return kiln_test_dir_teardown(state);
}

void kiln_test_subdir(const char *dir, const char *name, char *out, size_t size)
{
    assert_true((size_t)snprintf(out, size, "%s/%s", dir, name) < size);
    if (mkdir(out, 0755) != 0) fail_msg("mkdir %s: %s", out, strerror(errno));
}

void kiln_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

int kiln_test_run(const char *cmd, char **output)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) kiln_strbuf_append(&sb, buf, n);
    int st = pclose(p);
    if (output) *output = kiln_strbuf_take(&sb);
    else kiln_strbuf_free(&sb);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int kiln_test_kiln(char **output, const char *fmt, ...)
{
    char cmd[8192];
    int n = snprintf(cmd, sizeof cmd, "%s ", kiln_test_kiln_bin());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    return kiln_test_run(cmd, output);
}

void kiln_test_kiln_expect(int want_rc, const char *needle, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *out = NULL;
    int rc = kiln_test_kiln(&out, "%s", args);
    if (rc != want_rc || (needle && !strstr(out, needle)))
        fail_msg("kiln %s: exit %d (expected %d%s%s%s), output:\n%s", args, rc, want_rc,
                 needle ? " and '" : "", needle ? needle : "", needle ? "'" : "", out);
    free(out);
}

const char *kiln_test_filter(void)
{
    const char *only = getenv("KILN_TEST_FILTER");
    if (!only || !*only) return NULL;
    cmocka_set_test_filter(only);
    return only;
}

const char *kiln_test_pack_cache(char *out, size_t size)
{
    const char *seed = getenv("KILN_TEST_PACK_CACHE");
    const char *build = getenv("KILN_TEST_BUILD_DIR");
    if (seed && *seed) snprintf(out, size, "%s", seed);
    else if (build && *build) snprintf(out, size, "%s/pack-cache", build);
    else return NULL;
    struct stat st;
    return stat(out, &st) == 0 && S_ISDIR(st.st_mode) ? out : NULL;
}

int kiln_test_seed_cache(const char *dest)
{
    char seed[4200], cmd[9000];
    if (!kiln_test_pack_cache(seed, sizeof seed)) return 0;
    snprintf(cmd, sizeof cmd, "cp -R '%s' '%s'", seed, dest);
    char *out = NULL;
    int rc = kiln_test_run(cmd, &out);
    free(out);
    return rc == 0 ? 1 : -1;
}

const char *kiln_test_kiln_bin(void)
{
    const char *b = getenv("KILN_BIN");
    return b && *b ? b : "build/kiln";
}

void kiln_test_has_all(const char *file, int line, const char *text, const char *const *needles)
{
    for (; *needles; needles++)
        if (!text || !strstr(text, *needles))
            fail_msg("%s:%d: '%s' is not in:\n%s", file, line, *needles, text ? text : "(null)");
}
