/* SPDX-License-Identifier: Apache-2.0 */
/* shipped_specs.h — the specs under a folder as `kiln pack --arch sm_90a`
 * loads them (cli's spec loading), and the expander it expands them with;
 * for tests that link kiln_cli_base (test_catalog, test_wgmma_serial). */
#ifndef KILN_TEST_SHIPPED_SPECS_H
#define KILN_TEST_SHIPPED_SPECS_H

#include <string.h>

#include "testutil.h"
#include "cli.h"
#include "expand.h"

static inline kiln_expander *kts_load_shipped(const char *dir, kiln_spec_set *set)
{
    char *paths[] = {(char *)dir};
    kiln_cli_options o;
    memset(&o, 0, sizeof o);
    o.arch_list = "sm_90a";
    assert_int_equal(kiln_spec_set_load(set, &o, 1, paths, 0), KILN_EXIT_OK);
    kiln_expander *ex = NULL;
    kiln_error err;
    kiln_error_clear(&err);
    if (kiln_cli_expander(&o, &ex, &err) != KILN_OK) fail_msg("%s", err.msg);
    return ex;
}

#endif
