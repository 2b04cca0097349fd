/* SPDX-License-Identifier: Apache-2.0 */
/* kiln_cli.c — one `kiln` run and what it must say, for the CLI tests. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_cli.h"
#include "testutil.h"

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
