/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.h — helpers shared by the tests. */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* Makes a fresh empty directory under $TMPDIR (or /tmp); returns a malloc'd
 * path.  kiln_test_rmtree removes it. */
char *kiln_test_mkdtemp(const char *tag);
void kiln_test_rmtree(const char *path);
/* cmocka fixture: a fresh empty directory (named after the test program) in
 * *state for the test, removed after it, passed or failed.  Register with
 * kiln_test_with_dir(test); the test reads `const char *dir = *state;`. */
int kiln_test_dir_setup(void **state);
int kiln_test_dir_teardown(void **state);
#define kiln_test_with_dir(f) cmocka_unit_test_setup_teardown(f, kiln_test_dir_setup, kiln_test_dir_teardown)
/* The same, with $TMPDIR pointing at the directory during the test (and
 * restored after): for code that writes under $TMPDIR. */
int kiln_test_tmpdir_setup(void **state);
int kiln_test_tmpdir_teardown(void **state);
#define kiln_test_with_tmpdir(f)                                                                   \
    cmocka_unit_test_setup_teardown(f, kiln_test_tmpdir_setup, kiln_test_tmpdir_teardown)
/* Makes dir/name (a directory) into out[size]; asserts on failure. */
void kiln_test_subdir(const char *dir, const char *name, char *out, size_t size);
/* Writes a file (asserts on failure). */
void kiln_test_write_file(const char *path, const char *text);
/* Runs a shell command, captures stdout+stderr into *output (malloc'd),
 * returns the exit code. */
int kiln_test_run(const char *cmd, char **output);
/* The kernel cache the build's bundle was packed with, where every shipped
 * spec (sweeps included) has just been compiled: $KILN_TEST_PACK_CACHE
 * (scripts/sanitize.sh: the plain build's, its own build packs nothing),
 * else $KILN_TEST_BUILD_DIR/pack-cache.  Into out[size]; NULL where there
 * is none (a build without the bundle).  Tests that would compile shipped
 * kernels again start from it; compiling stays tested by the bundle's
 * build, which fails on any kernel that does not compile. */
const char *kiln_test_pack_cache(char *out, size_t size);
/* Copies kiln_test_pack_cache's folder to dest (which must not exist), so
 * that the build's is left as it was: 1 copied, 0 no pack cache, -1 the copy
 * failed. */
int kiln_test_seed_cache(const char *dest);
/* Path of the `kiln` binary under test ($KILN_BIN, set by ctest). */
const char *kiln_test_kiln_bin(void);
/* Runs `kiln ARGS` (ARGS formatted like printf), stdout and stderr into
 * *output (malloc'd); returns the exit code. */
int kiln_test_kiln(char **output, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same run checked: it must exit with want_rc and, unless needle is
 * NULL, its output must hold needle; a miss names the arguments, the exit
 * code and the output (the CLI tests' most common run). */
void kiln_test_kiln_expect(int want_rc, const char *needle, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Asserts that text contains each of the strings after it, in any order:
 * kiln_test_has(out, "a", "b") stands for assert_non_null(strstr(out, "a"))
 * and the same for "b"; a miss names the string, the text and the caller's
 * line. */
#define kiln_test_has(text, ...)                                                                   \
    kiln_test_has_all(__FILE__, __LINE__, (text), (const char *const[]){__VA_ARGS__, NULL})
void kiln_test_has_all(const char *file, int line, const char *text, const char *const *needles);

/* KILN_TEST_FILTER=PATTERN: the next cmocka_run_group_tests runs only the
 * tests whose names match (cmocka's * and ? wildcards; e.g. one GPU test in
 * a device call).  Returns the pattern, or NULL when none is set. */
const char *kiln_test_filter(void);

/* The main of a test program that runs one group of tests, no group
 * fixtures: KILN_TEST_MAIN(cmocka_unit_test(a), kiln_test_with_dir(b), ...).
 * Every CPU test program's main was these same lines. */
#define KILN_TEST_MAIN(...)                                                                        \
    int main(void)                                                                                 \
    {                                                                                              \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        kiln_test_filter();                                                                        \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif
