/* SPDX-License-Identifier: Apache-2.0 */
/* test_wgmma_serial.c — no shipped sm90 kernel makes ptxas serialise its
 * wgmma.  ptxas reports it with a C75xx advisory (C7519: a warpgroup.arrive
 * injected, C7520: wgmma serialised, ...): the code still runs, only
 * slower, so nothing else would catch it.  One such case cost every wgrad
 * kernel 4-9% (the commit placed after the branches of a k-block's
 * sequences; docs/sm90_wgrad.md).  Every sm_90a kernel of specs/default is
 * expanded and compiled with NVRTC; none may have a C75xx line in its
 * ptxas log.  No GPU needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "shipped_specs.h"
#include "nvrtc.h"

static void test_no_serialised_wgmma(void **state)
{
    (void)state;
    kiln_spec_set set;
    kiln_expander *ex = kts_load_shipped("specs/default", &set);
    kiln_error err;
    kiln_error_clear(&err);
    int checked = 0;
    for (size_t i = 0; i < set.n_jobs; i++) {
        const kiln_job *j = &set.jobs[i];
        if (strcmp(j->spec->desc.family, "sm90") != 0) continue;
        char *src = NULL;
        kiln_launch_desc launch;
        if (kiln_expand(ex, j->spec, j->arch, &src, &launch, &err) != KILN_OK) fail_msg("%s", err.msg);
        kiln_compile_result r;
        if (kiln_nvrtc_compile(src, j->spec->desc.name, j->arch, NULL, &r, &err) != KILN_OK)
            fail_msg("%s: %s", j->spec->desc.name, err.msg);
        const char *adv = r.log ? strstr(r.log, "(C75") : NULL;
        if (adv) {
            const char *eol = strchr(adv, '\n');
            fail_msg("%s: ptxas serialises its wgmma: %.*s", j->spec->desc.name,
                     (int)(eol ? eol - adv : (long)strlen(adv)), adv);
        }
        kiln_compile_result_free(&r);
        free(src);
        checked++;
    }
    printf("%d sm90 kernels, no C75xx advisory\n", checked);
    assert_true(checked >= 20);
    kiln_expander_destroy(ex);
    kiln_spec_set_free(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_serialised_wgmma)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
