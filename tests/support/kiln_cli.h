/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_cli.h — one `kiln` run and what it must say, for the CLI tests. */
#ifndef KILN_TEST_CLI_H
#define KILN_TEST_CLI_H

/* Runs `kiln ARGS` (ARGS formatted like printf): it must exit with want_rc
 * and, unless needle is NULL, its output (stdout and stderr) must hold
 * needle.  A miss names the arguments, the exit code and the output.  The
 * tests' most common run: exit code, one string, output freed. */
void kiln_test_kiln_expect(int want_rc, const char *needle, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
